package e2e

import (
	"fmt"
	"strconv"
	"strings"
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
	got := newCollector()
	c := startPushConsumer(t, ns.addr, group, topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, n, 60*time.Second)
	waitCommitted(t, master.addr, group, topic, queues, 20*time.Second)
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for q := 0; q < queues; q++ {
		want := committedOffset(t, master.addr, group, topic, q)
		waitUntil(t, 20*time.Second, fmt.Sprintf("queue %d's committed offset %d on the slave", q, want), func() bool {
			return committedOffset(t, slave.addr, group, topic, q) == want
		})
	}

	deleteTopic(t, ns.addr, master.addr, topic)
	createTopic(t, master.addr, topic, queues)
	waitRoute(t, ns.addr, topic, master.name)
	sendN(t, p, topic, "new-", n)
	slave.waitLog(t, "the consumer offsets and pop state of the old queue are dropped", 30*time.Second)

	master.kill()
	again := consumePromoted(t, ns, slave, topic, group)
	want := make([]string, n)
	for i := range want {
		want[i] = "new-" + strconv.Itoa(i)
	}
	if lost := again.missingAfter(want, 90*time.Second); len(lost) > 0 {
		t.Errorf("%d acknowledged messages of the topic created again not delivered by the promoted slave: %v", len(lost), lost)
	}
	for body := range again.snapshot() {
		if strings.HasPrefix(body, "old-") {
			t.Errorf("the promoted slave delivered %s, a message of the deleted topic", body)
		}
	}
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
	want := make([]string, n)
	for i := range want {
		want[i] = "new-" + strconv.Itoa(i)
	}
	if lost := got.missingAfter(want, 90*time.Second); len(lost) > 0 {
		t.Errorf("%d messages of the topic created again not delivered: %v", len(lost), lost)
	}
	for body := range got.snapshot() {
		if strings.HasPrefix(body, "old-") {
			t.Errorf("the promoted slave delivered %s, a message of the topic its master deleted", body)
		}
	}
}
