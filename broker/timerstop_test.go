package broker

import (
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
