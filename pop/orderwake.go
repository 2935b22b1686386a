package pop

import (
	"sync"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
)

// orderWakes wakes the pops held on an orderly queue when the lock of its
// batch runs out (RocketMQ's ConsumerOrderInfoLockManager, on under
// enableNotifyAfterPopOrderLockRelease). A batch that is neither
// acknowledged nor extended frees its queue at its deadline, and no
// message arrives to say so: without the wake, a consumer held on the
// queue would sleep out its whole poll time. There is one timer per locked
// queue, replaced when the batch's deadline moves and stopped when the
// batch is acknowledged (the acknowledgement wakes the queue itself).
type orderWakes struct {
	notify func(topic, group string, queueID int32)

	mu     sync.Mutex
	timers map[orderKey]*orderWake
	closed bool
}

type orderKey struct {
	group, topic string
	queueID      int32
}

// orderWake is one queue's timer; its identity tells a timer that fired
// whether it is still the queue's current one.
type orderWake struct{ t *time.Timer }

func newOrderWakes(notify func(topic, group string, queueID int32)) *orderWakes {
	return &orderWakes{notify: notify, timers: map[orderKey]*orderWake{}}
}

// lockFreeAt returns when st stops locking its queue (ms): the latest
// deadline of its unacknowledged messages, or 0 when that is not known (a
// batch imported without its invisible time) or nothing is left.
func lockFreeAt(st *kvindex.OrderState) int64 {
	var at int64
	for i, m := range st.Messages {
		if st.Acked&(1<<i) != 0 {
			continue
		}
		deadline := m.NextVisibleAt
		if deadline == 0 {
			if st.InvisibleTime <= 0 {
				return 0
			}
			deadline = st.PopTime + st.InvisibleTime
		}
		at = max(at, deadline)
	}
	return at
}

// set arms the timer of st's queue for when st frees it, given now (ms),
// replacing the one armed before; a batch with no known deadline clears
// it. A nil orderWakes does nothing.
func (w *orderWakes) set(st *kvindex.OrderState, now int64) {
	if w == nil {
		return
	}
	at := lockFreeAt(st)
	if at == 0 {
		w.clear(st.Group, st.Topic, st.QueueID)
		return
	}
	k := orderKey{st.Group, st.Topic, st.QueueID}
	e := &orderWake{}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if old := w.timers[k]; old != nil {
		old.t.Stop()
	}
	w.timers[k] = e
	// Under mu: fire waits for it, so e.t is set before fire reads it.
	e.t = time.AfterFunc(time.Duration(max(at-now, 0))*time.Millisecond, func() { w.fire(k, e) })
}

// clear stops the timer of a queue whose batch is gone.
func (w *orderWakes) clear(group, topic string, queueID int32) {
	if w == nil {
		return
	}
	k := orderKey{group, topic, queueID}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old := w.timers[k]; old != nil {
		old.t.Stop()
		delete(w.timers, k)
	}
}

// fire wakes the queue's held pops, unless the timer was replaced or the
// service closed meanwhile.
func (w *orderWakes) fire(k orderKey, e *orderWake) {
	w.mu.Lock()
	current := w.timers[k] == e && !w.closed
	if current {
		delete(w.timers, k)
	}
	w.mu.Unlock()
	if current {
		w.notify(k.topic, k.group, k.queueID)
	}
}

// close stops every timer; later sets do nothing.
func (w *orderWakes) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for k, e := range w.timers {
		e.t.Stop()
		delete(w.timers, k)
	}
}
