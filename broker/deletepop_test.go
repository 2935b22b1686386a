package broker

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// A group that popped a topic, the topic deleted and created again: the
// new topic numbers its messages from 0, so the group's pops must start
// from the new queue's beginning (RocketMQ cleans the group's offsets on
// the topic; a pop then starts from the init position).
func TestADeletedTopicTakesItsPopPositions(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "Reborn", 5)
	b.caughtUp()
	res := mustPop(t, c, popclient.PopRequest{Group: "rg", Topic: "Reborn", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if len(res.Messages) != 5 {
		t.Fatalf("first pop: code %d, %d messages", res.Code, len(res.Messages))
	}
	for _, m := range res.Messages {
		if code, err := c.Ack(ctx20(t), "rg", m); err != nil || code != remoting.Success {
			t.Fatalf("ack: %d %v", code, err)
		}
	}
	if r := call(t, rc, remoting.DeleteTopicInBroker, map[string]string{"topic": "Reborn"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete topic: %d %s", r.Code, r.Remark)
	}
	if pos, ok, _ := b.db.Pop().Position("rg", "Reborn", 0); ok {
		t.Logf("after the deletion the group's pop position is still %d", pos)
	}
	if r := call(t, rc, remoting.UpdateAndCreateTopic, map[string]string{"topic": "Reborn", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}, nil); r.Code != remoting.Success {
		t.Fatalf("create topic: %d %s", r.Code, r.Remark)
	}
	sendBodies(t, rc, "Reborn", 3)
	b.caughtUp()
	res = mustPop(t, c, popclient.PopRequest{Group: "rg", Topic: "Reborn", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute, InitMode: 0})
	if len(res.Messages) != 3 {
		t.Fatalf("pop after the topic was deleted and created again: code %d %s, %d messages %v, want the 3 new ones",
			res.Code, res.Remark, len(res.Messages), bodies(res.Messages))
	}
}

// DELETE_SUBSCRIPTIONGROUP with cleanOffset: RocketMQ drops the group's
// offsets, so a pop of the group created again starts from its init mode
// (MIN here: the whole queue again).
func TestADeletedGroupsCleanedOffsetsTakeItsPopPositions(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "GT", 5)
	b.caughtUp()
	ensureGroup(t, rc, "cg")
	res := mustPop(t, c, popclient.PopRequest{Group: "cg", Topic: "GT", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if len(res.Messages) != 5 {
		t.Fatalf("first pop: code %d, %d messages", res.Code, len(res.Messages))
	}
	for _, m := range res.Messages {
		if code, err := c.Ack(ctx20(t), "cg", m); err != nil || code != remoting.Success {
			t.Fatalf("ack: %d %v", code, err)
		}
	}
	if r := call(t, rc, remoting.DeleteSubscriptionGroup, map[string]string{"groupName": "cg", "cleanOffset": "true"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete group: %d %s", r.Code, r.Remark)
	}
	if _, ok, _ := b.offsets.Get("cg", "GT", 0); ok {
		t.Fatal("committed offset kept")
	}
	if pos, ok, _ := b.db.Pop().Position("cg", "GT", 0); ok {
		t.Logf("after the deletion the group's pop position is still %d", pos)
	}
	ensureGroup(t, rc, "cg")
	res = mustPop(t, c, popclient.PopRequest{Group: "cg", Topic: "GT", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute, InitMode: 0})
	if len(res.Messages) != 5 {
		t.Fatalf("pop after the group was deleted with cleanOffset: code %d %s, %d messages, want the 5 from the queue's start",
			res.Code, res.Remark, len(res.Messages))
	}
}

// A topic deleted with messages in flight takes their checkpoints along:
// revive used to read the topic created again at the same offsets and
// deliver its messages a second time, after they were acknowledged.
func TestADeletedTopicTakesItsCheckpoints(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "RebornCK", 3)
	b.caughtUp()
	old := mustPop(t, c, popclient.PopRequest{Group: "rg", Topic: "RebornCK", QueueID: 0, MaxMsgNums: 32, InvisibleTime: 2 * time.Second})
	if len(old.Messages) != 3 {
		t.Fatalf("first pop: code %d, %d messages", old.Code, len(old.Messages))
	}
	if r := call(t, rc, remoting.DeleteTopicInBroker, map[string]string{"topic": "RebornCK"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete topic: %d %s", r.Code, r.Remark)
	}
	if _, inFlight, err := b.popSvc.InFlight("rg", "RebornCK", 0, 0); err != nil || inFlight {
		t.Fatalf("after the deletion offset 0 of the deleted topic is still in flight (%v)", err)
	}
	if r := call(t, rc, remoting.UpdateAndCreateTopic, map[string]string{"topic": "RebornCK", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}, nil); r.Code != remoting.Success {
		t.Fatalf("create topic: %d %s", r.Code, r.Remark)
	}
	for i := range 3 {
		mustSend(t, rc, "RebornCK", 0, "new"+strconv.Itoa(i), "")
	}
	b.caughtUp()
	fresh := mustPop(t, c, popclient.PopRequest{Group: "rg", Topic: "RebornCK", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if got := fmt.Sprint(bodies(fresh.Messages)); got != "[new0 new1 new2]" {
		t.Fatalf("pop of the topic created again: %v", got)
	}
	for _, m := range fresh.Messages {
		if code, err := c.Ack(ctx20(t), "rg", m); err != nil || code != remoting.Success {
			t.Fatalf("ack: %d %v", code, err)
		}
	}
	// Past the old pop's invisible time nothing comes back, from the
	// topic or its retry topic.
	time.Sleep(3 * time.Second)
	again := mustPop(t, c, popclient.PopRequest{Group: "rg", Topic: "RebornCK", QueueID: -1, MaxMsgNums: 32, InvisibleTime: time.Minute, PollTime: 2 * time.Second})
	if len(again.Messages) != 0 {
		t.Fatalf("after everything was acknowledged the group got %v again (checkpoints of the deleted topic revived)", bodies(again.Messages))
	}
}

// With autoCreateSubscriptionGroup off, the in-flight messages of a group
// deleted before their invisible time ends are dropped by revive, not
// put to the group's pop-retry or dead-letter topic (which would create
// topics for a group that does not exist): RocketMQ's
// PopReviveService.mergeAndRevive skips a checkpoint whose group
// findSubscriptionGroupConfig does not find.
func TestReviveDropsTheCheckpointsOfADeletedGroup(t *testing.T) {
	b := startTestBroker(t, map[string]string{"autoCreateSubscriptionGroup": "false"})
	c, rc := popClient(b)
	sendBodies(t, rc, "DG", 3)
	b.caughtUp()
	ensureGroup(t, rc, "dg")
	res := mustPop(t, c, popclient.PopRequest{Group: "dg", Topic: "DG", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Second})
	if len(res.Messages) != 3 {
		t.Fatalf("pop: code %d %s, %d messages", res.Code, res.Remark, len(res.Messages))
	}
	if r := call(t, rc, remoting.DeleteSubscriptionGroup, map[string]string{"groupName": "dg"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete group: %d %s", r.Code, r.Remark)
	}
	deadline := time.Now().Add(20 * time.Second)
	for off := int64(0); off < 3; off++ {
		for {
			_, inFlight, err := b.popSvc.InFlight("dg", "DG", 0, off)
			if err != nil {
				t.Fatal(err)
			}
			if !inFlight {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("offset %d of the deleted group still in flight 20 s after its invisible time", off)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	b.caughtUp()
	for _, topic := range []string{pop.RetryTopicV1("DG", "dg"), pop.RetryTopicV2("DG", "dg"), "%DLQ%dg"} {
		if _, ok, err := b.topics.get(topic); err != nil || ok {
			t.Errorf("revive created %s for the deleted group (%v)", topic, err)
		}
	}
	if gc, err := b.groupConfig("dg", false); err != nil || gc.GroupName != "" {
		t.Errorf("revive created the deleted group again: %+v (%v)", gc, err)
	}
}

// A topic deletion interrupted after it deleted the topic's config (a
// crash, or an error) is completed by the next start: the durable marker
// written before the config went names the topic, and the start deletes
// its queues, committed offsets and POP state before serving, so the
// topic created again numbers its messages from 0 and no group starts it
// from an old offset. One interrupted before it deleted anything leaves
// its topic whole.
func TestAStartCompletesAnInterruptedTopicDeletion(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "Half", 3)
	b.caughtUp()
	ensureGroup(t, rc, "hg")
	commit(t, rc, "hg", "Half", 0, 3)
	if res := mustPop(t, c, popclient.PopRequest{Group: "pg", Topic: "Half", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute}); len(res.Messages) != 1 {
		t.Fatalf("pop: code %d %s, %d messages", res.Code, res.Remark, len(res.Messages))
	}
	sendBodies(t, rc, "Whole", 2)
	commit(t, rc, "hg", "Whole", 0, 1)
	// The deletions' first steps, then the crash: Whole's marker only,
	// Half's marker and its config.
	for _, topic := range []string{"Half", "Whole"} {
		if err := b.db.BeginTopicDeletion(topic); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.topics.table.Delete("Half"); err != nil {
		t.Fatal(err)
	}
	b.stop()

	b = startTestBrokerAt(t, store, nil)
	if pending, err := b.db.PendingTopicDeletions(); err != nil || len(pending) != 0 {
		t.Fatalf("deletions still pending after the start: %q %v", pending, err)
	}
	if off, ok, err := b.offsets.Get("hg", "Half", 0); err != nil || ok {
		t.Errorf("committed offset %d of the deleted topic kept (%v)", off, err)
	}
	if pos, ok, err := b.db.Pop().Position("pg", "Half", 0); err != nil || ok {
		t.Errorf("pop position %d of the deleted topic kept (%v)", pos, err)
	}
	if _, inFlight, err := b.popSvc.InFlight("pg", "Half", 0, 0); err != nil || inFlight {
		t.Errorf("a message of the deleted topic still in flight (%v)", err)
	}
	if max, err := b.cqs.MaxOffset("Half", 0); err != nil || max != 0 {
		t.Errorf("queue of the deleted topic ends at %d (%v), want 0", max, err)
	}
	if _, ok, err := b.topics.table.Get("Whole"); err != nil || !ok {
		t.Errorf("the topic whose deletion deleted nothing is gone (%v)", err)
	}
	if off, ok, err := b.offsets.Get("hg", "Whole", 0); err != nil || !ok || off != 1 {
		t.Errorf("committed offset of the topic whose deletion deleted nothing: %d %v (%v), want 1", off, ok, err)
	}
	_, rc = popClient(b)
	r := mustSend(t, rc, "Half", 0, "new", "")
	if off := header(t, r, "queueOffset"); off != 0 {
		t.Errorf("first message of the topic created again at queue offset %d, want 0", off)
	}
}
