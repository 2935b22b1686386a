package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// Under enableLmq a send straight to a light message queue is taken
// whatever autoCreateTopicEnable says: its config is the fixed one-queue
// one (RocketMQ's LmqTopicConfigManager.selectTopicConfig).
func TestASendToALightMessageQueueUsesItsFixedConfig(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enableLmq": "true", "enableMultiDispatch": "true", "autoCreateTopicEnable": "false"})
	c := b.client(nil)
	r := sendV2(t, c, "%LMQ%dev1", 0, "direct", "")
	if r.Code != remoting.Success {
		t.Fatalf("send to %%LMQ%%dev1: %d %s, want SUCCESS (RocketMQ: the LMQ has a fixed one-queue config)", r.Code, r.Remark)
	}
}

// With auto-create on, a direct send to a light message queue stores no
// topic config for it (RocketMQ stores none), and a queue id past its one
// queue is refused: a message there would never be consumed.
func TestASendToALightMessageQueueHasOneQueue(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enableLmq": "true", "enableMultiDispatch": "true"})
	c := b.client(nil)
	r := sendV2(t, c, "%LMQ%dev2", 2, "direct", "")
	if tc, ok, _ := b.topics.table.Get("%LMQ%dev2"); ok {
		t.Errorf("a send stored a topic config for the LMQ: %d/%d queues", tc.ReadQueueNums, tc.WriteQueueNums)
	}
	if r.Code != remoting.InvalidParameter {
		t.Fatalf("send to %%LMQ%%dev2 queue 2: %d %s, want INVALID_PARAMETER (an LMQ has one queue)", r.Code, r.Remark)
	}
}

// A key of KEYS is a word between single spaces (RocketMQ's
// KEY_SEPARATOR " "), so a key holding another white-space character is
// indexed whole and found by a query for it.
func TestAQueryFindsKeysHoldingOtherSpaces(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for _, key := range []string{"order\t1", "订单\u3000123"} {
		mustSend(t, c, "KT", 0, "body", "KEYS\x01"+key+"\x02")
		b.caughtUp()
		r := call(t, c, remoting.QueryMessage, map[string]string{"topic": "KT", "key": key, "maxNum": "32",
			"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)}, nil)
		if r.Code != remoting.Success {
			t.Errorf("query by key %q: %d %s, want SUCCESS", key, r.Code, r.Remark)
		}
	}
}

// A batch whose header carries a delay level is refused
// (MESSAGE_ILLEGAL), as RocketMQ's CommitLog.asyncPutMessages refuses it,
// not stored for immediate delivery.
func TestABatchWithADelayLevelIsRefused(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	var body []byte
	for i := 0; i < 2; i++ {
		var err error
		if body, err = commitlog.AppendBatchItem(body, 0, []byte("b"+strconv.Itoa(i)), "UNIQ_KEY\x01u"+strconv.Itoa(i)+"\x02"); err != nil {
			t.Fatal(err)
		}
	}
	r := call(t, c, remoting.SendBatchMessage, map[string]string{
		"a": "pg", "b": "BT", "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "DELAY\x013\x02", "m": "true",
	}, body)
	if r.Code != remoting.MessageIllegal {
		t.Fatalf("batch with DELAY=3: %d %s, want MESSAGE_ILLEGAL", r.Code, r.Remark)
	}
}

// BenchmarkTest, the default topic of RocketMQ's benchmark producer, is
// created at start with 1024 queues as RocketMQ's TopicConfigManager
// creates it (an administrator cannot: it is a system topic name).
func TestTheBenchmarkTopicExists(t *testing.T) {
	b := startTestBroker(t, map[string]string{"autoCreateTopicEnable": "false"})
	c := b.client(nil)
	if r := sendV2(t, c, "BenchmarkTest", 1000, "bench", ""); r.Code != remoting.Success {
		t.Fatalf("send to BenchmarkTest queue 1000: %d %s, want SUCCESS", r.Code, r.Remark)
	}
}

// A record marked an inner batch (sysFlag 0x80), which a Java consumer
// unpacks into INNER_NUM messages numbered over the records after it, and
// INNER_NUM on a message that is none, are refused as RocketMQ's
// innerBatchChecker refuses them: only a BatchCQ topic takes them, and
// this broker has none. Nothing is stored. The checker sees a batch's
// header, not its messages: one of them may carry INNER_NUM (no consumer
// unpacks a record without the flag).
func TestInnerBatchMarksAreRefused(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	var batch []byte
	for i := range 3 {
		var err error
		if batch, err = commitlog.AppendBatchItem(batch, 0, []byte("b"+strconv.Itoa(i)), ""); err != nil {
			t.Fatal(err)
		}
	}
	header := func(sysFlag int, props string, isBatch bool) map[string]string {
		return map[string]string{"a": "pg", "b": "IB", "c": "TBW102", "d": "4", "e": "0", "f": strconv.Itoa(sysFlag),
			"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": props, "m": strconv.FormatBool(isBatch)}
	}
	withInnerNum, err := commitlog.AppendBatchItem(nil, 0, []byte("x"), "INNER_NUM\x013\x02")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		code int32
		ext  map[string]string
		body []byte
	}{
		{"a single send flagged an inner batch", remoting.SendMessageV2, header(0xC0, "", false), batch},
		{"a single send with INNER_NUM", remoting.SendMessageV2, header(0, "INNER_NUM\x013\x02", false), []byte("x")},
		{"a batch flagged an inner batch", remoting.SendBatchMessage, header(0xC0, "", true), batch},
		{"a batch whose header has INNER_NUM", remoting.SendBatchMessage, header(0, "INNER_NUM\x013\x02", true), batch},
	} {
		if r := call(t, c, tc.code, tc.ext, tc.body); r.Code != remoting.MessageIllegal {
			t.Errorf("%s: %d %s, want MESSAGE_ILLEGAL", tc.name, r.Code, r.Remark)
		}
	}
	if end := b.clog.MaxOffset(); end != 0 {
		t.Fatalf("refused sends wrote the CommitLog up to %d", end)
	}
	if r := call(t, c, remoting.SendBatchMessage, header(0, "", true), withInnerNum); r.Code != remoting.Success {
		t.Fatalf("a batch message with INNER_NUM: %d %s, want SUCCESS as RocketMQ", r.Code, r.Remark)
	}
}

// A single send's WAIT property is stored with the message, as RocketMQ
// 5 stores the client's properties (4.x dropped it): a consumer reads
// isWaitStoreMsgOK as the producer set it.
func TestASendKeepsItsWaitProperty(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "WaitT", 0, "x", "WAIT\x01false\x02TAGS\x01a\x02")
	ms := pullAll(t, b, c, "WaitT", 0)
	if len(ms) != 1 {
		t.Fatalf("pulled %d messages", len(ms))
	}
	if v, ok := commitlog.LookupProperty(ms[0].Properties, "WAIT"); !ok || v != "false" {
		t.Fatalf("stored WAIT = %q (present %v), want the producer's false", v, ok)
	}
}

// A batch's answer carries the batch's own UNIQ_KEY as transactionId, as
// RocketMQ answers it (the Java client's SendResult.getTransactionId).
func TestABatchAnswersItsUniqKey(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	body, err := commitlog.AppendBatchItem(nil, 0, []byte("b0"), "UNIQ_KEY\x01u0\x02")
	if err != nil {
		t.Fatal(err)
	}
	r := call(t, c, remoting.SendBatchMessage, map[string]string{
		"a": "pg", "b": "BU", "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "UNIQ_KEY\x01BATCH-UNIQ\x02", "m": "true",
	}, body)
	if r.Code != remoting.Success || r.ExtFields["transactionId"] != "BATCH-UNIQ" {
		t.Fatalf("batch answer %d %s %v, want SUCCESS with transactionId BATCH-UNIQ", r.Code, r.Remark, r.ExtFields)
	}
}

// A batch's items are stored with their own properties only: not the
// batch header's WAIT, UNIQ_KEY or the broker's CLUSTER, which RocketMQ
// 4.9 to 5.3.3 appended to every item (so that a Java consumer read the
// batch's UNIQ_KEY, the last one, as every item's message id) and stopped
// appending in 5.3.4 (apache/rocketmq#9416).
func TestBatchItemsKeepOnlyTheirOwnProperties(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	var body []byte
	for i, props := range []string{"UNIQ_KEY\x01item0\x02TAGS\x01a\x02", "UNIQ_KEY\x01item1\x02"} {
		var err error
		if body, err = commitlog.AppendBatchItem(body, 0, []byte{byte('0' + i)}, props); err != nil {
			t.Fatal(err)
		}
	}
	r := call(t, c, remoting.SendBatchMessage, map[string]string{
		"a": "pg", "b": "BatchPropsT", "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "WAIT\x01true\x02UNIQ_KEY\x01BATCH\x02", "m": "true",
	}, body)
	if r.Code != remoting.Success {
		t.Fatalf("batch send: %d %s", r.Code, r.Remark)
	}
	ms := pullAll(t, b, c, "BatchPropsT", 0)
	want := []string{"UNIQ_KEY\x01item0\x02TAGS\x01a\x02", "UNIQ_KEY\x01item1\x02"}
	if len(ms) != len(want) {
		t.Fatalf("pulled %d messages, want %d", len(ms), len(want))
	}
	for i, m := range ms {
		if m.Properties != want[i] {
			t.Errorf("item %d stored with properties %q, want its own %q", i, m.Properties, want[i])
		}
	}
}

// A DELAY property that is no 32-bit integer is refused with
// SYSTEM_ERROR and nothing is stored, single send or batch header, as
// RocketMQ's store fails on it (Integer.parseInt before any put) instead
// of storing the message undelayed. A negative level is a number: the
// message is stored at once, and so is one with an empty DELAY, which
// RocketMQ's property parser drops.
func TestADelayPropertyThatIsNoNumberIsRefused(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for _, v := range []string{"soon", " 3", "3.0", "2147483648"} {
		if r := sendV2(t, c, "DelayJunkT", 0, "x", "DELAY\x01"+v+"\x02"); r.Code != remoting.SystemError {
			t.Errorf("send with DELAY=%q: %d %s, want SYSTEM_ERROR", v, r.Code, r.Remark)
		}
	}
	batch, err := commitlog.AppendBatchItem(nil, 0, []byte("b"), "")
	if err != nil {
		t.Fatal(err)
	}
	r := call(t, c, remoting.SendBatchMessage, map[string]string{
		"a": "pg", "b": "DelayJunkT", "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "DELAY\x01three\x02", "m": "true",
	}, batch)
	if r.Code != remoting.SystemError {
		t.Errorf("batch with DELAY=three: %d %s, want SYSTEM_ERROR", r.Code, r.Remark)
	}
	if got := pullAll(t, b, c, "DelayJunkT", 0); len(got) != 0 {
		t.Fatalf("refused sends stored %d messages", len(got))
	}
	mustSend(t, c, "DelayJunkT", 0, "now", "DELAY\x01-1\x02")
	mustSend(t, c, "DelayJunkT", 0, "now too", "DELAY\x01\x02")
	if got := pullAll(t, b, c, "DelayJunkT", 0); len(got) != 2 || string(got[0].Body) != "now" {
		t.Fatalf("sends with DELAY=-1 and an empty DELAY stored %d messages in their topic, want 2 at once", len(got))
	}
}
