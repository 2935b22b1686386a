package broker

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// waitDelivered waits until a queue holds n messages and returns them.
func waitDelivered(t *testing.T, b *testBroker, c *remoting.Client, topic string, qid int32, n int) []commitlog.Message {
	t.Helper()
	var got []commitlog.Message
	waitFor(t, "timer delivery to "+topic, func() bool {
		got = pullAll(t, b, c, topic, qid)
		return len(got) >= n
	})
	return got
}

func TestTimerMessageDeliveredWhenDue(t *testing.T) {
	b := startTestBroker(t, map[string]string{"timerPrecisionMs": "100"})
	c := b.client(nil)
	resp := mustSend(t, c, "TmT", 2, "later", "UNIQ_KEY\x01TM-1\x02TIMER_DELAY_MS\x011500\x02")
	sentAt := time.Now()
	if header(t, resp, "queueId") != 2 {
		t.Fatalf("timer send answered queueId %s, the producer asked for 2", resp.ExtFields["queueId"])
	}
	if got := pullAll(t, b, c, "TmT", 2); len(got) != 0 && time.Since(sentAt) < 1400*time.Millisecond {
		t.Fatalf("a message due in 1.5 s was delivered at once")
	}
	parked := pullAll(t, b, c, meta.TimerTopic, 0)
	if len(parked) != 1 {
		t.Fatalf("%d messages parked in %s, want 1", len(parked), meta.TimerTopic)
	}
	due, err := strconv.ParseInt(commitlog.ParseProperties(parked[0].Properties)["TIMER_OUT_MS"], 10, 64)
	if err != nil {
		t.Fatalf("parked message without TIMER_OUT_MS: %v", err)
	}

	got := waitDelivered(t, b, c, "TmT", 2, 1)
	m := got[0]
	p := commitlog.ParseProperties(m.Properties)
	if len(got) != 1 || string(m.Body) != "later" || p["UNIQ_KEY"] != "TM-1" || p["TIMER_OUT_MS"] != strconv.FormatInt(due, 10) {
		t.Fatalf("delivered %d messages, first %q properties %v", len(got), m.Body, p)
	}
	if m.StoreTimestamp < due {
		t.Fatalf("delivered at %d, before its time %d", m.StoreTimestamp, due)
	}
	if p["REAL_TOPIC"] != "TmT" || p["REAL_QID"] != "2" {
		t.Errorf("delivered message without the REAL_TOPIC and REAL_QID RocketMQ's timer leaves on it: %v", p)
	}
	// RocketMQ's timer takes the message in at its write time, a
	// multiple of timerPrecisionMs.
	if enq, deq := p["TIMER_ENQUEUE_MS"], p["TIMER_DEQUEUE_MS"]; enq != strconv.FormatInt(parked[0].StoreTimestamp/100*100, 10) || deq == "" {
		t.Errorf("TIMER_ENQUEUE_MS %q (parked at %d) TIMER_DEQUEUE_MS %q", enq, parked[0].StoreTimestamp, deq)
	}
	time.Sleep(300 * time.Millisecond) // three timer ticks
	if n := len(pullAll(t, b, c, "TmT", 2)); n != 1 {
		t.Fatalf("delivered %d times", n)
	}
}

func TestTimerMessagesRefused(t *testing.T) {
	b := startTestBroker(t, map[string]string{"timerMaxDelaySec": "60"})
	c := b.client(nil)
	for _, tc := range []struct {
		name  string
		props string
		code  int32
	}{
		{"past timerMaxDelaySec", "TIMER_DELAY_SEC\x0161\x02", remoting.MessageIllegal},
		{"not a number", "TIMER_DELIVER_MS\x01tomorrow\x02", remoting.MessageIllegal},
	} {
		if r := sendV2(t, c, "TmR", 0, "x", tc.props); r.Code != tc.code {
			t.Errorf("%s: answered %d %s, want %d", tc.name, r.Code, r.Remark, tc.code)
		}
	}
	off := startTestBroker(t, map[string]string{"timerWheelEnable": "false"})
	oc := off.client(nil)
	if r := sendV2(t, oc, "TmR", 0, "x", "TIMER_DELAY_SEC\x015\x02"); r.Code != remoting.SystemError {
		t.Errorf("timer message with timerWheelEnable=false answered %d %s", r.Code, r.Remark)
	}
	if r := sendV2(t, oc, "TmR", 0, "x", "TIMER_DELAY_SEC\x010\x02"); r.Code != remoting.SystemError {
		t.Errorf("a timer message already due with timerWheelEnable=false answered %d %s, want SYSTEM_ERROR as RocketMQ's WHEEL_TIMER_NOT_ENABLE", r.Code, r.Remark)
	}
	if got := pullAll(t, b, c, "TmR", 0); len(got) != 0 {
		t.Fatalf("refused timer messages were stored: %d", len(got))
	}
}

func TestTimerMessageSurvivesRestart(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, map[string]string{"timerPrecisionMs": "100"})
	c := b.client(nil)
	mustSend(t, c, "TmS", 0, "kept", "TIMER_DELAY_MS\x011500\x02")
	b.caughtUp()
	b.stop()

	b = startTestBrokerAt(t, store, map[string]string{"timerPrecisionMs": "100"})
	c = b.client(nil)
	waitDelivered(t, b, c, "TmS", 0, 1)
	time.Sleep(300 * time.Millisecond)
	if got := pullAll(t, b, c, "TmS", 0); len(got) != 1 || string(got[0].Body) != "kept" {
		t.Fatalf("after a restart %d messages delivered, want 1", len(got))
	}
}

func TestCommittedTransactionWithTimerWaits(t *testing.T) {
	b := startTestBroker(t, map[string]string{"timerPrecisionMs": "100"})
	c := b.client(nil)
	h := sendHalf(t, c, "TmX", 1, "UNIQ-TX-TIMER", "tx later", "TIMER_DELAY_MS\x011500\x02", time.Now().UnixMilli())
	if r := endTxn(t, c, h, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	committedAt := time.Now()
	if got := pullAll(t, b, c, "TmX", 1); len(got) != 0 && time.Since(committedAt) < 1400*time.Millisecond {
		t.Fatal("a committed message with a 1.5 s timer was delivered at once")
	}
	got := waitDelivered(t, b, c, "TmX", 1, 1)
	if len(got) != 1 || string(got[0].Body) != "tx later" || got[0].PreparedTransactionOffset != h.phy ||
		commitlog.TransactionType(got[0].SysFlag) != commitlog.TransactionCommit {
		t.Fatalf("delivered %+v", got)
	}
}

func TestTimerMessageCancelled(t *testing.T) {
	b := startTestBroker(t, map[string]string{"timerPrecisionMs": "100"})
	c := b.client(nil)
	at := strconv.FormatInt(time.Now().Add(1500*time.Millisecond).UnixMilli(), 10)
	mustSend(t, c, "TmC", 0, "cancelled", "UNIQ_KEY\x01TM-X\x02TIMER_DELIVER_MS\x01"+at+"\x02")
	mustSend(t, c, "TmC", 0, "kept", "UNIQ_KEY\x01TM-Y\x02TIMER_DELIVER_MS\x01"+at+"\x02")
	mustSend(t, c, "TmC", 0, "the cancel", "UNIQ_KEY\x01TM-Z\x02TIMER_DELIVER_MS\x01"+at+"\x02TIMER_DEL_UNIQKEY\x01TmC+TM-X\x02")
	waitDelivered(t, b, c, "TmC", 0, 1)
	time.Sleep(300 * time.Millisecond)
	if got := pullAll(t, b, c, "TmC", 0); len(got) != 1 || string(got[0].Body) != "kept" {
		var bodies []string
		for _, m := range got {
			bodies = append(bodies, string(m.Body))
		}
		t.Fatalf("delivered %q, want only the message not cancelled", bodies)
	}
	past := strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10)
	if r := sendV2(t, c, "TmC", 0, "late cancel", "TIMER_DELIVER_MS\x01"+past+"\x02TIMER_DEL_UNIQKEY\x01TmC+TM-Y\x02"); r.Code != remoting.MessageIllegal {
		t.Fatalf("a cancel of a time come answered %d %s, want MESSAGE_ILLEGAL", r.Code, r.Remark)
	}
}

// A store migrated from Apache RocketMQ can hold a long timer message twice:
// parked, and parked again by RocketMQ's wheel (TIMER_ROLL_TIMES), both at
// the same delivery time. It is delivered once.
func TestRolledTimerMessageDeliveredOnce(t *testing.T) {
	b := startTestBroker(t, map[string]string{"timerPrecisionMs": "100"})
	c := b.client(nil)
	at := strconv.FormatInt(time.Now().Add(1200*time.Millisecond).UnixMilli(), 10)
	mustSend(t, c, "TmRoll", 0, "long wait", "UNIQ_KEY\x01TM-R\x02TIMER_DELIVER_MS\x01"+at+"\x02")
	mustSend(t, c, "TmRoll", 0, "long wait", "UNIQ_KEY\x01TM-R\x02TIMER_DELIVER_MS\x01"+at+"\x02TIMER_ROLL_TIMES\x011\x02")
	mustSend(t, c, "TmRoll", 0, "other", "UNIQ_KEY\x01TM-O\x02TIMER_DELIVER_MS\x01"+at+"\x02")
	waitDelivered(t, b, c, "TmRoll", 0, 2)
	time.Sleep(300 * time.Millisecond)
	var bodies []string
	for _, m := range pullAll(t, b, c, "TmRoll", 0) {
		bodies = append(bodies, string(m.Body))
	}
	if len(bodies) != 2 {
		t.Fatalf("delivered %q, want the rolled message once and the other one", bodies)
	}
}

func TestCommittedTransactionWithDelayLevelWaits(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	h := sendHalf(t, c, "TmXD", 0, "UNIQ-TX-DELAY", "tx delayed", "DELAY\x011\x02", time.Now().UnixMilli())
	if r := endTxn(t, c, h, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	if parked := pullAll(t, b, c, meta.ScheduleTopic, 0); len(parked) != 1 || string(parked[0].Body) != "tx delayed" {
		t.Fatalf("the committed message with delay level 1 is not parked in %s/0: %d there", meta.ScheduleTopic, len(parked))
	}
	got := waitDelivered(t, b, c, "TmXD", 0, 1)
	if len(got) != 1 || string(got[0].Body) != "tx delayed" || got[0].StoreTimestamp-got[0].BornTimestamp < 900 {
		t.Fatalf("delivered %d, stored %d ms after birth", len(got), got[0].StoreTimestamp-got[0].BornTimestamp)
	}
}

// An entry indexed behind the delivery cursor (a parked record whose time
// has long passed: one written straight to the timer topic, as a migrated
// store's can be) is delivered all the same.
func TestTimerEntryBehindTheCursorIsDelivered(t *testing.T) {
	b := startTestBroker(t, map[string]string{"timerPrecisionMs": "100"})
	c := b.client(nil)
	mustSend(t, c, "TmLate", 0, "first", "TIMER_DELAY_MS\x01300\x02")
	waitDelivered(t, b, c, "TmLate", 0, 1) // the cursor is past it now
	past := strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)
	mustSend(t, c, meta.TimerTopic, 0, "behind",
		"TIMER_OUT_MS\x01"+past+"\x02REAL_TOPIC\x01TmLate\x02REAL_QID\x010\x02")
	got := waitDelivered(t, b, c, "TmLate", 0, 2)
	if string(got[1].Body) != "behind" {
		t.Fatalf("delivered %q second, want the entry behind the cursor", got[1].Body)
	}
}

// A timer or delayed message that can never be stored in its topic (here
// the put of its delivery is refused as an invalid append, which no retry
// stores) is dropped when it comes due; the messages due after it are
// delivered, where they waited behind it for good.
func TestAnUnstorableDelayedMessageDoesNotHoldBackTheOthers(t *testing.T) {
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{"timerPrecisionMs": "100"}, func(b *Broker) {
		b.beforePut = func(msgs []*commitlog.Message) error {
			if m := msgs[0]; string(m.Body) == "never" && m.Topic != meta.TimerTopic && m.Topic != meta.ScheduleTopic {
				return fmt.Errorf("%w: this message is never stored in %s", commitlog.ErrInvalidAppend, m.Topic)
			}
			return nil
		}
	})
	c := b.client(nil)
	for _, topic := range []string{"Unstorable", "After", "DelayUnstorable"} {
		createTopic(t, c, topic, 1, 1)
	}
	mustSend(t, c, "Unstorable", 0, "never", "TIMER_DELAY_MS\x01100\x02")
	time.Sleep(500 * time.Millisecond) // due, and a round has failed to store it
	mustSend(t, c, "After", 0, "later", "TIMER_DELAY_MS\x01100\x02")
	waitDelivered(t, b, c, "After", 0, 1)

	mustSend(t, c, "DelayUnstorable", 0, "never", "DELAY\x011\x02")
	mustSend(t, c, "DelayUnstorable", 0, "later", "DELAY\x011\x02")
	waitDelivered(t, b, c, "DelayUnstorable", 0, 1)
	if got := pullAll(t, b, c, "DelayUnstorable", 0); len(got) != 1 || string(got[0].Body) != "later" {
		t.Fatalf("delivered of delay level 1: %d messages", len(got))
	}
}

// Timer messages due together that name a light message queue are stored
// in it too, as a message sent with the property alone is: the timer
// stores them one by one.
func TestTimerMessagesDueTogetherReachTheirLightQueues(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enableLmq": "true", "enableMultiDispatch": "true", "timerPrecisionMs": "1000"})
	c := b.client(nil)
	createTopic(t, c, "LmqTimer", 1, 1)
	deliver := (time.Now().UnixMilli()/1000+2)*1000 + 500
	for _, body := range []string{"a", "b", "c"} {
		mustSend(t, c, "LmqTimer", 0, body, "TIMER_DELIVER_MS\x01"+strconv.FormatInt(deliver, 10)+"\x02"+lmqProps("%LMQ%timerDev"))
	}
	waitDelivered(t, b, c, "LmqTimer", 0, 3)
	b.caughtUp()
	r := call(t, c, remoting.PullMessage, pullReq("%LMQ%g", "%LMQ%timerDev", 0, 0, 0, 0, "*"), nil)
	if r.Code != remoting.Success {
		t.Fatalf("pull of the light queue: %d %s", r.Code, r.Remark)
	}
	if got := decodeRecords(t, r.Body); len(got) != 3 {
		t.Fatalf("the light queue holds %d of the 3 delivered timer messages", len(got))
	}
}

// A producer's TIMER_DELAY_MS=1000 on a broker with timerPrecisionMs=1000
// (the default) is stored in its topic no earlier than 1 s after the
// send, as with Apache RocketMQ (TimerMessageStore reads slot TIMER_OUT_MS
// once now rounded down has passed it), though TIMER_OUT_MS is the send
// time plus 1 s rounded down to the second.
func TestTimerDelayMsIsStoredNoEarlierThanAsked(t *testing.T) {
	b := startTestBroker(t, map[string]string{"timerPrecisionMs": "1000"})
	c := b.client(nil)
	// Send late in a second, so that the floor is far below the asked time.
	for time.Now().UnixMilli()%1000 < 800 {
		time.Sleep(10 * time.Millisecond)
	}
	sentAt := time.Now().UnixMilli()
	mustSend(t, c, "TmEarly", 0, "early", "UNIQ_KEY\x01EARLY-1\x02TIMER_DELAY_MS\x011000\x02")
	got := waitDelivered(t, b, c, "TmEarly", 0, 1)
	if d := got[0].StoreTimestamp - sentAt; d < 1000 {
		t.Fatalf("TIMER_DELAY_MS=1000 stored in its topic %d ms after the send", d)
	}
}

// GET_TIMER_METRICS answers the timer messages waiting by REAL_TOPIC, as
// RocketMQ's TimerMetricsSerializeWrapper, whether or not the metrics
// exporter runs: a cancel takes its message off, and the data version
// moves with every change (a RocketMQ slave copies the table only when it
// does).
func TestGetTimerMetricsCountsWaitingMessagesByTopic(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	later := "TIMER_DELIVER_MS\x01" + strconv.FormatInt(time.Now().Add(10*time.Minute).UnixMilli(), 10) + "\x02"
	mustSend(t, c, "GtmA", 0, "a1", "UNIQ_KEY\x01A1\x02"+later)
	mustSend(t, c, "GtmA", 0, "a2", "UNIQ_KEY\x01A2\x02"+later)
	mustSend(t, c, "GtmB", 0, "b1", "UNIQ_KEY\x01B1\x02"+later)
	mustSend(t, c, "GtmB", 0, "b2", "UNIQ_KEY\x01B2\x02"+later)
	mustSend(t, c, "GtmB", 0, "cancel b2", "UNIQ_KEY\x01B3\x02"+later+"TIMER_DEL_UNIQKEY\x01GtmB+B2\x02")
	b.caughtUp()
	type metric struct {
		Count     int64 `json:"count"`
		TimeStamp int64 `json:"timeStamp"`
	}
	var m struct {
		DataVersion struct {
			Counter   int64 `json:"counter"`
			Timestamp int64 `json:"timestamp"`
		} `json:"dataVersion"`
		TimingCount map[string]metric `json:"timingCount"`
	}
	get := func() {
		t.Helper()
		r := call(t, c, remoting.GetTimerMetrics, nil, nil)
		if r.Code != remoting.Success {
			t.Fatalf("GET_TIMER_METRICS: %d %s", r.Code, r.Remark)
		}
		m.TimingCount = nil
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatalf("GET_TIMER_METRICS body %q: %v", r.Body, err)
		}
	}
	waitFor(t, "the count of the timer messages waiting", func() bool {
		get()
		return len(m.TimingCount) > 0
	})
	if len(m.TimingCount) != 2 || m.TimingCount["GtmA"].Count != 2 || m.TimingCount["GtmB"].Count != 1 {
		t.Fatalf("timingCount %+v, want GtmA 2 and GtmB 1 (2 less a cancel)", m.TimingCount)
	}
	if m.DataVersion.Counter == 0 || m.DataVersion.Timestamp == 0 || m.TimingCount["GtmA"].TimeStamp == 0 {
		t.Errorf("dataVersion %+v, timeStamp %d: want a version of the count's changes", m.DataVersion, m.TimingCount["GtmA"].TimeStamp)
	}
	version := m.DataVersion.Counter
	mustSend(t, c, "GtmA", 0, "a3", "UNIQ_KEY\x01A4\x02"+later)
	b.caughtUp()
	get()
	if m.TimingCount["GtmA"].Count != 3 || m.DataVersion.Counter <= version {
		t.Errorf("after one more: timingCount %+v, version %d (was %d), want GtmA 3 and a newer version",
			m.TimingCount, m.DataVersion.Counter, version)
	}
}

// With timerWheelEnable false a RocketMQ broker has no timer checkpoint
// nor timer store, and refuses a slave's GET_TIMER_CHECK_POINT and
// GET_TIMER_METRICS with SYSTEM_ERROR instead of answering a checkpoint
// of a timer that does not run.
func TestTimerRequestsRefusedWithTheWheelOff(t *testing.T) {
	b := startTestBroker(t, map[string]string{"timerWheelEnable": "false"})
	c := b.client(nil)
	for code, remark := range map[int32]string{
		remoting.GetTimerCheckPoint: "The checkpoint is null",
		remoting.GetTimerMetrics:    "The timer message store is null",
	} {
		if r := call(t, c, code, nil, nil); r.Code != remoting.SystemError || r.Remark != remark || len(r.Body) != 0 {
			t.Errorf("request %d with timerWheelEnable=false: %d %q, %d body bytes; want SYSTEM_ERROR %q", code, r.Code, r.Remark, len(r.Body), remark)
		}
	}
}

// timerPrecisionMs is rounded down to 100, 200, 500 or 1000 ms as
// RocketMQ's setter rounds it, and GET_BROKER_CONFIG reports the
// precision in use, not the value configured.
func TestTimerPrecisionIsReportedRounded(t *testing.T) {
	for set, want := range map[string]string{"300": "200", "50": "100", "999": "500", "5000": "1000"} {
		b := startTestBroker(t, map[string]string{"timerPrecisionMs": set})
		r := call(t, b.client(nil), remoting.GetBrokerConfig, nil, nil)
		if r.Code != remoting.Success {
			t.Fatalf("GET_BROKER_CONFIG: %d %s", r.Code, r.Remark)
		}
		if !strings.Contains("\n"+string(r.Body), "\ntimerPrecisionMs="+want+"\n") {
			t.Errorf("timerPrecisionMs=%s reported as %q, want %s", set, grepLine(string(r.Body), "timerPrecisionMs="), want)
		}
	}
}

// grepLine returns the first line of text that starts with prefix.
func grepLine(text, prefix string) string {
	for l := range strings.Lines(text) {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimSuffix(l, "\n")
		}
	}
	return ""
}

// With timerCongestNumEachSlot N, a timer send is refused (SYSTEM_ERROR,
// RocketMQ's WHEEL_TIMER_FLOW_CONTROL remark) once 2N timer messages wait
// in its delivery slot, and passes while at most N do; other slots are
// not affected.
func TestTimerSendsRefusedWhenTheirSlotIsCongested(t *testing.T) {
	b := startTestBroker(t, map[string]string{"timerCongestNumEachSlot": "1"})
	c := b.client(nil)
	due := time.Now().Add(time.Hour).UnixMilli()
	at := func(ms int64) string { return "TIMER_DELIVER_MS\x01" + strconv.FormatInt(ms, 10) + "\x02" }
	for i := range 2 {
		mustSend(t, c, "CongestT", 0, "m"+strconv.Itoa(i), at(due))
		b.caughtUp()
	}
	r := sendV2(t, c, "CongestT", 0, "m2", at(due))
	want := "timer message is under flow control, max num limit is 2 or the current value is greater than 1 and less than 2, trigger random flow control"
	if r.Code != remoting.SystemError || r.Remark != want {
		t.Fatalf("third timer send to a slot holding 2: %d %q, want SYSTEM_ERROR %q", r.Code, r.Remark, want)
	}
	mustSend(t, c, "CongestT", 0, "other slot", at(due+time.Minute.Milliseconds()))
	b.caughtUp()
	if got := pullAll(t, b, c, meta.TimerTopic, 0); len(got) != 3 {
		t.Fatalf("%d messages parked, want 3 (the refused one not stored)", len(got))
	}
}
