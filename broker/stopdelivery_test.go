package broker

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/meta"
)

// stopWithFlushPending starts a SYNC_FLUSH broker at store whose flushes
// can be held up, sends one message with props to topic/0, holds the
// flush up once the next record (its delivery) is appended, and stops the
// broker cleanly while the delivered copy is not yet flushed: the stop
// comes between a delivery's append and its flush, as it does when it
// lands in a scheduler or timer round. The flush is released 300 ms into
// the stop, which closes the log after the round returns. attach, when
// not nil, runs once the broker is up (to start its slave).
func stopWithFlushPending(t *testing.T, store string, o map[string]string, topic, props string, attach func(*testBroker)) {
	t.Helper()
	var stalled atomic.Bool
	b := startTestBrokerWith(t, store, o, func(b *Broker) {
		b.beforeFlush = func() {
			for stalled.Load() {
				time.Sleep(5 * time.Millisecond)
			}
		}
	})
	t.Cleanup(func() { stalled.Store(false) }) // runs before the broker's own cleanup
	if attach != nil {
		attach(b)
	}
	c := b.client(nil)
	mustSend(t, c, topic, 0, "once", props) // flushed when the send answers
	parked := b.clog.MaxOffset()
	stalled.Store(true)
	waitFor(t, "the delivered copy appended", func() bool { return b.clog.MaxOffset() > parked })
	time.AfterFunc(300*time.Millisecond, func() { stalled.Store(false) })
	b.stop()
}

// A clean stop that comes while a delay level's delivered copies wait
// for their flush (SYNC_FLUSH) still records the level's progress past
// them: the next start does not deliver them again. RocketMQ's scheduler
// records its progress with each delivery and persists it at shutdown.
func TestACleanStopDoesNotDeliverADelayedMessageTwice(t *testing.T) {
	store := t.TempDir()
	o := map[string]string{"flushDiskType": "SYNC_FLUSH"}
	stopWithFlushPending(t, store, o, "DelayStop", "DELAY\x011\x02", nil) // 1 s
	b := startTestBrokerAt(t, store, o)
	c := b.client(nil)
	waitFor(t, "level 1 progress past the delivery", func() bool {
		off, _, err := b.offsets.Get(scheduleOffsetGroup, meta.ScheduleTopic, 0)
		return err == nil && off == 1
	})
	if got := pullAll(t, b, c, "DelayStop", 0); len(got) != 1 {
		t.Fatalf("delivered %d times across a clean stop and start, want once", len(got))
	}
}

// The same for a timer message: its entry is deleted once its delivered
// copy is flushed, though the stop began meanwhile, and the next start
// does not deliver it again.
func TestACleanStopDoesNotDeliverATimerMessageTwice(t *testing.T) {
	store := t.TempDir()
	o := map[string]string{"flushDiskType": "SYNC_FLUSH", "timerPrecisionMs": "100"}
	stopWithFlushPending(t, store, o, "TimerStop", "TIMER_DELAY_MS\x01500\x02", nil)
	b := startTestBrokerAt(t, store, o)
	c := b.client(nil)
	waitFor(t, "no timer entry left", func() bool {
		due, err := b.db.Timers().Due(math.MaxInt64, 10)
		return err == nil && len(due) == 0
	})
	time.Sleep(300 * time.Millisecond) // three timer rounds
	if got := pullAll(t, b, c, "TimerStop", 0); len(got) != 1 {
		t.Fatalf("delivered %d times across a clean stop and start, want once", len(got))
	}
}

// The same on a SYNC_MASTER with a slave: the progress passes the
// delivered copy once it is flushed (it does not wait for the slave, which
// copies it only as far as it holds the deliveries), and the next start
// does not deliver it again.
func TestACleanStopOfASyncMasterDoesNotDeliverADelayedMessageTwice(t *testing.T) {
	store := t.TempDir()
	o := withHA(map[string]string{"flushDiskType": "SYNC_FLUSH", "brokerRole": "SYNC_MASTER", "inSyncReplicas": "2", "slaveTimeout": "3000"})
	stopWithFlushPending(t, store, o, "DelayStopHA", "DELAY\x011\x02", func(master *testBroker) {
		slave := startSlaveOf(t, master, nil)
		waitReplicated(t, master, slave)
	})
	b := startTestBrokerAt(t, store, nil) // an ASYNC_MASTER now: no slave to wait for
	c := b.client(nil)
	waitFor(t, "level 1 progress past the delivery", func() bool {
		off, _, err := b.offsets.Get(scheduleOffsetGroup, meta.ScheduleTopic, 0)
		return err == nil && off == 1
	})
	if got := pullAll(t, b, c, "DelayStopHA", 0); len(got) != 1 {
		t.Fatalf("delivered %d times across a clean stop and start, want once", len(got))
	}
}
