package testutil

import (
	"net"
	"sync"
	"testing"
)

// Forwarder is one address in front of servers that can change, as a
// load balancer's or a DNS name's: each connection it accepts is relayed
// to the next of its servers, the last one staying. Tests of what a
// client does when the server behind an address goes away use it, and,
// with Hold, of what a peer does when a connection stays open but
// carries nothing (a network partition that closes no socket).
type Forwarder struct {
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex // guards to, conns, held and closed
	to     []string
	conns  []net.Conn
	held   bool
	closed bool
	moved  *sync.Cond // broadcast when held or closed changes
}

// StartForwarder listens on a loopback port and relays connections to
// the server at to until Route says otherwise; the test's cleanup closes
// it and every connection it relays.
func StartForwarder(t testing.TB, to string) *Forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &Forwarder{ln: ln, to: []string{to}}
	f.moved = sync.NewCond(&f.mu)
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Go(func() { f.relay(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		f.mu.Lock()
		f.closed = true
		f.moved.Broadcast()
		for _, c := range f.conns {
			_ = c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

// Addr returns the address clients dial.
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

// Route makes the next connections go to the servers at to, in turn, the
// last one taking every connection after.
func (f *Forwarder) Route(to ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.to = to
}

// Hold stops relaying bytes, both ways, on every connection, keeping the
// connections open; Release lets them go on.
func (f *Forwarder) Hold() { f.setHeld(true) }

// Release undoes Hold.
func (f *Forwarder) Release() { f.setHeld(false) }

func (f *Forwarder) setHeld(held bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = held
	f.moved.Broadcast()
}

// copy relays src to dst, waiting while the Forwarder holds.
func (f *Forwarder) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			f.mu.Lock()
			for f.held && !f.closed {
				f.moved.Wait()
			}
			f.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *Forwarder) relay(c net.Conn) {
	f.mu.Lock()
	to := f.to[0]
	if len(f.to) > 1 {
		f.to = f.to[1:]
	}
	f.mu.Unlock()
	s, err := net.Dial("tcp", to)
	if err != nil {
		_ = c.Close()
		return
	}
	f.mu.Lock()
	f.conns = append(f.conns, c, s)
	f.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { f.copy(s, c); _ = s.Close() })
	f.copy(c, s)
	_ = c.Close()
	wg.Wait()
}
