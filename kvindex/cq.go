package kvindex

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/slablru"
)

// CQ is the KV ConsumeQueue: cq.Store on the 0x10-0x12 keyspaces of the
// database (see doc.go). It does not own the database; Close flushes but
// leaves the database open for its other users.
//
// A bounded cache keeps the bounds of recently used queues, so that Put
// (which must know each queue's max offset to skip repeats and close gaps)
// and MaxOffset cost a map lookup for hot queues and one reverse seek for
// cold ones.
//
// Lock order: mu (writers) before cacheMu.
type CQ struct {
	db     *DB
	log    zerolog.Logger
	mu     sync.Mutex // serialises writers: Put, Truncate, CorrectMin, Delete*
	closed atomic.Bool

	// shapeGen counts the writes that delete queues or entries
	// (Truncate, Delete*), guarded by mu: CorrectMin plans its cuts under
	// one hold of mu and writes them under later ones, and plans again
	// what such a write may have made stale.
	shapeGen uint64
	// minPasses counts the CorrectMin rounds between their first read and
	// their last write; while more than one runs, raised keeps the
	// minimum each wrote per queue, so that a round whose plan is older
	// skips a cut that would lower it (guarded by mu; nil when no two
	// rounds overlap, and emptied by a reshape: reshaped). Retention
	// passes are serialised by the dispatcher; what overlaps them is its
	// correction of the queues of a batch it wrote behind retention,
	// which must neither wait for a whole pass nor make one plan again.
	minPasses int
	raised    map[qkey]int64
	// afterMinPlan, when set (tests), runs between a CorrectMin round's
	// reads and its writes.
	afterMinPlan func()

	// pruneFrom is where the next PruneJournal scan starts: just past the
	// last record it deleted (nil: the start of the journal). Without it
	// every prune walked the records the earlier prunes had deleted, which
	// Pebble keeps until compaction: once a second on the dispatcher, for
	// tens of milliseconds under load, every long-polled delivery waited.
	pruneMu   sync.Mutex
	pruneFrom []byte

	// cacheMu guards bounds and topics, and orders cache fills by readers
	// against writers' updates: a reader that read the database before a
	// writer committed must not put its stale bounds into the cache after
	// the writer's fresh ones. gen counts writer updates. bounds is a
	// slab LRU, not a map of list elements: at a million queues the
	// garbage collector traced every entry's objects on every cycle.
	cacheMu sync.Mutex
	gen     uint64
	bounds  *slablru.Cache[qkey, queueBounds]
	names   *topicNames // the topic strings of bounds' keys

	// topics remembers, for recently asked topics, whether the database
	// held no entry and no min key of any of their queues (true) or some
	// (false). A miss on a queue of a topic known to be empty is answered
	// without reading the queue: at a million queues most queues a
	// producer or consumer first touches belong to topics that hold
	// nothing yet, and a queue read (three seeks through every level) was
	// the largest cost of sending to them. Correct because every write to
	// a queue puts its bounds in the bounds cache under cacheMu before
	// anyone can miss on it, and evicting or forgetting a queue's bounds
	// forgets its topic's state (cacheBounds, forgetBounds).
	// Guarded by cacheMu; filled under mu (see checkTopic).
	topics *lru.Cache[string, bool]

	// cache keeps queues' newest entries and chunks of older ones in
	// memory (see cqCache); written collects a putBatch's entries for the
	// tails (guarded by mu).
	cache   *cqCache
	written []tailWrite

	// touchedIdx and touched are putBatch's per-queue state, kept between
	// batches (guarded by mu): at a paced produce most batches hold one
	// or two records, and a fresh map per batch was 8 % of the broker's
	// allocated bytes.
	touchedIdx map[qkey]int
	touched    []touchedQueue
	// sets holds a putBatch's entries until they go into its Pebble
	// batch in key order (guarded by mu).
	sets sortedSets
}

// touchedQueue is a queue's state within one putBatch.
type touchedQueue struct {
	q     qkey
	b     queueBounds
	first int64 // the batch's first offset written to it, -1 for none
}

// maxReusedTouched bounds the queue count of a per-batch map (putBatch's,
// the dispatcher's) kept for the next batch: clearing a map costs its
// size, not its contents.
const maxReusedTouched = 4096

// DefaultCQTopicStates is how many topics' emptiness CQ remembers.
const DefaultCQTopicStates = 1 << 16

// qkey names one queue.
type qkey struct {
	topic string
	qid   int32
}

// queueBounds are a queue's [min, max) and whether it exists at all.
type queueBounds struct {
	min, max int64
	exists   bool
}

var _ cq.Store = (*CQ)(nil)

// DefaultCQBoundsCache is the number of queues whose bounds CQ keeps in
// memory.
const DefaultCQBoundsCache = 1 << 20

// ConsumeQueue returns the KV ConsumeQueue of the database, caching the
// bounds of up to cacheQueues queues (DefaultCQBoundsCache when <= 0).
func (d *DB) ConsumeQueue(cacheQueues int) *CQ {
	if cacheQueues <= 0 {
		cacheQueues = DefaultCQBoundsCache
	}
	c := &CQ{db: d, log: d.log.With().Str("component", "cq").Logger()}
	topics, err := lru.New[string, bool](DefaultCQTopicStates)
	if err != nil {
		// lru.New fails only for a non-positive size.
		panic(fmt.Sprintf("kvindex: topic cache: %v", err))
	}
	c.topics = topics
	c.bounds = slablru.New[qkey, queueBounds](cacheQueues)
	c.names = newTopicNames(defaultTopicNames)
	c.cache = newCQCache(DefaultCQTailQueues, DefaultCQChunks, defaultCQChunkEntries)
	return c
}

// cacheBounds puts a queue's bounds in the cache; evicting another
// queue's bounds forgets that queue's topic state (see topics). cacheMu is
// held.
func (c *CQ) cacheBounds(q qkey, b queueBounds) {
	if cur, ok := c.bounds.Ref(q); ok {
		*cur = b // the dispatcher's usual case: one lookup, nothing to intern
		return
	}
	q.topic = c.names.intern(q.topic)
	if old, _, evicted := c.bounds.Add(q, b); evicted {
		c.topics.Remove(old.topic)
	}
}

func (c *CQ) check() error {
	if c.closed.Load() {
		return cq.ErrClosed
	}
	return nil
}

// Put implements cq.Store: it writes the entries and one journal record in
// one unsynced batch.
func (c *CQ) Put(entries []cq.Dispatch) error {
	if err := c.check(); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.db.pdb.NewBatch()
	defer b.Close()
	pending, err := c.putBatch(b, entries)
	if err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("put %d cq entries: %w", len(entries), err)
	}
	c.publish(pending)
	return nil
}

// cqPending is what a putBatch changes in the caches once its batch
// commits: the queues' new bounds and the entries for their tails.
type cqPending struct {
	updates []boundsUpdate
	written []tailWrite
	// rewound is set when the batch wrote a journal record out of order,
	// possibly below where pruning resumes.
	rewound bool
}

// publish makes a committed putBatch visible to the caches. The caller
// holds mu.
func (c *CQ) publish(p cqPending) {
	c.applyBounds(p.updates)
	c.cache.publish(p.written)
	if p.rewound {
		// After the commit: a prune that ran before it cannot have
		// moved past the record unseen.
		c.forgetPruned()
	}
}

// boundsUpdate is a queue's bounds after a batch, applied to the cache once
// the batch commits.
type boundsUpdate struct {
	q qkey
	b queueBounds
}

// applyBounds puts writers' new bounds into the cache; the caller has
// committed them to the database.
func (c *CQ) applyBounds(updates []boundsUpdate) {
	c.cacheMu.Lock()
	defer c.cacheMu.Unlock()
	c.gen++
	for _, u := range updates {
		c.cacheBounds(u.q, u.b)
	}
}

// forgetBounds drops cached bounds, tails and chunks after a writer
// deleted queues.
func (c *CQ) forgetBounds(match func(qkey) bool) {
	c.cache.drop(match)
	c.cacheMu.Lock()
	defer c.cacheMu.Unlock()
	c.gen++
	c.bounds.RemoveIf(func(q qkey, _ queueBounds) bool { return match(q) })
	c.topics.Purge() // deletions are rare: forget every topic's state
}

// putBatch adds entries and their journal record to b, following the Put
// rules of cq.Store, and returns the new bounds of the queues it touched.
// The caller holds mu, commits b, then calls publish. The dispatcher
// uses it to commit entries together with the dispatched offset.
//
// Allocations: a key and value buffer reused across entries, the journal
// value and the bounds updates; the per-queue state and the tail writes
// reuse buffers kept on c.
func (c *CQ) putBatch(b *pebble.Batch, entries []cq.Dispatch) (cqPending, error) {
	for i := range entries {
		e := &entries[i]
		if e.QueueOffset < 0 || e.PhyOffset < 0 || e.Size <= 0 {
			return cqPending{}, fmt.Errorf("put cq entry %s/%d@%d (phy %d, size %d): negative offset or non-positive size",
				e.Topic, e.QueueID, e.QueueOffset, e.PhyOffset, e.Size)
		}
		if err := checkName("topic", e.Topic); err != nil {
			return cqPending{}, fmt.Errorf("put cq entry: %w", err)
		}
	}
	written := c.written[:0]
	if c.touchedIdx == nil || len(c.touchedIdx) > maxReusedTouched {
		c.touchedIdx = make(map[qkey]int, 16)
	} else {
		clear(c.touchedIdx)
	}
	touched := c.touched[:0]
	c.sets.reset() // a putBatch that failed part way left its entries
	minPhy, maxEnd := int64(1<<63-1), int64(0)
	var key, val []byte
	for i := range entries {
		e := &entries[i]
		q := qkey{e.Topic, e.QueueID}
		ti, ok := c.touchedIdx[q]
		if !ok {
			qb, err := c.queueBoundsLocked(q)
			if err != nil {
				return cqPending{}, err
			}
			if !qb.exists {
				qb = queueBounds{min: e.QueueOffset, max: e.QueueOffset, exists: true}
			}
			ti = len(touched)
			touched = append(touched, touchedQueue{q: q, b: qb, first: -1})
			c.touchedIdx[q] = ti
		}
		t := &touched[ti]
		off := e.QueueOffset
		if off < t.b.max {
			continue // already there: keep the existing entry
		}
		if off > t.b.max {
			c.log.Warn().Str("topic", e.Topic).Int32("queue", e.QueueID).Int64("offset", off).Int64("max", t.b.max).
				Msg("cq entry above the queue's max offset; stored at the max offset")
			off = t.b.max
		}
		key = appendCQKey(key[:0], e.Topic, e.QueueID, off)
		val = appendCQValue(val[:0], e.PhyOffset, e.Size, e.TagsCode, e.StoreTimestamp)
		c.sets.add(key, val)
		written = append(written, tailWrite{q, cq.Entry{QueueOffset: off, PhyOffset: e.PhyOffset, Size: e.Size,
			TagsCode: e.TagsCode, StoreTimestamp: e.StoreTimestamp}})
		if t.first < 0 {
			t.first = off
		}
		t.b.max = off + 1
		minPhy = min(minPhy, e.PhyOffset)
		maxEnd = max(maxEnd, e.End())
	}
	c.touched = touched
	if err := c.sets.emit(b); err != nil {
		return cqPending{}, fmt.Errorf("put cq entries: %w", err)
	}
	updates := make([]boundsUpdate, 0, len(touched))
	var named []journalQueue
	for i := range touched {
		t := &touched[i]
		updates = append(updates, boundsUpdate{t.q, t.b})
		if t.first >= 0 {
			named = append(named, journalQueue{t.q.topic, t.q.qid, t.first})
		}
	}
	rewound := false
	if len(named) > 0 {
		var err error
		if rewound, err = c.addJournal(b, minPhy, maxEnd, named); err != nil {
			return cqPending{}, err
		}
	}
	c.written = written
	return cqPending{updates: updates, written: written, rewound: rewound}, nil
}

// addJournal writes the journal record of a batch covering [first, end)
// that wrote the named queues. A record already keyed at first (a range
// dispatched again, or any Put starting at the same offset) is merged, not
// overwritten, so no queue it named is forgotten. It reports whether the
// record is out of order (at or below an earlier record's start).
func (c *CQ) addJournal(b *pebble.Batch, first, end int64, named []journalQueue) (outOfOrder bool, err error) {
	mayExist, err := c.db.journalMayExist(first)
	if err != nil {
		return false, err
	}
	var old []byte
	if mayExist {
		if old, err = c.db.get(journalKey(first)); err != nil {
			return true, fmt.Errorf("read cq journal at %d: %w", first, err)
		}
	}
	if old != nil {
		oldEnd, oldQueues, err := decodeJournalValue(old)
		if err != nil {
			return true, fmt.Errorf("read cq journal at %d: %w", first, err)
		}
		end = max(end, oldEnd)
		named = append(named, oldQueues...)
	}
	j := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(named)*24), uint64(end))
	for _, q := range named {
		j = appendString16(j, q.topic)
		j = binary.BigEndian.AppendUint32(j, uint32(q.queueID))
		j = binary.BigEndian.AppendUint64(j, uint64(q.firstQueueOffset))
	}
	if err := b.Set(journalKey(first), j, nil); err != nil {
		return mayExist, fmt.Errorf("put cq journal: %w", err)
	}
	return mayExist, nil
}

// journalMayExist reports whether a journal record may already start at
// first, and notes that one is about to. Batches are written in CommitLog
// order, so nearly every batch starts above every record written before
// and needs no read of one to merge with.
func (d *DB) journalMayExist(first int64) (bool, error) {
	d.journalMu.Lock()
	defer d.journalMu.Unlock()
	if !d.journalTopKnown {
		top, err := d.lastJournalFirst()
		if err != nil {
			return false, fmt.Errorf("read cq journal: %w", err)
		}
		d.journalTop, d.journalTopKnown = top, true
	}
	if first <= d.journalTop {
		return true, nil
	}
	d.journalTop = first
	return false, nil
}

// lastJournalFirst returns the first offset of the last journal record, or
// 0 when there is none.
func (d *DB) lastJournalFirst() (int64, error) {
	it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCQJournal}, UpperBound: []byte{prefixCQJournal + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, it.Error()
	}
	k := it.Key()
	if len(k) != 9 {
		return 0, fmt.Errorf("journal key %x: %w", k, ErrBadKey)
	}
	return int64(binary.BigEndian.Uint64(k[1:])), nil
}

// queueBounds returns a queue's bounds from the cache or the database.
// The caller must not hold mu (see queueBoundsLocked).
func (c *CQ) queueBounds(q qkey) (queueBounds, error) {
	return c.lookupBounds(q, false)
}

// queueBoundsLocked is queueBounds for a caller holding mu.
func (c *CQ) queueBoundsLocked(q qkey) (queueBounds, error) {
	return c.lookupBounds(q, true)
}

func (c *CQ) lookupBounds(q qkey, writerHeld bool) (queueBounds, error) {
	c.cacheMu.Lock()
	if b, ok := c.bounds.Get(q); ok {
		c.cacheMu.Unlock()
		return b, nil
	}
	empty, known := c.topics.Get(q.topic)
	gen := c.gen
	c.cacheMu.Unlock()
	if !known {
		var err error
		if empty, err = c.checkTopic(q.topic, writerHeld); err != nil {
			return queueBounds{}, err
		}
	}
	if empty {
		return queueBounds{}, nil
	}
	b, err := c.readBounds(q)
	if err != nil {
		return queueBounds{}, err
	}
	c.cacheMu.Lock()
	if c.gen == gen {
		c.cacheBounds(q, b)
	}
	c.cacheMu.Unlock()
	return b, nil
}

// checkTopic reads whether the database holds any entry or min key of
// topic and remembers the answer. It holds mu meanwhile (unless the caller
// does), so that no writer commits to the topic between the read and the
// record; a write after it puts the queue's bounds in the cache.
func (c *CQ) checkTopic(topic string, writerHeld bool) (bool, error) {
	if !writerHeld {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	c.cacheMu.Lock()
	empty, known := c.topics.Peek(topic)
	c.cacheMu.Unlock()
	if known {
		return empty, nil // checked by another caller meanwhile
	}
	empty = true
	for _, prefix := range []byte{prefixCQ, prefixCQMin} {
		if err := c.db.Scan(topicPrefix(prefix, topic), func(_, _ []byte) bool { empty = false; return false }); err != nil {
			return false, fmt.Errorf("cq topic %s: %w", topic, err)
		}
		if !empty {
			break
		}
	}
	c.cacheMu.Lock()
	c.topics.Add(topic, empty)
	c.cacheMu.Unlock()
	return empty, nil
}

// readBounds derives a queue's bounds from its entries and its min key.
func (c *CQ) readBounds(q qkey) (queueBounds, error) {
	prefix := queuePrefix(prefixCQ, q.topic, q.qid)
	it, err := c.db.pdb.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return queueBounds{}, fmt.Errorf("bounds of cq %s/%d: %w", q.topic, q.qid, err)
	}
	defer it.Close()
	var b queueBounds
	if it.First() {
		_, _, first, err := decodeCQKey(it.Key())
		if err != nil {
			return queueBounds{}, fmt.Errorf("bounds of cq %s/%d: key %x: %w", q.topic, q.qid, it.Key(), err)
		}
		it.Last()
		_, _, last, err := decodeCQKey(it.Key())
		if err != nil {
			return queueBounds{}, fmt.Errorf("bounds of cq %s/%d: key %x: %w", q.topic, q.qid, it.Key(), err)
		}
		b = queueBounds{min: first, max: last + 1, exists: true}
	}
	if err := it.Error(); err != nil {
		return queueBounds{}, fmt.Errorf("bounds of cq %s/%d: %w", q.topic, q.qid, err)
	}
	v, err := c.db.get(cqMinKey(q.topic, q.qid))
	if err != nil {
		return queueBounds{}, fmt.Errorf("min of cq %s/%d: %w", q.topic, q.qid, err)
	}
	if v != nil {
		m, err := getInt64(v)
		if err != nil {
			return queueBounds{}, fmt.Errorf("min of cq %s/%d: %w", q.topic, q.qid, err)
		}
		if !b.exists {
			b = queueBounds{min: m, max: m, exists: true}
		} else {
			b.min = min(max(b.min, m), b.max)
		}
	}
	return b, nil
}

// Get implements cq.Store. Reads are answered from the tails and chunks
// of cqCache when they hold the answer; otherwise from the database, and
// a read of minChunkedRead entries or more loads whole chunks around
// what it returns.
//
// It returns no entry at or past the queue's end as its bounds said when
// the read began. A writer commits entries to the database before it
// publishes the queue's new end, so a read of the database can meet
// entries that MaxOffset does not count yet; handed out, they took a pop
// position (or a pull's next offset) past the end a reader saw moments
// later, which then moved the position back and handed the same messages
// out twice, and a batch ack of them was dropped as out of range while
// answered SUCCESS (both seen in the POP crash test when the dispatcher
// was descheduled between its commit and its publish).
func (c *CQ) Get(topic string, queueID int32, from int64, max int) ([]cq.Entry, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, nil
	}
	q := queueIDOf(topic, queueID)
	qb, err := c.queueBounds(q)
	if err != nil {
		return nil, err
	}
	if from < qb.min || from >= qb.max {
		return nil, nil
	}
	max = int(min(int64(max), qb.max-from))
	cached, hit, gen := c.cache.lookup(q, from, max, qb.max)
	if hit {
		return cached, nil
	}
	out, err := c.readMissing(q, from, max, qb, cached, gen)
	if err != nil {
		return nil, err
	}
	if from+int64(len(out)) >= qb.max {
		c.cache.install(q, out, gen) // a reader at the queue's end
	}
	return out, nil
}

// readMissing completes a read of up to max entries of q from offset from
// that the cache missed, given the entries cached chunks hold from from:
// it reads the rest from the database, loading the whole chunks around it
// when it lies behind the queue's end (see cqCache).
func (c *CQ) readMissing(q qkey, from int64, max int, qb queueBounds, cached []cq.Entry, gen uint64) ([]cq.Entry, error) {
	next, rest := from+int64(len(cached)), max-len(cached)
	var out []cq.Entry
	start, end, chunked := c.cache.chunkSpan(next, rest, qb.min, qb.max)
	if chunked && max >= minChunkedRead && c.cache.loadChunks() {
		all, err := c.readRange(q.topic, q.qid, start, int(end-start), qb.max)
		if err != nil {
			return nil, err
		}
		c.cache.installChunks(q, all, gen)
		if i := int(next - start); i < len(all) {
			out = all[i:min(len(all), i+rest)]
		}
	}
	if out == nil {
		// Not chunked, or a gap before next ended the chunked read.
		var err error
		if out, err = c.readRange(q.topic, q.qid, next, rest, qb.max); err != nil {
			return nil, err
		}
	}
	if len(cached) == 0 {
		if len(out) < cap(out) {
			out = append(make([]cq.Entry, 0, len(out)), out...)
		}
		return out, nil
	}
	return append(cached, out...), nil
}

// minChunkedRead is the smallest read that loads chunks: a read of fewer
// entries is a lookup (revive re-reading one message, a query by offset),
// which a chunk load would make many times dearer.
const minChunkedRead = 8

// readRange reads up to n contiguous entries of a queue from offset
// from, stopping at a gap; queueEnd sizes the result.
func (c *CQ) readRange(topic string, queueID int32, from int64, n int, queueEnd int64) ([]cq.Entry, error) {
	prefix := queuePrefix(prefixCQ, topic, queueID)
	it, err := c.db.pdb.NewIter(&pebble.IterOptions{LowerBound: cqKey(topic, queueID, from), UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("read cq %s/%d: %w", topic, queueID, err)
	}
	defer it.Close()
	out := make([]cq.Entry, 0, max(0, min(int64(n), queueEnd-from)))
	want := from
	for ok := it.First(); ok && len(out) < n; ok = it.Next() {
		e, err := decodeEntry(it, len(prefix))
		if err != nil {
			return nil, fmt.Errorf("read cq %s/%d: %w", topic, queueID, err)
		}
		if e.QueueOffset != want {
			break // a gap: nothing is readable past it
		}
		out = append(out, e)
		want++
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("read cq %s/%d: %w", topic, queueID, err)
	}
	return out, nil
}

func queueIDOf(topic string, qid int32) qkey { return qkey{topic, qid} }

// CacheStats returns how many reads of entries (Get calls past the bounds
// check) were answered from memory and how many from the database.
func (c *CQ) CacheStats() (hits, misses int64) {
	return c.cache.hits.Load(), c.cache.misses.Load()
}

// decodeEntry decodes the entry at it, an iterator bounded to the queue
// whose key prefix (queuePrefix) has length prefixLen: only the offset is
// read from the key (decoding the topic cost an allocation per entry, a
// quarter of a chunk load).
func decodeEntry(it *pebble.Iterator, prefixLen int) (cq.Entry, error) {
	k := it.Key()
	if len(k) != prefixLen+8 || len(k) == 0 || k[0] != prefixCQ {
		return cq.Entry{}, fmt.Errorf("key %x: %w", k, ErrBadKey)
	}
	off := int64(binary.BigEndian.Uint64(k[prefixLen:]))
	v, err := it.ValueAndErr()
	if err != nil {
		return cq.Entry{}, fmt.Errorf("value of offset %d: %w", off, err)
	}
	phy, size, tags, ts, err := decodeCQValue(v)
	if err != nil {
		return cq.Entry{}, fmt.Errorf("value of offset %d: %w", off, err)
	}
	return cq.Entry{QueueOffset: off, PhyOffset: phy, Size: size, TagsCode: tags, StoreTimestamp: ts}, nil
}

// entryAt reads one entry; ok is false when absent.
func (c *CQ) entryAt(topic string, queueID int32, off int64) (cq.Entry, bool, error) {
	v, err := c.db.get(cqKey(topic, queueID, off))
	if err != nil || v == nil {
		return cq.Entry{}, false, err
	}
	phy, size, tags, ts, err := decodeCQValue(v)
	if err != nil {
		return cq.Entry{}, false, fmt.Errorf("read cq %s/%d@%d: %w", topic, queueID, off, err)
	}
	return cq.Entry{QueueOffset: off, PhyOffset: phy, Size: size, TagsCode: tags, StoreTimestamp: ts}, true, nil
}

// mustEntryAt reads an entry that the queue's bounds say exists.
func (c *CQ) mustEntryAt(topic string, queueID int32, off int64) (cq.Entry, error) {
	e, ok, err := c.entryAt(topic, queueID, off)
	if err != nil {
		return cq.Entry{}, err
	}
	if !ok {
		return cq.Entry{}, fmt.Errorf("cq %s/%d: entry %d missing inside the queue's bounds: %w", topic, queueID, off, ErrBadKey)
	}
	return e, nil
}

// MaxOffset implements cq.Store: the offset after the last entry.
func (c *CQ) MaxOffset(topic string, queueID int32) (int64, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	qb, err := c.queueBounds(queueIDOf(topic, queueID))
	return qb.max, err
}

// MinOffset implements cq.Store.
func (c *CQ) MinOffset(topic string, queueID int32) (int64, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	qb, err := c.queueBounds(queueIDOf(topic, queueID))
	return qb.min, err
}

// OffsetByTime implements cq.Store with a binary search over the stored
// timestamps (no CommitLog reads).
func (c *CQ) OffsetByTime(topic string, queueID int32, ts int64, b cq.Boundary) (int64, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	qb, err := c.queueBounds(queueIDOf(topic, queueID))
	if err != nil || qb.min >= qb.max {
		return qb.min, err
	}
	var searchErr error
	n := int(qb.max - qb.min)
	after := func(i int, strict bool) bool {
		e, err := c.mustEntryAt(topic, queueID, qb.min+int64(i))
		if err != nil {
			searchErr = err
			return true
		}
		if strict {
			return e.StoreTimestamp > ts
		}
		return e.StoreTimestamp >= ts
	}
	if b == cq.Upper {
		i := sort.Search(n, func(i int) bool { return after(i, true) })
		if searchErr != nil {
			return 0, fmt.Errorf("time search in cq %s/%d: %w", topic, queueID, searchErr)
		}
		if i == 0 {
			return qb.min, nil
		}
		return qb.min + int64(i) - 1, nil
	}
	i := sort.Search(n, func(i int) bool { return after(i, false) })
	if searchErr != nil {
		return 0, fmt.Errorf("time search in cq %s/%d: %w", topic, queueID, searchErr)
	}
	return qb.min + int64(i), nil
}

// DeleteQueue implements cq.Store. The deletion is synced: it is an admin
// operation the caller acknowledges.
func (c *CQ) DeleteQueue(topic string, queueID int32) error {
	if err := c.check(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.db.pdb.NewBatch()
	defer b.Close()
	p := queuePrefix(prefixCQ, topic, queueID)
	if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
		return fmt.Errorf("delete cq %s/%d: %w", topic, queueID, err)
	}
	if err := b.Delete(cqMinKey(topic, queueID), nil); err != nil {
		return fmt.Errorf("delete cq %s/%d: %w", topic, queueID, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("delete cq %s/%d: %w", topic, queueID, err)
	}
	c.reshaped()
	deleted := queueIDOf(topic, queueID)
	c.forgetBounds(func(q qkey) bool { return q == deleted })
	return nil
}

// DeleteTopic implements cq.Store.
func (c *CQ) DeleteTopic(topic string) error {
	if err := c.check(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.db.pdb.NewBatch()
	defer b.Close()
	for _, prefix := range []byte{prefixCQ, prefixCQMin} {
		p := topicPrefix(prefix, topic)
		if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
			return fmt.Errorf("delete cq topic %s: %w", topic, err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("delete cq topic %s: %w", topic, err)
	}
	c.reshaped()
	c.forgetBounds(func(q qkey) bool { return q.topic == topic })
	return nil
}

// DeleteAll drops every queue, minimum and journal record in one synced
// batch of range deletions: a rebuild of the whole ConsumeQueue costs one
// write, not one synced write per queue.
func (c *CQ) DeleteAll() error {
	if err := c.check(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.db.pdb.NewBatch()
	defer b.Close()
	for _, prefix := range []byte{prefixCQ, prefixCQMin, prefixCQJournal} {
		if err := b.DeleteRange([]byte{prefix}, []byte{prefix + 1}, nil); err != nil {
			return fmt.Errorf("delete every cq queue: %w", err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("delete every cq queue: %w", err)
	}
	c.reshaped()
	c.forgetBounds(func(qkey) bool { return true })
	return nil
}

// reshaped notes a committed write that deleted queues or entries
// (Truncate, Delete*); the caller holds mu. Every round planned before it
// plans again, so the minima the rounds raised (raised) have no reader
// left, and must go: a deleted queue created again numbers its entries
// from 0, and a minimum kept from before would skip its cuts.
func (c *CQ) reshaped() {
	c.shapeGen++
	c.raised = nil
}

// correctMinChunk is how many queues CorrectMin reads, or cuts, per
// writer-lock hold, so that dispatch is not stalled behind a sweep of a
// million queues.
const correctMinChunk = 1024

// correctMinRound is how many queues CorrectMin plans before it writes
// their cuts. A cut of many entries is a range deletion, and every commit
// of range deletions makes the next read rebuild the fragments of all
// those in the memtable: reading and writing in turn per chunk cost a
// rebuild per chunk, quadratic in the queues cut (100,000 queues: 14.7 s against
// 0.73 s for a pass that cut nothing; docs/BENCHMARKS.md). A round
// holds a few MiB of plans at most.
const correctMinRound = 1 << 16

// pointCutMax is the most entries a minimum correction deletes one by one
// rather than with a range deletion. At a million queues a retention pass
// cuts about one entry of each (a segment holds about a million
// records), and point deletions cost later reads nothing, where range
// deletions are merged into every read until a flush (reads 2.4x slower,
// docs/BENCHMARKS.md); a queue with many entries cut gets one range
// deletion instead of many tombstones.
const pointCutMax = 16

// minCut is one queue's minimum correction: its entries [oldMin, newMin)
// go and newMin becomes its recorded minimum. The KV layout holds no
// entry below a queue's minimum (cuts delete everything below it,
// truncations keep it, Put writes at the end), so oldMin is its first.
type minCut struct {
	q              qkey
	oldMin, newMin int64
}

// CorrectMin implements cq.Store. It visits every queue; for each whose
// first readable entry lies below minPhyOffset it binary-searches the
// first entry at or above it, deletes the entries before that (cutEntries)
// and records the new minimum in the queue's min key.
//
// It works in rounds of correctMinRound queues: first it reads what each
// queue of the round needs (the writer lock held per chunk of reads),
// then it writes the cuts (the lock held per chunk of writes), so that
// no read of its own follows a commit of its range deletions until the
// next round. A writer that deletes or truncates queues between the
// reads and the writes (shapeGen) makes the round's unwritten queues be
// planned again; a cut another pass raised a queue's minimum past
// meanwhile is skipped (raised). The batches but the last are not
// synced: a crash keeps a prefix of the cuts, and the broker's start
// corrects the minima again.
func (c *CQ) CorrectMin(minPhyOffset int64) error {
	if err := c.check(); err != nil {
		return err
	}
	queues, err := c.allQueues()
	if err != nil {
		return fmt.Errorf("correct cq minimum to %d: %w", minPhyOffset, err)
	}
	return c.correctMinOf(queues, minPhyOffset)
}

// correctMinOf is CorrectMin for the given queues only.
func (c *CQ) correctMinOf(queues []qkey, minPhyOffset int64) error {
	if err := c.check(); err != nil {
		return err
	}
	for len(queues) > 0 {
		n := min(len(queues), correctMinRound)
		again, err := c.correctMinRound(queues[:n], minPhyOffset)
		if err != nil {
			return fmt.Errorf("correct cq minimum to %d: %w", minPhyOffset, err)
		}
		queues = append(again, queues[n:]...)
	}
	return nil
}

// correctMinRound plans and writes the cuts of queues. It returns the
// queues left to plan again because a writer reshaped queues meanwhile
// (a new slice, never aliasing queues).
func (c *CQ) correctMinRound(queues []qkey, minPhy int64) ([]qkey, error) {
	c.mu.Lock()
	gen := c.shapeGen
	c.minPasses++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.minPasses--; c.minPasses == 0 {
			c.raised = nil
		}
		c.mu.Unlock()
	}()
	var cuts []minCut
	for start := 0; start < len(queues); start += correctMinChunk {
		chunk := queues[start:min(start+correctMinChunk, len(queues))]
		var err error
		c.mu.Lock()
		if c.shapeGen == gen {
			cuts, err = c.planMinCuts(cuts, chunk, minPhy)
		}
		reshaped := c.shapeGen != gen
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if reshaped {
			return slices.Clone(queues), nil
		}
	}
	if c.afterMinPlan != nil {
		c.afterMinPlan()
	}
	for start := 0; start < len(cuts); start += correctMinChunk {
		end := min(start+correctMinChunk, len(cuts))
		written, err := c.writeMinCuts(cuts[start:end], gen, end == len(cuts))
		if err != nil {
			return nil, err
		}
		if !written {
			again := make([]qkey, 0, len(cuts)-start)
			for _, cut := range cuts[start:] {
				again = append(again, cut.q)
			}
			return again, nil
		}
	}
	return nil, nil
}

// cutEntries adds the deletion of a cut's entries to b: point deletions
// for a few, a range deletion from the queue's first key for more.
func cutEntries(b *pebble.Batch, cut minCut) error {
	q := cut.q
	if cut.newMin-cut.oldMin > pointCutMax {
		return b.DeleteRange(queuePrefix(prefixCQ, q.topic, q.qid), cqKey(q.topic, q.qid, cut.newMin), nil)
	}
	var key []byte
	for off := cut.oldMin; off < cut.newMin; off++ {
		key = appendCQKey(key[:0], q.topic, q.qid, off)
		if err := b.Delete(key, nil); err != nil {
			return err
		}
	}
	return nil
}

// planMinCuts appends to cuts those of queues that hold entries of records
// below minPhy. The caller holds mu.
func (c *CQ) planMinCuts(cuts []minCut, queues []qkey, minPhy int64) ([]minCut, error) {
	for _, q := range queues {
		c.cacheMu.Lock()
		cached, ok := c.bounds.Peek(q)
		c.cacheMu.Unlock()
		qb := cached
		if !ok {
			var err error
			if qb, err = c.readBounds(q); err != nil {
				return cuts, err
			}
		}
		if !qb.exists || qb.min >= qb.max {
			continue
		}
		first, err := c.mustEntryAt(q.topic, q.qid, qb.min)
		if err != nil {
			return cuts, err
		}
		if first.PhyOffset >= minPhy {
			continue
		}
		newMin, err := c.firstAtOrAfter(q, qb, minPhy)
		if err != nil {
			return cuts, err
		}
		cuts = append(cuts, minCut{q, qb.min, newMin})
	}
	return cuts, nil
}

// writeMinCuts commits cuts in one batch, synced if sync, unless a writer
// reshaped queues since gen (then it writes nothing and reports false).
// A cut another round raised the queue's minimum to or past meanwhile is
// left out. Cached bounds are raised to the new minima; uncached ones are
// read from the min keys when next needed.
func (c *CQ) writeMinCuts(cuts []minCut, gen uint64, sync bool) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shapeGen != gen {
		return false, nil
	}
	if c.raised != nil {
		cuts = slices.DeleteFunc(slices.Clone(cuts), func(cut minCut) bool {
			r, ok := c.raised[cut.q]
			return ok && r >= cut.newMin
		})
	}
	b := c.db.pdb.NewBatch()
	defer b.Close()
	for _, cut := range cuts {
		q := cut.q
		if err := cutEntries(b, cut); err != nil {
			return false, fmt.Errorf("cq %s/%d: %w", q.topic, q.qid, err)
		}
		if err := b.Set(cqMinKey(q.topic, q.qid), putInt64(cut.newMin), nil); err != nil {
			return false, fmt.Errorf("cq %s/%d: %w", q.topic, q.qid, err)
		}
	}
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
		if len(cuts) == 0 {
			// Every cut was left out, and Pebble commits an empty batch
			// without a sync: the round's unsynced chunks before this one
			// must reach the disk all the same.
			if err := b.LogData(nil, nil); err != nil {
				return false, fmt.Errorf("sync the cq minimum cuts: %w", err)
			}
		}
	}
	if err := b.Commit(opts); err != nil {
		return false, fmt.Errorf("commit %d cq minimum cuts: %w", len(cuts), err)
	}
	if c.minPasses > 1 {
		// Another round may hold a plan older than these cuts.
		if c.raised == nil {
			c.raised = make(map[qkey]int64)
		}
		for _, cut := range cuts {
			c.raised[cut.q] = max(c.raised[cut.q], cut.newMin)
		}
	}
	c.cacheMu.Lock()
	defer c.cacheMu.Unlock()
	c.gen++
	for _, cut := range cuts {
		if qb, ok := c.bounds.RefPeek(cut.q); ok && qb.exists {
			qb.min = max(qb.min, min(cut.newMin, qb.max))
		}
	}
	return true, nil
}

// QueueStart names where a queue stands when it holds no entry.
type QueueStart struct {
	Topic   string
	QueueID int32
	Offset  int64
}

// SeedStarts records, for each queue that holds no entry and no minimum,
// that it stands at Offset: MinOffset and MaxOffset answer Offset and the
// queue's next message is numbered from it. It is for the first open of
// a migrated Apache RocketMQ store, before the dispatcher runs: a queue
// whose records retention had all deleted is rebuilt from the CommitLog
// as empty, and without its start it would number new messages from 0
// again, below the consumer and delay offsets carried over. Queues that
// hold entries or a minimum are left as they are; the writes are one
// synced batch.
func (c *CQ) SeedStarts(starts []QueueStart) error {
	if err := c.check(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.db.pdb.NewBatch()
	defer b.Close()
	var updates []boundsUpdate
	for _, st := range starts {
		if st.Offset <= 0 {
			continue
		}
		q := qkey{st.Topic, st.QueueID}
		qb, err := c.readBounds(q)
		if err != nil {
			return err
		}
		if qb.exists {
			continue
		}
		if err := b.Set(cqMinKey(st.Topic, st.QueueID), putInt64(st.Offset), nil); err != nil {
			return fmt.Errorf("seed cq %s/%d at %d: %w", st.Topic, st.QueueID, st.Offset, err)
		}
		updates = append(updates, boundsUpdate{q, queueBounds{min: st.Offset, max: st.Offset, exists: true}})
	}
	if len(updates) == 0 {
		return nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("seed %d cq starts: %w", len(updates), err)
	}
	c.applyBounds(updates)
	c.cacheMu.Lock()
	c.topics.Purge() // a topic remembered empty holds a seeded queue now
	c.cacheMu.Unlock()
	return nil
}

// dropCached drops the tails and chunks of the queues a cutting write
// changed.
func (c *CQ) dropCached(updates []boundsUpdate) {
	cut := make(map[qkey]bool, len(updates))
	for _, u := range updates {
		cut[u.q] = true
	}
	c.cache.drop(func(q qkey) bool { return cut[q] })
}

// Truncate implements cq.Store using the journal: only queues named by
// journal records whose range ends past phyOffset are visited. The journal
// keeps only what the CommitLog had not flushed when it was last pruned;
// a cut before its first record (a slave's log cut where it parted from
// its master's, commitlog.Config.CutAt) may take entries of pruned
// records, so then every queue is swept instead.
func (c *CQ) Truncate(phyOffset int64) error {
	if err := c.check(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.forgetPruned()
	type rec struct {
		first, end int64
		queues     []journalQueue
	}
	var recs []rec
	journalFirst := int64(-1) // the first offset the journal still covers
	// The journal is short (PruneJournal keeps only what the CommitLog has
	// not made durable), so read all of it: records of arbitrary Puts may
	// overlap.
	err := c.db.Scan([]byte{prefixCQJournal}, func(k, v []byte) bool {
		end, queues, derr := decodeJournalValue(v)
		if derr != nil || len(k) != 9 {
			recs = nil
			phyOffset = -1
			return false
		}
		if journalFirst < 0 {
			journalFirst = int64(binary.BigEndian.Uint64(k[1:]))
		}
		if end > phyOffset {
			recs = append(recs, rec{int64(binary.BigEndian.Uint64(k[1:])), end, queues})
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("truncate cq at %d: %w", phyOffset, err)
	}
	if phyOffset < 0 {
		return fmt.Errorf("truncate cq: journal record: %w", ErrBadKey)
	}
	b := c.db.pdb.NewBatch()
	defer b.Close()
	// Per queue, scan from the smallest first offset any record names: a
	// queue deleted and recreated meanwhile is named with both its old and
	// its new offsets.
	from := map[qkey]int64{}
	var order []qkey
	if journalFirst < 0 || journalFirst > phyOffset {
		// Records before the journal's first were pruned: every queue
		// may hold entries past the cut.
		if err := c.sweepFrom(phyOffset, from, &order); err != nil {
			return fmt.Errorf("truncate cq at %d: %w", phyOffset, err)
		}
	}
	if len(recs) == 0 && len(order) == 0 {
		return nil
	}
	for _, r := range recs {
		for _, jq := range r.queues {
			q := qkey{jq.topic, jq.queueID}
			if f, ok := from[q]; !ok {
				from[q] = jq.firstQueueOffset
				order = append(order, q)
			} else if jq.firstQueueOffset < f {
				from[q] = jq.firstQueueOffset
			}
		}
		if r.first >= phyOffset {
			if err := b.Delete(journalKey(r.first), nil); err != nil {
				return fmt.Errorf("truncate cq journal: %w", err)
			}
		}
	}
	var updates []boundsUpdate
	for _, q := range order {
		u, changed, err := c.truncateQueue(b, q, from[q], phyOffset)
		if err != nil {
			return fmt.Errorf("truncate cq at %d: %w", phyOffset, err)
		}
		if changed {
			updates = append(updates, u)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("truncate cq at %d: %w", phyOffset, err)
	}
	c.reshaped()
	c.dropCached(updates)
	c.applyBounds(updates)
	return nil
}

// allQueues lists every queue (Queues), for the sweeps that visit each
// one under locks Queues must not hold.
func (c *CQ) allQueues() ([]qkey, error) {
	var queues []qkey
	err := c.Queues(func(topic string, qid int32) bool {
		queues = append(queues, qkey{topic, qid})
		return true
	})
	return queues, err
}

// firstAtOrAfter returns the queue offset of the first entry of q (whose
// bounds are qb) whose record starts at or after phy, qb.max when none
// does: a binary search, entries being in CommitLog order within a queue.
func (c *CQ) firstAtOrAfter(q qkey, qb queueBounds, phy int64) (int64, error) {
	var serr error
	i := sort.Search(int(qb.max-qb.min), func(i int) bool {
		e, err := c.mustEntryAt(q.topic, q.qid, qb.min+int64(i))
		if err != nil {
			serr = err
			return true
		}
		return e.PhyOffset >= phy
	})
	return qb.min + int64(i), serr
}

// sweepFrom adds to from (and order) every queue whose last entry's record
// starts at or after phyOffset, with the first such entry's queue offset,
// found by binary search (entries are in CommitLog order within a queue).
func (c *CQ) sweepFrom(phyOffset int64, from map[qkey]int64, order *[]qkey) error {
	queues, err := c.allQueues()
	if err != nil {
		return err
	}
	for _, q := range queues {
		qb, err := c.readBounds(q)
		if err != nil {
			return err
		}
		if !qb.exists || qb.min >= qb.max {
			continue
		}
		last, err := c.mustEntryAt(q.topic, q.qid, qb.max-1)
		if err != nil {
			return err
		}
		if last.PhyOffset < phyOffset {
			continue
		}
		first, err := c.firstAtOrAfter(q, qb, phyOffset)
		if err != nil {
			return err
		}
		if _, ok := from[q]; !ok {
			*order = append(*order, q)
		}
		from[q] = first
	}
	return nil
}

// truncateQueue deletes the entries of one queue, from the journal's first
// offset on, whose record starts at or after phyOffset. A queue left with
// no readable entry keeps its minimum in its min key.
func (c *CQ) truncateQueue(b *pebble.Batch, q qkey, from, phyOffset int64) (boundsUpdate, bool, error) {
	qb, err := c.readBounds(q)
	if err != nil || !qb.exists {
		return boundsUpdate{}, false, err
	}
	prefix := queuePrefix(prefixCQ, q.topic, q.qid)
	it, err := c.db.pdb.NewIter(&pebble.IterOptions{LowerBound: cqKey(q.topic, q.qid, max(from, qb.min)), UpperBound: prefixEnd(prefix)})
	if err != nil {
		return boundsUpdate{}, false, fmt.Errorf("cq %s/%d: %w", q.topic, q.qid, err)
	}
	defer it.Close()
	cut := int64(-1)
	for ok := it.First(); ok; ok = it.Next() {
		e, err := decodeEntry(it, len(prefix))
		if err != nil {
			return boundsUpdate{}, false, fmt.Errorf("cq %s/%d: %w", q.topic, q.qid, err)
		}
		if e.PhyOffset >= phyOffset {
			cut = e.QueueOffset
			break
		}
	}
	if err := it.Error(); err != nil {
		return boundsUpdate{}, false, fmt.Errorf("cq %s/%d: %w", q.topic, q.qid, err)
	}
	if cut < 0 {
		return boundsUpdate{}, false, nil
	}
	if err := b.DeleteRange(cqKey(q.topic, q.qid, cut), prefixEnd(prefix), nil); err != nil {
		return boundsUpdate{}, false, fmt.Errorf("cq %s/%d: %w", q.topic, q.qid, err)
	}
	if cut <= qb.min {
		// Nothing readable is left: remember where the queue stands.
		if err := b.Set(cqMinKey(q.topic, q.qid), putInt64(qb.min), nil); err != nil {
			return boundsUpdate{}, false, fmt.Errorf("cq %s/%d: %w", q.topic, q.qid, err)
		}
		return boundsUpdate{q, queueBounds{min: qb.min, max: qb.min, exists: true}}, true, nil
	}
	return boundsUpdate{q, queueBounds{min: qb.min, max: cut, exists: true}}, true, nil
}

// PruneJournal drops the journal records that end at or below offset: the
// CommitLog is durable up to there, so no recovery will ever cut below it.
func (c *CQ) PruneJournal(offset int64) error {
	if err := c.check(); err != nil {
		return err
	}
	c.pruneMu.Lock()
	defer c.pruneMu.Unlock()
	from := c.pruneFrom
	if from == nil {
		from = []byte{prefixCQJournal}
	}
	var cut []byte
	err := c.db.ScanFrom([]byte{prefixCQJournal}, from, func(k, v []byte) bool {
		if len(v) < 8 || int64(binary.BigEndian.Uint64(v)) > offset {
			return false
		}
		cut = append(cut[:0], k...)
		return true
	})
	if err != nil {
		return fmt.Errorf("prune cq journal: %w", err)
	}
	if cut == nil {
		return nil
	}
	end := append(cut, 0)
	if err := c.db.pdb.DeleteRange(from, end, pebble.NoSync); err != nil {
		return fmt.Errorf("prune cq journal: %w", err)
	}
	c.pruneFrom = end
	return nil
}

// forgetPruned makes the next PruneJournal scan the whole journal again
// (after Truncate rewrote it).
func (c *CQ) forgetPruned() {
	c.pruneMu.Lock()
	c.pruneFrom = nil
	c.pruneMu.Unlock()
}

// Queues implements cq.Store: every queue with entries or a min key (queues
// emptied by retention or truncation have only the latter). The two
// keyspaces sort queues the same way, so they are merged in step, skipping
// from queue to queue with one seek each.
func (c *CQ) Queues(fn func(topic string, queueID int32) bool) error {
	if err := c.check(); err != nil {
		return err
	}
	entries, err := c.db.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCQ}, UpperBound: []byte{prefixCQ + 1}})
	if err != nil {
		return fmt.Errorf("list cq queues: %w", err)
	}
	defer entries.Close()
	mins, err := c.db.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCQMin}, UpperBound: []byte{prefixCQMin + 1}})
	if err != nil {
		return fmt.Errorf("list cq queues: %w", err)
	}
	defer mins.Close()
	eok, mok := entries.First(), mins.First()
	for eok || mok {
		var eq, mq []byte // queue part of the key: topicLen | topic | queueId
		if eok {
			k := entries.Key()
			if len(k) < 1+2+4+8 {
				return fmt.Errorf("list cq queues: key %x: %w", k, ErrBadKey)
			}
			eq = k[1 : len(k)-8]
		}
		if mok {
			mq = mins.Key()[1:]
		}
		var q []byte
		switch {
		case !mok:
			q = eq
		case !eok:
			q = mq
		default:
			if cmp := bytes.Compare(eq, mq); cmp <= 0 {
				q = eq
			} else {
				q = mq
			}
		}
		topic, qid, err := decodeQueueKey(append([]byte{0}, q...))
		if err != nil {
			return fmt.Errorf("list cq queues: queue %x: %w", q, err)
		}
		if !fn(topic, qid) {
			return nil
		}
		next := prefixEnd(queuePrefix(prefixCQ, topic, qid))
		if eok {
			eok = entries.SeekGE(next)
		}
		if mok {
			mok = mins.SeekGE(prefixEnd(queuePrefix(prefixCQMin, topic, qid)))
		}
	}
	if err := entries.Error(); err != nil {
		return fmt.Errorf("list cq queues: %w", err)
	}
	if err := mins.Error(); err != nil {
		return fmt.Errorf("list cq queues: %w", err)
	}
	return nil
}

// Flush implements cq.Store.
func (c *CQ) Flush() error {
	if err := c.check(); err != nil {
		return err
	}
	return c.db.Flush()
}

// Close implements cq.Store: it flushes; the database stays open.
func (c *CQ) Close() error {
	if c.closed.Swap(true) {
		return cq.ErrClosed
	}
	return c.db.Flush()
}
