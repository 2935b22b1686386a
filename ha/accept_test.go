package ha

import (
	"context"
	"net"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// scriptedListener fails the Accepts its script says to fail (EMFILE, as
// a process out of file descriptors) and takes the others from the real
// listener; it reports each Accept on calls.
type scriptedListener struct {
	net.Listener
	mu     sync.Mutex
	script []bool // true: this Accept fails; past the end, all fail
	calls  chan int
	n      int
}

func (l *scriptedListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	i := l.n
	l.n++
	fail := i >= len(l.script) || l.script[i]
	l.mu.Unlock()
	if l.calls != nil {
		l.calls <- i
	}
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: syscall.EMFILE}
	}
	return l.Listener.Accept()
}

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// Failed accepts are followed each by a pause, doubling from MinPause to
// MaxPause while they keep failing and starting over after an accept
// succeeds: the loop backs off rather than spinning on an error that
// does not clear (EMFILE).
func TestAcceptLoopBacksOffOnFailedAccepts(t *testing.T) {
	inner := listenLoopback(t)
	// Four failures, a success, three failures, then failures only.
	ln := &scriptedListener{Listener: inner, script: []bool{true, true, true, true, false, true, true, true}}
	var mu sync.Mutex
	var pauses []time.Duration
	var accepts []int // how many Accepts ran at each pause
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	handled := make(chan net.Conn, 1)
	loop := AcceptLoop{Listener: ln, Log: zerolog.Nop(), MinPause: time.Millisecond, MaxPause: 4 * time.Millisecond,
		Handle: func(c net.Conn) { handled <- c },
		wait: func(ctx context.Context, d time.Duration) bool {
			mu.Lock()
			defer mu.Unlock()
			ln.mu.Lock()
			accepts = append(accepts, ln.n)
			ln.mu.Unlock()
			pauses = append(pauses, d)
			if len(pauses) == 10 {
				cancel()
				return false
			}
			return true
		}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop.Run(ctx)
	}()
	c, err := net.Dial("tcp", inner.Addr().String()) // the fifth Accept takes it
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the accept loop did not stop at its context's end")
	}
	select {
	case got := <-handled:
		_ = got.Close()
	default:
		t.Fatal("the connection accepted between the failures was not handed on")
	}
	ms := time.Millisecond
	want := []time.Duration{ms, 2 * ms, 4 * ms, 4 * ms, ms, 2 * ms, 4 * ms, 4 * ms, 4 * ms, 4 * ms}
	if !slices.Equal(pauses, want) {
		t.Fatalf("pauses after failed accepts %v, want %v", pauses, want)
	}
	// One pause per failed accept: no Accept ran without a pause after
	// the one that failed before it.
	if wantAccepts := []int{1, 2, 3, 4, 6, 7, 8, 9, 10, 11}; !slices.Equal(accepts, wantAccepts) {
		t.Fatalf("Accepts run by each pause %v, want %v", accepts, wantAccepts)
	}
}

// The pause after a failed accept ends as soon as the loop's context
// does: a server closing its port does not wait it out (here an hour,
// past the hang guard).
func TestAcceptLoopStopsDuringAPause(t *testing.T) {
	calls := make(chan int, 16)
	ln := &scriptedListener{Listener: listenLoopback(t), calls: calls}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop := AcceptLoop{Listener: ln, Log: zerolog.Nop(), MinPause: time.Hour, MaxPause: time.Hour,
		Handle: func(c net.Conn) { _ = c.Close() }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop.Run(ctx)
	}()
	select {
	case <-calls:
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the loop did not accept")
	}
	cancel()
	_ = ln.Close()
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the accept loop sat out its pause after its context ended")
	}
	if n := len(calls); n != 0 {
		t.Fatalf("%d more Accepts after the failed one, want none: the loop stopped in its pause", n)
	}
}
