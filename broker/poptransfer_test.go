package broker

import (
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
				t.Fatalf("orderly %v, pop %d of 1 MiB messages: %d messages, first at %d, rest %d; want the one at %d",
					order, want, len(res.Messages), res.Messages[0].QueueOffset, res.RestNum, want)
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
