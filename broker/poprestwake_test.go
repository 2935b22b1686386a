package broker

import (
	"context"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
)

// A pop that leaves messages behind wakes the pops of its own group held
// on the topic (for its queue, or every queue), not another group's: what
// it left is its group's backlog, which no other group can take, as
// RocketMQ keys that wake by topic, group and queue.
func TestPopRestWakesOnlyItsGroup(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	sendBodies(t, rc, "RW", 3)
	b.caughtUp()
	// Group h takes everything, then holds a pop of every queue.
	if res := mustPop(t, c, popclient.PopRequest{Group: "h", Topic: "RW", QueueID: -1, MaxMsgNums: 32, InvisibleTime: time.Minute}); len(res.Messages) != 3 {
		t.Fatalf("h's first pop: %v", bodies(res.Messages))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heldPop := func(group string, queueID int32) {
		go func() {
			_, _ = c.Pop(ctx, popclient.PopRequest{Group: group, Topic: "RW", QueueID: queueID, MaxMsgNums: 1,
				InvisibleTime: time.Minute, PollTime: 15 * time.Second})
		}()
		waitFor(t, "the pop of "+group+" held", func() bool { return b.popHolds.count(popHoldKey{"RW", group, queueID}) == 1 })
	}
	heldPop("h", -1)
	// Group g holds a pop of queue 1, empty.
	heldPop("g", 1)
	reruns := b.popHolds.reruns.Load()
	// g pops one of the three messages of queue 0 and leaves two.
	res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: "RW", QueueID: -1, MaxMsgNums: 1, InvisibleTime: time.Minute})
	if len(res.Messages) != 1 || res.Header["restNum"] != "2" {
		t.Fatalf("g's pop: %v, header %v", bodies(res.Messages), res.Header)
	}
	// The wake is done before the pop answers.
	if n := b.popHolds.reruns.Load() - reruns; n != 1 {
		t.Fatalf("g's pop leaving messages re-ran %d held pops, want 1 (g's own)", n)
	}
	if n := b.popHolds.count(popHoldKey{"RW", "h", -1}); n != 1 {
		t.Fatalf("h's held pop: %d held, want it still held", n)
	}
}
