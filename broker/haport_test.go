package broker

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// echoOnce writes b on the client's end and reads it on the server's:
// the two are the ends of one connection.
func echoOnce(t *testing.T, client, server net.Conn) {
	t.Helper()
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	_ = server.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang guard
	if _, err := io.ReadFull(server, buf); err != nil || buf[0] != 'x' {
		t.Fatalf("the accepted connection is not the one dialled: %q, %v", buf, err)
	}
}

// acceptGuarded is l.Accept with a hang guard.
func acceptGuarded(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := l.Accept()
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("accept: %v", r.err)
		}
		t.Cleanup(func() { _ = r.c.Close() })
		return r.c
	case <-time.After(30 * time.Second):
		t.Fatal("no connection accepted")
		return nil
	}
}

func dialHA(t *testing.T, p *haPort) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		t.Fatalf("dial the HA port: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The process's HA port stays open between two master Brokers: a
// connection made while no server holds a lease waits for the next one,
// which accepts it, as does a connection handed to a lease that closed
// before its server took it. A closed lease accepts nothing; the port's
// close refuses connections.
func TestHAPortHandsConnectionsToTheNextLease(t *testing.T) {
	p, err := listenHA("127.0.0.1:0", time.Hour, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.close() }()

	early := dialHA(t, p) // no lease: it waits
	l, err := p.lease()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.lease(); err == nil {
		t.Fatal("a second lease was given while the first holds the port")
	}
	echoOnce(t, early, acceptGuarded(t, l))

	// A connection handed to l and not accepted when l closes goes to
	// the next lease.
	late := dialHA(t, p)
	waitUntil(t, 30*time.Second, "the connection to reach the lease", func() bool { return len(l.(*haLease).conns) == 1 })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a closed lease accepted %v, %v", c, err)
	}
	next, err := p.lease()
	if err != nil {
		t.Fatalf("lease after a close: %v", err)
	}
	echoOnce(t, late, acceptGuarded(t, next))
	_ = next.Close()

	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", p.Addr().String()); err == nil {
		_ = c.Close()
		t.Fatal("the closed HA port accepts connections")
	}
	if _, err := p.lease(); err == nil {
		t.Fatal("a closed HA port gave a lease")
	}
}

// A connection no master Broker takes within the wait (the process runs a
// slave) is closed, not left hanging.
func TestHAPortClosesAConnectionNoLeaseTakes(t *testing.T) {
	p, err := listenHA("127.0.0.1:0", time.Millisecond, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.close() }()
	c := dialHA(t, p)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang guard
	var ne net.Error
	if _, err := c.Read(make([]byte, 1)); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("read from a connection no lease took: %v, want it closed", err)
	}
}

// emfileListener fails every Accept as a process out of file
// descriptors does, reporting each on calls, until it is closed.
type emfileListener struct {
	net.Listener
	calls chan struct{}
}

func (l *emfileListener) Accept() (net.Conn, error) {
	select {
	case l.calls <- struct{}{}:
	default:
	}
	return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: syscall.EMFILE}
}

// The HA port's close ends the pause its accept loop takes after a
// failed accept (here an hour, past the hang guard) rather than
// sleeping it out: a Supervisor's Shutdown waited up to a second.
func TestHAPortCloseEndsTheAcceptPause(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &emfileListener{Listener: inner, calls: make(chan struct{}, 1)}
	p := serveHA(ln, time.Hour, zerolog.Nop(), time.Hour)
	select {
	case <-ln.calls:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the HA port did not accept")
	}
	closed := make(chan error, 1)
	go func() { closed <- p.close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the HA port's close waited out the pause after a failed accept")
	}
	if c, err := net.Dial("tcp", inner.Addr().String()); err == nil {
		_ = c.Close()
		t.Fatal("the closed HA port's listener accepts connections")
	}
}

// parkTimers replaces p's parking timers with ones the test fires: each
// parking gets a real timer that never runs out (so Stop works as in
// production), and its callback is kept to run at the moment the test
// picks.
func parkTimers(p *haPort) (fire func(i int), count func() int) {
	var mu sync.Mutex
	var callbacks []func()
	p.mu.Lock()
	p.afterFunc = func(_ time.Duration, f func()) *time.Timer {
		mu.Lock()
		callbacks = append(callbacks, f)
		mu.Unlock()
		return time.AfterFunc(time.Hour, f)
	}
	p.mu.Unlock()
	fire = func(i int) {
		mu.Lock()
		f := callbacks[i]
		mu.Unlock()
		f()
	}
	count = func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(callbacks)
	}
	return fire, count
}

// A connection that waited for a lease, was handed to one and parked
// again when the lease closed before its server accepted it, waits its
// full wait again: the timer of its first parking, which ran out while
// the lease held the port's lock (too late for lease's Stop), does not
// close it (it closed it, a slave dialling a broker in the middle of two
// switches was dropped).
func TestHAPortTimerOfAnEarlierParkingLeavesTheConnection(t *testing.T) {
	p, err := listenHA("127.0.0.1:0", time.Hour, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.close() }()
	fire, count := parkTimers(p)

	c := dialHA(t, p) // no lease: parked under the first timer
	waitUntil(t, 30*time.Second, "the connection to be parked", func() bool { return count() == 1 })
	l, err := p.lease() // takes it; the first timer's Stop is too late when it ran out
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil { // before its server accepted it: parked again
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d parkings, want 2 (the lease's close parks the connection again)", n)
	}
	// The first timer's callback, which had waited for the lock all
	// along, runs now.
	fire(0)
	next, err := p.lease()
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	srv := acceptGuarded(t, next)
	echoOnce(t, c, srv)
	// Nor does the second timer, run now that a lease took the
	// connection.
	fire(1)
	echoOnce(t, c, srv)
}
