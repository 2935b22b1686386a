package remoting

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// While a server goes away (GoAway, RocketMQ's enableShutdownGracefully),
// a request of a client newer than 5.3.1 (version 475) is answered
// GO_AWAY with RocketMQ's remark and never reaches the handler, a oneway
// one is dropped, and an older client (the Go client v2 says 317) is
// served as before; before GoAway every client is served. A client of no
// pool (Dial) fails the request with ErrGoAway, RocketMQ's remark in its
// message.
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
		req := NewRequest(GetRouteInfoByTopic, nil, nil)
		req.Version = v
		r, err := c.Invoke(testCtx(t), req)
		if !errors.Is(err, ErrGoAway) || !strings.Contains(err.Error(), "please go away") {
			t.Errorf("going away, version %d got %v %v, want ErrGoAway with \"please go away\"", v, r, err)
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

// goAwayFor starts s.GoAway on a goroutine, waits until it has begun and
// stops it at the end of the test.
func goAwayFor(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.GoAway(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitFor(t, "GoAway to begin", s.goingAway.Load)
}

// rawRequest writes a request of the given code, client version and
// opaque on c.
func rawRequest(t *testing.T, c net.Conn, code, version, opaque int32) {
	t.Helper()
	req := NewRequest(code, nil, nil)
	req.Version, req.Opaque = version, opaque
	writeCommand(t, c, req)
}

// readAnswers reads n answers from fr, by opaque.
func readAnswers(t *testing.T, fr *FrameReader, n int) map[int32]*Command {
	t.Helper()
	out := make(map[int32]*Command, n)
	for range n {
		frame, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("read answer %d of %d: %v", len(out)+1, n, err)
		}
		resp, err := Decode(frame)
		if err != nil {
			t.Fatal(err)
		}
		out[resp.Opaque] = resp
	}
	return out
}

// RocketMQ decides on GO_AWAY before it submits a request to a
// processor's pool: a newer client's request that finds the worker queue
// full while the server goes away is answered GO_AWAY, not SYSTEM_BUSY,
// an older client's SYSTEM_BUSY; a request queued before the server began
// to go away is served.
func TestGoAwayComesBeforeOverload(t *testing.T) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	mux := NewMux()
	mux.HandleFunc(SendMessage, func(ctx context.Context, conn *Conn, req *Command) {
		if req.Opaque == 1 {
			started <- struct{}{}
			<-release
		}
		echo(ctx, conn, req)
	})
	s, _ := startServer(t, ServerConfig{Workers: 1, QueueSize: 1, GoAwayWait: time.Minute}, mux)
	c := rawConn(t, s)
	fr := NewFrameReader(c, DefaultMaxFrameSize)
	rawRequest(t, c, SendMessage, 481, 1)
	<-started // the only worker is busy
	rawRequest(t, c, SendMessage, 481, 2)
	waitFor(t, "queued request", func() bool { return len(s.jobs) == 1 })
	goAwayFor(t, s)
	rawRequest(t, c, SendMessage, 481, 3)
	rawRequest(t, c, SendMessage, 317, 4)
	early := readAnswers(t, fr, 2)
	if r := early[3]; r == nil || r.Code != GoAway || r.Remark != goAwayRemark {
		t.Errorf("5.3.4 client's request on a full queue while going away: %v, want GO_AWAY", r)
	}
	if r := early[4]; r == nil || r.Code != SystemBusy || !strings.HasPrefix(r.Remark, "[OVERLOAD]") {
		t.Errorf("older client's request on a full queue while going away: %v, want SYSTEM_BUSY [OVERLOAD]", r)
	}
	close(release)
	late := readAnswers(t, fr, 2)
	for _, opaque := range []int32{1, 2} {
		if r := late[opaque]; r == nil || r.Code != Success {
			t.Errorf("request %d, taken before the server began to go away: %v, want it served", opaque, r)
		}
	}
}

// A code the server has no handler for: RocketMQ's broker and name server
// have a default processor, so their processor table never refuses a code
// and GO_AWAY comes first; otherwise the default answers
// REQUEST_CODE_NOT_SUPPORTED.
func TestGoAwayComesBeforeNotSupported(t *testing.T) {
	const unknown = 9999
	s, _ := startServer(t, ServerConfig{GoAwayWait: time.Minute}, NewMux())
	c := rawConn(t, s)
	fr := NewFrameReader(c, DefaultMaxFrameSize)
	rawRequest(t, c, unknown, 481, 1)
	if r := readAnswers(t, fr, 1)[1]; r == nil || r.Code != RequestCodeNotSupported {
		t.Fatalf("unknown code before going away: %v, want REQUEST_CODE_NOT_SUPPORTED", r)
	}
	goAwayFor(t, s)
	rawRequest(t, c, unknown, 481, 2)
	rawRequest(t, c, unknown, 475, 3)
	got := readAnswers(t, fr, 2)
	if r := got[2]; r == nil || r.Code != GoAway {
		t.Errorf("unknown code of a 5.3.4 client while going away: %v, want GO_AWAY", r)
	}
	if r := got[3]; r == nil || r.Code != RequestCodeNotSupported {
		t.Errorf("unknown code of a 5.3.1 client while going away: %v, want REQUEST_CODE_NOT_SUPPORTED", r)
	}
}
