package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/certwatch"
	"github.com/rocketkv/rocketkv/internal/listenconf"
	"github.com/rocketkv/rocketkv/internal/tlsconf"
	"github.com/rocketkv/rocketkv/remoting"
	"github.com/rs/zerolog"
)

// processServers are the Remoting servers of a controller-mode broker
// process: its port and its fast channel's, owned by the Supervisor from
// its Start to its Shutdown, whichever Broker runs behind them. RocketMQ
// keeps one BrokerController, and so its servers and every client
// connection, across a role change; a Supervisor replaces its Broker at a
// switch, and with servers of their own each switch refused connections
// while it ran and closed every client's. Behind shared servers a switch
// keeps the connections, and with them the clients' registrations (the
// next Broker takes the producer and consumer tables and the queue locks
// of the last: Broker.inheritClients).
//
// Between two Brokers (and before the first, while the controller has
// not given the broker a role) requests are answered
// SERVICE_NOT_AVAILABLE, RocketMQ's answer of a store that takes no
// messages (a slave's, one shutting down), which both RocketMQ's Java
// and Go producers retry at another queue (SYSTEM_BUSY would be retried
// by the Java client only), and oneway requests are dropped.
type processServers struct {
	main *remoting.Server
	fast *remoting.Server // nil when fastListenPort is -1
	gate handlerGate
	// tlsWatch reloads the servers' TLS when its files change (nil
	// without TLS files); the Supervisor runs it.
	tlsWatch *certwatch.Watcher
	// answered is the running Broker's rpc latency hook (nil without
	// metrics or without a Broker).
	answered atomic.Pointer[func(remoting.Answer)]
}

// newProcessServers builds the servers of cfg's ports as a Broker of cfg
// would (TLS, listener settings, the fast channel), serving their gate.
func newProcessServers(cfg configs.Broker, root zerolog.Logger) (*processServers, error) {
	log := root.With().Str("component", "broker").Logger()
	mode, tlsConfig, watch, err := tlsconf.WatchedListener("broker", cfg.TLS, log)
	if err != nil {
		return nil, err
	}
	p := &processServers{tlsWatch: watch}
	p.gate.log = log
	scfg := remoting.ServerConfig{Addr: cfg.ListenAddr(cfg.ListenPort), TLSMode: mode, TLS: tlsConfig, OnAnswer: p.onAnswer}
	listenconf.Apply(&scfg, cfg.Listener, cfg.ProxyProtocol)
	p.main = remoting.NewServer(scfg, &p.gate, root.With().Str("component", "remoting").Logger())
	if port := fastListenPortOf(cfg); port >= 0 {
		fcfg := scfg
		fcfg.Addr = cfg.ListenAddr(port)
		p.fast = remoting.NewServer(fcfg, fastChannelHandler{next: &p.gate}, root.With().Str("component", "remoting-fast").Logger())
	}
	return p, nil
}

// start listens on both ports.
func (p *processServers) start(ctx context.Context, listenPort, fastPort int) error {
	if err := p.main.Start(ctx); err != nil {
		return fmt.Errorf("listen on port %d: %w", listenPort, err)
	}
	if p.fast != nil {
		if err := p.fast.Start(ctx); err != nil {
			_ = p.main.Shutdown(context.Background())
			return fmt.Errorf("listen on the fast channel's port %d (listenPort-2, fastListenPort): %w", fastPort, err)
		}
	}
	return nil
}

// onAnswer hands an answer to the running Broker's metrics.
func (p *processServers) onAnswer(a remoting.Answer) {
	if fn := p.answered.Load(); fn != nil {
		(*fn)(a)
	}
}

// shutdown closes every connection and stops both servers.
func (p *processServers) shutdown(ctx context.Context) error {
	var errs []error
	for _, s := range []*remoting.Server{p.main, p.fast} {
		if s != nil {
			if err := s.Shutdown(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// switchingRemark is the remark of the SERVICE_NOT_AVAILABLE answer
// given while no Broker serves the process's ports.
const switchingRemark = "[SWITCHING] the broker is taking the role the controller gave it; try again"

// handlerGate is the Handler of shared servers: it serves each request
// with the handler attached last, and lets the one who detaches it wait
// until no request it took is still being served.
type handlerGate struct {
	cur atomic.Pointer[gatedHandler]
	log zerolog.Logger
}

// gatedHandler is one attachment of a handler to a gate.
type gatedHandler struct {
	h        remoting.Handler
	closed   atomic.Bool
	inflight atomic.Int64
	drained  chan struct{}
	once     sync.Once
}

// attach makes h serve the gate's requests from now on and returns the
// attachment, which detach ends.
func (g *handlerGate) attach(h remoting.Handler) *gatedHandler {
	a := &gatedHandler{h: h, drained: make(chan struct{})}
	g.cur.Store(a)
	return a
}

// ServeCommand implements remoting.Handler.
func (g *handlerGate) ServeCommand(ctx context.Context, conn *remoting.Conn, req *remoting.Command) {
	if a := g.cur.Load(); a != nil && a.enter() {
		defer a.leave()
		a.h.ServeCommand(ctx, conn, req)
		return
	}
	if req.IsOneway() {
		return
	}
	g.log.Debug().Stringer("conn", conn).Int32("code", req.Code).Msg("no broker serves yet: answered SERVICE_NOT_AVAILABLE")
	_ = conn.Reply(req, remoting.NewResponse(req, remoting.ServiceNotAvailable, switchingRemark))
}

// enter counts a request in, unless the attachment was detached.
func (a *gatedHandler) enter() bool {
	a.inflight.Add(1)
	if a.closed.Load() {
		a.leave()
		return false
	}
	return true
}

// leave counts a request out.
func (a *gatedHandler) leave() {
	if a.inflight.Add(-1) == 0 && a.closed.Load() {
		a.once.Do(func() { close(a.drained) })
	}
}

// detach takes a off g (requests from now on are answered
// SERVICE_NOT_AVAILABLE until the next attach) and waits until every
// request a took has returned, or ctx ends (its error).
func (g *handlerGate) detach(ctx context.Context, a *gatedHandler) error {
	a.closed.Store(true)
	g.cur.CompareAndSwap(a, nil)
	if a.inflight.Load() == 0 {
		a.once.Do(func() { close(a.drained) })
	}
	select {
	case <-a.drained:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the request handlers of the stopping broker: %w", ctx.Err())
	}
}
