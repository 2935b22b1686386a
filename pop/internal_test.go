package pop

import (
	"hash/maphash"
	"math"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
)

// TestReviveCursorFollowsLateDeadlines checks that a deadline written
// behind the revive cursor (here a change of invisible time to a negative
// value, which the protocol does not forbid) lowers the cursor for the
// next round, so the record is scanned and revived rather than skipped
// until a restart.
func TestReviveCursorFollowsLateDeadlines(t *testing.T) {
	db, err := kvindex.Open(kvindex.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.UnixMilli(1_000_000)
	s := &Service{cfg: Config{Now: func() time.Time { return now }}, store: db.Pop(), seed: maphash.MakeSeed(), wake: make(chan struct{}, 1)}
	s.lowDeadline.Store(math.MaxInt64)

	rec := kvindex.InFlight{Group: "G", Topic: "T", QueueID: 0, QueueOffset: 7,
		VisibleAt: 1_060_000, PopTime: 1_000_000, InvisibleTime: 60_000}
	b := s.store.NewBatch()
	if err := b.AddInFlight(&rec); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	// A revive round with nothing due moves the cursor up to now - margin.
	s.lowerCursor()
	s.cursor = max(s.cursor, s.now()-reviveCursorMargin)
	if s.cursor != 1_000_000-reviveCursorMargin {
		t.Fatalf("cursor %d", s.cursor)
	}

	res, err := s.ChangeInvisibleTime("G", "T", 0, 7, Handle{PopTime: rec.PopTime, InvisibleTime: rec.InvisibleTime}, -10_000)
	if err != nil || !res.Changed {
		t.Fatalf("change invisible time: %+v, %v", res, err)
	}
	s.lowerCursor()
	if s.cursor > 990_000 {
		t.Fatalf("cursor %d stays above the new deadline 990000", s.cursor)
	}
	var due []kvindex.InFlight
	if err := s.store.DueFrom(s.cursor, s.now(), 0, func(r kvindex.InFlight) bool { due = append(due, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].QueueOffset != 7 || due[0].VisibleAt != 990_000 {
		t.Fatalf("due from the cursor: %+v", due)
	}
}

// TestFinishPopSkipsDeletedMessages checks the lazy pop path: a message
// recorded in flight whose record retention deleted before the pop read
// its body is left out of the answer, as the eager read leaves it out,
// instead of failing a pop whose records are already committed.
func TestFinishPopSkipsDeletedMessages(t *testing.T) {
	cfg := commitlog.DefaultConfig(t.TempDir())
	cfg.SegmentSize = 1 << 20
	cfg.Logger = zerolog.Nop()
	l, err := commitlog.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &Service{cfg: Config{Log: l}}
	gone := cq.Entry{QueueOffset: 5, PhyOffset: 1 << 40, Size: 100} // past the log: ErrOffsetOutOfRange
	r := readResult{from: 5, offsets: []int64{5, 6}, records: [][]byte{nil, []byte("kept")},
		entries: []cq.Entry{gone, {QueueOffset: 6}}, next: 7}
	var res PopResult
	var info InfoBuilder
	if err := s.finishPop(PopRequest{Topic: "T"}, source{topic: "T", flag: FlagNormal}, r, &res, &info); err != nil {
		t.Fatalf("finishPop: %v", err)
	}
	if len(res.Records) != 1 || string(res.Records[0]) != "kept" {
		t.Fatalf("records %q, want only the one still in the log", res.Records)
	}
}

// TestCurrentInFlightBoundsItsWalk checks how revive re-reads the records
// it found due: two due records with 3,000 records in flight between them
// are both found (one of them changed since the scan, as the current
// version), an acknowledged one is absent, and the walk over the queue's
// ack index stops at its budget instead of visiting everything between.
func TestCurrentInFlightBoundsItsWalk(t *testing.T) {
	db, err := kvindex.Open(kvindex.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := &Service{store: db.Pop()}
	rec := func(off, visibleAt int64) kvindex.InFlight {
		return kvindex.InFlight{Group: "G", Topic: "T", QueueID: 2, QueueOffset: off,
			VisibleAt: visibleAt, PopTime: visibleAt - 1000, InvisibleTime: 1000}
	}
	const between = 3000
	b := s.store.NewBatch()
	add := func(r kvindex.InFlight) {
		t.Helper()
		if err := b.AddInFlight(&r); err != nil {
			t.Fatal(err)
		}
	}
	add(rec(0, 5000))
	for off := int64(1); off <= between; off++ {
		add(rec(off, 9_000_000))
	}
	changed := rec(between+1, 5000)
	changed.VisibleAt, changed.PopTime, changed.InvisibleTime = 7000, 6000, 1000 // moved after the scan
	add(changed)
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	due := []kvindex.InFlight{rec(0, 5000), rec(between+1, 5000), rec(between+2, 5000)} // the last one was acked
	got, visited, err := s.currentInFlight(queueKey{"G", "T", 2}, due)
	if err != nil {
		t.Fatal(err)
	}
	if budget := reviveWalkBudget(len(due)); visited > budget {
		t.Fatalf("visited %d ack-index entries, budget %d", visited, budget)
	}
	if len(got) != 2 || got[0].VisibleAt != 5000 || got[between+1].VisibleAt != 7000 || got[between+1].PopTime != 6000 {
		t.Fatalf("current records %+v", got)
	}
	if _, ok := got[between+2]; ok {
		t.Fatal("an acknowledged record is reported current")
	}
	// A dense run is found by the walk alone.
	dense := []kvindex.InFlight{rec(1, 9_000_000), rec(2, 9_000_000), rec(3, 9_000_000)}
	got, visited, err = s.currentInFlight(queueKey{"G", "T", 2}, dense)
	if err != nil || len(got) != 3 || visited != 3 {
		t.Fatalf("dense run: %d records, %d visited, %v", len(got), visited, err)
	}
}
