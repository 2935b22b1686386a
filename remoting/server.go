package remoting

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/repeatlog"
)

// Errors of the server lifecycle.
var (
	// ErrServerStarted is returned by Start on a server already started.
	ErrServerStarted = errors.New("server already started")
	// ErrServerNotStarted is returned by Shutdown before Start succeeded.
	ErrServerNotStarted = errors.New("server not started")
)

// Server defaults.
const (
	// DefaultIdleTimeout is Java's serverChannelMaxIdleTimeSeconds: a
	// connection without reads or writes for this long is closed.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultQueueSize is the default number of received frames waiting for
	// a worker (Java's send pool queue holds 10,000).
	DefaultQueueSize = 10000
	// DefaultWriteBufferHighWaterMark and DefaultWriteBufferLowWaterMark
	// are Netty's write buffer water marks, which RocketMQ keeps unless
	// both of its keys are set.
	DefaultWriteBufferHighWaterMark = 64 << 10
	DefaultWriteBufferLowWaterMark  = 32 << 10
)

// ServerConfig configures a Server. Zero values select the defaults.
type ServerConfig struct {
	// Addr is the listen address, e.g. ":10911" or "127.0.0.1:0"; a
	// "tcp://" prefix is optional.
	Addr string
	// MaxFrameSize is the largest frame accepted, length word included
	// (DefaultMaxFrameSize). A larger frame closes the connection.
	MaxFrameSize int
	// Workers is the number of goroutines running the Handler (default
	// 4 x GOMAXPROCS, at least 16).
	Workers int
	// QueueSize is how many received frames may wait for a worker
	// (DefaultQueueSize). When full, requests are answered SYSTEM_BUSY at
	// once, as Java's "[OVERLOAD]" answer, and oneway requests are dropped
	// (while the server goes away, a newer client's request is answered
	// GO_AWAY instead, as RocketMQ checks that first).
	QueueSize int
	// IdleTimeout closes connections without traffic for this long
	// (DefaultIdleTimeout); negative disables it.
	IdleTimeout time.Duration
	// EventLoops is the number of gnet event loops (default GOMAXPROCS).
	EventLoops int
	// TCPKeepAlive sets the TCP keep-alive period of accepted connections;
	// zero leaves the system default.
	TCPKeepAlive time.Duration
	// SocketSendBuffer and SocketRecvBuffer set SO_SNDBUF and SO_RCVBUF
	// of accepted connections in bytes (on the listener, whose sockets
	// inherit them); zero leaves the system's.
	SocketSendBuffer, SocketRecvBuffer int
	// TLSMode says whether connections may (TLSPermissive) or must
	// (TLSEnforcing) use TLS; the zero value, TLSDisabled, serves
	// plaintext only. TLS and plaintext share the port: the first byte of
	// a connection tells them apart.
	TLSMode TLSMode
	// TLS configures TLS connections (certificate, client authentication);
	// it is required unless TLSMode is TLSDisabled. NewServerTLSConfig
	// builds one from RocketMQ's settings. The server keeps a clone.
	TLS *tls.Config
	// TLSHandshakeTimeout bounds a TLS handshake
	// (DefaultTLSHandshakeTimeout); a handshake not done by then closes
	// the connection.
	TLSHandshakeTimeout time.Duration
	// ProxyProtocol says which connections may open with a PROXY
	// protocol header (version 1 or 2) naming the client behind a load
	// balancer; the zero value accepts one from any peer, as RocketMQ
	// does. The header comes before TLS.
	ProxyProtocol ProxyProtocol
	// WriteBufferHighWaterMark and WriteBufferLowWaterMark bound the
	// answers a connection may have waiting for its socket, in bytes
	// (RocketMQ's keys of the same names; when either is not positive,
	// Netty's 64 KiB and 32 KiB): once more than the high mark waits,
	// the server reads no more requests of the connection (plaintext or
	// TLS) until the waiting answers drain to the low mark, as RocketMQ
	// stops reading a channel that is not writable. A client that keeps
	// sending without reading is closed once 4 x MaxFrameSize of its
	// requests wait.
	WriteBufferHighWaterMark, WriteBufferLowWaterMark int
	// OnAnswer, when set, is told of every answer the server's
	// connections give a request (Conn.Reply): the broker's
	// rocketmq_rpc_latency. It runs on the goroutine that answers (a
	// worker, a long-polling re-run, the event loop for the overload
	// answer), so it must be quick and safe for concurrent use. Nil
	// costs nothing.
	OnAnswer func(Answer)
	// GoAwayWait is how long GoAway keeps the server going away before it
	// returns (RocketMQ's shutdownWaitTimeSeconds, when
	// enableShutdownGracefully is on); zero makes GoAway return at once.
	GoAwayWait time.Duration
}

// goAwayAfterVersion is the newest client version (V5_3_1) that a going
// away server still serves: RocketMQ sends GO_AWAY only to newer clients,
// whose remoting clients know to reconnect on it.
const goAwayAfterVersion = 475

// goAwayRemark is the remark of a GO_AWAY answer, RocketMQ's.
const goAwayRemark = "please go away"

func (c *ServerConfig) withDefaults() ServerConfig {
	out := *c
	if out.MaxFrameSize <= 0 {
		out.MaxFrameSize = DefaultMaxFrameSize
	}
	if out.Workers <= 0 {
		out.Workers = max(16, 4*runtime.GOMAXPROCS(0))
	}
	if out.QueueSize <= 0 {
		out.QueueSize = DefaultQueueSize
	}
	if out.IdleTimeout == 0 {
		out.IdleTimeout = DefaultIdleTimeout
	}
	if out.TLSHandshakeTimeout <= 0 {
		out.TLSHandshakeTimeout = DefaultTLSHandshakeTimeout
	}
	if out.WriteBufferHighWaterMark <= 0 || out.WriteBufferLowWaterMark <= 0 {
		out.WriteBufferHighWaterMark, out.WriteBufferLowWaterMark = DefaultWriteBufferHighWaterMark, DefaultWriteBufferLowWaterMark
	}
	out.WriteBufferLowWaterMark = min(out.WriteBufferLowWaterMark, out.WriteBufferHighWaterMark)
	if out.TLS != nil {
		out.TLS = out.TLS.Clone()
	}
	return out
}

// job is one received frame waiting for a worker, and the server clock
// when it was read.
type job struct {
	conn  *Conn
	frame []byte
	at    int64
	// cmd is frame decoded, when enqueue had to decode it.
	cmd *Command
	// away is whether the server was going away when the frame was
	// queued: RocketMQ decides on GO_AWAY as it hands a request to a
	// processor's pool, so a request queued before is served.
	away bool
}

// Server accepts Remoting connections on gnet event loops and runs the
// Handler on a bounded pool of workers.
//
// Goroutines: gnet's event loops and ticker (owned by the engine, started by
// Start, stopped by Shutdown), the workers (stop when the job queue is
// closed after the engine has stopped), two per TLS connection (a reader
// that runs the handshake, decrypts and queues frames, and a writer that
// encrypts replies; both stop when the connection closes) and one per
// closed connection running its OnClose hooks. Shutdown waits for all of
// them.
type Server struct {
	cfg   ServerConfig
	h     Handler
	log   zerolog.Logger
	epoch time.Time

	ctx    context.Context // done at Shutdown; parent of every Conn's context
	cancel context.CancelFunc

	engMu  sync.Mutex // guards eng, booted and listenFD against a concurrent stop
	eng    gnet.Engine
	booted bool
	// listenFD is a duplicate of the listener's descriptor, taken at
	// boot (gnet's own is not safe to read while the engine stops), for
	// stopEngine to shut the listener down with; -1 when there is none.
	listenFD int
	addr     net.Addr
	started  atomic.Bool
	runDone  chan struct{} // closed when gnet.Run returns
	stopped  chan struct{} // closed when stop has finished

	jobs    chan job
	workers sync.WaitGroup
	hooks   sync.WaitGroup
	tlsWG   sync.WaitGroup // the TLS connections' goroutines

	nextID  atomic.Uint64
	opaque  atomic.Int32
	buffers sync.Pool

	mu    sync.Mutex // guards conns
	conns map[uint64]*Conn

	goingAway atomic.Bool // set by GoAway: newer clients are told to go
	stopOnce  sync.Once
}

// NewServer returns a server that will serve h on cfg.Addr once started.
func NewServer(cfg ServerConfig, h Handler, log zerolog.Logger) *Server {
	s := &Server{
		cfg:     cfg.withDefaults(),
		h:       h,
		log:     log,
		epoch:   time.Now(),
		runDone: make(chan struct{}),
		stopped: make(chan struct{}),
		conns:   make(map[uint64]*Conn),

		listenFD: -1,
	}
	s.buffers.New = func() any {
		b := make([]byte, 0, 512)
		return &b
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Start binds the listen address, starts the workers and the event loops,
// and returns once the server is listening. ctx bounds the wait for the
// listener only; the server runs until Shutdown. If Start fails, everything
// it started has been stopped again.
func (s *Server) Start(ctx context.Context) error {
	if err := s.checkTLS(); err != nil {
		return err
	}
	if !s.started.CompareAndSwap(false, true) {
		return ErrServerStarted
	}
	s.jobs = make(chan job, s.cfg.QueueSize)
	for range s.cfg.Workers {
		s.workers.Add(1)
		go s.work()
	}
	proto := s.cfg.Addr
	if !strings.Contains(proto, "://") {
		proto = "tcp://" + proto
	}
	opts := []gnet.Option{
		gnet.WithLogger(gnetLogger{log: s.log, stopping: s.ctx}),
		gnet.WithTicker(s.cfg.IdleTimeout > 0),
		gnet.WithReuseAddr(true),
	}
	if s.cfg.EventLoops > 0 {
		opts = append(opts, gnet.WithNumEventLoop(s.cfg.EventLoops))
	} else {
		opts = append(opts, gnet.WithMulticore(true))
	}
	if s.cfg.TCPKeepAlive > 0 {
		opts = append(opts, gnet.WithTCPKeepAlive(s.cfg.TCPKeepAlive))
	}
	if s.cfg.SocketSendBuffer > 0 {
		opts = append(opts, gnet.WithSocketSendBuffer(s.cfg.SocketSendBuffer))
	}
	if s.cfg.SocketRecvBuffer > 0 {
		opts = append(opts, gnet.WithSocketRecvBuffer(s.cfg.SocketRecvBuffer))
	}
	// booted gets OnBoot's verdict and then Run's result; two slots so the
	// Run goroutine never blocks on it.
	booted := make(chan error, 2)
	go s.runEngine(proto, opts, booted)
	var err error
	select {
	case err = <-booted:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		s.stopOnce.Do(s.stop)
		return fmt.Errorf("listen on %q: %w", s.cfg.Addr, err)
	}
	s.log.Info().Str("addr", s.addr.String()).Int("workers", s.cfg.Workers).
		Stringer("tlsMode", s.cfg.TLSMode).Msg("remoting server listening")
	return nil
}

// engineRestartWait is how long runEngine waits before it starts an engine
// that stopped on its own again (Netty's acceptor pauses 1 s after a
// failed accept).
const engineRestartWait = time.Second

// runEngine runs gnet's engine until Shutdown. gnet stops the whole engine,
// closing every connection, when its acceptor fails an accept for any
// reason other than a connection gone before it was taken (EMFILE when
// the process is out of descriptors, ENFILE, ENOBUFS, ...), where Netty
// logs and goes on accepting. A server that stopped there would leave the
// process up and its port dead, so runEngine starts the engine again on the
// address it was bound to, every engineRestartWait until one starts, as
// long as the first start succeeded and Shutdown has not begun. booted
// gets the first start's verdict (OnBoot's) and then its Run's result.
func (s *Server) runEngine(proto string, opts []gnet.Option, booted chan<- error) {
	defer close(s.runDone)
	err := gnet.Run(&eventHandler{s: s, booted: booted}, proto, opts...)
	if err == nil {
		err = errors.New("engine stopped before it was started")
	}
	booted <- err
	if !s.everBooted() {
		s.releaseListener()
		return
	}
	scheme := proto[:strings.Index(proto, "://")+len("://")]
	fails := repeatlog.New(s.log, 0, nil)
	for {
		s.releaseListener()
		if s.ctx.Err() != nil {
			return
		}
		fails.Failed().Err(err).Msg("the remoting server's engine stopped on its own (gnet stops it when an accept fails, as when the process is out of file descriptors), closing every connection: listening again")
		t := time.NewTimer(engineRestartWait)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		h := &eventHandler{s: s, booted: make(chan error, 1), restart: true, onBoot: func() {
			fails.Recovered().Str("addr", s.addr.String()).Msg("the remoting server listens again")
		}}
		err = gnet.Run(h, scheme+s.addr.String(), opts...)
		if err == nil {
			err = errors.New("engine stopped")
		}
	}
}

// everBooted reports whether an engine ever booted.
func (s *Server) everBooted() bool {
	s.engMu.Lock()
	defer s.engMu.Unlock()
	return s.booted
}

// releaseListener closes the duplicate of the listener's descriptor once
// its engine has stopped, so the port stops listening with it.
func (s *Server) releaseListener() {
	s.engMu.Lock()
	defer s.engMu.Unlock()
	if s.listenFD >= 0 {
		_ = syscall.Close(s.listenFD)
		s.listenFD = -1
	}
}

// Addr returns the bound listen address (with the real port when the
// configured one was 0). It is nil before Start returns.
func (s *Server) Addr() net.Addr { return s.addr }

// Shutdown stops accepting, closes every connection, cancels the contexts
// given to handlers and waits for the event loops, the workers and the
// OnClose hooks. Replies sent after Shutdown began fail with ErrConnClosed.
// If ctx ends first Shutdown returns ctx's error while the shutdown goes on
// in the background; a later Shutdown call waits for it again.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.started.Load() {
		return ErrServerNotStarted
	}
	go s.stopOnce.Do(s.stop)
	select {
	case <-s.stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("shutdown remoting server: %w", ctx.Err())
	}
}

// GoAway starts a graceful shutdown, RocketMQ's enableShutdownGracefully:
// from now on a request of a client newer than RocketMQ 5.3.1 is answered
// GO_AWAY ("please go away"; a oneway one is dropped), which such a
// client's remoting layer takes as the cue to reconnect, while older
// clients, which do not know the code, are served as before. GoAway
// returns after the configured GoAwayWait, or when ctx ends first (with
// its error); the caller then stops the server with Shutdown. It returns
// at once when GoAwayWait is zero, leaving the server as it was, and
// when an earlier call began the wait, as RocketMQ waits once.
func (s *Server) GoAway(ctx context.Context) error {
	if s.cfg.GoAwayWait <= 0 || !s.goingAway.CompareAndSwap(false, true) {
		return nil
	}
	s.log.Info().Dur("wait", s.cfg.GoAwayWait).Msg("shutting down gracefully: clients newer than 5.3.1 are told to go away")
	t := time.NewTimer(s.cfg.GoAwayWait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("graceful shutdown wait: %w", ctx.Err())
	}
}

// GoingAway reports whether a GoAway began: from then on the server
// answers newer clients GO_AWAY.
func (s *Server) GoingAway() bool { return s.goingAway.Load() }

// Stopped is closed once a Shutdown has stopped the server: every
// connection closed and every handler returned. A Shutdown whose context
// ended first leaves it open until then.
func (s *Server) Stopped() <-chan struct{} { return s.stopped }

// stop runs once: it cancels the handlers' contexts, stops the engine,
// waits for the event loops to exit, then drains the workers and waits for
// the OnClose hooks.
func (s *Server) stop() {
	defer close(s.stopped)
	s.cancel()
	s.engMu.Lock()
	eng, booted := s.eng, s.booted
	s.engMu.Unlock()
	if booted {
		s.stopEngine(eng)
	}
	// Without a booted engine, OnBoot sees s.ctx done and refuses to
	// start, so Run returns either way.
	<-s.runDone
	// Every connection is closed, so the TLS goroutines are ending; they
	// queue frames, so they must be gone before the queue closes.
	s.tlsWG.Wait()
	close(s.jobs)
	s.workers.Wait()
	s.hooks.Wait()
	s.log.Info().Msg("remoting server stopped")
}

// acceptorStopWait bounds stopEngine's wait for gnet's acceptor to stop
// the engine itself once the listener is shut down, before it stops the
// engine the plain way.
const acceptorStopWait = 2 * time.Second

// stopEngine stops gnet's engine without leaving a connection behind
// that nobody serves. gnet's own stop ends the event loops before its
// acceptor, which goes on accepting and hands each new socket to a loop
// that has exited: the socket is never served nor closed, and a client
// that connected during the stop waits for its own timeout. So the
// listening socket is shut down first (on a duplicate of its descriptor):
// the kernel resets the connections still in its backlog and refuses new
// ones, the acceptor's next accept fails, and the acceptor stops the
// engine after it has handed every socket it accepted to an event loop,
// which registers it before it exits and closes it with the rest. Where
// the listener cannot be shut down, or the acceptor does not stop the
// engine within acceptorStopWait, the engine is stopped the plain way.
//
// gnet's Engine.Stop polls for completion every 500 ms; a context that is
// already done makes it only trigger the stop. The return of gnet.Run
// (runDone) is the signal that every event loop has exited and every
// connection is closed.
func (s *Server) stopEngine(eng gnet.Engine) {
	if s.shutDownListener() {
		t := time.NewTimer(acceptorStopWait)
		defer t.Stop()
		select {
		case <-s.runDone:
			return
		case <-t.C:
			s.log.Warn().Dur("waited", acceptorStopWait).Msg("the acceptor did not stop after the listener shut down; stopping the engine")
		}
	}
	triggered, cancel := context.WithCancel(context.Background())
	cancel()
	_ = eng.Stop(triggered)
}

// shutDownListener shuts the listening socket down for reading (through
// the duplicate of its descriptor), which ends its listening; it reports
// whether that succeeded. The duplicate is used under engMu, so runEngine
// cannot close it meanwhile.
func (s *Server) shutDownListener() bool {
	s.engMu.Lock()
	defer s.engMu.Unlock()
	if s.listenFD < 0 {
		return false
	}
	if err := syscall.Shutdown(s.listenFD, syscall.SHUT_RD); err != nil {
		s.log.Debug().Err(err).Msg("the listener not shut down; stopping the engine without it")
		return false
	}
	return true
}

// Conns returns the open connections.
func (s *Server) Conns() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Conn, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	return out
}

// Conn returns the open connection with the given id, or nil.
func (s *Server) Conn(id uint64) *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[id]
}

// ConnCount returns the number of open connections.
func (s *Server) ConnCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) nextOpaque() int32 { return s.opaque.Add(1) }

// clock returns nanoseconds since the server was created (monotonic).
func (s *Server) clock() int64 { return int64(time.Since(s.epoch)) }

func (s *Server) getBuffer() *[]byte { return s.buffers.Get().(*[]byte) }

func (s *Server) putBuffer(bp *[]byte) {
	if cap(*bp) > 64<<10 {
		return
	}
	*bp = (*bp)[:0]
	s.buffers.Put(bp)
}

// work runs jobs until the queue is closed.
func (s *Server) work() {
	defer s.workers.Done()
	for j := range s.jobs {
		if j.cmd != nil {
			s.serveRequest(j.conn, j.cmd, j.at, j.away)
			continue
		}
		s.process(j.conn, j.frame, j.at, j.away)
	}
}

// process decodes one frame, read at the server clock at, and serves it;
// away says whether the server was going away when the frame was queued.
func (s *Server) process(conn *Conn, frame []byte, at int64, away bool) {
	cmd, err := Decode(frame)
	if err != nil {
		s.log.Warn().Err(err).Stringer("conn", conn).Msg("closing connection: undecodable frame")
		_ = conn.Close()
		return
	}
	if cmd.IsResponse() {
		s.deliver(conn, cmd)
		return
	}
	s.serveRequest(conn, cmd, at, away)
}

// serveRequest serves a decoded request read at the server clock at, or
// answers it GO_AWAY when the server was going away as it was queued
// (away).
func (s *Server) serveRequest(conn *Conn, cmd *Command, at int64, away bool) {
	conn.noteClient(cmd)
	cmd.received = at
	if away && s.goAway(conn, cmd) {
		return
	}
	s.serve(conn, cmd, s.h)
}

// goAway answers req GO_AWAY, and reports so, when req's client is newer
// than 5.3.1; the caller has seen the server going away. RocketMQ checks
// this before anything else a request may be refused for: its processor
// table comes first, but its broker and name server register a default
// processor, so an unknown code is answered GO_AWAY too (and
// REQUEST_CODE_NOT_SUPPORTED by that default processor otherwise); a full
// worker queue and a processor's own refusal ([REJECTREQUEST]) come after
// it.
func (s *Server) goAway(conn *Conn, req *Command) bool {
	if req.Version <= goAwayAfterVersion {
		return false
	}
	s.log.Info().Stringer("conn", conn).Int32("code", req.Code).Int32("opaque", req.Opaque).
		Msg("shutting down: answered GO_AWAY")
	_ = conn.Reply(req, NewResponse(req, GoAway, goAwayRemark))
	return true
}

// deliver hands a client's response to the Request waiting for it.
func (s *Server) deliver(conn *Conn, resp *Command) {
	if !conn.deliver(resp) {
		s.log.Debug().Stringer("conn", conn).Int32("opaque", resp.Opaque).Msg("response matches no pending request")
	}
}

// PanicRemark starts the remark of the SYSTEM_ERROR a server answers in
// place of a handler that panicked (the panic's value follows).
const PanicRemark = "internal error: "

// serve runs h for req, turning a panic into a SYSTEM_ERROR answer.
func (s *Server) serve(conn *Conn, req *Command, h Handler) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error().Stringer("conn", conn).Int32("code", req.Code).Int32("opaque", req.Opaque).
				Str("panic", fmt.Sprint(r)).Bytes("stack", debug.Stack()).Msg("handler panicked")
			_ = conn.Reply(req, NewResponse(req, SystemError, PanicRemark+fmt.Sprint(r)))
		}
	}()
	h.ServeCommand(conn.ctx, conn, req)
}

// enqueue hands a frame of c, read at the server clock at, to the workers
// without blocking; a frame that finds the queue full is answered
// SYSTEM_BUSY at once.
//
// While a handler waits for an answer on the connection (Conn.Request),
// each frame is decoded here and a response goes to its waiter at once:
// queued, it could wait behind the very workers that wait for it (as
// many replies pushed to requesters as there are workers held them all
// until their timeouts). A request decoded here goes to the workers
// decoded.
func (s *Server) enqueue(c *Conn, frame []byte, at int64) {
	j := job{conn: c, frame: frame, at: at, away: s.goingAway.Load()}
	if c.awaiting.Load() > 0 {
		if cmd, err := Decode(frame); err == nil {
			if cmd.IsResponse() {
				cmd.received = at
				s.deliver(c, cmd)
				return
			}
			j.cmd = cmd
		}
	}
	select {
	case s.jobs <- j:
	default:
		s.overloaded(c, frame, at)
	}
}

// overloaded answers a frame that found the job queue full. It runs on the
// event loop, so it only decodes the header and queues one write.
func (s *Server) overloaded(conn *Conn, frame []byte, at int64) {
	cmd, err := Decode(frame)
	if err == nil {
		cmd.received = at
	}
	switch {
	case err != nil:
		s.log.Warn().Err(err).Stringer("conn", conn).Msg("closing connection: undecodable frame")
		_ = conn.Close()
	case cmd.IsResponse():
		s.deliver(conn, cmd)
	case s.goingAway.Load() && s.goAway(conn, cmd):
		// RocketMQ tells a newer client to go away before it tries its
		// worker pool.
	case cmd.IsOneway():
		s.log.Warn().Stringer("conn", conn).Int32("code", cmd.Code).Msg("worker queue full: oneway request dropped")
	default:
		s.log.Warn().Stringer("conn", conn).Int32("code", cmd.Code).Msg("worker queue full: answering SYSTEM_BUSY")
		_ = conn.Reply(cmd, NewResponse(cmd, SystemBusy,
			"[OVERLOAD]system busy, start flow control for a while"))
	}
}

// eventHandler receives gnet's callbacks. Everything here runs on an event
// loop (OnTick on the engine's ticker goroutine) and must not block.
type eventHandler struct {
	gnet.BuiltinEventEngine
	s      *Server
	booted chan<- error
	// restart is true for an engine runEngine starts again: the bound
	// address is known already.
	restart bool
	// onBoot, when set, is called once the engine booted.
	onBoot func()
}

// OnBoot records the engine and the bound address; it refuses to start
// when Shutdown came first.
func (e *eventHandler) OnBoot(eng gnet.Engine) gnet.Action {
	s := e.s
	var addr net.Addr
	if !e.restart {
		var err error
		if addr, err = listenerAddr(eng); err != nil {
			e.booted <- fmt.Errorf("read bound address: %w", err)
			return gnet.Shutdown
		}
	}
	s.engMu.Lock()
	defer s.engMu.Unlock()
	if s.ctx.Err() != nil {
		e.booted <- errors.New("shut down while starting")
		return gnet.Shutdown
	}
	s.eng, s.booted = eng, true
	if !e.restart {
		s.addr = addr
	}
	if fd, err := eng.Dup(); err == nil {
		s.listenFD = fd
	} else {
		s.log.Debug().Err(err).Msg("the listener's descriptor not duplicated; the stop will not shut it down first")
	}
	if e.onBoot != nil {
		e.onBoot()
	}
	e.booted <- nil
	return gnet.None
}

// listenerAddr reads the address the engine's listener is bound to, from a
// duplicate of its descriptor.
func listenerAddr(eng gnet.Engine) (net.Addr, error) {
	fd, err := eng.Dup()
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	return ln.Addr(), nil
}

// OnOpen registers the new connection.
func (e *eventHandler) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	s := e.s
	c := &Conn{
		id:     s.nextID.Add(1),
		srv:    s,
		gc:     gc,
		remote: gc.RemoteAddr(),
		local:  gc.LocalAddr(),
	}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	c.flushFn = c.flush
	c.resumeFn = func(gc gnet.Conn, _ error) error { e.resume(gc, c); return nil }
	c.feedFn = func(gc gnet.Conn, _ error) error {
		if !c.paused && !c.Closed() && e.consume(gc, c, c.touch()) == gnet.Close {
			_ = gc.Close()
		}
		return nil
	}
	c.proxyPending = !s.cfg.ProxyProtocol.Disabled
	c.undetected = s.cfg.TLSMode != TLSDisabled || c.proxyPending
	c.touch()
	gc.SetContext(c)
	s.mu.Lock()
	s.conns[c.id] = c
	s.mu.Unlock()
	s.log.Debug().Stringer("conn", c).Msg("connection opened")
	return nil, gnet.None
}

// OnClose unregisters the connection, fails its pending requests and runs
// its OnClose hooks on a goroutine.
func (e *eventHandler) OnClose(gc gnet.Conn, err error) gnet.Action {
	s := e.s
	c, ok := gc.Context().(*Conn)
	if !ok {
		return gnet.None
	}
	s.mu.Lock()
	delete(s.conns, c.id)
	s.mu.Unlock()
	hooks, pending := c.markClosed()
	switch {
	case c.tls != nil:
		c.tls.pipe.shutdown() // the TLS goroutines stop
	case c.undetected:
		// Frames sent before the first byte came have no flush coming.
		q, bufs, bodies, _ := c.takeQueue()
		c.releaseQueue(q, bufs, bodies)
	}
	ev := s.log.Debug()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		ev = ev.Err(err)
	}
	ev.Stringer("conn", c).Msg("connection closed")
	for _, ch := range pending {
		close(ch)
	}
	if len(hooks) > 0 {
		s.hooks.Add(1)
		go func() {
			defer s.hooks.Done()
			for _, fn := range hooks {
				s.runHook(c, fn)
			}
		}()
	}
	return gnet.None
}

func (s *Server) runHook(c *Conn, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error().Stringer("conn", c).Str("panic", fmt.Sprint(r)).Bytes("stack", debug.Stack()).
				Msg("OnClose hook panicked")
		}
	}()
	fn()
}

// OnTraffic cuts the inbound bytes into frames and queues them for the
// workers. A frame larger than MaxFrameSize or with a bad length word
// closes the connection. The first bytes of a connection may be a PROXY
// protocol header and then decide between TLS and plaintext (unless TLS
// is disabled); a TLS connection's bytes go to its TLS reader instead.
func (e *eventHandler) OnTraffic(gc gnet.Conn) gnet.Action {
	s := e.s
	c, ok := gc.Context().(*Conn)
	if !ok {
		return gnet.Close
	}
	now := c.touch()
	if c.undetected {
		if gc.InboundBuffered() == 0 {
			return gnet.None // woken by a Send, no byte yet
		}
		if a := e.detect(gc, c); a != gnet.None || c.undetected {
			return a
		}
	}
	if c.paused {
		// Answers pile up unread: the requests wait in gnet's buffer,
		// up to a bound.
		if in := gc.InboundBuffered(); in > s.maxInbound() {
			s.log.Warn().Stringer("conn", c).Int("buffered", in).
				Msg("closing connection: it sends requests without reading their answers")
			return gnet.Close
		}
		return gnet.None
	}
	return e.consume(gc, c, now)
}

// maxInbound bounds the bytes a connection's requests may hold in gnet's
// inbound buffer while they are not read: a paused connection's, or a TLS
// connection's beyond what its pipe takes.
func (s *Server) maxInbound() int { return 4 * s.cfg.MaxFrameSize }

// consume takes a connection's buffered bytes: a TLS connection's go to
// its TLS reader, a plaintext one's are cut into frames for the workers.
func (e *eventHandler) consume(gc gnet.Conn, c *Conn, now int64) gnet.Action {
	s := e.s
	if t := c.tls; t != nil {
		// The pipe takes what it has room for; the rest waits in gnet's
		// buffer, under the bound of a paused connection, until the TLS
		// reader has decrypted enough (feedFn).
		// Peek no more than the pipe takes (gnet copies what it peeks
		// when its ring wraps); at least one byte, so that a full pipe
		// notes it is wanted.
		want := gc.InboundBuffered()
		if want == 0 {
			return gnet.None
		}
		in, _ := gc.Peek(max(min(want, t.pipe.room()), 1))
		n, err := t.pipe.feed(in)
		if err != nil {
			return gnet.Close
		}
		if n > 0 { // gnet's Discard(0) discards everything buffered
			_, _ = gc.Discard(n)
		}
		if rest := gc.InboundBuffered(); rest > s.maxInbound() {
			s.log.Warn().Stringer("conn", c).Int("buffered", rest).Int("limit", s.maxInbound()).
				Msg("closing TLS connection: it sends faster than its bytes are decrypted")
			return gnet.Close
		}
		return gnet.None
	}
	return e.readFrames(gc, c, now)
}

// readFrames cuts a plaintext connection's buffered bytes into frames and
// queues them for the workers.
func (e *eventHandler) readFrames(gc gnet.Conn, c *Conn, now int64) gnet.Action {
	s := e.s
	for {
		buffered := gc.InboundBuffered()
		if buffered < 4 {
			return gnet.None
		}
		head, err := gc.Peek(4)
		if err != nil {
			return gnet.None
		}
		n, err := FrameLength(head, s.cfg.MaxFrameSize)
		if err != nil {
			if head[0] == tlsRecordHandshake && s.cfg.TLSMode == TLSDisabled {
				s.log.Warn().Stringer("conn", c).Msg("closing connection: it opens a TLS handshake and TLS is disabled (tls.server.mode)")
				return gnet.Close
			}
			if mayOpenProxyHeader(head) {
				why := "PROXY protocol headers are refused (proxyProtocolEnable=false)"
				if c.proxyRead {
					why = "a second PROXY protocol header"
				}
				s.log.Warn().Stringer("conn", c).Msg("closing connection: " + why)
				return gnet.Close
			}
			s.log.Warn().Err(err).Stringer("conn", c).Msg("closing connection: bad frame length")
			return gnet.Close
		}
		if buffered < n {
			return gnet.None
		}
		frame := make([]byte, n)
		if got, _ := gc.Read(frame); got != n {
			s.log.Error().Stringer("conn", c).Int("want", n).Int("got", got).Msg("closing connection: short read of a buffered frame")
			return gnet.Close
		}
		s.enqueue(c, frame, now)
	}
}

// resumePoll is how often a connection whose requests are not read
// checks whether its answers have drained.
const resumePoll = 2 * time.Millisecond

// pauseIfBehind stops reading c's requests when more of its answers wait
// for the socket than the high water mark allows (on the event loop,
// after a flush).
func (s *Server) pauseIfBehind(gc gnet.Conn, c *Conn) {
	if c.paused || gc.OutboundBuffered() <= s.cfg.WriteBufferHighWaterMark {
		return
	}
	c.paused = true
	c.pauses++
	// A slow consumer may pause many times a second: one line per
	// connection every pauseLogEvery at most.
	if now := s.clock(); c.pauseLoggedAt == 0 || time.Duration(now-c.pauseLoggedAt) >= pauseLogEvery {
		s.log.Warn().Stringer("conn", c).Int("buffered", gc.OutboundBuffered()).Int("lowWaterMark", s.cfg.WriteBufferLowWaterMark).
			Int64("pauses", c.pauses).
			Msg("the client does not read its answers: its requests are not read until they drain to the low water mark")
		c.pauseLoggedAt = now
	}
	c.scheduleResume()
}

// pauseLogEvery spaces the log lines of a connection's pauses.
const pauseLogEvery = 10 * time.Second

// scheduleResume checks again, after resumePoll on c's event loop,
// whether c's answers have drained.
func (c *Conn) scheduleResume() {
	time.AfterFunc(resumePoll, func() { _ = c.gc.Wake(c.resumeFn) }) // fails only once c is closed
}

// resume reads c's requests again once its waiting answers are down to
// the low water mark (on the event loop).
func (e *eventHandler) resume(gc gnet.Conn, c *Conn) {
	if !c.paused || c.Closed() {
		return
	}
	if gc.OutboundBuffered() > e.s.cfg.WriteBufferLowWaterMark {
		c.scheduleResume()
		return
	}
	c.paused = false
	e.s.log.Debug().Stringer("conn", c).Msg("the client reads its answers again: reading its requests again")
	if e.consume(gc, c, c.touch()) == gnet.Close {
		_ = gc.Close()
	}
}

// detect reads the first bytes of a connection: a PROXY protocol header
// when one may come, then the first byte after it: a TLS handshake record
// starts TLS (unless TLS is disabled), anything else is plaintext, which
// enforcing mode refuses. It returns gnet.Close to refuse the connection;
// c.undetected stays set while it waits for more bytes.
func (e *eventHandler) detect(gc gnet.Conn, c *Conn) gnet.Action {
	s := e.s
	if c.proxyPending {
		done, refuse := e.readProxyHeader(gc, c)
		if refuse {
			return gnet.Close
		}
		if !done || gc.InboundBuffered() == 0 {
			return gnet.None
		}
	}
	first, err := gc.Peek(1)
	if err != nil || len(first) == 0 {
		return gnet.None
	}
	if first[0] == tlsRecordHandshake && s.cfg.TLSMode != TLSDisabled {
		s.startTLS(gc, c)
		return gnet.None
	}
	if s.cfg.TLSMode == TLSEnforcing {
		s.log.Warn().Stringer("conn", c).Msg("closing connection: plaintext refused, TLS is enforced (tls.server.mode=enforcing)")
		return gnet.Close
	}
	c.mu.Lock()
	c.undetected = false
	queued := c.flushing
	c.mu.Unlock()
	if queued {
		_ = c.flush(gc, nil)
	}
	return gnet.None
}

// checkTLS refuses a TLS mode without a usable TLS configuration.
func (s *Server) checkTLS() error {
	switch s.cfg.TLSMode {
	case TLSDisabled:
		return nil
	case TLSPermissive, TLSEnforcing:
		tc := s.cfg.TLS
		if tc == nil || (len(tc.Certificates) == 0 && tc.GetCertificate == nil && tc.GetConfigForClient == nil) {
			return fmt.Errorf("TLS mode %s needs a TLS configuration with a certificate", s.cfg.TLSMode)
		}
		return nil
	default:
		return fmt.Errorf("unknown TLS mode %d", s.cfg.TLSMode)
	}
}

// OnTick closes idle connections.
func (e *eventHandler) OnTick() (time.Duration, gnet.Action) {
	s := e.s
	now := s.clock()
	for _, c := range s.Conns() {
		if idle := c.idleFor(now); idle > s.cfg.IdleTimeout {
			s.log.Info().Stringer("conn", c).Dur("idle", idle).Msg("closing idle connection")
			_ = c.Close()
		}
	}
	return min(max(s.cfg.IdleTimeout/4, 10*time.Millisecond), 5*time.Second), gnet.None
}

// gnetLogger sends gnet's own log lines to zerolog. gnet's Fatalf is logged
// at error level: a library must not end the process. Once Shutdown
// began (the stopping context is done), gnet's errors are logged at debug
// level: the stop shuts the listener down under gnet's acceptor, whose
// failed accept gnet reports as errors that are the expected end.
type gnetLogger struct {
	log      zerolog.Logger
	stopping context.Context
}

func (l gnetLogger) Debugf(format string, args ...any) { l.log.Debug().Msgf(format, args...) }
func (l gnetLogger) Infof(format string, args ...any)  { l.log.Debug().Msgf(format, args...) }
func (l gnetLogger) Warnf(format string, args ...any)  { l.log.Warn().Msgf(format, args...) }
func (l gnetLogger) Errorf(format string, args ...any) { l.errorEvent().Msgf(format, args...) }
func (l gnetLogger) Fatalf(format string, args ...any) { l.log.Error().Msgf(format, args...) }

func (l gnetLogger) errorEvent() *zerolog.Event {
	if l.stopping != nil && l.stopping.Err() != nil {
		return l.log.Debug()
	}
	return l.log.Error()
}
