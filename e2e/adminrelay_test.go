package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

const (
	codeGetConsumerRunningInfo = 307
	codeConsumeMessageDirectly = 309
	codeGetConsumerStatus      = 223
)

// TestAdminRelaysToTheGoConsumer: GET_CONSUMER_RUNNING_INFO,
// CONSUME_MESSAGE_DIRECTLY and INVOKE_BROKER_TO_GET_CONSUMER_STATUS sent to
// the broker (as mqadmin consumerStatus, getConsumerStatus and the
// dashboard do) are answered by the unchanged Go push consumer they name.
func TestAdminRelaysToTheGoConsumer(t *testing.T) {
	t.Parallel()
	const topic, group = "E2EAdminRelay", "cg-admin-relay"
	ns, b := startWithTopic(t, topic, 1)
	got := newCollector()
	startPushConsumerFunc(t, ns.addr, group, topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				got.add(string(m.Body))
			}
			return consumer.ConsumeSuccess, nil
		}, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	var ids []string
	waitUntil(t, 30*time.Second, "the consumer registered", func() bool {
		ids = consumerIDs(t, b.addr, group)
		return len(ids) == 1
	})

	r, err := rawInvoke(b.addr, codeGetConsumerRunningInfo, map[string]string{"consumerGroup": group, "clientId": ids[0], "jstackEnable": "false"}, nil)
	if err != nil || r.Code != respSuccess {
		t.Fatalf("running info: %+v %v", r, err)
	}
	if !strings.Contains(string(r.Body), `"subscriptionSet"`) || !strings.Contains(string(r.Body), topic) {
		t.Fatalf("running info body does not describe the consumer: %s", r.Body)
	}

	res, err := newProducer(t, ns.addr, "pg-admin-relay").SendSync(context.Background(), primitive.NewMessage(topic, []byte("direct")))
	if err != nil {
		t.Fatal(err)
	}
	got.waitDistinct(t, 1, 30*time.Second)
	r, err = rawInvoke(b.addr, codeConsumeMessageDirectly, map[string]string{"consumerGroup": group, "clientId": ids[0],
		"msgId": res.OffsetMsgID, "topic": topic}, nil)
	// The Go client encodes its ConsumeMessageDirectlyResult's result as
	// a number: 0 is CR_SUCCESS.
	if err != nil || r.Code != respSuccess || !strings.Contains(string(r.Body), `"consumeResult":0`) {
		t.Fatalf("consume directly: %+v %s %v", r, r.Body, err)
	}
	// The consumer's own view of its offsets, through the broker.
	r, err = rawInvoke(b.addr, codeGetConsumerStatus, map[string]string{"topic": topic, "group": group}, nil)
	if err != nil || r.Code != respSuccess || !strings.Contains(string(r.Body), `"`+ids[0]+`":{{`) || !strings.Contains(string(r.Body), topic) {
		t.Fatalf("consumer status: %+v %s %v", r, r.Body, err)
	}
	if n := got.snapshot()["direct"]; n != 2 {
		t.Fatalf("the consumer's listener saw the message %d times, want 2 (delivered, then directly)", n)
	}
}
