package broker

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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

// Sends waiting for dispatch hold no worker: with more sends waiting than
// the remoting server has workers, other requests are still answered, and
// the waiting sends are stored once dispatch moves.
func TestWaitingSendsHoldNoWorker(t *testing.T) {
	stall := make(chan struct{})
	var once sync.Once
	tb := startTestBrokerWith(t, t.TempDir(), map[string]string{
		"maxDispatchLagBytes": "4096", "waitTimeMillsInSendQueue": "60000",
	}, func(b *Broker) {
		b.dispatchHooks = map[string]kvindex.Hook{"Stall": kvindex.HookFunc(func(*pebble.Batch, *commitlog.Message) error {
			once.Do(func() { <-stall })
			return nil
		})}
	})
	defer func() {
		select {
		case <-stall:
		default:
			close(stall)
		}
	}()
	c := tb.client(nil)
	mustSend(t, c, "Stall", 0, "hold dispatch", "")
	body := strings.Repeat("x", 1024)
	for range 8 { // past the 4 KiB bound, through the internal path
		if _, err := tb.putMessages(context.Background(), []*commitlog.Message{{Topic: "Flow", Body: []byte(body)}}, false); err != nil {
			t.Fatal(err)
		}
	}
	if !tb.disp.Behind() {
		t.Fatalf("dispatch not behind after 8 KiB appended behind a stalled dispatcher (lag %d)", tb.disp.Lag())
	}

	const waiting = 40 // more than the server's 16 workers
	answers := make(chan int32, waiting)
	for i := range waiting {
		req := remoting.NewRequest(remoting.SendMessageV2, map[string]string{
			"a": "pg", "b": "Flow", "c": "TBW102", "d": "4", "e": "0", "f": "0",
			"g": strconv.FormatInt(time.Now().UnixMilli()+int64(i), 10), "h": "0", "i": "",
		}, []byte(body))
		if err := c.InvokeAsync(req, func(resp *remoting.Command, err error) {
			if err != nil {
				answers <- -1
				return
			}
			answers <- resp.Code
		}); err != nil {
			t.Fatal(err)
		}
	}
	// A request of another kind is answered while all those sends wait.
	r := call(t, c, remoting.GetMaxOffset, map[string]string{"topic": "Flow", "queueId": "0"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("GET_MAX_OFFSET while sends wait: code %d %s", r.Code, r.Remark)
	}
	select {
	case code := <-answers:
		t.Fatalf("a waiting send was answered (code %d) before dispatch moved", code)
	default:
	}
	close(stall)
	for range waiting {
		if code := <-answers; code != remoting.Success {
			t.Fatalf("waiting send answered %d after dispatch moved, want SUCCESS", code)
		}
	}
	tb.caughtUp()
	if maxOff, err := tb.cqs.MaxOffset("Flow", 0); err != nil || maxOff != 8+waiting {
		t.Fatalf("Flow/0 holds %d messages (%v), want %d", maxOff, err, 8+waiting)
	}
}
