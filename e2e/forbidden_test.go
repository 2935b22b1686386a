package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// codeUpdateAndGetGroupForbidden is RocketMQ's UPDATE_AND_GET_GROUP_FORBIDDEN.
const codeUpdateAndGetGroupForbidden = 353

// setGroupReadable forbids (false) or allows (true) a group to read a topic.
func setGroupReadable(t *testing.T, broker, group, topic string, readable bool) {
	t.Helper()
	resp, err := rawInvoke(broker, codeUpdateAndGetGroupForbidden,
		map[string]string{"group": group, "topic": topic, "readable": fmt.Sprint(readable)}, nil)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("group forbidden %s on %s readable=%v: %v %+v", group, topic, readable, err, resp)
	}
}

// The Go push consumer of a group forbidden to read a topic receives
// nothing of it while another group's consumer receives everything; once
// the group is allowed again it receives every message.
func TestGroupReadForbidden(t *testing.T) {
	t.Parallel()
	const topic, queues, n = "E2EForbid", 2, 10
	ns, b := startWithTopic(t, topic, queues)
	setGroupReadable(t, b.addr, "cg-forbidden", topic, false)
	p := newProducer(t, ns.addr, "pg-forbid")
	var want []string
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("forbid-%d", i)
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body))); err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
		want = append(want, body)
	}
	waitDispatched(t, b.addr, topic, queues, n)

	sel := consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}
	forbidden, control := newCollector(), newCollector()
	startPushConsumer(t, ns.addr, "cg-forbidden", topic, sel, forbidden, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	startPushConsumer(t, ns.addr, "cg-control", topic, sel, control, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	// The control group's consumer, started with it, receives everything:
	// the forbidden group's consumer has been pulling meanwhile.
	control.waitDistinct(t, n, 60*time.Second)
	time.Sleep(2 * time.Second)
	if got := forbidden.snapshot(); len(got) != 0 {
		t.Fatalf("a group forbidden to read %s received %v", topic, got)
	}
	setGroupReadable(t, b.addr, "cg-forbidden", topic, true)
	if missing := forbidden.missingAfter(want, 60*time.Second); len(missing) > 0 {
		t.Fatalf("after allowing the group again, %d messages never arrived: %v", len(missing), missing)
	}
}
