package pop

import (
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
type orderWakes struct{ timers *queueTimers }

func newOrderWakes(notify func(topic, group string, queueID int32)) *orderWakes {
	return &orderWakes{timers: newQueueTimers(notify)}
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
	k := queueKey{st.Group, st.Topic, st.QueueID}
	if at := lockFreeAt(st); at != 0 {
		w.timers.arm(k, at, now, false)
	} else {
		w.timers.clear(k)
	}
}

// clear stops the timer of a queue whose batch is gone.
func (w *orderWakes) clear(group, topic string, queueID int32) {
	if w != nil {
		w.timers.clear(queueKey{group, topic, queueID})
	}
}

// close stops every timer; later sets do nothing.
func (w *orderWakes) close() {
	if w != nil {
		w.timers.close()
	}
}
