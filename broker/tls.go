package broker

import (
	"crypto/tls"

	"github.com/rocketkv/rocketkv/internal/tlsconf"
	"github.com/rocketkv/rocketkv/remoting"
)

// listenerTLS builds the listener's TLS from RocketMQ's tls.* keys.
func (b *Broker) listenerTLS() (remoting.TLSMode, *tls.Config, error) {
	mode, cfg, err := tlsconf.Listener("broker", b.cfg.TLS, b.log)
	if err == nil && b.cfg.DialNamesrvTLS() {
		b.log.Info().Msg("registering with the name servers over TLS")
	}
	return mode, cfg, err
}

// namesrvClientTLS is the TLS of the connections to the name servers (nil:
// plaintext): tls.enable. As RocketMQ's client without
// tls.client.authServer, it does not verify the name server's certificate.
func (b *Broker) namesrvClientTLS() *tls.Config { return tlsconf.Client(b.cfg.DialNamesrvTLS()) }
