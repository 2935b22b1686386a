package grpcproxy

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// A message moved to the dead-letter queue after its retries is read from
// %DLQ%<group> with the user properties it was sent with and nothing of
// the broker's own bookkeeping: the revive that put its retry carries
// RKV_REVIVED_FROM, which the dead-letter copy keeps and which a gRPC
// consumer of the queue must not take for a property of the message.
func TestDeadLetterMessageHasOnlyItsUserProperties(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, group, client = "DeadLetterProps", "DeadLetterPropsGroup", "dlq-props"
	c.createTopic(t, topic, 1, "")
	gc := meta.NewSubscriptionGroupConfig(group)
	gc.RetryMaxTimes = 1 // two deliveries, then the dead-letter queue
	c.createGroup(t, gc)
	sent := newMessage(topic, "dead")
	c.send(t, client, sent)
	req := receiveRequest(group, topic, time.Second, time.Second)
	for deadline := time.Now().Add(20 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("the message did not reach %%DLQ%%%s in 20 s", group)
		}
		c.receiveOnce(t, client, req, 10*time.Second) // delivered, never acked
		if c.maxOffsets(t, "%DLQ%"+group, 1)[0] == 1 {
			break
		}
	}
	c.waitRoute(t, "%DLQ%"+group)
	got := c.receiveN(t, client, receiveRequest("DeadLetterReader", "%DLQ%"+group, 10*time.Second, time.Second), 1)[0]
	if _, ok := got.GetUserProperties()[kvindex.PropertyRevivedFrom]; ok {
		t.Errorf("the dead-letter message has the broker's %s among its user properties: %v", kvindex.PropertyRevivedFrom, got.GetUserProperties())
	}
	if want := sent.GetUserProperties(); len(got.GetUserProperties()) != len(want) || got.GetUserProperties()["body"] != want["body"] {
		t.Errorf("the dead-letter message has user properties %v, want the sent %v", got.GetUserProperties(), want)
	}
	if dlq := got.GetSystemProperties().GetDeadLetterQueue(); dlq.GetTopic() != topic || dlq.GetMessageId() != sent.GetSystemProperties().GetMessageId() {
		t.Errorf("dead letter queue %v, want topic %s message %s", dlq, topic, sent.GetSystemProperties().GetMessageId())
	}
}

// A FIFO message a consumer gives up on goes to the dead-letter queue
// through the proxy (ForwardMessageToDeadLetterQueue, as the clients' FIFO
// push consumers send it; CONSUMER_SEND_MSG_BACK to the broker), and a
// consumer of %DLQ%<group> is told where it came from as for a message the
// broker's revive moved: its topic and the message id its producer was
// given, not an offset id no client ever saw.
func TestForwardedMessageNamesItsOrigin(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, group, client = "ForwardOrigin", "ForwardOriginGroup", "forward-origin"
	c.createTopic(t, topic, 1, "+message.type=FIFO")
	gc := meta.NewSubscriptionGroupConfig(group)
	gc.ConsumeMessageOrderly = true
	c.createGroup(t, gc)
	sent := newMessage(topic, "forwarded")
	sent.SystemProperties.MessageType = rmqpb.MessageType_FIFO
	sent.SystemProperties.MessageGroup = proto.String("g1")
	c.send(t, client, sent)
	got := c.receiveN(t, client, receiveRequest(group, topic, 30*time.Second, time.Second), 1)[0]
	resp, err := c.rpc.ForwardMessageToDeadLetterQueue(callCtx(t, client, 10*time.Second), &rmqpb.ForwardMessageToDeadLetterQueueRequest{
		Group: &rmqpb.Resource{Name: group}, Topic: &rmqpb.Resource{Name: topic},
		ReceiptHandle: got.GetSystemProperties().GetReceiptHandle(), MessageId: got.GetSystemProperties().GetMessageId(),
		DeliveryAttempt: 1, MaxDeliveryAttempts: 1,
	})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("ForwardMessageToDeadLetterQueue: %v, %v", resp.GetStatus(), err)
	}
	c.waitRoute(t, "%DLQ%"+group)
	dead := c.receiveN(t, client, receiveRequest("ForwardOriginReader", "%DLQ%"+group, 10*time.Second, time.Second), 1)[0]
	id := sent.GetSystemProperties().GetMessageId()
	if dlq := dead.GetSystemProperties().GetDeadLetterQueue(); dlq.GetTopic() != topic || dlq.GetMessageId() != id {
		t.Errorf("dead letter queue %v, want topic %s message %s", dlq, topic, id)
	}
	if dead.GetSystemProperties().GetMessageId() != id {
		t.Errorf("the dead-letter message has id %s, want %s", dead.GetSystemProperties().GetMessageId(), id)
	}
}

// waitRoute waits until the proxy answers a route for topic (a topic the
// broker created itself reaches the name server at its next
// registration).
func (c *testCluster) waitRoute(t *testing.T, topic string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		resp, err := c.rpc.QueryRoute(callCtx(t, "route-waiter", 10*time.Second), &rmqpb.QueryRouteRequest{
			Topic: &rmqpb.Resource{Name: topic}, Endpoints: c.proxyEndpoints(t)})
		if err == nil && resp.GetStatus().GetCode() == rmqpb.Code_OK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no route of %s in 20 s: %v, %v", topic, resp.GetStatus(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A message given up on at its second delivery, which comes from the
// group's retry topic, names the topic it was sent to as its origin in the
// dead-letter queue, not the retry topic the forwarded record was in.
func TestForwardedRetryNamesItsTopic(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, group, client = "ForwardRetryOrigin", "ForwardRetryOriginGroup", "forward-retry-origin"
	c.createTopic(t, topic, 1, "")
	sent := newMessage(topic, "retried")
	c.send(t, client, sent)
	c.receiveN(t, client, receiveRequest(group, topic, time.Second, time.Second), 1) // not acked: it comes back
	again := c.receiveN(t, client, receiveRequest(group, topic, 30*time.Second, 2*time.Second), 1)[0]
	if a := again.GetSystemProperties().GetDeliveryAttempt(); a != 2 {
		t.Fatalf("second delivery reports attempt %d", a)
	}
	resp, err := c.rpc.ForwardMessageToDeadLetterQueue(callCtx(t, client, 10*time.Second), &rmqpb.ForwardMessageToDeadLetterQueueRequest{
		Group: &rmqpb.Resource{Name: group}, Topic: &rmqpb.Resource{Name: topic},
		ReceiptHandle: again.GetSystemProperties().GetReceiptHandle(), MessageId: again.GetSystemProperties().GetMessageId(),
		DeliveryAttempt: 2, MaxDeliveryAttempts: 2,
	})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("ForwardMessageToDeadLetterQueue: %v, %v", resp.GetStatus(), err)
	}
	c.waitRoute(t, "%DLQ%"+group)
	dead := c.receiveN(t, client, receiveRequest("ForwardRetryOriginReader", "%DLQ%"+group, 10*time.Second, time.Second), 1)[0]
	id := sent.GetSystemProperties().GetMessageId()
	if dlq := dead.GetSystemProperties().GetDeadLetterQueue(); dlq.GetTopic() != topic || dlq.GetMessageId() != id {
		t.Errorf("dead letter queue %v, want topic %s message %s", dlq, topic, id)
	}
}
