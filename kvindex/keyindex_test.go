package kvindex

import (
	"encoding/binary"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestKeyIndexStoreTimes checks both forms of a key-index entry: new
// entries carry no store time (their lookups are narrowed by the bucket's
// time range only and left to Verify), entries written by earlier builds
// carry one and are still filtered by it.
func TestKeyIndexStoreTimes(t *testing.T) {
	db := openTestDB(t)
	var kb keyBatch
	b := db.pdb.NewBatch()
	kb.add("T", "k", "", 100, 5000)
	legacy := appendKeyIndexKey(nil, "T", KindKey, "k", 200)
	if err := b.Set(legacy, binary.BigEndian.AppendUint64(nil, 7000), nil); err != nil {
		t.Fatal(err)
	}
	kb.buckets[keyBucket(200)] = [2]int64{5000, 7000}
	if err := kb.flush(db, b); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	v, closer, err := db.pdb.Get(appendKeyIndexKey(nil, "T", KindKey, "k", 100))
	if err != nil {
		t.Fatalf("new entry: %v", err)
	}
	if len(v) != 0 {
		t.Fatalf("new entry value %x, want empty", v)
	}
	_ = closer.Close()
	lookup := func(begin, end int64) []KeyIndexEntry {
		t.Helper()
		got, err := db.KeyIndex().Lookup(KeyQuery{Topic: "T", Key: "k", Kind: KindKey, Begin: begin, End: end})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := lookup(0, 0)
	if len(got) != 2 || got[0].PhyOffset != 200 || got[0].StoreTimestamp != 7000 || got[1].PhyOffset != 100 || got[1].StoreTimestamp != 0 {
		t.Fatalf("whole range: %+v", got)
	}
	// 6000-6500 overlaps the bucket: the new entry (no time) is a
	// candidate for Verify, the legacy one is out by its own time.
	if got := lookup(6000, 6500); len(got) != 1 || got[0].PhyOffset != 100 {
		t.Fatalf("range 6000-6500: %+v", got)
	}
	// Outside the bucket's range: nothing.
	if got := lookup(8000, 9000); len(got) != 0 {
		t.Fatalf("range 8000-9000: %+v", got)
	}
	// With Verify, the range applies to the store time it reads from the
	// record (here 6200 for the new entry).
	verified := func(begin, end int64) []KeyIndexEntry {
		t.Helper()
		got, err := db.KeyIndex().Lookup(KeyQuery{Topic: "T", Key: "k", Kind: KindKey, Begin: begin, End: end,
			Verify: func(e KeyIndexEntry) (int64, bool) {
				if e.PhyOffset == 100 {
					return 6200, true
				}
				return e.StoreTimestamp, true
			}})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := verified(6000, 6500); len(got) != 1 || got[0].PhyOffset != 100 || got[0].StoreTimestamp != 6200 {
		t.Fatalf("verified range 6000-6500: %+v", got)
	}
	if got := verified(6600, 6900); len(got) != 0 {
		t.Fatalf("verified range 6600-6900: %+v", got)
	}
}
