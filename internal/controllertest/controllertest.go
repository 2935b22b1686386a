// Package controllertest starts controllers of package controller in
// process, each served over Remoting at the address its peer list names,
// as a broker's controllerAddr reaches it, for the tests of the broker
// and of bin/broker (package clustertest imports the broker, which the
// broker's own tests cannot import). Short raft and scan intervals keep
// elections and a broker's inactivity quick; everything stops when the
// test ends.
package controllertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/controller"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// leaderWait bounds the wait for a raft group's leader: a hang guard,
// generous for a loaded machine, not a measure of the election.
const leaderWait = 60 * time.Second

// Options are the controller settings a test chooses.
type Options struct {
	// Unclean is enableElectUncleanMaster: a broker out of the sync
	// state set may be elected when none in it is alive.
	Unclean bool
	// Notify is notifyBrokerRoleChanged: the controller tells the
	// brokers of a group of its new master (NOTIFY_BROKER_ROLE_CHANGED).
	Notify bool
}

// Peer is one controller of a test and the Remoting server it is
// served on.
type Peer struct {
	// Controller is the controller itself.
	Controller *controller.Controller
	// Server serves the controller's requests at Addr.
	Server *remoting.Server
	// Addr is the loopback address of Server, the one the peer list
	// names; the next port is the controller's raft port.
	Addr string
	once sync.Once
}

// Stop shuts the peer's server down and closes its controller, once: a
// test may stop a peer itself, and the test's end stops it again.
func (p *Peer) Stop() {
	p.once.Do(func() {
		_ = p.Server.Shutdown(context.Background())
		_ = p.Controller.Close()
	})
}

// Start starts n controllers as one raft group on free loopback ports,
// no two of them adjacent (each peer's raft transport takes the port
// after its own), and returns them once each knows a leader.
func Start(t testing.TB, n int, o Options) []*Peer {
	t.Helper()
	var ports []int
	for len(ports) < n {
		p := testutil.FreePortPair(t)
		if !slices.ContainsFunc(ports, func(q int) bool { return q >= p-1 && q <= p+1 }) {
			ports = append(ports, p)
		}
	}
	return StartOn(t, ports, o)
}

// StartOn is Start on the given ports, each with the next one free for
// its raft transport: a test that needs the address before a controller
// runs there (a broker started first) picks them itself.
func StartOn(t testing.TB, ports []int, o Options) []*Peer {
	t.Helper()
	var list []string
	for i, p := range ports {
		list = append(list, fmt.Sprintf("n%d-127.0.0.1:%d", i, p))
	}
	var peers []*Peer
	for i, port := range ports {
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cfg := controller.DefaultConfig()
		cfg.Group = "group1"
		cfg.Peers = strings.Join(list, ";")
		cfg.SelfID = fmt.Sprintf("n%d", i)
		cfg.StorePath = t.TempDir()
		cfg.RaftTimeout = 200 * time.Millisecond
		cfg.ScanNotActiveBrokerInterval = 100 * time.Millisecond
		cfg.ScanInactiveMasterInterval = 100 * time.Millisecond
		cfg.EnableElectUncleanMaster = o.Unclean
		cfg.NotifyBrokerRoleChanged = o.Notify
		c, err := controller.New(controller.Options{Config: cfg, Log: zerolog.Nop()})
		if err != nil {
			t.Fatalf("controller %s: %v", addr, err)
		}
		if err := c.Start(); err != nil {
			t.Fatalf("start controller %s: %v", addr, err)
		}
		srv := remoting.NewServer(remoting.ServerConfig{Addr: addr}, c.Handler(), zerolog.Nop())
		if err := srv.Start(context.Background()); err != nil {
			_ = c.Close()
			t.Fatalf("serve controller %s: %v", addr, err)
		}
		p := &Peer{Controller: c, Server: srv, Addr: addr}
		t.Cleanup(p.Stop)
		peers = append(peers, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaderWait)
	defer cancel()
	for _, p := range peers {
		if err := p.Controller.WaitLeader(ctx); err != nil {
			t.Fatalf("controller %s: %v", p.Addr, err)
		}
	}
	return peers
}

// StartOne starts a raft group of one controller and returns it once it
// leads, ready to answer brokers.
func StartOne(t testing.TB, o Options) *Peer {
	t.Helper()
	p := Start(t, 1, o)[0]
	deadline := time.Now().Add(leaderWait)
	for !p.Controller.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatalf("controller %s did not lead within %v", p.Addr, leaderWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return p
}
