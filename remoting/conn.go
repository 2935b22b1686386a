package remoting

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// ErrConnClosed is returned by Conn methods once the connection is closed
// (by the peer, by Close, by the idle timeout or by server shutdown), and by
// Conn.Request when the connection closes before the answer arrives.
var ErrConnClosed = errors.New("connection closed")

// ClientInfo is what the broker knows about the client on a connection.
// Language and Version are filled from the first request; ClientID is set
// by the broker (from heartbeats).
type ClientInfo struct {
	// ClientID is the client's id, e.g. "10.0.0.1@1234".
	ClientID string
	// Language is the client's language name, e.g. "GO".
	Language string
	// Version is the client's MQVersion ordinal.
	Version int32
}

// Conn is one client connection of a Server. Its methods are safe for
// concurrent use. Lock order: Conn.mu may be taken while holding nothing
// else of this package; Server.mu is never taken while holding Conn.mu.
type Conn struct {
	id     uint64
	srv    *Server
	gc     gnet.Conn
	remote net.Addr
	local  net.Addr
	ctx    context.Context
	cancel context.CancelFunc

	// lastActive is the server clock (nanoseconds since the server started)
	// of the last read or write, for the idle timeout.
	lastActive atomic.Int64
	infoSeen   atomic.Bool
	// awaiting is len(pending), read without mu: while the broker waits
	// for an answer on the connection, the event loop picks the client's
	// responses out of its frames (Server.enqueue).
	awaiting atomic.Int32

	mu      sync.Mutex
	closed  bool
	hooks   []func()
	pending map[int32]chan *Command
	info    ClientInfo
	values  map[any]any

	// Outgoing frames waiting for the event loop, and the pooled buffers
	// among them; flushing is set while a flush is queued. The spare
	// slices are the previous batch's, reused to avoid allocations.
	outq      [][]byte
	outBufs   []*[]byte
	outBodies []func() // ReleaseBody of the queued commands that have one
	spareQ    [][]byte
	spareBufs []*[]byte
	spareRel  []func()
	flushing  bool
	flushFn   gnet.AsyncCallback
	// paused is set while the connection's requests are not read because
	// its answers pile up unread (ServerConfig.WriteBufferHighWaterMark);
	// it belongs to the event loop, which resumeFn runs on.
	paused   bool
	resumeFn gnet.AsyncCallback
	// feedFn consumes the bytes a TLS connection's pipe had no room for,
	// once it has (on the event loop).
	feedFn gnet.AsyncCallback
	// pauses counts the pauses, pauseLoggedAt is the server clock of the
	// last one logged (event loop only).
	pauses        int64
	pauseLoggedAt int64

	// undetected is set while the first bytes, which tell a PROXY
	// protocol header, TLS and plaintext apart, have not arrived; frames
	// sent meanwhile wait in outq.
	// tls is the TLS state of a TLS connection, nil for plaintext. Both
	// change only on the event loop, under mu, which reads them without
	// it.
	undetected bool
	tls        *tlsConn
	// proxyPending is set while a PROXY protocol header may still open
	// the connection, proxyRead once one has; both belong to the event
	// loop. client is the client's address the header gave (nil: the
	// peer is the client).
	proxyPending bool
	proxyRead    bool
	client       atomic.Pointer[net.TCPAddr]
}

// ID returns the connection's id, unique within its server.
func (c *Conn) ID() uint64 { return c.id }

// RemoteAddr returns the client's address: the source a PROXY protocol
// header gave, or else the socket's peer. It is what RocketMQ reports as a
// channel's remote address (access control, connection lists).
func (c *Conn) RemoteAddr() net.Addr {
	if a := c.client.Load(); a != nil {
		return a
	}
	return c.remote
}

// PeerAddr returns the socket's peer: the load balancer when the
// connection opened with a PROXY protocol header, the client otherwise.
func (c *Conn) PeerAddr() net.Addr { return c.remote }

// LocalAddr returns the server-side address of the connection.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// Context returns a context that is done when the connection closes or the
// server shuts down.
func (c *Conn) Context() context.Context { return c.ctx }

// Done returns a channel closed when the connection closes or the server
// shuts down.
func (c *Conn) Done() <-chan struct{} { return c.ctx.Done() }

// Closed reports whether the connection is closed.
func (c *Conn) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// String describes the connection for logs.
func (c *Conn) String() string {
	if a := c.client.Load(); a != nil {
		return fmt.Sprintf("conn#%d(%s via %s)", c.id, a, c.remote)
	}
	return fmt.Sprintf("conn#%d(%s)", c.id, c.remote)
}

// ClientInfo returns what is known about the client.
func (c *Conn) ClientInfo() ClientInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info
}

// SetClientInfo replaces what is known about the client.
func (c *Conn) SetClientInfo(info ClientInfo) {
	c.mu.Lock()
	c.info = info
	c.mu.Unlock()
	c.infoSeen.Store(true)
}

// Value returns the attribute stored under key, or nil.
func (c *Conn) Value(key any) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.values[key]
}

// SetValue stores an attribute of the connection for its owner (the
// broker keeps per-connection state here).
func (c *Conn) SetValue(key, value any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.values == nil {
		c.values = make(map[any]any)
	}
	c.values[key] = value
}

// LoadOrStoreValue returns the attribute stored under key if there is one
// (loaded true); otherwise it stores value and returns it. Use it to do
// something once per connection, such as registering an OnClose hook.
func (c *Conn) LoadOrStoreValue(key, value any) (actual any, loaded bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.values[key]; ok {
		return v, true
	}
	if c.values == nil {
		c.values = make(map[any]any)
	}
	c.values[key] = value
	return value, false
}

// OnClose registers fn to run once the connection has closed, on a
// goroutine the server owns (never on an event loop). If the connection is
// already closed fn runs at once, on the caller's goroutine.
func (c *Conn) OnClose(fn func()) {
	c.mu.Lock()
	if !c.closed {
		c.hooks = append(c.hooks, fn)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	fn()
}

// Close closes the connection. It returns at once; the close happens on
// the connection's event loop, after which OnClose hooks run.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if err := c.gc.Close(); err != nil {
		return fmt.Errorf("close %s: %w", c, err)
	}
	return nil
}

// Serve runs h for req as a worker runs the server's handler: with the
// connection's context, and a panic in h answered SYSTEM_ERROR and logged
// instead of ending the process. It is for requests answered later, off
// the worker that received them (long polling, flow control).
func (c *Conn) Serve(req *Command, h Handler) { c.srv.serve(c, req, h) }

// ServeFunc is Serve for a function that builds the answer (nil: none).
func (c *Conn) ServeFunc(req *Command, answer func() *Command) {
	c.Serve(req, RespondFunc(func(context.Context, *Conn, *Command) *Command { return answer() }))
}

// ServeHeldFunc is ServeFunc for a request that long polling held: its
// answer is reported to OnAnswer as a long-polling one (Command.MarkHeld).
func (c *Conn) ServeHeldFunc(req *Command, answer func() *Command) {
	req.MarkHeld()
	c.ServeFunc(req, answer)
}

// Reply sends resp as the answer to req: it copies req's opaque and sets
// the response flag. Nothing is sent when req is oneway. Reply may be
// called from any goroutine, during ServeCommand or long after it. The
// server's OnAnswer hears of every call.
func (c *Conn) Reply(req, resp *Command) error {
	observe := c.srv.cfg.OnAnswer
	if req.IsOneway() {
		if observe != nil && resp != nil {
			observe(c.answer(req, resp.Code, 0, AnswerOneway))
		}
		return nil
	}
	resp.Opaque = req.Opaque
	resp.Flag |= FlagResponse
	code := resp.Code // resp belongs to the event loop once sent
	now, err := c.send(resp)
	if errors.Is(err, ErrNotEncodable) || errors.Is(err, ErrUnknownSerializeType) {
		// An answer that cannot be framed (a header over 16 MiB, a code
		// outside a ROCKETMQ header's int16) would leave the caller
		// waiting for its timeout: it hears why instead.
		c.srv.log.Error().Err(err).Int32("requestCode", req.Code).Stringer("conn", c).
			Msg("answer not encodable; SYSTEM_ERROR sent instead")
		fallback := NewResponse(req, SystemError, "the broker could not encode its answer: "+err.Error())
		if fallback.SerializeType != SerializeRocketMQ {
			fallback.SerializeType = SerializeJSON
		}
		code = fallback.Code
		now, err = c.send(fallback)
	}
	if observe == nil {
		return err
	}
	outcome := AnswerQueued
	if err != nil {
		outcome = AnswerFailed
	}
	observe(c.answer(req, code, now, outcome))
	return err
}

// answer describes an answer to req for OnAnswer; now is the server clock
// if the caller read it, else 0.
func (c *Conn) answer(req *Command, code int32, now int64, outcome AnswerOutcome) Answer {
	a := Answer{RequestCode: req.Code, ResponseCode: code, Held: req.held, Outcome: outcome}
	if req.received > 0 {
		if now == 0 {
			now = c.srv.clock()
		}
		a.Elapsed = time.Duration(now - req.received)
	}
	return a
}

// Send writes cmd to the connection as it is (opaque and flags included).
// It returns once the frame is queued for the event loop; cmd.Body must
// not be modified afterwards (large bodies are written without a copy).
//
// Frames queued by many goroutines while the loop is busy go out together
// in one writev: the first Send of a batch wakes the loop, later ones only
// append.
func (c *Conn) Send(cmd *Command) error {
	_, err := c.send(cmd)
	return err
}

// send is Send returning the server clock at which the frame was queued
// (0 when it was not).
func (c *Conn) send(cmd *Command) (int64, error) {
	release := cmd.ReleaseBody
	bp := c.srv.getBuffer()
	b, err := appendFramePrefix((*bp)[:0], cmd)
	if err != nil {
		c.srv.putBuffer(bp)
		releaseBody(release)
		return 0, fmt.Errorf("send to %s: %w", c, err)
	}
	inline := len(cmd.Body) <= inlineBodyMax
	if inline {
		b = append(b, cmd.Body...)
		releaseBody(release) // copied
		release = nil
	}
	*bp = b
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		c.srv.putBuffer(bp)
		releaseBody(release)
		return 0, ErrConnClosed
	}
	if !c.flushing {
		switch {
		case c.tls != nil:
			c.tls.kickWriter()
		case c.undetected:
			// Flushed once the first byte tells the protocol.
		default:
			// Wake is only called while the connection is open, so the
			// event loop (and its poller) is still running.
			if err := c.gc.Wake(c.flushFn); err != nil {
				c.srv.putBuffer(bp)
				releaseBody(release)
				return 0, fmt.Errorf("send to %s: %w", c, err)
			}
		}
		c.flushing = true
	}
	c.outq = append(c.outq, b)
	if !inline {
		c.outq = append(c.outq, cmd.Body)
	}
	c.outBufs = append(c.outBufs, bp)
	if release != nil {
		c.outBodies = append(c.outBodies, release)
	}
	return c.touch(), nil
}

// releaseBody calls a command's ReleaseBody, if it has one.
func releaseBody(release func()) {
	if release != nil {
		release()
	}
}

// maxIovecs bounds one writev call (Linux allows 1024 vectors).
const maxIovecs = 512

// flush runs on the event loop (as the callback of Wake) and writes every
// queued frame of a plaintext connection. gnet writes what the socket
// takes and copies the rest into its outbound buffer, so the frame buffers
// can be reused right after.
func (c *Conn) flush(gc gnet.Conn, _ error) error {
	q, bufs, bodies, closed := c.takeQueue()
	if !closed {
		for rest := q; len(rest) > 0; {
			n := min(len(rest), maxIovecs)
			if _, err := gc.Writev(rest[:n]); err != nil {
				break // gnet has closed the connection
			}
			rest = rest[n:]
		}
	}
	// Writev has written what the socket took and copied the rest into
	// gnet's outbound buffer: no queued byte is referenced any more.
	c.releaseQueue(q, bufs, bodies)
	if !closed {
		c.srv.pauseIfBehind(gc, c)
	}
	return nil
}

// takeQueue takes the frames queued by Send, with their pooled buffers and
// body releases, and reports whether the connection is closed.
func (c *Conn) takeQueue() (q [][]byte, bufs []*[]byte, bodies []func(), closed bool) {
	c.mu.Lock()
	q, bufs, bodies = c.outq, c.outBufs, c.outBodies
	c.outq, c.outBufs, c.outBodies = c.spareQ, c.spareBufs, c.spareRel
	c.spareQ, c.spareBufs, c.spareRel = nil, nil, nil
	c.flushing = false
	closed = c.closed
	c.mu.Unlock()
	return q, bufs, bodies, closed
}

// releaseQueue gives back what takeQueue returned once its bytes are
// written (or dropped), keeping the slices for the next batch.
func (c *Conn) releaseQueue(q [][]byte, bufs []*[]byte, bodies []func()) {
	for _, bp := range bufs {
		c.srv.putBuffer(bp)
	}
	for _, release := range bodies {
		release()
	}
	clear(q)
	clear(bufs)
	clear(bodies)
	c.mu.Lock()
	if c.spareQ == nil {
		c.spareQ, c.spareBufs, c.spareRel = q[:0], bufs[:0], bodies[:0]
	}
	c.mu.Unlock()
}

// Oneway sends a copy of cmd as a oneway request, with a fresh opaque and
// the oneway flag; no answer is expected. cmd itself is not modified, so
// one command may be sent to many connections at once (consumer
// notifications).
func (c *Conn) Oneway(cmd *Command) error {
	req := *cmd
	req.Opaque = c.srv.nextOpaque()
	req.Flag = (req.Flag | FlagOneway) &^ FlagResponse
	req.ReleaseBody = nil // a body shared by many sends is not one send's to release
	return c.Send(&req)
}

// Request sends a copy of cmd as a request to the client, with a fresh
// opaque and the response and oneway flags cleared, and waits for the
// answer matched by opaque (GET_CONSUMER_RUNNING_INFO and other synchronous
// broker-to-client calls). cmd itself is not modified. It fails with ctx's
// error when ctx ends first and with ErrConnClosed when the connection
// closes first.
func (c *Conn) Request(ctx context.Context, cmd *Command) (*Command, error) {
	req := *cmd
	cmd = &req
	cmd.Opaque = c.srv.nextOpaque()
	cmd.Flag &^= FlagResponse | FlagOneway
	cmd.ReleaseBody = nil // the caller's command, which it may send again
	ch := make(chan *Command, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrConnClosed
	}
	if c.pending == nil {
		c.pending = make(map[int32]chan *Command)
	}
	c.pending[cmd.Opaque] = ch
	c.awaiting.Store(int32(len(c.pending)))
	c.mu.Unlock()
	if err := c.Send(cmd); err != nil {
		c.forget(cmd.Opaque)
		return nil, err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, ErrConnClosed
		}
		return resp, nil
	case <-ctx.Done():
		c.forget(cmd.Opaque)
		return nil, fmt.Errorf("request code %d to %s: %w", cmd.Code, c, ctx.Err())
	}
}

func (c *Conn) forget(opaque int32) {
	c.mu.Lock()
	delete(c.pending, opaque)
	c.awaiting.Store(int32(len(c.pending)))
	c.mu.Unlock()
}

// deliver hands a response from the client to the Request waiting for it
// and reports whether one was waiting.
func (c *Conn) deliver(resp *Command) bool {
	c.mu.Lock()
	ch, ok := c.pending[resp.Opaque]
	delete(c.pending, resp.Opaque)
	c.awaiting.Store(int32(len(c.pending)))
	c.mu.Unlock()
	if ok {
		ch <- resp // buffered, and each channel gets at most one value
	}
	return ok
}

// noteClient records the language and version of the first request.
func (c *Conn) noteClient(req *Command) {
	if c.infoSeen.Load() {
		return
	}
	c.mu.Lock()
	if c.info.Language == "" && c.info.Version == 0 {
		c.info.Language = req.Language
		c.info.Version = req.Version
	}
	c.mu.Unlock()
	c.infoSeen.Store(true)
}

// touch records traffic now and returns the server clock it read.
func (c *Conn) touch() int64 {
	now := c.srv.clock()
	c.lastActive.Store(now)
	return now
}

// idleFor returns how long the connection has had no traffic.
func (c *Conn) idleFor(now int64) time.Duration {
	return time.Duration(now - c.lastActive.Load())
}

// markClosed records the close (called once, on the event loop) and
// returns the hooks to run and the pending requests to fail.
func (c *Conn) markClosed() ([]func(), map[int32]chan *Command) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	hooks, pending := c.hooks, c.pending
	c.hooks, c.pending = nil, nil
	c.awaiting.Store(0)
	c.cancel()
	return hooks, pending
}

// inlineBodyMax is the largest body copied into the header's buffer; larger
// bodies go out with writev, without a copy.
const inlineBodyMax = 4 << 10
