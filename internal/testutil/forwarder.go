package testutil

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Forwarder is one address in front of servers that can change, as a
// load balancer's or a DNS name's: each connection it accepts is relayed
// to the next of its servers, the last one staying. Tests of what a
// client does when the server behind an address goes away use it.
type Forwarder struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex // guards to and conns
	to    []string
	conns []net.Conn
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
	wg.Go(func() { _, _ = io.Copy(s, c); _ = s.Close() })
	_, _ = io.Copy(c, s)
	_ = c.Close()
	wg.Wait()
}
