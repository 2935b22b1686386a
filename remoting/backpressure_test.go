package remoting

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// startBigAnswerServer starts a server in TLS mode mode whose handler
// answers every request with a 64 KiB body and counts the requests it
// handled; the server's socket send buffer is small, so unread answers
// (19 MiB in the tests, more than loopback's buffers hold) pile up in the
// server.
func startBigAnswerServer(t *testing.T, cfg ServerConfig, mode TLSMode) (*Server, *atomic.Int64, func() string) {
	t.Helper()
	var handled atomic.Int64
	body := make([]byte, 64<<10)
	mux := NewMux()
	mux.HandleFunc(SendMessageV2, func(_ context.Context, conn *Conn, req *Command) {
		handled.Add(1)
		resp := NewResponse(req, Success, "")
		resp.Body = body
		_ = conn.Reply(req, resp)
	})
	cfg.SocketSendBuffer = 256 << 10
	s, logs := startTLSServer(t, mode, cfg, mux)
	return s, &handled, logs.String
}

// dialRaw dials s with a plain TCP connection. Its receive buffer keeps
// the system's size: a small one (16 KiB) left loopback TCP stuck with a
// window below its 64 KiB segment size, the sender waiting for a window
// the receiver could never open, whatever the server did.
func dialRaw(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A client that sends requests without reading their answers is not read
// from once its answers pile up past the high water mark (as RocketMQ
// stops reading an unwritable channel); when it reads them, the server
// reads its requests again and answers every one. Plaintext and TLS alike.
func TestUnreadAnswersPauseTheConnection(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			raw, handled, logs := dialBigAnswerServer(t, useTLS)
			checkPauseAndResume(t, raw, handled, logs)
		})
	}
}

// dialBigAnswerServer starts a big-answer server (startBigAnswerServer)
// and connects to it, over TLS when useTLS.
func dialBigAnswerServer(t *testing.T, useTLS bool) (net.Conn, *atomic.Int64, func() string) {
	t.Helper()
	mode := TLSDisabled
	if useTLS {
		mode = TLSPermissive
	}
	s, handled, logs := startBigAnswerServer(t, ServerConfig{}, mode)
	var raw net.Conn = dialRaw(t, s)
	if useTLS {
		tc := tls.Client(raw, clientTLS())
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		raw = tc
	}
	return raw, handled, logs
}

// checkPauseAndResume sends requests one at a time without reading, until
// the server stops reading them, then the rest, then reads every answer.
func checkPauseAndResume(t *testing.T, raw net.Conn, handled *atomic.Int64, logs func() string) {
	t.Helper()
	const sent = 300 // 19 MiB of answers
	paused := func() bool { return strings.Contains(logs(), "does not read its answers") }
	pausedAt := -1
	for i := range sent {
		writeCommand(t, raw, &Command{Code: SendMessageV2, Language: "GO", Opaque: int32(i + 1)})
		if pausedAt >= 0 {
			continue
		}
		// One at a time: a pause stops the reads that follow it, not
		// those of requests the server read already, so the next
		// request goes once this one is handled (or the connection
		// paused), however slowly the server runs.
		waitFor(t, fmt.Sprintf("request %d to be handled or the connection to pause", i+1), func() bool {
			return handled.Load() > int64(i) || paused()
		})
		if paused() {
			pausedAt = i
		}
	}
	if pausedAt < 0 {
		t.Fatalf("no pause after %d requests handled, logs:\n%s", handled.Load(), logs())
	}
	// The requests after the pause wait unread. (A short look: that
	// nothing happens cannot be waited for.)
	time.Sleep(200 * time.Millisecond)
	if n := handled.Load(); n >= sent {
		t.Fatalf("all %d requests handled while their answers were not read (paused at request %d)", n, pausedAt+1)
	}
	// Reading the answers lets the rest be handled (by a pool of
	// workers: in any order).
	fr := NewFrameReader(raw, 0)
	_ = raw.SetReadDeadline(time.Now().Add(hangGuard))
	answered := map[int32]bool{}
	for range sent {
		frame, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d answers: %v (handled %d), logs:\n%s", len(answered), err, handled.Load(), logs())
		}
		resp, err := Decode(frame)
		if err != nil || resp.Opaque < 1 || resp.Opaque > sent || answered[resp.Opaque] || len(resp.Body) != 64<<10 {
			t.Fatalf("answer opaque %d, %d body bytes, %v", resp.Opaque, len(resp.Body), err)
		}
		answered[resp.Opaque] = true
	}
	if !strings.Contains(logs(), "reads its answers again") {
		t.Errorf("no log line for the resumed connection:\n%s", logs())
	}
}

// A client that keeps sending while its answers are not read is closed
// once 4 x MaxFrameSize of its requests wait, with a log line; the
// requests it had are not all handled.
func TestUnreadAnswersAndMoreRequestsClose(t *testing.T) {
	s, handled, logs := startBigAnswerServer(t, ServerConfig{MaxFrameSize: 64 << 10}, TLSDisabled)
	raw := dialRaw(t, s)
	frame, err := Encode(&Command{Code: SendMessageV2, Language: "GO", Opaque: 1})
	if err != nil {
		t.Fatal(err)
	}
	batch := []byte(strings.Repeat(string(frame), 1000))
	_ = raw.SetWriteDeadline(time.Now().Add(hangGuard))
	var werr error
	for i := 0; i < 400 && werr == nil; i++ { // up to 400,000 requests
		_, werr = raw.Write(batch)
	}
	if werr == nil {
		t.Fatalf("the connection took every request while reading no answer (handled %d)", handled.Load())
	}
	if errors.Is(werr, context.DeadlineExceeded) || isTimeout(werr) {
		t.Fatalf("writes blocked instead of the connection closing: %v", werr)
	}
	if !strings.Contains(logs(), "sends requests without reading their answers") {
		t.Fatalf("no log line for the closed connection:\n%s", logs())
	}
	_ = raw.SetReadDeadline(time.Now().Add(hangGuard))
	if _, err := io.Copy(io.Discard, raw); err != nil && isTimeout(err) {
		t.Fatalf("the connection was not closed: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
