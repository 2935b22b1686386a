package kvindex

import (
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
)

// tailEntry is the entry the tail tests put at offset off of queue qid.
func tailEntry(topic string, qid int32, off int64) cq.Dispatch {
	return cq.Dispatch{Topic: topic, QueueID: qid, Entry: cq.Entry{QueueOffset: off, PhyOffset: off*1000 + int64(qid),
		Size: 100, TagsCode: off % 7, StoreTimestamp: 1_700_000_000_000 + off}}
}

func putRange(t testing.TB, c *CQ, topic string, qid int32, from, to int64) {
	t.Helper()
	putRangeShifted(t, c, topic, qid, from, to, 0)
}

// putRangeShifted puts the entries tailEntry gives for [from, to) with
// their physical offsets moved by shift (a queue deleted and written
// again), and returns them.
func putRangeShifted(t testing.TB, c *CQ, topic string, qid int32, from, to, shift int64) []cq.Dispatch {
	t.Helper()
	var ds []cq.Dispatch
	for off := from; off < to; off++ {
		d := tailEntry(topic, qid, off)
		d.PhyOffset += shift
		ds = append(ds, d)
	}
	if err := c.Put(ds); err != nil {
		t.Fatal(err)
	}
	return ds
}

// checkEntries fails unless got are the entries tailEntry put at
// [from, from+want).
func checkEntries(t testing.TB, got []cq.Entry, topic string, qid int32, from int64, want int) {
	t.Helper()
	if len(got) != want {
		t.Fatalf("%s/%d@%d: got %d entries, want %d", topic, qid, from, len(got), want)
	}
	for i, e := range got {
		if w := tailEntry(topic, qid, from+int64(i)).Entry; e != w {
			t.Fatalf("%s/%d@%d: entry %d is %+v, want %+v", topic, qid, from, i, e, w)
		}
	}
}

func (c *CQ) tailOf(topic string, qid int32) (first, end int64, ok bool) {
	c.cache.mu.Lock()
	defer c.cache.mu.Unlock()
	t, ok := c.cache.tails.Peek(qkey{topic, qid})
	if !ok {
		return 0, 0, false
	}
	return t.first, t.end(), true
}

// A read that reaches a queue's end gives the queue a tail; what is put
// afterwards is appended to it, and reads of it are answered from memory.
func TestCQTailFollowsTheQueueEnd(t *testing.T) {
	c := openTestDB(t).ConsumeQueue(0)
	putRange(t, c, "T", 0, 0, 10)
	got, err := c.Get("T", 0, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, got, "T", 0, 0, 4)
	if _, _, ok := c.tailOf("T", 0); ok {
		t.Fatal("a read behind the queue's end installed a tail")
	}
	got, err = c.Get("T", 0, 4, 32)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, got, "T", 0, 4, 6)
	if first, end, ok := c.tailOf("T", 0); !ok || first != 4 || end != 10 {
		t.Fatalf("tail after a read to the end: [%d, %d) %v, want [4, 10)", first, end, ok)
	}

	next := int64(10)
	for round := range 200 {
		n := int64(1 + round%9)
		putRange(t, c, "T", 0, next, next+n)
		first, end, ok := c.tailOf("T", 0)
		if !ok || end != next+n || end-first < cqTailKeep && first != 4 || end-first > 2*cqTailKeep {
			t.Fatalf("round %d: tail [%d, %d) %v after putting [%d, %d)", round, first, end, ok, next, next+n)
		}
		got, err := c.Get("T", 0, next, 32)
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, got, "T", 0, next, int(n))
		next += n
	}

	// Reads in the tail are answered from it: entries removed from the
	// database behind the cache's back are still returned.
	if err := c.db.pdb.DeleteRange(cqKey("T", 0, next-3), cqKey("T", 0, next), nil); err != nil {
		t.Fatal(err)
	}
	got, err = c.Get("T", 0, next-3, 32)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, got, "T", 0, next-3, 3)
	// A read behind the tail that wants more than the tail holds reads
	// the database.
	first, _, _ := c.tailOf("T", 0)
	got, err = c.Get("T", 0, first-1, 8)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, got, "T", 0, first-1, 8)
}

// A tail answers only when it can give what the database would: max
// entries, or everything up to the queue's end.
func TestCQTailAnswersOnlyWhole(t *testing.T) {
	tails := newCQCache(4, 4, defaultCQChunkEntries)
	q := qkey{"T", 1}
	var es []cq.Entry
	for off := int64(100); off < 110; off++ {
		es = append(es, tailEntry("T", 1, off).Entry)
	}
	tails.install(q, es, tails.cutsNow())
	cases := []struct {
		from     int64
		max      int
		queueEnd int64
		want     int // -1: not answered
	}{
		{100, 5, 110, 5},
		{105, 32, 110, 5},
		{105, 32, 120, -1}, // the queue has more than the tail: ask the database
		{105, 5, 120, 5},
		{99, 5, 110, -1},
		{110, 5, 111, -1},
	}
	for _, tc := range cases {
		got, ok, _ := tails.lookup(q, tc.from, tc.max, tc.queueEnd)
		if tc.want < 0 {
			if ok {
				t.Errorf("get(%d, %d, end %d) answered %d entries, want a miss", tc.from, tc.max, tc.queueEnd, len(got))
			}
			continue
		}
		if !ok {
			t.Errorf("get(%d, %d, end %d) missed", tc.from, tc.max, tc.queueEnd)
			continue
		}
		checkEntries(t, got, "T", 1, tc.from, tc.want)
	}
	// Entries below the tail's end are skipped; one past it restarts it.
	tails.publish([]tailWrite{{q, es[9]}, {q, tailEntry("T", 1, 110).Entry}, {q, tailEntry("T", 1, 115).Entry}})
	if got, ok, _ := tails.lookup(q, 115, 5, 116); !ok || len(got) != 1 || got[0] != tailEntry("T", 1, 115).Entry {
		t.Fatalf("after a gap: %v %v, want the entry at 115", got, ok)
	}
	if _, ok, _ := tails.lookup(q, 110, 5, 116); ok {
		t.Fatal("the tail still answers for offsets before a gap")
	}
}

// Deleting a queue or cutting its end drops its tail, and a read that
// began before such a write does not install what it read.
func TestCQTailForgetsCutEntries(t *testing.T) {
	c := openTestDB(t).ConsumeQueue(0)
	atEnd := func(topic string, qid int32, from int64, want int) {
		t.Helper()
		got, err := c.Get(topic, qid, from, 64)
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, got, topic, qid, from, want)
		if _, end, ok := c.tailOf(topic, qid); want > 0 && (!ok || end != from+int64(want)) {
			t.Fatalf("%s/%d: no tail up to %d after a read to the end", topic, qid, from+int64(want))
		}
	}
	putRange(t, c, "A", 0, 0, 20)
	putRange(t, c, "B", 0, 0, 20)
	atEnd("A", 0, 10, 10)
	atEnd("B", 0, 10, 10)

	// Truncate cuts the CommitLog's tail: entries from phy 15000 on go.
	if err := c.Truncate(15_000); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := c.tailOf("A", 0); ok {
		t.Fatal("truncate kept A's tail")
	}
	atEnd("A", 0, 10, 5)

	// A deleted queue put again from 0 at other physical offsets.
	if err := c.DeleteTopic("B"); err != nil {
		t.Fatal(err)
	}
	ds := putRangeShifted(t, c, "B", 0, 0, 12, 500)
	got, err := c.Get("B", 0, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].PhyOffset != ds[10].PhyOffset {
		t.Fatalf("after delete and re-put: %+v, want the new entries 10 and 11", got)
	}

	// An install whose read began before a cut is discarded.
	gen := c.cache.cutsNow()
	stale, err := c.Get("A", 0, 0, 64) // reaches the end: installs A's tail
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteQueue("A", 0); err != nil {
		t.Fatal(err)
	}
	c.cache.install(qkey{"A", 0}, stale, gen)
	if _, _, ok := c.tailOf("A", 0); ok {
		t.Fatal("a read from before the deletion installed a tail")
	}
}

// Readers at the ends of queues, and behind them, always get the entries
// that were put, while a writer appends in batches of every size.
func TestCQTailConcurrentReaders(t *testing.T) {
	c := openTestDB(t).ConsumeQueue(0)
	const queues, total = 4, 6000
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 16)
	for q := range int32(queues) {
		for r := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				next := int64(0)
				lag := int64(r * 40) // reader 0 at the end, the others behind
				for next < total {
					select {
					case <-done:
						return
					default:
					}
					max := 1 + rand.Intn(48)
					got, err := c.Get("T", q, next, max)
					if err != nil {
						errs <- err
						return
					}
					for i, e := range got {
						if w := tailEntry("T", q, next+int64(i)).Entry; e != w {
							errs <- fmt.Errorf("queue %d@%d: got %+v, want %+v", q, next+int64(i), e, w)
							return
						}
					}
					if len(got) > max {
						errs <- fmt.Errorf("queue %d@%d: %d entries for max %d", q, next, len(got), max)
						return
					}
					end, err := c.MaxOffset("T", q)
					if err != nil {
						errs <- err
						return
					}
					// A lagging reader reads the same offset again
					// until it is lag behind the end (or the writer is
					// done).
					if lag == 0 || end >= total || next+int64(len(got)) <= end-lag {
						next += int64(len(got))
					}
				}
			}()
		}
	}
	offs := make([]int64, queues)
	for offs[0] < total {
		var ds []cq.Dispatch
		for range 1 + rand.Intn(24) {
			q := int32(rand.Intn(queues))
			if offs[q] < total {
				ds = append(ds, tailEntry("T", q, offs[q]))
				offs[q]++
			}
		}
		if err := c.Put(ds); err != nil {
			t.Fatal(err)
		}
	}
	for q := range int32(queues) {
		putRange(t, c, "T", q, offs[q], total)
	}
	waitDone := make(chan struct{})
	go func() { wg.Wait(); close(waitDone) }()
	select {
	case err := <-errs:
		close(done)
		wg.Wait()
		t.Fatal(err)
	case <-waitDone:
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// cutsNow is the generation a read beginning now would get from lookup.
func (c *cqCache) cutsNow() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cuts
}

func (c *CQ) hasChunk(topic string, qid int32, n int64) bool {
	c.cache.mu.Lock()
	defer c.cache.mu.Unlock()
	return c.cache.chunks.Contains(chunkKey{qkey{topic, qid}, n})
}

// A reader behind a queue's end loads the whole chunks around what it
// reads, and the next reads in them are answered from memory; the queue's
// last, growing chunk is read from the database.
func TestCQChunksServeReadsBehindTheEnd(t *testing.T) {
	c := openTestDB(t).ConsumeQueue(0)
	const n = 3*defaultCQChunkEntries + 40
	putRange(t, c, "T", 0, 0, n)
	got, err := c.Get("T", 0, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, got, "T", 0, 10, 32)
	if !c.hasChunk("T", 0, 0) || c.hasChunk("T", 0, 1) {
		t.Fatal("a read of [10, 42) did not load exactly chunk 0")
	}
	// A read across a chunk boundary loads the next chunk as well.
	got, err = c.Get("T", 0, defaultCQChunkEntries-8, 32)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, got, "T", 0, defaultCQChunkEntries-8, 32)
	if !c.hasChunk("T", 0, 1) {
		t.Fatal("a read across chunks 0 and 1 did not load chunk 1")
	}
	if hits, misses := c.CacheStats(); hits != 0 || misses != 2 {
		t.Fatalf("CacheStats %d hits, %d misses after two loading reads", hits, misses)
	}
	// Answered from memory: entries deleted behind the cache's back are
	// still returned.
	if err := c.db.pdb.DeleteRange(cqKey("T", 0, 100), cqKey("T", 0, 300), nil); err != nil {
		t.Fatal(err)
	}
	got, err = c.Get("T", 0, 100, 200)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, got, "T", 0, 100, 200)
	if hits, misses := c.CacheStats(); hits != 1 || misses != 2 {
		t.Fatalf("CacheStats %d hits, %d misses after a read from chunks", hits, misses)
	}
	// The last chunk is not whole: reads there go to the database and
	// load nothing.
	got, err = c.Get("T", 0, 3*defaultCQChunkEntries, 32)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, got, "T", 0, 3*defaultCQChunkEntries, 32)
	if c.hasChunk("T", 0, 3) {
		t.Fatal("the queue's growing last chunk was cached")
	}
	// A lookup of a few entries loads no chunk.
	if _, err := c.Get("T", 0, 2*defaultCQChunkEntries+5, 1); err != nil {
		t.Fatal(err)
	}
	if c.hasChunk("T", 0, 2) {
		t.Fatal("a one-entry lookup loaded a chunk")
	}
}

// Deleting a queue drops its chunks, and a read that began before the
// deletion does not install the chunks it loaded.
func TestCQChunksForgetDeletedQueues(t *testing.T) {
	c := openTestDB(t).ConsumeQueue(0)
	putRange(t, c, "T", 0, 0, 2*defaultCQChunkEntries+1)
	gen := c.cache.cutsNow()
	stale, err := c.Get("T", 0, 0, defaultCQChunkEntries)
	if err != nil {
		t.Fatal(err)
	}
	if !c.hasChunk("T", 0, 0) {
		t.Fatal("no chunk after a read of one")
	}
	if err := c.DeleteQueue("T", 0); err != nil {
		t.Fatal(err)
	}
	if c.hasChunk("T", 0, 0) {
		t.Fatal("DeleteQueue kept the queue's chunk")
	}
	c.cache.installChunks(qkey{"T", 0}, stale, gen)
	if c.hasChunk("T", 0, 0) {
		t.Fatal("a read from before the deletion installed a chunk")
	}
	// Put again at other physical offsets: reads see the new entries.
	ds := putRangeShifted(t, c, "T", 0, 0, 2*defaultCQChunkEntries+1, 7)
	got, err := c.Get("T", 0, 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 32 || got[5].PhyOffset != ds[5].PhyOffset {
		t.Fatalf("after delete and re-put: %+v, want the new entries", got[:1])
	}
}

// Chunks evicted unread make later misses load chunks only now and then;
// chunks that are read before eviction restore loading on every miss.
func TestCQChunkLoadsFollowTheirUse(t *testing.T) {
	c := newCQCache(4, 2, 4)
	q := qkey{"T", 0}
	chunk := func(n int64) []cq.Entry {
		es := make([]cq.Entry, 4)
		for i := range es {
			es[i] = tailEntry("T", 0, n*4+int64(i)).Entry
		}
		return es
	}
	loads := func() int {
		n := 0
		for range 4 * useProbe {
			if c.loadChunks() {
				n++
			}
		}
		return n
	}
	if n := loads(); n != 4*useProbe {
		t.Fatalf("a fresh cache loaded chunks on %d of %d misses", n, 4*useProbe)
	}
	// Ten chunks through an LRU of two, none read: eight evicted unread.
	for n := int64(0); n < 10; n++ {
		c.installChunks(q, chunk(n), c.cutsNow())
	}
	if n := loads(); n != 4 {
		t.Fatalf("after chunks evicted unread, %d of %d misses loaded chunks, want 4", n, 4*useProbe)
	}
	// Chunks read before they are evicted bring the score back.
	for n := int64(10); n < 30; n++ {
		c.installChunks(q, chunk(n), c.cutsNow())
		if _, ok, _ := c.lookup(q, n*4, 4, 1000); !ok {
			t.Fatalf("chunk %d not found right after it was installed", n)
		}
	}
	if n := loads(); n != 4*useProbe {
		t.Fatalf("after chunks read before eviction, %d of %d misses loaded chunks", n, 4*useProbe)
	}
	// Dropping chunks does not count as evicting them unread.
	before := c.chunkUse.score
	c.drop(func(qkey) bool { return true })
	if c.chunkUse.score != before {
		t.Fatalf("drop moved the score from %d to %d", before, c.chunkUse.score)
	}
}

// A tail is sized for what it holds and grows to at most twice
// cqTailKeep: a scan over a million queues installs one per queue.
func TestCQTailCapacity(t *testing.T) {
	c := newCQCache(4, 4, defaultCQChunkEntries)
	q := qkey{"T", 0}
	c.install(q, []cq.Entry{tailEntry("T", 0, 0).Entry, tailEntry("T", 0, 1).Entry}, c.cutsNow())
	capOf := func() int {
		tl, _ := c.tails.Peek(q)
		return cap(tl.entries)
	}
	if n := capOf(); n > cqTailMinCap {
		t.Fatalf("a tail of 2 entries has capacity %d", n)
	}
	for off := int64(2); off < 1000; off++ {
		c.publish([]tailWrite{{q, tailEntry("T", 0, off).Entry}})
		if n := capOf(); n > 2*cqTailKeep {
			t.Fatalf("tail capacity %d at offset %d", n, off)
		}
	}
	got, ok, _ := c.lookup(q, 1000-cqTailKeep, cqTailKeep, 1000)
	if !ok {
		t.Fatal("the tail lost its newest entries")
	}
	checkEntries(t, got, "T", 0, 1000-cqTailKeep, cqTailKeep)
}

// Tails evicted unread (a scan over more queues than there are tails)
// make later reads at queues' ends install tails only now and then, and
// tails that are read bring installs back.
func TestCQTailInstallsFollowTheirUse(t *testing.T) {
	c := newCQCache(2, 2, defaultCQChunkEntries)
	installed := func(qid int32) bool {
		q := qkey{"T", qid}
		c.install(q, []cq.Entry{tailEntry("T", qid, 0).Entry}, c.cutsNow())
		return c.tails.Contains(q)
	}
	// The third install evicts the first tail, unread.
	for qid := range int32(3) {
		if !installed(qid) {
			t.Fatalf("queue %d: no tail on a fresh cache", qid)
		}
	}
	n := 0
	for qid := int32(100); qid < 100+4*useProbe; qid++ {
		if installed(qid) {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("after tails evicted unread, %d of %d installs went ahead, want 4", n, 4*useProbe)
	}
	// Tails read before they are evicted raise the score again.
	for round := 0; c.tailUse.score < 0; round++ {
		if round == 1000 {
			t.Fatalf("score %d after 1000 rounds of tails read before eviction", c.tailUse.score)
		}
		for qid := int32(1000); qid < 1000+useProbe; qid++ {
			if installed(qid) {
				if _, ok, _ := c.lookup(qkey{"T", qid}, 0, 1, 1); !ok {
					t.Fatalf("queue %d: installed tail not read", qid)
				}
			}
		}
	}
	if !installed(5000) || !installed(5001) {
		t.Fatal("installs still held back after tails were read")
	}
}

// A reader that steps through a backlog reading ahead of its step (a pull
// reads twice what it returns, for filters) crosses into the next chunk
// before it leaves the current one. Such a read loads only the chunk it
// lacks: the database is read once per chunk, and chunk loading stays on
// however long the backlog is (reloading the current chunk made its
// reloaded copy go unread, which turned loading off for good).
func TestCQChunksSteppingReaderLoadsEachChunkOnce(t *testing.T) {
	c := openTestDB(t).ConsumeQueue(0)
	const chunk, chunks = 16, 40
	c.cache = newCQCache(8, 4, chunk)
	putRange(t, c, "T", 0, 0, chunk*chunks+1)
	const step, ahead = 4, 8
	var reads int64
	for from := int64(0); from+ahead <= chunk*chunks; from += step {
		reads++
		got, err := c.Get("T", 0, from, ahead)
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, got, "T", 0, from, ahead)
	}
	hits, misses := c.CacheStats()
	if hits+misses != reads {
		t.Fatalf("CacheStats counted %d reads, want %d", hits+misses, reads)
	}
	// One load per chunk, plus the first read of every chunk after the
	// first crosses from a cached chunk into a missing one.
	if misses > chunks {
		t.Fatalf("%d of %d reads went to the database, want at most one per chunk (%d)", misses, reads, chunks)
	}
	if score := c.cache.chunkUse.score; score < 0 {
		t.Fatalf("chunk use score %d after a reader read every chunk", score)
	}
}
