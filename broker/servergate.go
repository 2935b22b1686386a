package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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
// not given the broker a role) a request waits for the next Broker, up
// to a second (handlerGate); one that waits longer is answered
// SERVICE_NOT_AVAILABLE, RocketMQ's answer of a store that takes no
// messages (a slave's, one shutting down), which both RocketMQ's Java
// and Go producers retry at another queue (SYSTEM_BUSY would be retried
// by the Java client only), and a oneway one is dropped.
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
	// metrics are the Prometheus metrics and exporter the Brokers
	// share (metricsExporterType=PROM), closed with the servers.
	metrics sharedMetrics
	// ha is the HA port each master Broker's AutoSwitch server serves
	// (nil before listenHA), closed with the servers.
	ha *haPort
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

// shutdown closes every connection and stops both servers, the HA port
// and the metrics exporter.
func (p *processServers) shutdown(ctx context.Context) error {
	var errs []error
	if err := p.metrics.close(ctx); err != nil {
		errs = append(errs, err)
	}
	if p.ha != nil {
		if err := p.ha.close(); err != nil {
			errs = append(errs, err)
		}
	}
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

// Bounds of the requests a gate keeps while no handler is attached.
const (
	// defaultSwitchWait is how long a request waits for the next Broker:
	// a switch takes 40-100 ms, so a request arriving during one is
	// served by the next Broker with that much delay, as RocketMQ's
	// broker, which changes role in place, serves it; one waiting past
	// it (a Broker that failed to start, a first role the controller
	// has not given yet) is answered SERVICE_NOT_AVAILABLE well before a
	// client's 3 s timeout, so that producers retry elsewhere.
	defaultSwitchWait = time.Second
	// maxParkedRequests and maxParkedBytes bound what waits: a request
	// past either is answered SERVICE_NOT_AVAILABLE at once.
	maxParkedRequests = 10000
	maxParkedBytes    = 64 << 20
)

// handlerGate is the Handler of shared servers: it serves each request
// with the handler attached last, and lets the one who detaches it wait
// until no request it took is still being served. A request arriving
// while no handler is attached waits (without holding a server worker)
// for the next attach, up to wait, and is answered SERVICE_NOT_AVAILABLE
// past it; oneway requests that find no handler by then are dropped.
type handlerGate struct {
	cur atomic.Pointer[gatedHandler]
	log zerolog.Logger
	// wait is how long a request waits for a handler (defaultSwitchWait
	// when 0).
	wait time.Duration
	// maxRequests and maxBytes bound what waits (maxParkedRequests and
	// maxParkedBytes when 0; tests lower them).
	maxRequests, maxBytes int

	mu          sync.Mutex
	parked      []parkedRequest // arrival order
	parkedBytes int
	timer       *time.Timer // answers the parked requests past their wait
	closed      bool        // close ran: nothing waits any more
}

// parkedRequest is a request waiting for the next handler.
type parkedRequest struct {
	ctx      context.Context
	conn     *remoting.Conn
	req      *remoting.Command
	deadline time.Time
}

// gatedHandler is one attachment of a handler to a gate.
type gatedHandler struct {
	h        remoting.Handler
	closed   atomic.Bool
	inflight atomic.Int64
	drained  chan struct{}
	once     sync.Once
}

// attach makes h serve the gate's requests from now on, the ones waiting
// first (each on a goroutine of its own, in their arrival order), and
// returns the attachment, which detach ends.
func (g *handlerGate) attach(h remoting.Handler) *gatedHandler {
	a := &gatedHandler{h: h, drained: make(chan struct{})}
	g.mu.Lock()
	g.cur.Store(a)
	waiting := g.takeParkedLocked()
	g.mu.Unlock()
	if len(waiting) > 0 {
		g.log.Debug().Int("requests", len(waiting)).Msg("serving the requests that waited for the broker")
	}
	for _, p := range waiting {
		if !a.enter() {
			// Detached again before they ran: they wait for the next one.
			g.park(p)
			continue
		}
		go func() {
			defer a.leave()
			p.conn.Serve(p.req, a.h)
		}()
	}
	return a
}

// ServeCommand implements remoting.Handler.
func (g *handlerGate) ServeCommand(ctx context.Context, conn *remoting.Conn, req *remoting.Command) {
	if a := g.cur.Load(); a != nil && a.enter() {
		defer a.leave()
		a.h.ServeCommand(ctx, conn, req)
		return
	}
	g.park(parkedRequest{ctx: ctx, conn: conn, req: req, deadline: time.Now().Add(g.waitFor())})
}

// waitFor is how long a request waits for a handler.
func (g *handlerGate) waitFor() time.Duration {
	if g.wait > 0 {
		return g.wait
	}
	return defaultSwitchWait
}

// park keeps p until the next attach or its deadline; an attach that
// came meanwhile serves it at once, and a gate that is closed or full
// refuses it.
func (g *handlerGate) park(p parkedRequest) {
	g.mu.Lock()
	if a := g.cur.Load(); a != nil && a.enter() {
		g.mu.Unlock()
		defer a.leave()
		p.conn.Serve(p.req, a.h)
		return
	}
	size := len(p.req.Body)
	if g.closed || len(g.parked) >= cmp.Or(g.maxRequests, maxParkedRequests) || g.parkedBytes+size > cmp.Or(g.maxBytes, maxParkedBytes) {
		closed := g.closed
		g.mu.Unlock()
		g.refuse(p, closed)
		return
	}
	g.parked = append(g.parked, p)
	g.parkedBytes += size
	if g.timer == nil {
		g.timer = time.AfterFunc(time.Until(p.deadline), g.expire)
	}
	g.mu.Unlock()
}

// expire answers the requests whose wait ended and sets the timer for
// the next deadline.
func (g *handlerGate) expire() {
	now := time.Now()
	g.mu.Lock()
	var late []parkedRequest
	kept := g.parked[:0]
	for _, p := range g.parked {
		switch {
		case p.ctx.Err() != nil:
			g.parkedBytes -= len(p.req.Body) // its connection closed
		case !p.deadline.After(now):
			late = append(late, p)
			g.parkedBytes -= len(p.req.Body)
		default:
			kept = append(kept, p)
		}
	}
	clear(g.parked[len(kept):])
	g.parked = kept
	g.timer = nil
	if len(kept) > 0 && !g.closed {
		next := kept[0].deadline
		for _, p := range kept[1:] {
			if p.deadline.Before(next) {
				next = p.deadline // one parked again by a short attach
			}
		}
		g.timer = time.AfterFunc(time.Until(next), g.expire)
	}
	g.mu.Unlock()
	for _, p := range late {
		g.refuse(p, false)
	}
}

// close ends the waits for good (the process stops): the requests
// waiting are answered SERVICE_NOT_AVAILABLE, and so is every request
// that finds no handler from now on.
func (g *handlerGate) close() {
	g.mu.Lock()
	g.closed = true
	waiting := g.takeParkedLocked()
	g.mu.Unlock()
	for _, p := range waiting {
		g.refuse(p, true)
	}
}

// takeParkedLocked empties the waiting list, stops its timer and returns
// what waited; g.mu is held.
func (g *handlerGate) takeParkedLocked() []parkedRequest {
	waiting := g.parked
	g.parked, g.parkedBytes = nil, 0
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	return waiting
}

// refuse answers p SERVICE_NOT_AVAILABLE (a oneway request is dropped).
func (g *handlerGate) refuse(p parkedRequest, stopping bool) {
	if p.req.IsOneway() || p.ctx.Err() != nil {
		return
	}
	g.log.Debug().Stringer("conn", p.conn).Int32("code", p.req.Code).Bool("stopping", stopping).
		Msg("no broker serves: answered SERVICE_NOT_AVAILABLE")
	_ = p.conn.Reply(p.req, remoting.NewResponse(p.req, remoting.ServiceNotAvailable, switchingRemark))
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

// detach takes a off g (requests from now on wait for the next attach)
// and waits until every
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
