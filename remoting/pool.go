package remoting

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrPoolClosed is returned by ClientPool methods after Close.
var ErrPoolClosed = errors.New("client pool closed")

// ClientPool keeps one Client per server address and redials an address
// whose connection has failed. The broker uses it to reach name servers.
type ClientPool struct {
	opts ClientOptions

	mu      sync.Mutex // guards clients, dialing and closed
	clients map[string]*Client
	dialing map[string]*dialing
	closed  bool
}

// dialing is a dial in progress that concurrent Gets of the same address
// wait for.
type dialing struct {
	done chan struct{}
	c    *Client
	err  error
}

// NewClientPool returns an empty pool whose clients use opts.
func NewClientPool(opts ClientOptions) *ClientPool {
	return &ClientPool{
		opts:    opts,
		clients: make(map[string]*Client),
		dialing: make(map[string]*dialing),
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
	p.mu.Unlock()
	if stale != nil {
		_ = stale.Close() // already failed: only waits for its goroutines
	}
	if inFlight {
		select {
		case <-d.done:
			return d.c, d.err
		case <-ctx.Done():
			return nil, fmt.Errorf("dial %s: %w", addr, ctx.Err())
		}
	}

	d.c, d.err = Dial(ctx, addr, p.opts)
	p.mu.Lock()
	delete(p.dialing, addr)
	if d.err == nil {
		if p.closed {
			defer func(c *Client) { _ = c.Close() }(d.c)
			d.c, d.err = nil, ErrPoolClosed
		} else {
			p.clients[addr] = d.c
		}
	}
	p.mu.Unlock()
	close(d.done)
	return d.c, d.err
}

// Invoke sends cmd to addr through the pooled client and waits for the
// answer.
func (p *ClientPool) Invoke(ctx context.Context, addr string, cmd *Command) (*Command, error) {
	c, err := p.Get(ctx, addr)
	if err != nil {
		return nil, err
	}
	return c.Invoke(ctx, cmd)
}

// Close closes every client and makes later calls fail with ErrPoolClosed.
func (p *ClientPool) Close() error {
	p.mu.Lock()
	p.closed = true
	clients := p.clients
	p.clients = make(map[string]*Client)
	p.mu.Unlock()
	for _, c := range clients {
		_ = c.Close()
	}
	return nil
}
