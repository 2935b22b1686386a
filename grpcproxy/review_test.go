package grpcproxy

import (
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/auth"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/pop"
)

// A send whose message type the topic does not take is refused with
// MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, as RocketMQ's proxy checks it
// (clients that skip their own check would otherwise store it); a
// receive asking for more than 32 messages gets at most 32 instead of a
// refusal; an ack with a handle whose invisible time is over is
// INVALID_RECEIPT_HANDLE, not OK.
func TestProxyChecksAsRocketMQ(t *testing.T) {
	c := startTestCluster(t, nil)
	c.createTopic(t, "TypedFifo", 2, "+message.type=FIFO")
	c.createTopic(t, "Batch", 1, "")
	deadline := time.Now().Add(20 * time.Second)
	var st *rmqpb.Status
	for {
		resp, err := c.rpc.SendMessage(callCtx(t, "typed", 5*time.Second), &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{newMessage("TypedFifo", "normal")}})
		if err != nil {
			t.Fatal(err)
		}
		st = resp.GetStatus()
		if st.GetCode() != rmqpb.Code_TOPIC_NOT_FOUND || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.GetCode() != rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE {
		t.Fatalf("a NORMAL message to a FIFO topic answered %v, want MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", st)
	}

	for i := range 40 {
		c.send(t, "batch", newMessage("Batch", string(rune('a'+i%26))))
	}
	req := receiveRequest("batch-g", "Batch", 30*time.Second, time.Second)
	req.BatchSize = 64
	got, msgs := c.receiveOnce(t, "batch", req, 10*time.Second)
	if got.GetCode() != rmqpb.Code_OK || len(msgs) == 0 || len(msgs) > pop.MaxPopMessages {
		t.Fatalf("a receive of 64 answered %v with %d messages, want OK with 1 to %d", got, len(msgs), pop.MaxPopMessages)
	}

	h, err := ParseHandle(msgs[0].GetSystemProperties().GetReceiptHandle())
	if err != nil {
		t.Fatal(err)
	}
	h.PopTime = time.Now().Add(-time.Hour).UnixMilli() // its invisible time ended long ago
	if st := c.ack(t, "batch", "batch-g", "Batch", msgs[0].GetSystemProperties().GetMessageId(), h.String()); st.GetCode() != rmqpb.Code_INVALID_RECEIPT_HANDLE {
		t.Fatalf("ack with an expired handle answered %v, want INVALID_RECEIPT_HANDLE", st)
	}
}

// A client's termination unregisters it from its group: with ACL on it
// needs Sub on the group, as in RocketMQ's proxy.
func TestTerminationNeedsTheGroup(t *testing.T) {
	needs := needsOf(&rmqpb.NotifyClientTerminationRequest{Group: &rmqpb.Resource{Name: "g"}})
	if len(needs) != 1 || needs[0].Resource != auth.Group("g") || len(needs[0].Actions) != 1 || needs[0].Actions[0] != auth.ActionSub {
		t.Fatalf("needs of a termination: %v, want Sub on Group:g", needs)
	}
}
