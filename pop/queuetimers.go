package pop

import (
	"sync"
	"time"
)

// queueTimers wakes the pops held on a queue at a time: one timer per
// queue, which calls notify with the queue when it fires, unless it was
// replaced or stopped meanwhile.
type queueTimers struct {
	notify func(topic, group string, queueID int32)

	mu     sync.Mutex
	timers map[queueKey]*queueTimer
	closed bool
}

// queueTimer is one queue's timer; its identity tells a timer that fired
// whether it is still the queue's current one.
type queueTimer struct {
	at int64
	t  *time.Timer
}

func newQueueTimers(notify func(topic, group string, queueID int32)) *queueTimers {
	return &queueTimers{notify: notify, timers: map[queueKey]*queueTimer{}}
}

// arm makes k's timer fire at at (ms since the epoch), given now: it
// replaces the timer armed before, or with earliest keeps it when that
// fires no later.
func (w *queueTimers) arm(k queueKey, at, now int64, earliest bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if old := w.timers[k]; old != nil {
		if earliest && old.at <= at {
			return
		}
		old.t.Stop()
	}
	e := &queueTimer{at: at}
	w.timers[k] = e
	// Under mu: fire waits for it, so e.t is set before fire reads it.
	e.t = time.AfterFunc(time.Duration(max(at-now, 0))*time.Millisecond, func() { w.fire(k, e) })
}

// clear stops k's timer.
func (w *queueTimers) clear(k queueKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old := w.timers[k]; old != nil {
		old.t.Stop()
		delete(w.timers, k)
	}
}

// fire wakes the queue's held pops, unless the timer was replaced or the
// timers closed meanwhile.
func (w *queueTimers) fire(k queueKey, e *queueTimer) {
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

// close stops every timer; later arms do nothing.
func (w *queueTimers) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for k, e := range w.timers {
		e.t.Stop()
		delete(w.timers, k)
	}
}

// armed returns how many queues have a timer armed.
func (w *queueTimers) armed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.timers)
}
