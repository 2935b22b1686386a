package remoting

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// movingAddr is one address whose server can be replaced, as a load
// balancer or a DNS name moves to another server: a pool's DialContext
// connects to the current server's listener, and counts its dials.
type movingAddr struct {
	to    atomic.Pointer[Server]
	dials atomic.Int32
}

func (m *movingAddr) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	m.dials.Add(1)
	var d net.Dialer
	return d.DialContext(ctx, network, m.to.Load().Addr().String())
}

// namedServer starts a server that answers GET_ROUTEINFO_BY_TOPIC with
// its name as remark and counts the requests it served.
func namedServer(t *testing.T, name string) (*Server, *atomic.Int32) {
	t.Helper()
	var served atomic.Int32
	mux := NewMux()
	mux.HandleFunc(GetRouteInfoByTopic, func(_ context.Context, conn *Conn, req *Command) {
		served.Add(1)
		_ = conn.Reply(req, NewResponse(req, Success, name))
	})
	s, _ := startServer(t, ServerConfig{GoAwayWait: time.Minute}, mux)
	return s, &served
}

func newTestPool(t *testing.T, opts ClientOptions) *ClientPool {
	t.Helper()
	p := NewClientPool(opts)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// invokeAsync runs InvokeAsync on c and waits for its callback.
func invokeAsync(t *testing.T, c *Client, req *Command) (*Command, error) {
	t.Helper()
	type answer struct {
		resp *Command
		err  error
	}
	got := make(chan answer, 1)
	if err := c.InvokeAsync(req, func(resp *Command, err error) { got <- answer{resp, err} }); err != nil {
		return nil, err
	}
	select {
	case a := <-got:
		return a.resp, a.err
	case <-time.After(10 * time.Second):
		t.Fatal("InvokeAsync callback never ran")
		return nil, nil
	}
}

// RocketMQ's enableReconnectForGoAway: a pooled client whose server
// answers GO_AWAY gets a new connection to the same address and sends the
// request once more there, synchronously and asynchronously; the old
// connection stays open for what is still due on it until its server
// closes it, and later requests use the new one.
func TestPoolReconnectsOnGoAway(t *testing.T) {
	for _, async := range []bool{false, true} {
		name := "sync"
		if async {
			name = "async"
		}
		t.Run(name, func(t *testing.T) {
			old, oldServed := namedServer(t, "old")
			next, nextServed := namedServer(t, "new")
			var addr movingAddr
			addr.to.Store(old)
			pool := newTestPool(t, ClientOptions{DialContext: addr.dial})
			invoke := func() (*Command, error) {
				req := NewRequest(GetRouteInfoByTopic, nil, nil)
				if !async {
					return pool.Invoke(testCtx(t), "ns:9876", req)
				}
				c, err := pool.Get(testCtx(t), "ns:9876")
				if err != nil {
					return nil, err
				}
				return invokeAsync(t, c, req)
			}
			if r, err := invoke(); err != nil || r.Remark != "old" {
				t.Fatalf("before going away: %v %v", r, err)
			}
			first, err := pool.Get(testCtx(t), "ns:9876")
			if err != nil {
				t.Fatal(err)
			}

			goAwayFor(t, old)
			addr.to.Store(next)
			r, err := invoke()
			if err != nil || r.Code != Success || r.Remark != "new" {
				t.Fatalf("request answered GO_AWAY: %v %v, want it sent once more to the new server", r, err)
			}
			if n := oldServed.Load(); n != 1 {
				t.Errorf("the going-away server served %d requests, want only the first", n)
			}
			if first.Closed() {
				t.Error("the connection that was answered GO_AWAY was closed; RocketMQ leaves it to its server")
			}
			if r, err := invoke(); err != nil || r.Remark != "new" {
				t.Fatalf("request after the reconnect: %v %v", r, err)
			}
			if n, d := nextServed.Load(), addr.dials.Load(); n != 2 || d != 2 {
				t.Errorf("new server served %d requests over %d dials in all, want 2 over 2", n, d)
			}

			// Its server's stop closes the old connection.
			if err := old.Shutdown(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "old connection closed", first.Closed)
		})
	}
}

// Requests in flight on one connection that all get GO_AWAY share one
// reconnect, as RocketMQ's channel wrapper reconnects once per channel.
func TestPoolReconnectsOnceForConcurrentGoAways(t *testing.T) {
	old, _ := namedServer(t, "old")
	next, nextServed := namedServer(t, "new")
	var addr movingAddr
	addr.to.Store(old)
	pool := newTestPool(t, ClientOptions{DialContext: addr.dial})
	c, err := pool.Get(testCtx(t), "ns:9876")
	if err != nil {
		t.Fatal(err)
	}
	goAwayFor(t, old)
	addr.to.Store(next)
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if r, err := c.Invoke(testCtx(t), NewRequest(GetRouteInfoByTopic, nil, nil)); err != nil || r.Remark != "new" {
				t.Errorf("request answered GO_AWAY: %v %v, want it served by the new server", r, err)
			}
		})
	}
	wg.Wait()
	if d := addr.dials.Load(); d != 2 {
		t.Errorf("%d dials, want 2: the first and one reconnect for all %d GO_AWAY answers", d, n)
	}
	if got := nextServed.Load(); got != n {
		t.Errorf("new server served %d requests, want %d", got, n)
	}
}

// The request sent once more reaches the same going-away server (nothing
// else behind the address): its second GO_AWAY fails the request with
// ErrGoAway, synchronously and asynchronously, without a third try.
func TestPoolGoAwayTwiceFails(t *testing.T) {
	for _, async := range []bool{false, true} {
		s, served := namedServer(t, "old")
		var addr movingAddr
		addr.to.Store(s)
		pool := newTestPool(t, ClientOptions{DialContext: addr.dial})
		c, err := pool.Get(testCtx(t), "ns:9876")
		if err != nil {
			t.Fatal(err)
		}
		goAwayFor(t, s)
		req := NewRequest(GetRouteInfoByTopic, nil, nil)
		var r *Command
		if async {
			r, err = invokeAsync(t, c, req)
		} else {
			r, err = pool.Invoke(testCtx(t), "ns:9876", req)
		}
		if !errors.Is(err, ErrGoAway) || !strings.Contains(err.Error(), "twice") {
			t.Errorf("async %v: GO_AWAY on the new connection too: %v %v, want ErrGoAway twice", async, r, err)
		}
		if d := addr.dials.Load(); d != 2 {
			t.Errorf("async %v: %d dials, want 2 (the first and one reconnect)", async, d)
		}
		if n := served.Load(); n != 0 {
			t.Errorf("async %v: the going-away server served %d requests", async, n)
		}
	}
}

// With NoReconnectForGoAway (enableReconnectForGoAway=false) a GO_AWAY
// answer fails the request with ErrGoAway; the connection of a
// synchronous call is closed, as RocketMQ closes the channel of a failed
// invokeSync, so the next request dials again.
func TestPoolNoReconnectForGoAway(t *testing.T) {
	old, _ := namedServer(t, "old")
	next, _ := namedServer(t, "new")
	var addr movingAddr
	addr.to.Store(old)
	pool := newTestPool(t, ClientOptions{DialContext: addr.dial, NoReconnectForGoAway: true})
	c, err := pool.Get(testCtx(t), "ns:9876")
	if err != nil {
		t.Fatal(err)
	}
	goAwayFor(t, old)
	addr.to.Store(next)
	if r, err := invokeAsync(t, c, NewRequest(GetRouteInfoByTopic, nil, nil)); !errors.Is(err, ErrGoAway) || strings.Contains(err.Error(), "twice") {
		t.Fatalf("async request answered GO_AWAY: %v %v, want ErrGoAway at once", r, err)
	}
	if c.Closed() || addr.dials.Load() != 1 {
		t.Fatalf("after an async GO_AWAY: closed %v, %d dials; want the connection kept, no dial", c.Closed(), addr.dials.Load())
	}
	if r, err := pool.Invoke(testCtx(t), "ns:9876", NewRequest(GetRouteInfoByTopic, nil, nil)); !errors.Is(err, ErrGoAway) {
		t.Fatalf("request answered GO_AWAY: %v %v, want ErrGoAway", r, err)
	}
	if !c.Closed() || addr.dials.Load() != 1 {
		t.Fatalf("after a sync GO_AWAY: closed %v, %d dials; want the connection closed, no dial", c.Closed(), addr.dials.Load())
	}
	if r, err := pool.Invoke(testCtx(t), "ns:9876", NewRequest(GetRouteInfoByTopic, nil, nil)); err != nil || r.Remark != "new" {
		t.Fatalf("next request: %v %v, want a new connection to the new server", r, err)
	}
}

// ReconnectForGoAway is asked at each GO_AWAY, as RocketMQ reads
// enableReconnectForGoAway from its client config at each one: turned off
// while the client runs, the next GO_AWAY fails its request; turned on
// again, the next is sent once more on a new connection.
func TestPoolReconnectForGoAwayReadAtEachGoAway(t *testing.T) {
	var on atomic.Bool
	servers := []*Server{}
	for _, name := range []string{"first", "second", "third"} {
		s, _ := namedServer(t, name)
		servers = append(servers, s)
	}
	var addr movingAddr
	addr.to.Store(servers[0])
	pool := newTestPool(t, ClientOptions{DialContext: addr.dial, ReconnectForGoAway: on.Load})
	invoke := func() (*Command, error) {
		return pool.Invoke(testCtx(t), "ns:9876", NewRequest(GetRouteInfoByTopic, nil, nil))
	}
	if r, err := invoke(); err != nil || r.Remark != "first" {
		t.Fatalf("before going away: %v %v", r, err)
	}
	goAwayFor(t, servers[0])
	addr.to.Store(servers[1])
	if r, err := invoke(); !errors.Is(err, ErrGoAway) || strings.Contains(err.Error(), "twice") {
		t.Fatalf("GO_AWAY with the setting off: %v %v, want ErrGoAway at once", r, err)
	}
	if r, err := invoke(); err != nil || r.Remark != "second" {
		t.Fatalf("request after the failed one: %v %v, want a new connection to the second server", r, err)
	}
	on.Store(true)
	goAwayFor(t, servers[1])
	addr.to.Store(servers[2])
	if r, err := invoke(); err != nil || r.Remark != "third" {
		t.Fatalf("GO_AWAY with the setting turned on: %v %v, want the request sent once more to the third server", r, err)
	}
}

// An AddrClient is a pool of one address: a request answered GO_AWAY,
// synchronous or asynchronous, goes once more on a new connection, and
// a oneway one after it goes on that connection too.
func TestAddrClientReconnectsOnGoAway(t *testing.T) {
	old, oldServed := namedServer(t, "old")
	next, nextServed := namedServer(t, "new")
	var addr movingAddr
	addr.to.Store(old)
	c, err := DialAddr(testCtx(t), "ns:9876", ClientOptions{DialContext: addr.dial})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if c.Addr() != "ns:9876" {
		t.Errorf("Addr %q", c.Addr())
	}
	goAwayFor(t, old)
	addr.to.Store(next)
	if r, err := c.Invoke(testCtx(t), NewRequest(GetRouteInfoByTopic, nil, nil)); err != nil || r.Remark != "new" {
		t.Fatalf("sync request answered GO_AWAY: %v %v, want it sent once more to the new server", r, err)
	}
	got := make(chan error, 1)
	err = c.InvokeAsync(NewRequest(GetRouteInfoByTopic, nil, nil), func(r *Command, err error) {
		if err == nil && r.Remark != "new" {
			err = errors.New("answered by " + r.Remark)
		}
		got <- err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("async request: %v", err)
	}
	if err := c.InvokeOneway(testCtx(t), NewRequest(GetRouteInfoByTopic, nil, nil)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the oneway request served by the new server", func() bool { return nextServed.Load() == 3 })
	if n, d := oldServed.Load(), addr.dials.Load(); n != 0 || d != 2 {
		t.Errorf("old server served %d, %d dials; want 0 and 2", n, d)
	}
	_ = c.Close()
	if _, err := c.Invoke(testCtx(t), NewRequest(GetRouteInfoByTopic, nil, nil)); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Invoke after Close: %v, want ErrPoolClosed", err)
	}
}

// DialAddr fails at once for an address nothing listens at.
func TestDialAddrFailsWithoutServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	_ = ln.Close()
	if c, err := DialAddr(testCtx(t), a, ClientOptions{}); err == nil {
		_ = c.Close()
		t.Fatal("DialAddr to a closed port succeeded")
	}
}
