package remoting

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// acceptingServer accepts connections and runs serve on each.
func acceptingServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serve(c) })
		}
	})
	return ln.Addr().String()
}

// askThenCloseServer sends the client one server-initiated request on
// the first connection, then closes it; later connections stay open.
func askThenCloseServer(t *testing.T) string {
	var once sync.Once
	return acceptingServer(t, func(c net.Conn) {
		first := false
		once.Do(func() { first = true })
		if first {
			frame, _ := Encode(NewRequest(CheckTransactionState, nil, nil))
			_, _ = c.Write(frame)
			time.Sleep(100 * time.Millisecond)
			_ = c.Close()
			return
		}
		_, _ = io.Copy(io.Discard, c)
		_ = c.Close()
	})
}

// A Get that finds a failed client does not wait for the failed client's
// Handlers (Close does): it used to, so a Handler still running made Get
// ignore its own ctx and blocked every other Get of that address.
func TestPoolGetDoesNotWaitForAFailedClientsHandlers(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	pool := NewClientPool(ClientOptions{Handler: func(_ context.Context, req *Command) *Command {
		entered <- struct{}{}
		<-release
		return nil
	}})
	addr := askThenCloseServer(t)
	c, err := pool.Get(testCtx(t), addr)
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	<-c.Done()

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	got := make(chan error, 1)
	go func() { _, err := pool.Get(ctx, addr); got <- err }()
	select {
	case <-got:
	case <-time.After(2 * time.Second):
		close(release)
		<-got
		pool.Close()
		t.Fatal("pool.Get with a 300ms ctx still blocked after 2s: it waits for the failed client's Handler")
	}
	close(release)
	pool.Close()
}

// A Handler may ask the pool for the address of the client it runs on
// (the gRPC proxy's CHECK_TRANSACTION_STATE looks up routes): when that
// connection has failed, Get used to close the failed client, whose Close
// waited for this very Handler, a deadlock that kept the address's dial
// slot taken for ever.
func TestPoolHandlerMayGetItsOwnFailedAddress(t *testing.T) {
	var pool *ClientPool
	var addr string
	res := make(chan error, 1)
	pool = NewClientPool(ClientOptions{Handler: func(hctx context.Context, req *Command) *Command {
		<-hctx.Done() // the connection has failed
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := pool.Get(ctx, addr)
		res <- err
		return nil
	}})
	addr = askThenCloseServer(t)
	if _, err := pool.Get(testCtx(t), addr); err != nil {
		t.Fatal(err)
	}
	select {
	case <-res:
	case <-time.After(3 * time.Second):
		t.Fatal("Handler's pool.Get of its own (failed) address deadlocked")
	}
	// Other callers of the address are stuck too.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := pool.Get(ctx, addr); err != nil {
		t.Fatalf("later Get: %v", err)
	}
	pool.Close()
}

// A server that accepts but never answers (a hung process): after a
// timed-out Invoke the pool hands out a new client, as RocketMQ's
// NettyRemotingClient closes a channel on an invokeSync timeout
// (clientCloseSocketIfTimeout); it used to keep the same one for ever.
func TestPoolDropsAClientWhoseServerAnswersNothing(t *testing.T) {
	addr := acceptingServer(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c); _ = c.Close() })
	pool := NewClientPool(ClientOptions{})
	pool.silence = 50 * time.Millisecond
	defer pool.Close()
	first, err := pool.Get(testCtx(t), addr)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := pool.Invoke(ctx, addr, NewRequest(GetRouteInfoByTopic, nil, nil))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("invoke: %v", err)
		}
	}
	c, err := pool.Get(testCtx(t), addr)
	if err != nil {
		t.Fatal(err)
	}
	if c == first {
		t.Fatal("after timed-out calls the pool still hands out the same never-answering connection")
	}
	if !errors.Is(first.Err(), ErrUnresponsive) {
		t.Fatalf("the dropped client's error %v, want ErrUnresponsive", first.Err())
	}
}

// Concurrent Gets share one dial, which used to run with the first
// caller's ctx: when that ctx ended, every waiter got its error though its
// own ctx was alive.
func TestPoolDialOutlivesTheFirstCallersContext(t *testing.T) {
	addr := acceptingServer(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c); _ = c.Close() })
	dialing := make(chan struct{}, 2)
	pool := NewClientPool(ClientOptions{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		dialing <- struct{}{}
		select { // a slow connect (SYN lost once, say)
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return (&net.Dialer{}).DialContext(ctx, network, a)
	}})
	defer pool.Close()
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	go func() { _, _ = pool.Get(short, addr) }()
	<-dialing
	_, err := pool.Get(testCtx(t), addr) // 10s ctx
	if err != nil {
		t.Fatalf("Get with a live ctx failed with another caller's ctx error: %v", err)
	}
}

// A caller's deadline shorter than unresponsiveAfter does not drop the
// client, which other callers share: only a server silent that long does.
func TestPoolKeepsAClientAfterAShortDeadline(t *testing.T) {
	addr := acceptingServer(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c); _ = c.Close() })
	pool := NewClientPool(ClientOptions{})
	defer pool.Close()
	first, err := pool.Get(testCtx(t), addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = pool.Invoke(ctx, addr, NewRequest(GetRouteInfoByTopic, nil, nil))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("invoke: %v", err)
	}
	if c, err := pool.Get(testCtx(t), addr); err != nil || c != first || first.Closed() {
		t.Fatalf("after a 50 ms deadline: client %p (first %p, closed %v), %v; want the same one", c, first, first.Closed(), err)
	}
}

// A oneway request to an address nobody listens on fails with the dial's
// error (the caller logs it: the name server's NOTIFY_MIN_BROKER_ID_CHANGE
// to a broker that went away), and the failure does not break the pool:
// a later request to a live address goes through.
func TestPoolOnewayDialFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()

	pool := NewClientPool(ClientOptions{})
	t.Cleanup(func() { _ = pool.Close() })
	err = pool.InvokeOneway(testCtx(t), dead, NewRequest(NotifyMinBrokerIDChange, nil, nil))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("oneway to %s: got %v, want a refused dial", dead, err)
	}

	got := make(chan int32, 1)
	s, _ := startServer(t, ServerConfig{}, HandlerFunc(func(_ context.Context, _ *Conn, req *Command) {
		got <- req.Code
	}))
	if err := pool.InvokeOneway(testCtx(t), s.Addr().String(), NewRequest(NotifyMinBrokerIDChange, nil, nil)); err != nil {
		t.Fatalf("oneway to a live server after a failed dial: %v", err)
	}
	select {
	case code := <-got:
		if code != NotifyMinBrokerIDChange {
			t.Fatalf("server got code %d, want %d", code, NotifyMinBrokerIDChange)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the live server never got the oneway request")
	}
}
