package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestSQL92Filter: the unchanged Go pull and push consumers subscribe
// with a SQL92 selector on user properties (consumer.SQL92) to a broker
// started with enablePropertyFilter=true, and receive exactly the
// messages the selector matches: the Go client does not filter SQL92
// subscriptions itself, so what it receives is what the broker selected.
func TestSQL92Filter(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{"enablePropertyFilter=true"}})
	const topic, n, queues = "E2ESQL92", 40, 2
	createTopic(t, b.addr, topic, queues)
	waitRoute(t, ns.addr, topic, b.name)
	p := newProducer(t, ns.addr, "pg-sql92")
	wanted := map[string]bool{}
	for i := 0; i < n; i++ {
		color := []string{"red", "blue"}[i%2]
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("sql-%d-%s", i, color)))
		m.WithProperty("n", fmt.Sprint(i))
		m.WithProperty("color", color)
		if i%10 == 0 {
			m.WithTag("special")
		}
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if i >= 5 && i <= 24 && color == "red" || i%10 == 0 {
			wanted[string(m.Body)] = true
		}
	}
	waitDispatched(t, b.addr, topic, queues, n)

	sel := consumer.MessageSelector{Type: consumer.SQL92, Expression: "(n BETWEEN 5 AND 24 AND color = 'red') OR TAGS = 'special'"}
	// The Go pull consumer sends the expression with each pull: the
	// broker's answers, read raw, hold only matching messages.
	pc := startPullConsumer(t, ns.addr, "cg-sql92-pull", topic, sel)
	fromPulls := map[string]bool{}
	for q := 0; q < queues; q++ {
		mq := &primitive.MessageQueue{Topic: topic, BrokerName: b.name, QueueId: q}
		max := maxOffset(t, b.addr, topic, q)
		for off := int64(0); off < max; {
			res, err := pc.PullFrom(context.Background(), mq, off, 8)
			if err != nil {
				t.Fatalf("pull %s/%d@%d: %v", topic, q, off, err)
			}
			for _, m := range primitive.DecodeMessage(res.GetBody()) {
				if !wanted[string(m.Body)] {
					t.Errorf("a pull by the SQL92 expression returned %s", m.Body)
				}
				fromPulls[string(m.Body)] = true
			}
			if res.NextBeginOffset <= off {
				t.Fatalf("pull %s/%d@%d: next begin offset %d does not advance (status %d)", topic, q, off, res.NextBeginOffset, res.Status)
			}
			off = res.NextBeginOffset
		}
	}
	if len(fromPulls) != len(wanted) {
		t.Errorf("pulls returned %d of the %d matching messages", len(fromPulls), len(wanted))
	}

	got := newCollector()
	startPushConsumer(t, ns.addr, "cg-sql92", topic, sel, got, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, len(wanted), 60*time.Second)
	time.Sleep(2 * time.Second) // anything unwanted still on its way
	for body, k := range got.snapshot() {
		if !wanted[body] {
			t.Errorf("consumer received %s, which the selector does not match", body)
		} else if k != 1 {
			t.Errorf("%s received %d times", body, k)
		}
	}
}
