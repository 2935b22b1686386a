package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

func popClient(tb *testBroker) (*popclient.Client, *remoting.Client) {
	rc := tb.client(nil)
	return popclient.New(rc, tb.cfg.BrokerName), rc
}

func ctx20(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustPop(t *testing.T, c *popclient.Client, r popclient.PopRequest) popclient.PopResult {
	t.Helper()
	res, err := c.Pop(ctx20(t), r)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// inFlight reports whether the broker holds an in-flight record of the
// message at offset, failing the test when the record cannot be read (a
// read error would pass for "acknowledged").
func inFlight(t *testing.T, b *testBroker, group, topic string, q int32, offset int64) bool {
	t.Helper()
	_, ok, err := b.popSvc.InFlight(group, topic, q, offset)
	if err != nil {
		t.Fatalf("in-flight record of %s %s/%d@%d: %v", group, topic, q, offset, err)
	}
	return ok
}

// storedOffset reads a committed offset from the broker's table, failing
// the test when there is none or it cannot be read.
func storedOffset(t *testing.T, b *testBroker, group, topic string, q int32) int64 {
	t.Helper()
	off, ok, err := b.offsets.Get(group, topic, q)
	if err != nil || !ok {
		t.Fatalf("committed offset of %s on %s/%d: %v %v", group, topic, q, ok, err)
	}
	return off
}

func bodies(ms []popclient.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Body))
	}
	return out
}

// sendBodies sends n messages m0, m1, ... to queue 0 of topic.
func sendBodies(t *testing.T, c *remoting.Client, topic string, n int) {
	t.Helper()
	for i := range n {
		mustSend(t, c, topic, 0, fmt.Sprintf("m%d", i), "")
	}
}

func TestPopAckAndCommittedOffset(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "PT", 5)
	b.caughtUp()
	res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "PT", QueueID: 0, MaxMsgNums: 3, InvisibleTime: time.Minute})
	if res.Code != remoting.Success || len(res.Messages) != 3 || res.RestNum != 2 || res.ReviveQID != 0 {
		t.Fatalf("pop: code %d %s, %d messages, rest %d", res.Code, res.Remark, len(res.Messages), res.RestNum)
	}
	if got := res.Header["startOffsetInfo"]; got != "0 0 0" {
		t.Fatalf("startOffsetInfo %q", got)
	}
	if got := res.Header["msgOffsetInfo"]; got != "0 0 0,1,2" {
		t.Fatalf("msgOffsetInfo %q", got)
	}
	if _, ok := res.Header["orderCountInfo"]; ok {
		t.Fatal("orderCountInfo on a non-orderly pop")
	}
	h := res.Messages[1].Handle
	want := fmt.Sprintf("0 %d 60000 0 0 %s 0 1", res.PopTime, b.cfg.BrokerName)
	if h.String() != want {
		t.Fatalf("handle %q, want %q", h.String(), want)
	}
	// The next pop continues after the in-flight messages.
	res2 := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "PT", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if got := bodies(res2.Messages); len(got) != 2 || got[0] != "m3" {
		t.Fatalf("second pop %v", got)
	}
	offset := func() int64 {
		off, ok, err := b.offsets.Get("g", "PT", 0)
		if err != nil || !ok {
			t.Fatalf("committed offset: %v %v", ok, err)
		}
		return off
	}
	if got := offset(); got != 0 {
		t.Fatalf("committed before acks %d", got)
	}
	// Acking offset 1 leaves 0 in flight: no advance.
	if code, err := c.Ack(ctx20(t), "g", res.Messages[1]); err != nil || code != remoting.Success {
		t.Fatalf("ack: %d %v", code, err)
	}
	if got := offset(); got != 0 {
		t.Fatalf("committed after acking 1: %d", got)
	}
	if code, _ := c.Ack(ctx20(t), "g", res.Messages[0]); code != remoting.Success {
		t.Fatal(code)
	}
	if got := offset(); got != 2 {
		t.Fatalf("committed after acking 0,1: %d", got)
	}
	// A second ack of the same handle is RocketMQ's SUCCESS, and a no-op.
	if code, _ := c.Ack(ctx20(t), "g", res.Messages[0]); code != remoting.Success {
		t.Fatalf("repeated ack %d", code)
	}
	// Batch ack of the rest (offsets 2, 3, 4 from two pops: two entries).
	if code, err := c.BatchAck(ctx20(t), "g", "PT", append(res.Messages[2:], res2.Messages...)); err != nil || code != remoting.Success {
		t.Fatalf("batch ack %d %v", code, err)
	}
	if got := offset(); got != 5 {
		t.Fatalf("committed after batch ack %d", got)
	}
	n := 0
	if err := b.db.Pop().EachInFlight(func(r kvindex.InFlight) bool { n++; return true }); err != nil {
		t.Fatalf("read the records in flight: %v", err)
	}
	if n != 0 {
		t.Fatalf("%d records left in flight", n)
	}
}

func TestPopErrorCodes(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	mustSend(t, rc, "EC", 0, "x", "")
	b.caughtUp()
	pop1 := func(ext map[string]string) *remoting.Command {
		base := map[string]string{"consumerGroup": "g", "topic": "EC", "queueId": "0", "maxMsgNums": "1",
			"invisibleTime": "60000", "pollTime": "0", "bornTime": strconv.FormatInt(time.Now().UnixMilli(), 10), "initMode": "0"}
		for k, v := range ext {
			if v == "" {
				delete(base, k)
			} else {
				base[k] = v
			}
		}
		return call(t, rc, remoting.PopMessage, base, nil)
	}
	cases := []struct {
		name string
		ext  map[string]string
		code int32
	}{
		{"unknown topic", map[string]string{"topic": "Nope"}, remoting.TopicNotExist},
		{"too many", map[string]string{"maxMsgNums": "33"}, remoting.InvalidParameter},
		{"bad queue", map[string]string{"queueId": "99"}, remoting.InvalidParameter},
		{"missing field", map[string]string{"invisibleTime": ""}, remoting.SystemError},
		{"born long ago", map[string]string{"bornTime": "1000"}, remoting.PollingTimeout},
		{"bad filter type", map[string]string{"exp": "a", "expType": "CLASS"}, remoting.SubscriptionParseFailed},
		{"bad SQL92", map[string]string{"exp": "a >", "expType": "SQL92"}, remoting.SubscriptionParseFailed},
		// RocketMQ's FilterFactory knows "SQL92" only, spelled so.
		{"lower-case sql92", map[string]string{"exp": "a > 1", "expType": "sql92"}, remoting.SubscriptionParseFailed},
	}
	for _, tc := range cases {
		if r := pop1(tc.ext); r.Code != tc.code {
			t.Errorf("%s: code %d (%s), want %d", tc.name, r.Code, r.Remark, tc.code)
		}
	}
	res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "EC", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
	if len(res.Messages) != 1 {
		t.Fatal("pop")
	}
	// Nothing left and no polling: 210.
	if r := pop1(nil); r.Code != remoting.PollingTimeout {
		t.Fatalf("empty pop without polling: %d", r.Code)
	}
	m := res.Messages[0]
	ack := func(ext map[string]string) int32 {
		base := map[string]string{"consumerGroup": "g", "topic": "EC", "queueId": "0", "extraInfo": m.Handle.String(), "offset": "0"}
		for k, v := range ext {
			base[k] = v
		}
		return call(t, rc, remoting.AckMessage, base, nil).Code
	}
	ackCases := []struct {
		name string
		ext  map[string]string
		code int32
	}{
		{"unknown topic", map[string]string{"topic": "Nope"}, remoting.TopicNotExist},
		{"bad queue", map[string]string{"queueId": "77"}, remoting.MessageIllegal},
		{"offset past max", map[string]string{"offset": "5"}, remoting.NoMessage},
		{"bad handle", map[string]string{"extraInfo": "garbage"}, remoting.SystemError},
		{"unknown handle", map[string]string{"extraInfo": "0 1 2 0 0 b 0 0"}, remoting.Success},
	}
	for _, tc := range ackCases {
		if code := ack(tc.ext); code != tc.code {
			t.Errorf("ack %s: code %d, want %d", tc.name, code, tc.code)
		}
	}
	if !inFlight(t, b, "g", "EC", 0, 0) {
		t.Fatal("an unknown handle deleted the record")
	}
	cit := func(off string) int32 {
		return call(t, rc, remoting.ChangeMessageInvisibleTime, map[string]string{"consumerGroup": "g", "topic": "EC", "queueId": "0",
			"extraInfo": m.Handle.String(), "offset": off, "invisibleTime": "1000"}, nil).Code
	}
	if code := cit("1"); code != remoting.NoMessage {
		t.Fatalf("change invisible time at max: %d", code)
	}
	if r := call(t, rc, remoting.BatchAckMessage, nil, []byte(`{"acks":[]}`)); r.Code != remoting.NoMessage {
		t.Fatalf("empty batch ack %d", r.Code)
	}
	if r := call(t, rc, remoting.BatchAckMessage, nil, nil); r.Code != remoting.NoMessage {
		t.Fatalf("batch ack without body %d", r.Code)
	}
	if r := call(t, rc, remoting.BatchAckMessage, nil, []byte(`{"acks":[{`)); r.Code != remoting.SystemError {
		t.Fatalf("malformed batch ack %d", r.Code)
	}
	// Bit sets naming more offsets than any pops returned (each byte of
	// bits would make 64 bytes of offsets) are refused whole.
	var many pop.BatchAckBody
	for range pop.MaxBatchAckOffsets/kvindex.MaxCheckpointSpan + 1 {
		many.Acks = append(many.Acks, pop.BatchAck{ConsumerGroup: "g", Topic: "EC", Retry: "0", QueueID: 0,
			PopTime: m.Handle.PopTime, InvisibleTime: 60000, Bits: bytes.Repeat([]byte{0xff}, kvindex.MaxCheckpointSpan/8)})
	}
	if r := call(t, rc, remoting.BatchAckMessage, nil, many.AppendJSON(nil)); r.Code != remoting.SystemError || !strings.Contains(r.Remark, "at most") {
		t.Fatalf("batch ack of %d offsets: %d %s", len(many.Acks)*kvindex.MaxCheckpointSpan, r.Code, r.Remark)
	}
	if !inFlight(t, b, "g", "EC", 0, 0) {
		t.Fatal("the refused batch ack acknowledged the message")
	}
}

func TestChangeInvisibleTimeMakesOldHandleStale(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	mustSend(t, rc, "CIT", 0, "x", "")
	b.caughtUp()
	res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "CIT", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
	m := res.Messages[0]
	code, nh, err := c.ChangeInvisibleTime(ctx20(t), "g", m, 2*time.Minute)
	if err != nil || code != remoting.Success {
		t.Fatalf("change: %d %v", code, err)
	}
	if nh.InvisibleTime != 120000 || nh.CKOffset != 0 || nh.PopTime < res.PopTime {
		t.Fatalf("new handle %+v", nh)
	}
	r, ok, _ := b.popSvc.InFlight("g", "CIT", 0, 0)
	if !ok || r.VisibleAt != nh.PopTime+120000 {
		t.Fatalf("record after change %+v %v", r, ok)
	}
	// The old handle is stale: acking it answers SUCCESS and changes nothing.
	if code, _ := c.Ack(ctx20(t), "g", m); code != remoting.Success {
		t.Fatal(code)
	}
	if !inFlight(t, b, "g", "CIT", 0, 0) {
		t.Fatal("a stale handle acked the message")
	}
	m.Handle = nh
	if code, _ := c.Ack(ctx20(t), "g", m); code != remoting.Success {
		t.Fatal(code)
	}
	if inFlight(t, b, "g", "CIT", 0, 0) {
		t.Fatal("the new handle did not ack")
	}
}

func TestPopReviveRetryAndDLQ(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	// A group that gives up after one retry.
	gc, _ := b.groupConfig("gr", true)
	gc.RetryMaxTimes = 1
	if err := b.groups.Put(gc); err != nil {
		t.Fatal(err)
	}
	mustSend(t, rc, "RV", 0, "payload", "TAGS\x01t1\x02")
	b.caughtUp()
	first := mustPop(t, c, popclient.PopRequest{Group: "gr", Topic: "RV", QueueID: -1, MaxMsgNums: 1, InvisibleTime: 100 * time.Millisecond})
	if len(first.Messages) != 1 {
		t.Fatalf("first pop %d", first.Code)
	}
	// Wait for revive: the retry message arrives under the requested
	// topic with POP_CK, reconsume 1 and 1ST_POP_TIME.
	var retry popclient.PopResult
	for deadline := time.Now().Add(10 * time.Second); ; {
		retry = mustPop(t, c, popclient.PopRequest{Group: "gr", Topic: "RV", QueueID: -1, MaxMsgNums: 1,
			InvisibleTime: 100 * time.Millisecond, PollTime: 2 * time.Second})
		if len(retry.Messages) == 1 || time.Now().After(deadline) {
			break
		}
	}
	if len(retry.Messages) != 1 {
		t.Fatal("message not revived")
	}
	m := retry.Messages[0]
	props := commitlog.ParseProperties(m.Properties)
	if m.Topic != "RV" || string(m.Body) != "payload" || m.ReconsumeTimes != 1 || props["TAGS"] != "t1" {
		t.Fatalf("retry message %+v %v", m.Message, props)
	}
	if props["1ST_POP_TIME"] != strconv.FormatInt(first.PopTime, 10) {
		t.Fatalf("1ST_POP_TIME %q, first pop %d", props["1ST_POP_TIME"], first.PopTime)
	}
	ck := props["POP_CK"]
	want := fmt.Sprintf("%d %d 100 0 1 %s 0 %d", m.Handle.CKOffset, retry.PopTime, b.cfg.BrokerName, m.QueueOffset)
	if ck != want || m.RealTopic != "%RETRY%gr_RV" {
		t.Fatalf("POP_CK %q want %q, real topic %s", ck, want, m.RealTopic)
	}
	if got := retry.Header["startOffsetInfo"]; got != fmt.Sprintf("1 0 %d", m.Handle.CKOffset) {
		t.Fatalf("retry startOffsetInfo %q", got)
	}
	// Not acked again: past retryMaxTimes it goes to the DLQ.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if maxOff, _ := b.cqs.MaxOffset("%DLQ%gr", 0); maxOff == 1 {
			break
		}
	}
	b.caughtUp()
	resp := call(t, rc, remoting.PullMessage, pullReq("x", "%DLQ%gr", 0, 0, 0, 0, "*"), nil)
	if resp.Code != remoting.Success {
		t.Fatalf("DLQ pull %d %s", resp.Code, resp.Remark)
	}
	dl := decodeRecords(t, resp.Body)
	if len(dl) != 1 || string(dl[0].Body) != "payload" || dl[0].ReconsumeTimes != 2 {
		t.Fatalf("DLQ message %+v", dl)
	}
	// The DLQ copy is what RocketMQ's consumerSendMsgBack stores when its
	// proxy forwards a popped message consumed too often: RETRY_TOPIC
	// names the pop-retry topic the record was in, ORIGIN_MESSAGE_ID the
	// record's offset id, WAIT=false and DELAY=0; no DLQ_ORIGIN_* (RocketMQ
	// 5.3.3 writes them nowhere).
	retried := storedRecords(t, b, "%RETRY%gr_RV", 0)[0]
	dp := commitlog.ParseProperties(dl[0].Properties)
	if dp["RETRY_TOPIC"] != "%RETRY%gr_RV" || dp["ORIGIN_MESSAGE_ID"] != commitlog.MessageID(retried.StoreHost, retried.PhyOffset) ||
		dp["WAIT"] != "false" || dp["DELAY"] != "0" || dp["TAGS"] != "t1" || dp["UNIQ_KEY"] == "" {
		t.Errorf("DLQ message properties %v", dp)
	}
	for _, k := range []string{"DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID"} {
		if v, ok := dp[k]; ok {
			t.Errorf("DLQ message has %s=%q, which RocketMQ does not write", k, v)
		}
	}
	// The day totals count the send and the revive to the pop-retry
	// topic, as RocketMQ's, not the move to the DLQ, which RocketMQ's
	// consumer or proxy sends back uncounted.
	if got := runtimeInfo(t, rc)["msgPutTotalTodayNow"]; got != "2" {
		t.Errorf("msgPutTotalTodayNow %s after a send, its revive and its move to the DLQ, want 2", got)
	}
	if st := b.popSvc.ReviveStats(); st.Retried < 1 || st.DLQ != 1 {
		t.Fatalf("revive stats %+v", st)
	}
	// The revive's own property is kept from POP consumers and from
	// Remoting readers of the DLQ (a pull, a view by offset id, a query
	// by unique key); the DLQ record names the delivery it re-delivered;
	// and every intent went with the indexing of its put message.
	if _, ok := props[kvindex.PropertyRevivedFrom]; ok {
		t.Errorf("a popped retry message carries %s", kvindex.PropertyRevivedFrom)
	}
	shown := map[string]commitlog.Message{"pull": dl[0]}
	r := call(t, rc, remoting.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(dl[0].PhyOffset, 10)}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("view the DLQ message: %d %s", r.Code, r.Remark)
	}
	shown["view"] = decodeRecords(t, r.Body)[0]
	r = call(t, rc, remoting.QueryMessage, map[string]string{"topic": "%DLQ%gr", "key": commitlog.ParseProperties(dl[0].Properties)["UNIQ_KEY"],
		"maxNum": "10", "beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().UnixMilli()+1000, 10), "_UNIQUE_KEY_QUERY": "true"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("query the DLQ message: %d %s", r.Code, r.Remark)
	}
	shown["query"] = decodeRecords(t, r.Body)[0]
	popped := mustPop(t, c, popclient.PopRequest{Group: "dlq-reader", Topic: "%DLQ%gr", QueueID: -1, MaxMsgNums: 1, InvisibleTime: time.Minute})
	if len(popped.Messages) != 1 {
		t.Fatalf("pop of the DLQ: %d messages (code %d)", len(popped.Messages), popped.Code)
	}
	shown["pop"] = popped.Messages[0].Message
	r = call(t, rc, remoting.PeekMessage, map[string]string{"consumerGroup": "dlq-peeker", "topic": "%DLQ%gr", "queueId": "0", "maxMsgNums": "1"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("peek the DLQ: %d %s", r.Code, r.Remark)
	}
	shown["peek"] = decodeRecords(t, r.Body)[0]
	stored := storedRecords(t, b, "%DLQ%gr", 0)[0]
	for how, m := range shown {
		if v, ok := commitlog.LookupProperty(m.Properties, kvindex.PropertyRevivedFrom); ok {
			t.Errorf("the DLQ message read by %s carries %s=%q", how, kvindex.PropertyRevivedFrom, v)
		}
		want := commitlog.RewriteProperties(stored.Properties, []string{kvindex.PropertyRevivedFrom})
		if m.Properties != want || m.PhyOffset != stored.PhyOffset || m.QueueOffset != stored.QueueOffset ||
			m.StoreTimestamp != stored.StoreTimestamp || m.BodyCRC != stored.BodyCRC || string(m.Body) != string(stored.Body) {
			t.Errorf("the DLQ message read by %s: %+v, want the stored %+v without %s", how, m, stored, kvindex.PropertyRevivedFrom)
		}
	}
	from, err := kvindex.ParseRevivedFrom(commitlog.ParseProperties(stored.Properties)[kvindex.PropertyRevivedFrom])
	if err != nil || from.Group != "gr" || from.Topic != "%RETRY%gr_RV" || from.QueueID != 0 || from.QueueOffset != 0 {
		t.Errorf("DLQ message revived from %+v (%v), want group gr, %%RETRY%%gr_RV/0@0", from, err)
	}
	if n := reviveIntents(t, b); n != 0 {
		t.Errorf("%d revive intents left after the revives were indexed", n)
	}
}

// reviveIntents counts the broker's revive intents.
func reviveIntents(t *testing.T, b *testBroker) int64 {
	t.Helper()
	n, err := b.db.Pop().CountReviveIntents()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A revive that a crash cut short after its checkpoint gave way to its
// revive batch is finished when the broker starts again, once: the
// message comes back with reconsume 1 whether the put had not stored it
// yet or had, and no batch is left. So is an intent an earlier version
// left in keyspace 0x57 (one per message, its put never stored).
func TestReviveIntentLeftByACrashIsPutAtStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// leave writes what the crash left, in place of ck.
		leave func(t *testing.T, b *testBroker, batch *kvindex.PopBatch, ck *kvindex.Checkpoint)
	}{
		{"batch, put not stored", func(t *testing.T, b *testBroker, batch *kvindex.PopBatch, ck *kvindex.Checkpoint) {
			if err := batch.PutReviveBatch(&kvindex.ReviveBatch{Checkpoint: *ck}); err != nil {
				t.Fatal(err)
			}
		}},
		{"batch, put stored", func(t *testing.T, b *testBroker, batch *kvindex.PopBatch, ck *kvindex.Checkpoint) {
			if err := batch.PutReviveBatch(&kvindex.ReviveBatch{Checkpoint: *ck}); err != nil {
				t.Fatal(err)
			}
			in := kvindex.IntentOf(ck, ck.Offsets[0])
			m := &commitlog.Message{Topic: "%RETRY%g_RI", Body: []byte("half revived"), ReconsumeTimes: 1,
				BornHost: b.storeHost, StoreHost: b.storeHost,
				Properties: kvindex.PropertyRevivedFrom + "\x01" + in.PropertyValue() + "\x02"}
			if err := (popBroker{b.Broker}).EnsureTopic(m.Topic); err != nil {
				t.Fatal(err)
			}
			if _, err := (popBroker{b.Broker}).Put(context.Background(), []*commitlog.Message{m}); err != nil {
				t.Fatal(err)
			}
		}},
		{"intent of an earlier version", func(t *testing.T, b *testBroker, batch *kvindex.PopBatch, ck *kvindex.Checkpoint) {
			in := kvindex.IntentOf(ck, ck.Offsets[0])
			if err := batch.PutReviveIntent(&in); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := t.TempDir()
			b := startTestBrokerAt(t, store, nil)
			c, rc := popClient(b)
			mustSend(t, rc, "RI", 0, "half revived", "")
			b.caughtUp()
			first := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "RI", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Hour})
			if len(first.Messages) != 1 {
				t.Fatalf("first pop: code %d, %d messages", first.Code, len(first.Messages))
			}
			// What a revive of this pop commits before its put: the
			// checkpoint gives way to its batch (or intent).
			ck, ok, err := b.db.Pop().Checkpoint("g", "RI", 0, first.Messages[0].Handle.CKOffset, first.PopTime)
			if err != nil || !ok {
				t.Fatalf("checkpoint of the pop: %v %v", ok, err)
			}
			batch := b.db.Pop().NewBatch()
			if err := batch.DeleteCheckpoint(&ck); err != nil {
				t.Fatal(err)
			}
			tc.leave(t, b, batch, &ck)
			if err := batch.Commit(true); err != nil {
				t.Fatal(err)
			}
			batch.Close()
			b.caughtUp()
			b.stop()

			b = startTestBrokerAt(t, store, nil)
			c, _ = popClient(b)
			var got []popclient.Message
			for deadline := time.Now().Add(10 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
				got = mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "RI", QueueID: -1, MaxMsgNums: 4,
					InvisibleTime: time.Hour, PollTime: time.Second}).Messages
			}
			if len(got) != 1 || string(got[0].Body) != "half revived" || got[0].ReconsumeTimes != 1 || got[0].RealTopic != "%RETRY%g_RI" {
				t.Fatalf("after the restart popped %d messages %v, want the half revived one from %%RETRY%%g_RI with reconsume 1", len(got), bodies(got))
			}
			if more := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "RI", QueueID: -1, MaxMsgNums: 4,
				InvisibleTime: time.Hour, PollTime: time.Second}).Messages; len(more) != 0 {
				t.Fatalf("popped %v more: the revive was put twice", bodies(more))
			}
			if n := reviveIntents(t, b); n != 0 {
				t.Errorf("%d messages still reviving after the restart finished them", n)
			}
		})
	}
}

// A revive put that fails after part of the messages reached the CommitLog
// gives the others back to their checkpoints, due after the first backoff,
// and leaves no batch: every message is then stored once or in a
// checkpoint, never both.
func TestFailedRevivePutGivesBackWhatDidNotLand(t *testing.T) {
	// The first revive put waits until every pop is due, so the second
	// round revives the 268 other messages at once: two puts (256
	// messages at most each), the second of which fails.
	var puts atomic.Int32
	release := make(chan struct{})
	b := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) {
		b.beforePut = func(msgs []*commitlog.Message) error {
			if msgs[0].Topic != "%RETRY%g_FP" {
				return nil
			}
			switch puts.Add(1) {
			case 1:
				<-release
			case 3:
				return errors.New("the round's second put fails")
			}
			return nil
		}
	})
	c, rc := popClient(b)
	const n = 300
	for i := range n {
		mustSend(t, rc, "FP", 0, fmt.Sprintf("m%d", i), "")
	}
	b.caughtUp()
	// The first pop is due alone, long before the others.
	invisible := 200 * time.Millisecond
	for popped := 0; popped < n; invisible = 1500 * time.Millisecond {
		res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "FP", QueueID: 0, MaxMsgNums: 32, InvisibleTime: invisible})
		if len(res.Messages) == 0 || popped == 0 && len(res.Messages) != 32 {
			t.Fatalf("pop after %d: code %d, %d messages", popped, res.Code, len(res.Messages))
		}
		popped += len(res.Messages)
	}
	time.Sleep(2 * time.Second)
	close(release)
	const failed = n - 32 - 256
	// Once the failed put is over: the messages of the puts before it are
	// stored, those of the failed one back in checkpoints (due 10 s
	// later), none reviving, none both.
	var inCheckpoints, stored int64
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %d puts: %d messages stored, %d in checkpoints, %d reviving; want %d, %d, 0",
				puts.Load(), stored, inCheckpoints, reviveIntents(t, b), n-failed, failed)
		}
		if puts.Load() < 3 {
			continue
		}
		b.caughtUp()
		_, msgs, err := b.db.Pop().CountInFlight()
		if err != nil {
			t.Fatal(err)
		}
		inCheckpoints = msgs
		stored, _ = b.cqs.MaxOffset("%RETRY%g_FP", 0)
		if inCheckpoints == failed && stored == n-failed && reviveIntents(t, b) == 0 {
			break
		}
	}
	seen := map[string]bool{}
	for off := int64(0); off < stored; {
		resp := call(t, rc, remoting.PullMessage, pullReq("x", "%RETRY%g_FP", 0, off, 0, 0, "*"), nil)
		ms := decodeRecords(t, resp.Body)
		if resp.Code != remoting.Success || len(ms) == 0 {
			t.Fatalf("pull of the retry topic at %d: %d %s", off, resp.Code, resp.Remark)
		}
		for _, m := range ms {
			if seen[string(m.Body)] {
				t.Fatalf("%s stored twice in the retry topic", m.Body)
			}
			seen[string(m.Body)] = true
		}
		off += int64(len(ms))
	}
	if int64(len(seen)) != stored {
		t.Fatalf("pulled %d of the %d stored messages", len(seen), stored)
	}
}

// A revive put that fails while the dispatcher is far behind cannot tell
// at once what it stored, so its revive batch stays; once the dispatcher
// has caught up, a later revive round settles it (not only the next
// start): the messages go back to their checkpoint, due after the
// backoff, and none is left reviving or stored.
func TestFailedRevivePutSettledOnceTheDispatcherCatchesUp(t *testing.T) {
	stall := make(chan struct{})
	var holdOnce, releaseOnce sync.Once
	var puts atomic.Int32
	b := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) {
		b.reviveGiveBackWait = 200 * time.Millisecond
		b.dispatchHooks = map[string]kvindex.Hook{"Stall": kvindex.HookFunc(func(*pebble.Batch, *commitlog.Message) error {
			holdOnce.Do(func() { <-stall }) // the first record holds dispatch up
			return nil
		})}
		b.beforePut = func(msgs []*commitlog.Message) error {
			if msgs[0].Topic == "%RETRY%g_FS" && puts.Add(1) == 1 {
				return errors.New("the revive put fails")
			}
			return nil
		}
	})
	release := func() { releaseOnce.Do(func() { close(stall) }) }
	t.Cleanup(release) // registered after the broker's: runs before its shutdown
	c, rc := popClient(b)
	const n = 5
	for i := range n {
		mustSend(t, rc, "FS", 0, fmt.Sprintf("m%d", i), "")
	}
	b.caughtUp()
	res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "FS", QueueID: 0, MaxMsgNums: 32, InvisibleTime: 300 * time.Millisecond})
	if len(res.Messages) != n {
		t.Fatalf("popped %d messages, want %d", len(res.Messages), n)
	}
	mustSend(t, rc, "Stall", 0, "hold dispatch", "")
	for deadline := time.Now().Add(10 * time.Second); puts.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the popped messages were never revived")
		}
	}
	// Past the put's wait for the dispatcher, and a few rounds that could
	// not settle the batch with dispatch still held up.
	time.Sleep(time.Second)
	if _, inCheckpoints, err := b.db.Pop().CountInFlight(); err != nil || inCheckpoints != 0 || reviveIntents(t, b) != n {
		t.Fatalf("with dispatch held up: %d in checkpoints (%v), %d reviving; want 0 and %d", inCheckpoints, err, reviveIntents(t, b), n)
	}
	released := time.Now()
	release()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, inCheckpoints, err := b.db.Pop().CountInFlight()
		if err != nil {
			t.Fatal(err)
		}
		reviving := reviveIntents(t, b)
		if inCheckpoints == n && reviving == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dispatch released: %d in checkpoints, %d reviving; want %d and 0", inCheckpoints, reviving, n)
		}
	}
	var cks []kvindex.Checkpoint
	if err := b.db.Pop().DueCheckpoints(0, math.MaxInt64, 0, func(ck kvindex.Checkpoint) bool { cks = append(cks, ck); return true }); err != nil {
		t.Fatal(err)
	}
	backoff := released.Add(9 * time.Second).UnixMilli() // the first backoff is 10 s
	if len(cks) != 1 || len(cks[0].Offsets) != n || cks[0].VisibleAt < backoff || cks[0].Attempts != 1 {
		t.Fatalf("checkpoints after the settle %+v; want one of %d messages, due after %d, attempt 1", cks, n, backoff)
	}
	if stored, err := b.cqs.MaxOffset("%RETRY%g_FS", 0); err != nil || stored != 0 || puts.Load() != 1 {
		t.Fatalf("%d messages stored in the retry topic after %d puts; want 0 after 1", stored, puts.Load())
	}
}

func TestPopLongPollingAndNotification(t *testing.T) {
	b := startTestBroker(t, map[string]string{"popPollingSize": "0"})
	c, rc := popClient(b)
	mustSend(t, rc, "LPP", 0, "first", "")
	b.caughtUp()
	_ = mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "LPP", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
	// A held pop is woken by a send.
	done := make(chan popclient.PopResult, 1)
	go func() {
		res, _ := c.Pop(context.Background(), popclient.PopRequest{Group: "g", Topic: "LPP", QueueID: 0, MaxMsgNums: 1,
			InvisibleTime: time.Minute, PollTime: 15 * time.Second})
		done <- res
	}()
	waitHeld := func(n int) {
		for deadline := time.Now().Add(10 * time.Second); b.popHolds.count(popHoldKey{"LPP", "g", 0}) != n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("held requests never reached %d", n)
			}
		}
	}
	waitHeld(1)
	if r := call(t, rc, remoting.PollingInfo, map[string]string{"consumerGroup": "g", "topic": "LPP", "queueId": "0"}, nil); r.ExtFields["pollingNum"] != "1" {
		t.Fatalf("polling info %v", r.ExtFields)
	}
	// popPollingSize 0: a second hold on the key is POLLING_FULL.
	full := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "LPP", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute, PollTime: 5 * time.Second})
	if full.Code != remoting.PollingFull {
		t.Fatalf("second held pop: %d", full.Code)
	}
	code, has, pfull, err := c.Notification(ctx20(t), "g", "LPP", 0, 5*time.Second, false)
	if err != nil || code != remoting.Success || has || !pfull {
		t.Fatalf("notification while full: %d %v %v %v", code, has, pfull, err)
	}
	mustSend(t, rc, "LPP", 0, "second", "")
	res := <-done
	if res.Code != remoting.Success || len(res.Messages) != 1 || string(res.Messages[0].Body) != "second" {
		t.Fatalf("woken pop: %d %v", res.Code, bodies(res.Messages))
	}
	// Timed out: 210 after the poll time.
	start := time.Now()
	to := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "LPP", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute, PollTime: 300 * time.Millisecond})
	if to.Code != remoting.PollingTimeout || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("timed out pop: %d after %v", to.Code, time.Since(start))
	}
	// Notification: hasMsg false after its poll time, true once a message waits.
	code, has, _, _ = c.Notification(ctx20(t), "g", "LPP", 0, 200*time.Millisecond, false)
	if code != remoting.Success || has {
		t.Fatalf("notification on empty queue: %d %v", code, has)
	}
	nd := make(chan bool, 1)
	go func() {
		_, has, _, _ := c.Notification(context.Background(), "g", "LPP", -1, 15*time.Second, false)
		nd <- has
	}()
	for deadline := time.Now().Add(10 * time.Second); b.popHolds.count(popHoldKey{"LPP", "g", -1}) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("notification not held")
		}
	}
	mustSend(t, rc, "LPP", 0, "third", "")
	if !<-nd {
		t.Fatal("notification woke without a message")
	}
	pcode, peeked, err := c.Peek(ctx20(t), "g", "LPP", 0, 4)
	if err != nil || pcode != remoting.Success || len(peeked) != 1 || string(peeked[0].Body) != "third" {
		t.Fatalf("peek %d %d %v", pcode, len(peeked), err)
	}
	// Peeking changed nothing.
	if res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "LPP", QueueID: 0, MaxMsgNums: 4, InvisibleTime: time.Minute}); len(res.Messages) != 1 {
		t.Fatalf("pop after peek %d", len(res.Messages))
	}
	if pcode, _, _ := c.Peek(ctx20(t), "g", "LPP", 0, 4); pcode != remoting.PullNotFound {
		t.Fatalf("peek of nothing %d", pcode)
	}
}

func TestPopTagFilterAndInitMode(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	for i := 0; i < 6; i++ {
		tag := "a"
		if i%2 == 1 {
			tag = "b"
		}
		mustSend(t, rc, "TF", 0, fmt.Sprintf("m%d", i), "TAGS\x01"+tag+"\x02")
	}
	b.caughtUp()
	res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "TF", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute, Exp: "b"})
	if got := bodies(res.Messages); fmt.Sprint(got) != "[m1 m3 m5]" || res.Header["msgOffsetInfo"] != "0 0 1,3,5" {
		t.Fatalf("filtered pop %v %q", got, res.Header["msgOffsetInfo"])
	}
	// InitMax starts a new group at 0 while the queue's first message is
	// in memory (initPopOffsetByCheckMsgInMem, RocketMQ's default), at the
	// last message otherwise.
	memPop := mustPop(t, c, popclient.PopRequest{Group: "gmem", Topic: "TF", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute, InitMode: pop.InitMax})
	if got := bodies(memPop.Messages); fmt.Sprint(got) != "[m0 m1 m2 m3 m4 m5]" {
		t.Fatalf("init max pop with the queue in memory %v, want every message", got)
	}
	updateConfig(t, rc, "initPopOffsetByCheckMsgInMem=false\n")
	maxPop := mustPop(t, c, popclient.PopRequest{Group: "gmax", Topic: "TF", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute, InitMode: pop.InitMax})
	if got := bodies(maxPop.Messages); fmt.Sprint(got) != "[m5]" {
		t.Fatalf("init max pop %v", got)
	}
}

func TestOrderlyPop(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "OP", 4)
	b.caughtUp()
	// The locked-queue and same-attempt steps must run inside the first
	// batch's invisible time: long enough that a loaded machine's stall
	// does not expire it first (300 ms left a stall of that much no room).
	const invisible = 1500 * time.Millisecond
	req := popclient.PopRequest{Group: "g", Topic: "OP", QueueID: 0, MaxMsgNums: 2, InvisibleTime: invisible, Order: true}
	withAttempt := req
	withAttempt.AttemptID = "attempt-1"
	first := mustPop(t, c, withAttempt)
	if first.Code != remoting.Success || first.ReviveQID != pop.OrderReviveQueue || fmt.Sprint(bodies(first.Messages)) != "[m0 m1]" {
		t.Fatalf("orderly pop %d %v", first.Code, bodies(first.Messages))
	}
	if got := first.Header["orderCountInfo"]; got != "0 0 0" {
		t.Fatalf("orderCountInfo %q", got)
	}
	// The queue is locked while the batch is in flight.
	if res := mustPop(t, c, req); res.Code != remoting.PollingTimeout {
		t.Fatalf("pop of a locked queue: %d %v", res.Code, bodies(res.Messages))
	}
	// The same attempt id (a client's retry of the pop): the batch again,
	// counts unchanged.
	again := mustPop(t, c, withAttempt)
	if fmt.Sprint(bodies(again.Messages)) != "[m0 m1]" || again.Header["orderCountInfo"] != "0 0 0" {
		t.Fatalf("repeated attempt %v %q", bodies(again.Messages), again.Header["orderCountInfo"])
	}
	// After the deadline the batch comes back, each message counted once more.
	time.Sleep(invisible + 50*time.Millisecond)
	second := mustPop(t, c, req)
	if fmt.Sprint(bodies(second.Messages)) != "[m0 m1]" || second.Messages[0].OrderCount != 1 {
		t.Fatalf("expired batch: %v counts %q", bodies(second.Messages), second.Header["orderCountInfo"])
	}
	if got := second.Header["orderCountInfo"]; got != "0 qo0%0 1;0 qo0%1 1;0 0 1" {
		t.Fatalf("orderCountInfo %q", got)
	}
	// An offset outside the batch is MESSAGE_ILLEGAL.
	bad := second.Messages[0]
	bad.Handle.QueueOffset = 3
	if code, _ := c.Ack(ctx20(t), "g", bad); code != remoting.MessageIllegal {
		t.Fatalf("orderly ack outside the batch: %d", code)
	}
	for _, m := range second.Messages {
		if code, _ := c.Ack(ctx20(t), "g", m); code != remoting.Success {
			t.Fatal(code)
		}
	}
	if off := storedOffset(t, b, "g", "OP", 0); off != 2 {
		t.Fatalf("committed after orderly acks %d", off)
	}
	third := mustPop(t, c, req)
	if fmt.Sprint(bodies(third.Messages)) != "[m2 m3]" || third.Header["orderCountInfo"] != "0 0 0" {
		t.Fatalf("next batch %v %q", bodies(third.Messages), third.Header["orderCountInfo"])
	}
}

func TestConcurrentPopsNeverShareAMessage(t *testing.T) {
	b := startTestBroker(t, nil)
	_, rc := popClient(b)
	const n = 400
	for i := 0; i < n; i++ {
		mustSend(t, rc, "CC", 0, strconv.Itoa(i), "")
	}
	b.caughtUp()
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		c, _ := popClient(b)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				res, err := c.Pop(context.Background(), popclient.PopRequest{Group: "g", Topic: "CC", QueueID: 0, MaxMsgNums: 7, InvisibleTime: time.Minute})
				if err != nil || len(res.Messages) == 0 {
					return
				}
				mu.Lock()
				for _, m := range res.Messages {
					seen[string(m.Body)]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d distinct messages popped, want %d", len(seen), n)
	}
	for k, v := range seen {
		if v != 1 {
			t.Fatalf("message %s popped %d times inside its invisibility window", k, v)
		}
	}
}

// queryAssignment sends a clustering QUERY_ASSIGNMENT (average strategy)
// and returns the assignments, failing the test unless it succeeds.
func queryAssignment(t *testing.T, c *remoting.Client, topic, group, clientID string) []queueAssignment {
	t.Helper()
	body, _ := json.Marshal(queryAssignmentBody{Topic: topic, ConsumerGroup: group, ClientID: clientID, StrategyName: "AVG", MessageModel: modelClustering})
	r := call(t, c, remoting.QueryAssignment, nil, body)
	var out struct {
		MessageQueueAssignments []queueAssignment `json:"messageQueueAssignments"`
	}
	if r.Code != remoting.Success || json.Unmarshal(r.Body, &out) != nil {
		t.Fatalf("query assignment %d %s", r.Code, r.Body)
	}
	return out.MessageQueueAssignments
}

func TestQueryAssignmentAndRequestMode(t *testing.T) {
	b := startTestBroker(t, nil)
	_, rc := popClient(b)
	mustSend(t, rc, "QA", 0, "x", "")
	query := func() []queueAssignment { return queryAssignment(t, rc, "QA", "g", "c1") }
	if a := query(); len(a) != 4 || a[0].Mode != modePull {
		t.Fatalf("pull assignment %+v", a)
	}
	set, _ := json.Marshal(requestModeBody{Topic: "QA", ConsumerGroup: "g", Mode: "POP"})
	if r := call(t, rc, remoting.SetMessageRequestMode, nil, set); r.Code != remoting.Success {
		t.Fatalf("set mode %d", r.Code)
	}
	if a := query(); len(a) != 1 || a[0].Mode != modePop || a[0].MessageQueue.QueueID != -1 {
		t.Fatalf("pop assignment %+v", a)
	}
	retry, _ := json.Marshal(requestModeBody{Topic: "%RETRY%g", ConsumerGroup: "g", Mode: "POP"})
	if r := call(t, rc, remoting.SetMessageRequestMode, nil, retry); r.Code != remoting.NoPermission {
		t.Fatalf("set mode on a retry topic %d", r.Code)
	}
	r := call(t, rc, remoting.GetAllMessageRequestMode, nil, nil)
	var all struct {
		Map map[string]map[string]requestModeBody `json:"messageRequestModeMap"`
	}
	if err := json.Unmarshal(r.Body, &all); err != nil || all.Map["QA"]["g"].Mode != "POP" {
		t.Fatalf("all modes %s %v", r.Body, err)
	}
}

// defaultMessageRequestMode and defaultPopShareQueueNum are the mode of a
// group that set none, as RocketMQ's QUERY_ASSIGNMENT gives it; a set mode
// and retry topics (always PULL) are not affected, and an update takes
// effect at the next assignment.
func TestDefaultMessageRequestMode(t *testing.T) {
	b := startTestBroker(t, map[string]string{"defaultMessageRequestMode": "POP"})
	_, rc := popClient(b)
	mustSend(t, rc, "DM", 0, "x", "")
	if a := queryAssignment(t, rc, "DM", "g", "c1"); len(a) != 1 || a[0].Mode != modePop || a[0].MessageQueue.QueueID != -1 {
		t.Fatalf("assignment of a group without a mode: %+v", a)
	}
	set, _ := json.Marshal(requestModeBody{Topic: "DM", ConsumerGroup: "pulls", Mode: "PULL"})
	if r := call(t, rc, remoting.SetMessageRequestMode, nil, set); r.Code != remoting.Success {
		t.Fatalf("set mode %d", r.Code)
	}
	if a := queryAssignment(t, rc, "DM", "pulls", "c1"); len(a) != 4 || a[0].Mode != modePull {
		t.Fatalf("a group that set PULL: %+v", a)
	}
	mustSend(t, rc, "%RETRY%g", 0, "r", "")
	if a := queryAssignment(t, rc, "%RETRY%g", "g", "c1"); len(a) == 0 || a[0].Mode != modePull {
		t.Fatalf("retry topic: %+v", a)
	}
	// Three clients of g: with defaultPopShareQueueNum=1 each pops its own
	// queues and its neighbour's, not every queue (-1).
	for _, id := range []string{"c1", "c2", "c3"} {
		heartbeat(t, b.client(nil), heartbeatBody(id, "", "g", map[string]string{"DM": "*"}))
	}
	if a := queryAssignment(t, rc, "DM", "g", "c1"); len(a) != 1 || a[0].MessageQueue.QueueID != -1 {
		t.Fatalf("three clients, popShareQueueNum -1: %+v", a)
	}
	updateConfig(t, rc, "defaultPopShareQueueNum=1")
	shared := queryAssignment(t, rc, "DM", "g", "c1")
	if len(shared) < 2 || len(shared) >= 4 || shared[0].Mode != modePop || shared[0].MessageQueue.QueueID < 0 {
		t.Fatalf("three clients, popShareQueueNum 1: %+v, want some of the 4 queues", shared)
	}
	updateConfig(t, rc, "defaultMessageRequestMode=PULL")
	if a := queryAssignment(t, rc, "DM", "g", "c1"); len(a) == 0 || a[0].Mode != modePull || a[0].MessageQueue.QueueID < 0 {
		t.Fatalf("after the default went back to PULL: %+v", a)
	}
}

func TestShutdownAnswersHeldPops(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	mustSend(t, rc, "SD", 0, "x", "")
	b.caughtUp()
	_ = mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "SD", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
	done := make(chan int32, 1)
	go func() {
		res, err := c.Pop(context.Background(), popclient.PopRequest{Group: "g", Topic: "SD", QueueID: 0, MaxMsgNums: 1,
			InvisibleTime: time.Minute, PollTime: 15 * time.Second})
		if err != nil {
			done <- -1
			return
		}
		done <- res.Code
	}()
	for deadline := time.Now().Add(10 * time.Second); b.popHolds.count(popHoldKey{"SD", "g", 0}) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("pop not held")
		}
	}
	start := time.Now()
	b.stop()
	if code := <-done; code != remoting.PollingTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("held pop at shutdown: code %d after %v", code, time.Since(start))
	}
}

func TestPopRetryTopicV2AndOrderlyChangeInvisibleTime(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enableRetryTopicV2": "true"})
	c, rc := popClient(b)
	mustSend(t, rc, "V2", 0, "v2", "")
	mustSend(t, rc, "OC", 0, "o0", "")
	mustSend(t, rc, "OC", 0, "o1", "")
	b.caughtUp()
	_ = mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "V2", QueueID: 0, MaxMsgNums: 1, InvisibleTime: 50 * time.Millisecond})
	var retry popclient.PopResult
	for deadline := time.Now().Add(10 * time.Second); len(retry.Messages) == 0 && time.Now().Before(deadline); {
		retry = mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "V2", QueueID: -1, MaxMsgNums: 1, InvisibleTime: time.Minute, PollTime: time.Second})
	}
	if len(retry.Messages) != 1 {
		t.Fatal("not revived")
	}
	m := retry.Messages[0]
	if m.RealTopic != "%RETRY%g+V2" || m.Handle.RetryFlag != pop.FlagRetryV2 || m.Topic != "V2" {
		t.Fatalf("V2 retry: real topic %s, flag %s, topic %s", m.RealTopic, m.Handle.RetryFlag, m.Topic)
	}
	if code, _ := c.Ack(ctx20(t), "g", m); code != remoting.Success {
		t.Fatal(code)
	}
	if inFlight(t, b, "g", "%RETRY%g+V2", 0, m.QueueOffset) {
		t.Fatal("V2 retry message not acked")
	}

	// Orderly: a change of invisible time keeps the handle's popTime and
	// moves the lock of the queue.
	req := popclient.PopRequest{Group: "g", Topic: "OC", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true}
	first := mustPop(t, c, req)
	if len(first.Messages) != 2 {
		t.Fatalf("orderly pop %d", len(first.Messages))
	}
	code, nh, err := c.ChangeInvisibleTime(ctx20(t), "g", first.Messages[0], 50*time.Millisecond)
	if err != nil || code != remoting.Success || nh.PopTime != first.PopTime || nh.ReviveQID != pop.OrderReviveQueue {
		t.Fatalf("orderly change: %d %+v %v", code, nh, err)
	}
	if code, _ := c.Ack(ctx20(t), "g", first.Messages[1]); code != remoting.Success {
		t.Fatal(code)
	}
	// Message 0 is visible again after 50 ms: the batch comes back with
	// o0 counted once more (o1 was acked, but the batch restarts at the
	// committed offset).
	var again popclient.PopResult
	for deadline := time.Now().Add(10 * time.Second); len(again.Messages) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		again = mustPop(t, c, req)
	}
	if len(again.Messages) == 0 || string(again.Messages[0].Body) != "o0" || again.Messages[0].OrderCount != 1 {
		t.Fatalf("after the orderly change: %v %q", bodies(again.Messages), again.Header["orderCountInfo"])
	}
}

func TestPopSideRequestCodes(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	mustSend(t, rc, "SR", 0, "x", "")
	b.caughtUp()
	for _, code := range []int32{remoting.PeekMessage, remoting.Notification, remoting.PollingInfo} {
		ext := map[string]string{"consumerGroup": "g", "topic": "Nope", "queueId": "0", "maxMsgNums": "1", "pollTime": "0"}
		if r := call(t, rc, code, ext, nil); r.Code != remoting.TopicNotExist {
			t.Errorf("request %d on an unknown topic: %d", code, r.Code)
		}
		ext["topic"], ext["queueId"] = "SR", "99"
		if r := call(t, rc, code, ext, nil); r.Code != remoting.InvalidParameter {
			t.Errorf("request %d on a bad queue: %d", code, r.Code)
		}
		if r := call(t, rc, code, map[string]string{"topic": "SR"}, nil); r.Code != remoting.SystemError {
			t.Errorf("request %d without its header: %d", code, r.Code)
		}
	}
	// No polling: NOTIFICATION answers at once, hasMsg true here.
	code, has, full, err := c.Notification(ctx20(t), "g", "SR", 0, 0, false)
	if err != nil || code != remoting.Success || !has || full {
		t.Fatalf("notification %d %v %v %v", code, has, full, err)
	}
	if r := call(t, rc, remoting.QueryAssignment, nil, []byte("{")); r.Code != remoting.SystemError {
		t.Errorf("malformed query assignment %d", r.Code)
	}
	if r := call(t, rc, remoting.SetMessageRequestMode, nil, []byte("{}")); r.Code != remoting.SystemError {
		t.Errorf("empty set request mode %d", r.Code)
	}
}

// TestOrderlyPopCountsRest checks restNum of orderly pops over every
// queue: a queue not read because the batch was full counts its messages
// as left behind, one locked by another batch in flight does not
// (RocketMQ 5.3.1+).
func TestOrderlyPopCountsRest(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	for i := 0; i < 3; i++ {
		mustSend(t, rc, "ORest", 0, fmt.Sprintf("a%d", i), "")
		mustSend(t, rc, "ORest", 1, fmt.Sprintf("b%d", i), "")
	}
	b.caughtUp()
	req := popclient.PopRequest{Group: "g", Topic: "ORest", QueueID: -1, MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true}
	first := mustPop(t, c, req)
	// Two of one queue delivered: one left there, three in the other.
	if first.Code != remoting.Success || len(first.Messages) != 2 || first.RestNum != 4 {
		t.Fatalf("first orderly pop: code %d, %v, rest %d, want 2 messages and rest 4", first.Code, bodies(first.Messages), first.RestNum)
	}
	second := mustPop(t, c, req)
	// The first queue is locked by the first batch: what it holds back
	// counts for nothing (RocketMQ 5.3.1+, PopMessageProcessor's "should
	// not add accumulation"); the other delivers two and keeps one.
	if second.Code != remoting.Success || len(second.Messages) != 2 || second.RestNum != 1 ||
		second.Messages[0].QueueID == first.Messages[0].QueueID {
		t.Fatalf("second orderly pop: code %d, %v, rest %d, want the other queue's two and rest 1", second.Code, bodies(second.Messages), second.RestNum)
	}
}

// A pop of only a queue an orderly batch locks counts nothing left behind
// there either (the locked branch, not the full pop's).
func TestOrderlyPopOfALockedQueueCountsNoRest(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "ORestLocked", 3)
	b.caughtUp()
	req := popclient.PopRequest{Group: "g", Topic: "ORestLocked", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute, Order: true}
	if first := mustPop(t, c, req); len(first.Messages) != 1 || first.RestNum != 2 {
		t.Fatalf("first orderly pop: %v, rest %d, want one message and rest 2", bodies(first.Messages), first.RestNum)
	}
	locked := mustPop(t, c, req)
	if len(locked.Messages) != 0 || locked.Header["restNum"] != "0" {
		t.Fatalf("pop of the locked queue: %v, header %v, want nothing and restNum 0", bodies(locked.Messages), locked.Header)
	}
}

// A late ack of an expired orderly batch commits nothing once a later
// batch of the queue was acknowledged (RocketMQ's commitAndNext answers
// -2 for another popTime; its OrderInfo outlives the full ack): it used
// to be taken for an ack with no batch known and commit its offset + 1,
// past messages nobody had acknowledged.
func TestALateAckOfAnExpiredOrderlyBatchCommitsNothing(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "OLate", 5)
	b.caughtUp()
	// Consumer X pops four and stalls past its invisible time.
	x := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "OLate", QueueID: 0, MaxMsgNums: 4, InvisibleTime: 300 * time.Millisecond, Order: true})
	if len(x.Messages) != 4 {
		t.Fatalf("first pop %v", bodies(x.Messages))
	}
	time.Sleep(400 * time.Millisecond)
	// Consumer Y pops one and acknowledges it: its batch is done.
	y := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "OLate", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute, Order: true})
	if fmt.Sprint(bodies(y.Messages)) != "[m0]" {
		t.Fatalf("second pop %v", bodies(y.Messages))
	}
	if code, _ := c.Ack(ctx20(t), "g", y.Messages[0]); code != remoting.Success {
		t.Fatalf("ack of Y's message: %d", code)
	}
	if off := storedOffset(t, b, "g", "OLate", 0); off != 1 {
		t.Fatalf("committed after Y's ack %d, want 1", off)
	}
	// X acknowledges its last message, under its old popTime.
	if code, _ := c.Ack(ctx20(t), "g", x.Messages[3]); code != remoting.Success {
		t.Fatalf("late ack: %d", code)
	}
	if off := storedOffset(t, b, "g", "OLate", 0); off != 1 {
		t.Fatalf("a late ack of an expired batch moved the committed offset to %d, want it left at 1", off)
	}
	next := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "OLate", QueueID: 0, MaxMsgNums: 4, InvisibleTime: time.Minute, Order: true})
	if fmt.Sprint(bodies(next.Messages)) != "[m1 m2 m3 m4]" {
		t.Fatalf("next batch %v, want [m1 m2 m3 m4]", bodies(next.Messages))
	}
}

// An administrator's offset reset holds against the acks of the orderly
// batch in flight when it came (RocketMQ's ackOrderly skips its commit
// while the queue's reset is pending, until the next pop): the ack used
// to commit its offset + 1 over the reset, and the replay lost what lay
// between.
func TestAnOffsetResetHoldsAgainstTheOrderlyBatchInFlight(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "OResetAck", 6)
	b.caughtUp()
	req := popclient.PopRequest{Group: "og", Topic: "OResetAck", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true}
	for _, m := range mustPop(t, c, req).Messages {
		if code, _ := c.Ack(ctx20(t), "og", m); code != remoting.Success {
			t.Fatalf("ack: %d", code)
		}
	}
	second := mustPop(t, c, req)
	if fmt.Sprint(bodies(second.Messages)) != "[m2 m3]" {
		t.Fatalf("second batch %v", bodies(second.Messages))
	}
	mustReset(t, rc, resetReq("og", "OResetAck", -1, 0, 0))
	if off := storedOffset(t, b, "og", "OResetAck", 0); off != 0 {
		t.Fatalf("committed after the reset %d, want 0", off)
	}
	if code, _ := c.Ack(ctx20(t), "og", second.Messages[1]); code != remoting.Success {
		t.Fatalf("ack after the reset: %d", code)
	}
	if off := storedOffset(t, b, "og", "OResetAck", 0); off != 0 {
		t.Fatalf("an ack of the batch in flight moved the reset offset 0 to %d", off)
	}
	if res := mustPop(t, c, req); fmt.Sprint(bodies(res.Messages)) != "[m0 m1]" {
		t.Fatalf("pop after the reset to 0: %v, want [m0 m1]", bodies(res.Messages))
	}
}

// TestStaleCommittedOffsetHealsOnNextPop checks what the ack path relies
// on: an ack moves the committed offset in a second commit, so a crash in
// between can leave it behind messages already acknowledged. The queue's
// next pop recomputes it from the checkpoints.
func TestStaleCommittedOffsetHealsOnNextPop(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "HT", 4)
	b.caughtUp()
	res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "HT", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute})
	if len(res.Messages) != 2 {
		t.Fatalf("pop: %d messages", len(res.Messages))
	}
	if code, err := c.BatchAck(ctx20(t), "g", "HT", res.Messages); err != nil || code != remoting.Success {
		t.Fatalf("batch ack %d %v", code, err)
	}
	// The second commit of that ack "lost": the offset is back at 0.
	if err := b.offsets.Set("g", "HT", 0, 0); err != nil {
		t.Fatal(err)
	}
	res = mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "HT", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
	if got := bodies(res.Messages); len(got) != 1 || got[0] != "m2" {
		t.Fatalf("next pop %v", got)
	}
	if off, ok, err := b.offsets.Get("g", "HT", 0); err != nil || !ok || off != 2 {
		t.Fatalf("committed offset after the next pop: %d %v %v, want 2", off, ok, err)
	}
}

// A pop waits for the index's write-ahead log once however many queues it
// read (the queue that fills it commits durably, else one flush at the
// end), and not at all when it found nothing.
func TestPopWaitsForTheIndexOnce(t *testing.T) {
	// The periodic sync of the index's log counts as a flush too: an hour
	// apart, none falls between a step's two counts (at 500 ms one did
	// on a loaded machine).
	b := startTestBroker(t, map[string]string{"indexWalSyncIntervalMillis": "3600000"})
	c, rc := popClient(b)
	createTopic(t, rc, "PW", 2, 2)
	for i := range 40 {
		mustSend(t, rc, "PW", 0, fmt.Sprintf("a%d", i), "")
	}
	for i := range 3 {
		mustSend(t, rc, "PW", 1, fmt.Sprintf("b%d", i), "")
	}
	b.caughtUp()
	flushes := func() int64 {
		n, err := strconv.ParseInt(runtimeInfo(t, rc)["indexWalFlushes"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, step := range []struct {
		name    string
		queue   int32
		max     int
		want    int
		flushes int64
	}{
		{"filled by one queue", 0, 32, 32, 1},
		{"two queues, neither fills it", -1, 32, 11, 1},
		{"nothing left", -1, 32, 0, 0},
	} {
		before := flushes()
		res, err := c.Pop(ctx20(t), popclient.PopRequest{Group: "g", Topic: "PW", QueueID: step.queue, MaxMsgNums: step.max, InvisibleTime: time.Minute})
		if err != nil || len(res.Messages) != step.want {
			t.Fatalf("%s: %v, %d messages, want %d", step.name, err, len(res.Messages), step.want)
		}
		if n := flushes() - before; n != step.flushes {
			t.Errorf("%s: the pop waited for the index %d times, want %d", step.name, n, step.flushes)
		}
	}
}

// A batch ack naming several queues waits for the index's write-ahead log
// once, not once per queue, and acknowledges every entry.
func TestBatchAckWaitsForTheIndexOnce(t *testing.T) {
	// No periodic sync of the index's log between the counts (see
	// TestPopWaitsForTheIndexOnce).
	b := startTestBroker(t, map[string]string{"indexWalSyncIntervalMillis": "3600000"})
	c, rc := popClient(b)
	const queues = 4
	createTopic(t, rc, "BA", queues, queues)
	for q := range int32(queues) {
		for i := range 3 {
			mustSend(t, rc, "BA", q, fmt.Sprintf("q%d-%d", q, i), "")
		}
	}
	b.caughtUp()
	var popped []popclient.Message
	for q := range int32(queues) {
		res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "BA", QueueID: q, MaxMsgNums: 32, InvisibleTime: time.Minute})
		if res.Code != remoting.Success || len(res.Messages) != 3 {
			t.Fatalf("pop of queue %d: code %d, %d messages", q, res.Code, len(res.Messages))
		}
		popped = append(popped, res.Messages...)
	}
	flushes := func() int64 {
		n, err := strconv.ParseInt(runtimeInfo(t, rc)["indexWalFlushes"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := flushes()
	if code, err := c.BatchAck(ctx20(t), "g", "BA", popped); err != nil || code != remoting.Success {
		t.Fatalf("batch ack: %d %v", code, err)
	}
	if n := flushes() - before; n != 1 {
		t.Fatalf("a batch ack of %d queues waited for the index %d times, want 1", queues, n)
	}
	for q := range int32(queues) {
		if off, ok, err := b.offsets.Get("g", "BA", q); err != nil || !ok || off != 3 {
			t.Fatalf("committed offset of queue %d after the batch ack: %d %v %v, want 3", q, off, ok, err)
		}
	}
}

// Deleting a topic deletes the pop-retry topics of the groups that
// consumed it (clearRetryTopicWhenDeleteTopic, true by default as in
// RocketMQ 5.3), not other topics' retry topics; with the key off they
// stay.
func TestDeleteTopicTakesItsPopRetryTopics(t *testing.T) {
	for _, clear := range []bool{true, false} {
		t.Run(strconv.FormatBool(clear), func(t *testing.T) {
			b := startTestBroker(t, map[string]string{"clearRetryTopicWhenDeleteTopic": strconv.FormatBool(clear)})
			c, rc := popClient(b)
			// A message of each topic popped and left to expire: revive
			// creates the group's pop-retry topic of each.
			for _, topic := range []string{"Doomed", "Kept"} {
				mustSend(t, rc, topic, 0, "x", "")
				b.caughtUp()
				if res := mustPop(t, c, popclient.PopRequest{Group: "dg", Topic: topic, QueueID: 0, MaxMsgNums: 1, InvisibleTime: 100 * time.Millisecond}); len(res.Messages) != 1 {
					t.Fatalf("pop of %s: code %d", topic, res.Code)
				}
			}
			for _, rt := range []string{"%RETRY%dg_Doomed", "%RETRY%dg_Kept"} {
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					if _, ok, err := b.topicConfig(rt); err != nil || ok {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s not created by revive", rt)
					}
				}
			}
			if r := call(t, rc, remoting.DeleteTopicInBroker, map[string]string{"topic": "Doomed"}, nil); r.Code != remoting.Success {
				t.Fatalf("delete topic: %d %s", r.Code, r.Remark)
			}
			for rt, want := range map[string]bool{"Doomed": false, "%RETRY%dg_Doomed": !clear, "Kept": true, "%RETRY%dg_Kept": true} {
				if _, ok, err := b.topicConfig(rt); err != nil || ok != want {
					t.Errorf("after deleting Doomed, %s exists: %v (%v), want %v", rt, ok, err, want)
				}
			}
		})
	}
}

// popFromRetryProbability decides whether a pop reads the group's
// pop-retry topic before the topic: at 100 every pop does, at 0 none (the
// retry message comes only once the topic leaves room).
func TestPopFromRetryProbability(t *testing.T) {
	for _, tc := range []struct{ percent, first string }{{"100", "retried"}, {"0", "new"}} {
		b := startTestBroker(t, map[string]string{"popFromRetryProbability": tc.percent})
		c, rc := popClient(b)
		mustSend(t, rc, "PR", 0, "new", "")
		mustSend(t, rc, pop.RetryTopicV1("PR", "g"), 0, "retried", "")
		b.caughtUp()
		res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "PR", QueueID: -1, MaxMsgNums: 1, InvisibleTime: time.Minute})
		if got := bodies(res.Messages); len(got) != 1 || got[0] != tc.first {
			t.Errorf("popFromRetryProbability=%s: first pop got %v, want %s", tc.percent, got, tc.first)
		}
	}
}

// An orderly BATCH_ACK_MESSAGE entry with an offset outside its batch
// acknowledges its other offsets all the same and answers MESSAGE_ILLEGAL
// (RocketMQ's AckMessageProcessor calls commitAndNext per offset and goes
// on after one answers -1); a change of invisible time of that offset
// answers the handle's popTime and now + the new invisible time - popTime
// (ChangeInvisibleTimeProcessor's orderly branch answers so whether or
// not updateNextVisibleTime found the offset). The entry used to be
// dropped whole, and the change to answer the old invisibleTime.
func TestOrderlyBatchAckAndChangeOfAnOffsetOutsideTheBatch(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "OStray", 4)
	b.caughtUp()
	res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "OStray", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true})
	if fmt.Sprint(bodies(res.Messages)) != "[m0 m1]" {
		t.Fatalf("orderly pop %v", bodies(res.Messages))
	}
	stray := res.Messages[0]
	stray.Handle.QueueOffset, stray.QueueOffset = 3, 3
	if code, err := c.BatchAck(ctx20(t), "g", "OStray", []popclient.Message{res.Messages[0], res.Messages[1], stray}); err != nil || code != remoting.MessageIllegal {
		t.Fatalf("batch ack with an offset outside the batch: %d %v, want MESSAGE_ILLEGAL", code, err)
	}
	if off := storedOffset(t, b, "g", "OStray", 0); off != 2 {
		t.Fatalf("committed %d after the batch ack, want 2: the offsets of the batch acknowledged", off)
	}
	const d = 5 * time.Second
	before := time.Now().UnixMilli()
	code, nh, err := c.ChangeInvisibleTime(ctx20(t), "g", stray, d)
	after := time.Now().UnixMilli()
	if err != nil || code != remoting.Success || nh.PopTime != res.PopTime || nh.ReviveQID != pop.OrderReviveQueue {
		t.Fatalf("change of an offset outside the batch: %d %+v %v", code, nh, err)
	}
	if deadline := nh.PopTime + nh.InvisibleTime; deadline < before+d.Milliseconds() || deadline > after+d.Milliseconds() {
		t.Fatalf("change answered invisibleTime %d: deadline %d, want now + %d in [%d, %d]",
			nh.InvisibleTime, deadline, d.Milliseconds(), before+d.Milliseconds(), after+d.Milliseconds())
	}
}

// A committed offset ahead of a group's pops (a pull consumer of the
// group, or UPDATE_CONSUMER_OFFSET) moves them on, as RocketMQ's
// getPopOffset takes the larger of its pop offset and the committed one:
// the pops used to go on from their own position.
func TestPopStartsAtACommittedOffsetAheadOfIt(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "PA", 10)
	b.caughtUp()
	res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "PA", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute})
	if got := bodies(res.Messages); len(got) != 2 || got[0] != "m0" {
		t.Fatalf("first pop %v", got)
	}
	r := call(t, rc, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "PA", "queueId": "0", "commitOffset": "7"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("update consumer offset: %d %s", r.Code, r.Remark)
	}
	res = mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "PA", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if got := bodies(res.Messages); len(got) != 3 || got[0] != "m7" {
		t.Fatalf("pop after a commit at 7: %v, want m7..m9", got)
	}
	// A commit behind the pops does not take them back.
	r = call(t, rc, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "PA", "queueId": "0", "commitOffset": "1"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("update consumer offset: %d %s", r.Code, r.Remark)
	}
	sendBodies(t, rc, "PA", 1)
	b.caughtUp()
	res = mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "PA", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if got := bodies(res.Messages); len(got) != 1 || got[0] != "m0" {
		t.Fatalf("pop after a commit behind the pops: %v, want the one new message", got)
	}
}

// A batch ack naming offsets past its queue's end is answered SUCCESS,
// as RocketMQ answers it, acknowledges the offsets inside the queue, and
// says in a warning which offsets it skipped: no pop hands such offsets
// out, so the consumer names messages this broker never served.
func TestBatchAckPastTheQueueEndIsLogged(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	b := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) { b.refusedLog = zerolog.New(logs) })
	c, rc := popClient(b)
	mustSend(t, rc, "Past", 0, "x", "")
	b.caughtUp()
	res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "Past", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
	if len(res.Messages) != 1 {
		t.Fatalf("pop got %d messages, want 1", len(res.Messages))
	}
	h := res.Messages[0].Handle
	// Offsets 0 (popped) and 5 (the queue holds one message).
	body := pop.BatchAckBody{Acks: []pop.BatchAck{{ConsumerGroup: "g", Topic: "Past", Retry: "0", QueueID: 0,
		StartOffset: 0, ReviveQueueID: h.ReviveQID, PopTime: h.PopTime, InvisibleTime: h.InvisibleTime, Bits: []byte{1 | 1<<5}}}}
	if r := call(t, rc, remoting.BatchAckMessage, nil, body.AppendJSON(nil)); r.Code != remoting.Success {
		t.Fatalf("batch ack: %d %s, want SUCCESS", r.Code, r.Remark)
	}
	if inFlight(t, b, "g", "Past", 0, 0) {
		t.Fatal("offset 0 is still in flight after the batch ack")
	}
	warned := logLines(logs, "BATCH_ACK_MESSAGE named offsets past the queue's end: skipped, the answer says SUCCESS")
	if len(warned) != 1 {
		t.Fatalf("%d warnings, want 1; log:\n%s", len(warned), logs.String())
	}
	w := warned[0]
	if w["level"] != "warn" || w["group"] != "g" || w["topic"] != "Past" || w["maxOffset"] != float64(1) ||
		w["offsets"] != float64(1) || w["first"] != float64(5) || w["last"] != float64(5) {
		t.Errorf("warning %v, want group g, topic Past, maxOffset 1, one offset: 5", w)
	}
	// An ack within the queue says nothing.
	seen := len(logs.String())
	mustSend(t, rc, "Past", 0, "y", "")
	b.caughtUp()
	res = mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "Past", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
	if code, err := c.BatchAck(ctx20(t), "g", "Past", res.Messages); err != nil || code != remoting.Success {
		t.Fatalf("batch ack within the queue: %d %v", code, err)
	}
	if later := logs.String()[seen:]; strings.Contains(later, "past the queue's end") {
		t.Errorf("a batch ack within the queue warned:\n%s", later)
	}
}
