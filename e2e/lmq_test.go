package e2e

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestLightMessageQueues runs RocketMQ's LMQ example with the Go client: a
// producer sends to a parent topic with INNER_MULTI_DISPATCH naming two
// light message queues, and a pull consumer that knows the broker from the
// parent topic's route pulls each light message queue (queue 0) by name.
func TestLightMessageQueues(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{"enableLmq=true", "enableMultiDispatch=true"}})
	const topic, n = "E2ELmqParent", 10
	createTopic(t, b.addr, topic, 2)
	waitRoute(t, ns.addr, topic, b.name)
	p := newProducer(t, ns.addr, "pg-lmq")
	for i := 0; i < n; i++ {
		lmqs := "%LMQ%e2e-all"
		if i%2 == 0 {
			lmqs += ",%LMQ%e2e-even"
		}
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("lmq-%d", i)))
		m.WithProperty("INNER_MULTI_DISPATCH", lmqs)
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	waitDispatched(t, b.addr, topic, 2, n)
	pc := startPullConsumer(t, ns.addr, "cg-lmq", topic, consumer.MessageSelector{})
	for lmq, want := range map[string]int{"%LMQ%e2e-all": n, "%LMQ%e2e-even": n / 2} {
		mq := &primitive.MessageQueue{Topic: lmq, BrokerName: b.name, QueueId: 0}
		var got []string
		deadline := time.Now().Add(20 * time.Second)
		for off := int64(0); off < int64(want) && time.Now().Before(deadline); {
			res, err := pc.PullFrom(context.Background(), mq, off, 32)
			if err != nil {
				t.Fatalf("pull %s@%d: %v", lmq, off, err)
			}
			for _, m := range primitive.DecodeMessage(res.GetBody()) {
				got = append(got, string(m.Body))
			}
			off = res.NextBeginOffset
		}
		sort.Strings(got)
		if len(got) != want {
			t.Fatalf("%s: pulled %d messages %v, want %d", lmq, len(got), got, want)
		}
		for _, body := range got {
			var i int
			if _, err := fmt.Sscanf(body, "lmq-%d", &i); err != nil || (lmq == "%LMQ%e2e-even" && i%2 != 0) {
				t.Errorf("%s returned %s", lmq, body)
			}
		}
	}
}
