package e2e

import (
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
)

// TestPromotedSlaveDeliversATopicTheMasterCreatedAgain: a SYNC_MASTER
// and its SLAVE, which copies the master's tables every second. A group
// consumes a topic's first messages and its offsets reach the slave;
// the topic is deleted with the Go admin client (the master deletes its
// offsets too) and created again, and new messages are sent, as many per
// queue as the old ones. The master is SIGKILLed and the slave promoted:
// the group's push consumer receives every new message and none of the
// deleted ones. Without the slave dropping the offsets of a queue its
// replicated log starts anew, it would start each queue at the old
// offset, past every new message.
func TestPromotedSlaveDeliversATopicTheMasterCreatedAgain(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	master, slave := startSyncMasterAndSlave(t, ns, time.Second)

	const topic, group, queues, n = "E2EAgain", "cg-again", 4, 40
	createTopic(t, master.addr, topic, queues)
	waitRoute(t, ns.addr, topic, master.name)
	p := newProducer(t, ns.addr, "pg-again")
	sendN(t, p, topic, "old-", n)
	consumeUntilSlaveHasOffsets(t, ns, master, slave, group, topic, queues, n)

	deleteTopic(t, ns.addr, master.addr, topic)
	createTopic(t, master.addr, topic, queues)
	waitRoute(t, ns.addr, topic, master.name)
	sendN(t, p, topic, "new-", n)
	slave.waitLog(t, "the consumer offsets and pop state of the old queue are dropped", 30*time.Second)

	master.kill()
	wantOnlyPrefixed(t, consumePromoted(t, ns, slave, topic, group), "new-", n, "old-")
}

// TestPromotedSlaveForgetsATopicTheMasterDeleted: a topic's messages
// reach the slave, and the topic is deleted with the Go admin client. The
// slave drops the topic's queues at its next copy of the master's table.
// The master is SIGKILLed, the slave promoted, and the topic created on
// it again: a new group reading from the first offset gets the new
// messages only. Apache RocketMQ's slave keeps the queues, and numbers
// the new messages after the deleted ones, which such a group gets too.
func TestPromotedSlaveForgetsATopicTheMasterDeleted(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	master, slave := startSyncMasterAndSlave(t, ns, time.Second)
	const topic, queues, n = "E2EDeletedOnMaster", 4, 20
	createTopic(t, master.addr, topic, queues)
	waitRoute(t, ns.addr, topic, master.name)
	sendN(t, newProducer(t, ns.addr, "pg-deleted"), topic, "old-", n)
	deleteTopic(t, ns.addr, master.addr, topic)
	slave.waitLog(t, "the master deleted the topic; its queues", 30*time.Second)

	master.kill()
	slave.stop(t)
	promoted := startBroker(t, ns, brokerOpts{store: slave.store, sets: []string{"brokerRole=ASYNC_MASTER", "brokerId=0"}})
	createTopic(t, promoted.addr, topic, queues)
	waitRoute(t, ns.addr, topic, promoted.name)
	sendN(t, newProducer(t, ns.addr, "pg-deleted-again"), topic, "new-", n)
	got := newCollector()
	startPushConsumer(t, ns.addr, "cg-deleted-again", topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	wantOnlyPrefixed(t, got, "new-", n, "old-")
}
