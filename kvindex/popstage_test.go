package kvindex

import (
	"math"
	"testing"
)

// Staging a checkpoint marks its record and moves its deadline entry to a
// backstop; acks keep the mark and the entry; unstaging moves the entry
// back to the messages' deadline, PopTime + InvisibleTime.
func TestStagedCheckpointMovesToItsBackstop(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	ck := Checkpoint{Group: "g", Topic: "%RETRY%g+T", QueueID: 0, CKOffset: 4, PopTime: 1000, InvisibleTime: 2000,
		VisibleAt: 3000, RetryFlag: 2, Offsets: []int64{4, 6}}
	commit := func(do func(b *PopBatch) error) {
		t.Helper()
		b := s.NewBatch()
		defer b.Close()
		if err := do(b); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
	}
	dues := func() []int64 {
		t.Helper()
		var at []int64
		if err := s.DueEntries(0, math.MaxInt64, 0, func(d DueEntry) bool { at = append(at, d.VisibleAt); return true }); err != nil {
			t.Fatal(err)
		}
		return at
	}
	commit(func(b *PopBatch) error { return b.PutCheckpoint(&ck) })
	commit(func(b *PopBatch) error { return b.StageCheckpoint(&ck, 303_000) })
	if at := dues(); len(at) != 1 || at[0] != 303_000 {
		t.Fatalf("deadline entries of a staged checkpoint: %v, want [303000] (its backstop)", at)
	}
	got, ok, err := s.Checkpoint("g", "%RETRY%g+T", 0, 4, 1000)
	if err != nil || !ok || !got.Staged || got.RetryFlag != 2 || got.VisibleAt != 303_000 || len(got.Offsets) != 2 {
		t.Fatalf("staged checkpoint read back: %+v %v %v", got, ok, err)
	}
	// An ack's rewrite keeps the mark and the entry.
	got.Remove([]int64{4})
	commit(func(b *PopBatch) error { return b.RewriteCheckpoint(&got) })
	db.cks.purge() // read back from the store, not the cache
	again, ok, err := s.Checkpoint("g", "%RETRY%g+T", 0, 4, 1000)
	if err != nil || !ok || !again.Staged || len(again.Offsets) != 1 || again.Offsets[0] != 6 {
		t.Fatalf("staged checkpoint after the ack: %+v %v %v", again, ok, err)
	}
	if err := s.NewBatch().StageCheckpoint(&again, 400_000); err == nil {
		t.Fatal("staging a staged checkpoint again was accepted")
	}
	commit(func(b *PopBatch) error { return b.UnstageCheckpoint(&again) })
	if at := dues(); len(at) != 1 || at[0] != 3000 {
		t.Fatalf("deadline entries after unstaging: %v, want [3000]", at)
	}
	plain, ok, err := s.Checkpoint("g", "%RETRY%g+T", 0, 4, 1000)
	if err != nil || !ok || plain.Staged || plain.RetryFlag != 2 || plain.VisibleAt != 3000 {
		t.Fatalf("unstaged checkpoint: %+v %v %v", plain, ok, err)
	}
	// A checkpoint that failed a revive is not staged; a retry flag that
	// would collide with the mark is refused.
	tried := plain
	tried.Attempts = 1
	if err := s.NewBatch().StageCheckpoint(&tried, 400_000); err == nil {
		t.Fatal("a checkpoint revived before was staged")
	}
	bad := ck
	bad.RetryFlag = stagedBit | 1
	if err := s.NewBatch().PutCheckpoint(&bad); err == nil {
		t.Fatal("a retry flag with the staged bit was accepted")
	}
}

// A revive batch carries the staged mark of its checkpoint.
func TestReviveBatchKeepsTheStagedMark(t *testing.T) {
	r := ReviveBatch{Checkpoint: Checkpoint{Group: "g", Topic: "T", QueueID: 1, CKOffset: 9, PopTime: 5, InvisibleTime: 60000,
		VisibleAt: 60005, Staged: true, Offsets: []int64{9, 10}}, Floors: ReviveFloors{RetryV2: 3}}
	k := reviveBatchKey(nil, &r)
	v := reviveBatchValue(nil, &r)
	got, err := decodeReviveBatch(k, v)
	if err != nil || !got.Staged || got.RetryFlag != 0 || got.Floors.RetryV2 != 3 {
		t.Fatalf("decoded %+v %v", got, err)
	}
}
