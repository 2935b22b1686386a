package remoting

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// While a server goes away (GoAway, RocketMQ's enableShutdownGracefully),
// a request of a client newer than 5.3.1 (version 475) is answered
// GO_AWAY with RocketMQ's remark and never reaches the handler, a oneway
// one is dropped, and an older client (the Go client v2 says 317) is
// served as before; before GoAway every client is served.
func TestGoAwayAnswersNewerClientsOnly(t *testing.T) {
	var served atomic.Int32
	mux := NewMux()
	mux.HandleFunc(GetRouteInfoByTopic, func(ctx context.Context, conn *Conn, req *Command) {
		served.Add(1)
		echo(ctx, conn, req)
	})
	s, _ := startServer(t, ServerConfig{GoAwayWait: time.Minute}, mux)
	c := dialServer(t, s, ClientOptions{})
	invoke := func(version int32) *Command {
		t.Helper()
		req := NewRequest(GetRouteInfoByTopic, nil, nil)
		req.Version = version
		resp, err := c.Invoke(testCtx(t), req)
		if err != nil {
			t.Fatalf("invoke as version %d: %v", version, err)
		}
		return resp
	}
	if r := invoke(481); r.Code != Success {
		t.Fatalf("before GoAway a 5.3.4 client got %d %q", r.Code, r.Remark)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.GoAway(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !s.goingAway.Load() {
		if time.Now().After(deadline) {
			t.Fatal("GoAway never began")
		}
		time.Sleep(time.Millisecond)
	}
	before := served.Load()
	for _, v := range []int32{476, 481} {
		if r := invoke(v); r.Code != GoAway || r.Remark != "please go away" {
			t.Errorf("going away, version %d got %d %q, want GO_AWAY \"please go away\"", v, r.Code, r.Remark)
		}
	}
	oneway := NewRequest(GetRouteInfoByTopic, nil, nil)
	oneway.Version = 481
	if err := c.InvokeOneway(testCtx(t), oneway); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int32{317, 475} {
		if r := invoke(v); r.Code != Success {
			t.Errorf("going away, version %d got %d %q, want it served", v, r.Code, r.Remark)
		}
	}
	if got := served.Load() - before; got != 2 {
		t.Errorf("handler ran %d times while going away, want 2 (the clients of 5.3.1 and older)", got)
	}
	select {
	case err := <-done:
		t.Fatalf("GoAway returned before its wait or its context: %v", err)
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("GoAway cut by its context returned %v, want context.Canceled", err)
	}
}

// GoAway waits the configured time, and without one returns at once and
// leaves every client served.
func TestGoAwayWaitsItsTime(t *testing.T) {
	mux := NewMux()
	mux.HandleFunc(GetRouteInfoByTopic, echo)
	s, _ := startServer(t, ServerConfig{}, mux)
	if err := s.GoAway(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	c := dialServer(t, s, ClientOptions{})
	req := NewRequest(GetRouteInfoByTopic, nil, nil)
	req.Version = 481
	if r, err := c.Invoke(testCtx(t), req); err != nil || r.Code != Success {
		t.Fatalf("after GoAway without a wait: %v %v, want the request served", r, err)
	}

	s2, _ := startServer(t, ServerConfig{GoAwayWait: 200 * time.Millisecond}, mux)
	start := time.Now()
	if err := s2.GoAway(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("GoAway returned after %v, before its 200ms wait", waited)
	}
}
