package kvindex

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/cq"
)

// A writer commits entries before it publishes the queue's new end; a
// read in between meets them in the database. Get must not return them:
// a reader would otherwise move past the end MaxOffset reports (a pop
// position past it, which the next pop moves back, handing the messages
// out twice).
func TestGetStopsAtThePublishedEnd(t *testing.T) {
	db := openTestDB(t)
	c := db.ConsumeQueue(0)
	var put []cq.Dispatch
	for off := int64(0); off < 4; off++ {
		put = append(put, cq.Dispatch{Topic: "T", QueueID: 0, Entry: cq.Entry{QueueOffset: off, PhyOffset: 100 * off, Size: 100}})
	}
	if err := c.Put(put); err != nil {
		t.Fatal(err)
	}
	// Entries 4 and 5 committed as a writer does, their end not yet
	// published.
	b := db.pdb.NewBatch()
	for off := int64(4); off < 6; off++ {
		if err := b.Set(cqKey("T", 0, off), appendCQValue(nil, 100*off, 100, 0, 0), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	b.Close()

	end, err := c.MaxOffset("T", 0)
	if err != nil || end != 4 {
		t.Fatalf("MaxOffset = %d (%v), want 4: the end as published", end, err)
	}
	for _, from := range []int64{0, 2, 3} {
		got, err := c.Get("T", 0, from, 32)
		if err != nil {
			t.Fatal(err)
		}
		if n := int64(len(got)); n != end-from || (n > 0 && got[n-1].QueueOffset != end-1) {
			t.Fatalf("Get from %d returned %d entries ending at %d; want %d, ending before the published end %d",
				from, len(got), got[len(got)-1].QueueOffset, end-from, end)
		}
	}
	if got, err := c.Get("T", 0, 4, 32); err != nil || len(got) != 0 {
		t.Fatalf("Get from the published end returned %d entries (%v), want none", len(got), err)
	}
}
