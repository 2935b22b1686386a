package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// A compacted topic (mqadmin updateTopic -a +cleanup.policy=COMPACTION)
// with the Go client: a send without a key is refused, and a pull
// consumer that reads the queue from its start gets the newest message of
// each key, at the offsets they were stored with.
func TestCompactedTopic(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{})
	const topic = "E2ECompact"
	createTopicWithAttributes(t, b.addr, topic, 1, "+cleanup.policy=COMPACTION")
	waitRoute(t, ns.addr, topic, b.name)
	p := newProducer(t, ns.addr, "pg-compact")

	if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("no key"))); err == nil ||
		!strings.Contains(err.Error(), "Required message key is missing") {
		t.Fatalf("send without a key: %v, want refused", err)
	}
	for round := range 3 {
		for k := range 5 {
			m := primitive.NewMessage(topic, []byte(fmt.Sprintf("k%d-r%d", k, round)))
			m.WithKeys([]string{fmt.Sprintf("k%d", k)})
			if _, err := p.SendSync(context.Background(), m); err != nil {
				t.Fatalf("send k%d round %d: %v", k, round, err)
			}
		}
	}
	waitDispatched(t, b.addr, topic, 1, 15)

	pc := startPullConsumer(t, ns.addr, "cg-compact", topic, consumer.MessageSelector{})
	mq := &primitive.MessageQueue{Topic: topic, BrokerName: b.name, QueueId: 0}
	var got []string
	for off := int64(0); off < 15; {
		res, err := pc.PullFrom(context.Background(), mq, off, 32)
		if err != nil {
			t.Fatalf("pull from %d: %v", off, err)
		}
		for _, m := range primitive.DecodeMessage(res.GetBody()) {
			got = append(got, fmt.Sprintf("%d:%s", m.QueueOffset, m.Body))
		}
		if res.NextBeginOffset <= off {
			t.Fatalf("pull from %d: next begin offset %d does not advance (status %d)", off, res.NextBeginOffset, res.Status)
		}
		off = res.NextBeginOffset
	}
	want := []string{"10:k0-r2", "11:k1-r2", "12:k2-r2", "13:k3-r2", "14:k4-r2"}
	if !slices.Equal(got, want) {
		t.Fatalf("pulled %v, want the newest message of each key %v", got, want)
	}
}
