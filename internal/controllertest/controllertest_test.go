package controllertest

import (
	"context"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// leader returns the peer that leads, or nil.
func leader(peers []*Peer) *Peer {
	for _, p := range peers {
		if p.Controller.IsLeader() {
			return p
		}
	}
	return nil
}

// waitLeader waits for a peer of peers other than not to lead.
func waitLeader(t *testing.T, peers []*Peer, not *Peer) *Peer {
	t.Helper()
	deadline := time.Now().Add(leaderWait)
	for {
		if l := leader(peers); l != nil && l != not {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("no controller led within %v", leaderWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// metadata asks the controller at addr for CONTROLLER_GET_METADATA_INFO.
func metadata(t *testing.T, addr string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), leaderWait)
	defer cancel()
	c, err := remoting.Dial(ctx, addr, remoting.ClientOptions{})
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.ControllerGetMetadataInfo, nil, nil))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("metadata of %s: %v %v", addr, resp, err)
	}
	return resp.ExtFields
}

// Three peers form one raft group served at their peer list's addresses:
// its leader answers at its address that it leads and names itself, and
// once it stops (twice: the test's end stops it again) another leads.
func TestStartServesOneRaftGroup(t *testing.T) {
	peers := Start(t, 3, Options{Notify: true})
	first := waitLeader(t, peers, nil)
	if md := metadata(t, first.Addr); md["isLeader"] != "true" || md["controllerLeaderAddress"] != first.Addr {
		t.Fatalf("the leader at %s answers metadata %v", first.Addr, md)
	}
	first.Stop()
	first.Stop()
	next := waitLeader(t, peers, first)
	if md := metadata(t, next.Addr); md["isLeader"] != "true" || md["controllerLeaderAddress"] != next.Addr {
		t.Fatalf("the new leader at %s answers metadata %v", next.Addr, md)
	}
}

// StartOne's controller leads once it returns.
func TestStartOneLeads(t *testing.T) {
	p := StartOne(t, Options{})
	if !p.Controller.IsLeader() {
		t.Fatal("StartOne returned a controller that does not lead")
	}
	if md := metadata(t, p.Addr); md["isLeader"] != "true" {
		t.Fatalf("metadata %v", md)
	}
}
