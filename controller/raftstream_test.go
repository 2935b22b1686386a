package controller

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/remotingtest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// twoPeers is the controllerDLegerPeers of two controllers on loopback
// ports whose raft ports (port+1) do not meet.
func twoPeers(t *testing.T) string {
	t.Helper()
	a := testutil.FreePortPair(t)
	b := testutil.FreePortPair(t)
	for b >= a-1 && b <= a+1 {
		b = testutil.FreePortPair(t)
	}
	return fmt.Sprintf("n0-127.0.0.1:%d;n1-127.0.0.1:%d", a, b)
}

// raftPeerTLS is one controller's raft TLS in a test: its listener's mode
// and whether it dials its peers with TLS.
type raftPeerTLS struct {
	mode remoting.TLSMode
	dial bool
}

// startRaftPair starts two controllers of one raft group with the TLS
// each is given (a self-signed certificate when its mode serves TLS).
func startRaftPair(t *testing.T, set [2]raftPeerTLS) []*testController {
	t.Helper()
	peers := twoPeers(t)
	var out []*testController
	for i, p := range set {
		cfg := testConfig(t.TempDir())
		cfg.Peers = peers
		cfg.SelfID = fmt.Sprintf("n%d", i)
		logs := &testutil.SyncBuffer{}
		opts := Options{Config: cfg, Log: zerolog.New(logs), RaftTLSMode: p.mode}
		if p.mode != remoting.TLSDisabled {
			_, tc, err := remoting.ServerTLS(p.mode.String(), remoting.TLSOptions{TestMode: true})
			if err != nil {
				t.Fatal(err)
			}
			opts.RaftTLS = tc
		}
		if p.dial {
			opts.ClientTLS = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // a self-signed test certificate
		}
		c, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		out = append(out, &testController{Controller: c, srv: remotingtest.StartServer(t, c.Handler()), logs: logs})
	}
	return out
}

// leaderOf returns the controller of cs that leads, nil if none does.
func leaderOf(cs []*testController) *testController {
	for _, c := range cs {
		if c.IsLeader() {
			return c
		}
	}
	return nil
}

// The raft transport between controllers follows the controllers' TLS as
// RocketMQ's DLedger channels do: peers that enforce TLS and dial with it
// elect a leader and replicate; permissive peers take a TLS peer and a
// plaintext one alike.
func TestRaftOverTLS(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  [2]raftPeerTLS
	}{
		{"enforcing", [2]raftPeerTLS{{remoting.TLSEnforcing, true}, {remoting.TLSEnforcing, true}}},
		{"permissive-mixed", [2]raftPeerTLS{{remoting.TLSPermissive, true}, {remoting.TLSPermissive, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := startRaftPair(t, tc.set)
			var leader *testController
			waitFor(t, "a raft leader", func() bool { leader = leaderOf(cs); return leader != nil })
			b := &broker{t: t, cl: dial(t, leader.srv.Addr().String()), addr: "10.0.0.1:30911"}
			b.applyID()
			for _, c := range cs {
				waitFor(t, "the id to replicate to "+c.self.ID, func() bool {
					_, ok := c.State().Replicas["broker-a"]
					return ok
				})
			}
			if tc.set[0].mode != remoting.TLSEnforcing {
				return
			}
			for _, c := range cs {
				if strings.Contains(c.logs.String(), "closing raft connection") {
					t.Fatalf("%s closed a raft connection:\n%s", c.self.ID, c.logs)
				}
			}
			// The raft port itself speaks TLS and nothing else.
			raftAddr, err := cs[0].self.RaftAddr()
			if err != nil {
				t.Fatal(err)
			}
			d := &net.Dialer{Timeout: 5 * time.Second}
			conn, err := tls.DialWithDialer(d, "tcp", raftAddr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a self-signed test certificate
			if err != nil {
				t.Fatalf("TLS handshake with the raft port: %v", err)
			}
			_ = conn.Close()
			plain, err := d.Dial("tcp", raftAddr)
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()
			_, _ = plain.Write([]byte{0}) // raft's first RPC type byte
			_ = plain.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := plain.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("a plaintext raft connection to an enforcing peer: read %v, want it closed", err)
			}
		})
	}
}

// Controllers whose raft listeners enforce TLS refuse a peer that dials
// in plaintext, and say so in their logs; with neither dialling TLS no
// leader is elected (and none hangs: the dials fail at once).
func TestRaftPlaintextToEnforcingPeer(t *testing.T) {
	cs := startRaftPair(t, [2]raftPeerTLS{{remoting.TLSEnforcing, false}, {remoting.TLSEnforcing, false}})
	waitFor(t, "a refused raft connection in the log", func() bool {
		for _, c := range cs {
			if strings.Contains(c.logs.String(), "raft connection in plaintext refused: tls.server.mode is enforcing") {
				return true
			}
		}
		return false
	})
	time.Sleep(time.Second)
	if l := leaderOf(cs); l != nil {
		t.Fatalf("%s leads without its peer's vote", l.self.ID)
	}
}

// A peer whose raft listener is disabled refuses TLS; one dialling it
// with TLS gets the handshake's error, and the listener logs why.
func TestRaftTLSToDisabledPeer(t *testing.T) {
	cs := startRaftPair(t, [2]raftPeerTLS{{remoting.TLSDisabled, true}, {remoting.TLSDisabled, true}})
	waitFor(t, "a refused TLS raft connection in the log", func() bool {
		for _, c := range cs {
			if strings.Contains(c.logs.String(), "raft connection over TLS refused: tls.server.mode is disabled") {
				return true
			}
		}
		return false
	})
	if l := leaderOf(cs); l != nil {
		t.Fatalf("%s leads without its peer's vote", l.self.ID)
	}
}
