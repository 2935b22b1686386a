package kvindex

import (
	"container/list"
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/cq"
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
	entries map[qkey]*list.Element // of *offsetEntry
	lru     *list.List             // front = most recently used
}

type offsetEntry struct {
	q          qkey
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
	return &QueueOffsets{store: store, capacity: capacity, log: log,
		entries: map[qkey]*list.Element{}, lru: list.New()}
}

// Acquire makes sure the queue's next offset is in memory and pins it until
// Release. Call it before appending to the queue.
func (t *QueueOffsets) Acquire(topic string, queueID int32) error {
	q := queueIDOf(topic, queueID)
	t.mu.Lock()
	if el, ok := t.entries[q]; ok {
		el.Value.(*offsetEntry).pending++
		t.lru.MoveToFront(el)
		t.mu.Unlock()
		return nil
	}
	t.mu.Unlock()

	next, err := t.store.MaxOffset(topic, queueID)
	if err != nil {
		return fmt.Errorf("load next offset of %s/%d: %w", topic, queueID, err)
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.entries[q]
	if !ok {
		el = t.insert(q, next)
	}
	el.Value.(*offsetEntry).pending++
	t.lru.MoveToFront(el)
	return nil
}

// insert adds a loaded queue and evicts idle ones beyond capacity. t.mu is
// held.
func (t *QueueOffsets) insert(q qkey, next int64) *list.Element {
	el := t.lru.PushFront(&offsetEntry{q: q, next: next, dispatched: next})
	t.entries[q] = el
	if len(t.entries) > t.capacity {
		t.evict(len(t.entries) - t.capacity)
	}
	return el
}

// evict drops up to n evictable queues from the cold end, looking at a
// bounded number of candidates so the append path never scans the table.
func (t *QueueOffsets) evict(n int) {
	budget := 4*n + 16
	for el := t.lru.Back(); el != nil && n > 0 && budget > 0; budget-- {
		prev := el.Prev()
		e := el.Value.(*offsetEntry)
		if e.pending == 0 && e.next == e.dispatched {
			t.lru.Remove(el)
			delete(t.entries, e.q)
			n--
		}
		el = prev
	}
}

// Release unpins a queue acquired with Acquire.
func (t *QueueOffsets) Release(topic string, queueID int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.entries[queueIDOf(topic, queueID)]; ok {
		if e := el.Value.(*offsetEntry); e.pending > 0 {
			e.pending--
		}
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
	el, ok := t.entries[q]
	if !ok {
		next, err := t.store.MaxOffset(topic, queueID)
		if err != nil {
			// The index cannot be read; the dispatcher will log the
			// resulting "[BUG] logic queue order" and store the entry at
			// the queue's real end, so the record stays reachable.
			t.log.Error().Err(err).Str("topic", topic).Int32("queue", queueID).Msg("load next queue offset in assign")
		}
		el = t.insert(q, next)
	}
	e := el.Value.(*offsetEntry)
	base := e.next
	e.next += int64(n)
	t.lru.MoveToFront(el)
	return base
}

// Dispatched tells the table that the dispatcher has indexed the queue up
// to next (exclusive). Queues not in memory are ignored.
func (t *QueueOffsets) Dispatched(topic string, queueID int32, next int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.entries[queueIDOf(topic, queueID)]; ok {
		e := el.Value.(*offsetEntry)
		if next > e.dispatched {
			e.dispatched = next
		}
	}
}

// Next returns the next offset that would be assigned, loading it from the
// index when the queue is not in memory (without caching it).
func (t *QueueOffsets) Next(topic string, queueID int32) (int64, error) {
	t.mu.Lock()
	if el, ok := t.entries[queueIDOf(topic, queueID)]; ok {
		n := el.Value.(*offsetEntry).next
		t.mu.Unlock()
		return n, nil
	}
	t.mu.Unlock()
	return t.store.MaxOffset(topic, queueID)
}

// Forget drops queues of a deleted topic (queueID AnyQueue for all).
func (t *QueueOffsets) Forget(topic string, queueID int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for q, el := range t.entries {
		if q.topic == topic && (queueID == AnyQueue || q.qid == queueID) {
			t.lru.Remove(el)
			delete(t.entries, q)
		}
	}
}

// Len returns the number of queues in memory.
func (t *QueueOffsets) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}
