package remoting

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrPoolClosed is returned by ClientPool methods after Close.
var ErrPoolClosed = errors.New("client pool closed")

// ErrUnresponsive fails a pooled client whose server let a request time
// out without sending anything since it was sent.
var ErrUnresponsive = errors.New("server sent nothing until a request timed out")

// ErrAddrClosed fails the calls on a pooled client, and the Gets waiting
// for a dial, of an address CloseAddr closed.
var ErrAddrClosed = errors.New("connection closed: the address was taken out of use")

// unresponsiveAfter is how long a request must have waited, with nothing
// arriving from the server meanwhile, for its timeout to drop the client:
// a caller's short deadline alone (a gRPC client's, say) does not close a
// connection other callers share.
const unresponsiveAfter = 3 * time.Second

// poolDialTimeout bounds a dial the pool makes for its callers (RocketMQ's
// connectTimeoutMillis is 3 s): the dial is shared, so it does not end
// with the first caller's context.
const poolDialTimeout = 3 * time.Second

// ClientPool keeps one Client per server address and redials an address
// whose connection has failed. A client whose server answered nothing
// while a request timed out is dropped too (RocketMQ's client closes a
// channel on a timeout, clientCloseSocketIfTimeout): a hung process keeps
// its TCP connection open, and the next request dials again. A client
// whose server answers GO_AWAY is replaced by a new connection to the
// same address (ClientOptions.NoReconnectForGoAway, ReconnectForGoAway).
// The broker uses it to reach name servers, the gRPC proxy to reach
// brokers; AddrClient is a pool of one address.
type ClientPool struct {
	opts ClientOptions

	mu      sync.Mutex // guards clients, dialing and closed
	clients map[string]*Client
	dialing map[string]*dialing
	closed  bool
	done    chan struct{} // closed by Close
	// closing counts the goroutines closing dropped clients (waiting for
	// their handlers); Close waits for them.
	closing sync.WaitGroup
	// silence overrides unresponsiveAfter when set (tests).
	silence time.Duration
}

func (p *ClientPool) unresponsiveAfter() time.Duration {
	if p.silence > 0 {
		return p.silence
	}
	return unresponsiveAfter
}

// dialing is a dial in progress that concurrent Gets of the same address
// wait for.
type dialing struct {
	done chan struct{}
	c    *Client
	err  error
	// discarded is set (under the pool's mu) by CloseAddr: the dial's
	// client is closed rather than kept.
	discarded bool
}

// NewClientPool returns an empty pool whose clients use opts.
func NewClientPool(opts ClientOptions) *ClientPool {
	return &ClientPool{
		opts:    opts,
		clients: make(map[string]*Client),
		dialing: make(map[string]*dialing),
		done:    make(chan struct{}),
	}
}

// Get returns the working client for addr, dialing it if there is none.
// Concurrent Gets for one address share one dial.
func (p *ClientPool) Get(ctx context.Context, addr string) (*Client, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrPoolClosed
	}
	var stale *Client
	if c, ok := p.clients[addr]; ok {
		if !c.Closed() {
			p.mu.Unlock()
			return c, nil
		}
		delete(p.clients, addr)
		stale = c
	}
	d, inFlight := p.dialing[addr]
	if !inFlight {
		d = &dialing{done: make(chan struct{})}
		p.dialing[addr] = d
	}
	if stale != nil {
		// Already failed: Close only waits for its goroutines, whose
		// Handlers may call this pool for this address.
		p.closeLater(stale)
	}
	p.mu.Unlock()
	if !inFlight {
		p.closing.Add(1)
		go p.dial(addr, d)
	}
	select {
	case <-d.done:
		return d.c, d.err
	case <-ctx.Done():
		return nil, fmt.Errorf("dial %s: %w", addr, ctx.Err())
	}
}

// closeLater closes a client dropped from the pool on a goroutine of its
// own; the caller holds p.mu.
func (p *ClientPool) closeLater(c *Client) {
	p.closing.Add(1)
	go func() {
		defer p.closing.Done()
		_ = c.Close()
	}()
}

// dial dials addr for the Gets waiting on d, within poolDialTimeout, and
// keeps the client unless the pool closed meanwhile.
func (p *ClientPool) dial(addr string, d *dialing) {
	defer p.closing.Done()
	ctx, cancel := context.WithTimeout(context.Background(), poolDialTimeout)
	defer cancel()
	d.c, d.err = dial(ctx, addr, p.opts, p)
	p.mu.Lock()
	if p.dialing[addr] == d {
		delete(p.dialing, addr)
	}
	if d.err == nil {
		switch {
		case p.closed:
			defer func(c *Client) { _ = c.Close() }(d.c)
			d.c, d.err = nil, ErrPoolClosed
		case d.discarded:
			defer func(c *Client) { _ = c.Close() }(d.c)
			d.c, d.err = nil, fmt.Errorf("dial %s: %w", addr, ErrAddrClosed)
		default:
			p.clients[addr] = d.c
		}
	}
	p.mu.Unlock()
	close(d.done)
}

// Invoke sends cmd to addr through the pooled client and waits for the
// answer. When ctx's deadline passes at least unresponsiveAfter after the
// request went out and the server has sent nothing since, the client is
// dropped (ErrUnresponsive fails its other calls) and the next Get dials
// again.
func (p *ClientPool) Invoke(ctx context.Context, addr string, cmd *Command) (*Command, error) {
	c, err := p.Get(ctx, addr)
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	resp, err := c.Invoke(ctx, cmd)
	if errors.Is(err, context.DeadlineExceeded) && time.Since(sent) >= p.unresponsiveAfter() && c.silentSince(sent) {
		p.drop(addr, c, fmt.Errorf("%s: %w", addr, ErrUnresponsive))
	}
	return resp, err
}

// InvokeOneway sends cmd to addr through the pooled client without
// waiting for an answer: it returns once the request is queued on the
// connection, or with ctx's error when dialing or queueing outlasts it.
func (p *ClientPool) InvokeOneway(ctx context.Context, addr string, cmd *Command) error {
	c, err := p.Get(ctx, addr)
	if err != nil {
		return err
	}
	return c.InvokeOneway(ctx, cmd)
}

// drop fails c, the pool's client for addr, with err and forgets it.
func (p *ClientPool) drop(addr string, c *Client, err error) {
	c.fail(err)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.clients[addr] == c {
		delete(p.clients, addr)
		p.closeLater(c)
	}
}

// renew returns the client to send a request to once more after old's
// server answered it GO_AWAY, as RocketMQ's NettyRemotingClient
// reconnects its channel: while old is still the pool's client for its
// address, the pool forgets it (the next Get dials again) and keeps it
// open until its server closes it or the pool closes, for the answers
// still due on it; a client that replaced old already is used as it is.
func (p *ClientPool) renew(ctx context.Context, old *Client) (*Client, error) {
	p.mu.Lock()
	if p.clients[old.addr] == old {
		delete(p.clients, old.addr)
		p.closing.Add(1)
		go func() {
			defer p.closing.Done()
			select {
			case <-old.Done():
			case <-p.done:
			}
			_ = old.Close()
		}()
	}
	p.mu.Unlock()
	return p.Get(ctx, old.addr)
}

// CloseAddr closes the connection to addr and forgets it, as RocketMQ's
// NettyRemotingClient closes the channel of a name server no longer in
// its list (updateNameServerAddressList). Calls in flight on it fail with
// an error wrapping ErrAddrClosed, and so do the Gets waiting for a dial
// of addr under way, whose connection is closed as soon as it is made.
// A later Get dials addr again. It returns once the connection is closed,
// without waiting for the client's Handlers (Close waits for them); it
// may be called from a Handler.
func (p *ClientPool) CloseAddr(addr string) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	c, ok := p.clients[addr]
	if ok {
		delete(p.clients, addr)
		p.closing.Add(1)
	}
	if d, dialing := p.dialing[addr]; dialing {
		d.discarded = true
		delete(p.dialing, addr)
	}
	p.mu.Unlock()
	if !ok {
		return
	}
	c.fail(fmt.Errorf("%s: %w", addr, ErrAddrClosed))
	go func() {
		defer p.closing.Done()
		_ = c.Close()
	}()
}

// Close closes every client and makes later calls fail with ErrPoolClosed.
func (p *ClientPool) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
	}
	clients := p.clients
	p.clients = make(map[string]*Client)
	p.mu.Unlock()
	for _, c := range clients {
		_ = c.Close()
	}
	p.closing.Wait()
	return nil
}
