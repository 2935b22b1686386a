package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
)

// A pop takes from a queue at most maxTransferBytesOnMessageInMemory of
// messages (the first always), as RocketMQ's read of each queue stops
// there, and reads no further queue once its answer holds 8 MiB: large
// messages arrive in answers a client's 16 MiB frame holds, and only the
// messages answered are made invisible, the next pop getting the next.
func TestPopAnswersFitAClientsFrame(t *testing.T) {
	b := startTestBroker(t, nil)
	c, rc := popClient(b)
	mib := strings.Repeat("x", 1<<20)
	for i := range 20 {
		mustSend(t, rc, "PopBig", 0, fmt.Sprintf("%02d%s", i, mib), "")
	}
	createTopic(t, rc, "PopBigQueues", 4, 4)
	for q := range 4 {
		for i := range 2 {
			mustSend(t, rc, "PopBigQueues", int32(q), fmt.Sprintf("%d-%d%s", q, i, strings.Repeat(mib, 3)), "")
		}
	}
	b.caughtUp()

	for i, order := range []bool{false, true} {
		group := fmt.Sprintf("g-big-%d", i)
		for want := range 3 {
			res := mustPop(t, c, popclient.PopRequest{Group: group, Topic: "PopBig", QueueID: 0, MaxMsgNums: 32,
				InvisibleTime: time.Minute, Order: order})
			if len(res.Messages) != 1 || res.Messages[0].QueueOffset != int64(want) || res.RestNum != int64(19-want) {
				first := int64(-1)
				if len(res.Messages) > 0 {
					first = res.Messages[0].QueueOffset
				}
				t.Fatalf("orderly %v, pop %d of 1 MiB messages: code %d %q, %d messages, first at %d, rest %d; want the one at %d",
					order, want, res.Code, res.Remark, len(res.Messages), first, res.RestNum, want)
			}
			if order {
				// The orderly batch is the one message: its ack
				// lets the next pop have the next.
				if code, err := c.Ack(ctx20(t), group, res.Messages[0]); err != nil || code != 0 {
					t.Fatalf("ack of the orderly batch: %d %v", code, err)
				}
			}
		}
	}

	// 3 MiB messages on four queues: one a queue, and no queue more
	// once 8 MiB are in the answer.
	res := mustPop(t, c, popclient.PopRequest{Group: "g-queues", Topic: "PopBigQueues", QueueID: -1, MaxMsgNums: 32,
		InvisibleTime: time.Minute})
	size := 0
	for _, m := range res.Messages {
		size += len(m.Body)
	}
	if len(res.Messages) != 3 || res.RestNum != 5 {
		t.Fatalf("pop of 3 MiB messages on 4 queues: %d messages (%d bytes), rest %d; want 3, rest 5", len(res.Messages), size, res.RestNum)
	}
}

// A pop held for a consumer whose connection has closed takes nothing
// when a message wakes it: the message stays for the live consumers, not
// out of sight for the dead request's invisible time (RocketMQ's
// PopLongPollingService drops such a request too).
func TestAHeldPopOfAClosedConnectionTakesNothing(t *testing.T) {
	b := startTestBroker(t, nil)
	_, rc := popClient(b)
	createTopic(t, rc, "HeldClosed", 1, 1)
	dead, deadConn := popClient(b)
	go func() {
		_, _ = dead.Pop(context.Background(), popclient.PopRequest{Group: "g", Topic: "HeldClosed", QueueID: 0, MaxMsgNums: 1,
			InvisibleTime: time.Minute, PollTime: 15 * time.Second})
	}()
	waitFor(t, "the pop held", func() bool { return b.popHolds.count(popHoldKey{"HeldClosed", "g", 0}) == 1 })
	conns := b.server.ConnCount()
	_ = deadConn.Close()
	waitFor(t, "the close seen", func() bool { return b.server.ConnCount() < conns })
	reruns := b.popHolds.reruns.Load()
	mustSend(t, rc, "HeldClosed", 0, "m1", "")
	waitFor(t, "the held pop woken", func() bool { return b.popHolds.reruns.Load() > reruns })
	time.Sleep(200 * time.Millisecond) // the woken pop's turn on a worker
	live, _ := popClient(b)
	res := mustPop(t, live, popclient.PopRequest{Group: "g", Topic: "HeldClosed", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
	if len(res.Messages) != 1 || string(res.Messages[0].Body) != "m1" {
		t.Fatalf("a live consumer got %d messages (code %d): the held pop of the closed connection took m1", len(res.Messages), res.Code)
	}
}
