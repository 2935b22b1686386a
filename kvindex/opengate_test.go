package kvindex

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// With the gate closed, Pebble runs no compaction however much L0 debt it
// has, neither on its own request nor from the scheduler's periodic
// granter; once the gate opens, the debt is compacted without any further
// prompt.
func TestOpenGateHoldsCompactionsUntilOpened(t *testing.T) {
	gate := newOpenGate()
	db := openGatedMemDB(t, gate, 2)
	defer db.Close()
	const flushes = 6
	for i := range flushes {
		for j := range 100 {
			if err := db.Set([]byte(fmt.Sprintf("k%03d", j)), []byte(fmt.Sprintf("v%d", i)), pebble.NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(350 * time.Millisecond) // three ticks of Pebble's periodic granter
	m := db.Metrics()
	if m.Compact.Count != 0 || m.Levels[0].TablesCount != flushes {
		t.Fatalf("gate closed: %d compactions, %d L0 tables; want 0 and %d", m.Compact.Count, m.Levels[0].TablesCount, flushes)
	}
	gate.open()
	deadline := time.Now().Add(20 * time.Second)
	for db.Metrics().Compact.Count == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no compaction within 20 s of opening the gate; L0 holds %d tables", db.Metrics().Levels[0].TablesCount)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Open gates only a database that exists at the newest format; after Open
// the gate is open, so a manual compaction (which also goes through the
// scheduler) completes.
func TestOpenGateOnReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), DirName)
	po := &pebble.Options{}
	po.EnsureDefaults()
	if gateOpen(po, dir) {
		t.Fatal("gate for a database that does not exist yet")
	}
	db := openDBAt(t, dir)
	for i := range 1000 {
		if err := db.pdb.Set([]byte(fmt.Sprintf("\xfetest%05d", i)), []byte("v"), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if !gateOpen(po, dir) {
		t.Fatal("no gate for an existing database at the newest format")
	}
	db = openDBAt(t, dir)
	done := make(chan error, 1)
	go func() { done <- db.Compact(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("compact after a gated open: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("manual compaction after a gated open did not finish in 30 s: the gate stayed closed")
	}
}

// A gate whose Open failed stops its granter (Pebble does not unregister
// after a failed Open); one that was never registered is left alone, and
// Pebble's own Unregister at Close after that does nothing.
func TestOpenGateAbandon(t *testing.T) {
	never := newOpenGate()
	never.abandon() // must not wait for a granter that never started

	g := newOpenGate()
	db := openGatedMemDB(t, g, 0)
	g.abandon()
	select {
	case <-g.done:
	default:
		t.Fatal("granter still running after abandon")
	}
	g.abandon()
	if err := db.Close(); err != nil { // unregisters once more
		t.Fatal(err)
	}
}

// openGatedMemDB opens an in-memory Pebble database scheduled by gate
// (l0Threshold: L0CompactionThreshold, 0 for Pebble's default).
func openGatedMemDB(t *testing.T, gate *openGate, l0Threshold int) *pebble.DB {
	t.Helper()
	po := &pebble.Options{FS: vfs.NewMem(), L0CompactionThreshold: l0Threshold, Logger: pebbleLogger{zerolog.Nop()}}
	po.EnsureDefaults()
	po.Experimental.CompactionScheduler = gate
	db, err := pebble.Open("db", po)
	if err != nil {
		t.Fatal(err)
	}
	return db
}
