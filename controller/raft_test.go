package controller

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/metrics"
)

// TestInterruptedBootstrapStarts: raft's bootstrap of a new store writes
// the current term, then the first log entry (the membership), in two
// commits. A controller killed between them leaves a store with a term
// and nothing else; started again on it, the controller must bootstrap
// and lead, not wait forever without a membership to elect from.
func TestInterruptedBootstrapStarts(t *testing.T) {
	dir := t.TempDir()
	bolt, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	// The state the kill leaves: what raft.BootstrapCluster writes first.
	if err := bolt.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	if err := bolt.Close(); err != nil {
		t.Fatal(err)
	}
	c := startController(t, testConfig(dir), false)
	waitFor(t, "the controller to lead on a store whose bootstrap was cut", c.IsLeader)
	b := &broker{t: t, cl: dial(t, c.srv.Addr().String()), addr: "10.0.0.1:30911"}
	b.applyID()
	if !strings.Contains(c.logs.String(), "cut during the raft bootstrap") {
		t.Errorf("the cut bootstrap is not logged:\n%s", c.logs)
	}
}

// TestCutSnapshotRemoved: a kill while raft writes a snapshot leaves its
// "<id>.tmp" directory, which raft never removes; the next start does, so
// kills do not pile them up, and keeps the finished snapshots.
func TestCutSnapshotRemoved(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.TrailingLogs = 1, 10*time.Millisecond, 1
	c := startController(t, cfg, true)
	b := &broker{t: t, cl: dial(t, c.srv.Addr().String()), addr: "10.0.0.1:30911"}
	b.applyID()
	snaps := filepath.Join(dir, "snapshots")
	waitFor(t, "a snapshot", func() bool {
		entries, _ := os.ReadDir(snaps)
		return slices.ContainsFunc(entries, func(e os.DirEntry) bool { return !strings.HasSuffix(e.Name(), ".tmp") })
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(snaps, "2-9-1700000000000.tmp")
	if err := os.MkdirAll(cut, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cut, "state.bin"), []byte(`{"replicas":`), 0o644); err != nil {
		t.Fatal(err)
	}
	c2 := startController(t, cfg, true)
	if _, err := os.Stat(cut); !os.IsNotExist(err) {
		t.Fatalf("the cut snapshot is still there after a start: %v", err)
	}
	if !strings.Contains(c2.logs.String(), "removed a raft snapshot a stop cut") {
		t.Errorf("the removal is not logged:\n%s", c2.logs)
	}
	if got := c2.State().Replicas["broker-a"]; got == nil || got.Brokers[1].Addr != b.addr {
		t.Fatalf("the state after the restart: %+v", got)
	}
}

// TestLeaderBarrierRetried: a new leader answers once a raft barrier
// has passed. A barrier that fails while the peer still leads (raft's
// enqueue timeout, when its loop is held up by a slow disk) must be tried
// again: no other leadership notice comes to retry it, and a leader that
// is never ready leaves the controller cluster answering nothing.
func TestLeaderBarrierRetried(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	c, err := New(Options{Config: testConfig(t.TempDir()), Log: zerolog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	c.barrier = func() error {
		if calls.Add(1) == 1 {
			return raft.ErrEnqueueTimeout
		}
		return c.node.raft.Barrier(applyTimeout).Error()
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	waitFor(t, "the controller to lead after a failed barrier", c.IsLeader)
	if calls.Load() < 2 {
		t.Fatalf("the barrier ran %d times", calls.Load())
	}
}

// TestReadinessIsOfTheCurrentTerm: a leader answers only while the
// barrier that made it ready passed in the current raft term. A peer
// that lost and won leadership again before watchLeadership saw the loss
// must not answer from a state the new term's barrier has not caught up
// (entries another leader committed in between): a readiness of an
// older term is no readiness.
func TestReadinessIsOfTheCurrentTerm(t *testing.T) {
	c, err := New(Options{Config: testConfig(t.TempDir()), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	waitFor(t, "the controller to lead", c.IsLeader)
	term := c.node.raft.CurrentTerm()
	c.readyTerm.Store(term - 1)
	if c.IsLeader() {
		t.Fatal("a peer ready in an earlier term answers as the leader")
	}
	if got := c.role(); got == metrics.RoleLeader {
		t.Fatal("the role metric says LEADER for a peer ready in an earlier term")
	}
	c.readyTerm.Store(term)
	if !c.IsLeader() {
		t.Fatal("a peer ready in the current term does not answer as the leader")
	}
}
