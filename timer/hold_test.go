package timer

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/kvindex"
)

// timerStopEnqueue, as RocketMQ's: the messages parked while it is on are
// not taken in (not delivered, left out of the watermark and of
// DeliveredBefore, HeldFrom naming the first) while those parked before
// are delivered when due; a restart under it holds them still; once it is
// off they are delivered, at once those whose time has passed.
func TestStopEnqueueHoldsNewTimerMessagesBack(t *testing.T) {
	f := newFixture(t)
	queueOf := func(p parked) int64 {
		t.Helper()
		m, ok, err := f.st.ReadMessage(p.phy)
		if err != nil || !ok {
			t.Fatalf("read %s: %v %v", p.uniq, ok, err)
		}
		return m.QueueOffset
	}
	a := f.park("A", "Orders", 0, 5, "")
	f.caughtUp()
	f.stopEnqueue.Store(true)
	b := f.park("B", "Orders", 0, 5, "")
	c := f.park("C", "Orders", 0, 60, "")
	f.caughtUp()
	if q, ok := f.svc.HeldFrom(); !ok || q != queueOf(b) {
		t.Fatalf("HeldFrom %d %v, want B's queue offset %d", q, ok, queueOf(b))
	}
	f.at(10)
	if n := f.roundOK(); n != 1 {
		t.Fatalf("delivered %d, want A alone (B is held)", n)
	}
	f.wantDelivered("A")
	wm := f.svc.Watermark()
	if wm.Covers(kvindex.TimerEntry{DeliverMs: b.outMs, PhyOffset: b.phy}) {
		t.Fatalf("the watermark %+v covers B, held: a slave would forget it", wm)
	}
	if !wm.Covers(kvindex.TimerEntry{DeliverMs: a.outMs, PhyOffset: a.phy}) {
		t.Fatalf("the watermark %+v does not cover A, delivered", wm)
	}
	if got, err := f.svc.DeliveredBefore(time.UnixMilli(base + 10_000)); err != nil || got != base+10_000 {
		t.Fatalf("DeliveredBefore %d (%v), want the slot of now: B, held, is not taken in", got, err)
	}

	// A start under timerStopEnqueue holds B and C still.
	restarted := New(f.db.Timers(), f.store, Options{Dispatched: func() int64 { return f.disp.Dispatched() }, StopEnqueue: f.stopEnqueue.Load}, zerolog.Nop())
	restarted.now = f.svc.now
	restarted.settleHold()
	f.at(100)
	if n, err := restarted.DeliverDue(t.Context()); err != nil || n != 0 {
		t.Fatalf("after a start under timerStopEnqueue a round delivered %d (%v), want B and C held", n, err)
	}
	if q, ok := restarted.HeldFrom(); !ok || q != queueOf(b) {
		t.Fatalf("after a start HeldFrom %d %v, want B's queue offset %d", q, ok, queueOf(b))
	}
	if n := f.roundOK(); n != 0 {
		t.Fatalf("delivered %d while held", n)
	}

	// Off: the next round delivers both, overdue, once.
	f.stopEnqueue.Store(false)
	f.svc.settleHold()
	if _, ok := f.svc.HeldFrom(); ok {
		t.Fatal("HeldFrom still names a message after the hold was lifted")
	}
	if n := f.roundOK(); n != 2 {
		t.Fatalf("after the lift a round delivered %d, want B and C (due %d, %d)", n, b.outMs, c.outMs)
	}
	f.wantDelivered("A", "B", "C")
	if _, ok, err := f.db.Timers().Hold(); err != nil || ok {
		t.Fatalf("the record of the lifted hold is kept (%v)", err)
	}
	// Held again later: only what is parked from then on.
	f.stopEnqueue.Store(true)
	d := f.park("D", "Orders", 0, 110, "")
	f.caughtUp()
	f.at(120)
	if n := f.roundOK(); n != 0 {
		t.Fatalf("delivered %d under the second hold", n)
	}
	if h, ok, err := f.db.Timers().Hold(); err != nil || !ok || h.Phy != d.phy || h.QueueOffset != queueOf(d) {
		t.Fatalf("the second hold is recorded as %+v %v (%v), want D at %d", h, ok, err, d.phy)
	}
	f.stopEnqueue.Store(false)
	f.svc.settleHold()
	if n := f.roundOK(); n != 1 {
		t.Fatalf("after the second lift a round delivered %d, want D", n)
	}
	f.wantDelivered("A", "B", "C", "D")
}

// A round that read the hold before it was lifted passes over the entries
// held under it; they are released at once, and the next round goes back
// to them.
func TestHoldLiftedDuringARoundReleasesWhatItPassedOver(t *testing.T) {
	f := newFixture(t)
	f.stopEnqueue.Store(true)
	b := f.park("B", "Orders", 0, 5, "")
	f.caughtUp()
	f.at(10)
	_, snap := f.svc.lowerCursor()
	due, err := f.db.Timers().Due(base+10_000, 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("due %v (%v), want B", due, err)
	}
	f.stopEnqueue.Store(false)
	f.svc.settleHold() // lifted while the round runs
	if take := f.svc.passHeld(due, snap); len(take) != 0 {
		t.Fatalf("the round, under the hold it read, takes %v", take)
	}
	f.svc.cursorMs, f.svc.cursorPhy = b.outMs, b.phy+1 // the round passed over B
	if n := f.roundOK(); n != 1 {
		t.Fatalf("the next round delivered %d, want B", n)
	}
	f.wantDelivered("B")
}
