package kvindex

import (
	"context"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
)

// journalFirsts lists the first offsets of the cq journal's records.
func journalFirsts(t *testing.T, db *DB) []int64 {
	t.Helper()
	var out []int64
	if err := db.Scan([]byte{prefixCQJournal}, func(k, _ []byte) bool {
		out = append(out, int64(binary.BigEndian.Uint64(k[1:])))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// PruneJournal drops exactly the records that end at or below the offset
// it is given, pass after pass, also a record written out of order below
// where the previous pass stopped, and after Truncate rewrote the journal.
func TestPruneJournal(t *testing.T) {
	db := openTestDB(t)
	c := db.ConsumeQueue(0)
	// One record per Put: [off*1000, off*1000+100).
	for off := int64(0); off < 10; off++ {
		putRange(t, c, "J", 0, off, off+1)
	}
	steps := []struct {
		what string
		do   func() error
		want []int64
	}{
		{"prune to 3100", func() error { return c.PruneJournal(3100) }, []int64{4000, 5000, 6000, 7000, 8000, 9000}},
		{"the same again", func() error { return c.PruneJournal(3100) }, []int64{4000, 5000, 6000, 7000, 8000, 9000}},
		{"prune inside a record", func() error { return c.PruneJournal(5050) }, []int64{5000, 6000, 7000, 8000, 9000}},
		{"a record below the last cut", func() error {
			putRangeShifted(t, c, "K", 0, 2, 3, 0) // [2000, 2100), as a re-dispatch writes
			return nil
		}, []int64{2000, 5000, 6000, 7000, 8000, 9000}},
		{"prune past it", func() error { return c.PruneJournal(5100) }, []int64{6000, 7000, 8000, 9000}},
		{"truncate at 8000", func() error { return c.Truncate(8000) }, []int64{6000, 7000}},
		{"prune everything", func() error { return c.PruneJournal(7100) }, nil},
		{"new records after it", func() error {
			putRange(t, c, "J", 0, 8, 9)
			putRange(t, c, "J", 0, 9, 10)
			return c.PruneJournal(8100)
		}, []int64{9000}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		if got := journalFirsts(t, db); !slices.Equal(got, s.want) {
			t.Fatalf("%s: journal %v, want %v", s.what, got, s.want)
		}
	}
}

// BenchmarkPruneJournal measures one prune of a second's worth of
// dispatch batches (2,000 records) after many earlier prunes: with the
// cursor each pass reads only the records written since the last one,
// where scanning from the start of the journal walked every record the
// earlier passes had deleted and grew with them. Report: ns per prune.
func BenchmarkPruneJournal(b *testing.B) {
	db := openDBAt(b, b.TempDir())
	c := db.ConsumeQueue(0)
	const perPass = 2000
	off := int64(0)
	fill := func() {
		for i := 0; i < perPass; i++ {
			putRange(b, c, "J", 0, off, off+1)
			off++
		}
	}
	// Earlier passes: their deleted records stay in the memtable.
	for range 20 {
		fill()
		if err := c.PruneJournal(off * 1000); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		fill()
		b.StartTimer()
		if err := c.PruneJournal(off * 1000); err != nil {
			b.Fatal(err)
		}
	}
}

// The dispatcher's pruner keeps the journal to the records the CommitLog
// has not made durable, beside the dispatch loop.
func TestDispatcherPrunesTheJournal(t *testing.T) {
	cfg := commitlog.DefaultConfig("")
	// Nothing is flushed (and so nothing pruned) before the test flushes.
	cfg.FlushInterval, cfg.FlushThoroughInterval = time.Hour, time.Hour
	s := openStack(t, t.TempDir(), cfg)
	defer s.close(t)
	for i := range 50 {
		appendForInspect(t, s, "PruneT", int32(i%4), nil)
		if err := s.disp.CatchUp(context.Background()); err != nil { // a record per batch
			t.Fatal(err)
		}
	}
	if n := len(journalFirsts(t, s.db)); n < 50 {
		t.Fatalf("%d journal records for 50 dispatch batches before any flush", n)
	}
	if err := s.log.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		firsts := journalFirsts(t, s.db)
		if len(firsts) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal still holds %d records (from %d) 10 s after the CommitLog was flushed to %d",
				len(firsts), firsts[0], s.log.FlushedOffset())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
