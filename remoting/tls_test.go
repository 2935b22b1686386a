package remoting

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rs/zerolog"
)

// testTLSConfig is a server TLS configuration with a fresh self-signed
// certificate.
func testTLSConfig(t testing.TB) *tls.Config {
	t.Helper()
	cfg, err := NewServerTLSConfig(TLSOptions{TestMode: true})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// clientTLS is what the RocketMQ Go client dials with: no verification.
func clientTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the clients under test do not verify
}

// startTLSServer starts a server in the given mode with a self-signed
// certificate.
func startTLSServer(t *testing.T, mode TLSMode, cfg ServerConfig, h Handler) (*Server, *testutil.SyncBuffer) {
	t.Helper()
	cfg.TLSMode = mode
	if cfg.TLS == nil {
		cfg.TLS = testTLSConfig(t)
	}
	return startServer(t, cfg, h)
}

func echoMux() *Mux {
	mux := NewMux()
	mux.HandleFunc(SendMessage, echo)
	mux.HandleFunc(GetRouteInfoByTopic, echo)
	return mux
}

// Every mode against both kinds of client: who gets an answer, and the
// log line of a refusal.
func TestTLSModes(t *testing.T) {
	tests := []struct {
		mode            TLSMode
		tlsClient       bool
		served          bool
		refusalLogLine  string
		clientErrorText string
	}{
		{TLSDisabled, false, true, "", ""},
		{TLSDisabled, true, false, "it opens a TLS handshake and TLS is disabled", ""},
		{TLSPermissive, false, true, "", ""},
		{TLSPermissive, true, true, "", ""},
		{TLSEnforcing, false, false, "plaintext refused, TLS is enforced", ""},
		{TLSEnforcing, true, true, "", ""},
	}
	for _, tc := range tests {
		name := fmt.Sprintf("%s/tls=%v", tc.mode, tc.tlsClient)
		t.Run(name, func(t *testing.T) {
			s, logs := startTLSServer(t, tc.mode, ServerConfig{}, echoMux())
			opts := ClientOptions{}
			if tc.tlsClient {
				opts.TLS = clientTLS()
			}
			c, err := Dial(testCtx(t), s.Addr().String(), opts)
			if err == nil {
				t.Cleanup(func() { _ = c.Close() })
				var resp *Command
				resp, err = c.Invoke(testCtx(t), NewRequest(SendMessage, map[string]string{"k": "v"}, []byte("hello")))
				if err == nil && (resp.Code != Success || string(resp.Body) != "hello" || resp.ExtFields["k"] != "v") {
					t.Fatalf("answer %v", resp)
				}
			}
			if tc.served && err != nil {
				t.Fatalf("not served: %v", err)
			}
			if !tc.served {
				if err == nil {
					t.Fatal("served, want refused")
				}
				waitFor(t, "the refusal's log line", func() bool { return strings.Contains(logs.String(), tc.refusalLogLine) })
			}
		})
	}
}

// A TLS client and a plaintext client on one permissive server, at once.
func TestTLSAndPlaintextOnOnePort(t *testing.T) {
	s, _ := startTLSServer(t, TLSPermissive, ServerConfig{}, echoMux())
	secure := dialServer(t, s, ClientOptions{TLS: clientTLS()})
	plain := dialServer(t, s, ClientOptions{})
	var wg sync.WaitGroup
	for i, c := range []*Client{secure, plain, secure, plain} {
		wg.Go(func() {
			for j := range 50 {
				n := fmt.Sprintf("%d-%d", i, j)
				resp, err := c.Invoke(testCtx(t), NewRequest(SendMessage, map[string]string{"n": n}, nil))
				if err != nil || resp.ExtFields["n"] != n {
					t.Errorf("request %s: %v %v", n, resp, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := s.ConnCount(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// Frames far larger than a TLS record, both ways, around the sizes where
// records and the server's batching change.
func TestTLSLargeFrames(t *testing.T) {
	s, _ := startTLSServer(t, TLSEnforcing, ServerConfig{}, echoMux())
	c := dialServer(t, s, ClientOptions{TLS: clientTLS()})
	for _, size := range []int{0, 1, inlineBodyMax, inlineBodyMax + 1, tlsStageMax - 200, tlsStageMax, tlsStageMax + 1, 1 << 20, 6<<20 + 7} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			body := make([]byte, size)
			for i := range body {
				body[i] = byte(i * 7 >> 3)
			}
			resp, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, body))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(resp.Body, body) {
				t.Fatalf("echoed body of %d bytes differs (got %d bytes)", size, len(resp.Body))
			}
		})
	}
}

// The size limit applies to decrypted frames as to plaintext ones.
func TestTLSOversizedFrameClosesConnection(t *testing.T) {
	s, logs := startTLSServer(t, TLSEnforcing, ServerConfig{MaxFrameSize: 64 << 10}, echoMux())
	c := dialServer(t, s, ClientOptions{TLS: clientTLS()})
	if _, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, make([]byte, 32<<10))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, make([]byte, 128<<10))); err == nil {
		t.Fatal("a frame over MaxFrameSize was answered")
	}
	waitFor(t, "the log line", func() bool { return strings.Contains(logs.String(), "frame too large") })
	waitFor(t, "the connection to close", func() bool { return s.ConnCount() == 0 })
}

// Many goroutines share one TLS connection, synchronously and
// asynchronously; every answer matches its request and bodies of every
// size class come back whole.
func TestTLSConcurrentRequests(t *testing.T) {
	s, _ := startTLSServer(t, TLSPermissive, ServerConfig{Workers: 8}, echoMux())
	c := dialServer(t, s, ClientOptions{TLS: clientTLS()})
	const goroutines, each = 24, 40
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				n := strconv.Itoa(g*each + i)
				body := bytes.Repeat([]byte(n), (g*each+i)%5*3000)
				resp, err := c.Invoke(testCtx(t), NewRequest(SendMessage, map[string]string{"n": n}, body))
				if err != nil || resp.ExtFields["n"] != n || !bytes.Equal(resp.Body, body) {
					t.Errorf("request %s: %v %v", n, resp, err)
					return
				}
			}
		})
	}
	const async = 1000
	var asyncWG sync.WaitGroup
	asyncWG.Add(async)
	var bad atomic.Int32
	for i := range async {
		n := "a" + strconv.Itoa(i)
		if err := c.InvokeAsync(NewRequest(SendMessage, map[string]string{"n": n}, nil), func(resp *Command, err error) {
			defer asyncWG.Done()
			if err != nil || resp.ExtFields["n"] != n {
				bad.Add(1)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	asyncWG.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d async requests failed or were mismatched", n)
	}
}

// The broker asks the client over the client's own TLS connection
// (transaction checks, consumer running info).
func TestTLSServerToClientRequest(t *testing.T) {
	mux := NewMux()
	mux.HandleFunc(HeartBeat, func(ctx context.Context, conn *Conn, req *Command) {
		answer, err := conn.Request(ctx, NewRequest(CheckTransactionState, map[string]string{"msgId": "M1"}, bytes.Repeat([]byte("q"), 50_000)))
		if err != nil {
			_ = conn.Reply(req, NewResponse(req, SystemError, err.Error()))
			return
		}
		resp := NewResponse(req, Success, "")
		resp.ExtFields = map[string]string{"state": answer.ExtFields["state"], "len": strconv.Itoa(len(answer.Body))}
		_ = conn.Reply(req, resp)
	})
	s, _ := startTLSServer(t, TLSEnforcing, ServerConfig{}, mux)
	c := dialServer(t, s, ClientOptions{TLS: clientTLS(), Handler: func(_ context.Context, req *Command) *Command {
		resp := NewResponse(req, Success, "")
		resp.ExtFields = map[string]string{"state": "COMMIT"}
		resp.Body = req.Body
		return resp
	}})
	resp, err := c.Invoke(testCtx(t), NewRequest(HeartBeat, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != Success || resp.ExtFields["state"] != "COMMIT" || resp.ExtFields["len"] != "50000" {
		t.Fatalf("response %v", resp)
	}
}

// Replies of a TLS connection release their bodies once encrypted, and a
// reply queued when the connection closes is released too.
func TestTLSReleaseBody(t *testing.T) {
	var built, released atomic.Int64
	mux := NewMux()
	mux.HandleFunc(SendMessage, func(_ context.Context, conn *Conn, req *Command) {
		resp := NewResponse(req, Success, "")
		resp.Body = bytes.Repeat([]byte{'b'}, 3*inlineBodyMax)
		resp.ReleaseBody = func() { released.Add(1) }
		built.Add(1)
		_ = conn.Reply(req, resp)
	})
	s, _ := startTLSServer(t, TLSPermissive, ServerConfig{}, mux)
	c := dialServer(t, s, ClientOptions{TLS: clientTLS()})
	for range 20 {
		resp, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil))
		if err != nil || len(resp.Body) != 3*inlineBodyMax {
			t.Fatalf("%v %v", resp, err)
		}
	}
	// Replies still queued, or not yet written, when the connection goes.
	for range 50 {
		_ = c.InvokeAsync(NewRequest(SendMessage, nil, nil), func(*Command, error) {})
	}
	_ = c.Close()
	waitFor(t, "every body released", func() bool { return s.ConnCount() == 0 && released.Load() == built.Load() })
}

// Frames sent to a connection before its first byte arrived wait until
// the protocol is known, then go out in it.
func TestSendBeforeTheFirstByte(t *testing.T) {
	for _, secure := range []bool{false, true} {
		t.Run("tls="+strconv.FormatBool(secure), func(t *testing.T) {
			s, _ := startTLSServer(t, TLSPermissive, ServerConfig{}, echoMux())
			raw := rawConn(t, s)
			waitFor(t, "the connection", func() bool { return s.ConnCount() == 1 })
			sc := s.Conns()[0]
			if err := sc.Oneway(NewRequest(NotifyConsumerIDsChanged, map[string]string{"consumerGroup": "G"}, nil)); err != nil {
				t.Fatal(err)
			}
			var stream net.Conn = raw
			if secure {
				tc := tls.Client(raw, clientTLS())
				if err := tc.HandshakeContext(testCtx(t)); err != nil {
					t.Fatal(err)
				}
				stream = tc
			} else {
				// Nothing may come before the client has spoken.
				_ = raw.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
				if n, _ := raw.Read(make([]byte, 1)); n != 0 {
					t.Fatal("the server wrote before it knew the protocol")
				}
				_ = raw.SetReadDeadline(time.Now().Add(hangGuard))
			}
			writeCommand(t, stream, &Command{Code: SendMessage, Opaque: 7})
			fr := NewFrameReader(stream, 0)
			for i, want := range []int32{NotifyConsumerIDsChanged, Success} {
				frame, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				cmd, err := Decode(frame)
				if err != nil || cmd.Code != want {
					t.Fatalf("frame %d: %v %v, want code %d", i, cmd, err, want)
				}
			}
		})
	}
}

// clientHello returns the first flight of a TLS client: its ClientHello
// record.
func clientHello(t testing.TB) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() { _ = tls.Client(a, clientTLS()).Handshake() }()
	buf := make([]byte, 64<<10)
	_ = b.SetReadDeadline(time.Now().Add(hangGuard))
	n, err := b.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// Broken handshakes close the connection with a log line and leave no
// goroutine behind.
func TestTLSBadHandshakeClosesConnection(t *testing.T) {
	hello := clientHello(t)
	if hello[0] != tlsRecordHandshake {
		t.Fatalf("a ClientHello starts with %#x", hello[0])
	}
	tests := []struct {
		name     string
		send     []byte
		halfShut bool // the client closes its side after sending
		logLine  string
	}{
		{"record byte only, then EOF", []byte{0x16}, true, "TLS handshake failed"},
		{"record byte only, then silence", []byte{0x16}, false, "TLS handshake failed"},
		{"garbage after the record byte", append([]byte{0x16}, bytes.Repeat([]byte{0xA5}, 3000)...), false, "TLS handshake failed"},
		{"plausible header, garbage body", append([]byte{0x16, 0x03, 0x01, 0x00, 0x20}, bytes.Repeat([]byte{0x01}, 32)...), false, "TLS handshake failed"},
		{"truncated ClientHello, then EOF", hello[:len(hello)/2], true, "TLS handshake failed"},
		{"truncated ClientHello, then silence", hello[:len(hello)/2], false, "TLS handshake failed"},
		{"ClientHello then a plaintext frame", append(append([]byte{}, hello...), unhex(t, "00000004 00000000")...), false, "TLS handshake failed"},
	}
	s, logs := startTLSServer(t, TLSPermissive, ServerConfig{TLSHandshakeTimeout: 300 * time.Millisecond}, echoMux())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := strings.Count(logs.String(), tc.logLine)
			raw := rawConn(t, s)
			if _, err := raw.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if tc.halfShut {
				_ = raw.(*net.TCPConn).CloseWrite()
			}
			expectClosed(t, raw)
			waitFor(t, "the log line", func() bool { return strings.Count(logs.String(), tc.logLine) > before })
			waitFor(t, "the connection to go", func() bool { return s.ConnCount() == 0 })
		})
	}
	waitForTLSGoroutines(t, s, 0)
}

func testLogger() zerolog.Logger { return zerolog.New(io.Discard) }

// tlsGoroutines counts the live TLS goroutines of every server of the
// process (the tests of this package do not run in parallel).
func tlsGoroutines(_ *Server) int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "remoting.(*Server).tlsReader") || strings.Contains(g, "remoting.(*Server).tlsWriter") {
			n++
		}
	}
	return n
}

func waitForTLSGoroutines(t *testing.T, s *Server, want int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d TLS goroutines", want), func() bool { return tlsGoroutines(s) == want })
}

// Every way a TLS connection ends releases its two goroutines: the
// client closes, the server closes it, it idles out, the server shuts
// down.
func TestTLSGoroutinesReleased(t *testing.T) {
	s, _ := startTLSServer(t, TLSPermissive, ServerConfig{IdleTimeout: time.Hour}, echoMux())
	// The count starts once the engine's goroutines all run: after a
	// round trip on a plaintext connection.
	warm := dialServer(t, s, ClientOptions{})
	if _, err := warm.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil)); err != nil {
		t.Fatal(err)
	}
	_ = warm.Close()
	waitFor(t, "the plaintext connection to go", func() bool { return s.ConnCount() == 0 })
	baseline := runtime.NumGoroutine()
	var clients []*Client
	for range 5 {
		c := dialServer(t, s, ClientOptions{TLS: clientTLS()})
		if _, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, []byte("x"))); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	// Each connection's two start with its first request; they are
	// counted with those of earlier tests' servers still ending.
	waitForTLSGoroutines(t, s, 10)
	// The client closes.
	_ = clients[0].Close()
	waitForTLSGoroutines(t, s, 8)
	// The server closes.
	for _, c := range s.Conns()[:2] {
		_ = c.Close()
	}
	waitForTLSGoroutines(t, s, 4)
	for _, c := range clients {
		_ = c.Close()
	}
	waitForTLSGoroutines(t, s, 0)
	waitFor(t, "the goroutine count back to its start", func() bool { return runtime.NumGoroutine() <= baseline })

	// Idle timeout and shutdown, on a server of their own.
	s2, _ := startTLSServer(t, TLSPermissive, ServerConfig{IdleTimeout: 300 * time.Millisecond}, echoMux())
	idle := dialServer(t, s2, ClientOptions{TLS: clientTLS()})
	if _, err := idle.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the idle connection to close", func() bool { return s2.ConnCount() == 0 })
	s3 := NewServer(ServerConfig{Addr: "127.0.0.1:0", EventLoops: 1, TLSMode: TLSEnforcing, TLS: testTLSConfig(t)}, echoMux(), testLogger())
	if err := s3.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c := dialServer(t, s3, ClientOptions{TLS: clientTLS()})
		if _, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil)); err != nil {
			t.Fatal(err)
		}
	}
	// A handshake in progress too.
	raw, err := net.Dial("tcp", s3.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_, _ = raw.Write([]byte{0x16, 0x03})
	waitFor(t, "4 connections", func() bool { return s3.ConnCount() == 4 })
	if err := s3.Shutdown(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	waitForTLSGoroutines(t, s, 0)
}

// A TLS mode without a certificate cannot start.
func TestTLSModeNeedsACertificate(t *testing.T) {
	for _, mode := range []TLSMode{TLSPermissive, TLSEnforcing} {
		s := NewServer(ServerConfig{Addr: "127.0.0.1:0", TLSMode: mode}, echoMux(), testLogger())
		err := s.Start(testCtx(t))
		if err == nil {
			_ = s.Shutdown(testCtx(t))
			t.Fatalf("%s started without a certificate", mode)
		}
		if !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("%s: %v", mode, err)
		}
		if err := s.Shutdown(testCtx(t)); !errors.Is(err, ErrServerNotStarted) {
			t.Fatalf("shutdown of a server that did not start: %v", err)
		}
	}
}

func TestParseTLSMode(t *testing.T) {
	for in, want := range map[string]TLSMode{"disabled": TLSDisabled, "Permissive": TLSPermissive, " ENFORCING ": TLSEnforcing} {
		got, err := ParseTLSMode(in)
		if err != nil || got != want {
			t.Errorf("ParseTLSMode(%q) = %v, %v", in, got, err)
		}
		if back, _ := ParseTLSMode(got.String()); back != got {
			t.Errorf("%v does not parse back", got)
		}
	}
	if _, err := ParseTLSMode("strict"); err == nil {
		t.Error("an unknown mode parsed")
	}
}

// writeTLSFrames keeps the order and the bytes of the frames whatever
// their sizes.
func TestWriteTLSFrames(t *testing.T) {
	var q [][]byte
	var want []byte
	for i, n := range []int{3, tlsStageMax - 3, 1, tlsStageMax, 0, 5, 2 * tlsStageMax, 7, tlsStageMax - 7, 9} {
		b := bytes.Repeat([]byte{byte(i)}, n)
		q = append(q, b)
		want = append(want, b...)
	}
	var got bytes.Buffer
	var writes int
	w := writerFunc(func(p []byte) (int, error) {
		writes++
		return got.Write(p)
	})
	stage, err := writeTLSFrames(w, q, nil)
	if err != nil || !bytes.Equal(got.Bytes(), want) || len(stage) != 0 {
		t.Fatalf("err %v, %d bytes written, want %d", err, got.Len(), len(want))
	}
	if writes > 7 {
		t.Errorf("%d writes for 10 buffers: small ones were not gathered", writes)
	}
	failing := writerFunc(func([]byte) (int, error) { return 0, io.ErrClosedPipe })
	if _, err := writeTLSFrames(failing, q, stage); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("error %v", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// The pipe holds at most maxPending bytes of ciphertext ahead of their
// decryption: feed takes what fits, and asks for the rest (roomFn) once
// the reader has decrypted half of what was pending.
func TestTLSPipeBoundsTheBacklog(t *testing.T) {
	p := newTLSPipe(nil, nil, func() error { return nil }, func() {})
	rooms := 0
	p.roomFn = func() { rooms++ }
	p.maxPending = 10
	if n, err := p.feed(make([]byte, 6)); n != 6 || err != nil {
		t.Fatalf("feed: %d %v", n, err)
	}
	if r := p.room(); r != 4 {
		t.Fatalf("room %d with 6 of 10 pending", r)
	}
	if n, err := p.feed(make([]byte, 6)); n != 4 || err != nil {
		t.Fatalf("feeding past the bound took %d bytes (%v), want the 4 that fit", n, err)
	}
	if r := p.room(); r != 0 {
		t.Fatalf("room %d in a full pipe", r)
	}
	if n, err := p.feed(make([]byte, 6)); n != 0 || err != nil {
		t.Fatalf("feeding a full pipe took %d bytes (%v)", n, err)
	}
	buf := make([]byte, 4)
	if n, err := p.Read(buf); n != 4 || err != nil || rooms != 0 {
		t.Fatalf("read: %d %v, %d calls for room with 6 of 10 pending", n, err, rooms)
	}
	if n, err := p.Read(buf); n != 4 || err != nil || rooms != 1 {
		t.Fatalf("read: %d %v, %d calls for room with 2 of 10 pending, want 1", n, err, rooms)
	}
	if n, err := p.feed(make([]byte, 8)); n != 8 || err != nil {
		t.Fatalf("feeding after a read made room: %d %v", n, err)
	}
	// A reader that always leaves a byte unread does not let the buffer
	// grow with everything ever fed.
	p.maxPending = 64 << 10
	chunk := make([]byte, 8<<10)
	one := make([]byte, len(chunk))
	for i := 0; i < 4096; i++ { // 32 MiB through the pipe
		if n, err := p.feed(chunk); n != len(chunk) || err != nil {
			t.Fatalf("feed %d: %d %v", i, n, err)
		}
		if n, err := p.Read(one); n != len(one) || err != nil {
			t.Fatalf("read %d: %d %v", i, n, err)
		}
	}
	if c := cap(p.in); c > 4*p.maxPending {
		t.Fatalf("the buffer grew to %d bytes for %d unread", c, len(p.in)-p.inOff)
	}
	p.shutdown()
	if _, err := p.feed([]byte{1}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("feeding a shut pipe: %v", err)
	}
}
