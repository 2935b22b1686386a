package kvindex

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestPopQueuesSumsPositionsCheckpointsAndOrders(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	b := s.NewBatch()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// g popped T/0 twice (3 and 2 messages, one of the second acked
	// already) and stands at 10.
	must(b.SetPosition("g", "T", 0, 10))
	must(b.PutCheckpoint(&Checkpoint{Group: "g", Topic: "T", QueueID: 0, CKOffset: 5, PopTime: 1, InvisibleTime: 9, VisibleAt: 10, Offsets: []int64{5, 6, 7}}))
	must(b.PutCheckpoint(&Checkpoint{Group: "g", Topic: "T", QueueID: 0, CKOffset: 8, PopTime: 2, InvisibleTime: 9, VisibleAt: 11, Offsets: []int64{9}}))
	// g's retry queue: a checkpoint, no position (it cannot be, but the
	// sum must not invent one).
	must(b.PutCheckpoint(&Checkpoint{Group: "g", Topic: "%RETRY%g+T", QueueID: 0, CKOffset: 0, PopTime: 1, InvisibleTime: 9, VisibleAt: 10, RetryFlag: 2, Offsets: []int64{0, 1}}))
	// h popped T/0 and every message came back: a position alone.
	must(b.SetPosition("h", "T", 0, 4))
	// o pops O/1 orderly: 3 messages, the middle one acked.
	must(b.SetOrder(&OrderState{Group: "o", Topic: "O", QueueID: 1, PopTime: 1, InvisibleTime: 9, Acked: 0b010,
		Messages: []OrderMessage{{QueueOffset: 20}, {QueueOffset: 21}, {QueueOffset: 23}}}))
	must(b.Commit(true))
	b.Close()

	got, err := s.Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b PopQueue) int {
		return strings.Compare(a.Group+"/"+a.Topic, b.Group+"/"+b.Topic)
	})
	want := []PopQueue{
		{Group: "g", Topic: "%RETRY%g+T", QueueID: 0, Position: -1, InFlight: 2},
		{Group: "g", Topic: "T", QueueID: 0, Position: 10, InFlight: 4},
		{Group: "h", Topic: "T", QueueID: 0, Position: 4},
		{Group: "o", Topic: "O", QueueID: 1, Position: 24, InFlight: 2},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("queues\n got %+v\nwant %+v", got, want)
	}
}

// POP state records that do not decode are left out, named and counted
// in a *SkippedError: a bad key makes no queue, a bad value adds nothing
// to the queue its key names; every other record still counts.
func TestPopQueuesLeavesOutUndecodableRecords(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	b := s.NewBatch()
	if err := b.SetPosition("g", "T", 0, 10); err != nil {
		t.Fatal(err)
	}
	if err := b.PutCheckpoint(&Checkpoint{Group: "g", Topic: "T", CKOffset: 5, PopTime: 1, InvisibleTime: 9, VisibleAt: 10, Offsets: []int64{5, 6}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// A key that names no queue, and a checkpoint of g's T/1 whose value
	// is cut short.
	if err := db.pdb.Set([]byte{prefixPopPosition, 0xff}, []byte{0, 0, 0, 0, 0, 0, 0, 1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.pdb.Set(checkpointKey(nil, "g", "T", 1, 0, 1), []byte{1, 2}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.Queues(context.Background())
	var skipped *SkippedError
	if !errors.As(err, &skipped) || skipped.Count != 2 || !strings.Contains(err.Error(), "52ff") {
		t.Fatalf("Queues over two bad records: %v; want a SkippedError of 2 naming key 52ff first", err)
	}
	want := []PopQueue{
		{Group: "g", Topic: "T", QueueID: 0, Position: 10, InFlight: 2},
		{Group: "g", Topic: "T", QueueID: 1, Position: -1},
	}
	slices.SortFunc(got, func(a, b PopQueue) int { return int(a.QueueID - b.QueueID) })
	if !slices.Equal(got, want) {
		t.Fatalf("queues beside the bad records\n got %+v\nwant %+v", got, want)
	}
}

// Queues stops scanning once its context ended and returns the context's
// error (a role switch detaching the metrics that asked does not wait for
// the rest of the POP state), and reads everything under a live one.
func TestPopQueuesStopsWhenItsContextEnds(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	b := s.NewBatch()
	const queues = 3 * popQueuesCheckEvery
	for q := range queues {
		if err := b.SetPosition("g", "T", int32(q), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if got, err := s.Queues(context.Background()); err != nil || len(got) != queues {
		t.Fatalf("Queues: %d queues, %v; want %d", len(got), err, queues)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := s.Queues(ctx); !errors.Is(err, context.Canceled) || got != nil {
		t.Fatalf("Queues with an ended context: %d queues, %v; want none and context.Canceled", len(got), err)
	}
}
