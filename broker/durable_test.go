package broker

import (
	"context"
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

// invokeAll sends reqs without waiting and returns a channel that gets
// each answer (a connection error as code -1).
func invokeAll(t *testing.T, c *remoting.Client, reqs []*remoting.Command) <-chan *remoting.Command {
	t.Helper()
	answers := make(chan *remoting.Command, len(reqs))
	for i, req := range reqs {
		err := c.InvokeAsync(req, func(resp *remoting.Command, err error) {
			if err != nil { // reported by the reader of answers
				resp = &remoting.Command{Code: -1, Remark: err.Error()}
			}
			answers <- resp
		})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	return answers
}

// answeredAfterFlush checks n requests stored behind a stalled flush: a
// request that needs a worker is answered while they wait, none of them is
// answered before the flush (open lets it run), and each is SUCCESS after.
func answeredAfterFlush(t *testing.T, c *remoting.Client, answers <-chan *remoting.Command, n int, open func(), what string) {
	t.Helper()
	if r := call(t, c, remoting.GetBrokerRuntimeInfo, nil, nil); r.Code != remoting.Success {
		t.Fatalf("runtime info while %ss wait: %d %s", what, r.Code, r.Remark)
	}
	select {
	case r := <-answers:
		t.Fatalf("a %s was answered (code %d) before its flush", what, r.Code)
	default:
	}
	open()
	for range n {
		if r := <-answers; r.Code != remoting.Success {
			t.Fatalf("%s answered %d %q after the flush, want SUCCESS", what, r.Code, r.Remark)
		}
	}
}

// sendAsync sends n SEND_MESSAGE_V2 requests to topic/0 without waiting and
// returns a channel that gets each answer.
func sendAsync(t *testing.T, c *remoting.Client, topic string, n int, props string) <-chan *remoting.Command {
	t.Helper()
	reqs := make([]*remoting.Command, n)
	for i := range reqs {
		reqs[i] = remoting.NewRequest(remoting.SendMessageV2, map[string]string{
			"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0",
			"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": props,
		}, fmt.Appendf(nil, "m%03d", i%1000))
	}
	return invokeAll(t, c, reqs)
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
	// below differ only in their (fixed-width) bodies and unique keys, and
	// in the WAIT property this one stores.
	const noWait = "WAIT\x01false\x02"
	before := b.clog.MaxOffset()
	if r := sendV2(t, c, "DurableTopic", 0, "m000", noWait); r.Code != remoting.Success {
		t.Fatalf("WAIT=false send: %d %s", r.Code, r.Remark)
	}
	start := b.clog.MaxOffset()
	size := start - before - int64(len(noWait))
	answers := sendAsync(t, c, "DurableTopic", n, "")
	waitFor(t, "all sends stored behind the stalled flush", func() bool {
		return b.clog.MaxOffset() >= start+int64(n)*size
	})
	answeredAfterFlush(t, c, answers, n, open, "send")
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

// END_TRANSACTION commits under SYNC_FLUSH wait for their flush off the
// workers too: more commits than workers are stored behind one stalled
// flush while another request is answered, and each is answered SUCCESS
// once the flush comes.
func TestSyncFlushEndTransactionsWaitOffTheWorkers(t *testing.T) {
	b, open := stalledFlushBroker(t, nil)
	c := b.client(nil)
	n := 2 * max(16, 4*runtime.GOMAXPROCS(0))
	halves := make([]sentHalf, n)
	for i := range halves {
		uniq := fmt.Sprintf("UNIQ-DURABLE-%03d", i)
		halves[i] = sendHalf(t, c, "TxDurable", 0, uniq, "body", "WAIT\x01false\x02", time.Now().UnixMilli())
	}
	before := b.clog.MaxOffset()
	reqs := make([]*remoting.Command, len(halves))
	for i, h := range halves {
		reqs[i] = remoting.NewRequest(remoting.EndTransaction, map[string]string{
			"producerGroup": "pg", "tranStateTableOffset": strconv.FormatInt(h.queueOffset, 10),
			"commitLogOffset": strconv.FormatInt(h.phy, 10), "commitOrRollback": "8",
			"fromTransactionCheck": "false", "msgId": h.uniq, "transactionId": h.uniq,
		}, nil)
	}
	answers := invokeAll(t, c, reqs)
	waitFor(t, "every commit stored behind the stalled flush", func() bool {
		return recordsFrom(t, b, before) >= n
	})
	answeredAfterFlush(t, c, answers, n, open, "commit")
	if got := pullAll(t, b, c, "TxDurable", 0); len(got) != n {
		t.Fatalf("%d committed messages readable, want %d", len(got), n)
	}
}

// recordsFrom counts the CommitLog records from phy to the log's end.
func recordsFrom(t *testing.T, b *testBroker, phy int64) int {
	t.Helper()
	n := 0
	for end := b.clog.MaxOffset(); phy < end; n++ {
		_, m, ok, err := b.readRecord(phy)
		if err != nil || !ok {
			t.Fatalf("read the record at %d: %v (found %v)", phy, err, ok)
		}
		phy += int64(m.StoreSize)
	}
	return n
}

// Under SYNC_FLUSH consumers see a message only once it is flushed
// (readUnCommitted=false, RocketMQ's default): a send that did not wait
// for its flush is not pulled while the flush is stalled, and a pull held
// for it is answered when the flush comes. With readUnCommitted=true it
// is pulled at once.
func TestSyncFlushShowsConsumersFlushedMessagesOnly(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		b, open := stalledFlushBroker(t, nil)
		c := b.client(nil)
		createTopic(t, c, "Unflushed", 1, 1)
		if r := sendV2(t, c, "Unflushed", 0, "early", "WAIT\x01false\x02"); r.Code != remoting.Success {
			t.Fatalf("WAIT=false send: %d %s", r.Code, r.Remark)
		}
		time.Sleep(200 * time.Millisecond) // time for the dispatcher to index it, if it would
		if r := call(t, c, remoting.PullMessage, pullReq("g", "Unflushed", 0, 0, 0, 0, "*"), nil); r.Code == remoting.Success {
			t.Fatalf("pulled %d bytes of a message whose flush is stalled", len(r.Body))
		}
		held := b.holdPull(c, pullReq("g", "Unflushed", 0, 0, pullSuspend, 15*time.Second, "*"))
		open()
		a := <-held
		if a.resp == nil || a.resp.Code != remoting.Success {
			t.Fatalf("held pull after the flush: %+v", a.resp)
		}
		if msgs := decodeRecords(t, a.resp.Body); len(msgs) != 1 || string(msgs[0].Body) != "early" {
			t.Fatalf("held pull after the flush got %+v", msgs)
		}
	})
	t.Run("readUnCommitted", func(t *testing.T) {
		b, _ := stalledFlushBroker(t, map[string]string{"readUnCommitted": "true"})
		c := b.client(nil)
		createTopic(t, c, "Unflushed", 1, 1)
		if r := sendV2(t, c, "Unflushed", 0, "early", "WAIT\x01false\x02"); r.Code != remoting.Success {
			t.Fatalf("WAIT=false send: %d %s", r.Code, r.Remark)
		}
		waitFor(t, "the unflushed message pulled", func() bool {
			r := call(t, c, remoting.PullMessage, pullReq("g", "Unflushed", 0, 0, 0, 0, "*"), nil)
			return r.Code == remoting.Success && len(decodeRecords(t, r.Body)) == 1
		})
	})
}

// A commit whose message is stored but not flushed within
// syncFlushTimeout is answered SUCCESS, as RocketMQ's
// EndTransactionProcessor answers a FLUSH_DISK_TIMEOUT of the committed
// message: the message is stored, and the transaction ends once it is
// durable.
func TestSyncFlushCommitPastTheFlushTimeoutSucceeds(t *testing.T) {
	b, open := stalledFlushBroker(t, map[string]string{"syncFlushTimeout": "200"})
	c := b.client(nil)
	h := sendHalf(t, c, "TxSlowFlush", 0, "UNIQ-SLOW-FLUSH", "body", "WAIT\x01false\x02", time.Now().UnixMilli())
	if r := endTxn(t, c, h, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("commit with its flush stalled past syncFlushTimeout answered %d %q, want SUCCESS", r.Code, r.Remark)
	}
	open()
	waitFor(t, "the committed message", func() bool { return len(pullAll(t, b, c, "TxSlowFlush", 0)) == 1 })
}

// flushAfterStop's context outlives its parent by the grace and no more,
// and release ends it at once.
func TestFlushAfterStop(t *testing.T) {
	parent, stop := context.WithCancel(context.Background())
	wctx, release := flushAfterStop(parent, 200*time.Millisecond)
	defer release()
	stop()
	stopped := time.Now()
	select {
	case <-wctx.Done():
		t.Fatal("the wait ended with the stop, before its grace")
	case <-time.After(50 * time.Millisecond):
	}
	select {
	case <-wctx.Done():
		if waited := time.Since(stopped); waited < 200*time.Millisecond {
			t.Fatalf("the wait ended %s after the stop, before the 200ms grace", waited)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end after its grace")
	}

	// Released while the parent runs, or inside the grace: ended at once.
	for _, cancelParent := range []bool{false, true} {
		parent, stop := context.WithCancel(context.Background())
		wctx, release := flushAfterStop(parent, time.Hour)
		if cancelParent {
			stop()
		}
		release()
		select {
		case <-wctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("release (parent cancelled: %v) did not end the wait", cancelParent)
		}
		stop()
	}
}
