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

// stalledBroker is a test broker with a 4 KiB maxDispatchLagBytes whose
// dispatcher is held at its first record of topic "Stall" until release.
type stalledBroker struct {
	*testBroker
	c       *remoting.Client
	release func()
}

// startStalledBroker starts the broker (overrides and adjust as for
// startTestBrokerWith), sends the record that stalls dispatch, and
// releases dispatch when the test ends if it has not been released.
func startStalledBroker(t *testing.T, overrides map[string]string, adjust func(*Broker)) *stalledBroker {
	t.Helper()
	stall := make(chan struct{})
	var holdOnce, releaseOnce sync.Once
	o := map[string]string{"maxDispatchLagBytes": "4096"}
	for k, v := range overrides {
		o[k] = v
	}
	tb := startTestBrokerWith(t, t.TempDir(), o, func(b *Broker) {
		b.dispatchHooks = map[string]kvindex.Hook{"Stall": kvindex.HookFunc(func(*pebble.Batch, *commitlog.Message) error {
			holdOnce.Do(func() { <-stall }) // the first record holds dispatch up
			return nil
		})}
		if adjust != nil {
			adjust(b)
		}
	})
	sb := &stalledBroker{testBroker: tb, release: func() { releaseOnce.Do(func() { close(stall) }) }}
	t.Cleanup(sb.release) // registered after the broker's: runs before its shutdown
	sb.c = tb.client(nil)
	mustSend(t, sb.c, "Stall", 0, "hold dispatch", "")
	return sb
}

// fillPastBound appends n 1 KiB messages to Flow/0 through the internal
// path (no flow control), so that dispatch is behind the bound.
func (sb *stalledBroker) fillPastBound(t *testing.T, n int) {
	t.Helper()
	for range n {
		if _, err := sb.putMessages(context.Background(), []*commitlog.Message{{Topic: "Flow", Body: []byte(flowBody)}}, false); err != nil {
			t.Fatal(err)
		}
	}
	if !sb.disp.Behind() {
		t.Fatalf("dispatch not behind after %d KiB appended behind a stalled dispatcher (lag %d)", n, sb.disp.Lag())
	}
}

// sendAsync sends one 1 KiB message to Flow/0 and delivers its answer's
// code (-1 for an error) to answers.
func (sb *stalledBroker) sendAsync(t *testing.T, i int, answers chan<- int32) {
	t.Helper()
	req := remoting.NewRequest(remoting.SendMessageV2, map[string]string{
		"a": "pg", "b": "Flow", "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": strconv.FormatInt(time.Now().UnixMilli()+int64(i), 10), "h": "0", "i": "",
	}, []byte(flowBody))
	if err := sb.c.InvokeAsync(req, func(resp *remoting.Command, err error) {
		if err != nil {
			answers <- -1
			return
		}
		answers <- resp.Code
	}); err != nil {
		t.Fatal(err)
	}
}

// flowMessages returns how many messages Flow/0 holds once dispatch has
// caught up.
func (sb *stalledBroker) flowMessages(t *testing.T) int64 {
	t.Helper()
	sb.caughtUp()
	maxOff, err := sb.cqs.MaxOffset("Flow", 0)
	if err != nil {
		t.Fatal(err)
	}
	return maxOff
}

var flowBody = strings.Repeat("x", 1024)

// A send is answered SYSTEM_BUSY, and not stored, when the index stays more
// than maxDispatchLagBytes behind the CommitLog for waitTimeMillsInSendQueue;
// once dispatch moves again sends are accepted.
func TestSendFlowControlWhenDispatchBehind(t *testing.T) {
	sb := startStalledBroker(t, map[string]string{"waitTimeMillsInSendQueue": "50"}, nil)
	accepted, busy := 0, false
	for range 20 {
		r := sendV2(t, sb.c, "Flow", 0, flowBody, "")
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
		t.Fatalf("20 sends of 1 KiB with dispatch stalled and a 4 KiB bound: none refused (lag %d)", sb.disp.Lag())
	}
	if accepted < 3 {
		t.Fatalf("refused after %d sends; the bound of 4 KiB allows about 4", accepted)
	}
	sb.release()
	mustSend(t, sb.c, "Flow", 0, flowBody, "")
	if n := sb.flowMessages(t); n != int64(accepted+1) {
		t.Fatalf("Flow/0 holds %d messages, want the %d accepted", n, accepted+1)
	}
}

// Sends waiting for dispatch hold no worker: with more sends waiting than
// the remoting server has workers, other requests are still answered, and
// the waiting sends are stored once dispatch moves.
func TestWaitingSendsHoldNoWorker(t *testing.T) {
	sb := startStalledBroker(t, map[string]string{"waitTimeMillsInSendQueue": "60000"}, nil)
	sb.fillPastBound(t, 8)
	const waiting = 40 // more than the server's 16 workers
	answers := make(chan int32, waiting)
	for i := range waiting {
		sb.sendAsync(t, i, answers)
	}
	// A request of another kind is answered while all those sends wait,
	// and the runtime info counts them as RocketMQ's send queue.
	r := call(t, sb.c, remoting.GetMaxOffset, map[string]string{"topic": "Flow", "queueId": "0"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("GET_MAX_OFFSET while sends wait: code %d %s", r.Code, r.Remark)
	}
	waitFor(t, "every send to wait", func() bool { return len(sb.admitSlots) == waiting })
	if got := runtimeInfo(t, sb.c)["sendThreadPoolQueueSize"]; got != strconv.Itoa(waiting) {
		t.Fatalf("sendThreadPoolQueueSize %s while %d sends wait", got, waiting)
	}
	select {
	case code := <-answers:
		t.Fatalf("a waiting send was answered (code %d) before dispatch moved", code)
	default:
	}
	sb.release()
	for range waiting {
		if code := <-answers; code != remoting.Success {
			t.Fatalf("waiting send answered %d after dispatch moved, want SUCCESS", code)
		}
	}
	if n := sb.flowMessages(t); n != 8+waiting {
		t.Fatalf("Flow/0 holds %d messages, want %d", n, 8+waiting)
	}
}

// With every waiting slot taken, a further send is answered SYSTEM_BUSY at
// once and not stored; the waiting one is stored once dispatch moves.
func TestSendBusyWhenWaitingSlotsFull(t *testing.T) {
	sb := startStalledBroker(t, map[string]string{"waitTimeMillsInSendQueue": "60000"},
		func(b *Broker) { b.admitSlots = make(chan struct{}, 1) })
	sb.fillPastBound(t, 8)
	answers := make(chan int32, 1)
	sb.sendAsync(t, 0, answers)
	waitFor(t, "the first send to take the waiting slot", func() bool { return len(sb.admitSlots) == 1 })
	r := sendV2(t, sb.c, "Flow", 0, flowBody, "")
	if r.Code != remoting.SystemBusy || !strings.Contains(r.Remark, "already wait") {
		t.Fatalf("send with the waiting slots full: code %d %q, want SYSTEM_BUSY", r.Code, r.Remark)
	}
	sb.release()
	if code := <-answers; code != remoting.Success {
		t.Fatalf("waiting send answered %d after dispatch moved, want SUCCESS", code)
	}
	if n := sb.flowMessages(t); n != 8+1 {
		t.Fatalf("Flow/0 holds %d messages, want 9 (the refused send is not stored)", n)
	}
}

// TestSendRefusedBehindDispatchOnceShutdownBegan checks the flow-control
// answer once Shutdown has begun: a send that would have to wait for
// dispatch is answered SERVICE_NOT_AVAILABLE at once and is not stored,
// rather than starting a waiting goroutine Shutdown might not wait for.
// (The test sets the shutdown flag itself: reaching that window through
// Shutdown needs a send to arrive between its start and the server's
// stop.)
func TestSendRefusedBehindDispatchOnceShutdownBegan(t *testing.T) {
	sb := startStalledBroker(t, nil, nil)
	sb.fillPastBound(t, 8)
	sb.shutdown.Store(true)
	defer sb.shutdown.Store(false) // let the real Shutdown run in cleanup
	r := sendV2(t, sb.c, "Flow", 0, flowBody, "")
	if r.Code != remoting.ServiceNotAvailable || !strings.Contains(r.Remark, "shutting down") {
		t.Fatalf("send behind dispatch after shutdown began: code %d %q, want SERVICE_NOT_AVAILABLE", r.Code, r.Remark)
	}
	if len(sb.admitSlots) != 0 {
		t.Fatal("the refused send took a waiting slot")
	}
	sb.release()
	if n := sb.flowMessages(t); n != 8 {
		t.Fatalf("Flow/0 holds %d messages, want 8 (the refused send is not stored)", n)
	}
}
