package remoting

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Client errors.
var (
	// ErrClientClosed is returned by calls on a Client after Close, and
	// given to calls still waiting when Close is called.
	ErrClientClosed = errors.New("client closed")
	// ErrTimeout is given to an InvokeAsync callback when no answer came
	// within ClientOptions.AsyncTimeout.
	ErrTimeout = errors.New("request timed out")
	// ErrGoAway is returned for a request its server answered GO_AWAY
	// (it is shutting down gracefully), as RocketMQ's client throws on
	// that answer rather than returning it: by a client of no ClientPool
	// or with reconnecting off (NoReconnectForGoAway, or
	// ReconnectForGoAway answering false) at once, by a pooled one when the
	// request sent once more on a new connection was answered GO_AWAY
	// again or no new connection could be made.
	ErrGoAway = errors.New("server is going away (GO_AWAY)")
)

// Client defaults.
const (
	// DefaultAsyncTimeout bounds the wait of InvokeAsync calls.
	DefaultAsyncTimeout = 30 * time.Second
	// DefaultMaxHandlers bounds the server-to-client requests handled at
	// once by one client.
	DefaultMaxHandlers = 64
	sendQueueLen       = 1024
	maxWriteBatch      = 64
)

// ClientOptions configure a Client. Zero values select the defaults.
type ClientOptions struct {
	// MaxFrameSize is the largest frame accepted from the server
	// (DefaultMaxFrameSize).
	MaxFrameSize int
	// Handler answers requests the server sends to the client (transaction
	// checks, consumer notifications). It runs on its own goroutine; a
	// non-nil result is sent back as the answer unless the request is
	// oneway. Without a Handler, requests are answered
	// REQUEST_CODE_NOT_SUPPORTED.
	Handler func(ctx context.Context, req *Command) *Command
	// MaxHandlers bounds the Handler calls running at once
	// (DefaultMaxHandlers); requests beyond it are answered SYSTEM_BUSY.
	MaxHandlers int
	// AsyncTimeout bounds the wait of InvokeAsync (DefaultAsyncTimeout).
	AsyncTimeout time.Duration
	// KeepAlive is the TCP keep-alive period (0: Go's default, negative:
	// off).
	KeepAlive time.Duration
	// Log receives the client's log lines; the zero Logger discards them.
	Log zerolog.Logger
	// BeforeRequest, when set, is called with every request the client
	// sends, just before it is encoded: the place to sign it (a RocketMQ
	// client's RPC hook). It gets a copy of the command; it must not change
	// the ExtFields map the caller passed, only replace it.
	BeforeRequest func(req *Command)
	// TLS, when set, makes the connection TLS (RocketMQ's tls.enable);
	// the handshake is part of Dial.
	TLS *tls.Config
	// DialContext, when set, opens the TCP connection instead of a
	// net.Dialer with KeepAlive (through a tunnel, say, or with bytes
	// written ahead of the client's own, as a load balancer writes a
	// PROXY protocol header).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// NoReconnectForGoAway turns off RocketMQ's enableReconnectForGoAway
	// (on by default): a client of a ClientPool whose server answers a
	// request (Invoke, InvokeAsync; a oneway one gets no answer) GO_AWAY
	// replaces its connection in the pool with a new one to the same
	// address and sends the request once more on that, leaving the old
	// connection open for the answers still due on it. Without it, or
	// for a client of no pool, the request fails with ErrGoAway, and a
	// pooled client that answered an Invoke so is closed and dropped,
	// as RocketMQ closes the channel of a failed synchronous call.
	NoReconnectForGoAway bool
	// ReconnectForGoAway, when set, is asked at each GO_AWAY answer
	// whether to reconnect (true) or fail the request, in place of
	// NoReconnectForGoAway: for a setting that changes while the client
	// runs, as RocketMQ's NettyRemotingClient reads its NettyClientConfig's
	// enableReconnectForGoAway at each GO_AWAY (the broker's through
	// UPDATE_BROKER_CONFIG).
	ReconnectForGoAway func() bool
}

// reconnectForGoAway reports whether a GO_AWAY answer is to be followed
// by a new connection now.
func (o *ClientOptions) reconnectForGoAway() bool {
	if o.ReconnectForGoAway != nil {
		return o.ReconnectForGoAway()
	}
	return !o.NoReconnectForGoAway
}

func (o ClientOptions) withDefaults() ClientOptions {
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = DefaultMaxFrameSize
	}
	if o.MaxHandlers <= 0 {
		o.MaxHandlers = DefaultMaxHandlers
	}
	if o.AsyncTimeout <= 0 {
		o.AsyncTimeout = DefaultAsyncTimeout
	}
	return o
}

// result is the outcome of one request.
type result struct {
	resp *Command
	err  error
}

// call is one request waiting for its answer: either ch (Invoke) or cb
// (InvokeAsync) is set.
type call struct {
	ch    chan result
	cb    func(*Command, error)
	timer *time.Timer
}

// Client is one connection to a Remoting server. Any number of requests may
// be in flight at once; answers are matched by opaque.
//
// Goroutines: a reader (frames in, answers to waiting calls), a writer
// (batches queued frames into one writev) and one per server-to-client
// request being handled. All stop when the connection fails or Close is
// called; Close waits for them.
type Client struct {
	addr string
	conn net.Conn
	opts ClientOptions
	log  zerolog.Logger

	opaque atomic.Int32
	// lastRead is when the last frame arrived (UnixNano; the dial's time
	// before any), for telling a server that stopped answering.
	lastRead atomic.Int64
	sendq    chan []byte
	sem      chan struct{} // slots for Handler calls
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{} // closed by fail
	wg       sync.WaitGroup

	mu       sync.Mutex // guards pending, closed, closeErr
	pending  map[int32]*call
	closed   bool
	closeErr error

	// pool is the ClientPool that dialed the client, which gives it a
	// new connection when its server goes away; nil for Dial's.
	pool *ClientPool
}

// Dial connects to addr ("host:port").
func Dial(ctx context.Context, addr string, opts ClientOptions) (*Client, error) {
	return dial(ctx, addr, opts, nil)
}

// dial connects to addr for pool (nil for none).
func dial(ctx context.Context, addr string, opts ClientOptions, pool *ClientPool) (*Client, error) {
	opts = opts.withDefaults()
	dial := opts.DialContext
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: opts.KeepAlive}).DialContext
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if opts.TLS != nil {
		tc := tls.Client(conn, opts.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("dial %s: TLS handshake: %w", addr, err)
		}
		conn = tc
	}
	c := &Client{
		addr:    addr,
		conn:    conn,
		opts:    opts,
		log:     opts.Log.With().Str("remote", addr).Logger(),
		sendq:   make(chan []byte, sendQueueLen),
		sem:     make(chan struct{}, opts.MaxHandlers),
		done:    make(chan struct{}),
		pending: make(map[int32]*call),
		pool:    pool,
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.lastRead.Store(time.Now().UnixNano())
	c.wg.Add(2)
	go c.readLoop()
	go c.writeLoop()
	return c, nil
}

// Addr returns the address the client dialed.
func (c *Client) Addr() string { return c.addr }

// LocalAddr returns the client side of the connection.
func (c *Client) LocalAddr() net.Addr { return c.conn.LocalAddr() }

// Done returns a channel closed when the connection has failed or the
// client was closed.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the client stopped (ErrClientClosed after Close), or nil
// while it works.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeErr
}

// silentSince reports whether nothing arrived from the server since t.
func (c *Client) silentSince(t time.Time) bool { return c.lastRead.Load() < t.UnixNano() }

// Closed reports whether the client has stopped working.
func (c *Client) Closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Close closes the connection, fails the calls still waiting with
// ErrClientClosed and waits for the client's goroutines. It must not be
// called from a Handler or an InvokeAsync callback of the same client.
func (c *Client) Close() error {
	c.fail(ErrClientClosed)
	c.wg.Wait()
	return nil
}

// Invoke sends a copy of cmd as a request and waits for its answer, until
// ctx ends. The copy gets a fresh opaque; cmd itself is not modified. A
// GO_AWAY answer is not returned: see ErrGoAway and
// ClientOptions.NoReconnectForGoAway and ReconnectForGoAway.
func (c *Client) Invoke(ctx context.Context, cmd *Command) (*Command, error) {
	resp, err := c.invoke(ctx, cmd)
	if err != nil || resp.Code != GoAway {
		return resp, err
	}
	next, err := c.goneAway(ctx, cmd, resp, true, c.reconnects())
	if err != nil {
		return nil, err
	}
	if resp, err = next.invoke(ctx, cmd); err == nil && resp.Code == GoAway {
		return nil, goAwayError(next.addr, cmd, resp, true)
	}
	return resp, err
}

// reconnects reports whether a GO_AWAY answer now gets a new connection:
// the client has a pool, and the setting (ClientOptions.ReconnectForGoAway
// or NoReconnectForGoAway) is on at this moment.
func (c *Client) reconnects() bool { return c.pool != nil && c.opts.reconnectForGoAway() }

// goneAway is what a client does when its server answered cmd's request
// (resp) GO_AWAY: without reconnect (no pool, or the setting off as the
// answer came), the request fails (and a pooled client that answered a
// synchronous call so is dropped, sync); else its pool replaces it, and
// the client to send the request to once more is returned.
func (c *Client) goneAway(ctx context.Context, cmd, resp *Command, sync, reconnect bool) (*Client, error) {
	if !reconnect {
		err := goAwayError(c.addr, cmd, resp, false)
		if c.pool != nil && sync {
			c.pool.drop(c.addr, c, err)
		}
		return nil, err
	}
	c.log.Info().Int32("code", cmd.Code).Msg("server answered GO_AWAY: reconnecting to send the request once more")
	next, err := c.pool.renew(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("invoke code %d on %s: %w (%s), and no new connection: %w", cmd.Code, c.addr, ErrGoAway, resp.Remark, err)
	}
	return next, nil
}

// goAwayError is the error of cmd's request that addr answered GO_AWAY
// (resp), again when sent once more (twice).
func goAwayError(addr string, cmd, resp *Command, twice bool) error {
	again := ""
	if twice {
		again = " twice"
	}
	return fmt.Errorf("invoke code %d on %s: %w%s (%s)", cmd.Code, addr, ErrGoAway, again, resp.Remark)
}

// invoke is Invoke without the GO_AWAY handling.
func (c *Client) invoke(ctx context.Context, cmd *Command) (*Command, error) {
	req := *cmd
	req.Opaque = c.opaque.Add(1)
	req.Flag &^= FlagResponse | FlagOneway
	if c.opts.BeforeRequest != nil {
		c.opts.BeforeRequest(&req)
	}
	frame, err := Encode(&req)
	if err != nil {
		return nil, fmt.Errorf("invoke code %d on %s: %w", req.Code, c.addr, err)
	}
	cl := &call{ch: make(chan result, 1)}
	if err := c.register(req.Opaque, cl); err != nil {
		return nil, err
	}
	if err := c.enqueue(ctx, frame); err != nil {
		c.take(req.Opaque)
		return nil, fmt.Errorf("invoke code %d on %s: %w", req.Code, c.addr, err)
	}
	select {
	case r := <-cl.ch:
		if r.err != nil {
			return nil, fmt.Errorf("invoke code %d on %s: %w", req.Code, c.addr, r.err)
		}
		return r.resp, nil
	case <-ctx.Done():
		c.take(req.Opaque)
		return nil, fmt.Errorf("invoke code %d on %s: %w", req.Code, c.addr, ctx.Err())
	}
}

// InvokeAsync sends a copy of cmd as a request and returns once it is
// queued; cb receives the answer or an error (ErrTimeout after
// AsyncTimeout, the connection's error when it fails; a GO_AWAY answer as
// Invoke has it). cb runs exactly once unless InvokeAsync itself returns
// an error, on the reader goroutine, a timer goroutine, the goroutine that
// closes the client or, after a GO_AWAY, one of this client's: it must be
// quick and must not call Close.
func (c *Client) InvokeAsync(cmd *Command, cb func(*Command, error)) error {
	deadline := time.Now().Add(c.opts.AsyncTimeout)
	return c.invokeAsync(cmd, c.opts.AsyncTimeout, func(resp *Command, err error) {
		if err != nil || resp.Code != GoAway {
			cb(resp, err)
			return
		}
		c.retryAsync(cmd, resp, deadline, cb)
	})
}

// retryAsync sends cmd's request, answered GO_AWAY (resp), once more on
// the connection that replaces this one, by deadline, and gives cb the
// outcome. It runs on the reader goroutine, so the wait for the new
// connection runs on a goroutine of the client's own (Close waits for it;
// the client's failure ends the wait).
func (c *Client) retryAsync(cmd, resp *Command, deadline time.Time, cb func(*Command, error)) {
	if !c.reconnects() {
		_, err := c.goneAway(c.ctx, cmd, resp, false, false)
		cb(nil, err)
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithDeadline(c.ctx, deadline)
		defer cancel()
		next, err := c.goneAway(ctx, cmd, resp, false, true)
		if err == nil {
			left := time.Until(deadline)
			if left <= 0 {
				err = fmt.Errorf("invoke code %d on %s: %w after GO_AWAY", cmd.Code, c.addr, ErrTimeout)
			} else {
				err = next.invokeAsync(cmd, left, func(resp *Command, err error) {
					if err == nil && resp.Code == GoAway {
						resp, err = nil, goAwayError(next.addr, cmd, resp, true)
					}
					cb(resp, err)
				})
			}
		}
		if err != nil {
			c.callback(cb, nil, err)
		}
	}()
}

// invokeAsync is InvokeAsync without the GO_AWAY handling, waiting at
// most timeout for the answer.
func (c *Client) invokeAsync(cmd *Command, timeout time.Duration, cb func(*Command, error)) error {
	req := *cmd
	req.Opaque = c.opaque.Add(1)
	req.Flag &^= FlagResponse | FlagOneway
	if c.opts.BeforeRequest != nil {
		c.opts.BeforeRequest(&req)
	}
	frame, err := Encode(&req)
	if err != nil {
		return fmt.Errorf("invoke code %d on %s: %w", req.Code, c.addr, err)
	}
	cl := &call{cb: cb}
	opaque := req.Opaque
	c.mu.Lock()
	if c.closed {
		err := c.closeErr
		c.mu.Unlock()
		return err
	}
	c.pending[opaque] = cl
	cl.timer = time.AfterFunc(timeout, func() {
		if c.take(opaque) != nil {
			cb(nil, fmt.Errorf("invoke code %d on %s: %w", req.Code, c.addr, ErrTimeout))
		}
	})
	c.mu.Unlock()
	// The wait for room in the send queue (a server that stopped reading
	// fills it) ends with the call's own timeout.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := c.enqueue(ctx, frame); err != nil {
		if c.take(opaque) != nil {
			cl.timer.Stop()
			return fmt.Errorf("invoke code %d on %s: %w", req.Code, c.addr, err)
		}
		// fail() already handed the error to cb.
		return nil
	}
	return nil
}

// InvokeOneway sends a copy of cmd with the oneway flag and does not wait
// for an answer; it returns once the frame is queued or ctx ends.
func (c *Client) InvokeOneway(ctx context.Context, cmd *Command) error {
	req := *cmd
	req.Opaque = c.opaque.Add(1)
	req.Flag = (req.Flag | FlagOneway) &^ FlagResponse
	if c.opts.BeforeRequest != nil {
		c.opts.BeforeRequest(&req)
	}
	frame, err := Encode(&req)
	if err != nil {
		return fmt.Errorf("oneway code %d to %s: %w", req.Code, c.addr, err)
	}
	if err := c.enqueue(ctx, frame); err != nil {
		return fmt.Errorf("oneway code %d to %s: %w", req.Code, c.addr, err)
	}
	return nil
}

func (c *Client) register(opaque int32, cl *call) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.closeErr
	}
	c.pending[opaque] = cl
	return nil
}

// take removes and returns the call waiting for opaque, or nil.
func (c *Client) take(opaque int32) *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.pending[opaque]
	delete(c.pending, opaque)
	return cl
}

// enqueue hands a frame to the writer.
func (c *Client) enqueue(ctx context.Context, frame []byte) error {
	select {
	case <-c.done:
		return c.Err()
	default:
	}
	select {
	case c.sendq <- frame:
		return nil
	case <-c.done:
		return c.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fail stops the client once: it records err, closes the connection and
// hands err to every waiting call.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.closeErr = err
	pending := c.pending
	c.pending = make(map[int32]*call)
	close(c.done)
	c.mu.Unlock()

	c.cancel()
	_ = c.conn.Close()
	if !errors.Is(err, ErrClientClosed) {
		c.log.Debug().Err(err).Msg("connection failed")
	}
	for _, cl := range pending {
		c.finish(cl, result{err: err})
	}
}

// finish delivers r to a call.
func (c *Client) finish(cl *call, r result) {
	if cl.cb == nil {
		cl.ch <- r // buffered; each call finishes once
		return
	}
	cl.timer.Stop()
	c.callback(cl.cb, r.resp, r.err)
}

// callback runs an InvokeAsync callback, logging a panic of it.
func (c *Client) callback(cb func(*Command, error), resp *Command, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error().Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack()).Msg("InvokeAsync callback panicked")
		}
	}()
	cb(resp, err)
}

// readLoop reads frames until the connection fails.
func (c *Client) readLoop() {
	defer c.wg.Done()
	fr := NewFrameReader(c.conn, c.opts.MaxFrameSize)
	for {
		frame, err := fr.ReadFrame()
		if err != nil {
			c.fail(fmt.Errorf("read from %s: %w", c.addr, err))
			return
		}
		c.lastRead.Store(time.Now().UnixNano())
		cmd, err := Decode(frame)
		if err != nil {
			c.log.Warn().Err(err).Msg("closing connection: undecodable frame")
			c.fail(fmt.Errorf("read from %s: %w", c.addr, err))
			return
		}
		if cmd.IsResponse() {
			if cl := c.take(cmd.Opaque); cl != nil {
				c.finish(cl, result{resp: cmd})
			} else {
				c.log.Debug().Int32("opaque", cmd.Opaque).Msg("response matches no pending request")
			}
			continue
		}
		c.handle(cmd)
	}
}

// handle runs the Handler for a server-to-client request on its own
// goroutine, or answers at once when there is none or too many run.
func (c *Client) handle(req *Command) {
	if c.opts.Handler == nil {
		c.answer(req, NotSupportedResponse(req))
		return
	}
	select {
	case c.sem <- struct{}{}:
	default:
		c.answer(req, NewResponse(req, SystemBusy, "[OVERLOAD]client busy"))
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() { <-c.sem }()
		var resp *Command
		func() {
			defer func() {
				if p := recover(); p != nil {
					c.log.Error().Int32("code", req.Code).Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack()).
						Msg("client handler panicked")
					resp = NewResponse(req, SystemError, PanicRemark+fmt.Sprint(p))
				}
			}()
			resp = c.opts.Handler(c.ctx, req)
		}()
		if resp != nil {
			c.answer(req, resp)
		}
	}()
}

// answer sends resp for req unless req is oneway.
func (c *Client) answer(req, resp *Command) {
	if req.IsOneway() {
		return
	}
	resp.Opaque = req.Opaque
	resp.Flag |= FlagResponse
	frame, err := Encode(resp)
	if err != nil {
		c.log.Error().Err(err).Int32("code", req.Code).Msg("cannot encode answer to server request")
		return
	}
	if err := c.enqueue(c.ctx, frame); err != nil {
		c.log.Debug().Err(err).Int32("code", req.Code).Msg("answer to server request not sent")
	}
}

// writeLoop writes queued frames, batching what is queued into one writev.
func (c *Client) writeLoop() {
	defer c.wg.Done()
	batch := make([][]byte, 0, maxWriteBatch)
	for {
		select {
		case f := <-c.sendq:
			batch = append(batch[:0], f)
		drain:
			for len(batch) < maxWriteBatch {
				select {
				case f := <-c.sendq:
					batch = append(batch, f)
				default:
					break drain
				}
			}
			bufs := net.Buffers(batch)
			if _, err := bufs.WriteTo(c.conn); err != nil {
				c.fail(fmt.Errorf("write to %s: %w", c.addr, err))
				return
			}
			clear(batch)
		case <-c.done:
			return
		}
	}
}
