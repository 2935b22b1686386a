package remoting

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// silentServer accepts connections, reads and never answers; ended
// receives one value per connection the client closed.
func silentServer(t *testing.T) (addr string, ended <-chan struct{}) {
	ch := make(chan struct{}, 16)
	addr = acceptingServer(t, func(c net.Conn) {
		_, _ = io.Copy(io.Discard, c)
		_ = c.Close()
		ch <- struct{}{}
	})
	return addr, ch
}

// waitEnded waits until the server side saw a connection end.
func waitEnded(t *testing.T, ended <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the server did not see the connection close", what)
	}
}

// CloseAddr closes the one address's connection (the server sees it end),
// fails the call in flight on it with ErrAddrClosed, leaves the other
// addresses' clients alone, and a later Get dials the address again.
func TestPoolCloseAddrClosesThatAddressOnly(t *testing.T) {
	gone, goneEnded := silentServer(t)
	kept, keptEnded := silentServer(t)
	pool := NewClientPool(ClientOptions{})
	defer pool.Close()
	first, err := pool.Get(testCtx(t), gone)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pool.Get(testCtx(t), kept)
	if err != nil {
		t.Fatal(err)
	}
	inFlight := make(chan error, 1)
	go func() {
		_, err := pool.Invoke(testCtx(t), gone, NewRequest(GetRouteInfoByTopic, nil, nil))
		inFlight <- err
	}()
	waitPending(t, first)

	pool.CloseAddr(gone)

	select {
	case err := <-inFlight:
		if !errors.Is(err, ErrAddrClosed) {
			t.Fatalf("call in flight on the closed address: %v, want ErrAddrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call in flight on the closed address still waits")
	}
	waitEnded(t, goneEnded, "closed address")
	if !first.Closed() || !errors.Is(first.Err(), ErrAddrClosed) {
		t.Fatalf("closed address's client: closed %v, err %v", first.Closed(), first.Err())
	}
	if c, err := pool.Get(testCtx(t), kept); err != nil || c != other || other.Closed() {
		t.Fatalf("other address: client %p (had %p, closed %v), %v; want it untouched", c, other, other.Closed(), err)
	}
	select {
	case <-keptEnded:
		t.Fatal("the other address's connection was closed")
	default:
	}
	again, err := pool.Get(testCtx(t), gone)
	if err != nil || again == first || again.Closed() {
		t.Fatalf("Get after CloseAddr: client %p (closed one %p), %v; want a new connection", again, first, err)
	}
	pool.CloseAddr("192.0.2.1:9876") // never used: nothing to do
}

// waitPending waits until c has a request waiting for its answer.
func waitPending(t *testing.T, c *Client) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		n := len(c.pending)
		c.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no request in flight")
		}
		time.Sleep(time.Millisecond)
	}
}

// CloseAddr during a dial of the address: the Gets waiting for it fail
// with ErrAddrClosed and the connection it makes is closed, not kept. A
// Get after CloseAddr dials anew instead of waiting for the old dial, and
// the old dial, ending, leaves the new one to the Gets that come after.
func TestPoolCloseAddrDuringADial(t *testing.T) {
	addr, ended := silentServer(t)
	gates := []*gate{newGate(), newGate()}
	var dials atomic.Int32
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() { // a client the pool lost must not keep the server waiting
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	pool := NewClientPool(ClientOptions{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		if n := int(dials.Add(1)); n <= len(gates) {
			<-gates[n-1].ch
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, a)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}})
	t.Cleanup(func() { _ = pool.Close() })
	t.Cleanup(func() { // before pool.Close, which waits for the dials
		for _, g := range gates {
			g.open()
		}
	})
	get := func() <-chan error {
		res := make(chan error, 1)
		go func() {
			c, err := pool.Get(testCtx(t), addr)
			if err == nil && c.Closed() {
				err = fmt.Errorf("Get returned a closed client: %w", c.Err())
			}
			res <- err
		}()
		return res
	}
	waitDials := func(n int32) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for dials.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d dials, want %d", dials.Load(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}

	old := get()
	waitDials(1)
	pool.CloseAddr(addr)
	fresh := get()
	waitDials(2)
	gates[0].open()
	if err := <-old; !errors.Is(err, ErrAddrClosed) {
		t.Fatalf("Get waiting for the discarded dial: %v, want ErrAddrClosed", err)
	}
	waitEnded(t, ended, "discarded dial")
	later := get()
	gates[1].open()
	if err := <-fresh; err != nil {
		t.Fatalf("Get after CloseAddr: %v", err)
	}
	if err := <-later; err != nil {
		t.Fatalf("Get after the discarded dial ended: %v", err)
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("%d dials, want 2: the discarded dial, ending, forgot the new one", n)
	}
}

// gate holds a dial until opened.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// CloseAddr racing Invokes and Gets of the same address (run with -race):
// every call either works or fails with ErrAddrClosed, and Close still
// ends every client.
func TestPoolCloseAddrRacingCalls(t *testing.T) {
	s, _ := startServer(t, ServerConfig{}, RespondFunc(func(_ context.Context, _ *Conn, req *Command) *Command {
		return NewResponse(req, Success, "")
	}))
	addr := s.Addr().String()
	pool := NewClientPool(ClientOptions{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := pool.Invoke(testCtx(t), addr, NewRequest(GetRouteInfoByTopic, nil, nil))
				if err != nil && !errors.Is(err, ErrAddrClosed) {
					errs <- err
					return
				}
			}
		})
	}
	for range 50 {
		pool.CloseAddr(addr)
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("call racing CloseAddr: %v, want success or ErrAddrClosed", err)
	}
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	pool.CloseAddr(addr) // after Close: nothing to do
	if _, err := pool.Get(testCtx(t), addr); !errors.Is(err, ErrPoolClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}
