package broker

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

func TestSendThenPull(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	var ids []string
	for i := 0; i < 3; i++ {
		resp := mustSend(t, c, "T1", 1, "body-"+string(rune('a'+i)), "TAGS\x01tagA\x02KEYS\x01k1 k2\x02WAIT\x01true\x02")
		if got := header(t, resp, "queueOffset"); got != int64(i) {
			t.Fatalf("send %d: queueOffset %d", i, got)
		}
		if header(t, resp, "queueId") != 1 || len(resp.ExtFields["msgId"]) != 32 || resp.ExtFields["MSG_REGION"] != "DefaultRegion" {
			t.Fatalf("send response %v", resp.ExtFields)
		}
		ids = append(ids, resp.ExtFields["msgId"])
	}
	b.caughtUp()
	resp := call(t, c, remoting.PullMessage, pullReq("g1", "T1", 1, 0, 0, 0, "*"), nil)
	if resp.Code != remoting.Success {
		t.Fatalf("pull: %d %s", resp.Code, resp.Remark)
	}
	if header(t, resp, "nextBeginOffset") != 3 || header(t, resp, "maxOffset") != 3 || header(t, resp, "minOffset") != 0 {
		t.Fatalf("pull header %v", resp.ExtFields)
	}
	msgs := decodeRecords(t, resp.Body)
	if len(msgs) != 3 {
		t.Fatalf("pulled %d messages", len(msgs))
	}
	for i, m := range msgs {
		if string(m.Body) != "body-"+string(rune('a'+i)) || m.QueueOffset != int64(i) || m.Topic != "T1" || m.QueueID != 1 {
			t.Errorf("message %d: %+v", i, m)
		}
		if commitlog.MessageID(m.StoreHost, m.PhyOffset) != ids[i] {
			t.Errorf("message %d: msgId %s does not name its record", i, ids[i])
		}
		props := commitlog.ParseProperties(m.Properties)
		if props["CLUSTER"] != "DefaultCluster" || len(props["UNIQ_KEY"]) != 32 || props["TAGS"] != "tagA" || props["KEYS"] != "k1 k2" {
			t.Errorf("message %d properties %v", i, props)
		}
		// As RocketMQ's send processor stores them (regionId, traceOn).
		if props["MSG_REGION"] != "DefaultRegion" || props["TRACE_ON"] != "true" {
			t.Errorf("message %d: MSG_REGION %q TRACE_ON %q, want the broker's DefaultRegion and true", i, props["MSG_REGION"], props["TRACE_ON"])
		}
		if props["WAIT"] != "true" {
			t.Errorf("WAIT %q stored, want the send's true: RocketMQ 5 keeps it", props["WAIT"])
		}
	}
}

// A broker's regionId and traceOn go into every message it stores, as
// RocketMQ's: the Java consumer's trace hook skips a message whose
// TRACE_ON is false, so a broker with traceOn=false is not traced.
func TestStoredMessagesCarryTheBrokersRegionAndTraceSwitch(t *testing.T) {
	b := startTestBroker(t, map[string]string{"regionId": "EastRegion", "traceOn": "false"})
	c := b.client(nil)
	mustSend(t, c, "Traced", 0, "m", "TRACE_ON\x01true\x02")
	msgs := pullAll(t, b, c, "Traced", 0)
	if len(msgs) != 1 {
		t.Fatalf("pulled %d messages", len(msgs))
	}
	props := commitlog.ParseProperties(msgs[0].Properties)
	if props["MSG_REGION"] != "EastRegion" || props["TRACE_ON"] != "false" {
		t.Fatalf("stored MSG_REGION %q TRACE_ON %q, want the broker's EastRegion and false", props["MSG_REGION"], props["TRACE_ON"])
	}
}

func TestPullResultCodes(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	pull := func(offset int64, sub string) *remoting.Command {
		return call(t, c, remoting.PullMessage, pullReq("g", "Codes", 0, offset, 0, 0, sub), nil)
	}
	mustSend(t, c, "Codes", 1, "x", "") // creates the topic; queue 0 stays empty
	b.caughtUp()
	if r := pull(0, "*"); r.Code != remoting.PullNotFound || header(t, r, "nextBeginOffset") != 0 {
		t.Fatalf("empty queue at 0: %d next %s", r.Code, r.ExtFields["nextBeginOffset"])
	}
	if r := pull(5, "*"); r.Code != remoting.PullOffsetMoved || header(t, r, "nextBeginOffset") != 0 {
		t.Fatalf("empty queue at 5: %d next %s", r.Code, r.ExtFields["nextBeginOffset"])
	}
	for i := 0; i < 3; i++ {
		mustSend(t, c, "Codes", 0, "m", "TAGS\x01blue\x02")
	}
	b.caughtUp()
	if r := pull(3, "*"); r.Code != remoting.PullNotFound || header(t, r, "nextBeginOffset") != 3 {
		t.Fatalf("at max: %d next %s", r.Code, r.ExtFields["nextBeginOffset"])
	}
	if r := pull(10, "*"); r.Code != remoting.PullOffsetMoved || header(t, r, "nextBeginOffset") != 3 {
		t.Fatalf("past max: %d next %s", r.Code, r.ExtFields["nextBeginOffset"])
	}
	if r := pull(0, "red || green"); r.Code != remoting.PullRetryImmediately || header(t, r, "nextBeginOffset") != 3 {
		t.Fatalf("no tag matched: %d next %s", r.Code, r.ExtFields["nextBeginOffset"])
	}
	if r := pull(1, "blue"); r.Code != remoting.Success || len(decodeRecords(t, r.Body)) != 2 {
		t.Fatalf("tag matched: %d", r.Code)
	}
}

func TestTagFilterChecksTheExactTag(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	// "Aa" and "BB" have the same Java hash code.
	if commitlog.TagsCode("Aa") != commitlog.TagsCode("BB") {
		t.Fatal("test premise: Aa and BB collide")
	}
	mustSend(t, c, "Collide", 0, "aa", "TAGS\x01Aa\x02")
	mustSend(t, c, "Collide", 0, "bb", "TAGS\x01BB\x02")
	mustSend(t, c, "Collide", 0, "none", "")
	b.caughtUp()
	r := call(t, c, remoting.PullMessage, pullReq("g", "Collide", 0, 0, 0, 0, "BB"), nil)
	msgs := decodeRecords(t, r.Body)
	if r.Code != remoting.Success || len(msgs) != 1 || string(msgs[0].Body) != "bb" || header(t, r, "nextBeginOffset") != 3 {
		t.Fatalf("pull BB: code %d, %d messages, next %s", r.Code, len(msgs), r.ExtFields["nextBeginOffset"])
	}
}

func TestLongPolling(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "LP", 0, "first", "")
	// A send is answered before it is dispatched: until "first" is in the
	// ConsumeQueue a pull at offset 1 finds an empty queue and is answered
	// PULL_OFFSET_MOVED at once instead of being held.
	b.caughtUp()
	// Held, then woken by a dispatch.
	done := b.holdPull(c, pullReq("g", "LP", 0, 1, pullSuspend, 15*time.Second, "*"))
	sent := time.Now()
	mustSend(t, c, "LP", 0, "second", "")
	r := <-done
	if r.resp == nil || r.resp.Code != remoting.Success {
		t.Fatalf("woken pull: %+v", r.resp)
	}
	if msgs := decodeRecords(t, r.resp.Body); len(msgs) != 1 || string(msgs[0].Body) != "second" {
		t.Fatalf("woken pull returned %v", msgs)
	}
	if r.at.Sub(sent) > 10*time.Second {
		t.Fatal("pull answered by its timeout, not by the dispatch")
	}
	// Held, then answered by its timeout.
	resp := call(t, c, remoting.PullMessage, pullReq("g", "LP", 0, 2, pullSuspend, 200*time.Millisecond, "*"), nil)
	if resp.Code != remoting.PullNotFound || header(t, resp, "nextBeginOffset") != 2 {
		t.Fatalf("timed-out pull: %d %v", resp.Code, resp.ExtFields)
	}
	if b.holds.count() != 0 {
		t.Fatalf("%d pulls still held", b.holds.count())
	}
}

func TestBadRequests(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	// A missing required field is named in the remark.
	r := call(t, c, remoting.SendMessageV2, map[string]string{"a": "pg", "e": "0", "f": "0", "g": "1", "h": "0"}, []byte("x"))
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "topic") {
		t.Fatalf("missing topic: %d %q", r.Code, r.Remark)
	}
	// A field of the wrong type is named too.
	r = call(t, c, remoting.PullMessage, map[string]string{"consumerGroup": "g", "topic": "T", "queueId": "zero",
		"queueOffset": "0", "maxMsgNums": "1", "sysFlag": "0"}, nil)
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "queueId") {
		t.Fatalf("bad queueId: %d %q", r.Code, r.Remark)
	}
	// An unknown code is answered, and the connection keeps working.
	r = call(t, c, 987654, nil, nil)
	if r.Code != remoting.RequestCodeNotSupported {
		t.Fatalf("unknown code: %d", r.Code)
	}
	r = call(t, c, remoting.HeartBeat, nil, []byte("{not json"))
	if r.Code != remoting.SystemError {
		t.Fatalf("bad heartbeat: %d", r.Code)
	}
	r = call(t, c, remoting.SendBatchMessage, map[string]string{"a": "pg", "b": "B", "e": "0", "f": "0", "g": "1", "h": "0", "m": "true"}, []byte{0, 0, 0, 99, 1, 2})
	if r.Code != remoting.MessageIllegal {
		t.Fatalf("bad batch body: %d %q", r.Code, r.Remark)
	}
	mustSend(t, c, "StillWorks", 0, "ok", "")
}

func TestSendValidation(t *testing.T) {
	b := startTestBroker(t, map[string]string{"maxMessageSize": "1024"})
	c := b.client(nil)
	cases := []struct {
		name  string
		topic string
		qid   int32
		body  string
		want  int32
	}{
		{"illegal name", "bad topic!", 0, "x", remoting.InvalidParameter}, // RocketMQ 5.3.2+ (SYSTEM_ERROR before)
		{"system topic", "SCHEDULE_TOPIC_XXXX", 0, "x", remoting.NoPermission},
		{"too large", "Big", 0, strings.Repeat("x", 2000), remoting.MessageIllegal},
		{"bad queue", "Q4", 99, "x", remoting.InvalidParameter},
	}
	for _, tc := range cases {
		if r := sendV2(t, c, tc.topic, tc.qid, tc.body, ""); r.Code != tc.want {
			t.Errorf("%s: code %d (%s), want %d", tc.name, r.Code, r.Remark, tc.want)
		}
	}
	// The property that ties a revived message to its revive is the
	// broker's: a client's message to a pop-retry topic or DLQ with it is
	// refused (it would cancel a revive), to any other topic it is kept.
	forged := kvindex.PropertyRevivedFrom + "\x010/0/1/gT\x02"
	for _, topic := range []string{"%RETRY%g_T", "%DLQ%g"} {
		if r := sendV2(t, c, topic, 0, "x", forged); r.Code != remoting.MessageIllegal || !strings.Contains(r.Remark, kvindex.PropertyRevivedFrom) {
			t.Errorf("send to %s with %s: code %d (%s), want MessageIllegal", topic, kvindex.PropertyRevivedFrom, r.Code, r.Remark)
		}
	}
	if r := sendV2(t, c, "Plain", 0, "x", forged); r.Code != remoting.Success {
		t.Errorf("send to a normal topic with %s: code %d (%s)", kvindex.PropertyRevivedFrom, r.Code, r.Remark)
	}
	nb := startTestBroker(t, map[string]string{"autoCreateTopicEnable": "false"})
	if r := sendV2(t, nb.client(nil), "Unknown", 0, "x", ""); r.Code != remoting.TopicNotExist {
		t.Errorf("auto-create off: code %d", r.Code)
	}
}

func TestHeartbeatsConsumerListAndNotify(t *testing.T) {
	b := startTestBroker(t, nil)
	var mu sync.Mutex
	notified := map[string]int{}
	handler := func(name string) func(context.Context, *remoting.Command) *remoting.Command {
		return func(_ context.Context, req *remoting.Command) *remoting.Command {
			if req.Code == remoting.NotifyConsumerIDsChanged && req.ExtFields["consumerGroup"] == "cg" {
				mu.Lock()
				notified[name]++
				mu.Unlock()
			}
			return nil
		}
	}
	hb := func(id string) []byte {
		return []byte(`{"clientID":"` + id + `","producerDataSet":[],"consumerDataSet":[{"groupName":"cg","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,"topic":"HB","subString":"a || b","tagsSet":["a","b"],"codeSet":["97","98"],"subVersion":1700000000000000000,"expressionType":"TAG"}],"unitMode":false}]}`)
	}
	c1 := b.client(handler("c1"))
	if r := call(t, c1, remoting.HeartBeat, nil, hb("10.0.0.1@1")); r.Code != remoting.Success || r.Version < 413 {
		t.Fatalf("heartbeat: %d version %d", r.Code, r.Version)
	}
	c2 := b.client(handler("c2"))
	heartbeat(t, c2, hb("10.0.0.2@2"))
	r := call(t, c1, remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": "cg"}, nil)
	if r.Code != remoting.Success || string(r.Body) != `{"consumerIdList":["10.0.0.1@1","10.0.0.2@2"]}` {
		t.Fatalf("consumer list: %d %s", r.Code, r.Body)
	}
	waitFor(t, "c1 notified of c2 joining", func() bool { mu.Lock(); defer mu.Unlock(); return notified["c1"] > 0 })
	// The group's retry topic exists and its subscription filters pulls
	// that carry no expression of their own.
	if _, ok, _ := b.topicConfig("%RETRY%cg"); !ok {
		t.Fatal("retry topic of the group not created")
	}
	c := b.client(nil)
	mustSend(t, c, "HB", 0, "tag-a", "TAGS\x01a\x02")
	mustSend(t, c, "HB", 0, "tag-c", "TAGS\x01c\x02")
	b.caughtUp()
	req := pullReq("cg", "HB", 0, 0, 0, 0, "")
	req["sysFlag"] = "0"
	pr := call(t, c1, remoting.PullMessage, req, nil)
	if msgs := decodeRecords(t, pr.Body); pr.Code != remoting.Success || len(msgs) != 1 || string(msgs[0].Body) != "tag-a" {
		t.Fatalf("pull with the heartbeat's subscription: %d %d", pr.Code, len(msgs))
	}
	// A closed connection leaves the group, and the others hear of it.
	mu.Lock()
	before := notified["c1"]
	mu.Unlock()
	_ = c2.Close()
	waitFor(t, "c2 removed", func() bool { return len(b.clients.consumerIDs("cg")) == 1 })
	waitFor(t, "c1 notified of c2 leaving", func() bool { mu.Lock(); defer mu.Unlock(); return notified["c1"] > before })
	// A pull of a group nobody heartbeats for, without its own expression.
	req = pullReq("nobody", "HB", 0, 0, 0, 0, "")
	req["sysFlag"] = "0"
	if r := call(t, c1, remoting.PullMessage, req, nil); r.Code != remoting.SubscriptionNotExist {
		t.Fatalf("pull of an unknown group: %d", r.Code)
	}
}

// notifyConsumerIdsChangedEnable=false keeps the broker from telling a
// group's consumers that another joined or left (RocketMQ's broker-wide
// switch); they then rebalance on their own schedule.
func TestNotifyConsumerIdsChangedDisabled(t *testing.T) {
	b := startTestBroker(t, map[string]string{"notifyConsumerIdsChangedEnable": "false"})
	var notified atomic.Int32
	c1 := b.client(func(_ context.Context, req *remoting.Command) *remoting.Command {
		if req.Code == remoting.NotifyConsumerIDsChanged {
			notified.Add(1)
		}
		return nil
	})
	hb := func(id string) []byte {
		return []byte(`{"clientID":"` + id + `","producerDataSet":[],"consumerDataSet":[{"groupName":"cg","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[],"unitMode":false}]}`)
	}
	heartbeat(t, c1, hb("10.0.0.1@1"))
	c2 := b.client(nil)
	heartbeat(t, c2, hb("10.0.0.2@2"))
	_ = c2.Close()
	waitFor(t, "c2 removed", func() bool { return len(b.clients.consumerIDs("cg")) == 1 })
	// With the switch on, c1 hears of both changes within milliseconds
	// (TestHeartbeatsConsumerListAndNotify); give a late one time to come.
	time.Sleep(200 * time.Millisecond)
	if n := notified.Load(); n != 0 {
		t.Fatalf("c1 was notified %d times with notifyConsumerIdsChangedEnable=false", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLockManagerExpiry(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLockManager(time.Minute)
	l.now = func() time.Time { return now }
	mq := messageQueue{Topic: "T", BrokerName: "b", QueueID: 1}
	if got := l.tryLock("g", "A", []messageQueue{mq}); len(got) != 1 {
		t.Fatal("A could not lock a free queue")
	}
	if got := l.tryLock("g", "B", []messageQueue{mq}); len(got) != 0 {
		t.Fatal("B locked a queue A holds")
	}
	if got := l.tryLock("other", "B", []messageQueue{mq}); len(got) != 1 {
		t.Fatal("locks of another group interfere")
	}
	now = now.Add(59 * time.Second)
	if l.lockedBy("g", mq) != "A" {
		t.Fatal("lock lapsed early")
	}
	now = now.Add(2 * time.Second)
	if got := l.tryLock("g", "B", []messageQueue{mq}); len(got) != 1 {
		t.Fatal("B could not take a lapsed lock")
	}
	l.unlock("g", "A", []messageQueue{mq})
	if l.lockedBy("g", mq) != "B" {
		t.Fatal("A unlocked B's lock")
	}
	now = now.Add(2 * time.Minute)
	l.sweep()
	if len(l.groups) != 0 {
		t.Fatalf("sweep kept %d groups", len(l.groups))
	}
}

func TestLockBatchOverTheWire(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	body := `{"consumerGroup":"og","clientId":"A","mqSet":[{"topic":"T","brokerName":"broker-a","queueId":0},{"topic":"T","brokerName":"broker-a","queueId":1}]}`
	r := call(t, c, remoting.LockBatchMQ, nil, []byte(body))
	if r.Code != remoting.Success || !strings.Contains(string(r.Body), `"queueId":1`) {
		t.Fatalf("lock: %d %s", r.Code, r.Body)
	}
	r = call(t, c, remoting.LockBatchMQ, nil, []byte(strings.Replace(body, `"A"`, `"B"`, 1)))
	if string(r.Body) != `{"lockOKMQSet":[]}` {
		t.Fatalf("B locked A's queues: %s", r.Body)
	}
	call(t, c, remoting.UnlockBatchMQ, nil, []byte(body))
	r = call(t, c, remoting.LockBatchMQ, nil, []byte(strings.Replace(body, `"A"`, `"B"`, 1)))
	if !strings.Contains(string(r.Body), `"queueId":0`) {
		t.Fatalf("B could not lock after A unlocked: %s", r.Body)
	}
}

// A clean shutdown answers held pulls first, so clients pull again at once
// instead of waiting for their request timeout.
func TestShutdownAnswersHeldPulls(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "Held", 0, "m", "")
	b.caughtUp()
	done := make(chan *remoting.Command, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, _ := c.Invoke(ctx, remoting.NewRequest(remoting.PullMessage, pullReq("g", "Held", 0, 1, pullSuspend, 20*time.Second, "*"), nil))
		done <- resp
	}()
	waitFor(t, "pull held", func() bool { return b.holds.count() == 1 })
	start := time.Now()
	b.stop()
	select {
	case resp := <-done:
		if resp == nil || resp.Code != remoting.PullNotFound {
			t.Fatalf("held pull answered %+v, want PULL_NOT_FOUND", resp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("held pull not answered at shutdown")
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("shutdown waited for the pull's own timeout")
	}
}

// TestHoldAfterReleaseAnswersAtOnce checks the shutdown path of long
// polling: once releaseAll ran, a pull that arrives before the server stops
// is re-run at once instead of held until its timeout.
func TestHoldAfterReleaseAnswersAtOnce(t *testing.T) {
	b := startTestBroker(t, nil)
	b.holds.releaseAll()
	ran := make(chan struct{})
	b.holds.hold("T", 0, time.Minute, nil, func() bool { return false }, func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("a pull held after releaseAll was not answered")
	}
	if n := b.holds.count(); n != 0 {
		t.Fatalf("%d pulls held after releaseAll", n)
	}
}

// TestCheckpointErrors checks the index checkpoint request's failure paths:
// a directory outside indexCheckpointDir (named outright or escaping it
// with "..") is refused with NO_PERMISSION and not created; a target that
// already exists is refused with SYSTEM_ERROR and a remark naming it, and
// is left as it was. A directory named inside, and the default, work.
func TestCheckpointErrors(t *testing.T) {
	allowed := filepath.Join(t.TempDir(), "ckpts")
	b := startTestBroker(t, map[string]string{"indexCheckpointDir": allowed})
	c := b.client(nil)
	outside := filepath.Join(t.TempDir(), "elsewhere")
	for _, dir := range []string{outside, filepath.Join(allowed, "..", "escaped"), allowed} {
		r := call(t, c, remoting.CheckpointIndex, map[string]string{remoting.CheckpointFieldDir: dir}, nil)
		if r.Code != remoting.NoPermission || !strings.Contains(r.Remark, "indexCheckpointDir") {
			t.Fatalf("checkpoint into %s: %d %q, want NO_PERMISSION", dir, r.Code, r.Remark)
		}
	}
	for _, dir := range []string{outside, filepath.Join(filepath.Dir(allowed), "escaped")} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("refused checkpoint created %s: %v", dir, err)
		}
	}
	existing := filepath.Join(allowed, "existing")
	if err := os.MkdirAll(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(existing, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := call(t, c, remoting.CheckpointIndex, map[string]string{remoting.CheckpointFieldDir: existing}, nil)
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "existing") {
		t.Fatalf("checkpoint into an existing directory: %d %q", r.Code, r.Remark)
	}
	entries, err := os.ReadDir(existing)
	if err != nil || len(entries) != 1 || entries[0].Name() != "keep" {
		t.Fatalf("existing directory changed: %v %v", entries, err)
	}
	named := filepath.Join(allowed, "sub", "named")
	ok := call(t, c, remoting.CheckpointIndex, map[string]string{remoting.CheckpointFieldDir: named}, nil)
	if ok.Code != remoting.Success || ok.ExtFields[remoting.CheckpointFieldPath] != named {
		t.Fatalf("named checkpoint: %d %q %v", ok.Code, ok.Remark, ok.ExtFields)
	}
	def := call(t, c, remoting.CheckpointIndex, nil, nil)
	if p := def.ExtFields[remoting.CheckpointFieldPath]; def.Code != remoting.Success || filepath.Dir(p) != allowed {
		t.Fatalf("default checkpoint: %d %q at %q, want inside %s", def.Code, def.Remark, p, allowed)
	}
}

// TestCheckpointPeerAndPathRules pins the two checks in front of a
// checkpoint: only loopback peers, and only paths strictly inside the
// checkpoint directory.
func TestCheckpointPeerAndPathRules(t *testing.T) {
	peers := []struct {
		addr net.Addr
		ok   bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5}, true},
		{&net.TCPAddr{IP: net.IPv4(127, 9, 9, 9), Port: 5}, true},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 5}, true},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 5}, false},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.168.1.2"), Port: 5}, false},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, true},
		{nil, false},
	}
	for _, p := range peers {
		if got := loopbackPeer(p.addr); got != p.ok {
			t.Errorf("loopbackPeer(%v) = %v, want %v", p.addr, got, p.ok)
		}
	}
	paths := []struct {
		dir string
		ok  bool
	}{
		{"/s/ck/a", true},
		{"/s/ck/a/b", true},
		{"/s/ck/..a", true}, // a name that starts with two dots is still inside
		{"/s/ck", false},
		{"/s/ck/..", false},
		{"/s/ck/../x", false},
		{"/s/ckx", false},
		{"/other", false},
	}
	for _, p := range paths {
		if got := inside("/s/ck", filepath.Clean(p.dir)); got != p.ok {
			t.Errorf("inside(/s/ck, %s) = %v, want %v", p.dir, got, p.ok)
		}
	}
}

// A held pull with a tag filter stays held while only messages of other
// tags arrive (RocketMQ's hold service does not wake for them), then
// answers with the first that matches and the offset after it; one that
// times out moves the consumer past what it skipped.
func TestLongPollingSkipsUnmatchedMessages(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "LPF", 0, "first", "TAGS\x01a\x02")
	b.caughtUp()
	done := b.holdPull(c, pullReq("g", "LPF", 0, 1, pullSuspend, 15*time.Second, "a"))
	for i := 0; i < 5; i++ {
		mustSend(t, c, "LPF", 0, "other", "TAGS\x01b\x02")
	}
	b.caughtUp()
	select {
	case r := <-done:
		t.Fatalf("a pull for tag a answered %v after messages of tag b only", r)
	case <-time.After(300 * time.Millisecond):
	}
	mustSend(t, c, "LPF", 0, "wanted", "TAGS\x01a\x02")
	r := <-done
	if r.resp == nil || r.resp.Code != remoting.Success || header(t, r.resp, "nextBeginOffset") != 7 {
		t.Fatalf("woken by a matching message: %+v", r.resp)
	}
	if msgs := decodeRecords(t, r.resp.Body); len(msgs) != 1 || string(msgs[0].Body) != "wanted" {
		t.Fatalf("woken pull returned %v", msgs)
	}
	for i := 0; i < 3; i++ {
		mustSend(t, c, "LPF", 0, "other", "TAGS\x01b\x02")
	}
	b.caughtUp()
	resp := call(t, c, remoting.PullMessage, pullReq("g", "LPF", 0, 7, pullSuspend, 300*time.Millisecond, "a"), nil)
	if resp.Code != remoting.PullRetryImmediately || header(t, resp, "nextBeginOffset") != 10 {
		t.Fatalf("pull over unmatched messages only: %d %v", resp.Code, resp.ExtFields)
	}
	held := b.holdPull(c, pullReq("g", "LPF", 0, 10, pullSuspend, 300*time.Millisecond, "a"))
	mustSend(t, c, "LPF", 0, "other", "TAGS\x01b\x02")
	if r := <-held; r.resp == nil || r.resp.Code != remoting.PullNotFound || header(t, r.resp, "nextBeginOffset") != 11 {
		t.Fatalf("a held pull timing out past an unmatched message: %+v", r.resp)
	}
	if b.holds.count() != 0 {
		t.Fatalf("%d pulls still held", b.holds.count())
	}
}

// A filtered pull held over a message it rejects is answered at
// shutdown too, with the offset past it (and a pull re-run once the holds
// are released is not held again).
func TestShutdownAnswersFilteredHeldPull(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "HeldF", 0, "m", "TAGS\x01a\x02")
	b.caughtUp()
	done := b.holdPull(c, pullReq("g", "HeldF", 0, 1, pullSuspend, 20*time.Second, "a"))
	mustSend(t, c, "HeldF", 0, "other", "TAGS\x01b\x02")
	b.caughtUp()
	waitFor(t, "pull held again past the unmatched message", func() bool { return b.holds.count() == 1 })
	start := time.Now()
	b.stop()
	select {
	case r := <-done:
		if r.resp == nil || r.resp.Code != remoting.PullNotFound || header(t, r.resp, "nextBeginOffset") != 2 {
			t.Fatalf("held pull answered %+v, want PULL_NOT_FOUND with the offset past the unmatched message", r.resp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("filtered held pull not answered at shutdown")
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("shutdown waited for the pull's own timeout")
	}
}

// With autoCreateSubscriptionGroup off, a system group (CID_RMQ_SYS_...)
// is still created on first use unless enableCreateSysGroup is off too,
// as RocketMQ does; other unknown groups are refused.
func TestSystemGroupsCreatedWithAutoCreateOff(t *testing.T) {
	for _, tc := range []struct {
		sysCreate string
		want      int32
	}{{"true", remoting.PullNotFound}, {"false", remoting.SubscriptionGroupNotExist}} {
		b := startTestBroker(t, map[string]string{"autoCreateSubscriptionGroup": "false", "enableCreateSysGroup": tc.sysCreate})
		c := b.client(nil)
		createTopic(t, c, "SysG", 1, 1)
		if r := call(t, c, remoting.PullMessage, pullReq("CID_RMQ_SYS_TEST", "SysG", 0, 0, 0, 0, "*"), nil); r.Code != tc.want {
			t.Errorf("enableCreateSysGroup=%s: pull of a new system group answered %d %s, want %d", tc.sysCreate, r.Code, r.Remark, tc.want)
		}
		if r := call(t, c, remoting.PullMessage, pullReq("plain-new", "SysG", 0, 0, 0, 0, "*"), nil); r.Code != remoting.SubscriptionGroupNotExist {
			t.Errorf("enableCreateSysGroup=%s: pull of a new plain group answered %d %s", tc.sysCreate, r.Code, r.Remark)
		}
	}
}
