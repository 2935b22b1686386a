package grpcproxy

import (
	"testing"
	"time"

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
