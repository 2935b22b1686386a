package kvindex

import (
	"cmp"
	"slices"
	"sync"

	"github.com/rocketkv/rocketkv/internal/slablru"
)

// checkpointCache holds, for the queues POP uses most recently, every live
// checkpoint of the queue (keyspace 0x56) in memory, so that an ack finds
// the checkpoint its handle names and both pop and ack compute the
// queue's smallest in-flight offset without reading the database: that
// Get and seek were an eighth of a broker's CPU under pop+ack load.
//
//	queues: LRU keyed by the queue's 0x56 prefix (group | topic | queueId)
//	  └─ ckQueue{from, cks: []*Checkpoint sorted by (CKOffset, PopTime)}
//	         complete for every CKOffset >= from
//	  └─ ckQueue{oversized}: more than maxQueueCheckpoints; not held
//
// A queue is loaded by MinInFlight, which knows a bound below every
// checkpoint of the queue (from), with one scan of the database. From then
// on PopBatch.Commit applies each committed checkpoint write of the queue
// to it after the batch is in the database; a batch that fails to commit
// drops the queues it touched. Writes to the queues that are not held
// only mark a concurrent load of the same queue as stale (loading), so a
// load never installs what a commit has changed under its scan.
//
// Like the checkpoint floors (popfloor.go), this relies on every writer of
// a queue's checkpoints holding the POP service's lock of the queue from
// its reads through its commit, so two commits of one queue never
// interleave; the broker's import of a RocketMQ store's POP state runs
// before the service starts.
//
// Memory is bounded twice: a queue with more than maxQueueCheckpoints live
// checkpoints is not held (it is marked oversized and reloaded only after
// oversizedRetry MinInFlight calls), and the least recently used queues
// are dropped while the estimated size of all held checkpoints passes the
// budget.
type checkpointCache struct {
	mu      sync.Mutex
	queues  *slablru.Cache[string, *ckQueue]
	loading map[string]bool // queues being loaded; false once a commit touched one
	bytes   int             // estimated size of every held checkpoint
	budget  int
	// maxQueue is maxQueueCheckpoints, retry oversizedRetry (tests
	// shrink them).
	maxQueue, retry int
}

// ckQueue is one queue's entry in the checkpoint cache.
type ckQueue struct {
	// from is the lower bound of the load: every checkpoint of the queue
	// with CKOffset >= from is in cks.
	from int64
	cks  []*Checkpoint
	// bytes is the estimated size of the entry: key, queue and cks.
	bytes int
	// oversized marks a queue with too many checkpoints to hold; retry
	// counts down the MinInFlight calls until the next load attempt.
	oversized bool
	retry     int
}

const (
	// defaultCheckpointCacheBytes bounds the estimated size of every
	// checkpoint held: about 45,000 checkpoints of 32 messages.
	defaultCheckpointCacheBytes = 16 << 20
	// maxQueueCheckpoints is the most checkpoints one queue may have and
	// be held: an insert or delete moves at most this many pointers.
	maxQueueCheckpoints = 1024
	// oversizedRetry is how many MinInFlight calls of an oversized queue
	// go to the database before the next load attempt.
	oversizedRetry = 1024
	// ckEntryOverhead estimates a held checkpoint's size beside its
	// offsets: the struct, its pointer and the slice header.
	ckEntryOverhead = 136
	// ckQueueOverhead estimates a held queue's size beside its key and
	// checkpoints: the LRU slot, the index entry and the ckQueue.
	ckQueueOverhead = 160
)

func newCheckpointCache(budget int) *checkpointCache {
	return &checkpointCache{
		queues:   slablru.New[string, *ckQueue](1 << 30), // bounded by budget, not count
		loading:  map[string]bool{},
		budget:   budget,
		maxQueue: maxQueueCheckpoints,
		retry:    oversizedRetry,
	}
}

// ckEntrySize is the estimated memory of one held checkpoint.
func ckEntrySize(c *Checkpoint) int { return ckEntryOverhead + 8*cap(c.Offsets) }

// find returns the index of the checkpoint named (ckOffset, popTime) in
// q.cks (in key order, compareNames), or where it would be inserted, and
// whether it is there.
func (q *ckQueue) find(ckOffset, popTime int64) (int, bool) {
	return slices.BinarySearchFunc(q.cks, CheckpointName{ckOffset, popTime}, func(c *Checkpoint, n CheckpointName) int {
		return compareNames(CheckpointName{c.CKOffset, c.PopTime}, n)
	})
}

// get copies the held checkpoint named by a handle into out; ok is false
// when the queue is not held or has no such checkpoint (the caller then
// reads the database).
func (cc *checkpointCache) get(prefix []byte, ckOffset, popTime int64, out *Checkpoint) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	q, ok := cc.queues.Get(string(prefix))
	if !ok || q.oversized {
		return false
	}
	i, found := q.find(ckOffset, popTime)
	if !found {
		return false
	}
	*out = *q.cks[i]
	out.Offsets = slices.Clone(out.Offsets)
	return true
}

// minInFlight answers MinInFlightReplacing from a held queue: the smallest
// offset in flight among the checkpoints with CKOffset >= lower, with
// replaced's offsets standing in for its stored ones. handled is false
// when the queue is not held completely down to lower; load tells whether
// the caller should load it now.
func (cc *checkpointCache) minInFlight(prefix []byte, lower int64, replaced *Checkpoint) (best int64, handled, load bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	q, ok := cc.queues.Get(string(prefix))
	switch {
	case !ok:
		return 0, false, true
	case q.oversized:
		q.retry--
		if q.retry > 0 {
			return 0, false, false
		}
		cc.drop(string(prefix), q)
		return 0, false, true
	case lower < q.from:
		// The bound moved down (an offset reset): reload from it.
		cc.drop(string(prefix), q)
		return 0, false, true
	}
	return scanMin(q.cks, lower, replaced), true, false
}

// inFlight answers InFlightCount from a held queue: how many offsets
// are in flight in the checkpoints with CKOffset >= lower, the count
// stopping once it passes limit. handled is false when the queue is not
// held completely down to lower.
func (cc *checkpointCache) inFlight(prefix []byte, lower, limit int64) (n int64, handled bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	q, ok := cc.queues.Get(string(prefix))
	if !ok || q.oversized || lower < q.from {
		return 0, false
	}
	start, _ := slices.BinarySearchFunc(q.cks, lower, func(c *Checkpoint, lower int64) int {
		return cmp.Compare(uint64(c.CKOffset), uint64(lower))
	})
	for _, c := range q.cks[start:] {
		if n += int64(len(c.Offsets)); n > limit {
			break
		}
	}
	return n, true
}

// scanMin is MinInFlightReplacing's walk (minStep) over held checkpoints
// in key order, from the first with CKOffset >= lower.
func scanMin(cks []*Checkpoint, lower int64, replaced *Checkpoint) int64 {
	best := int64(noCheckpoint)
	start, _ := slices.BinarySearchFunc(cks, lower, func(c *Checkpoint, lower int64) int {
		return cmp.Compare(uint64(c.CKOffset), uint64(lower))
	})
	for _, c := range cks[start:] {
		var done bool
		if best, done = minStep(best, c, replaced); done {
			break
		}
	}
	return best
}

// startLoad registers a load of a queue; it returns false when one is
// already under way.
func (cc *checkpointCache) startLoad(prefix []byte) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if _, busy := cc.loading[string(prefix)]; busy {
		return false
	}
	cc.loading[string(prefix)] = true
	return true
}

// abortLoad ends a load that failed.
func (cc *checkpointCache) abortLoad(prefix []byte) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	delete(cc.loading, string(prefix))
}

// finishLoad installs what a load read (every checkpoint of the queue with
// CKOffset >= from, in key order; complete is false when the scan stopped
// past maxQueueCheckpoints), unless a commit touched the queue meanwhile.
func (cc *checkpointCache) finishLoad(prefix []byte, from int64, cks []*Checkpoint, complete bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	key := string(prefix)
	clean := cc.loading[key]
	delete(cc.loading, key)
	if !clean {
		return
	}
	if !complete {
		cc.insert(key, cc.oversizedQueue(key))
		return
	}
	q := &ckQueue{from: from, cks: cks, bytes: ckQueueOverhead + len(key)}
	for _, c := range cks {
		q.bytes += ckEntrySize(c)
	}
	cc.insert(key, q)
}

// oversizedQueue is the marker of a queue with too many checkpoints.
func (cc *checkpointCache) oversizedQueue(key string) *ckQueue {
	return &ckQueue{oversized: true, retry: cc.retry, bytes: ckQueueOverhead + len(key)}
}

// insert holds q under key, replacing what was there, and evicts down to
// the budget. The caller holds mu.
func (cc *checkpointCache) insert(key string, q *ckQueue) {
	if old, ok := cc.queues.Peek(key); ok {
		cc.bytes -= old.bytes
	}
	cc.queues.Insert(key, q)
	cc.bytes += q.bytes
	cc.evict()
}

// ckUpdate is one checkpoint write of a batch: c's new state, or its
// deletion.
type ckUpdate struct {
	queue   string // the queue's 0x56 prefix
	c       *Checkpoint
	deleted bool
}

// apply brings the held queues up to date with a committed batch's
// checkpoint writes, in the batch's order.
func (cc *checkpointCache) apply(updates []ckUpdate) {
	if len(updates) == 0 {
		return
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, u := range updates {
		q, ok := cc.queues.Peek(u.queue)
		if !ok || q.oversized {
			cc.markStale(u.queue)
			continue
		}
		i, found := q.find(u.c.CKOffset, u.c.PopTime)
		switch {
		case u.deleted && found:
			cc.grow(q, -ckEntrySize(q.cks[i]))
			q.cks = slices.Delete(q.cks, i, i+1)
		case u.deleted:
		case found:
			cc.grow(q, ckEntrySize(u.c)-ckEntrySize(q.cks[i]))
			q.cks[i] = u.c
		default:
			q.cks = slices.Insert(q.cks, i, u.c)
			cc.grow(q, ckEntrySize(u.c))
		}
		if len(q.cks) > cc.maxQueue {
			cc.insert(u.queue, cc.oversizedQueue(u.queue))
		}
	}
	cc.evict()
}

// grow counts delta bytes more (or fewer) for held queue q. The caller
// holds mu.
func (cc *checkpointCache) grow(q *ckQueue, delta int) {
	q.bytes += delta
	cc.bytes += delta
}

// forget drops the queues a batch that failed to commit touched: what the
// database holds for them is not known.
func (cc *checkpointCache) forget(updates []ckUpdate) {
	if len(updates) == 0 {
		return
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, u := range updates {
		cc.markStale(u.queue)
		if q, ok := cc.queues.Peek(u.queue); ok {
			cc.drop(u.queue, q)
		}
	}
}

// purge forgets every held queue, after the checkpoints were replaced;
// loads under way install nothing.
func (cc *checkpointCache) purge() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for k := range cc.loading {
		cc.loading[k] = false
	}
	cc.queues.Purge()
	cc.bytes = 0
}

// markStale tells a load of the queue under way that a commit touched
// it, so it installs nothing. The caller holds mu.
func (cc *checkpointCache) markStale(key string) {
	if _, busy := cc.loading[key]; busy {
		cc.loading[key] = false
	}
}

// drop removes a held queue. The caller holds mu.
func (cc *checkpointCache) drop(key string, q *ckQueue) {
	cc.bytes -= q.bytes
	cc.queues.Remove(key)
}

// evict drops the least recently used queues while the held checkpoints
// pass the budget. The caller holds mu.
func (cc *checkpointCache) evict() {
	for cc.bytes > cc.budget {
		n := cc.queues.EvictOldest(1, 1, func(_ string, q **ckQueue) bool {
			cc.bytes -= (*q).bytes
			return true
		})
		if n == 0 {
			cc.bytes = 0 // nothing left to drop
			return
		}
	}
}
