package controller

import (
	"path/filepath"
	"strings"
	"testing"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
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
