package pop

import (
	"hash/maphash"
	"math"
	"testing"

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
