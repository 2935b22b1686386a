package grpcproxy

import (
	"context"
	"net"
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

// A group's policy read while no broker answers is the default one for
// that call only: the next call, with the broker back, reads the real one
// (an orderly group taken for a concurrent one for a whole route TTL would
// lose its order). One the broker gave is cached.
func TestGroupPolicyIsNotCachedWhenNoBrokerAnswered(t *testing.T) {
	c := startTestCluster(t, nil)
	gc := meta.NewSubscriptionGroupConfig("PolicyOrderly")
	gc.ConsumeMessageOrderly = true
	c.createGroup(t, gc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if gp := c.proxy.groupPolicyAt(ctx, []string{gone}, "PolicyOrderly"); gp.orderly {
		t.Fatalf("a policy read from no broker: %+v", gp)
	}
	if gp := c.proxy.groupPolicyAt(ctx, []string{gone, c.brokerAddr}, "PolicyOrderly"); !gp.orderly {
		t.Fatalf("the broker's policy after a failed read: %+v, want orderly", gp)
	}
	// Cached now: read without any broker.
	if gp := c.proxy.groupPolicyAt(ctx, nil, "PolicyOrderly"); !gp.orderly {
		t.Fatalf("the cached policy: %+v, want orderly", gp)
	}
}
