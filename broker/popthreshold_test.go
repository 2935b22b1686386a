package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// popOne pops at most n messages of queue 0 without polling.
func popOne(t *testing.T, c *popclient.Client, topic string, n int) popclient.PopResult {
	t.Helper()
	return mustPop(t, c, popclient.PopRequest{Group: "g", Topic: topic, QueueID: 0, MaxMsgNums: n, InvisibleTime: time.Minute})
}

// wantStopped fails unless a pop of queue 0 gets nothing and counts
// nothing left behind: the in-flight threshold stops the queue.
func wantStopped(t *testing.T, c *popclient.Client, topic, when string) {
	t.Helper()
	res := popOne(t, c, topic, 4)
	if len(res.Messages) != 0 || res.Code != remoting.PollingTimeout || res.RestNum != 0 {
		t.Fatalf("%s: pop got %v (code %d, restNum %d), want nothing: the queue is over its in-flight threshold",
			when, bodies(res.Messages), res.Code, res.RestNum)
	}
}

// With enablePopMessageThreshold, a queue of which the group has more
// than popInflightMessageThreshold messages in flight gives its pops
// nothing, RocketMQ's check being made before the queue is read (so the
// pop that reaches the threshold can pass it by its batch); acks bring it
// back, a change of invisible time does not, a pop held for it wakes when
// an ack does, and a restart keeps the count (it comes from the stored
// checkpoints).
func TestPopInFlightThresholdStopsAQueue(t *testing.T) {
	settings := map[string]string{"enablePopMessageThreshold": "true", "popInflightMessageThreshold": "2"}
	b := startTestBroker(t, settings)
	c, rc := popClient(b)
	sendBodies(t, rc, "TH", 12)
	b.caughtUp()

	first := popOne(t, c, "TH", 2) // 0 in flight: read
	if got := bodies(first.Messages); len(got) != 2 || got[0] != "m0" {
		t.Fatalf("first pop %v", got)
	}
	second := popOne(t, c, "TH", 3) // 2 in flight, not more than 2: read, 5 then
	if got := bodies(second.Messages); len(got) != 3 || got[0] != "m2" {
		t.Fatalf("second pop %v", got)
	}
	wantStopped(t, c, "TH", "5 in flight")
	// Another group is not stopped by g's messages in flight.
	other := mustPop(t, c, popclient.PopRequest{Group: "g2", Topic: "TH", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
	if got := bodies(other.Messages); len(got) != 1 || got[0] != "m0" {
		t.Fatalf("other group's pop %v", got)
	}
	// Nor is a NOTIFICATION told a message waits.
	if code, has, _, err := c.Notification(ctx20(t), "g", "TH", 0, 0, false); err != nil || code != remoting.Success || has {
		t.Fatalf("notification of a stopped queue: %d %v %v", code, has, err)
	}

	// A change of invisible time keeps the message in flight.
	code, h, err := c.ChangeInvisibleTime(ctx20(t), "g", second.Messages[0], time.Minute)
	if err != nil || code != remoting.Success {
		t.Fatalf("change invisible time: %d %v", code, err)
	}
	second.Messages[0].Handle = h
	wantStopped(t, c, "TH", "after a change of invisible time")

	// Two acks leave 3 in flight: still over.
	for _, m := range first.Messages {
		if code, err := c.Ack(ctx20(t), "g", m); err != nil || code != remoting.Success {
			t.Fatalf("ack: %d %v", code, err)
		}
	}
	wantStopped(t, c, "TH", "3 in flight")

	// A pop held for the queue sleeps (it does not wake itself) and is
	// woken by the ack that brings the queue back to 2.
	reruns := b.popHolds.reruns.Load()
	held := make(chan popclient.PopResult, 1)
	go func() {
		res, _ := c.Pop(context.Background(), popclient.PopRequest{Group: "g", Topic: "TH", QueueID: 0, MaxMsgNums: 1,
			InvisibleTime: time.Minute, PollTime: 15 * time.Second})
		held <- res
	}()
	waitFor(t, "the pop of the stopped queue held", func() bool { return b.popHolds.count(popHoldKey{"TH", "g", 0}) == 1 })
	time.Sleep(300 * time.Millisecond)
	if n := b.popHolds.reruns.Load() - reruns; n != 0 {
		t.Fatalf("the pop held on the stopped queue re-ran %d times with nothing acknowledged, want 0", n)
	}
	select {
	case res := <-held:
		t.Fatalf("held pop answered before any ack: code %d, %v", res.Code, bodies(res.Messages))
	default:
	}
	if code, err := c.BatchAck(ctx20(t), "g", "TH", second.Messages[:1]); err != nil || code != remoting.Success {
		t.Fatalf("batch ack: %d %v", code, err)
	}
	select {
	case res := <-held:
		if got := bodies(res.Messages); res.Code != remoting.Success || len(got) != 1 || got[0] != "m5" {
			t.Fatalf("woken pop: code %d, %v", res.Code, got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held pop was not woken by the ack that brought the queue back to its threshold")
	}
	wantStopped(t, c, "TH", "3 in flight again")

	// The count comes from the stored checkpoints: a restart keeps it.
	store := b.store
	b.stop()
	b = startTestBrokerAt(t, store, settings)
	c, _ = popClient(b)
	wantStopped(t, c, "TH", "after a restart")

	// Off at run time: the queue is served whatever is in flight.
	updateConfig(t, b.client(nil), "enablePopMessageThreshold=false")
	if got := bodies(popOne(t, c, "TH", 2).Messages); len(got) != 2 || got[0] != "m6" {
		t.Fatalf("pop with the threshold off %v", got)
	}
	// On again, and raised at run time: 5 in flight, not more than 5.
	updateConfig(t, b.client(nil), "enablePopMessageThreshold=true\npopInflightMessageThreshold=5")
	if got := bodies(popOne(t, c, "TH", 1).Messages); len(got) != 1 || got[0] != "m8" {
		t.Fatalf("pop under a raised threshold %v", got)
	}
	wantStopped(t, c, "TH", "6 in flight over 5")
}

// Off (the default), a group's messages in flight never stop its pops.
func TestPopInFlightThresholdOffChangesNothing(t *testing.T) {
	b := startTestBroker(t, map[string]string{"popInflightMessageThreshold": "0"})
	c, rc := popClient(b)
	sendBodies(t, rc, "TO", 6)
	b.caughtUp()
	for i := range 6 {
		res := popOne(t, c, "TO", 1)
		if got := bodies(res.Messages); len(got) != 1 || got[0] != fmt.Sprintf("m%d", i) {
			t.Fatalf("pop %d with the threshold off: %v", i, got)
		}
	}
}

// The two keys are broker settings like any other: reported by
// GET_BROKER_CONFIG with RocketMQ's defaults, and changed at run time by
// UPDATE_BROKER_CONFIG.
func TestPopInFlightThresholdSettings(t *testing.T) {
	b := startTestBroker(t, nil)
	rc := b.client(nil)
	got, _ := brokerSettings(t, rc)
	if got["enablePopMessageThreshold"] != "false" || got["popInflightMessageThreshold"] != "10000" {
		t.Fatalf("GET_BROKER_CONFIG: enablePopMessageThreshold=%q popInflightMessageThreshold=%q",
			got["enablePopMessageThreshold"], got["popInflightMessageThreshold"])
	}
	updateConfig(t, rc, "enablePopMessageThreshold=true\npopInflightMessageThreshold=7")
	got, _ = brokerSettings(t, rc)
	if got["enablePopMessageThreshold"] != "true" || got["popInflightMessageThreshold"] != "7" {
		t.Fatalf("after the update: enablePopMessageThreshold=%q popInflightMessageThreshold=%q",
			got["enablePopMessageThreshold"], got["popInflightMessageThreshold"])
	}
	if r := call(t, rc, remoting.UpdateBrokerConfig, nil, []byte("popInflightMessageThreshold=-1")); r.Code == remoting.Success {
		t.Fatal("a negative threshold was taken")
	}
}

// Revive takes the messages it re-delivers out of their queue's count:
// a queue stopped by messages nobody acknowledges is served again once
// their invisible time is over, as RocketMQ's revive decrements its
// counter.
func TestPopInFlightThresholdReleasedByRevive(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enablePopMessageThreshold": "true", "popInflightMessageThreshold": "1"})
	c, rc := popClient(b)
	sendBodies(t, rc, "TR", 4)
	b.caughtUp()
	first := popOne(t, c, "TR", 2)
	if got := bodies(first.Messages); len(got) != 2 || got[0] != "m0" {
		t.Fatalf("first pop %v", got)
	}
	wantStopped(t, c, "TR", "2 in flight over 1")
	// Due soon: revive puts them to the pop-retry topic.
	for _, m := range first.Messages {
		if code, _, err := c.ChangeInvisibleTime(ctx20(t), "g", m, 100*time.Millisecond); err != nil || code != remoting.Success {
			t.Fatalf("change invisible time: %d %v", code, err)
		}
	}
	var got []string
	for deadline := time.Now().Add(15 * time.Second); !slices.Contains(got, "m2"); {
		if time.Now().After(deadline) {
			t.Fatalf("queue never served again after its messages in flight were revived; last pop %v", got)
		}
		res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "TR", QueueID: 0, MaxMsgNums: 32,
			InvisibleTime: time.Minute, PollTime: time.Second})
		got = bodies(res.Messages)
	}
}

// A slave counts its own pops against the in-flight threshold, as
// RocketMQ's slave counts them in its PopInflightMessageCounter: the
// messages its non-orderly pops handed out are in flight until an ack on
// the slave takes them out (an ack of a message popped from the master
// takes nothing out) or their invisible time is over; a pop held for a
// stopped queue wakes at the ack, or at the end of the invisible time,
// that brings the queue back to the threshold.
func TestSlavePopInFlightThreshold(t *testing.T) {
	settings := map[string]string{"enablePopMessageThreshold": "true", "popInflightMessageThreshold": "2"}
	master := startTestBroker(t, withHA(nil))
	slave := startSlaveOf(t, master, settings)
	_, mrc := popClient(master)
	sendBodies(t, mrc, "ST", 12)
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master) // the topic
	c, _ := popClient(slave)

	first := popOne(t, c, "ST", 2) // 0 in flight: read
	if got := bodies(first.Messages); len(got) != 2 || got[0] != "m0" {
		t.Fatalf("first pop on the slave %v", got)
	}
	second := popOne(t, c, "ST", 3) // 2 in flight, not more than 2: read, 5 then
	if got := bodies(second.Messages); len(got) != 3 || got[0] != "m2" {
		t.Fatalf("second pop on the slave %v", got)
	}
	wantStopped(t, c, "ST", "5 in flight on the slave")
	if code, has, _, err := c.Notification(ctx20(t), "g", "ST", 0, 0, false); err != nil || code != remoting.Success || has {
		t.Fatalf("notification of a stopped queue on the slave: %d %v %v", code, has, err)
	}
	other := mustPop(t, c, popclient.PopRequest{Group: "g2", Topic: "ST", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
	if got := bodies(other.Messages); len(got) != 1 || got[0] != "m0" {
		t.Fatalf("other group's pop on the slave %v", got)
	}

	// Acks on the slave of messages popped from the master are not of
	// the slave's count.
	mc, _ := popClient(master)
	onMaster := popOne(t, mc, "ST", 2)
	if code, err := c.BatchAck(ctx20(t), "g", "ST", onMaster.Messages); err != nil || code != remoting.Success {
		t.Fatalf("batch ack on the slave of the master's messages: %d %v", code, err)
	}
	wantStopped(t, c, "ST", "after acks of messages popped from the master")

	// Two acks of its own leave 3 in flight: still over.
	for _, m := range first.Messages {
		if code, err := c.Ack(ctx20(t), "g", m); err != nil || code != remoting.Success {
			t.Fatalf("ack on the slave: %d %v", code, err)
		}
	}
	wantStopped(t, c, "ST", "3 in flight on the slave")

	// A held pop wakes at the ack that brings the queue back to 2.
	held := make(chan popclient.PopResult, 1)
	go func() {
		res, _ := c.Pop(context.Background(), popclient.PopRequest{Group: "g", Topic: "ST", QueueID: 0, MaxMsgNums: 1,
			InvisibleTime: time.Minute, PollTime: 15 * time.Second})
		held <- res
	}()
	waitFor(t, "the pop of the stopped queue held", func() bool { return slave.popHolds.count(popHoldKey{"ST", "g", 0}) == 1 })
	if code, err := c.Ack(ctx20(t), "g", second.Messages[0]); err != nil || code != remoting.Success {
		t.Fatalf("ack on the slave: %d %v", code, err)
	}
	select {
	case res := <-held:
		if got := bodies(res.Messages); res.Code != remoting.Success || len(got) != 1 || got[0] != "m5" {
			t.Fatalf("woken pop on the slave: code %d, %v", res.Code, got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held pop on the slave was not woken by the ack that brought the queue back to its threshold")
	}
	wantStopped(t, c, "ST", "3 in flight on the slave again")

	// Another group's messages, nobody acknowledging them: a pop held
	// for the queue wakes when the invisible time of enough of them is
	// over, those of the first pop here, before that of the second (the
	// memory of what the slave handed out wakes pops only at the end of
	// the last).
	short := mustPop(t, c, popclient.PopRequest{Group: "e", Topic: "ST", QueueID: 0, MaxMsgNums: 2, InvisibleTime: 2 * time.Second})
	long := mustPop(t, c, popclient.PopRequest{Group: "e", Topic: "ST", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
	if got := append(bodies(short.Messages), bodies(long.Messages)...); fmt.Sprint(got) != "[m0 m1 m2]" {
		t.Fatalf("pops of group e on the slave %v, want [m0 m1 m2]", got)
	}
	start := time.Now()
	res, err := c.Pop(ctx20(t), popclient.PopRequest{Group: "e", Topic: "ST", QueueID: 0, MaxMsgNums: 1,
		InvisibleTime: time.Minute, PollTime: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := bodies(res.Messages); res.Code != remoting.Success || len(got) != 1 || got[0] != "m3" {
		t.Fatalf("held pop of group e once 2 of its 3 messages in flight ran out: code %d, %v, want m3", res.Code, got)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the held pop of group e waited %v: not woken when the invisible time of the first pop ran out", waited)
	}
}

// A pop-retry queue is stopped like any other, and a pop held because of
// it is held under the topic popped (whose pops read its pop-retry
// queues): the ack that brings the pop-retry queue back to the threshold
// wakes it, well before its poll time, instead of leaving it to wait that
// time out.
func TestPopInFlightThresholdWakesOnPopRetryQueue(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enablePopMessageThreshold": "true", "popInflightMessageThreshold": "1"})
	c, rc := popClient(b)
	sendBodies(t, rc, "TQ", 3)
	b.caughtUp()
	first := popOne(t, c, "TQ", 3)
	if got := bodies(first.Messages); len(got) != 3 || got[0] != "m0" {
		t.Fatalf("first pop %v", got)
	}
	// Due soon: revive puts the three to the pop-retry topic.
	for _, m := range first.Messages {
		if code, _, err := c.ChangeInvisibleTime(ctx20(t), "g", m, 100*time.Millisecond); err != nil || code != remoting.Success {
			t.Fatalf("change invisible time: %d %v", code, err)
		}
	}
	retry := pop.RetryTopicV1("TQ", "g")
	waitFor(t, "the three messages revived to "+retry, func() bool {
		n, err := b.cqs.MaxOffset(retry, 0)
		return err == nil && n == 3
	})
	b.caughtUp()

	// Two of them popped again from the pop-retry queue and not
	// acknowledged: 2 in flight there, over 1, so it is stopped.
	var again []popclient.Message
	for deadline := time.Now().Add(15 * time.Second); len(again) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("popped %v of the revived messages again, want 2", bodies(again))
		}
		res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "TQ", QueueID: 0, MaxMsgNums: 2 - len(again),
			InvisibleTime: time.Minute, PollTime: time.Second})
		again = append(again, res.Messages...)
	}
	for _, m := range again {
		if m.RealTopic != retry {
			t.Fatalf("message %s popped from %q, want from %s", m.Body, m.RealTopic, retry)
		}
	}
	left := "m0m1m2"
	for _, m := range again {
		left = strings.Replace(left, string(m.Body), "", 1)
	}
	wantStopped(t, c, "TQ", "2 in flight on the pop-retry queue")

	// A pop held for it sleeps, until the ack that brings the pop-retry
	// queue back to 1.
	held := make(chan popclient.PopResult, 1)
	go func() {
		res, _ := c.Pop(context.Background(), popclient.PopRequest{Group: "g", Topic: "TQ", QueueID: 0, MaxMsgNums: 1,
			InvisibleTime: time.Minute, PollTime: time.Minute})
		held <- res
	}()
	waitFor(t, "the pop held", func() bool { return b.popHolds.count(popHoldKey{"TQ", "g", 0}) == 1 })
	reruns := b.popHolds.reruns.Load()
	time.Sleep(300 * time.Millisecond)
	if n := b.popHolds.reruns.Load() - reruns; n != 0 {
		t.Fatalf("the pop held on the stopped pop-retry queue re-ran %d times with nothing acknowledged, want 0", n)
	}
	select {
	case res := <-held:
		t.Fatalf("held pop answered before any ack: code %d, %v", res.Code, bodies(res.Messages))
	default:
	}
	if code, err := c.Ack(ctx20(t), "g", again[0]); err != nil || code != remoting.Success {
		t.Fatalf("ack: %d %v", code, err)
	}
	select {
	case res := <-held:
		if got := bodies(res.Messages); res.Code != remoting.Success || len(got) != 1 || got[0] != left {
			t.Fatalf("woken pop: code %d, %v, want [%s]", res.Code, got, left)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the pop held on a stopped pop-retry queue was not woken by the ack that brought the queue back to its threshold (it waits out its 1 min poll time)")
	}
}
