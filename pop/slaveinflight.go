package pop

import (
	"slices"
	"sync"
	"time"
)

// slaveInFlight counts, per group and queue, the messages a slave's
// pops handed out (PopReadOnly) that are still in flight there, for the
// in-flight threshold on a slave (readOnlyStopped). A slave's store
// holds its master's checkpoints, not its own; the count is its own, in
// memory, as Apache RocketMQ's slave counts its pops in its
// PopInflightMessageCounter: each pop adds the messages it handed out,
// orderly or not, and an ack on the slave (AckReadOnly,
// AckBatchReadOnly) of one of them takes it out. An ack of a message the
// slave did not hand out (popped from the master, or before the slave
// started) takes nothing out, as RocketMQ's counter ignores the acks of
// pops older than the broker's start. An orderly pop that its queue's
// lock does not block first takes the queue out of the count (clear), as
// RocketMQ's does; so do a deletion of the queue's topic, and one of its
// group with the group's offsets (forget), as RocketMQ's deleteTopic and
// deleteSubscriptionGroup clear its counter.
//
// A message is counted until its invisible time is over, too: the slave
// pops it again then (see handedOut), and the pop counts it again.
// RocketMQ's slave, which runs no revive (the master's revive takes a
// message out of its counter), never takes such a message out, and
// counts it once more at each of its deliveries, so that a queue of a
// slave serving long enough stays stopped until the slave restarts.
//
// Concurrency: mu guards the map and closed; timers call wake without
// mu held.
type slaveInFlight struct {
	// wake is called when the in-flight time of messages of a queue the
	// threshold stopped ran out (armWake).
	wake func(k queueKey)

	mu        sync.Mutex
	queues    map[queueKey]*queueInFlight
	nextSweep int64
	closed    bool
}

// queueInFlight is what a slave's pops of one group's queue handed out
// and is in flight.
type queueInFlight struct {
	pops []slavePop
	// n is the number of offsets of pops.
	n int64
	// on is who a pop of the queue is held on.
	on heldOn
	// timer, armed for at (ms), calls wake (armWake); nil when not
	// armed.
	timer *time.Timer
	at    int64
}

// slavePop is one non-orderly pop's handing out of a queue: the offsets
// not acknowledged yet, in flight until until (ms).
type slavePop struct {
	popTime, until int64
	offsets        []int64
}

// newSlaveInFlight returns an empty count whose timers call wake.
func newSlaveInFlight(wake func(k queueKey)) *slaveInFlight {
	return &slaveInFlight{wake: wake, queues: map[queueKey]*queueInFlight{}}
}

// prune drops the pops whose time ran out at now.
func (q *queueInFlight) prune(now int64) {
	q.pops = slices.DeleteFunc(q.pops, func(p slavePop) bool {
		if p.until <= now {
			q.n -= int64(len(p.offsets))
			return true
		}
		return false
	})
}

// settle drops k's entry when it counts nothing. The caller holds mu.
func (f *slaveInFlight) settle(k queueKey, q *queueInFlight) {
	if len(q.pops) == 0 {
		if q.timer != nil {
			q.timer.Stop()
		}
		delete(f.queues, k)
	}
}

// add counts the offsets a pop of k at popTime handed out, in flight
// until until; on is who the pops of k are held on.
func (f *slaveInFlight) add(k queueKey, on heldOn, popTime, until int64, offsets []int64, now int64) {
	if len(offsets) == 0 || until <= now {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[k]
	if q == nil {
		q = &queueInFlight{}
		f.queues[k] = q
	}
	q.on = on
	q.prune(now)
	q.pops = append(q.pops, slavePop{popTime: popTime, until: until, offsets: slices.Clone(offsets)})
	q.n += int64(len(offsets))
	if now >= f.nextSweep {
		f.nextSweep = now + handedSweepEvery.Milliseconds()
		for k, q := range f.queues {
			q.prune(now)
			f.settle(k, q)
		}
	}
}

// ack takes out of k's count the offsets of the pop at popTime that are
// still counted; it reports whether it took any.
func (f *slaveInFlight) ack(k queueKey, popTime int64, offsets []int64, now int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[k]
	if q == nil {
		return false
	}
	q.prune(now)
	took := false
	for i := range q.pops {
		p := &q.pops[i]
		if p.popTime != popTime {
			continue
		}
		before := len(p.offsets)
		p.offsets = slices.DeleteFunc(p.offsets, func(o int64) bool { return slices.Contains(offsets, o) })
		if n := before - len(p.offsets); n > 0 {
			q.n -= int64(n)
			took = true
		}
	}
	q.pops = slices.DeleteFunc(q.pops, func(p slavePop) bool { return len(p.offsets) == 0 })
	f.settle(k, q)
	return took
}

// count returns how many messages of k are in flight at now, and who the
// pops of k are held on.
func (f *slaveInFlight) count(k queueKey, now int64) (int64, heldOn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[k]
	if q == nil {
		return 0, heldOn{k.topic, k.queueID}
	}
	q.prune(now)
	on := q.on
	n := q.n
	f.settle(k, q)
	return n, on
}

// armWake arms k's timer for the earliest end of the in-flight time of
// its messages, when the count fell under the threshold may be then
// (the threshold stopped k): at it, wake(k) is called. An armed timer
// for the same end is kept.
func (f *slaveInFlight) armWake(k queueKey, now int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[k]
	if f.closed || q == nil || len(q.pops) == 0 {
		return
	}
	at := q.pops[0].until
	for _, p := range q.pops[1:] {
		at = min(at, p.until)
	}
	if q.timer != nil {
		if q.at == at {
			return
		}
		q.timer.Stop()
	}
	q.at = at
	var t *time.Timer
	t = time.AfterFunc(time.Duration(max(at-now, 0))*time.Millisecond, func() {
		f.mu.Lock()
		cur := f.queues[k]
		mine := !f.closed && cur != nil && cur.timer == t
		if mine {
			cur.timer = nil
		}
		f.mu.Unlock()
		if mine {
			f.wake(k)
		}
	})
	q.timer = t
}

// clear takes k out of the count, whatever its pops handed out.
func (f *slaveInFlight) clear(k queueKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.queues[k]; q != nil {
		q.pops = nil
		q.n = 0
		f.settle(k, q)
	}
}

// forget takes the queues that match out of the count and returns them.
func (f *slaveInFlight) forget(match func(queueKey) bool) []queueKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	var gone []queueKey
	for k, q := range f.queues {
		if match(k) {
			q.pops = nil
			q.n = 0
			f.settle(k, q)
			gone = append(gone, k)
		}
	}
	return gone
}

// close stops every timer; later calls arm none.
func (f *slaveInFlight) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, q := range f.queues {
		if q.timer != nil {
			q.timer.Stop()
		}
	}
}
