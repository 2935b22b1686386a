package broker

import (
	"context"
	"fmt"
	"net"

	"github.com/rocketkv/rocketkv/remoting"
)

// The fast channel (RocketMQ's "VIP channel"): RocketMQ's broker also
// serves listenPort-2, where clients with vipChannelEnabled (the default
// of Java clients before 4.5) send, and where an Apache RocketMQ slave asks
// its master for the topic table. It answers everything but the reads
// that may be held (pulls and POP), which RocketMQ registers on the main
// port only.
var fastChannelRefuses = map[int32]bool{
	remoting.PullMessage: true, remoting.LitePullMessage: true, remoting.PopMessage: true,
	remoting.PeekMessage: true, remoting.Notification: true, remoting.PollingInfo: true,
}

// fastChannelHandler answers the codes the fast channel does not serve
// REQUEST_CODE_NOT_SUPPORTED, as RocketMQ's default processor there does.
type fastChannelHandler struct{ next remoting.Handler }

// ServeCommand implements remoting.Handler.
func (h fastChannelHandler) ServeCommand(ctx context.Context, conn *remoting.Conn, req *remoting.Command) {
	if fastChannelRefuses[req.Code] {
		if !req.IsOneway() {
			_ = conn.Reply(req, remoting.NotSupportedResponse(req))
		}
		return
	}
	h.next.ServeCommand(ctx, conn, req)
}

// fastListenPort is the fast channel's port: fastListenPort, else
// listenPort-2 (any free port when listenPort is 0 or too small, as
// RocketMQ); -1 when it is off.
func (b *Broker) fastListenPort() int {
	switch p := b.cfg.FastListenPort; {
	case p < 0:
		return -1
	case p > 0:
		return p
	}
	return max(b.cfg.ListenPort-2, 0)
}

// startFastChannel serves handler on the fast channel's port.
func (b *Broker) startFastChannel(ctx context.Context, handler remoting.Handler, cfg remoting.ServerConfig) error {
	port := b.fastListenPort()
	if port < 0 {
		return nil
	}
	cfg.Addr = b.cfg.ListenAddr(port)
	b.fastServer = remoting.NewServer(cfg, fastChannelHandler{next: handler}, b.component("remoting-fast"))
	if err := b.fastServer.Start(ctx); err != nil {
		b.fastServer = nil
		return fmt.Errorf("listen on the fast channel's port %d (listenPort-2, fastListenPort): %w", port, err)
	}
	return nil
}

// FastAddr returns the fast channel's bound address, or nil when it is
// off.
func (b *Broker) FastAddr() net.Addr {
	if b.fastServer == nil {
		return nil
	}
	return b.fastServer.Addr()
}
