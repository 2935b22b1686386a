package broker

import (
	"context"
	"fmt"
	"net"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/remoting"
)

// The fast channel (RocketMQ's "VIP channel"): RocketMQ's broker also
// serves listenPort-2, where clients with vipChannelEnabled (the default
// of Java clients before 4.5) send, and where an Apache RocketMQ slave asks
// its master for the topic table, the timer checkpoint and the timer
// metrics (see fastPortMismatch). It answers everything but the reads
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
func (b *Broker) fastListenPort() int { return fastListenPortOf(b.cfg) }

// fastListenPortOf is Broker.fastListenPort for cfg.
func fastListenPortOf(cfg configs.Broker) int {
	switch p := cfg.FastListenPort; {
	case p < 0:
		return -1
	case p > 0:
		return p
	}
	return max(cfg.ListenPort-2, 0)
}

// fastPortMismatch says why an Apache RocketMQ slave of a master whose
// Remoting port is listenPort and fast channel fastPort (-1: off) could
// not copy the master's topic table, timer checkpoint and timer metrics,
// or "" when it could. RocketMQ 5.3's BrokerOuterAPI sends those three
// requests (GET_ALL_TOPIC_CONFIG, GET_TIMER_CHECK_POINT,
// GET_TIMER_METRICS) to the master's registered port minus 2
// (MixAll.brokerVIPChannel(true, ...), whatever vipChannelEnabled says),
// its other syncs to the registered port, and does not fall back to it:
// each of the three fails, logged, at every sync. A listenPort of 2 or
// less (0: picked at start) names no such port and is not judged.
// rocketkv's slave asks all its syncs on the registered port, which an
// Apache RocketMQ master answers as it answers its fast port (the same
// admin processor serves both), so none of this concerns it.
func fastPortMismatch(listenPort, fastPort int) string {
	if listenPort <= 2 || fastPort == listenPort-2 {
		return ""
	}
	if fastPort < 0 {
		return fmt.Sprintf("fastListenPort=-1: an Apache RocketMQ slave of this master asks listenPort-2 (%d) for the topic table, the timer checkpoint and the timer metrics, and copies none of them", listenPort-2)
	}
	return fmt.Sprintf("fastListenPort=%d: an Apache RocketMQ slave of this master asks listenPort-2 (%d), where this master does not listen, for the topic table, the timer checkpoint and the timer metrics, and copies none of them", fastPort, listenPort-2)
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
