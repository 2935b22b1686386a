package broker

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// stalledFlushBroker starts a SYNC_FLUSH broker whose CommitLog flushes
// wait while the returned gate is closed (open it with the function).
func stalledFlushBroker(t *testing.T, overrides map[string]string) (*testBroker, func()) {
	t.Helper()
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	o := map[string]string{"flushDiskType": "SYNC_FLUSH", "syncFlushTimeout": "20000"}
	for k, v := range overrides {
		o[k] = v
	}
	b := startTestBrokerWith(t, t.TempDir(), o, func(b *Broker) {
		b.beforeFlush = func() { <-gate }
	})
	t.Cleanup(open) // before the broker's own cleanup closes the log
	return b, open
}

// sendAsync sends n SEND_MESSAGE_V2 requests to topic/0 without waiting and
// returns a channel that gets each answer.
func sendAsync(t *testing.T, c *remoting.Client, topic string, n int, props string) <-chan *remoting.Command {
	t.Helper()
	answers := make(chan *remoting.Command, n)
	for i := range n {
		req := remoting.NewRequest(remoting.SendMessageV2, map[string]string{
			"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0",
			"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": props,
		}, fmt.Appendf(nil, "m%03d", i%1000))
		err := c.InvokeAsync(req, func(resp *remoting.Command, err error) {
			if err != nil { // reported by the reader of answers
				resp = &remoting.Command{Code: -1, Remark: err.Error()}
			}
			answers <- resp
		})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	return answers
}

// Under SYNC_FLUSH a send waits for its group commit without holding a
// worker: more sends than the server has workers are stored while one
// flush is stalled and share the flush that follows (before, each held a
// worker until its flush, so the sixteen workers of a two-core machine
// capped a group commit at sixteen sends and left pulls and heartbeats
// no worker), and none is answered before its flush.
func TestSyncFlushSendsWaitOffTheWorkers(t *testing.T) {
	b, open := stalledFlushBroker(t, nil)
	c := b.client(nil)
	createTopic(t, c, "DurableTopic", 1, 1)
	// More sends than the server has workers (remoting's default,
	// max(16, 4*GOMAXPROCS), which the broker keeps).
	n := 2 * max(16, 4*runtime.GOMAXPROCS(0))
	// One send that does not wait gives the size of a record: the sends
	// below differ only in their (fixed-width) bodies and unique keys.
	before := b.clog.MaxOffset()
	if r := sendV2(t, c, "DurableTopic", 0, "m000", "WAIT\x01false\x02"); r.Code != remoting.Success {
		t.Fatalf("WAIT=false send: %d %s", r.Code, r.Remark)
	}
	start := b.clog.MaxOffset()
	size := start - before
	answers := sendAsync(t, c, "DurableTopic", n, "")
	waitFor(t, "all sends stored behind the stalled flush", func() bool {
		return b.clog.MaxOffset() >= start+int64(n)*size
	})
	// A request that needs a worker is answered while the sends wait.
	if r := call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil); r.Code != remoting.Success {
		t.Fatalf("runtime info while sends wait: %d %s", r.Code, r.Remark)
	}
	select {
	case r := <-answers:
		t.Fatalf("a send was answered (code %d) before its flush", r.Code)
	default:
	}
	open()
	for range n {
		if r := <-answers; r.Code != remoting.Success {
			t.Fatalf("send answered %d %q after the flush, want SUCCESS", r.Code, r.Remark)
		}
	}
}

// A send whose flush does not finish within syncFlushTimeout is answered
// FLUSH_DISK_TIMEOUT (its message stays stored), and a send with WAIT=false
// is answered at once while the flush is stalled.
func TestSyncFlushSendTimesOutOrDoesNotWait(t *testing.T) {
	b, _ := stalledFlushBroker(t, map[string]string{"syncFlushTimeout": "200"})
	c := b.client(nil)
	createTopic(t, c, "DurableTopic", 1, 1)
	if r := sendV2(t, c, "DurableTopic", 0, "nowait", "WAIT\x01false\x02"); r.Code != remoting.Success {
		t.Fatalf("WAIT=false send answered %d %q while the flush stalls, want SUCCESS at once", r.Code, r.Remark)
	}
	r := sendV2(t, c, "DurableTopic", 0, "waits", "")
	if r.Code != remoting.FlushDiskTimeout {
		t.Fatalf("send answered %d %q with its flush stalled past syncFlushTimeout, want FLUSH_DISK_TIMEOUT", r.Code, r.Remark)
	}
	if r.ExtFields["msgId"] == "" || r.ExtFields["queueOffset"] != "1" {
		t.Fatalf("FLUSH_DISK_TIMEOUT answer without the stored message's id and offset: %v", r.ExtFields)
	}
}
