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

// TestTwoBrokersOneTopic: two brokers of one cluster register with one
// name server and both serve a topic (created on each, as mqadmin
// updateTopic -c does: a topic auto-created by sends lands only on the
// brokers that got a send before the producer's next route refresh, which
// may be one). The name server's route lists both brokers, a producer
// spreads its sends over both (the send results name both), each broker
// holds exactly the messages the results put there, and one push consumer
// receives every message.
func TestTwoBrokersOneTopic(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	ba := startBroker(t, ns, brokerOpts{name: "broker-a", cluster: "E2ECluster"})
	bb := startBroker(t, ns, brokerOpts{name: "broker-b", cluster: "E2ECluster"})
	const topic, n, queues = "E2ETwoBrokers", 80, 4
	createTopic(t, ba.addr, topic, queues)
	createTopic(t, bb.addr, topic, queues)
	ri := waitRoute(t, ns.addr, topic, ba.name, bb.name)
	for _, bd := range ri.BrokerDatas {
		if bd.Cluster != "E2ECluster" {
			t.Errorf("route of %s: broker %s in cluster %q", topic, bd.BrokerName, bd.Cluster)
		}
	}
	p := newProducer(t, ns.addr, "pg-two")
	perBroker := map[string]map[int]int64{} // broker -> queue -> messages sent there
	for i := 0; i < n; i++ {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("two-%d", i))))
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if res.Status != primitive.SendOK {
			t.Fatalf("send %d: %v", i, res)
		}
		mq := res.MessageQueue
		if perBroker[mq.BrokerName] == nil {
			perBroker[mq.BrokerName] = map[int]int64{}
		}
		perBroker[mq.BrokerName][mq.QueueId]++
	}
	var names []string
	for name := range perBroker {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) != 2 || names[0] != ba.name || names[1] != bb.name {
		t.Fatalf("send results name brokers %v, want both %s and %s", names, ba.name, bb.name)
	}
	for _, br := range []*brokerProc{ba, bb} {
		var sum int64
		for _, count := range perBroker[br.name] {
			sum += count
		}
		waitDispatched(t, br.addr, topic, queues, sum)
		for q, count := range perBroker[br.name] {
			if got := maxOffset(t, br.addr, topic, q); got != count {
				t.Errorf("%s holds %d messages in %s/%d, the send results put %d there", br.name, got, topic, q, count)
			}
		}
	}

	got := newCollector()
	startPushConsumer(t, ns.addr, "cg-two", topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, n, 60*time.Second)
	checkBodies(t, got, "two-", n)
}
