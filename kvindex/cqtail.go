package kvindex

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/rocketkv/rocketkv/cq"
)

// Bounds of the ConsumeQueue cache (see cqCache).
const (
	// DefaultCQTailQueues is how many queues keep a tail.
	DefaultCQTailQueues = 1024
	// DefaultCQChunks is how many chunks of older entries are kept
	// (10 KiB each at the default chunk size).
	DefaultCQChunks = 1024
	// defaultCQChunkEntries is the entry count of a chunk.
	defaultCQChunkEntries = 256
	// cqTailKeep is how many of a queue's newest entries a tail keeps at
	// least; it holds up to twice as many between compactions. A reader
	// more than that far behind the queue's end reads the database.
	cqTailKeep = 64
	// cqTailMinCap is the smallest capacity a tail is created with.
	cqTailMinCap = 8
)

// cqCache keeps ConsumeQueue entries in memory in two forms, so that the
// reads of pulls, pops and revive cost a map lookup and a copy: tails,
// the newest entries of queues whose readers are at their end, and
// chunks, aligned runs of older entries for readers behind the end.
//
// Tails. A read of what was just dispatched costs, through Pebble, a new
// iterator and a seek through the memtables and every level: 13 % of the
// broker's CPU under a paced produce with long-polling consumers.
//
// A queue gets a tail when a read through the database reached the
// queue's end, that is when someone reads there; the dispatcher then
// appends what it commits (publish). A tail is a contiguous run of
// committed entries [first, first+len(entries)). Every writer holds CQ.mu,
// so appends are ordered with each other and with deletions. Readers
// install tails without CQ.mu; a writer that deletes a queue or cuts its
// end (Delete*, Truncate) drops the tails of its queues and increments
// cuts, and an install whose read began before that (cuts changed) is
// discarded, so no tail holds an entry such a write removed. CorrectMin
// needs neither: it removes entries below a queue's new minimum, and Get
// checks the minimum before it asks the tail.
//
// Chunks. A consumer draining a backlog reads 32 entries at a time, and
// each read paid the iterator and the seek, with block loads and
// decompression of tables just compacted: 29 % of the broker's CPU while
// 32 consumers popped a backlog. Chunk k of a queue holds its entries
// [k*chunkSize, (k+1)*chunkSize), all of them: a read that misses loads
// the chunks it needs that the queue holds whole, so one iterator serves
// the next chunkSize/32 reads, and readers at different offsets (groups
// at their own pace) use different chunks. Entries never change once
// committed, so a chunk stays true until a deletion or a cut, which drop
// the queue's chunks like its tail.
//
// Use scores. A chunk load reads chunkSize entries where the reader asked
// for about 32: it pays only if the chunk is read again before the LRU
// evicts it. A consumer catching up on more queues than there are chunks,
// reading each in turn, evicts every chunk unread, and then each read
// cost 1.8x a plain one (BenchmarkCQGetRotating, 4096 queues). Likewise a
// pull scan over a hundred thousand queues installs a tail for each and
// reads none of them again (5 % more broker CPU per consumed message in
// the scale benchmark). So each LRU keeps a useScore of its evictions;
// while it says the cache is not read, only every useProbe-th load or
// install goes ahead, enough to notice when the readers settle down.
type cqCache struct {
	// hits and misses count the reads answered from memory and from the
	// database (written under mu, read without it).
	hits, misses atomic.Int64

	mu        sync.Mutex
	cuts      uint64
	tails     *simplelru.LRU[qkey, *cqTail]
	chunks    *simplelru.LRU[chunkKey, *cqChunk]
	chunkSize int64
	// tailUse and chunkUse score the evictions of tails and chunks;
	// dropping keeps drop's removals out of the scores.
	tailUse, chunkUse useScore
	dropping          bool
}

// useScore scores the evictions of a cache: up for an entry that was read
// since it was put, down for one that was not, within [-useScoreBound,
// useScoreBound]. Guarded by cqCache.mu.
type useScore struct {
	score, probes int
}

// Bounds of useScore.
const (
	useScoreBound = 64
	useProbe      = 16
)

func (u *useScore) evicted(used bool) {
	if used {
		u.score = min(u.score+1, useScoreBound)
	} else {
		u.score = max(u.score-1, -useScoreBound)
	}
}

// allow reports whether to fill the cache now: always while its entries
// get read, every useProbe-th time while they are evicted unread.
func (u *useScore) allow() bool {
	if u.score >= 0 {
		return true
	}
	u.probes++
	return u.probes%useProbe == 0
}

// cqChunk is one chunk and whether a read used it since it was loaded.
type cqChunk struct {
	entries []cq.Entry
	used    bool
}

// chunkKey names chunk n of a queue.
type chunkKey struct {
	q qkey
	n int64
}

// cqTail is one queue's run of newest entries.
type cqTail struct {
	first   int64
	entries []cq.Entry
	used    bool // read since it was installed
}

func (t *cqTail) end() int64 { return t.first + int64(len(t.entries)) }

// tailWrite is an entry a writer committed, with its final queue offset.
type tailWrite struct {
	q qkey
	e cq.Entry
}

func newCQCache(queues, chunks int, chunkSize int64) *cqCache {
	c := &cqCache{chunkSize: chunkSize}
	tails, err := simplelru.NewLRU[qkey, *cqTail](queues, c.tailEvicted)
	if err != nil {
		// NewLRU fails only for a non-positive size.
		panic(fmt.Sprintf("kvindex: cq tail cache: %v", err))
	}
	c.tails = tails
	cs, err := simplelru.NewLRU[chunkKey, *cqChunk](chunks, c.chunkEvicted)
	if err != nil {
		panic(fmt.Sprintf("kvindex: cq chunk cache: %v", err))
	}
	c.chunks = cs
	return c
}

// tailEvicted and chunkEvicted score entries leaving the LRUs; mu is
// held.
func (c *cqCache) tailEvicted(_ qkey, t *cqTail) {
	if !c.dropping {
		c.tailUse.evicted(t.used)
	}
}

func (c *cqCache) chunkEvicted(_ chunkKey, ch *cqChunk) {
	if !c.dropping {
		c.chunkUse.evicted(ch.used)
	}
}

// loadChunks reports whether a read that missed should load chunks (see
// useScore).
func (c *cqCache) loadChunks() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chunkUse.allow()
}

// lookup answers a read of up to max entries of q from offset from when
// the tail or the chunks hold what a database read would give (queueEnd
// is the queue's end as its bounds say), and counts the hit or miss. On a
// miss it returns the entries from from that cached chunks hold (ending at
// a chunk boundary, so the database read of the rest starts on one: a
// reader crossing into the next chunk loads only that chunk, not again
// the one it is reading) and the generation that the database read must
// pass to install and installChunks.
func (c *cqCache) lookup(q qkey, from int64, max int, queueEnd int64) (out []cq.Entry, hit bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if out, hit = c.fromTail(q, from, max, queueEnd); !hit {
		out, hit = c.fromChunks(q, from, max, queueEnd)
	}
	if hit {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return out, hit, c.cuts
}

// fromTail returns up to max entries of q from offset from when q's tail
// holds them: from lies in the tail and the tail either holds max entries
// from there or reaches queueEnd. mu is held.
func (c *cqCache) fromTail(q qkey, from int64, max int, queueEnd int64) ([]cq.Entry, bool) {
	t, ok := c.tails.Get(q)
	if !ok || from < t.first || from >= t.end() {
		return nil, false
	}
	n := t.end() - from
	if n < int64(max) && t.end() < queueEnd {
		return nil, false
	}
	t.used = true
	n = min(n, int64(max))
	out := make([]cq.Entry, n)
	copy(out, t.entries[from-t.first:])
	return out, true
}

// install gives q a tail of the newest of entries, which a read that
// began at generation gen found to reach the queue's end. It does nothing
// when q has a tail already (the dispatcher keeps that one current), a
// cutting write happened since gen, or tails go unread (see useScore).
func (c *cqCache) install(q qkey, entries []cq.Entry, gen uint64) {
	if len(entries) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cuts != gen || c.tails.Contains(q) || !c.tailUse.allow() {
		return
	}
	entries = entries[max(0, len(entries)-cqTailKeep):]
	// Sized for what it holds: a scan over a million queues reads one or
	// two entries of each, and installs a tail for each.
	t := &cqTail{first: entries[0].QueueOffset, entries: make([]cq.Entry, len(entries), max(len(entries), cqTailMinCap))}
	copy(t.entries, entries)
	c.tails.Add(q, t)
}

// publish appends committed entries to the tails of their queues. An entry
// below a tail's end is there already (a reader installed it); one above
// it means entries were committed while the tail was being installed and
// were not appended, so the tail restarts at it.
func (c *cqCache) publish(written []tailWrite) {
	if len(written) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tails.Len() == 0 {
		return
	}
	var t *cqTail
	var tq qkey
	var ok bool
	for i := range written {
		w := &written[i]
		if t == nil || w.q != tq {
			tq = w.q
			if t, ok = c.tails.Peek(w.q); !ok {
				t = nil
				continue
			}
		}
		off := w.e.QueueOffset
		switch {
		case off < t.end():
			continue
		case off > t.end():
			t.first, t.entries = off, t.entries[:0]
		}
		if len(t.entries) == cap(t.entries) {
			if len(t.entries) >= 2*cqTailKeep {
				n := copy(t.entries, t.entries[len(t.entries)-cqTailKeep:])
				t.first += int64(len(t.entries) - n)
				t.entries = t.entries[:n]
			} else {
				grown := make([]cq.Entry, len(t.entries), min(2*cqTailKeep, 2*cap(t.entries)))
				copy(grown, t.entries)
				t.entries = grown
			}
		}
		t.entries = append(t.entries, w.e)
	}
}

// drop removes the tails and chunks of the queues match selects and
// counts a cutting write; the caller holds CQ.mu and has committed the
// write.
func (c *cqCache) drop(match func(qkey) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cuts++
	c.dropping = true
	defer func() { c.dropping = false }()
	for _, q := range c.tails.Keys() {
		if match(q) {
			c.tails.Remove(q)
		}
	}
	for _, k := range c.chunks.Keys() {
		if match(k.q) {
			c.chunks.Remove(k)
		}
	}
}

// fromChunks returns up to max entries of q from offset from that chunks
// hold: hit when that is max entries, or every entry up to queueEnd;
// otherwise the run the chunks hold from from, which ends where the first
// missing chunk begins (nil when from's chunk is missing). mu is held.
func (c *cqCache) fromChunks(q qkey, from int64, max int, queueEnd int64) ([]cq.Entry, bool) {
	want := min(int64(max), queueEnd-from)
	if want <= 0 {
		return nil, false
	}
	var out []cq.Entry
	for off := from; int64(len(out)) < want; {
		chunk, ok := c.chunks.Get(chunkKey{q, off / c.chunkSize})
		if !ok {
			return out, false
		}
		chunk.used = true
		if out == nil {
			out = make([]cq.Entry, 0, want)
		}
		part := chunk.entries[off%c.chunkSize:]
		part = part[:min(int64(len(part)), want-int64(len(out)))]
		out = append(out, part...)
		off += int64(len(part))
	}
	return out, true
}

// chunkSpan returns the offsets a read of [from, from+max) should load to
// fill chunks: from the start of from's chunk to the end of the read,
// extended to the end of its last chunk when the queue holds that chunk
// whole. ok is false when from's chunk does not lie whole within
// [queueMin, queueEnd) (the queue's first or last chunk): such a read
// loads only what it returns.
func (c *cqCache) chunkSpan(from int64, max int, queueMin, queueEnd int64) (start, end int64, ok bool) {
	start = from - from%c.chunkSize
	if start < queueMin || start+c.chunkSize > queueEnd {
		return 0, 0, false
	}
	end = min(from+int64(max), queueEnd)
	if whole := end + (c.chunkSize-end%c.chunkSize)%c.chunkSize; whole <= queueEnd {
		end = whole
	}
	return start, end, true
}

// installChunks keeps the whole chunks of entries, a contiguous run from
// a chunk's first offset that a read begun at generation gen loaded from
// the database. A chunk the cache holds already is kept as it is: it has
// the same entries, and replacing it would forget that it was read.
func (c *cqCache) installChunks(q qkey, entries []cq.Entry, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cuts != gen || len(entries) == 0 || entries[0].QueueOffset%c.chunkSize != 0 {
		return
	}
	for int64(len(entries)) >= c.chunkSize {
		key := chunkKey{q, entries[0].QueueOffset / c.chunkSize}
		if !c.chunks.Contains(key) {
			chunk := &cqChunk{entries: make([]cq.Entry, c.chunkSize)}
			copy(chunk.entries, entries)
			c.chunks.Add(key, chunk)
		}
		entries = entries[c.chunkSize:]
	}
}
