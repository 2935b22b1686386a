// Package listenconf applies the listener keys a broker and a name server
// share (RocketMQ's NettyServerConfig keys and rocketkv's PROXY protocol
// keys) to a Remoting server's configuration. TLS, which needs files and
// certificates, is internal/tlsconf's.
package listenconf

import (
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/remoting"
)

// Apply sets cfg's idle timeout, socket buffers, write buffer water marks
// graceful shutdown wait and PROXY protocol policy from the listener
// settings l and p.
func Apply(cfg *remoting.ServerConfig, l configs.Listener, p configs.ProxyProtocol) {
	cfg.IdleTimeout = l.IdleTimeout()
	cfg.SocketSendBuffer, cfg.SocketRecvBuffer = l.SendBuffer, l.RecvBuffer
	cfg.WriteBufferHighWaterMark, cfg.WriteBufferLowWaterMark = l.WriteBufferHighWaterMark, l.WriteBufferLowWaterMark
	cfg.GoAwayWait = l.GoAwayWait()
	cfg.ProxyProtocol = ProxyProtocol(p)
}

// ProxyProtocol is the PROXY protocol policy the keys p say (the gRPC
// proxy's listener takes it as the Remoting servers do).
func ProxyProtocol(p configs.ProxyProtocol) remoting.ProxyProtocol {
	return remoting.ProxyProtocol{Disabled: !p.Enable, Trusted: p.TrustedNetworks}
}
