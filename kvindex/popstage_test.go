package kvindex

import (
	"math"
	"testing"
)

// A staged checkpoint keeps its record, with the mark, but has no
// deadline entry: revive no longer finds it, acks still do. Unstaging
// writes the deadline entry back at its VisibleAt.
func TestStagedCheckpointHasNoDeadline(t *testing.T) {
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
	dueCount := func() int {
		t.Helper()
		n := 0
		if err := s.DueEntries(0, math.MaxInt64, 0, func(DueEntry) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	commit(func(b *PopBatch) error { return b.PutCheckpoint(&ck) })
	if n := dueCount(); n != 1 {
		t.Fatalf("deadline entries after the put: %d, want 1", n)
	}
	commit(func(b *PopBatch) error { return b.StageCheckpoint(&ck) })
	if n := dueCount(); n != 0 {
		t.Fatalf("deadline entries of a staged checkpoint: %d, want 0", n)
	}
	got, ok, err := s.Checkpoint("g", "%RETRY%g+T", 0, 4, 1000)
	if err != nil || !ok || !got.Staged || got.RetryFlag != 2 || len(got.Offsets) != 2 {
		t.Fatalf("staged checkpoint read back: %+v %v %v", got, ok, err)
	}
	// An ack's rewrite keeps the mark and writes no deadline entry.
	got.Remove([]int64{4})
	commit(func(b *PopBatch) error { return b.RewriteCheckpoint(&got) })
	if n := dueCount(); n != 0 {
		t.Fatalf("deadline entries after an ack of a staged checkpoint: %d, want 0", n)
	}
	// Read back from the store, not the cache.
	db.cks.purge()
	again, ok, err := s.Checkpoint("g", "%RETRY%g+T", 0, 4, 1000)
	if err != nil || !ok || !again.Staged || len(again.Offsets) != 1 || again.Offsets[0] != 6 {
		t.Fatalf("staged checkpoint after the ack: %+v %v %v", again, ok, err)
	}
	if err := s.NewBatch().StageCheckpoint(&again); err == nil {
		t.Fatal("staging a staged checkpoint again was accepted")
	}
	commit(func(b *PopBatch) error { return b.UnstageCheckpoint(&again) })
	var due []DueEntry
	if err := s.DueEntries(0, math.MaxInt64, 0, func(d DueEntry) bool { due = append(due, d); return true }); err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].VisibleAt != 3000 || due[0].CKOffset != 4 {
		t.Fatalf("deadline entries after unstaging: %+v", due)
	}
	plain, ok, err := s.Checkpoint("g", "%RETRY%g+T", 0, 4, 1000)
	if err != nil || !ok || plain.Staged || plain.RetryFlag != 2 {
		t.Fatalf("unstaged checkpoint: %+v %v %v", plain, ok, err)
	}
	// A retry flag that would collide with the mark is refused.
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
