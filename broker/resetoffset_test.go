package broker

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

// resetReq builds an INVOKE_BROKER_TO_RESET_OFFSET header as mqadmin
// sends it; queue < 0 leaves queueId and offset out.
func resetReq(group, topic string, timestamp int64, queue int32, offset int64) map[string]string {
	h := map[string]string{"group": group, "topic": topic, "timestamp": strconv.FormatInt(timestamp, 10), "isForce": "true"}
	if queue >= 0 {
		h["queueId"] = strconv.Itoa(int(queue))
		h["offset"] = strconv.FormatInt(offset, 10)
	}
	return h
}

// mustReset resets and returns the body's offset table by queue id.
func mustReset(t *testing.T, c *remoting.Client, h map[string]string) map[int32]int64 {
	t.Helper()
	resp := call(t, c, remoting.InvokeBrokerToResetOffset, h, nil)
	if resp.Code != remoting.Success {
		t.Fatalf("reset %v: code %d %s", h, resp.Code, resp.Remark)
	}
	table, err := adminbody.DecodeResetOffset(resp.Body)
	if err != nil {
		t.Fatalf("reset body %s: %v", resp.Body, err)
	}
	out := make(map[int32]int64, len(table))
	for q, off := range table {
		if q.Topic != h["topic"] || q.BrokerName == "" {
			t.Fatalf("reset body names queue %+v", q)
		}
		out[q.QueueID] = off
	}
	return out
}

// TestResetOffsetForPullConsumers follows a reset by store time through
// what a pull consumer holding the old offset does next: its offset commit
// is ignored, its next pull (with the old offset to commit) is answered
// PULL_OFFSET_MOVED with the new offset, and pulling from there returns
// the messages again.
func TestResetOffsetForPullConsumers(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for i := range 3 {
		mustSend(t, c, "RT", 0, fmt.Sprintf("early%d", i), "")
	}
	mustSend(t, c, "RT", 1, "q1-early", "")
	time.Sleep(20 * time.Millisecond) // store times have millisecond precision
	mid := time.Now().UnixMilli()
	time.Sleep(20 * time.Millisecond)
	for i := range 3 {
		mustSend(t, c, "RT", 0, fmt.Sprintf("late%d", i), "")
	}
	b.caughtUp()

	if r := call(t, c, remoting.InvokeBrokerToResetOffset, resetReq("rg", "RT", mid, -1, 0), nil); r.Code != remoting.SubscriptionGroupNotExist {
		t.Fatalf("reset of an unknown group: %d %s", r.Code, r.Remark)
	}
	// The group's first pull creates it; its consumer has read everything.
	if r := call(t, c, remoting.PullMessage, pullReq("rg", "RT", 0, 0, 0, 0, "*"), nil); r.Code != remoting.Success {
		t.Fatalf("first pull: %d %s", r.Code, r.Remark)
	}
	if r := commitOffset(t, c, "rg", "RT", 0, 6); r.Code != remoting.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}

	got := mustReset(t, c, resetReq("rg", "RT", mid, -1, 0))
	want := map[int32]int64{0: 3, 1: 1, 2: 0, 3: 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reset to %d: offsets %v, want %v", mid, got, want)
	}
	if off := committedOffset(t, c, "rg", "RT", 0); off != 3 {
		t.Fatalf("committed offset after the reset %d, want 3", off)
	}
	// The consumer still holds offset 6: its commit is not applied ...
	if r := commitOffset(t, c, "rg", "RT", 0, 6); r.Code != remoting.Success || committedOffset(t, c, "rg", "RT", 0) != 3 {
		t.Fatalf("stale commit after a reset: %d %q, committed %d", r.Code, r.Remark, committedOffset(t, c, "rg", "RT", 0))
	}
	// ... nor is the one its next pull carries; the pull is told to move.
	stale := pullReq("rg", "RT", 0, 6, pullCommitOffset, 0, "*")
	stale["commitOffset"] = "6"
	r := call(t, c, remoting.PullMessage, stale, nil)
	if r.Code != remoting.PullOffsetMoved || header(t, r, "nextBeginOffset") != 3 || header(t, r, "maxOffset") != 6 {
		t.Fatalf("pull after the reset: %d %s %v", r.Code, r.Remark, r.ExtFields)
	}
	if off := committedOffset(t, c, "rg", "RT", 0); off != 3 {
		t.Fatalf("committed offset after the stale pull %d, want 3", off)
	}
	r = call(t, c, remoting.PullMessage, pullReq("rg", "RT", 0, 3, 0, 0, "*"), nil)
	if msgs := decodeRecords(t, r.Body); r.Code != remoting.Success || len(msgs) != 3 || string(msgs[0].Body) != "late0" {
		t.Fatalf("pull from the reset offset: %d, %d messages", r.Code, len(msgs))
	}
	// Told once: commits apply again.
	if commitOffset(t, c, "rg", "RT", 0, 5); committedOffset(t, c, "rg", "RT", 0) != 5 {
		t.Fatal("commit after the reset was seen is not applied")
	}

	// Timestamp -1: the end of every queue.
	if got := mustReset(t, c, resetReq("rg", "RT", -1, -1, 0)); fmt.Sprint(got) != fmt.Sprint(map[int32]int64{0: 6, 1: 1, 2: 0, 3: 0}) {
		t.Fatalf("reset to the end: %v", got)
	}
	// One queue to a given offset (mqadmin resetOffsetByQueueId), up to
	// one past its end as RocketMQ's resetOffsetInner allows.
	if got := mustReset(t, c, resetReq("rg", "RT", -1, 0, 7)); fmt.Sprint(got) != "map[0:7]" || committedOffset(t, c, "rg", "RT", 0) != 7 {
		t.Fatalf("reset of queue 0 (end 6) to 7: %v", got)
	}
	if got := mustReset(t, c, resetReq("rg", "RT", -1, 0, 1)); fmt.Sprint(got) != "map[0:1]" || committedOffset(t, c, "rg", "RT", 0) != 1 {
		t.Fatalf("reset of queue 0 to 1: %v", got)
	}
	if r := call(t, c, remoting.InvokeBrokerToResetOffset, resetReq("rg", "RT", -1, 0, 8), nil); r.Code != remoting.SystemError ||
		r.Remark != "Target offset 8 not in consume queue range [0-6]" {
		t.Errorf("reset of queue 0 (end 6) to 8: %d %q, want RocketMQ's refusal", r.Code, r.Remark)
	}
	for _, tc := range []struct {
		name string
		h    map[string]string
		code int32
	}{
		{"offset two past the queue", resetReq("rg", "RT", -1, 0, 8), remoting.SystemError},
		{"unknown topic", resetReq("rg", "Nope", -1, -1, 0), remoting.TopicNotExist},
		{"queue not in the topic", resetReq("rg", "RT", -1, 4, 0), remoting.InvalidParameter},
		{"no timestamp", map[string]string{"group": "rg", "topic": "RT"}, remoting.SystemError},
		{"bad queue id", map[string]string{"group": "rg", "topic": "RT", "timestamp": "1", "queueId": "x"}, remoting.SystemError},
	} {
		if r := call(t, c, remoting.InvokeBrokerToResetOffset, tc.h, nil); r.Code != tc.code || r.Remark == "" {
			t.Errorf("%s: code %d %q, want %d with a remark", tc.name, r.Code, r.Remark, tc.code)
		}
	}
	if off := committedOffset(t, c, "rg", "RT", 0); off != 1 {
		t.Fatalf("a refused reset moved the committed offset to %d", off)
	}
}

// TestResetOffsetWakesHeldPull checks that a pull held at the end of a
// queue is answered with the reset at once, not at its timeout or the
// next message.
func TestResetOffsetWakesHeldPull(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "RW", 0, "m0", "")
	mustSend(t, c, "RW", 0, "m1", "")
	b.caughtUp()
	done := b.holdPull(c, pullReq("rw", "RW", 0, 2, pullSuspend, 20*time.Second, "*"))
	start := time.Now()
	mustReset(t, c, resetReq("rw", "RW", 0, -1, 0))
	r := (<-done).resp
	if r == nil || r.Code != remoting.PullOffsetMoved || header(t, r, "nextBeginOffset") != 0 {
		t.Fatalf("held pull after a reset: %+v", r)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("held pull answered after %s: by its timeout, not the reset", waited)
	}
}

// TestResetOffsetMovesPopPosition checks a reset of a POP group: the next
// pop starts at the new offset, messages popped before stay in flight (so
// they are acked or revived as before), and the committed offset neither
// falls back to them after a reset forward nor passes them after a reset
// back.
func TestResetOffsetMovesPopPosition(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "PR", 6)
	b.caughtUp()
	popReq := popclient.PopRequest{Group: "pg", Topic: "PR", QueueID: 0, MaxMsgNums: 3, InvisibleTime: time.Minute}
	first := mustPop(t, c, popReq)
	if fmt.Sprint(bodies(first.Messages)) != "[m0 m1 m2]" {
		t.Fatalf("first pop %v", bodies(first.Messages))
	}
	offset := func() int64 { t.Helper(); return committedOffset(t, rc, "pg", "PR", 0) }

	// Forward, past the messages in flight: m3 is skipped.
	mustReset(t, rc, resetReq("pg", "PR", -1, 0, 4))
	fwd := mustPop(t, c, popReq)
	if fmt.Sprint(bodies(fwd.Messages)) != "[m4 m5]" || offset() != 4 {
		t.Fatalf("pop after a reset to 4: %v, committed %d", bodies(fwd.Messages), offset())
	}
	// Acking the older messages does not move the committed offset back.
	if code, err := c.BatchAck(ctx20(t), "pg", "PR", first.Messages); err != nil || code != remoting.Success {
		t.Fatalf("ack of the messages popped before the reset: %d %v", code, err)
	}
	if got := offset(); got != 4 {
		t.Fatalf("committed offset %d after acking messages below the reset, want 4", got)
	}
	if code, err := c.BatchAck(ctx20(t), "pg", "PR", fwd.Messages); err != nil || code != remoting.Success || offset() != 6 {
		t.Fatalf("ack after the reset: %d %v, committed %d", code, err, offset())
	}

	// Back, with later messages in flight: a second group consumed m0 to
	// m3 and holds m4 and m5.
	p2 := popclient.PopRequest{Group: "pg2", Topic: "PR", QueueID: 0, MaxMsgNums: 4, InvisibleTime: time.Minute}
	done := mustPop(t, c, p2)
	if code, err := c.BatchAck(ctx20(t), "pg2", "PR", done.Messages); err != nil || code != remoting.Success {
		t.Fatalf("ack %d %v", code, err)
	}
	held := mustPop(t, c, p2)
	if fmt.Sprint(bodies(held.Messages)) != "[m4 m5]" || committedOffset(t, rc, "pg2", "PR", 0) != 4 {
		t.Fatalf("second group holds %v", bodies(held.Messages))
	}
	mustReset(t, rc, resetReq("pg2", "PR", -1, 0, 1))
	p2.MaxMsgNums = 2
	back := mustPop(t, c, p2)
	if fmt.Sprint(bodies(back.Messages)) != "[m1 m2]" {
		t.Fatalf("pop after a reset back to 1: %v", bodies(back.Messages))
	}
	// Not up to m4, the older messages in flight: m1 is not consumed.
	if got := committedOffset(t, rc, "pg2", "PR", 0); got != 1 {
		t.Fatalf("committed offset %d after popping from a reset back to 1, want 1", got)
	}
	if code, err := c.BatchAck(ctx20(t), "pg2", "PR", back.Messages); err != nil || code != remoting.Success {
		t.Fatalf("ack %d %v", code, err)
	}
	if got := committedOffset(t, rc, "pg2", "PR", 0); got != 3 {
		t.Fatalf("committed offset %d after acking m1 m2, want 3 (m3 is not popped yet)", got)
	}
	if code, err := c.BatchAck(ctx20(t), "pg2", "PR", held.Messages); err != nil || code != remoting.Success || committedOffset(t, rc, "pg2", "PR", 0) != 3 {
		t.Fatalf("ack of the older copies: %d %v, committed %d", code, err, committedOffset(t, rc, "pg2", "PR", 0))
	}
}

// TestResetOffsetUnblocksOrderlyPop checks that a reset releases an
// orderly queue locked by a batch in flight.
func TestResetOffsetUnblocksOrderlyPop(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "PO", 4)
	b.caughtUp()
	req := popclient.PopRequest{Group: "og", Topic: "PO", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true}
	if res := mustPop(t, c, req); fmt.Sprint(bodies(res.Messages)) != "[m0 m1]" {
		t.Fatalf("orderly pop %v", bodies(res.Messages))
	}
	if res := mustPop(t, c, req); res.Code != remoting.PollingTimeout {
		t.Fatalf("pop of a locked queue: %d %v", res.Code, bodies(res.Messages))
	}
	mustReset(t, rc, resetReq("og", "PO", -1, 0, 2))
	if res := mustPop(t, c, req); res.Code != remoting.Success || fmt.Sprint(bodies(res.Messages)) != "[m2 m3]" {
		t.Fatalf("orderly pop after a reset to 2: %d %v", res.Code, bodies(res.Messages))
	}
}

// A reset is assigned only after an offset commit under way is written,
// and a commit after it sees it: none lands between a commit's check and
// its write.
func TestResetWaitsForCommitsUnderWay(t *testing.T) {
	var r offsetResets
	writing, release := make(chan struct{}), make(chan struct{})
	committed := make(chan bool, 1)
	go func() {
		reset, err := r.commitUnlessReset("g", "t", 0, func() error {
			close(writing)
			<-release
			return nil
		})
		committed <- reset || err != nil
	}()
	<-writing
	assigned := make(chan struct{})
	go func() {
		r.assign("g", "t", 0, 5)
		close(assigned)
	}()
	select {
	case <-assigned:
		t.Fatal("the reset was assigned while a commit was being written")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-assigned
	if bad := <-committed; bad {
		t.Fatal("the commit under way saw a reset")
	}
	if reset, _ := r.commitUnlessReset("g", "t", 0, func() error { t.Fatal("a commit after the reset was written"); return nil }); !reset {
		t.Fatal("a commit after the reset did not see it")
	}
	// A restore does not replace a newer reset.
	r.restore("g", "t", 0, 1)
	if off, _ := r.take("g", "t", 0); off != 5 {
		t.Fatalf("after a restore the reset is %d, want the newer 5", off)
	}
}

// A slave refuses a reset, as RocketMQ's does: its offsets are its
// master's, copied at every sync, which would undo it.
func TestASlaveRefusesAnOffsetReset(t *testing.T) {
	s := startTestBroker(t, map[string]string{"brokerRole": "SLAVE", "brokerId": "1"})
	resp := call(t, s.client(nil), remoting.InvokeBrokerToResetOffset, resetReq("g", "T", 0, -1, 0), nil)
	if resp.Code != remoting.SystemError || resp.Remark != "Can not reset offset in slave broker" {
		t.Fatalf("reset on a slave: %d %s", resp.Code, resp.Remark)
	}
}

// A reset of a queue the group has not popped yet waits for a pull (the
// group may pull it); the queue's next pop ends that wait, as RocketMQ
// erases a waiting reset at a pop (PopMessageProcessor.getPopOffset ->
// queryThenEraseResetOffset). It used to stay: once the group had popped
// and acked past it, its first pull (consume mode switched back to PULL)
// was moved back to the reset offset and everything was consumed again.
func TestAPopEndsTheWaitOfAResetForAPull(t *testing.T) {
	b := startTestBroker(t, nil)
	pc, rc := popClient(b)
	createTopic(t, rc, "RUP", 1, 1)
	sendBodies(t, rc, "RUP", 4)
	b.caughtUp()
	ensureGroup(t, rc, "rup")
	if got := mustReset(t, rc, resetReq("rup", "RUP", 0, -1, 0)); got[0] != 0 {
		t.Fatalf("reset to time 0: %v", got)
	}
	res := mustPop(t, pc, popclient.PopRequest{Group: "rup", Topic: "RUP", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if len(res.Messages) != 4 {
		t.Fatalf("pop after the reset: %v", bodies(res.Messages))
	}
	for _, m := range res.Messages {
		if code, _ := pc.Ack(ctx20(t), "rup", m); code != remoting.Success {
			t.Fatalf("ack: %d", code)
		}
	}
	if off := committedOffset(t, rc, "rup", "RUP", 0); off != 4 {
		t.Fatalf("committed after acking everything: %d", off)
	}
	r := call(t, rc, remoting.PullMessage, pullReq("rup", "RUP", 0, 4, 0, 0, "*"), nil)
	if r.Code == remoting.PullOffsetMoved {
		t.Fatalf("pull at the committed offset 4 after the pops: moved to %s (the reset the pops consumed past)", r.ExtFields["nextBeginOffset"])
	}
}

// A reset of a light message queue for a light message queue's group
// (both named %LMQ%...) under enableLmq moves the group's committed offset
// only when it has one, as RocketMQ's default LmqConsumerOffsetManager
// (assignResetOffset: computeIfPresent); with none, the reset only waits
// for the group's next pull, which is told to move. A group that is no
// light message queue's gets its offset written, as any group's.
func TestResetOfALightMessageQueueMovesOnlyAnOffsetItHas(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enableLmq": "true", "enableMultiDispatch": "true"})
	c := b.client(nil)
	createTopic(t, c, "Parent", 1, 1)
	for i := range 3 {
		mustSend(t, c, "Parent", 0, fmt.Sprintf("m%d", i), lmqProps("%LMQ%r1,%LMQ%r2"))
	}
	b.caughtUp()
	ensureGroup(t, c, "plain")
	if r := commitOffset(t, c, "%LMQ%rg", "%LMQ%r2", 0, 1); r.Code != remoting.Success {
		t.Fatalf("commit on %%LMQ%%r2: %d %s", r.Code, r.Remark)
	}
	query := func(group, topic string) *remoting.Command {
		return call(t, c, remoting.QueryConsumerOffset, map[string]string{
			"consumerGroup": group, "topic": topic, "queueId": "0", "setZeroIfNotFound": "false"}, nil)
	}

	if got := mustReset(t, c, resetReq("%LMQ%rg", "%LMQ%r1", -1, 0, 2)); fmt.Sprint(got) != "map[0:2]" {
		t.Fatalf("reset of %%LMQ%%r1: %v", got)
	}
	if r := query("%LMQ%rg", "%LMQ%r1"); r.Code != remoting.QueryNotFound {
		t.Fatalf("offset of %%LMQ%%rg on %%LMQ%%r1 (none before the reset) after it: %d %v, want QUERY_NOT_FOUND", r.Code, r.ExtFields)
	}
	r := call(t, c, remoting.PullMessage, pullReq("%LMQ%rg", "%LMQ%r1", 0, 0, 0, 0, "*"), nil)
	if r.Code != remoting.PullOffsetMoved || header(t, r, "nextBeginOffset") != 2 {
		t.Fatalf("pull after the reset: %d %s %v, want PULL_OFFSET_MOVED to 2", r.Code, r.Remark, r.ExtFields)
	}

	if got := mustReset(t, c, resetReq("%LMQ%rg", "%LMQ%r2", -1, 0, 2)); fmt.Sprint(got) != "map[0:2]" {
		t.Fatalf("reset of %%LMQ%%r2: %v", got)
	}
	if off := committedOffset(t, c, "%LMQ%rg", "%LMQ%r2", 0); off != 2 {
		t.Fatalf("offset of %%LMQ%%rg on %%LMQ%%r2 (1 before the reset to 2): %d", off)
	}

	if got := mustReset(t, c, resetReq("plain", "%LMQ%r1", -1, 0, 1)); fmt.Sprint(got) != "map[0:1]" {
		t.Fatalf("reset of %%LMQ%%r1 for plain: %v", got)
	}
	if off := committedOffset(t, c, "plain", "%LMQ%r1", 0); off != 1 {
		t.Fatalf("offset of plain on %%LMQ%%r1 after its reset: %d, want 1", off)
	}
}
