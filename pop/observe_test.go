package pop

import (
	"hash/maphash"
	"math"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/kvindex"
)

// ReviveBacklog counts the checkpoints due and not yet revived, from the
// earliest, up to its limit, including one written behind the revive
// cursor since the last round; nothing while revive does not run.
func TestReviveBacklogCountsTheCheckpointsDue(t *testing.T) {
	db, err := kvindex.Open(kvindex.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := &Service{store: db.Pop(), seed: maphash.MakeSeed(), log: zerolog.Nop()}
	s.lowDeadline.Store(math.MaxInt64)
	ck := func(off, visibleAt int64) kvindex.Checkpoint {
		return kvindex.Checkpoint{Group: "G", Topic: "T", CKOffset: off, Offsets: []int64{off}, PopTime: 1_000, InvisibleTime: visibleAt - 1_000, VisibleAt: visibleAt}
	}
	putCheckpoints(t, s, ck(1, 50_000), ck(2, 60_000), ck(3, 70_000), ck(4, 500_000))
	const now = 100_000
	if r, err := s.ReviveBacklog(now, 0); err != nil || r != (ReviveBacklog{}) {
		t.Fatalf("backlog without a revive loop: %+v %v, want none", r, err)
	}
	s.reviving.Store(true)
	if r, err := s.ReviveBacklog(now, 0); err != nil || r != (ReviveBacklog{Due: 3, Earliest: 50_000}) {
		t.Fatalf("backlog: %+v %v, want the 3 checkpoints due, the earliest at 50000", r, err)
	}
	if r, err := s.ReviveBacklog(now, 2); err != nil || r != (ReviveBacklog{Due: 2, Earliest: 50_000}) {
		t.Fatalf("backlog limited to 2: %+v %v", r, err)
	}
	// A round moved the cursor past the first two (as if revived); a
	// deadline written behind it since (noteDeadline) still counts.
	s.scanFrom.Store(65_000)
	if r, err := s.ReviveBacklog(now, 0); err != nil || r != (ReviveBacklog{Due: 1, Earliest: 70_000}) {
		t.Fatalf("backlog past the cursor: %+v %v", r, err)
	}
	s.noteDeadline(60_000)
	if r, err := s.ReviveBacklog(now, 0); err != nil || r != (ReviveBacklog{Due: 2, Earliest: 60_000}) {
		t.Fatalf("backlog with a deadline behind the cursor: %+v %v", r, err)
	}
}

// ReviveBacklog counts no deadline entry an ack or a change of invisible
// time left behind: they change a checkpoint and its deadline entry in
// one batch (an ack that empties a checkpoint deletes both, a change
// moves its message to a checkpoint of its own under the new deadline
// and deletes the old one once empty), so rocketmq_pop_revive_lag holds
// no orphan entry.
func TestReviveBacklogLeavesOutAckedAndChangedCheckpoints(t *testing.T) {
	db, err := kvindex.Open(kvindex.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.UnixMilli(100_000)
	s := &Service{cfg: Config{Now: func() time.Time { return now }, Offsets: db.ConsumerOffsets()}, store: db.Pop(),
		seed: maphash.MakeSeed(), wake: make(chan struct{}, 1), log: zerolog.Nop()}
	s.lowDeadline.Store(math.MaxInt64)
	s.reviving.Store(true)
	ck := func(off int64, offsets []int64, visibleAt int64) kvindex.Checkpoint {
		return kvindex.Checkpoint{Group: "G", Topic: "T", CKOffset: off, Offsets: offsets, PopTime: 1_000, InvisibleTime: visibleAt - 1_000, VisibleAt: visibleAt}
	}
	acked, changed, split, kept := ck(1, []int64{1, 2}, 50_000), ck(5, []int64{5}, 60_000), ck(7, []int64{7, 8}, 65_000), ck(10, []int64{10}, 70_000)
	putCheckpoints(t, s, acked, changed, split, kept)
	if r, err := s.ReviveBacklog(now.UnixMilli(), 0); err != nil || r != (ReviveBacklog{Due: 4, Earliest: 50_000}) {
		t.Fatalf("backlog before: %+v %v, want 4 from 50000", r, err)
	}
	handle := func(c kvindex.Checkpoint) Handle {
		return Handle{CKOffset: c.CKOffset, PopTime: c.PopTime, InvisibleTime: c.InvisibleTime}
	}
	for _, off := range acked.Offsets {
		if a, err := s.Ack("G", "T", 0, off, handle(acked)); err != nil || a.Deleted != 1 {
			t.Fatalf("ack of %d: %+v %v", off, a, err)
		}
	}
	if res, err := s.ChangeInvisibleTime("G", "T", 0, 5, handle(changed), 900_000); err != nil || !res.Changed {
		t.Fatalf("change of 5: %+v %v", res, err)
	}
	if res, err := s.ChangeInvisibleTime("G", "T", 0, 8, handle(split), 900_000); err != nil || !res.Changed {
		t.Fatalf("change of 8: %+v %v", res, err)
	}
	// Left due: 7 (its checkpoint, still at 65000) and 10.
	if r, err := s.ReviveBacklog(now.UnixMilli(), 0); err != nil || r != (ReviveBacklog{Due: 2, Earliest: 65_000}) {
		t.Fatalf("backlog after the acks and changes: %+v %v, want 2 from 65000", r, err)
	}
}
