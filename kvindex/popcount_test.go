package kvindex

import "testing"

// CountCheckpoints counts every checkpoint and its messages, and the
// staged ones apart.
func TestCountCheckpointsStaged(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	plain := Checkpoint{Group: "g", Topic: "T", QueueID: 1, CKOffset: 10, PopTime: 1000, InvisibleTime: 2000,
		VisibleAt: 3000, Offsets: []int64{10, 11, 12}}
	staged := Checkpoint{Group: "g", Topic: "%RETRY%g+T", QueueID: 0, CKOffset: 4, PopTime: 1000, InvisibleTime: 2000,
		VisibleAt: 3000, RetryFlag: 2, Offsets: []int64{4, 6}}
	b := s.NewBatch()
	defer b.Close()
	for _, c := range []*Checkpoint{&plain, &staged} {
		if err := b.PutCheckpoint(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b2 := s.NewBatch()
	defer b2.Close()
	if err := b2.StageCheckpoint(&staged, staged.VisibleAt+300000); err != nil {
		t.Fatal(err)
	}
	if err := b2.Commit(false); err != nil {
		t.Fatal(err)
	}
	n, err := s.CountCheckpoints()
	if err != nil {
		t.Fatal(err)
	}
	if want := (CheckpointCounts{Checkpoints: 2, Messages: 5, Staged: 1, StagedMessages: 2}); n != want {
		t.Fatalf("counts %+v, want %+v", n, want)
	}
	if cks, msgs, err := s.CountInFlight(); err != nil || cks != 2 || msgs != 5 {
		t.Fatalf("CountInFlight: %d checkpoints, %d messages, %v; want 2 and 5 (staged ones included)", cks, msgs, err)
	}
}
