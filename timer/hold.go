package timer

import (
	"math"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
)

// Holding new timer messages back (timerStopEnqueue).
//
// RocketMQ's timer takes parked messages in by reading the ConsumeQueue
// of rmq_sys_wheel_timer (TimerEnqueueGetService). With timerStopEnqueue
// it stops reading there: the messages parked from then on stay in the
// topic, out of its timing wheel, and are not delivered, while those it
// took in before are delivered when due. Once the switch is off again
// it reads on from where it stopped, and delivers at once those whose
// time has passed. Its checkpoint keeps the queue offset it stopped at
// (lastTimerQueueOffset), so a restart holds them still, and a slave
// takes them in from there when it is promoted.
//
// rocketkv indexes every parked record as the dispatcher commits it
// (Hook), held or not, so nothing depends on reading the topic again and
// a crash loses nothing: while the hold is on, the entries of the records
// from the first one dispatched under it (hold.from, its CommitLog
// offset; hold.queue, its queue offset) on stay in the index and the
// delivery rounds pass over them; the watermark a slave forgets
// delivered entries by and DeliveredBefore leave them out. The first held
// record's dispatch batch records where the hold began
// (kvindex.Timers.SetHold), so a start under timerStopEnqueue holds the
// same records. When the switch is turned off, the hold is lifted: the
// next round moves its cursor back to the earliest held entry it passed
// over and delivers what is due, and the recorded start is deleted once
// the dispatcher has committed every batch that may have written it.
//
// Left as they were: the held messages count among those waiting
// (timerCongestNum, rocketmq_timing_messages, GET_TIMER_METRICS) and as
// taken in (timerEnqueueTps, rocketmq_timer_enqueue_total) when they are
// dispatched, where RocketMQ counts them when it takes them in.

// hold is the state of timerStopEnqueue.
//
// Lock order: Service.lateMu before mu. mu is never held while taking
// another lock of the service.
type hold struct {
	mu sync.Mutex
	// from is the CommitLog offset of the first record held, and queue
	// its queue offset; from is math.MaxInt64 while nothing is held.
	from, queue int64
	// gen counts the lifts: a round that passed over held entries under
	// an earlier one hands them back (release) instead of keeping them
	// (passed).
	gen int64
	// passed is the earliest held entry a round passed over (its cursor
	// went past it) under the current hold; released, the earliest of
	// those of lifted holds, which the next round moves its cursor back
	// to.
	passed, released       kvindex.TimerEntry
	hasPassed, hasReleased bool
	clearPending           bool  // the recorded start is to be deleted (settleHold)
	clearBelow             int64 // once the dispatcher has committed below it
	loadOnce               sync.Once
	stopped                func() bool // Options.StopEnqueue
}

// holdSnapshot is what a round knows of the hold.
type holdSnapshot struct {
	from, gen int64
}

// held reports whether the record at phy is held.
func (h holdSnapshot) held(phy int64) bool { return phy >= h.from }

// newHold returns the state of a service whose hold follows stopped.
func newHold(stopped func() bool) hold {
	if stopped == nil {
		stopped = func() bool { return false }
	}
	return hold{from: math.MaxInt64, stopped: stopped}
}

// loadHold reads the hold recorded before this start, once: kept when
// timerStopEnqueue is still on, else lifted (and the record deleted by
// the next settleHold).
func (s *Service) loadHold() {
	h := &s.hold
	rec, ok, err := s.timers.Hold()
	if err != nil {
		s.log.Error().Err(err).Msg("read where the timer began holding parked messages back; the messages held before this start are delivered when due")
		return
	}
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped() {
		if rec.Phy < h.from {
			h.from, h.queue = rec.Phy, rec.QueueOffset
		}
		s.log.Info().Int64("phyOffset", rec.Phy).Int64("queueOffset", rec.QueueOffset).
			Msg("timerStopEnqueue: the timer messages parked from here on stay held")
		return
	}
	h.clearPending, h.clearBelow = true, 0
	s.log.Info().Int64("queueOffset", rec.QueueOffset).Msg("timerStopEnqueue is off: the timer messages held before this start are taken in")
}

// holdRecord is the hook's part: it reports whether the parked record m
// is held, and records in w where a hold begins at m (again, for a
// record a failed dispatch batch hands it again). A record the hook sees
// with timerStopEnqueue off lifts the hold.
func (s *Service) holdRecord(w *pebble.Batch, m *commitlog.Message) (bool, error) {
	h, stop := s.lockHold()
	defer h.mu.Unlock()
	if !stop {
		return false, nil
	}
	if h.from == math.MaxInt64 {
		h.from, h.queue = m.PhyOffset, m.QueueOffset
		h.clearPending = false // the record of this hold replaces it
		s.log.Info().Int64("phyOffset", m.PhyOffset).Int64("queueOffset", m.QueueOffset).
			Msg("timerStopEnqueue: the timer messages parked from here on are held")
	}
	if m.PhyOffset < h.from {
		return false, nil // dispatched again, from before the hold
	}
	if m.PhyOffset == h.from {
		if err := s.timers.SetHold(w, kvindex.TimerHold{Phy: h.from, QueueOffset: h.queue}); err != nil {
			return true, err
		}
	}
	return true, nil
}

// lockHold is the common start of the hook's and the rounds' parts: it
// loads the hold's record once, reads timerStopEnqueue, locks h.mu (the
// caller unlocks it) and lifts the hold when the switch is off. It
// returns the hold and whether the switch is on.
func (s *Service) lockHold() (*hold, bool) {
	h := &s.hold
	h.loadOnce.Do(s.loadHold)
	stop := h.stopped()
	h.mu.Lock()
	if !stop {
		s.liftLocked()
	}
	return h, stop
}

// liftLocked lifts the hold, if any: the entries rounds passed over are
// released, and its record is to be deleted once every batch the hook
// has seen is committed. The caller holds h.mu.
func (s *Service) liftLocked() {
	h := &s.hold
	if h.from == math.MaxInt64 {
		return
	}
	h.from, h.queue = math.MaxInt64, 0
	h.gen++
	if h.hasPassed {
		h.release(h.passed)
		h.hasPassed = false
	}
	h.clearPending, h.clearBelow = true, s.hookedBelow.Load()
	s.log.Info().Msg("timerStopEnqueue is off: the timer messages held are taken in")
}

// release notes e among the released entries; the caller holds h.mu.
func (h *hold) release(e kvindex.TimerEntry) {
	if !h.hasReleased || before(e, h.released) {
		h.released, h.hasReleased = e, true
	}
}

// before reports whether a comes before b in the index's order.
func before(a, b kvindex.TimerEntry) bool {
	return a.DeliverMs < b.DeliverMs || (a.DeliverMs == b.DeliverMs && a.PhyOffset < b.PhyOffset)
}

// settleHold is the rounds' part, at each tick: it lifts the hold once
// timerStopEnqueue is off (whether or not a parked record comes), and
// deletes the record of a lifted hold once the dispatcher has committed
// every batch that may have written it.
func (s *Service) settleHold() {
	h, _ := s.lockHold()
	defer h.mu.Unlock()
	if !h.clearPending || h.from != math.MaxInt64 {
		return
	}
	if s.dispatched != nil && s.dispatched() < h.clearBelow {
		return
	}
	// Under mu: a hold the hook begins after this writes its record
	// after the deletion.
	if err := s.timers.ClearHold(); err != nil {
		s.log.Warn().Err(err).Msg("delete the record of the lifted timer hold; retried at the next tick")
		return
	}
	h.clearPending = false
}

// holdFor returns what a round knows of the hold, and moves the cursor
// back to the released entries; lowerCursor calls it under lateMu.
func (s *Service) holdFor() holdSnapshot {
	h := &s.hold
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hasReleased {
		if before(h.released, kvindex.TimerEntry{DeliverMs: s.cursorMs, PhyOffset: s.cursorPhy}) {
			s.cursorMs, s.cursorPhy = h.released.DeliverMs, h.released.PhyOffset
		}
		h.hasReleased = false
	}
	return holdSnapshot{from: h.from, gen: h.gen}
}

// passHeld returns the entries of due a round delivers: those not held
// as of snap. It notes the earliest of the others, which the cursor is
// to pass over, for the lift; under a hold lifted since snap, as released
// at once.
func (s *Service) passHeld(due []kvindex.TimerEntry, snap holdSnapshot) []kvindex.TimerEntry {
	if snap.from == math.MaxInt64 {
		return due
	}
	take := make([]kvindex.TimerEntry, 0, len(due))
	var first kvindex.TimerEntry
	found := false
	for _, e := range due {
		if !snap.held(e.PhyOffset) {
			take = append(take, e)
		} else if !found {
			first, found = e, true // due is in the index's order
		}
	}
	if !found {
		return due
	}
	h := &s.hold
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.gen != snap.gen:
		h.release(first)
	case !h.hasPassed || before(first, h.passed):
		h.passed, h.hasPassed = first, true
	}
	return take
}

// heldBounds returns the hold as DeliveredBefore sees it: the first
// record held (math.MaxInt64: none), and the earliest released entry the
// cursor has not gone back to yet (ok false: none).
func (s *Service) heldBounds() (from int64, released kvindex.TimerEntry, ok bool) {
	h := &s.hold
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.from, h.released, h.hasReleased
}

// HeldFrom returns the queue offset in rmq_sys_wheel_timer of the first
// parked message held back (timerStopEnqueue); ok is false while none
// is. RocketMQ's timer had taken in the messages before it alone (its
// checkpoint's lastTimerQueueOffset, timerOffsetBehind).
func (s *Service) HeldFrom() (queueOffset int64, ok bool) {
	h := &s.hold
	h.loadOnce.Do(s.loadHold)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queue, h.from != math.MaxInt64
}
