package main

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/remotingtest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// checkpointBroker starts a server that answers the checkpoint request as
// a broker with its store at root would, and counts the requests.
func checkpointBroker(t *testing.T, root string) (*remoting.Server, *atomic.Int32) {
	t.Helper()
	return remotingtest.StartAnswering(t, remoting.CheckpointIndex,
		map[string]string{remoting.CheckpointFieldPath: root + "/checkpoint", remoting.CheckpointFieldStoreRoot: root})
}

// The checkpoint request to a broker stopping gracefully, answered
// GO_AWAY, goes once more on a new connection, as RocketMQ's clients send
// it (enableReconnectForGoAway), which behind a load balancer reaches the
// other broker; it failed before, dialled outside a pool.
func TestCheckpointRequestReconnectsOnGoAway(t *testing.T) {
	old, oldAsked := checkpointBroker(t, "/old")
	next, nextAsked := checkpointBroker(t, "/next")
	remotingtest.GoAway(t, old)
	f := testutil.StartForwarder(t, old.Addr().String())
	f.Route(old.Addr().String(), next.Addr().String())
	_, root, _, err := requestCheckpoint(t.Context(), &globalOptions{}, f.Addr(), "", 10*time.Second)
	if err != nil || root != "/next" {
		t.Fatalf("checkpoint through the address whose broker goes away: root %q, %v; want the next broker's", root, err)
	}
	if o, n := oldAsked.Load(), nextAsked.Load(); o != 0 || n != 1 {
		t.Errorf("the going-away broker served %d requests, the next %d; want 0 and 1", o, n)
	}
}
