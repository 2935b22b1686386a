package kvindex

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/cq"
)

func TestQueueOffsetsLoadAssignEvict(t *testing.T) {
	db := openTestDB(t)
	store := db.ConsumeQueue(0)
	// Queue A/0 already holds offsets 0..4 in the index.
	var entries []cq.Dispatch
	for i := int64(0); i < 5; i++ {
		entries = append(entries, cq.Dispatch{Topic: "A", QueueID: 0, Entry: cq.Entry{QueueOffset: i, PhyOffset: 100 * i, Size: 100}})
	}
	if err := store.Put(entries); err != nil {
		t.Fatal(err)
	}
	tab := NewQueueOffsets(store, 2, zerolog.Nop())
	if err := tab.Acquire("A", 0); err != nil {
		t.Fatal(err)
	}
	if got := tab.Assign("A", 0, 3); got != 5 {
		t.Fatalf("first assign %d, want 5 (loaded from the index)", got)
	}
	if got := tab.Assign("A", 0, 1); got != 8 {
		t.Fatalf("second assign %d, want 8", got)
	}
	tab.Release("A", 0)
	// Fill beyond capacity: A/0 is ahead of the dispatcher and must stay.
	for q := int32(1); q <= 4; q++ {
		if err := tab.Acquire("B", q); err != nil {
			t.Fatal(err)
		}
		tab.Release("B", q)
	}
	if n, _ := tab.Next("A", 0); n != 9 {
		t.Fatalf("A/0 next %d after pressure, want 9: an undispatched queue was evicted", n)
	}
	if tab.Len() > 3 {
		t.Fatalf("table holds %d queues, capacity 2 (+ the pinned one)", tab.Len())
	}
	// Once dispatched, A/0 becomes evictable and reloads the same value.
	tab.Dispatched("A", 0, 9)
	for q := int32(5); q <= 8; q++ {
		if err := tab.Acquire("B", q); err != nil {
			t.Fatal(err)
		}
		tab.Release("B", q)
	}
	if tab.Len() > 2 {
		t.Fatalf("table holds %d queues, want at most 2", tab.Len())
	}
	tab.Forget("B", AnyQueue)
	for q := int32(1); q <= 8; q++ {
		if _, ok := tab.entries.Peek(queueIDOf("B", q)); ok {
			t.Fatalf("B/%d not forgotten", q)
		}
	}
}

func TestQueueOffsetsAssignWithoutAcquire(t *testing.T) {
	tab := NewQueueOffsets(openTestDB(t).ConsumeQueue(0), 0, zerolog.Nop())
	if got := tab.Assign("X", 3, 2); got != 0 {
		t.Fatalf("assign on a new queue %d, want 0", got)
	}
	if got := tab.Assign("X", 3, 1); got != 2 {
		t.Fatalf("assign %d, want 2", got)
	}
}
