package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

// startThresholdSlave starts a master and a slave whose in-flight
// threshold is on at limit, with n messages of topic on the slave and
// the topic synced; it returns a POP client of the slave and a Remoting
// client of the master.
func startThresholdSlave(t *testing.T, topic string, n int, limit string) (master, slave *testBroker, sc *popclient.Client, mrc *remoting.Client) {
	t.Helper()
	master = startTestBroker(t, withHA(nil))
	slave = startSlaveOf(t, master, map[string]string{"enablePopMessageThreshold": "true", "popInflightMessageThreshold": limit})
	_, mrc = popClient(master)
	sendBodies(t, mrc, topic, n)
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master)
	sc, _ = popClient(slave)
	return master, slave, sc, mrc
}

// orderlyPop pops up to n messages of queue 0 of topic orderly for group
// g on c, as attempt, without polling.
func orderlyPop(t *testing.T, c *popclient.Client, topic, attempt string, n int, invisible time.Duration) popclient.PopResult {
	t.Helper()
	return mustPop(t, c, popclient.PopRequest{Group: "g", Topic: topic, QueueID: 0, MaxMsgNums: n,
		InvisibleTime: invisible, Order: true, AttemptID: attempt})
}

// A slave counts its orderly pops against the in-flight threshold, as
// RocketMQ's PopMessageProcessor counts them in its
// PopInflightMessageCounter: the batch an orderly pop hands out counts,
// a queue over the threshold gives every pop of the group nothing (its
// orderly pops included, a retry of the batch's attempt too, and
// NOTIFICATION says so), and an orderly ack on the slave takes its
// message out. A batch nobody acknowledges leaves the count when its
// invisible time is over, and a pop held for the queue gets it again
// then: the threshold cannot strand it.
func TestSlaveOrderlyPopsCountAgainstTheThreshold(t *testing.T) {
	_, _, sc, _ := startThresholdSlave(t, "OT", 4, "1")
	ctx := ctx20(t)

	first := orderlyPop(t, sc, "OT", "a", 2, 3*time.Second)
	if fmt.Sprint(bodies(first.Messages)) != "[m0 m1]" {
		t.Fatalf("orderly pop on the slave: %v, want [m0 m1]", bodies(first.Messages))
	}
	wantStopped(t, sc, "OT", "2 messages of an orderly batch in flight on the slave, threshold 1")
	if again := orderlyPop(t, sc, "OT", "a", 2, 3*time.Second); len(again.Messages) != 0 {
		t.Fatalf("orderly pop on the slave of a queue over its threshold: %v, want nothing", bodies(again.Messages))
	}
	for _, order := range []bool{false, true} {
		if code, has, _, err := sc.Notification(ctx, "g", "OT", 0, 0, order); err != nil || code != remoting.Success || has {
			t.Fatalf("notification (order %v) of a queue over its threshold on the slave: %d %v %v", order, code, has, err)
		}
	}

	// Nobody acknowledges the batch: a pop held for the queue gets it
	// again once its invisible time is over.
	start := time.Now()
	res, err := sc.Pop(ctx, popclient.PopRequest{Group: "g", Topic: "OT", QueueID: 0, MaxMsgNums: 2,
		InvisibleTime: time.Minute, Order: true, AttemptID: "b", PollTime: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(bodies(res.Messages)) != "[m0 m1]" {
		t.Fatalf("held orderly pop on the slave once the batch's invisible time was over: code %d, %v, want [m0 m1]", res.Code, bodies(res.Messages))
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the held orderly pop waited %v: not woken when the batch left the count", waited)
	}

	// An orderly ack on the slave takes its message out: 1 left, not
	// over the threshold.
	if code, err := sc.Ack(ctx, "g", res.Messages[0]); err != nil || code != remoting.Success {
		t.Fatalf("orderly ack on the slave: %d %v", code, err)
	}
	if code, has, _, err := sc.Notification(ctx, "g", "OT", 0, 0, false); err != nil || code != remoting.Success || !has {
		t.Fatalf("notification on the slave once an orderly ack brought the queue back to its threshold: %d %v %v, want a message", code, has, err)
	}
}

// An orderly pop on a slave that the queue's lock does not block takes
// the queue out of the slave's in-flight count before it counts its own
// batch, as RocketMQ's clears its PopInflightMessageCounter of the queue
// at each orderly pop: what non-orderly pops of the group handed out no
// longer counts then.
func TestSlaveOrderlyPopClearsTheQueuesCount(t *testing.T) {
	_, _, sc, _ := startThresholdSlave(t, "OC", 6, "2")

	if got := popOne(t, sc, "OC", 2); len(got.Messages) != 2 {
		t.Fatalf("non-orderly pop on the slave: %v, want 2 messages", bodies(got.Messages))
	}
	if got := orderlyPop(t, sc, "OC", "a", 1, time.Minute); len(got.Messages) != 1 {
		t.Fatalf("orderly pop on the slave with 2 messages in flight, threshold 2: %v, want 1 message", bodies(got.Messages))
	}
	// 1 in flight now (the orderly batch), not 3.
	if got := popOne(t, sc, "OC", 1); len(got.Messages) != 1 {
		t.Fatalf("non-orderly pop on the slave after an orderly pop cleared the queue's count: code %d %v, want 1 message",
			got.Code, bodies(got.Messages))
	}
}

// A deletion of a topic on a slave forgets what its own pops keep of the
// topic's queues in memory, as RocketMQ's deleteTopic clears its
// PopInflightMessageCounter of the topic: the count for the in-flight
// threshold, and the orderly batch that locked a queue. A topic created
// again under the name starts free.
func TestSlaveTopicDeletionForgetsItsPopCount(t *testing.T) {
	master, slave, sc, mrc := startThresholdSlave(t, "DT", 4, "1")
	_, src := popClient(slave)

	if got := popOne(t, sc, "DT", 2); len(got.Messages) != 2 {
		t.Fatalf("non-orderly pop on the slave: %v", bodies(got.Messages))
	}
	wantStopped(t, sc, "DT", "2 in flight on the slave, threshold 1")
	if r := call(t, src, remoting.DeleteTopicInBroker, map[string]string{"topic": "DT"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete the topic on the slave: %d %s", r.Code, r.Remark)
	}
	// The topic again, on the slave (the master's config comes back with
	// the sync) with a message the master sends now.
	sendBodies(t, mrc, "DT", 1)
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master)
	got := popOne(t, sc, "DT", 4)
	if len(got.Messages) == 0 {
		t.Fatalf("pop on the slave of the topic deleted and back: code %d, nothing: the deleted topic's count still stops it", got.Code)
	}
}

// A deletion of a group with its offsets on a slave (cleanOffset)
// forgets what the slave's own pops keep of the group in memory, as
// RocketMQ's deleteSubscriptionGroup clears its PopInflightMessageCounter
// of the group with removeOffset: the count for the in-flight threshold,
// its own offsets and the orderly batch that locked a queue.
func TestSlaveGroupDeletionForgetsItsPopCount(t *testing.T) {
	_, slave, sc, _ := startThresholdSlave(t, "DG", 6, "1")
	_, src := popClient(slave)

	if got := popOne(t, sc, "DG", 2); fmt.Sprint(bodies(got.Messages)) != "[m0 m1]" {
		t.Fatalf("non-orderly pop on the slave: %v, want [m0 m1]", bodies(got.Messages))
	}
	wantStopped(t, sc, "DG", "2 in flight on the slave, threshold 1")
	oreq := popclient.PopRequest{Group: "o", Topic: "DG", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true, AttemptID: "a"}
	if got := mustPop(t, sc, oreq); fmt.Sprint(bodies(got.Messages)) != "[m0 m1]" {
		t.Fatalf("orderly pop of group o on the slave: %v, want [m0 m1]", bodies(got.Messages))
	}
	for _, g := range []string{"g", "o"} {
		if r := call(t, src, remoting.DeleteSubscriptionGroup, map[string]string{"groupName": g, "cleanOffset": "true"}, nil); r.Code != remoting.Success {
			t.Fatalf("delete group %s with its offsets on the slave: %d %s", g, r.Code, r.Remark)
		}
	}
	// What g's pops handed out stays invisible: the next pop goes on
	// past it, no longer stopped.
	if got := popOne(t, sc, "DG", 1); fmt.Sprint(bodies(got.Messages)) != "[m2]" {
		t.Fatalf("pop on the slave of group g deleted with its offsets: code %d %v, want [m2]", got.Code, bodies(got.Messages))
	}
	// o's batch no longer locks the queue, nor does its offset hold.
	oreq.AttemptID = "b"
	if got := mustPop(t, sc, oreq); fmt.Sprint(bodies(got.Messages)) != "[m0 m1]" {
		t.Fatalf("another attempt's orderly pop of group o deleted with its offsets: %v, want [m0 m1]", bodies(got.Messages))
	}
}
