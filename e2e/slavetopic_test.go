package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestPromotedSlaveServesATopicCreatedAfterItsLastSync: a SYNC_MASTER
// (inSyncReplicas 2) and its SLAVE, whose full copy of the master's
// tables is an hour away (slaveSyncIntervalMillis). A topic created on the
// master after the slave started reaches the slave with its first
// replicated message. The master is SIGKILLed and the slave promoted the
// way RocketMQ's operators do it (restarted on its store as the master):
// the topic is routed to it, and the unchanged Go push consumer receives
// every message the dead master acknowledged. Without the early copy the
// promoted slave has no config for the topic, and no client can reach
// its messages.
func TestPromotedSlaveServesATopicCreatedAfterItsLastSync(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	master, slave := startSyncMasterAndSlave(t, ns, time.Hour)

	const topic, group, n = "E2ENewOnMaster", "cg-new-on-master", 40
	createTopic(t, master.addr, topic, 4)
	waitRoute(t, ns.addr, topic, master.name)
	p := newProducer(t, ns.addr, "pg-new-on-master")
	sendN(t, p, topic, "m-", n)
	slave.waitLog(t, "a replicated record names a topic this slave has no config for", 30*time.Second)
	slave.waitLog(t, "took over the master's topics", 30*time.Second)

	master.kill()
	wantAllPrefixed(t, consumePromoted(t, ns, slave, topic, group), "m-", n)
}

// TestPromotedSlaveServesATopicItNeverCopied: as above, but the master is
// SIGKILLed right after it acknowledged the new topic's messages, before
// the slave could copy the topic's config (a copy made for another new
// topic a moment before keeps the next one a second away). The slave
// holds the messages but never learned the topic's config; promoted, it
// serves the topic from what its index holds, and the unchanged Go push
// consumer receives every message the dead master acknowledged.
func TestPromotedSlaveServesATopicItNeverCopied(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	master, slave := startSyncMasterAndSlave(t, ns, time.Hour)

	const first, topic, group, n = "E2EFirstOnMaster", "E2ENeverCopied", "cg-never-copied", 20
	createTopic(t, master.addr, first, 1)
	waitRoute(t, ns.addr, first, master.name)
	p := newProducer(t, ns.addr, "pg-never-copied")
	sendN(t, p, first, "f-", 1)
	slave.waitLog(t, "took over the master's topics", 30*time.Second)

	createTopic(t, master.addr, topic, 4)
	waitRoute(t, ns.addr, topic, master.name)
	sendN(t, p, topic, "m-", n)
	master.kill()
	if slave.countLog("took over the master's topics") > 1 {
		// Only on a machine too slow for the steps above to take less
		// than a second: the case is then the test above.
		t.Log("the slave copied the topic's config before the master died")
	}
	wantAllPrefixed(t, consumePromoted(t, ns, slave, topic, group), "m-", n)
}

// growTopicAfterTheSlavesCopy creates topic with one queue on master,
// sends it a message, waits until slave copied the topic, then gives the
// topic four queues and sends n-1 more messages (m-1 ... m-(n-1)) with a
// new Go producer, some of them to the added queues.
func growTopicAfterTheSlavesCopy(t *testing.T, ns *namesrv, master, slave *brokerProc, topic string, n int) {
	t.Helper()
	createTopic(t, master.addr, topic, 1)
	waitRoute(t, ns.addr, topic, master.name)
	sendN(t, newProducer(t, ns.addr, "pg-"+topic+"-first"), topic, "m-", 1)
	waitTopicCopied(t, slave.addr, topic)

	createTopic(t, master.addr, topic, 4)
	waitUntil(t, 30*time.Second, "a route of four queues", func() bool {
		ri := topicRoute(t, ns.addr, topic)
		return ri != nil && len(ri.QueueDatas) == 1 && ri.QueueDatas[0].WriteQueueNums == 4
	})
	p := newProducer(t, ns.addr, "pg-"+topic)
	added := 0 // messages acknowledged in queues 1 to 3
	for i := 1; i < n; i++ {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("m-"+strconv.Itoa(i))))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send m-%d: %v %v", i, res, err)
		}
		if res.MessageQueue.QueueId > 0 {
			added++
		}
	}
	if added == 0 {
		t.Fatal("the producer sent nothing to the added queues")
	}
}

// TestPromotedSlaveServesTheQueuesItsMasterAdded: a topic the slave
// copied with one queue is given four on the master (updateTopic), which
// acknowledges messages in all four and is SIGKILLed before the slave's
// next copy of its tables. Promoted, the slave serves the four queues,
// and the unchanged Go push consumer receives every message; with the
// copied count, those of queues 1 to 3 would be out of reach.
func TestPromotedSlaveServesTheQueuesItsMasterAdded(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	master, slave := startSyncMasterAndSlave(t, ns, time.Hour)
	const topic, group, n = "E2EGrownOnMaster", "cg-grown-on-master", 20
	growTopicAfterTheSlavesCopy(t, ns, master, slave, topic, n)
	master.kill()
	wantAllPrefixed(t, consumePromoted(t, ns, slave, topic, group), "m-", n)
}

// TestControllerModePromotedSlaveServesTheQueuesItsMasterAdded: the same
// in controller mode. The slave, elected once the master is SIGKILLed,
// becomes the master in place and serves the queues the master added
// after its last copy of the tables (an hour apart here).
func TestControllerModePromotedSlaveServesTheQueuesItsMasterAdded(t *testing.T) {
	t.Parallel()
	caddr, ns := startNamesrvWithController(t)
	master, slave := startControllerModeGroup(t, ns, caddr, "slaveSyncIntervalMillis=3600000")
	const topic, group, n = "E2EGrownInControllerMode", "cg-grown-controller-mode", 20
	growTopicAfterTheSlavesCopy(t, ns, master, slave, topic, n)
	end := runtimeValue(t, master.addr, "commitLogMaxOffset")
	waitUntil(t, 30*time.Second, "the slave to hold the master's CommitLog", func() bool {
		return runtimeValue(t, slave.addr, "commitLogMaxOffset") == end
	})
	master.kill()
	slave.waitLog(t, "broker running as SYNC_MASTER", 30*time.Second)
	got := newCollector()
	startPushConsumer(t, ns.addr, group, topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	wantAllPrefixed(t, got, "m-", n)
}
