package broker

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// timerStopDequeue holds due timer messages back; turned off while the
// broker runs, they are delivered.
func TestTimerStopDequeue(t *testing.T) {
	b := startTestBroker(t, map[string]string{"timerPrecisionMs": "100", "timerStopDequeue": "true"})
	c := b.client(nil)
	mustSend(t, c, "TS", 0, "due soon", "UNIQ_KEY\x01TS-1\x02TIMER_DELAY_MS\x01100\x02")
	// Several delivery rounds past the message's time.
	time.Sleep(800 * time.Millisecond)
	if got := pullAll(t, b, c, "TS", 0); len(got) != 0 {
		t.Fatalf("%d messages delivered while timerStopDequeue is on", len(got))
	}
	if r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte("timerStopDequeue=false")); r.Code != remoting.Success {
		t.Fatalf("UPDATE_BROKER_CONFIG: %d %s", r.Code, r.Remark)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := pullAll(t, b, c, "TS", 0)
		if len(got) == 1 && string(got[0].Body) == "due soon" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages delivered after timerStopDequeue was turned off", len(got))
		}
	}
}

// timerStopEnqueue, turned on while the broker runs, holds back the timer
// messages sent from then on, across a restart, while one sent before is
// delivered when due; the timer's enqueue lag and the checkpoint a
// RocketMQ slave copies count them as not taken in. Turned off, they are
// delivered at once, their time having passed.
func TestTimerStopEnqueue(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, map[string]string{"timerPrecisionMs": "100"})
	c := b.client(nil)
	mustSend(t, c, "TE", 0, "before", "UNIQ_KEY\x01TE-1\x02TIMER_DELAY_MS\x01600\x02")
	// Taken in before the hold begins: a parked record the dispatcher
	// reaches after the switch is held, however early it was sent (as
	// RocketMQ holds what its enqueue thread has not read yet).
	b.caughtUp()
	updateConfig(t, c, "timerStopEnqueue=true")
	mustSend(t, c, "TE", 1, "held", "UNIQ_KEY\x01TE-2\x02TIMER_DELAY_MS\x01200\x02")
	waitDelivered(t, b, c, "TE", 0, 1)
	time.Sleep(500 * time.Millisecond) // rounds past the held message's time
	if got := pullAll(t, b, c, "TE", 1); len(got) != 0 {
		t.Fatalf("%d messages delivered that were sent under timerStopEnqueue", len(got))
	}
	if v := runtimeInfo(t, c)["timerOffsetBehind"]; v != "1" {
		t.Errorf("timerOffsetBehind = %q, want 1: the held message is not taken in", v)
	}
	r := call(t, c, remoting.GetTimerCheckPoint, nil, nil)
	if r.Code != remoting.Success || len(r.Body) != 56 {
		t.Fatalf("GET_TIMER_CHECK_POINT: %d %s", r.Code, r.Remark)
	}
	if q := int64(binary.BigEndian.Uint64(r.Body[16:])); q != 1 {
		t.Errorf("the checkpoint's lastTimerQueueOffset is %d, want 1: the timer took the first parked message in, not the held one", q)
	}
	b.stop()

	b = startTestBrokerAt(t, store, map[string]string{"timerPrecisionMs": "100", "timerStopEnqueue": "true"})
	c = b.client(nil)
	time.Sleep(500 * time.Millisecond)
	if got := pullAll(t, b, c, "TE", 1); len(got) != 0 {
		t.Fatalf("%d messages delivered after a start under timerStopEnqueue", len(got))
	}
	updateConfig(t, c, "timerStopEnqueue=false")
	got := waitDelivered(t, b, c, "TE", 1, 1)
	if len(got) != 1 || string(got[0].Body) != "held" {
		t.Fatalf("after timerStopEnqueue was turned off TE/1 holds %d messages", len(got))
	}
	waitFor(t, "the enqueue lag back at 0", func() bool { return runtimeInfo(t, c)["timerOffsetBehind"] == "0" })
	if got := pullAll(t, b, c, "TE", 0); len(got) != 1 {
		t.Fatalf("TE/0 holds %d messages, want the one sent before the hold, once", len(got))
	}
}
