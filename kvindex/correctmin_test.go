package kvindex

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rocketkv/rocketkv/cq"
)

// A queue deleted between CorrectMin's reads and its writes is not
// brought back by the planned cut (its min key), and a queue truncated
// meanwhile gets a minimum within what it still holds, so that the
// entries written after the cut stay readable.
func TestCorrectMinReplansAfterReshape(t *testing.T) {
	db := openTestDB(t)
	c := db.ConsumeQueue(0)
	var ds []cq.Dispatch
	for _, topic := range []string{"Gone", "Kept"} {
		for k := int64(0); k < 4; k++ {
			phy := 1000*k + int64(len(topic))
			ds = append(ds, cq.Dispatch{Topic: topic, QueueID: 0, Entry: cq.Entry{QueueOffset: k, PhyOffset: phy, Size: 10, StoreTimestamp: 1}})
		}
	}
	if err := c.Put(ds); err != nil {
		t.Fatal(err)
	}
	plans := 0
	c.afterMinPlan = func() {
		plans++
		if plans > 1 {
			return
		}
		if err := c.DeleteTopic("Gone"); err != nil {
			t.Error(err)
		}
		// Kept keeps its entries 0-2: the plan's minimum, 4, is now past
		// its end.
		if err := c.Truncate(2500); err != nil {
			t.Error(err)
		}
	}
	if err := c.CorrectMin(5000); err != nil {
		t.Fatal(err)
	}
	if plans != 2 {
		t.Errorf("CorrectMin planned %d rounds, want 2 (the first made stale)", plans)
	}
	var listed []string
	if err := c.Queues(func(topic string, _ int32) bool { listed = append(listed, topic); return true }); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0] != "Kept" {
		t.Errorf("queues after CorrectMin = %v, want [Kept]: the deleted topic came back", listed)
	}
	checkQueueBounds(t, c, "Kept", 0, 3, 3)
	if err := c.Put([]cq.Dispatch{
		{Topic: "Kept", QueueID: 0, Entry: cq.Entry{QueueOffset: 3, PhyOffset: 6000, Size: 10, StoreTimestamp: 1}},
		{Topic: "Kept", QueueID: 0, Entry: cq.Entry{QueueOffset: 4, PhyOffset: 7000, Size: 10, StoreTimestamp: 1}},
	}); err != nil {
		t.Fatal(err)
	}
	checkQueueBounds(t, c, "Kept", 0, 3, 5)
	// The same from the database, not the bounds cache.
	reopened := db.ConsumeQueue(0)
	if minOff, err := reopened.MinOffset("Kept", 0); err != nil || minOff != 3 {
		t.Errorf("Kept/0 min offset read from the database = %d, %v; want 3", minOff, err)
	}
	got, err := reopened.Get("Kept", 0, 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].QueueOffset != 3 || got[1].QueueOffset != 4 {
		t.Errorf("Kept/0 from 3 = %+v, want the entries at 3 and 4", got)
	}
}

// CorrectMin passes running while entries are put and queues deleted
// leave every queue consistent: its readable entries are exactly
// [MinOffset, MaxOffset), and none lies below the last whole-store
// pass's minimum.
func TestCorrectMinConcurrentWithWriters(t *testing.T) {
	db := openTestDB(t)
	c := db.ConsumeQueue(0)
	const queues, rounds = 64, 80
	var phy atomic.Int64
	next := make([]int64, queues)
	var passes sync.WaitGroup
	var lastMin atomic.Int64 // the last whole-store pass's minimum
	// Two passes at a time: a whole-store one and one of a few queues, as
	// retention and the dispatcher's correction of a lagging batch.
	for _, some := range [][]qkey{nil, {{"T", 1}, {"T", 2}, {"T", 3}}} {
		passes.Add(1)
		go func() {
			defer passes.Done()
			for r := 0; r < rounds; r++ {
				m := phy.Load() - 2000
				var err error
				if some == nil {
					err = c.CorrectMin(m)
				} else {
					err = c.correctMinOf(some, m)
				}
				if err != nil {
					t.Error(err)
					return
				}
				if some == nil {
					// Only a whole-store pass binds every queue.
					lastMin.Store(m)
				}
			}
		}()
	}
	for r := 0; r < rounds*4; r++ {
		var ds []cq.Dispatch
		for q := 0; q < queues; q++ {
			ds = append(ds, cq.Dispatch{Topic: "T", QueueID: int32(q), Entry: cq.Entry{QueueOffset: next[q], PhyOffset: phy.Add(10), Size: 10, StoreTimestamp: 1}})
			next[q]++
		}
		if err := c.Put(ds); err != nil {
			t.Fatal(err)
		}
		if r%50 == 49 {
			q := r % queues
			if err := c.DeleteQueue("T", int32(q)); err != nil {
				t.Fatal(err)
			}
			next[q] = 0
		}
	}
	passes.Wait()
	fresh := db.ConsumeQueue(0)
	for _, store := range []*CQ{c, fresh} {
		for q := 0; q < queues; q++ {
			minOff, err := store.MinOffset("T", int32(q))
			if err != nil {
				t.Fatal(err)
			}
			maxOff, err := store.MaxOffset("T", int32(q))
			if err != nil {
				t.Fatal(err)
			}
			if maxOff != next[q] {
				t.Errorf("T/%d max offset %d, want %d", q, maxOff, next[q])
			}
			got, err := store.Get("T", int32(q), minOff, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(got)) != maxOff-minOff {
				t.Errorf("T/%d: %d entries readable in [%d, %d)", q, len(got), minOff, maxOff)
			}
			if len(got) > 0 && got[0].PhyOffset < lastMin.Load() {
				t.Errorf("T/%d: first readable entry at %d, below the last minimum %d", q, got[0].PhyOffset, lastMin.Load())
			}
		}
	}
}

// A pass whose reads are older than another pass's writes leaves out the
// cuts the other made stale (they would lower the minimum the other
// recorded, and of a queue the other emptied, its end), without planning
// again: the dispatcher's corrections of a few queues must not make a
// retention pass over every queue start its round over.
func TestCorrectMinPassesDoNotLowerEachOther(t *testing.T) {
	db := openTestDB(t)
	c := db.ConsumeQueue(0)
	var ds []cq.Dispatch
	for k := int64(0); k < 4; k++ {
		ds = append(ds, cq.Dispatch{Topic: "T", QueueID: 0, Entry: cq.Entry{QueueOffset: k, PhyOffset: 1000 * k, Size: 10, StoreTimestamp: 1}})
	}
	if err := c.Put(ds); err != nil {
		t.Fatal(err)
	}
	plans := 0
	c.afterMinPlan = func() {
		plans++
		if plans == 1 {
			// The later pass empties the queue: its minimum becomes 4.
			if err := c.CorrectMin(5000); err != nil {
				t.Error(err)
			}
		}
	}
	// This pass read the queue first and planned a minimum of 2.
	if err := c.CorrectMin(1500); err != nil {
		t.Fatal(err)
	}
	if plans != 2 {
		t.Errorf("%d rounds planned, want 2 (one per pass)", plans)
	}
	for _, store := range []*CQ{c, db.ConsumeQueue(0)} {
		checkQueueBounds(t, store, "T", 0, 4, 4)
	}
}

// checkQueueBounds fails the test unless topic/qid's readable range in
// store is [wantMin, wantMax).
func checkQueueBounds(t *testing.T, store *CQ, topic string, qid int32, wantMin, wantMax int64) {
	t.Helper()
	minOff, err := store.MinOffset(topic, qid)
	if err != nil {
		t.Fatal(err)
	}
	maxOff, err := store.MaxOffset(topic, qid)
	if err != nil {
		t.Fatal(err)
	}
	if minOff != wantMin || maxOff != wantMax {
		t.Errorf("%s/%d bounds = [%d, %d), want [%d, %d)", topic, qid, minOff, maxOff, wantMin, wantMax)
	}
}

// A cut deletes every entry below the new minimum from the database,
// whether it deletes them one by one (a few) or with a range deletion
// (many), and nothing at or above it.
func TestCorrectMinDeletesEveryEntryBelow(t *testing.T) {
	db := openTestDB(t)
	c := db.ConsumeQueue(0)
	const entries = 3 * pointCutMax
	var ds []cq.Dispatch
	for k := int64(0); k < entries; k++ {
		// Few: 4 of its entries lie below 1000; Many: 2*pointCutMax+1.
		ds = append(ds,
			cq.Dispatch{Topic: "Few", QueueID: 0, Entry: cq.Entry{QueueOffset: k, PhyOffset: 300*k + 1, Size: 1, StoreTimestamp: 1}},
			cq.Dispatch{Topic: "Many", QueueID: 0, Entry: cq.Entry{QueueOffset: k, PhyOffset: k*1000/(2*pointCutMax+1) + 2, Size: 1, StoreTimestamp: 1}})
	}
	if err := c.Put(ds); err != nil {
		t.Fatal(err)
	}
	if err := c.CorrectMin(1000); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		topic  string
		newMin int64
	}{{"Few", 4}, {"Many", 2*pointCutMax + 1}} {
		kept := storedEntryOffsets(t, db, tc.topic, 0)
		if len(kept) != int(entries-tc.newMin) || kept[0] != tc.newMin {
			t.Errorf("%s: entries %v left in the database, want [%d, %d)", tc.topic, kept, tc.newMin, entries)
		}
		if minOff, err := db.ConsumeQueue(0).MinOffset(tc.topic, 0); err != nil || minOff != tc.newMin {
			t.Errorf("%s: min offset %d, %v; want %d", tc.topic, minOff, err, tc.newMin)
		}
	}
}

// A queue deleted and created again while a round is in flight (the
// retention pass's, across the dispatcher's corrections): the minimum
// another round raised the deleted queue to is no reason to skip a cut of
// the new one, which numbers its entries from 0 again.
func TestCorrectMinForgetsRaisedMinimaOfDeletedQueues(t *testing.T) {
	db := openTestDB(t)
	c := db.ConsumeQueue(0)
	put := func(n int64) {
		t.Helper()
		var ds []cq.Dispatch
		for k := int64(0); k < n; k++ {
			ds = append(ds, cq.Dispatch{Topic: "T", QueueID: 0, Entry: cq.Entry{QueueOffset: k, PhyOffset: 100 * (k + 1), Size: 10, StoreTimestamp: 1}})
		}
		if err := c.Put(ds); err != nil {
			t.Fatal(err)
		}
	}
	put(8)
	if err := c.Put([]cq.Dispatch{{Topic: "Other", QueueID: 0, Entry: cq.Entry{QueueOffset: 0, PhyOffset: 50_000, Size: 10, StoreTimestamp: 1}}}); err != nil {
		t.Fatal(err)
	}
	t0 := []qkey{{"T", 0}}
	plans := 0
	c.afterMinPlan = func() {
		if plans++; plans > 1 {
			return
		}
		// While the outer round is between its reads and its writes: a
		// correction empties T/0 (minimum 8), the topic is deleted and
		// created again with 4 entries, all of records retention deleted.
		if err := c.correctMinOf(t0, 10_000); err != nil {
			t.Error(err)
		}
		if err := c.DeleteTopic("T"); err != nil {
			t.Error(err)
		}
		put(4)
		if err := c.correctMinOf(t0, 10_000); err != nil {
			t.Error(err)
		}
	}
	if err := c.correctMinOf([]qkey{{"Other", 0}}, 10_000); err != nil {
		t.Fatal(err)
	}
	if plans != 3 {
		t.Fatalf("%d rounds planned, want 3", plans)
	}
	// [4, 4): else the new queue's entries of deleted records were left.
	for _, store := range []*CQ{c, db.ConsumeQueue(0)} {
		checkQueueBounds(t, store, "T", 0, 4, 4)
	}
}

// The cuts of a CorrectMin are on disk when it returns, even when another
// round raised every queue of its last chunk meanwhile (that chunk then
// writes nothing): its earlier chunks, written unsynced, are synced all
// the same. The dispatcher relies on it for its correction of a lagging
// batch, which no start repeats (the applied minimum is past it).
func TestCorrectMinSyncedWhenLastChunkSkipped(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db := openDBOn(t, fs)
	c := db.ConsumeQueue(0)
	// Two chunks of cuts: queues 0-1023, then queue 1024.
	const queues = correctMinChunk + 1
	var ds []cq.Dispatch
	for q := int32(0); q < queues; q++ {
		for k := int64(0); k < 2; k++ {
			ds = append(ds, cq.Dispatch{Topic: "T", QueueID: q, Entry: cq.Entry{QueueOffset: k, PhyOffset: 100*k + 10, Size: 10, StoreTimestamp: 1}})
		}
	}
	if err := c.Put(ds); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	plans := 0
	c.afterMinPlan = func() {
		if plans++; plans == 1 {
			// Another round empties the last queue first.
			if err := c.correctMinOf([]qkey{{"T", queues - 1}}, 1000); err != nil {
				t.Error(err)
			}
		}
	}
	if err := c.CorrectMin(50); err != nil {
		t.Fatal(err)
	}
	after := openDBOn(t, fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})).ConsumeQueue(0)
	for q := int32(0); q < queues; q++ {
		want := int64(1)
		if q == queues-1 {
			want = 2
		}
		if minOff, err := after.MinOffset("T", q); err != nil || minOff != want {
			t.Fatalf("T/%d min offset after a crash = %d, %v; want %d", q, minOff, err, want)
		}
	}
}

// storedEntryOffsets returns the queue offsets of the ConsumeQueue entries
// the database holds for a queue, in order, read from its keys.
func storedEntryOffsets(t *testing.T, db *DB, topic string, qid int32) []int64 {
	t.Helper()
	var kept []int64
	if err := db.Scan(queuePrefix(prefixCQ, topic, qid), func(k, _ []byte) bool {
		_, _, off, err := decodeCQKey(k)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, off)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return kept
}
