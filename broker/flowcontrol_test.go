package broker

import (
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// A send is answered SYSTEM_BUSY, and not stored, when the index stays more
// than maxDispatchLagBytes behind the CommitLog for waitTimeMillsInSendQueue;
// once dispatch moves again sends are accepted.
func TestSendFlowControlWhenDispatchBehind(t *testing.T) {
	stall := make(chan struct{})
	var once sync.Once
	tb := startTestBrokerWith(t, t.TempDir(), map[string]string{
		"maxDispatchLagBytes": "4096", "waitTimeMillsInSendQueue": "50",
	}, func(b *Broker) {
		b.dispatchHooks = map[string]kvindex.Hook{"Stall": kvindex.HookFunc(func(*pebble.Batch, *commitlog.Message) error {
			once.Do(func() { <-stall }) // the first record holds dispatch up
			return nil
		})}
	})
	defer func() { // release dispatch if the test fails before it does
		select {
		case <-stall:
		default:
			close(stall)
		}
	}()
	c := tb.client(nil)
	mustSend(t, c, "Stall", 0, "hold dispatch", "")

	body := strings.Repeat("x", 1024)
	accepted, busy := 0, false
	for range 20 {
		r := sendV2(t, c, "Flow", 0, body, "")
		if r.Code == remoting.SystemBusy {
			busy = true
			break
		}
		if r.Code != remoting.Success {
			t.Fatalf("send %d: code %d %s", accepted, r.Code, r.Remark)
		}
		accepted++
	}
	if !busy {
		t.Fatalf("20 sends of 1 KiB with dispatch stalled and a 4 KiB bound: none refused (lag %d)", tb.disp.Lag())
	}
	if accepted < 3 {
		t.Fatalf("refused after %d sends; the bound of 4 KiB allows about 4", accepted)
	}
	close(stall)
	mustSend(t, c, "Flow", 0, body, "")
	tb.caughtUp()
	if maxOff, err := tb.cqs.MaxOffset("Flow", 0); err != nil || maxOff != int64(accepted+1) {
		t.Fatalf("Flow/0 holds %d messages (%v), want the %d accepted", maxOff, err, accepted+1)
	}
}
