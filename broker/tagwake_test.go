package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

// Long-polling requests are woken only by messages their tag filter may
// take (RocketMQ checks a held request's MessageFilter against the
// dispatched tagsCode). The counters holds.woken and popHolds.woken count
// the re-runs dispatches caused; caughtUp returns once the dispatcher has
// told the held requests of everything sent, so they are exact.

// tagged are the properties of a message with one tag.
func tagged(tag string) string { return commitlog.PropertyTags + "\x01" + tag + "\x02" }

// sendTagged sends n messages of one tag to queue 0 of topic.
func sendTagged(t *testing.T, c *remoting.Client, topic, tag string, n int) {
	t.Helper()
	for range n {
		mustSend(t, c, topic, 0, "other", tagged(tag))
	}
}

// stillHeld fails unless no held pull was re-run and the one whose answer
// done brings is unanswered, after the messages sent describes.
func stillHeld(t testing.TB, b *testBroker, done <-chan pullAnswer, sent string) {
	t.Helper()
	if n := b.holds.woken.Load(); n != 0 {
		t.Fatalf("%s re-ran the held pull %d times", sent, n)
	}
	select {
	case r := <-done:
		t.Fatalf("the held pull answered %v after %s", r, sent)
	default:
	}
}

// A pull held for tag a is not re-run by a thousand messages of tag b, and
// a message of tag a answers it through its wake (not its timeout: the
// wake counter says so).
func TestHeldPullSleepsThroughOtherTags(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "TW", 0, "first", tagged("a"))
	b.caughtUp()
	done := b.holdPull(c, pullReq("ga", "TW", 0, 1, pullSuspend, 25*time.Second, "a"))
	sendTagged(t, c, "TW", "b", 1000)
	b.caughtUp()
	stillHeld(t, b, done, "1000 messages of tag b")
	if n := b.holds.count(); n != 1 {
		t.Fatalf("%d pulls held, want 1", n)
	}
	mustSend(t, c, "TW", 0, "wanted", tagged("a"))
	r := <-done
	if n := b.holds.woken.Load(); n != 1 {
		t.Fatalf("the pull was woken %d times, want once, by the message of tag a", n)
	}
	if r.resp == nil || r.resp.Code != remoting.Success || header(t, r.resp, "nextBeginOffset") != 1002 {
		t.Fatalf("woken by a matching message: %+v", r.resp)
	}
	if msgs := decodeRecords(t, r.resp.Body); len(msgs) != 1 || string(msgs[0].Body) != "wanted" {
		t.Fatalf("woken pull returned %d messages", len(msgs))
	}
}

// A "*" subscription, and one of several tags, wake on any message they
// take; a burst that mixes tags wakes the pull its one matching message
// belongs to.
func TestHeldPullWakesOnWhatItTakes(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "TS", 0, "first", tagged("a"))
	b.caughtUp()

	all := b.holdPull(c, pullReq("gall", "TS", 0, 1, pullSuspend, 25*time.Second, "*"))
	mustSend(t, c, "TS", 0, "b1", tagged("b"))
	if r := <-all; r.resp == nil || r.resp.Code != remoting.Success || b.holds.woken.Load() != 1 {
		t.Fatalf("a pull of every tag after a message of tag b: %+v, woken %d", r.resp, b.holds.woken.Load())
	}

	several := b.holdPull(c, pullReq("gcd", "TS", 0, 2, pullSuspend, 25*time.Second, "c || d"))
	sendTagged(t, c, "TS", "b", 3)
	b.caughtUp()
	if n := b.holds.woken.Load(); n != 1 {
		t.Fatalf("messages of tag b re-ran the pull for c || d (woken %d in all)", n)
	}
	mustSendBatch(t, c, "TS", []batchItem{{"x1", tagged("b")}, {"wanted", tagged("d")}, {"x2", tagged("b")}, {"x3", tagged("e")}})
	r := <-several
	if r.resp == nil || r.resp.Code != remoting.Success {
		t.Fatalf("a mixed burst with one message of tag d: %+v", r.resp)
	}
	if msgs := decodeRecords(t, r.resp.Body); len(msgs) != 1 || string(msgs[0].Body) != "wanted" {
		t.Fatalf("woken pull returned %d messages", len(msgs))
	}
	if n := b.holds.woken.Load(); n != 2 {
		t.Fatalf("woken %d in all, want 2", n)
	}
}

// batchItem is one message of a batch send: its body and properties.
type batchItem struct{ body, props string }

// mustSendBatch sends items to queue 0 of topic in one SEND_BATCH_MESSAGE.
func mustSendBatch(t *testing.T, c *remoting.Client, topic string, items []batchItem) {
	t.Helper()
	var batch []byte
	for _, m := range items {
		var err error
		if batch, err = commitlog.AppendBatchItem(batch, 0, []byte(m.body), m.props); err != nil {
			t.Fatal(err)
		}
	}
	resp := call(t, c, remoting.SendBatchMessage, map[string]string{"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0",
		"f": "0", "g": "1", "h": "0", "m": "true"}, batch)
	if resp.Code != remoting.Success {
		t.Fatalf("batch send to %s: %d %s", topic, resp.Code, resp.Remark)
	}
}

// heldPop starts a POP in the background and waits until the broker holds
// it; its answer arrives on the channel.
func heldPop(t *testing.T, b *testBroker, c *popclient.Client, r popclient.PopRequest) <-chan popclient.PopResult {
	t.Helper()
	done := make(chan popclient.PopResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := c.Pop(ctx, r)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitFor(t, "pop held", func() bool { return b.popHolds.count(popHoldKey{r.Topic, r.Group, r.QueueID}) == 1 })
	return done
}

// A POP held for tag a is not re-run by a thousand messages of tag b
// (with RocketMQ's forced wake turned off), and a message of tag a
// answers it through its wake; a POP of every tag wakes on tag b.
func TestHeldPopSleepsThroughOtherTags(t *testing.T) {
	b := startTestBroker(t, map[string]string{"popLongPollingForceNotifyInterval": "0"})
	c, rc := popClient(b)
	mustSend(t, rc, "PW", 0, "first", tagged("b"))
	b.caughtUp()
	done := heldPop(t, b, c, popclient.PopRequest{Group: "ga", Topic: "PW", QueueID: 0, MaxMsgNums: 4,
		InvisibleTime: time.Minute, PollTime: 25 * time.Second, Exp: "a"})
	sendTagged(t, rc, "PW", "b", 1000)
	b.caughtUp()
	if n := b.popHolds.woken.Load(); n != 0 {
		t.Fatalf("1000 messages of tag b re-ran the POP held for tag a %d times", n)
	}
	select {
	case res := <-done:
		t.Fatalf("the POP for tag a answered %d after messages of tag b only", res.Code)
	default:
	}
	mustSend(t, rc, "PW", 0, "wanted", tagged("a"))
	res := <-done
	if n := b.popHolds.woken.Load(); n != 1 {
		t.Fatalf("the POP was woken %d times, want once, by the message of tag a", n)
	}
	if res.Code != remoting.Success || len(res.Messages) != 1 || string(res.Messages[0].Body) != "wanted" {
		t.Fatalf("woken POP: %d %v", res.Code, bodies(res.Messages))
	}

	commit(t, rc, "gall", "PW", 0, 1002)
	all := heldPop(t, b, c, popclient.PopRequest{Group: "gall", Topic: "PW", QueueID: 0, MaxMsgNums: 1,
		InvisibleTime: time.Minute, PollTime: 25 * time.Second})
	mustSend(t, rc, "PW", 0, "b2", tagged("b"))
	if res := <-all; res.Code != remoting.Success || len(res.Messages) != 1 || string(res.Messages[0].Body) != "b2" {
		t.Fatalf("a POP of every tag after a message of tag b: %d %v", res.Code, bodies(res.Messages))
	}
	if n := b.popHolds.woken.Load(); n != 2 {
		t.Fatalf("woken %d in all, want 2", n)
	}
}

// With popLongPollingForceNotifyInterval (800 by default) a POP held for
// tag a is woken once in a thousand messages of tag b, by the one at
// queue offset 799, as RocketMQ forces it: the re-run moves the group's
// offset past what its filter skipped, and it is held again.
func TestHeldPopForcedWakeMovesOffset(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	mustSend(t, rc, "PF", 0, "first", tagged("b"))
	b.caughtUp()
	done := heldPop(t, b, c, popclient.PopRequest{Group: "ga", Topic: "PF", QueueID: 0, MaxMsgNums: 4,
		InvisibleTime: time.Minute, PollTime: 25 * time.Second, Exp: "a"})
	if off := committedOffset(t, rc, "ga", "PF", 0); off != 1 {
		t.Fatalf("committed offset %d before the run of tag b, want 1", off)
	}
	sendTagged(t, rc, "PF", "b", 1000)
	b.caughtUp()
	if n := b.popHolds.woken.Load(); n != 1 {
		t.Fatalf("1000 messages of tag b woke the POP held for tag a %d times, want once (offset 799)", n)
	}
	waitFor(t, "the committed offset past the forced wake", func() bool {
		return committedOffset(t, rc, "ga", "PF", 0) >= 800
	})
	waitFor(t, "the POP held again", func() bool { return b.popHolds.count(popHoldKey{"PF", "ga", 0}) == 1 })
	select {
	case res := <-done:
		t.Fatalf("the POP for tag a answered %d after messages of tag b only", res.Code)
	default:
	}
	b.stop()
	if res := <-done; res.Code != remoting.PollingTimeout {
		t.Fatalf("the held POP answered %d at shutdown, want POLLING_TIMEOUT", res.Code)
	}
}

// NOTIFICATION carries no filter (RocketMQ's header has none, and its
// hasMsg counts every message): a held one wakes on a message of any tag
// and answers hasMsg.
func TestHeldNotificationWakesOnAnyTag(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	mustSend(t, rc, "NW", 0, "first", tagged("b"))
	b.caughtUp()
	// A POP for tag a moves the group past the message of tag b.
	if res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "NW", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute, Exp: "a"}); len(res.Messages) != 0 {
		t.Fatalf("POP for tag a took %v", bodies(res.Messages))
	}
	has := make(chan bool, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, h, _, err := c.Notification(ctx, "g", "NW", 0, 25*time.Second, false)
		if err != nil {
			t.Error(err)
		}
		has <- h
	}()
	waitFor(t, "notification held", func() bool { return b.popHolds.count(popHoldKey{"NW", "g", 0}) == 1 })
	mustSend(t, rc, "NW", 0, "b2", tagged("b"))
	if !<-has {
		t.Fatal("notification answered without a message")
	}
	if n := b.popHolds.woken.Load(); n != 1 {
		t.Fatalf("the notification was woken %d times, want once", n)
	}
}

// A pull held with a SQL92 selector is not re-run by messages the
// selector rejects (RocketMQ evaluates it against each dispatched
// message's properties before it wakes a held request), and a message it
// takes answers it through its wake, also when it comes in one batch
// between rejected ones.
func TestHeldSQL92PullSleepsThroughRejectedMessages(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enablePropertyFilter": "true"})
	c := b.client(nil)
	mustSend(t, c, "SQW", 0, "first", "a\x010\x02")
	b.caughtUp()
	req := pullReq("gsql", "SQW", 0, 1, pullSuspend, 25*time.Second, "a > 5")
	req["expressionType"] = "SQL92"
	done := b.holdPull(c, req)
	for i := range 200 {
		mustSend(t, c, "SQW", 0, "low", fmt.Sprintf("a\x01%d\x02", i%6))
	}
	b.caughtUp()
	stillHeld(t, b, done, "200 messages with a <= 5")
	mustSendBatch(t, c, "SQW", []batchItem{{"x1", "a\x011\x02"}, {"wanted", "a\x019\x02"}, {"x2", "a\x012\x02"}})
	r := <-done
	if n := b.holds.woken.Load(); n != 1 {
		t.Fatalf("the pull was woken %d times, want once, by the batch holding a = 9", n)
	}
	if r.resp == nil || r.resp.Code != remoting.Success {
		t.Fatalf("woken by a matching message: %+v", r.resp)
	}
	if msgs := decodeRecords(t, r.resp.Body); len(msgs) != 1 || string(msgs[0].Body) != "wanted" {
		t.Fatalf("woken pull returned %d messages", len(msgs))
	}
}

// The same for a POP held with a SQL92 selector (RocketMQ's forced wake
// turned off).
func TestHeldSQL92PopSleepsThroughRejectedMessages(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enablePropertyFilter": "true", "popLongPollingForceNotifyInterval": "0"})
	c, rc := popClient(b)
	mustSend(t, rc, "SQP", 0, "first", "a\x010\x02")
	b.caughtUp()
	done := heldPop(t, b, c, popclient.PopRequest{Group: "gsql", Topic: "SQP", QueueID: 0, MaxMsgNums: 4,
		InvisibleTime: time.Minute, PollTime: 25 * time.Second, Exp: "a > 5", ExpType: "SQL92"})
	for i := range 200 {
		mustSend(t, rc, "SQP", 0, "low", fmt.Sprintf("a\x01%d\x02", i%6))
	}
	b.caughtUp()
	if n := b.popHolds.woken.Load(); n != 0 {
		t.Fatalf("200 messages with a <= 5 re-ran the POP held for a > 5 %d times", n)
	}
	mustSend(t, rc, "SQP", 0, "wanted", "a\x019\x02")
	res := <-done
	if n := b.popHolds.woken.Load(); n != 1 {
		t.Fatalf("the POP was woken %d times, want once, by the message with a = 9", n)
	}
	if res.Code != remoting.Success || len(res.Messages) != 1 || string(res.Messages[0].Body) != "wanted" {
		t.Fatalf("woken POP: %d %v", res.Code, bodies(res.Messages))
	}
}
