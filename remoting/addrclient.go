package remoting

import "context"

// AddrClient is a connection to one server address that is replaced when
// it fails or its server goes away, as RocketMQ's NettyRemotingClient
// keeps one channel per address, dials it again at the next request after
// it failed, and reconnects it on a GO_AWAY answer
// (enableReconnectForGoAway). It is a ClientPool of that one address, for
// what talks to a single server: a slave to its master, the tools'
// connections to a broker or a name server. Its methods are safe for
// concurrent use.
type AddrClient struct {
	pool *ClientPool
	addr string
}

// DialAddr connects to addr with opts and returns its AddrClient. The
// first connection is made before it returns, so an address no server
// listens at fails here; later ones are made by the calls that need them.
func DialAddr(ctx context.Context, addr string, opts ClientOptions) (*AddrClient, error) {
	pool := NewClientPool(opts)
	if _, err := pool.Get(ctx, addr); err != nil {
		_ = pool.Close()
		return nil, err
	}
	return &AddrClient{pool: pool, addr: addr}, nil
}

// Addr returns the address the client connects to.
func (a *AddrClient) Addr() string { return a.addr }

// Invoke sends cmd as Client.Invoke does, on the address's connection
// (dialled again if it failed), and waits for the answer until ctx ends;
// a GO_AWAY answer sends it once more on a new connection (see
// ClientOptions.NoReconnectForGoAway).
func (a *AddrClient) Invoke(ctx context.Context, cmd *Command) (*Command, error) {
	return a.pool.Invoke(ctx, a.addr, cmd)
}

// InvokeAsync sends cmd as Client.InvokeAsync does, on the address's
// connection; when that has failed it first dials again, waiting for the
// new connection (at most 3 s, as a pool's dials).
func (a *AddrClient) InvokeAsync(cmd *Command, cb func(*Command, error)) error {
	c, err := a.pool.Get(context.Background(), a.addr)
	if err != nil {
		return err
	}
	return c.InvokeAsync(cmd, cb)
}

// InvokeOneway sends cmd as Client.InvokeOneway does, on the address's
// connection, dialled again within ctx if it failed.
func (a *AddrClient) InvokeOneway(ctx context.Context, cmd *Command) error {
	c, err := a.pool.Get(ctx, a.addr)
	if err != nil {
		return err
	}
	return c.InvokeOneway(ctx, cmd)
}

// Close closes the client's connections (the one in use and any left
// open for the answers still due after a GO_AWAY); later calls fail with
// ErrPoolClosed.
func (a *AddrClient) Close() error { return a.pool.Close() }
