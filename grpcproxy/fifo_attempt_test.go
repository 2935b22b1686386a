package grpcproxy

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
)

// A FIFO message received again and again without an ack reports its
// delivery attempt (the broker's orderly consumption count: the stored
// message is redelivered unchanged), and goes to the group's dead-letter
// queue once delivered as often as the group allows, instead of holding
// its message group for ever.
func TestFifoRedeliveryCountsAttemptsToTheDeadLetterQueue(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, group, client = "FifoAttempts", "FifoAttemptsGroup", "fifo-attempts"
	c.createTopic(t, topic, 1, "+message.type=FIFO")
	gc := meta.NewSubscriptionGroupConfig(group)
	gc.ConsumeMessageOrderly = true
	gc.RetryMaxTimes = 1 // two delivery attempts
	c.createGroup(t, gc)
	m := newMessage(topic, "fifo-attempts")
	m.SystemProperties.MessageType = rmqpb.MessageType_FIFO
	m.SystemProperties.MessageGroup = proto.String("g1")
	c.send(t, client, m)
	req := receiveRequest(group, topic, time.Second, time.Second)
	for attempt := int32(1); attempt <= 2; attempt++ {
		var got []*rmqpb.Message
		for deadline := time.Now().Add(10 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
			_, got = c.receiveOnce(t, client, req, 10*time.Second)
		}
		if len(got) != 1 {
			t.Fatalf("delivery %d: %d messages", attempt, len(got))
		}
		if a := got[0].GetSystemProperties().GetDeliveryAttempt(); a != attempt {
			t.Fatalf("delivery %d reports attempt %d", attempt, a)
		}
	}
	// The third pop finds it over its attempts and moves it.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		if _, got := c.receiveOnce(t, client, req, 10*time.Second); len(got) != 0 {
			t.Fatalf("delivered a third time, attempt %d, after the group's two", got[0].GetSystemProperties().GetDeliveryAttempt())
		}
	}
	c.waitMaxOffsets(t, "%DLQ%"+group, []int64{1})
}
