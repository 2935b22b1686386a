package main

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rs/zerolog"
)

// startNameServer starts a name server that, once stopping, tells newer
// clients to go away for goAway.
func startNameServer(t *testing.T, goAway time.Duration) *namesrv.Server {
	t.Helper()
	cfg := namesrv.DefaultConfig()
	cfg.Remoting.Addr = "127.0.0.1:0"
	cfg.Remoting.EventLoops = 1
	cfg.Remoting.GoAwayWait = goAway
	s, err := namesrv.NewServer(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

// forwarder is one address in front of servers that can change, as a
// load balancer's: each connection it accepts is relayed to the next of
// its servers, the last one staying.
type forwarder struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex // guards to and conns
	to    []string
	conns []net.Conn
}

// route makes the next connections go to the servers at to, in turn.
func (f *forwarder) route(to ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.to = to
}

func startForwarder(t *testing.T, to string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln, to: []string{to}}
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

func (f *forwarder) relay(c net.Conn) {
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

// A request mqadmin's client sends to a name server that answers GO_AWAY
// goes once more on a new connection (enableReconnectForGoAway), which
// behind a load balancer reaches another name server.
func TestInvokeReconnectsOnGoAway(t *testing.T) {
	old, next := startNameServer(t, time.Minute), startNameServer(t, 0)
	f := startForwarder(t, old.Addr().String())
	addr := f.ln.Addr().String()
	if _, err := run(t, "getNamesrvConfig", "-n", addr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- old.Shutdown(ctx) }()
	defer func() {
		cancel()
		<-stopped
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := run(t, "getNamesrvConfig", "-n", old.Addr().String())
		if err != nil && strings.Contains(err.Error(), "GO_AWAY") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old name server never went away: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The request's first connection reaches the old name server, which
	// answers GO_AWAY; the next one reaches the other.
	f.route(old.Addr().String(), next.Addr().String())
	if out, err := run(t, "getNamesrvConfig", "-n", addr); err != nil || !strings.Contains(out, "enableAllTopicList=") {
		t.Fatalf("through the address whose server went away: %v\n%s", err, out)
	}
}
