package pop

import (
	"sync"
	"time"
)

// handedOut is what a slave's pops handed out, kept in memory only, per
// group and queue (see PopReadOnly). A slave writes nothing of its pops:
// the offsets and in-flight state that count are its master's, copied
// by the slave sync. Without a memory of its own, every pop between two
// syncs would start from the same copied offset and two consumers
// popping one queue would get the same messages inside their invisible
// time. Apache RocketMQ 5.3.3's slave keeps the same kind of memory (the
// offsets of its PopBufferMergeService, which the pop starts past), and
// forgets it every 5 s whatever the invisible time; rocketkv's keeps each
// pop's progress until the pop's messages are visible again.
//
// For a queue it keeps marks: a pop that read up to next (exclusive) at
// popTime with invisibleTime leaves {next, popTime + invisibleTime}. A
// read-only pop starts at the largest next of the marks still invisible,
// or at the group's committed offset (as last copied from the master)
// when that is further: it never goes back past messages handed out and
// still invisible, and moves on when the master's consumers are ahead.
// A mark with a smaller next and an earlier end than another is of no
// use and dropped, so the marks are ordered by next ascending and end
// descending, and are at most as many as the distinct invisible times of
// the pops in flight. The messages of a mark whose time ran out are
// popped again once every later mark's time ran out too: a slave cannot
// revive them one by one, and none is handed out twice inside its
// invisible time.
//
// When the earliest end of a queue's marks (its last mark's) comes, a
// pop of the queue starts earlier again, at messages whose time ran out,
// and no message arrives to say so: a timer per queue with marks, armed
// for that end, wakes the group's pops held on it then (notify; not the
// other groups', whose own marks are elsewhere), as a revive's put wakes
// them on a master. It is re-armed for the next end when it
// fires, replaced when a pop changes the queue's marks, and stopped when
// the queue has none left or at close.
//
// Concurrency: mu guards the map, the timers and closed; the read-only
// pop of a queue holds the queue's stripe lock from its start to its
// mark, so two pops of one queue never read from the same start. notify
// is called without mu held.
type handedOut struct {
	// notify wakes the group's pops held on a topic's queue (every
	// queue of it when queueID is negative); nil arms no timers.
	notify func(topic, group string, queueID int32)
	// now is the clock (ms), which the marks' ends are on.
	now func() int64

	mu        sync.Mutex
	queues    map[queueKey]*queueHandedOut
	nextSweep int64
	closed    bool
}

// heldOn names the pops held on a queue's messages: the topic and queue a
// pop that reads it is held on (the queue popped, or every queue of the
// popped topic for its pop-retry topics).
type heldOn struct {
	topic   string
	queueID int32
}

// handedWake is the timer of a queue armed for at (ms); its identity
// tells a timer that fired whether it is still the queue's.
type handedWake struct {
	t  *time.Timer
	at int64
}

// queueHandedOut is what a slave handed out of one group's queue.
type queueHandedOut struct {
	// marks, next ascending and until descending.
	marks []handedMark
	// on is who to wake when the last mark runs out, wake the timer for
	// it (nil without marks).
	on   heldOn
	wake *handedWake
}

// handedMark says that the messages before next were handed out and are
// invisible until until (ms).
type handedMark struct{ next, until int64 }

// handedSweepEvery is how often the marks of every queue are pruned, so
// that queues no longer popped do not keep them.
const handedSweepEvery = time.Minute

// newHandedOut returns an empty memory whose timers call notify (none
// with a nil notify) at the ends of marks on the clock now.
func newHandedOut(notify func(topic, group string, queueID int32), now func() int64) *handedOut {
	if now == nil {
		now = func() int64 { return time.Now().UnixMilli() }
	}
	return &handedOut{notify: notify, now: now, queues: map[queueKey]*queueHandedOut{}}
}

// queue returns k's entry, created empty. The caller holds mu.
func (h *handedOut) queue(k queueKey) *queueHandedOut {
	q := h.queues[k]
	if q == nil {
		q = &queueHandedOut{}
		h.queues[k] = q
	}
	return q
}

// from returns where a read-only pop of k starts at now, base being the
// group's committed offset (committed set) or its computed start: base,
// or past the messages handed out that are still invisible. It drops
// what no longer counts: marks whose time ran out or which the committed
// offset passed.
func (h *handedOut) from(k queueKey, base int64, committed bool, now int64) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queues[k]
	if q == nil {
		return base
	}
	q.prune(now)
	if committed {
		i := 0
		for i < len(q.marks) && q.marks[i].next <= base {
			i++
		}
		q.marks = q.marks[i:]
	}
	if !h.settle(k, q, now) {
		return base
	}
	if n := len(q.marks); n > 0 && q.marks[n-1].next > base {
		return q.marks[n-1].next
	}
	return base
}

// prune drops the marks whose time ran out at now (the tail, as their
// ends descend).
func (q *queueHandedOut) prune(now int64) {
	n := len(q.marks)
	for n > 0 && q.marks[n-1].until <= now {
		n--
	}
	clear(q.marks[n:])
	q.marks = q.marks[:n]
}

// handOut notes that a read-only pop of k that started at start read up
// to next (exclusive), its messages invisible until until; on is where
// pops that read k are held. A read that started below start (the queue
// ends before it: deleted and created again) forgets the queue's earlier
// marks.
func (h *handedOut) handOut(k queueKey, on heldOn, start, from, next, until, now int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queue(k)
	q.on = on
	if from < start {
		clear(q.marks)
		q.marks = q.marks[:0]
	}
	q.prune(now)
	if next > from && until > now {
		n := len(q.marks)
		for n > 0 && q.marks[n-1].until <= until {
			n--
		}
		clear(q.marks[n:])
		q.marks = q.marks[:n]
		if n == 0 || q.marks[n-1].next < next {
			q.marks = append(q.marks, handedMark{next: next, until: until})
		}
	}
	h.settle(k, q, now)
	if now >= h.nextSweep {
		h.nextSweep = now + handedSweepEvery.Milliseconds()
		h.sweepLocked(now)
	}
}

// sweepLocked prunes every queue's marks at now and drops the queues
// left with nothing. The caller holds mu.
func (h *handedOut) sweepLocked(now int64) {
	for k, q := range h.queues {
		q.prune(now)
		h.settle(k, q, now)
	}
}

// settle arms q's timer for the end of its last mark, stops it when q
// has no marks, and drops q when it keeps nothing; it reports whether q
// is kept. The caller holds mu.
func (h *handedOut) settle(k queueKey, q *queueHandedOut, now int64) bool {
	n := len(q.marks)
	if n == 0 || h.closed || h.notify == nil {
		q.stopWake()
	} else if at := q.marks[n-1].until; q.wake == nil || q.wake.at != at {
		q.stopWake()
		w := &handedWake{at: at}
		q.wake = w
		// Under mu: fire waits for it, so w.t is set before fire runs.
		w.t = time.AfterFunc(time.Duration(max(at-now, 0))*time.Millisecond, func() { h.fire(k, w) })
	}
	if n == 0 {
		delete(h.queues, k)
		return false
	}
	return true
}

// stopWake stops q's timer.
func (q *queueHandedOut) stopWake() {
	if q.wake != nil {
		q.wake.t.Stop()
		q.wake = nil
	}
}

// fire drops the marks of k that ran out, re-arms its timer for the next
// end and wakes the pops held on k, unless the timer was replaced or the
// memory closed meanwhile.
func (h *handedOut) fire(k queueKey, w *handedWake) {
	h.mu.Lock()
	q := h.queues[k]
	if h.closed || q == nil || q.wake != w {
		h.mu.Unlock()
		return
	}
	q.wake = nil
	now := h.now()
	q.prune(now)
	on := q.on
	h.settle(k, q, now)
	h.mu.Unlock()
	h.notify(on.topic, k.group, on.queueID)
}

// forget drops the marks of the queues that match.
func (h *handedOut) forget(match func(queueKey) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, q := range h.queues {
		if match(k) {
			q.stopWake()
			delete(h.queues, k)
		}
	}
}

// close stops every timer; later marks arm none.
func (h *handedOut) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, q := range h.queues {
		q.stopWake()
	}
}
