package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestRequestReply: the Go client's request/reply (producer.Request): a
// push consumer answers each request with a reply sent to the cluster's
// reply topic (SEND_REPLY_MESSAGE), which the broker pushes to the
// requesting client (PUSH_REPLY_MESSAGE_TO_CLIENT); each Request returns
// its own reply.
func TestRequestReply(t *testing.T) {
	t.Parallel()
	const topic = "E2ERequest"
	ns, b := startWithTopic(t, topic, 2)
	waitRoute(t, ns.addr, "DefaultCluster_REPLY_TOPIC", b.name)

	// The broker pushes a reply to the requester's connection, which it
	// knows from the requester's heartbeat. The Go client heartbeats one
	// second after it starts, to the brokers it knows by then, and every
	// 30 s after: a send right after its start makes the first heartbeat
	// reach this broker.
	requester := newProducer(t, ns.addr, "pg-requester")
	const warm = "E2ERequestWarmUp"
	createTopic(t, b.addr, warm, 1)
	waitRoute(t, ns.addr, warm, b.name)
	if _, err := requester.SendSync(context.Background(), primitive.NewMessage(warm, []byte("hello"))); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 40*time.Second, "the requester's heartbeat", func() bool {
		r, err := rawInvoke(b.addr, codeGetProducerConnectionList, map[string]string{"producerGroup": "pg-requester"}, nil)
		return err == nil && r.Code == respSuccess
	})

	replier := newProducer(t, ns.addr, "pg-replier")
	replyErrs := make(chan error, 16)
	startPushConsumerFunc(t, ns.addr, "cg-request", topic, consumer.MessageSelector{},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				reply, err := consumer.CreateReplyMessage(m, nil)
				if err != nil {
					replyErrs <- err
					continue
				}
				// CreateReplyMessage of this client version drops the body
				// it is given; a replier sets it itself.
				reply.Body = []byte("re: " + string(m.Body))
				if _, err := replier.SendSync(ctx, reply); err != nil {
					replyErrs <- fmt.Errorf("send reply to %s: %w", m.Body, err)
				}
			}
			return consumer.ConsumeSuccess, nil
		}, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))

	for i := 0; i < 5; i++ {
		body := fmt.Sprintf("question-%d", i)
		var reply *primitive.Message
		var err error
		// The first request may come before the consumer's rebalance
		// assigned it the queue; it times out and is asked again.
		for attempt := 0; attempt < 3; attempt++ {
			reply, err = requester.Request(context.Background(), 10*time.Second, primitive.NewMessage(topic, []byte(body)))
			if err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if string(reply.Body) != "re: "+body {
			t.Fatalf("request %q got reply %q", body, reply.Body)
		}
	}
	select {
	case err := <-replyErrs:
		t.Fatal(err)
	default:
	}
	// The broker stores a reply after pushing it (storeReplyMessageEnable).
	waitUntil(t, 10*time.Second, "5 replies stored in the reply topic", func() bool {
		return maxOffset(t, b.addr, "DefaultCluster_REPLY_TOPIC", 0) >= 5
	})
}
