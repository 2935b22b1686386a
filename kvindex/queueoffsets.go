package kvindex

import (
	"fmt"
	"hash/maphash"
	"sync"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/slablru"
)

// QueueOffsets assigns queue offsets at append time, as RocketMQ's
// topicQueueTable does, without holding every queue in memory: a queue's
// next offset is loaded from the ConsumeQueue on first touch, hot queues
// stay in memory, and idle ones are evicted once the dispatcher has indexed
// everything assigned to them (so reloading from the ConsumeQueue gives the
// same answer).
//
// The append path is Acquire (outside the CommitLog's append lock, may read
// the index), then the CommitLog calls Assign under its lock (memory only),
// then Release.
type QueueOffsets struct {
	store    cq.Store
	capacity int
	log      zerolog.Logger

	mu      sync.Mutex
	entries *slablru.Cache[qkey, offsetEntry] // may exceed capacity while entries are pinned
	names   *topicNames                       // the topic strings of entries' keys
	// dropped counts, per bucket of queues (dropBucket), the entries
	// evicted or forgotten: a load that read the index while the count of
	// its bucket moved may predate an entry assigned and dropped in
	// between, and is done again.
	dropped [dropBuckets]uint64
	seed    maphash.Seed
}

// dropBuckets is the number of buckets of QueueOffsets.dropped.
const dropBuckets = 64

// dropBucket returns the bucket of QueueOffsets.dropped of a queue.
func (t *QueueOffsets) dropBucket(q qkey) int {
	return int(maphash.Comparable(t.seed, q) % dropBuckets)
}

type offsetEntry struct {
	next       int64 // next offset to assign
	dispatched int64 // next offset the dispatcher has not indexed yet
	pending    int   // Acquires not yet Released
}

// DefaultQueueOffsetsCapacity is how many queues QueueOffsets keeps when
// they can be evicted.
const DefaultQueueOffsetsCapacity = 1 << 18

// NewQueueOffsets returns a table over store keeping about capacity queues
// (DefaultQueueOffsetsCapacity when <= 0).
func NewQueueOffsets(store cq.Store, capacity int, log zerolog.Logger) *QueueOffsets {
	if capacity <= 0 {
		capacity = DefaultQueueOffsetsCapacity
	}
	return &QueueOffsets{store: store, capacity: capacity, log: log, seed: maphash.MakeSeed(),
		entries: slablru.New[qkey, offsetEntry](capacity), names: newTopicNames(defaultTopicNames)}
}

// Acquire makes sure the queue's next offset is in memory and pins it until
// Release. Call it before appending to the queue.
func (t *QueueOffsets) Acquire(topic string, queueID int32) error {
	q := queueIDOf(topic, queueID)
	bucket := -1 // hashed on the first miss: a hit, the common case, needs none
	for attempt := 0; ; attempt++ {
		t.mu.Lock()
		if e, ok := t.entries.Ref(q); ok {
			e.pending++
			t.mu.Unlock()
			return nil
		}
		if bucket < 0 {
			bucket = t.dropBucket(q)
		}
		if attempt == maxLoadAttempts {
			// Drops keep racing the loads: load under the lock.
			defer t.mu.Unlock()
			next, err := t.store.MaxOffset(topic, queueID)
			if err != nil {
				return fmt.Errorf("load next offset of %s/%d: %w", topic, queueID, err)
			}
			t.insert(q, next).pending++
			return nil
		}
		seen := t.dropped[bucket]
		t.mu.Unlock()

		next, err := t.store.MaxOffset(topic, queueID)
		if err != nil {
			return fmt.Errorf("load next offset of %s/%d: %w", topic, queueID, err)
		}

		t.mu.Lock()
		e, ok := t.entries.Ref(q)
		if !ok && t.dropped[bucket] != seen {
			// Another appender may have loaded the queue, assigned
			// offsets past next and had them dropped once dispatched,
			// while this load read the index: read it again.
			t.mu.Unlock()
			continue
		}
		if !ok {
			e = t.insert(q, next)
		}
		e.pending++
		t.mu.Unlock()
		return nil
	}
}

// maxLoadAttempts bounds Acquire's loads outside the lock.
const maxLoadAttempts = 3

// insert adds a loaded queue and evicts idle ones beyond capacity. t.mu is
// held. The pointer is valid until the table changes again.
func (t *QueueOffsets) insert(q qkey, next int64) *offsetEntry {
	if n := t.entries.Len() + 1 - t.capacity; n > 0 {
		t.evict(n)
	}
	q.topic = t.names.intern(q.topic)
	return t.entries.Insert(q, offsetEntry{next: next, dispatched: next})
}

// evict drops up to n evictable queues from the cold end, looking at a
// bounded number of candidates so the append path never scans the table.
func (t *QueueOffsets) evict(n int) {
	t.entries.EvictOldest(n, 4*n+16, func(q qkey, e *offsetEntry) bool {
		if e.pending == 0 && e.next == e.dispatched {
			t.dropped[t.dropBucket(q)]++
			return true
		}
		return false
	})
}

// Release unpins a queue acquired with Acquire.
func (t *QueueOffsets) Release(topic string, queueID int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.entries.RefPeek(queueIDOf(topic, queueID)); ok && e.pending > 0 {
		e.pending--
	}
}

// Assign returns the next n offsets of a queue (the first of them) and
// moves past them. The CommitLog calls it under its append lock; the queue
// must have been acquired. An unacquired queue is loaded here, which reads
// the index under the CommitLog's lock: correct, but slow.
func (t *QueueOffsets) Assign(topic string, queueID int32, n int) int64 {
	q := queueIDOf(topic, queueID)
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries.Ref(q)
	if !ok {
		next, err := t.store.MaxOffset(topic, queueID)
		if err != nil {
			// The index cannot be read; the dispatcher will log the
			// resulting "[BUG] logic queue order" and store the entry at
			// the queue's real end, so the record stays reachable.
			t.log.Error().Err(err).Str("topic", topic).Int32("queue", queueID).Msg("load next queue offset in assign")
		}
		e = t.insert(q, next)
	}
	base := e.next
	e.next += int64(n)
	return base
}

// Dispatched tells the table that the dispatcher has indexed the queue up
// to next (exclusive). Queues not in memory are ignored.
func (t *QueueOffsets) Dispatched(topic string, queueID int32, next int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.entries.RefPeek(queueIDOf(topic, queueID)); ok && next > e.dispatched {
		e.dispatched = next
	}
}

// Next returns the next offset that would be assigned, loading it from the
// index when the queue is not in memory (without caching it).
func (t *QueueOffsets) Next(topic string, queueID int32) (int64, error) {
	t.mu.Lock()
	if e, ok := t.entries.Peek(queueIDOf(topic, queueID)); ok {
		t.mu.Unlock()
		return e.next, nil
	}
	t.mu.Unlock()
	return t.store.MaxOffset(topic, queueID)
}

// Forget drops queues of a deleted topic (queueID AnyQueue for all).
func (t *QueueOffsets) Forget(topic string, queueID int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries.RemoveIf(func(q qkey, _ offsetEntry) bool {
		if q.topic == topic && (queueID == AnyQueue || q.qid == queueID) {
			t.dropped[t.dropBucket(q)]++
			return true
		}
		return false
	})
}

// Len returns the number of queues in memory.
func (t *QueueOffsets) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entries.Len()
}
