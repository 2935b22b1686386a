package kvindex

import (
	"fmt"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/rocketkv/rocketkv/cq"
)

// Bounds of the ConsumeQueue tail cache (see cqTails).
const (
	// DefaultCQTailQueues is how many queues keep a tail.
	DefaultCQTailQueues = 1024
	// cqTailKeep is how many of a queue's newest entries a tail keeps at
	// least; it holds up to twice as many between compactions. A reader
	// more than that far behind the queue's end reads the database.
	cqTailKeep = 64
)

// cqTails keeps the newest entries of queues whose readers are at their
// end, so that a pull or pop of what was just dispatched costs a map
// lookup and a copy. Through Pebble such a read costs a new iterator and
// a seek through the memtables and every level (13 % of the broker's CPU
// under a paced produce with long-polling consumers, and the largest cost
// of a pop).
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
type cqTails struct {
	mu    sync.Mutex
	cuts  uint64
	tails *simplelru.LRU[qkey, *cqTail]
}

// cqTail is one queue's run of newest entries.
type cqTail struct {
	first   int64
	entries []cq.Entry
}

func (t *cqTail) end() int64 { return t.first + int64(len(t.entries)) }

// tailWrite is an entry a writer committed, with its final queue offset.
type tailWrite struct {
	q qkey
	e cq.Entry
}

func newCQTails(queues int) *cqTails {
	lru, err := simplelru.NewLRU[qkey, *cqTail](queues, nil)
	if err != nil {
		// NewLRU fails only for a non-positive size.
		panic(fmt.Sprintf("kvindex: cq tail cache: %v", err))
	}
	return &cqTails{tails: lru}
}

// get returns up to max entries of q from offset from when q's tail holds
// them: from lies in the tail and the tail either holds max entries from
// there or reaches queueEnd (the queue's end as its bounds say), so the
// answer is what a database read would give.
func (c *cqTails) get(q qkey, from int64, max int, queueEnd int64) ([]cq.Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tails.Get(q)
	if !ok || from < t.first || from >= t.end() {
		return nil, false
	}
	n := t.end() - from
	if n < int64(max) && t.end() < queueEnd {
		return nil, false
	}
	n = min(n, int64(max))
	out := make([]cq.Entry, n)
	copy(out, t.entries[from-t.first:])
	return out, true
}

// generation returns the count of cutting writes, to be passed to install
// by a reader about to read the database.
func (c *cqTails) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cuts
}

// install gives q a tail of the newest of entries, which a read that
// began at generation gen found to reach the queue's end. It does nothing
// when q has a tail already (the dispatcher keeps that one current) or a
// cutting write happened since gen.
func (c *cqTails) install(q qkey, entries []cq.Entry, gen uint64) {
	if len(entries) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cuts != gen || c.tails.Contains(q) {
		return
	}
	entries = entries[max(0, len(entries)-cqTailKeep):]
	t := &cqTail{first: entries[0].QueueOffset, entries: make([]cq.Entry, len(entries), 2*cqTailKeep)}
	copy(t.entries, entries)
	c.tails.Add(q, t)
}

// publish appends committed entries to the tails of their queues. An entry
// below a tail's end is there already (a reader installed it); one above
// it means entries were committed while the tail was being installed and
// were not appended, so the tail restarts at it.
func (c *cqTails) publish(written []tailWrite) {
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
			n := copy(t.entries, t.entries[len(t.entries)-cqTailKeep:])
			t.first += int64(len(t.entries) - n)
			t.entries = t.entries[:n]
		}
		t.entries = append(t.entries, w.e)
	}
}

// drop removes the tails of the queues match selects and counts a cutting
// write; the caller holds CQ.mu and has committed the write.
func (c *cqTails) drop(match func(qkey) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cuts++
	for _, q := range c.tails.Keys() {
		if match(q) {
			c.tails.Remove(q)
		}
	}
}
