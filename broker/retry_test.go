package broker

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

func TestSendBackRetriesWithDelayThenDLQ(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "Orders", 0, "order-1", "TAGS\x01t\x02")
	b.caughtUp()
	orig := pullAll(t, b, c, "Orders", 0)
	if len(orig) != 1 {
		t.Fatal("original message not readable")
	}
	// Delay level 1 (1 s): parked in SCHEDULE_TOPIC_XXXX, then delivered
	// to %RETRY%g1 with the reconsume count raised.
	r := call(t, c, remoting.ConsumerSendMsgBack, map[string]string{
		"offset": strconv.FormatInt(orig[0].PhyOffset, 10), "group": "g1", "delayLevel": "1",
		"originMsgId": commitlog.MessageID(orig[0].StoreHost, orig[0].PhyOffset), "originTopic": "Orders",
	}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("send back: %d %s", r.Code, r.Remark)
	}
	if got := pullAll(t, b, c, "SCHEDULE_TOPIC_XXXX", 0); len(got) != 1 {
		t.Fatalf("retry not parked at delay level 1: %d", len(got))
	}
	var retry []commitlog.Message
	deadline := time.Now().Add(10 * time.Second)
	for len(retry) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		retry = pullAll(t, b, c, "%RETRY%g1", 0)
	}
	if len(retry) != 1 {
		t.Fatal("retry message not delivered to the retry topic of g1")
	}
	m := retry[0]
	props := commitlog.ParseProperties(m.Properties)
	if string(m.Body) != "order-1" || m.ReconsumeTimes != 1 || props["RETRY_TOPIC"] != "Orders" ||
		props["ORIGIN_MESSAGE_ID"] != commitlog.MessageID(orig[0].StoreHost, orig[0].PhyOffset) || props["TAGS"] != "t" {
		t.Fatalf("retry message %+v props %v", m, props)
	}
	// RocketMQ's schedule service stores the delivered message with the
	// properties string it was parked with: DELAY, REAL_TOPIC and
	// REAL_QID stay.
	if props["DELAY"] != "1" || props["REAL_TOPIC"] != "%RETRY%g1" || props["REAL_QID"] != "0" {
		t.Fatalf("delivered retry without the DELAY, REAL_TOPIC and REAL_QID it was parked with: %v", props)
	}
	if props["WAIT"] != "false" {
		t.Fatalf("retry stored without the WAIT=false RocketMQ's send-back sets: %v", props)
	}
	if m.StoreTimestamp-orig[0].StoreTimestamp < 900 {
		t.Fatalf("retry delivered after %d ms, before its 1 s delay", m.StoreTimestamp-orig[0].StoreTimestamp)
	}
	// A negative delay level sends the message straight to the DLQ.
	r = call(t, c, remoting.ConsumerSendMsgBack, map[string]string{
		"offset": strconv.FormatInt(m.PhyOffset, 10), "group": "g1", "delayLevel": "-1"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("send back to DLQ: %d %s", r.Code, r.Remark)
	}
	dlq := pullAll(t, b, c, "%DLQ%g1", 0)
	if len(dlq) != 1 || dlq[0].ReconsumeTimes != 2 || string(dlq[0].Body) != "order-1" {
		t.Fatalf("DLQ message: %+v", dlq)
	}
	// As RocketMQ's consumerSendMsgBack stores it: the retry's properties
	// with the topic first sent to and the first record's offset id kept
	// (RETRY_TOPIC, ORIGIN_MESSAGE_ID), the producer's id (UNIQ_KEY),
	// WAIT=false and a spent DELAY=0, and no DLQ_ORIGIN_* it never writes.
	dp := commitlog.ParseProperties(dlq[0].Properties)
	if dp["RETRY_TOPIC"] != "Orders" || dp["ORIGIN_MESSAGE_ID"] != props["ORIGIN_MESSAGE_ID"] ||
		dp["UNIQ_KEY"] == "" || dp["UNIQ_KEY"] != commitlog.ParseProperties(orig[0].Properties)["UNIQ_KEY"] ||
		dp["DELAY"] != "0" || dp["WAIT"] != "false" || dp["TAGS"] != "t" {
		t.Fatalf("DLQ message properties %v", dp)
	}
	for _, k := range []string{"DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID"} {
		if v, ok := dp[k]; ok {
			t.Errorf("DLQ message has %s=%q, which RocketMQ's send-back does not write", k, v)
		}
	}
	// Unknown offsets are refused, not crashed on.
	r = call(t, c, remoting.ConsumerSendMsgBack, map[string]string{"offset": "999999999", "group": "g1", "delayLevel": "0"}, nil)
	if r.Code != remoting.SystemError {
		t.Fatalf("send back of an unknown offset: %d", r.Code)
	}
}

func TestRetryTopicSendOverMaxGoesToDLQ(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	// The client's delay level for the retry (3 + reconsume times).
	h := map[string]string{"a": "pg", "b": "%RETRY%g2", "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": "1", "h": "0", "i": "DELAY\x0120\x02", "j": "17"}
	r := call(t, c, remoting.SendMessageV2, h, []byte("too many"))
	if r.Code != remoting.Success {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	got := pullAll(t, b, c, "%DLQ%g2", 0)
	if len(got) != 1 || string(got[0].Body) != "too many" {
		t.Fatalf("a retry past retryMaxTimes (16) not in the DLQ: %v", got)
	}
	// As RocketMQ's handleRetryAndDLQ: the DLQ copy's level is spent,
	// stored as -1 (the properties it keeps are the request's, where it
	// put -1), and no DLQ_ORIGIN_TOPIC is written.
	p := commitlog.ParseProperties(got[0].Properties)
	if d := p["DELAY"]; d != "-1" {
		t.Errorf("DLQ copy's DELAY %q, want -1", d)
	}
	if v, ok := p["DLQ_ORIGIN_TOPIC"]; ok {
		t.Errorf("DLQ copy has DLQ_ORIGIN_TOPIC=%q, which RocketMQ does not write", v)
	}
	h["j"] = "2"
	h["i"] = ""
	if r := call(t, c, remoting.SendMessageV2, h, []byte("retry")); r.Code != remoting.Success {
		t.Fatal(r.Remark)
	}
	if got := pullAll(t, b, c, "%RETRY%g2", 0); len(got) != 1 {
		t.Fatalf("a retry under the limit not in the retry topic: %v", got)
	}
}

func TestDelayLevelMessage(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	resp := mustSend(t, c, "Delayed", 2, "later", "DELAY\x012\x02") // 5 s
	if header(t, resp, "queueId") != 2 {
		t.Fatalf("the producer sees its own queue: %v", resp.ExtFields)
	}
	if got := pullAll(t, b, c, "Delayed", 2); len(got) != 0 {
		t.Fatal("delayed message visible at once")
	}
	sched := pullAll(t, b, c, "SCHEDULE_TOPIC_XXXX", 1)
	if len(sched) != 1 {
		t.Fatal("not parked in SCHEDULE_TOPIC_XXXX queue 1")
	}
	props := commitlog.ParseProperties(sched[0].Properties)
	if props["REAL_TOPIC"] != "Delayed" || props["REAL_QID"] != "2" {
		t.Fatalf("parked properties %v", props)
	}
	// The dispatcher gives it the delivery time as tag code.
	entries, _ := b.cqs.Get("SCHEDULE_TOPIC_XXXX", 1, 0, 1)
	if len(entries) != 1 || entries[0].TagsCode != sched[0].StoreTimestamp+5000 {
		t.Fatalf("schedule entry tag code %v, want store time + 5000", entries)
	}
	var got []commitlog.Message
	deadline := time.Now().Add(15 * time.Second)
	for len(got) == 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		got = pullAll(t, b, c, "Delayed", 2)
	}
	if len(got) != 1 || string(got[0].Body) != "later" {
		t.Fatal("delayed message never delivered")
	}
	if p := commitlog.ParseProperties(got[0].Properties); p["DELAY"] != "2" || p["REAL_TOPIC"] != "Delayed" || p["REAL_QID"] != "2" {
		t.Fatalf("delivered without the DELAY, REAL_TOPIC and REAL_QID RocketMQ leaves on it: %v", p)
	}
	if d := got[0].StoreTimestamp - sched[0].StoreTimestamp; d < 4900 {
		t.Fatalf("delivered after %d ms, before its 5 s delay", d)
	}
}

func TestQueryAndViewMessage(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	resp := mustSend(t, c, "Q", 0, "with keys", "KEYS\x01order-7 customer-3\x02UNIQ_KEY\x01AB12\x02")
	mustSend(t, c, "Q", 0, "other", "KEYS\x01order-8\x02")
	b.caughtUp()
	query := func(key string, uniq bool) *remoting.Command {
		h := map[string]string{"topic": "Q", "key": key, "maxNum": "10", "beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().UnixMilli()+1000, 10)}
		if uniq {
			h["_UNIQUE_KEY_QUERY"] = "true"
		}
		return call(t, c, remoting.QueryMessage, h, nil)
	}
	r := query("customer-3", false)
	if msgs := decodeRecords(t, r.Body); r.Code != remoting.Success || len(msgs) != 1 || string(msgs[0].Body) != "with keys" {
		t.Fatalf("query by key: %d", r.Code)
	}
	if r := query("AB12", true); r.Code != remoting.Success || len(decodeRecords(t, r.Body)) != 1 {
		t.Fatalf("query by unique key: %d", r.Code)
	}
	if r := query("nothing", false); r.Code != remoting.QueryNotFound {
		t.Fatalf("query of an unknown key: %d", r.Code)
	}

	// The index keeps no store time per entry, so the time range is
	// applied to the records: of two messages with one key in the same
	// index bucket, a range covering one returns only that one.
	mustSend(t, c, "Q", 0, "early", "KEYS\x01shared\x02")
	time.Sleep(20 * time.Millisecond)
	mustSend(t, c, "Q", 0, "late", "KEYS\x01shared\x02")
	b.caughtUp()
	inRange := func(begin, end int64) []string {
		t.Helper()
		r := call(t, c, remoting.QueryMessage, map[string]string{"topic": "Q", "key": "shared", "maxNum": "10",
			"beginTimestamp": strconv.FormatInt(begin, 10), "endTimestamp": strconv.FormatInt(end, 10)}, nil)
		if r.Code == remoting.QueryNotFound {
			return nil
		}
		var bodies []string
		for _, m := range decodeRecords(t, r.Body) {
			bodies = append(bodies, string(m.Body))
		}
		slices.Sort(bodies)
		return bodies
	}
	now := time.Now().UnixMilli()
	all := call(t, c, remoting.QueryMessage, map[string]string{"topic": "Q", "key": "shared", "maxNum": "10",
		"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(now+1000, 10)}, nil)
	var lateTS int64
	for _, m := range decodeRecords(t, all.Body) {
		if string(m.Body) == "late" {
			lateTS = m.StoreTimestamp
		}
	}
	if got := inRange(0, now+1000); !slices.Equal(got, []string{"early", "late"}) {
		t.Fatalf("whole range: %v", got)
	}
	if got := inRange(lateTS, now+1000); !slices.Equal(got, []string{"late"}) {
		t.Fatalf("range from the later store time %d: %v", lateTS, got)
	}
	if got := inRange(0, lateTS-1); !slices.Equal(got, []string{"early"}) {
		t.Fatalf("range up to before the later store time: %v", got)
	}
	if got := inRange(now+60_000, now+120_000); got != nil {
		t.Fatalf("future range: %v", got)
	}
	_, phy, err := commitlog.ParseMessageID(resp.ExtFields["msgId"])
	if err != nil {
		t.Fatal(err)
	}
	v := call(t, c, remoting.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(phy, 10)}, nil)
	if msgs := decodeRecords(t, v.Body); v.Code != remoting.Success || len(msgs) != 1 || string(msgs[0].Body) != "with keys" {
		t.Fatalf("view by id: %d", v.Code)
	}
	if v := call(t, c, remoting.ViewMessageByID, map[string]string{"offset": "123456789"}, nil); v.Code != remoting.SystemError {
		t.Fatalf("view of an unknown offset: %d", v.Code)
	}
}

func TestConsumerOffsetsAndRestart(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	c := b.client(nil)
	for i := 0; i < 5; i++ {
		mustSend(t, c, "Off", 0, "m", "")
	}
	b.caughtUp()
	q := map[string]string{"consumerGroup": "og", "topic": "Off", "queueId": "0"}
	// A young queue starting at 0 answers 0 to a new group (RocketMQ's
	// "message at 0 still in memory" rule); so does an empty one (where
	// RocketMQ answers not found, which ali-ons reports as an error).
	if r := call(t, c, remoting.QueryConsumerOffset, q, nil); r.Code != remoting.Success || header(t, r, "offset") != 0 {
		t.Fatalf("new group on a young queue: %d %v", r.Code, r.ExtFields)
	}
	empty := map[string]string{"consumerGroup": "og", "topic": "Off", "queueId": "1"}
	if r := call(t, c, remoting.QueryConsumerOffset, empty, nil); r.Code != remoting.Success || header(t, r, "offset") != 0 {
		t.Fatalf("new group on an empty queue: %d %v", r.Code, r.ExtFields)
	}
	upd := map[string]string{"consumerGroup": "og", "topic": "Off", "queueId": "0", "commitOffset": "3"}
	if r := call(t, c, remoting.UpdateConsumerOffset, upd, nil); r.Code != remoting.SubscriptionGroupNotExist {
		t.Fatalf("commit for a group that does not exist: %d %s", r.Code, r.Remark)
	}
	ensureGroup(t, c, "og")
	if r := call(t, c, remoting.UpdateConsumerOffset, upd, nil); r.Code != remoting.Success {
		t.Fatal(r.Remark)
	}
	if r := call(t, c, remoting.QueryConsumerOffset, q, nil); header(t, r, "offset") != 3 {
		t.Fatalf("committed offset %v", r.ExtFields)
	}
	if r := call(t, c, remoting.GetMaxOffset, map[string]string{"topic": "Off", "queueId": "0"}, nil); header(t, r, "offset") != 5 {
		t.Fatalf("max offset %v", r.ExtFields)
	}
	if r := call(t, c, remoting.SearchOffsetByTimestamp, map[string]string{"topic": "Off", "queueId": "0", "timestamp": "0"}, nil); header(t, r, "offset") != 0 {
		t.Fatalf("search by time before the start %v", r.ExtFields)
	}
	if r := call(t, c, remoting.GetEarliestMsgStoretime, map[string]string{"topic": "Off", "queueId": "0"}, nil); header(t, r, "timestamp") <= 0 {
		t.Fatalf("earliest store time %v", r.ExtFields)
	}
	b.stop()

	b2 := startTestBrokerAt(t, store, nil)
	c2 := b2.client(nil)
	if r := call(t, c2, remoting.QueryConsumerOffset, q, nil); header(t, r, "offset") != 3 {
		t.Fatalf("committed offset after restart %v", r.ExtFields)
	}
	if got := pullAll(t, b2, c2, "Off", 0); len(got) != 5 {
		t.Fatalf("%d messages after restart, want 5", len(got))
	}
	resp := mustSend(t, c2, "Off", 0, "after", "")
	if header(t, resp, "queueOffset") != 5 {
		t.Fatalf("queue offset after restart %d, want 5", header(t, resp, "queueOffset"))
	}
}

// TestMessageIndexDisabled checks messageIndexEnable=false: messages are
// still stored and pulled, nothing is written to the key index, and a
// query by key or unique key answers QUERY_NOT_FOUND with a remark that
// says why.
func TestMessageIndexDisabled(t *testing.T) {
	b := startTestBroker(t, map[string]string{"messageIndexEnable": "false"})
	c := b.client(nil)
	mustSend(t, c, "NoIdx", 0, "with keys", "KEYS\x01order-7\x02UNIQ_KEY\x01CD34\x02")
	b.caughtUp()
	r := call(t, c, remoting.PullMessage, pullReq("g", "NoIdx", 0, 0, 0, 0, "*"), nil)
	if msgs := decodeRecords(t, r.Body); r.Code != remoting.Success || len(msgs) != 1 || string(msgs[0].Body) != "with keys" {
		t.Fatalf("pull: %d %q", r.Code, r.Remark)
	}
	entries := 0
	if err := b.db.Scan([]byte{kvindex.PrefixKeyIndex}, func(_, _ []byte) bool { entries++; return true }); err != nil {
		t.Fatal(err)
	}
	if entries != 0 {
		t.Fatalf("%d key-index entries with the index off", entries)
	}
	for _, uniq := range []bool{false, true} {
		h := map[string]string{"topic": "NoIdx", "key": "order-7", "maxNum": "10", "beginTimestamp": "0",
			"endTimestamp": strconv.FormatInt(time.Now().UnixMilli()+1000, 10)}
		if uniq {
			h["key"], h["_UNIQUE_KEY_QUERY"] = "CD34", "true"
		}
		q := call(t, c, remoting.QueryMessage, h, nil)
		if q.Code != remoting.QueryNotFound || !strings.Contains(q.Remark, "messageIndexEnable=false") {
			t.Fatalf("query (unique %v) with the index off: %d %q", uniq, q.Code, q.Remark)
		}
	}
}

// Under SYNC_FLUSH the scheduler advances a level's progress only with the
// messages it delivered flushed: while the flush is held up the delivered
// copy is in the log and the progress stays before it.
func TestDelayLevelMessageUnderSyncFlush(t *testing.T) {
	var stalled atomic.Bool
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{"flushDiskType": "SYNC_FLUSH"}, func(b *Broker) {
		b.beforeFlush = func() {
			for stalled.Load() {
				time.Sleep(5 * time.Millisecond)
			}
		}
	})
	t.Cleanup(func() { stalled.Store(false) }) // registered after the broker's: runs before its shutdown
	c := b.client(nil)
	mustSend(t, c, "DelayedSync", 0, "later", "DELAY\x011\x02") // 1 s; flushed when the send answers
	parked := b.clog.MaxOffset()
	stalled.Store(true)
	progress := func() int64 {
		t.Helper()
		off, _, err := b.offsets.Get(scheduleOffsetGroup, meta.ScheduleTopic, 0)
		if err != nil {
			t.Fatal(err)
		}
		return off
	}
	waitFor(t, "the delivered copy appended", func() bool { return b.clog.MaxOffset() > parked })
	time.Sleep(300 * time.Millisecond) // rounds of the scheduler with the flush held up
	if flushed, end := b.clog.FlushedOffset(), b.clog.MaxOffset(); flushed >= end {
		t.Fatalf("the delivered copy was flushed (%d of %d) with the flush held up", flushed, end)
	}
	if p := progress(); p != 0 {
		t.Fatalf("level 1 progress %d with the delivered copy unflushed, want 0", p)
	}
	stalled.Store(false)
	waitFor(t, "level 1 progress past the delivery", func() bool { return progress() == 1 })
	got := pullAll(t, b, c, "DelayedSync", 0)
	if len(got) != 1 || string(got[0].Body) != "later" {
		t.Fatalf("delivered %d messages under SYNC_FLUSH, want the one sent", len(got))
	}
	if end := got[0].PhyOffset + int64(got[0].StoreSize); b.clog.FlushedOffset() < end {
		t.Fatalf("progress recorded with the delivered message unflushed: flushed %d < %d", b.clog.FlushedOffset(), end)
	}
}

// A flush slower than syncFlushTimeout under SYNC_FLUSH makes the
// scheduler and the timer wait for it, not deliver their due messages a
// second time: the copies they delivered are in the log already.
func TestStalledFlushDeliversOnce(t *testing.T) {
	var stalled atomic.Bool
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{
		"flushDiskType": "SYNC_FLUSH", "syncFlushTimeout": "100", "timerPrecisionMs": "100",
	}, func(b *Broker) {
		b.beforeFlush = func() {
			if stalled.Load() {
				time.Sleep(350 * time.Millisecond)
			}
		}
	})
	c := b.client(nil)
	for _, m := range []struct{ topic, body, props string }{
		{"StallDelay", "level 1", "DELAY\x011\x02"},           // 1 s
		{"StallTimer", "timer", "TIMER_DELAY_MS\x011000\x02"}, // 1 s
	} {
		// A flush slower than the 100 ms timeout on a busy machine
		// answers FLUSH_DISK_TIMEOUT; the message is stored either way.
		if r := sendV2(t, c, m.topic, 0, m.body, m.props); r.Code != remoting.Success && r.Code != remoting.FlushDiskTimeout {
			t.Fatalf("send to %s: code %d %s", m.topic, r.Code, r.Remark)
		}
	}
	stalled.Store(true)
	waitDelivered(t, b, c, "StallDelay", 0, 1)
	waitDelivered(t, b, c, "StallTimer", 0, 1)
	time.Sleep(1500 * time.Millisecond) // four stalled flushes, each past three timeouts
	stalled.Store(false)
	waitFor(t, "the level's progress past the delivered message", func() bool {
		off, _, err := b.offsets.Get(scheduleOffsetGroup, meta.ScheduleTopic, 0)
		return err == nil && off == 1
	})
	time.Sleep(500 * time.Millisecond) // rounds of both services after the stall
	for _, topic := range []string{"StallDelay", "StallTimer"} {
		if got := pullAll(t, b, c, topic, 0); len(got) != 1 {
			t.Errorf("%s: delivered %d times through a stalled flush, want once", topic, len(got))
		}
	}
}

// A put that fails in the middle of a delay level's round leaves the
// level's progress past the messages delivered before it: they are not
// delivered again when the next rounds retry the failed one.
func TestScheduleRoundFailingMidwayKeepsItsProgress(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	b := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) {
		b.beforePut = func(msgs []*commitlog.Message) error {
			if msgs[0].Topic == "MidRound" && string(msgs[0].Body) == "m1" && failing.Load() {
				return errors.New("injected append failure")
			}
			return nil
		}
	})
	c := b.client(nil)
	for _, body := range []string{"m0", "m1", "m2"} {
		mustSend(t, c, "MidRound", 0, body, "DELAY\x011\x02") // 1 s
	}
	waitDelivered(t, b, c, "MidRound", 0, 1)
	time.Sleep(500 * time.Millisecond) // five rounds failing on m1
	failing.Store(false)
	waitDelivered(t, b, c, "MidRound", 0, 3)
	time.Sleep(300 * time.Millisecond)
	got := pullAll(t, b, c, "MidRound", 0)
	var bodies []string
	for _, m := range got {
		bodies = append(bodies, string(m.Body))
	}
	if strings.Join(bodies, " ") != "m0 m1 m2" {
		t.Fatalf("delivered %v, want each of m0 m1 m2 once, in order", bodies)
	}
}

// A send to a group's %RETRY% topic while the group holds an unexpired
// queue lock goes to its %DLQ% topic at once, as RocketMQ's
// handleRetryAndDLQ does: the Java orderly consumer sends a message back
// only when it gives up on it. Without a lock it is a retry.
func TestRetrySendOfAnOrderlyGroupGoesToTheDLQ(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	retry := func(group, body string) {
		t.Helper()
		r := call(t, c, remoting.SendMessageV2, map[string]string{
			"a": "pg", "b": "%RETRY%" + group, "c": "TBW102", "d": "1", "e": "0", "f": "0",
			"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "", "j": "3", "l": "16",
		}, []byte(body))
		if r.Code != remoting.Success {
			t.Fatalf("send to %%RETRY%%%s: %d %s", group, r.Code, r.Remark)
		}
	}
	retry("free", "retried")
	lock := `{"consumerGroup":"ordered","clientId":"A","mqSet":[{"topic":"T","brokerName":"broker-a","queueId":0}]}`
	if r := call(t, c, remoting.LockBatchMQ, nil, []byte(lock)); r.Code != remoting.Success {
		t.Fatalf("lock: %d %s", r.Code, r.Remark)
	}
	retry("ordered", "given up")
	b.caughtUp()
	if got := pullAll(t, b, c, "%RETRY%free", 0); len(got) != 1 || string(got[0].Body) != "retried" {
		t.Fatalf("a group without locks: %d messages in its retry topic, want the retry", len(got))
	}
	if got := pullAll(t, b, c, "%DLQ%ordered", 0); len(got) != 1 || string(got[0].Body) != "given up" {
		t.Fatalf("a group holding a lock: %d messages in its DLQ, want the one sent back", len(got))
	}
	if got := pullAll(t, b, c, "%RETRY%ordered", 0); len(got) != 0 {
		t.Fatalf("a group holding a lock: %d messages in its retry topic", len(got))
	}
}

// messageDelayLevel sets the delays of the levels, beyond RocketMQ's
// eighteen too: level 20 of a twenty-level list is parked in queue 19 with
// its own delivery time and delivered after it; a level past the last
// uses the last. A list that does not parse stops the broker with an
// error naming the key.
func TestCustomMessageDelayLevels(t *testing.T) {
	levels := strings.Repeat("2h ", 18) + "3s 1s"
	b := startTestBroker(t, map[string]string{"messageDelayLevel": levels})
	c := b.client(nil)
	mustSend(t, c, "CustomDelay", 0, "level 20", "DELAY\x0120\x02") // 1 s
	mustSend(t, c, "CustomDelay", 1, "level 25", "DELAY\x0125\x02") // past the last: 1 s
	b.caughtUp()
	// Queue 19 is past the schedule topic's 18 queues (RocketMQ's
	// topic config too): the schedule service reads it all the same.
	entries, err := b.cqs.Get(meta.ScheduleTopic, 19, 0, 2)
	if err != nil || len(entries) != 2 {
		t.Fatalf("SCHEDULE_TOPIC_XXXX queue 19 holds %v (%v), want both messages (level 20, and 25 taken as 20)", entries, err)
	}
	for i, e := range entries {
		_, parked, ok, err := b.readRecord(e.PhyOffset)
		if err != nil || !ok || e.TagsCode != parked.StoreTimestamp+1000 {
			t.Fatalf("schedule entry %d: tag code %d, parked at %d (%v), want the delivery time store time + 1000", i, e.TagsCode, parked.StoreTimestamp, err)
		}
	}
	for qid, body := range map[int32]string{0: "level 20", 1: "level 25"} {
		got := waitDelivered(t, b, c, "CustomDelay", qid, 1)
		if string(got[0].Body) != body || got[0].StoreTimestamp < entries[qid].TagsCode-50 {
			t.Fatalf("queue %d delivered %q at %d, due at %d", qid, got[0].Body, got[0].StoreTimestamp, entries[qid].TagsCode)
		}
	}

	if _, err := configs.LoadBroker("", map[string]string{"messageDelayLevel": "1s 5x"}); err == nil ||
		!strings.Contains(err.Error(), "messageDelayLevel") {
		t.Fatalf("messageDelayLevel \"1s 5x\": %v, want an error naming the key", err)
	}
}

// A pull's answer holds at most maxTransferCountOnMessageInMemory messages
// and maxTransferBytesOnMessageInMemory bytes (RocketMQ's 32 and 256 KiB by
// default), whatever the client asks for; the first message goes whatever
// its size.
func TestPullTransferLimits(t *testing.T) {
	pull := func(t *testing.T, b *testBroker, topic string, maxNums int) []commitlog.Message {
		t.Helper()
		req := pullReq("g", topic, 0, 0, 0, 0, "*")
		req["maxMsgNums"] = strconv.Itoa(maxNums)
		r := call(t, b.client(nil), remoting.PullMessage, req, nil)
		if r.Code != remoting.Success {
			t.Fatalf("pull %s: %d %s", topic, r.Code, r.Remark)
		}
		return decodeRecords(t, r.Body)
	}
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for i := range 50 {
		mustSend(t, c, "Many", 0, fmt.Sprintf("m%d", i), "")
	}
	big := strings.Repeat("x", 100<<10)
	for range 3 {
		mustSend(t, c, "Big", 0, big, "")
	}
	mustSend(t, c, "Huge", 0, strings.Repeat("y", 300<<10), "")
	b.caughtUp()
	if got := pull(t, b, "Many", 100); len(got) != 32 {
		t.Errorf("pull of 100 answered %d messages, want maxTransferCountOnMessageInMemory's 32", len(got))
	}
	if got := pull(t, b, "Big", 32); len(got) != 2 {
		t.Errorf("pull of three 100 KiB messages answered %d, want the 2 that fit in 256 KiB", len(got))
	}
	if got := pull(t, b, "Huge", 32); len(got) != 1 {
		t.Errorf("pull of one 300 KiB message answered %d, want it (the first always goes)", len(got))
	}

	small := startTestBroker(t, map[string]string{"maxTransferCountOnMessageInMemory": "10"})
	sc := small.client(nil)
	for i := range 20 {
		mustSend(t, sc, "Many", 0, fmt.Sprintf("m%d", i), "")
	}
	small.caughtUp()
	if got := pull(t, small, "Many", 32); len(got) != 10 {
		t.Errorf("pull with maxTransferCountOnMessageInMemory=10 answered %d messages", len(got))
	}
}

// A query by key returns at most maxMsgsNumBatch messages (64 by default,
// what mqadmin queryMsgByKey asks for), whatever its maxNum, as RocketMQ;
// UPDATE_BROKER_CONFIG changes the cap of the next query.
func TestQueryByKeyCaps(t *testing.T) {
	for _, tc := range []struct {
		settings map[string]string
		maxNum   string
		want     int
	}{
		{nil, "64", 64},
		{nil, "1000", 64},
		{nil, "5", 5},
		{map[string]string{"maxMsgsNumBatch": "10"}, "64", 10},
		{map[string]string{"maxMsgsNumBatch": "10", "update": "maxMsgsNumBatch=20"}, "64", 20},
	} {
		update := tc.settings["update"]
		delete(tc.settings, "update")
		b := startTestBroker(t, tc.settings)
		c := b.client(nil)
		for i := range 70 {
			mustSend(t, c, "Many", 0, strconv.Itoa(i), "KEYS\x01many\x02")
		}
		b.caughtUp()
		if update != "" { // UPDATE_BROKER_CONFIG, as mqadmin updateBrokerConfig
			updateConfig(t, c, update)
		}
		r := call(t, c, remoting.QueryMessage, map[string]string{"topic": "Many", "key": "many", "maxNum": tc.maxNum,
			"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().UnixMilli()+1000, 10)}, nil)
		if got := len(decodeRecords(t, r.Body)); r.Code != remoting.Success || got != tc.want {
			t.Errorf("settings %v, maxNum %s: %d messages (code %d), want %d", tc.settings, tc.maxNum, got, r.Code, tc.want)
		}
	}
}

// A send-back to a group whose retry topic an operator made read-only is
// NO_PERMISSION, as RocketMQ's consumerSendMsgBack answers: the client
// then consumes the message again itself.
func TestSendBackToAReadOnlyRetryTopicIsRefused(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	ensureGroup(t, c, "gro")
	mustSend(t, c, "SBT", 0, "a", "")
	b.caughtUp()
	r := call(t, c, remoting.PullMessage, pullReq("gro", "SBT", 0, 0, 0, 0, "*"), nil)
	if r.Code != remoting.Success {
		t.Fatalf("pull: %d %s", r.Code, r.Remark)
	}
	m := decodeRecords(t, r.Body)[0]
	if r := call(t, c, remoting.UpdateAndCreateTopic, map[string]string{
		"topic": "%RETRY%gro", "defaultTopic": "TBW102", "readQueueNums": "1",
		"writeQueueNums": "1", "perm": "4", "topicFilterType": "SINGLE_TAG",
	}, nil); r.Code != remoting.Success {
		t.Fatalf("make the retry topic read-only: %d %s", r.Code, r.Remark)
	}
	r = call(t, c, remoting.ConsumerSendMsgBack, map[string]string{
		"offset": strconv.FormatInt(m.PhyOffset, 10), "group": "gro", "delayLevel": "0", "originTopic": "SBT",
	}, nil)
	// The remark names the reason (AbstractSendMessageProcessor.
	// consumerSendMsgBack's), not another refusal's NO_PERMISSION.
	if r.Code != remoting.NoPermission || r.Remark != "the topic[%RETRY%gro] sending message is forbidden" {
		t.Fatalf("send back to a read-only retry topic: code %d %q; RocketMQ: NO_PERMISSION (%d), the topic[%%RETRY%%gro] sending message is forbidden",
			r.Code, r.Remark, remoting.NoPermission)
	}
}

// TestAMissingRetryTopicIsCreatedFromTheTemplateFirst checks a send to a
// %RETRY% topic that does not exist (a client's send-back fallback sends
// there with TBW102 as template): it takes the template's queues while
// the template allows it, and one queue otherwise, as RocketMQ's
// msgCheck falls back to createTopicInSendMessageBackMethod.
func TestAMissingRetryTopicIsCreatedFromTheTemplateFirst(t *testing.T) {
	for _, tc := range []struct {
		autoCreate string
		want       int
	}{
		{"true", 4},  // min(the client's 4, TBW102's 8 write queues)
		{"false", 1}, // TBW102 not inheritable: the fallback
	} {
		t.Run("autoCreateTopicEnable="+tc.autoCreate, func(t *testing.T) {
			b := startTestBroker(t, map[string]string{"autoCreateTopicEnable": tc.autoCreate})
			c := b.client(nil)
			h := map[string]string{"a": "pg", "b": "%RETRY%fresh", "c": "TBW102", "d": "4", "e": "0", "f": "0",
				"g": "1", "h": "0", "i": "", "j": "1"}
			if r := call(t, c, remoting.SendMessageV2, h, []byte("back")); r.Code != remoting.Success {
				t.Fatalf("send: %d %s", r.Code, r.Remark)
			}
			cfg, ok, err := b.topics.get("%RETRY%fresh")
			if err != nil || !ok {
				t.Fatalf("retry topic not created: %v %v", ok, err)
			}
			if cfg.WriteQueueNums != tc.want || cfg.ReadQueueNums != tc.want {
				t.Fatalf("retry topic has %d/%d queues, want %d", cfg.WriteQueueNums, cfg.ReadQueueNums, tc.want)
			}
			if cfg.Perm&meta.PermInherit != 0 || cfg.Perm&meta.PermWrite == 0 {
				t.Fatalf("retry topic perm %d", cfg.Perm)
			}
		})
	}
}

// A delay level takes precedence over timer properties, which RocketMQ
// drops from the message it parks for the level (HookUtils'
// checkIfTimerMessage): the message is delivered without them.
func TestDelayLevelDropsTimerProperties(t *testing.T) {
	b := startTestBroker(t, map[string]string{"timerWheelEnable": "false"})
	c := b.client(nil)
	mustSend(t, c, "DelayedT", 0, "later", "DELAY\x011\x02TIMER_DELAY_SEC\x0130\x02TIMER_DELAY_MS\x0130000\x02TIMER_DELIVER_MS\x011\x02")
	sched := pullAll(t, b, c, "SCHEDULE_TOPIC_XXXX", 0)
	if len(sched) != 1 {
		t.Fatalf("%d messages parked at level 1, want 1", len(sched))
	}
	p := commitlog.ParseProperties(sched[0].Properties)
	for _, k := range []string{"TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_DELIVER_MS"} {
		if _, ok := p[k]; ok {
			t.Errorf("parked for its delay level with %s: %v", k, p)
		}
	}
	if p["DELAY"] != "1" || p["REAL_TOPIC"] != "DelayedT" {
		t.Errorf("parked properties %v", p)
	}
}

// A producer's send straight to a dead-letter topic with a delay level is
// delayed like a send to any other topic: RocketMQ's store parks every
// message with DELAY > 0 (HookUtils.handleScheduleMessage), whatever its
// topic; only a retry the broker moves to the DLQ has its level spent.
func TestDelayLevelSendToDLQTopic(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "%DLQ%gd", 0, "later", "DELAY\x011\x02") // 1 s
	if got := pullAll(t, b, c, "%DLQ%gd", 0); len(got) != 0 {
		t.Fatal("a delayed message to a DLQ topic visible at once")
	}
	sched := pullAll(t, b, c, "SCHEDULE_TOPIC_XXXX", 0)
	if len(sched) != 1 {
		t.Fatal("a delayed message to a DLQ topic not parked in SCHEDULE_TOPIC_XXXX queue 0")
	}
	if p := commitlog.ParseProperties(sched[0].Properties); p["REAL_TOPIC"] != "%DLQ%gd" || p["REAL_QID"] != "0" {
		t.Fatalf("parked properties %v", p)
	}
	var got []commitlog.Message
	waitFor(t, "the delayed message delivered to the DLQ topic", func() bool {
		got = pullAll(t, b, c, "%DLQ%gd", 0)
		return len(got) == 1
	})
	if string(got[0].Body) != "later" {
		t.Fatalf("delivered %q", got[0].Body)
	}
	if d := got[0].StoreTimestamp - sched[0].StoreTimestamp; d < 900 {
		t.Fatalf("delivered after %d ms, before its 1 s delay", d)
	}
}

// storedRecords reads the records of a queue from the CommitLog, as the
// revive's recovery reads them, whatever a Remoting answer shows.
func storedRecords(t *testing.T, b *testBroker, topic string, qid int32) []commitlog.Message {
	t.Helper()
	b.caughtUp()
	entries, err := b.cqs.Get(topic, qid, 0, 100)
	if err != nil {
		t.Fatalf("entries of %s/%d: %v", topic, qid, err)
	}
	var out []commitlog.Message
	for _, e := range entries {
		v, err := b.clog.Read(e.PhyOffset, e.Size)
		if err != nil {
			t.Fatalf("read %s/%d@%d: %v", topic, qid, e.QueueOffset, err)
		}
		m, err := commitlog.Decode(v.Data)
		if err != nil {
			t.Fatalf("decode %s/%d@%d: %v", topic, qid, e.QueueOffset, err)
		}
		m.Body = append([]byte(nil), m.Body...)
		v.Release()
		out = append(out, m)
	}
	return out
}

// A consumer's send-back of a record a POP revive put copies the message,
// not the revive's RKV_REVIVED_FROM: the copy is no revive's put, and a
// record of a retry or dead-letter topic naming a revive intent is taken
// by the revive's recovery for the put of that intent (a client's send of
// one is refused for that reason).
func TestSendBackOfRevivedRecordDropsRevivedFrom(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	mustSend(t, rc, "SBR", 0, "payload", "TAGS\x01t1\x02")
	b.caughtUp()
	if first := mustPop(t, c, popclient.PopRequest{Group: "gsb", Topic: "SBR", QueueID: -1, MaxMsgNums: 1, InvisibleTime: 100 * time.Millisecond}); len(first.Messages) != 1 {
		t.Fatalf("pop %d", first.Code)
	}
	waitFor(t, "the revive's retry record", func() bool {
		n, err := b.cqs.MaxOffset("%RETRY%gsb_SBR", 0)
		return err == nil && n == 1
	})
	revived := storedRecords(t, b, "%RETRY%gsb_SBR", 0)
	if _, ok := commitlog.LookupProperty(revived[0].Properties, kvindex.PropertyRevivedFrom); !ok {
		t.Fatalf("the revive's record has no %s: %q", kvindex.PropertyRevivedFrom, revived[0].Properties)
	}
	for _, level := range []string{"-1", "1"} {
		if r := call(t, rc, remoting.ConsumerSendMsgBack, map[string]string{
			"offset": strconv.FormatInt(revived[0].PhyOffset, 10), "group": "gsb", "delayLevel": level,
			"originTopic": "%RETRY%gsb_SBR",
		}, nil); r.Code != remoting.Success {
			t.Fatalf("send back at level %s: %d %s", level, r.Code, r.Remark)
		}
	}
	copies := append(storedRecords(t, b, "%DLQ%gsb", 0), storedRecords(t, b, meta.ScheduleTopic, 0)...)
	if len(copies) != 2 {
		t.Fatalf("%d copies, want the DLQ's and the parked retry", len(copies))
	}
	for _, m := range copies {
		if v, ok := commitlog.LookupProperty(m.Properties, kvindex.PropertyRevivedFrom); ok {
			t.Errorf("the send-back's copy in %s has %s=%q", m.Topic, kvindex.PropertyRevivedFrom, v)
		}
	}
}
