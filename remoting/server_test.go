package remoting

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rs/zerolog"
)

// hangGuard bounds every wait of the package's tests: long enough for a
// 2-vCPU machine loaded by several -race runs, where a 6 MiB TLS echo or
// tens of MiB of pipelined frames take many seconds, so that it only
// catches a hang. No assertion depends on it.
const hangGuard = 2 * time.Minute

// waitFor polls cond until it holds, failing the test after hangGuard.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// testCtx is the context of one call of a test, ending after hangGuard
// or with the test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

func startServer(t *testing.T, cfg ServerConfig, h Handler) (*Server, *testutil.SyncBuffer) {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	cfg.Addr = "127.0.0.1:0"
	if cfg.EventLoops == 0 {
		cfg.EventLoops = 2
	}
	s := NewServer(cfg, h, zerolog.New(logs).Level(zerolog.DebugLevel))
	if err := s.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s, logs
}

func dialServer(t *testing.T, s *Server, opts ClientOptions) *Client {
	t.Helper()
	c, err := Dial(testCtx(t), s.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rawConn is a plain TCP connection for sending hand-made bytes.
func rawConn(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(hangGuard))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func writeCommand(t *testing.T, c net.Conn, cmd *Command) {
	t.Helper()
	frame, err := Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
}

// expectClosed reads until the server closes the connection.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection still open")
	}
}

// echo answers with the request's code as remark, ext fields and body.
func echo(_ context.Context, conn *Conn, req *Command) {
	resp := NewResponse(req, Success, strconv.Itoa(int(req.Code)))
	resp.ExtFields = req.ExtFields
	resp.Body = req.Body
	_ = conn.Reply(req, resp)
}

func TestRequestResponse(t *testing.T) {
	mux := NewMux()
	mux.HandleFunc(GetRouteInfoByTopic, echo)
	s, _ := startServer(t, ServerConfig{}, mux)
	c := dialServer(t, s, ClientOptions{})

	req := NewRequest(GetRouteInfoByTopic, map[string]string{"topic": "T"}, []byte("body"))
	resp, err := c.Invoke(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != Success || resp.Remark != "105" || resp.ExtFields["topic"] != "T" || string(resp.Body) != "body" ||
		!resp.IsResponse() || resp.Opaque == 0 || resp.Version != CurrentVersion {
		t.Fatalf("response %v", resp)
	}
	if req.Opaque != 0 || req.Flag != 0 {
		t.Fatalf("Invoke changed the caller's command: %v", req)
	}

	// A large body goes out through writev without a copy.
	big := bytes.Repeat([]byte("0123456789"), 100_000)
	resp, err = c.Invoke(testCtx(t), NewRequest(GetRouteInfoByTopic, nil, big))
	if err != nil || !bytes.Equal(resp.Body, big) {
		t.Fatalf("large body: %v", err)
	}
	if n := s.ConnCount(); n != 1 {
		t.Fatalf("ConnCount = %d", n)
	}
	info := s.Conns()[0].ClientInfo()
	if info.Language != "GO" || info.Version != CurrentVersion {
		t.Fatalf("client info %+v", info)
	}
}

func TestPipelining(t *testing.T) {
	mux := NewMux()
	mux.HandleFunc(SendMessage, echo)
	s, _ := startServer(t, ServerConfig{Workers: 8}, mux)
	c := dialServer(t, s, ClientOptions{})

	const goroutines, each = 32, 64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				n := strconv.Itoa(g*each + i)
				resp, err := c.Invoke(testCtx(t), NewRequest(SendMessage, map[string]string{"n": n}, nil))
				if err == nil && resp.ExtFields["n"] != n {
					err = fmt.Errorf("request %s answered with %s", n, resp.ExtFields["n"])
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}

	const async = 2000
	var asyncWG sync.WaitGroup
	asyncWG.Add(async)
	var asyncBad atomic.Int32
	for i := range async {
		n := "a" + strconv.Itoa(i)
		err := c.InvokeAsync(NewRequest(SendMessage, map[string]string{"n": n}, nil), func(resp *Command, err error) {
			defer asyncWG.Done()
			if err != nil || resp.ExtFields["n"] != n {
				asyncBad.Add(1)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	asyncWG.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := asyncBad.Load(); n > 0 {
		t.Errorf("%d async requests failed or were mismatched", n)
	}
}

func TestOnewayIsNotAnswered(t *testing.T) {
	served := make(chan int32, 4)
	mux := NewMux()
	mux.HandleFunc(UpdateConsumerOffset, func(ctx context.Context, conn *Conn, req *Command) {
		echo(ctx, conn, req) // Reply must ignore oneway requests
		served <- req.Opaque
	})
	s, _ := startServer(t, ServerConfig{}, mux)
	raw := rawConn(t, s)
	fr := NewFrameReader(raw, 0)

	writeCommand(t, raw, &Command{Code: UpdateConsumerOffset, Opaque: 1, Flag: FlagOneway})
	if op := <-served; op != 1 {
		t.Fatalf("served opaque %d", op)
	}
	writeCommand(t, raw, &Command{Code: UpdateConsumerOffset, Opaque: 2})
	frame, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := Decode(frame)
	if err != nil || resp.Opaque != 2 {
		t.Fatalf("first frame from the server: %v %v; the oneway request must not be answered", resp, err)
	}

	// The client's InvokeOneway reaches the handler and gets no answer.
	c := dialServer(t, s, ClientOptions{})
	if err := c.InvokeOneway(testCtx(t), NewRequest(UpdateConsumerOffset, nil, nil)); err != nil {
		t.Fatal(err)
	}
	<-served
	<-served
}

func TestServerToClientRequest(t *testing.T) {
	// Request and Oneway send copies: the caller's ReleaseBody is its own.
	var released atomic.Int32
	t.Cleanup(func() {
		if n := released.Load(); n != 0 {
			t.Errorf("the copies' sends released the callers' bodies %d times", n)
		}
	})
	mux := NewMux()
	mux.HandleFunc(HeartBeat, func(ctx context.Context, conn *Conn, req *Command) {
		check := NewRequest(CheckTransactionState, map[string]string{"msgId": "M1"}, nil)
		check.ReleaseBody = func() { released.Add(1) }
		answer, err := conn.Request(ctx, check)
		if check.Opaque != 0 || check.Flag != 0 {
			t.Errorf("Request changed the caller's command: %v", check)
		}
		if err != nil {
			_ = conn.Reply(req, NewResponse(req, SystemError, err.Error()))
			return
		}
		resp := NewResponse(req, Success, "")
		resp.ExtFields = map[string]string{"state": answer.ExtFields["state"], "code": strconv.Itoa(int(answer.Code))}
		_ = conn.Reply(req, resp)
	})
	s, _ := startServer(t, ServerConfig{}, mux)
	c := dialServer(t, s, ClientOptions{Handler: func(_ context.Context, req *Command) *Command {
		if req.Code != CheckTransactionState || req.ExtFields["msgId"] != "M1" {
			return NewResponse(req, SystemError, "unexpected")
		}
		resp := NewResponse(req, Success, "")
		resp.ExtFields = map[string]string{"state": "COMMIT"}
		return resp
	}})
	resp, err := c.Invoke(testCtx(t), NewRequest(HeartBeat, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != Success || resp.ExtFields["state"] != "COMMIT" || resp.ExtFields["code"] != "0" {
		t.Fatalf("response %v", resp)
	}

	// A oneway notification reaches the client's handler with the oneway
	// flag; whatever the handler returns is not sent back.
	notified := make(chan *Command, 1)
	c3 := dialServer(t, s, ClientOptions{Handler: func(_ context.Context, req *Command) *Command {
		notified <- req
		return NewResponse(req, Success, "must not be sent")
	}})
	if _, err := c3.Invoke(testCtx(t), NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	<-notified // the transaction check of the heartbeat above
	note := NewRequest(NotifyConsumerIDsChanged, map[string]string{"consumerGroup": "G"}, nil)
	note.ReleaseBody = func() { released.Add(1) }
	for _, conn := range s.Conns() {
		if err := conn.Oneway(note); err != nil {
			t.Fatal(err)
		}
	}
	if got := <-notified; got.Code != NotifyConsumerIDsChanged || !got.IsOneway() || got.ExtFields["consumerGroup"] != "G" {
		t.Fatalf("notification %v", got)
	}
	if note.Opaque != 0 || note.Flag != 0 {
		t.Fatalf("Oneway changed the caller's command: %v", note)
	}

	// Without a Handler the client answers REQUEST_CODE_NOT_SUPPORTED.
	c2 := dialServer(t, s, ClientOptions{})
	resp, err = c2.Invoke(testCtx(t), NewRequest(HeartBeat, nil, nil))
	if err != nil || resp.ExtFields["code"] != strconv.Itoa(int(RequestCodeNotSupported)) {
		t.Fatalf("response %v %v", resp, err)
	}
}

// held is a request a handler keeps to answer later.
type held struct {
	conn *Conn
	req  *Command
}

func TestHeldResponse(t *testing.T) {
	holds := make(chan held, 1)
	mux := NewMux()
	mux.Handle(PullMessage, RespondFunc(func(_ context.Context, conn *Conn, req *Command) *Command {
		holds <- held{conn, req}
		return nil // answered later
	}))
	mux.Handle(QueryConsumerOffset, RespondFunc(func(_ context.Context, _ *Conn, req *Command) *Command {
		return NewResponse(req, QueryNotFound, "")
	}))
	s, _ := startServer(t, ServerConfig{Workers: 1}, mux)
	c := dialServer(t, s, ClientOptions{})

	pulled := make(chan *Command, 1)
	go func() {
		resp, err := c.Invoke(testCtx(t), NewRequest(PullMessage, nil, nil))
		if err != nil {
			t.Error(err)
		}
		pulled <- resp
	}()
	h := <-holds
	// The only worker is free again while the pull is held.
	resp, err := c.Invoke(testCtx(t), NewRequest(QueryConsumerOffset, nil, nil))
	if err != nil || resp.Code != QueryNotFound {
		t.Fatalf("query while pull held: %v %v", resp, err)
	}
	select {
	case r := <-pulled:
		t.Fatalf("held pull answered early: %v", r)
	default:
	}
	if err := h.conn.Reply(h.req, NewResponse(h.req, PullNotFound, "")); err != nil {
		t.Fatal(err)
	}
	if r := <-pulled; r == nil || r.Code != PullNotFound {
		t.Fatalf("held pull: %v", r)
	}
}

func TestUnknownCodeAndPanic(t *testing.T) {
	mux := NewMux()
	mux.HandleFunc(SendMessage, func(context.Context, *Conn, *Command) { panic("boom") })
	s, logs := startServer(t, ServerConfig{}, mux)
	c := dialServer(t, s, ClientOptions{})

	resp, err := c.Invoke(testCtx(t), NewRequest(9999, nil, nil))
	if err != nil || resp.Code != RequestCodeNotSupported || resp.Remark != " request type 9999 not supported" {
		t.Fatalf("unknown code: %v %v", resp, err)
	}
	resp, err = c.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil))
	if err != nil || resp.Code != SystemError || !strings.Contains(resp.Remark, "boom") {
		t.Fatalf("panic: %v %v", resp, err)
	}
	if !strings.Contains(logs.String(), "handler panicked") {
		t.Fatalf("no log line for the panic: %s", logs)
	}
	// The connection still works.
	resp, err = c.Invoke(testCtx(t), NewRequest(9998, nil, nil))
	if err != nil || resp.Code != RequestCodeNotSupported {
		t.Fatalf("after panic: %v %v", resp, err)
	}
}

// Conn.Serve (here through ServeFunc) answers a request later, off the worker, as the worker would:
// the handler's response is sent, and a panic is answered SYSTEM_ERROR and
// logged instead of ending the process.
func TestServeLater(t *testing.T) {
	mux := NewMux()
	mux.Handle(SendMessage, RespondFunc(func(_ context.Context, conn *Conn, req *Command) *Command {
		go conn.ServeFunc(req, func() *Command {
			if req.ExtFields["panic"] == "true" {
				panic("late boom")
			}
			return NewResponse(req, Success, "late")
		})
		return nil
	}))
	s, logs := startServer(t, ServerConfig{}, mux)
	c := dialServer(t, s, ClientOptions{})
	resp, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil))
	if err != nil || resp.Code != Success || resp.Remark != "late" {
		t.Fatalf("answered later: %v %v", resp, err)
	}
	resp, err = c.Invoke(testCtx(t), NewRequest(SendMessage, map[string]string{"panic": "true"}, nil))
	if err != nil || resp.Code != SystemError || !strings.Contains(resp.Remark, "late boom") {
		t.Fatalf("panic answered later: %v %v", resp, err)
	}
	if !strings.Contains(logs.String(), "handler panicked") {
		t.Fatalf("no log line for the late panic: %s", logs)
	}
}

func TestBinaryRequestAnsweredInBinary(t *testing.T) {
	mux := NewMux()
	mux.HandleFunc(SendMessageV2, echo)
	s, _ := startServer(t, ServerConfig{}, mux)
	raw := rawConn(t, s)
	writeCommand(t, raw, &Command{Code: SendMessageV2, Language: "JAVA", Opaque: 5,
		ExtFields: map[string]string{"a": "PG"}, SerializeType: SerializeRocketMQ})
	frame, err := NewFrameReader(raw, 0).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if frame[4] != SerializeRocketMQ {
		t.Fatalf("answered with serialize type %d", frame[4])
	}
	resp, err := Decode(frame)
	if err != nil || resp.Opaque != 5 || resp.ExtFields["a"] != "PG" || !resp.IsResponse() {
		t.Fatalf("%v %v", resp, err)
	}
}

func TestBadInputClosesConnection(t *testing.T) {
	s, logs := startServer(t, ServerConfig{MaxFrameSize: 1024, IdleTimeout: 200 * time.Millisecond}, NewMux())

	t.Run("truncated frame then EOF", func(t *testing.T) {
		raw := rawConn(t, s)
		_, _ = raw.Write(unhex(t, "00000064 00000010 7b22"))
		_ = raw.(*net.TCPConn).CloseWrite()
		expectClosed(t, raw)
	})
	t.Run("truncated frame then silence", func(t *testing.T) {
		raw := rawConn(t, s)
		_, _ = raw.Write(unhex(t, "00000064 00000010 7b22"))
		expectClosed(t, raw) // idle timeout
		waitFor(t, "idle log line", func() bool { return strings.Contains(logs.String(), "closing idle connection") })
	})
	t.Run("oversized frame", func(t *testing.T) {
		raw := rawConn(t, s)
		_, _ = raw.Write(unhex(t, "00000800 00000010"))
		expectClosed(t, raw)
		waitFor(t, "oversize log line", func() bool { return strings.Contains(logs.String(), "frame too large") })
	})
	t.Run("negative length", func(t *testing.T) {
		raw := rawConn(t, s)
		_, _ = raw.Write(unhex(t, "ffffffff 00000010"))
		expectClosed(t, raw)
	})
	t.Run("malformed JSON header", func(t *testing.T) {
		raw := rawConn(t, s)
		_, _ = raw.Write(append(unhex(t, "0000000b 00000007"), `{"code"`...))
		expectClosed(t, raw)
		waitFor(t, "decode log line", func() bool { return strings.Contains(logs.String(), "undecodable frame") })
	})
	t.Run("unknown serialize type", func(t *testing.T) {
		raw := rawConn(t, s)
		_, _ = raw.Write(unhex(t, "00000006 05000002 7b7d"))
		expectClosed(t, raw)
	})
	waitFor(t, "all connections gone", func() bool { return s.ConnCount() == 0 })
}

// A request that finds the one worker busy and the queue full is
// answered SYSTEM_BUSY at once, over plaintext and over TLS alike.
func TestOverloadAnswersSystemBusy(t *testing.T) {
	t.Run("plaintext", func(t *testing.T) {
		testOverload(t, func(cfg ServerConfig, h Handler) (*Server, ClientOptions) {
			s, _ := startServer(t, cfg, h)
			return s, ClientOptions{}
		})
	})
	t.Run("tls", func(t *testing.T) {
		testOverload(t, func(cfg ServerConfig, h Handler) (*Server, ClientOptions) {
			s, _ := startTLSServer(t, TLSEnforcing, cfg, h)
			return s, ClientOptions{TLS: clientTLS()}
		})
	})
}

func testOverload(t *testing.T, start func(ServerConfig, Handler) (*Server, ClientOptions)) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	mux := NewMux()
	mux.HandleFunc(SendMessage, func(ctx context.Context, conn *Conn, req *Command) {
		started <- struct{}{}
		<-release
		echo(ctx, conn, req)
	})
	s, opts := start(ServerConfig{Workers: 1, QueueSize: 1}, mux)
	c := dialServer(t, s, opts)

	results := make(chan *Command, 2)
	invoke := func() {
		resp, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil))
		if err != nil {
			t.Error(err)
		}
		results <- resp
	}
	go invoke()
	<-started // the only worker is busy
	go invoke()
	waitFor(t, "queued request", func() bool { return len(s.jobs) == 1 })
	resp, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil))
	if err != nil || resp.Code != SystemBusy || !strings.HasPrefix(resp.Remark, "[OVERLOAD]") {
		t.Fatalf("third request: %v %v", resp, err)
	}
	close(release)
	for range 2 {
		if r := <-results; r == nil || r.Code != Success {
			t.Fatalf("queued request: %v", r)
		}
	}
}

func TestConnTrackingAndClose(t *testing.T) {
	closed := make(chan uint64, 4)
	mux := NewMux()
	mux.HandleFunc(HeartBeat, func(_ context.Context, conn *Conn, req *Command) {
		conn.SetClientInfo(ClientInfo{ClientID: req.ExtFields["id"], Language: req.Language, Version: req.Version})
		conn.SetValue("k", "v")
		if v, loaded := conn.LoadOrStoreValue("once", req.ExtFields["id"]); loaded || v != req.ExtFields["id"] {
			t.Errorf("LoadOrStoreValue on a new conn: %v %v", v, loaded)
		}
		if v, loaded := conn.LoadOrStoreValue("once", "other"); !loaded || v != req.ExtFields["id"] {
			t.Errorf("LoadOrStoreValue again: %v %v", v, loaded)
		}
		conn.OnClose(func() { closed <- conn.ID() })
		_ = conn.Reply(req, NewResponse(req, Success, ""))
	})
	s, _ := startServer(t, ServerConfig{}, mux)
	c1 := dialServer(t, s, ClientOptions{})
	c2 := dialServer(t, s, ClientOptions{})
	for i, c := range []*Client{c1, c2} {
		if _, err := c.Invoke(testCtx(t), NewRequest(HeartBeat, map[string]string{"id": strconv.Itoa(i)}, nil)); err != nil {
			t.Fatal(err)
		}
	}
	conns := s.Conns()
	if len(conns) != 2 {
		t.Fatalf("%d conns", len(conns))
	}
	ids := map[string]bool{}
	for _, conn := range conns {
		ids[conn.ClientInfo().ClientID] = true
		if conn.Value("k") != "v" || s.Conn(conn.ID()) != conn || conn.RemoteAddr() == nil || conn.LocalAddr() == nil {
			t.Fatalf("conn %v", conn)
		}
	}
	if !ids["0"] || !ids["1"] {
		t.Fatalf("client ids %v", ids)
	}

	// Client-side close runs the hook.
	_ = c1.Close()
	id := <-closed
	waitFor(t, "conn removed", func() bool { return s.Conn(id) == nil && s.ConnCount() == 1 })

	// Server-side close fails the client's pending calls.
	remaining := s.Conns()[0]
	if err := remaining.Close(); err != nil {
		t.Fatal(err)
	}
	<-closed
	<-remaining.Done()
	if !remaining.Closed() {
		t.Fatal("not closed")
	}
	if err := remaining.Send(NewRequest(HeartBeat, nil, nil)); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("send after close: %v", err)
	}
	ran := false
	remaining.OnClose(func() { ran = true })
	if !ran {
		t.Fatal("OnClose after close must run at once")
	}
	<-c2.Done()
	if _, err := c2.Invoke(testCtx(t), NewRequest(HeartBeat, nil, nil)); err == nil {
		t.Fatal("invoke on a closed client succeeded")
	}
}

func TestShutdownWithHeldRequest(t *testing.T) {
	holds := make(chan held, 1)
	mux := NewMux()
	mux.HandleFunc(PullMessage, func(_ context.Context, conn *Conn, req *Command) { holds <- held{conn, req} })
	logs := &testutil.SyncBuffer{}
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0", EventLoops: 1}, mux, zerolog.New(logs))
	if err := s.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	c := dialServer(t, s, ClientOptions{})
	failed := make(chan error, 1)
	go func() {
		_, err := c.Invoke(testCtx(t), NewRequest(PullMessage, nil, nil))
		failed <- err
	}()
	h := <-holds
	if err := s.Shutdown(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-failed; err == nil {
		t.Fatal("held request succeeded after shutdown")
	}
	if err := h.conn.Reply(h.req, NewResponse(h.req, Success, "")); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("reply after shutdown: %v", err)
	}
	select {
	case <-h.conn.Context().Done():
	default:
		t.Fatal("handler context not done after shutdown")
	}
	if err := s.Shutdown(testCtx(t)); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	if err := s.Start(testCtx(t)); !errors.Is(err, ErrServerStarted) {
		t.Fatalf("restart: %v", err)
	}
}

func TestStartFailsOnBusyAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := NewServer(ServerConfig{Addr: ln.Addr().String()}, NewMux(), zerolog.Nop())
	if err := s.Start(testCtx(t)); err == nil {
		t.Fatal("Start on a busy address succeeded")
	}
	if err := s.Shutdown(testCtx(t)); err != nil {
		t.Fatalf("shutdown after failed start: %v", err)
	}
	if err := NewServer(ServerConfig{}, NewMux(), zerolog.Nop()).Shutdown(testCtx(t)); !errors.Is(err, ErrServerNotStarted) {
		t.Fatalf("shutdown before start: %v", err)
	}
}

func TestClientAsyncTimeoutAndClose(t *testing.T) {
	holds := make(chan held, 8)
	mux := NewMux()
	mux.HandleFunc(PullMessage, func(_ context.Context, conn *Conn, req *Command) { holds <- held{conn, req} })
	s, _ := startServer(t, ServerConfig{}, mux)
	c := dialServer(t, s, ClientOptions{AsyncTimeout: 50 * time.Millisecond})

	got := make(chan error, 1)
	if err := c.InvokeAsync(NewRequest(PullMessage, nil, nil), func(_ *Command, err error) { got <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrTimeout) {
		t.Fatalf("async: %v, want ErrTimeout", err)
	}
	<-holds

	// Invoke honours ctx.
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() { <-holds; cancel() }()
	if _, err := c.Invoke(ctx, NewRequest(PullMessage, nil, nil)); !errors.Is(err, context.Canceled) {
		t.Fatalf("invoke: %v, want context.Canceled", err)
	}

	// Close fails waiting calls.
	waiting := make(chan error, 1)
	go func() {
		_, err := c.Invoke(testCtx(t), NewRequest(PullMessage, nil, nil))
		waiting <- err
	}()
	<-holds
	_ = c.Close()
	if err := <-waiting; !errors.Is(err, ErrClientClosed) {
		t.Fatalf("waiting call: %v, want ErrClientClosed", err)
	}
	if err := c.InvokeAsync(NewRequest(PullMessage, nil, nil), func(*Command, error) {}); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("async after close: %v", err)
	}
	if err := c.InvokeOneway(testCtx(t), NewRequest(PullMessage, nil, nil)); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("oneway after close: %v", err)
	}
	if !c.Closed() || !errors.Is(c.Err(), ErrClientClosed) {
		t.Fatal("client state after close")
	}
}

func TestClientPool(t *testing.T) {
	mux := NewMux()
	mux.HandleFunc(GetRouteInfoByTopic, echo)
	s, _ := startServer(t, ServerConfig{}, mux)
	pool := NewClientPool(ClientOptions{})
	defer pool.Close()
	addr := s.Addr().String()

	var wg sync.WaitGroup
	clients := make([]*Client, 8)
	for i := range clients {
		wg.Go(func() {
			c, err := pool.Get(testCtx(t), addr)
			if err != nil {
				t.Error(err)
			}
			clients[i] = c
		})
	}
	wg.Wait()
	for _, c := range clients[1:] {
		if c != clients[0] {
			t.Fatal("concurrent Gets dialed more than one client")
		}
	}
	waitFor(t, "one server connection", func() bool { return s.ConnCount() == 1 })

	// A connection the server closed is replaced.
	s.Conns()[0].Close()
	<-clients[0].Done()
	resp, err := pool.Invoke(testCtx(t), addr, NewRequest(GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil))
	if err != nil || resp.ExtFields["topic"] != "T" {
		t.Fatalf("after reconnect: %v %v", resp, err)
	}
	if c, _ := pool.Get(testCtx(t), addr); c == clients[0] {
		t.Fatal("pool kept the failed client")
	}
	if _, err := pool.Get(testCtx(t), "127.0.0.1:1"); err == nil {
		t.Fatal("dial to a closed port succeeded")
	}
	pool.Close()
	if _, err := pool.Get(testCtx(t), addr); !errors.Is(err, ErrPoolClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// A response body with ReleaseBody is released exactly once, and only when
// no byte of it is needed any more: each release overwrites its buffer and
// hands it to the next response, so a body still queued or being written
// when it was released would reach a client with another response's
// bytes. Bodies above and below the inline size, from many goroutines.
func TestReleaseBodyAfterTheWrite(t *testing.T) {
	var mu sync.Mutex
	var free [][]byte
	var released, built atomic.Int64
	mux := NewMux()
	mux.HandleFunc(SendMessage, func(_ context.Context, conn *Conn, req *Command) {
		n, _ := strconv.Atoi(req.ExtFields["n"])
		size := 100 + n%3*(inlineBodyMax+1000) // inline, one vector, a larger one
		mu.Lock()
		var buf []byte
		if k := len(free); k > 0 {
			buf, free = free[k-1][:0], free[:k-1]
		}
		mu.Unlock()
		for len(buf) < size {
			buf = append(buf, byte(n), byte(n>>8))
		}
		resp := NewResponse(req, Success, "")
		resp.ExtFields = req.ExtFields
		resp.Body = buf[:size]
		var once atomic.Bool
		resp.ReleaseBody = func() {
			if !once.CompareAndSwap(false, true) {
				t.Errorf("body of request %d released twice", n)
			}
			for i := range buf {
				buf[i] = 0xEE
			}
			released.Add(1)
			mu.Lock()
			free = append(free, buf)
			mu.Unlock()
		}
		built.Add(1)
		_ = conn.Reply(req, resp)
	})
	s, _ := startServer(t, ServerConfig{Workers: 8}, mux)
	c := dialServer(t, s, ClientOptions{})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 100 {
				n := g*100 + i
				resp, err := c.Invoke(testCtx(t), NewRequest(SendMessage, map[string]string{"n": strconv.Itoa(n)}, nil))
				if err != nil {
					t.Error(err)
					return
				}
				size := 100 + n%3*(inlineBodyMax+1000)
				if len(resp.Body) != size {
					t.Errorf("request %d: body of %d bytes, want %d", n, len(resp.Body), size)
					return
				}
				for j := 0; j < size; j += 2 {
					if resp.Body[j] != byte(n) || (j+1 < size && resp.Body[j+1] != byte(n>>8)) {
						t.Errorf("request %d: byte %d is %#x: the body was reused before it was written", n, j, resp.Body[j])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	waitFor(t, "every body released", func() bool { return released.Load() == built.Load() })
}

// A send that cannot go out releases the body at once.
func TestReleaseBodyWhenTheSendFails(t *testing.T) {
	conn := make(chan *Conn, 1)
	mux := NewMux()
	mux.HandleFunc(SendMessage, func(_ context.Context, c *Conn, req *Command) { conn <- c })
	s, _ := startServer(t, ServerConfig{}, mux)
	c := dialServer(t, s, ClientOptions{})
	if err := c.InvokeOneway(testCtx(t), NewRequest(SendMessage, nil, nil)); err != nil {
		t.Fatal(err)
	}
	sc := <-conn
	_ = c.Close()
	waitFor(t, "the server to see the close", sc.Closed)
	var released atomic.Int32
	resp := &Command{Code: Success, Body: make([]byte, 2*inlineBodyMax), ReleaseBody: func() { released.Add(1) }}
	if err := sc.Send(resp); err == nil {
		t.Fatal("send on a closed connection succeeded")
	}
	if released.Load() != 1 {
		t.Fatalf("released %d times, want once", released.Load())
	}
}

// An answer that cannot be framed (here a header over the 24-bit length
// field: a remark of 17 MiB; a ROCKETMQ header: a code outside int16) is
// replaced by SYSTEM_ERROR naming why, and logged, instead of leaving the
// caller waiting for its timeout.
func TestAnUnencodableAnswerIsASystemError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		binary bool
		answer func(req *Command) *Command
	}{
		{"a header over 16 MiB", false, func(req *Command) *Command {
			return NewResponse(req, Success, strings.Repeat("r", 17<<20))
		}},
		{"a code outside a ROCKETMQ header's int16", true, func(req *Command) *Command {
			return NewResponse(req, 1<<20, "")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, logs := startServer(t, ServerConfig{}, RespondFunc(func(_ context.Context, _ *Conn, req *Command) *Command {
				return tc.answer(req)
			}))
			c := dialServer(t, s, ClientOptions{})
			req := NewRequest(310, nil, nil)
			if tc.binary {
				req.SerializeType = SerializeRocketMQ
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := c.Invoke(ctx, req)
			if err != nil {
				t.Fatalf("invoke: %v (the unencodable answer left the caller waiting)", err)
			}
			if resp.Code != SystemError || !strings.Contains(resp.Remark, "not encodable") {
				t.Fatalf("answer %d %q, want SYSTEM_ERROR saying the answer was not encodable", resp.Code, resp.Remark)
			}
			if !strings.Contains(logs.String(), "answer not encodable") {
				t.Fatalf("no log line for the unencodable answer: %s", logs.String())
			}
		})
	}
}

// TestShutdownLeavesNoAcceptedConnectionOpen dials the server without
// pause while it shuts down: every connection the kernel completed must
// end closed or reset once Shutdown returns, none left open and unserved
// (gnet's engine stop ends its event loops before its acceptor, which
// may still hand a new socket to a loop that has exited).
func TestShutdownLeavesNoAcceptedConnectionOpen(t *testing.T) {
	for round := range 30 {
		s := NewServer(ServerConfig{Addr: "127.0.0.1:0", EventLoops: 2}, NewMux(), zerolog.Nop())
		if err := s.Start(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		addr := s.Addr().String()
		var (
			mu    sync.Mutex
			conns []net.Conn
			stop  atomic.Bool
			wg    sync.WaitGroup
		)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					c, err := net.DialTimeout("tcp", addr, time.Second)
					if err != nil {
						continue
					}
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				}
			}()
		}
		waitFor(t, "a connection before the shutdown", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(conns) > 0
		})
		if err := s.Shutdown(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		stop.Store(true)
		wg.Wait()
		// Write to and read every connection concurrently: each must see
		// EOF or a reset at once; the deadline only turns a hang into a
		// failure. The write tells a socket nobody serves (it takes the
		// bytes) from a handshake the closed listener never finished (the
		// kernel answers the bytes with a reset).
		open := atomic.Int32{}
		var readers sync.WaitGroup
		for _, c := range conns {
			readers.Add(1)
			go func() {
				defer readers.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = c.Write([]byte{0, 0, 0, 0})
				_, err := io.Copy(io.Discard, c)
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					open.Add(1)
				}
			}()
		}
		readers.Wait()
		if n := open.Load(); n > 0 {
			t.Fatalf("round %d: %d of %d connections made while the server stopped still open after it stopped", round, n, len(conns))
		}
	}
}
