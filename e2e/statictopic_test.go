package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestStaticTopicWithGoClient: a static topic created with bin/admin
// updateStaticTopic on one broker group serves the Go client v2, which
// knows nothing of static topics (no topicQueueMappingByBroker, no
// offsetDelta): its sends name logic queues the broker maps to their
// physical queues (the same numbers on one group), and a push consumer
// receives every message.
func TestStaticTopicWithGoClient(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{})
	const topic, n = "E2EStatic", 40
	out, err := exec.Command(filepath.Join(binDir, "admin"), "updateStaticTopic", "-n", ns.addr, "-t", topic,
		"-b", b.name, "-qn", "4").CombinedOutput()
	if err != nil {
		t.Fatalf("admin updateStaticTopic: %v\n%s", err, out)
	}
	waitRoute(t, ns.addr, topic, b.name)
	p := newProducer(t, ns.addr, "pg-static")
	queues := map[int]int{}
	for i := 0; i < n; i++ {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("static-%d", i))))
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if res.Status != primitive.SendOK {
			t.Fatalf("send %d: %+v", i, res)
		}
		queues[res.MessageQueue.QueueId]++
	}
	if len(queues) != 4 {
		t.Fatalf("sends went to queues %v, want the topic's 4 logic queues", queues)
	}
	got := newCollector()
	startPushConsumer(t, ns.addr, "cg-static", topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, n, 60*time.Second)
	for i := 0; i < n; i++ {
		if got.snapshot()[fmt.Sprintf("static-%d", i)] == 0 {
			t.Errorf("message static-%d not consumed", i)
		}
	}
}
