package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestSlaveKeepsWhatASyncMasterAcknowledged: a SYNC_MASTER (inSyncReplicas
// 2) and its SLAVE, the slave finding its master through the name server.
// The unchanged Go client consumes and commits a first part, then sends a
// stream of messages while the slave is SIGKILLed and restarted and then
// the master is SIGKILLed, in the middle of it.
// The slave is promoted the way RocketMQ's operators do it (restarted on
// its store as the master, brokerId 0): a consumer of the group then
// receives every message the dead master acknowledged with SEND_OK after
// the committed part, and nothing of the committed part again (the slave
// had synchronized the consumer offsets).
// fastHA shortens the HA heartbeats and the slaves' metadata sync.
var fastHA = []string{"haSendHeartbeatInterval=200", "slaveSyncIntervalMillis=300"}

// startSlave starts a SLAVE (brokerId 1) of broker-a on store, with more
// command-line arguments, and waits until it replicates its master.
func startSlave(t *testing.T, ns *namesrv, store string, args ...string) *brokerProc {
	t.Helper()
	b := startBroker(t, ns, brokerOpts{store: store, sets: append([]string{"brokerRole=SLAVE", "brokerId=1"}, fastHA...), args: args})
	b.waitLog(t, "replicating the master's CommitLog", 30*time.Second)
	return b
}

// startSyncMasterAndSlave starts a SYNC_MASTER (inSyncReplicas 2) of
// broker-a and its SLAVE, whose copies of the master's tables are
// syncEvery apart (slaveSyncIntervalMillis), and waits until the slave
// replicates the master.
func startSyncMasterAndSlave(t *testing.T, ns *namesrv, syncEvery time.Duration) (master, slave *brokerProc) {
	t.Helper()
	master = startBroker(t, ns, brokerOpts{sets: []string{"brokerRole=SYNC_MASTER", "inSyncReplicas=2", "haSendHeartbeatInterval=200"}})
	slave = startBroker(t, ns, brokerOpts{store: t.TempDir() + "/slave", sets: []string{"brokerRole=SLAVE", "brokerId=1",
		"haSendHeartbeatInterval=200", "slaveSyncIntervalMillis=" + strconv.FormatInt(syncEvery.Milliseconds(), 10)}})
	slave.waitLog(t, "replicating the master's CommitLog", 30*time.Second)
	return master, slave
}

// consumePromoted promotes slave the way RocketMQ's operators do it
// (stopped, then started on its store as the master, brokerId 0), waits
// until the name server routes topic to it and starts a push consumer of
// group on topic from its first offset, returning what it receives.
func consumePromoted(t *testing.T, ns *namesrv, slave *brokerProc, topic, group string) *collector {
	t.Helper()
	slave.stop(t)
	promoted := startBroker(t, ns, brokerOpts{store: slave.store, sets: []string{"brokerRole=ASYNC_MASTER", "brokerId=0"}})
	waitRoute(t, ns.addr, topic, promoted.name)
	got := newCollector()
	startPushConsumer(t, ns.addr, group, topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	return got
}

// consumeUntilSlaveHasOffsets consumes the n messages of topic (of
// queues queues) with a push consumer of group, stops it once its
// offsets are committed on the master and waits until the slave copied
// them.
func consumeUntilSlaveHasOffsets(t *testing.T, ns *namesrv, master, slave *brokerProc, group, topic string, queues, n int) {
	t.Helper()
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
}

// wantAllPrefixed checks that got receives every one of prefix0 ...
// prefix(n-1) within 90 s.
func wantAllPrefixed(t *testing.T, got *collector, prefix string, n int) {
	t.Helper()
	want := make([]string, n)
	for i := range want {
		want[i] = prefix + strconv.Itoa(i)
	}
	if lost := got.missingAfter(want, 90*time.Second); len(lost) > 0 {
		t.Errorf("%d acknowledged messages not delivered: %v", len(lost), lost)
	}
}

// wantOnlyPrefixed checks that got receives every one of prefix0 ...
// prefix(n-1) within 90 s, and no message whose body starts with
// unwanted.
func wantOnlyPrefixed(t *testing.T, got *collector, prefix string, n int, unwanted string) {
	t.Helper()
	wantAllPrefixed(t, got, prefix, n)
	for body := range got.snapshot() {
		if strings.HasPrefix(body, unwanted) {
			t.Errorf("delivered %s, a message of a deleted topic", body)
		}
	}
}

func TestSlaveKeepsWhatASyncMasterAcknowledged(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	master := startBroker(t, ns, brokerOpts{sets: append([]string{"brokerRole=SYNC_MASTER", "inSyncReplicas=2"}, fastHA...)})
	slave := startSlave(t, ns, t.TempDir()+"/slave")
	const topic, group, queues = "E2EHA", "cg-ha", 4
	createTopic(t, master.addr, topic, queues)
	waitRoute(t, ns.addr, topic, master.name)
	p := newProducer(t, ns.addr, "pg-ha")

	const n1 = 80
	sendN(t, p, topic, "first-", n1)
	consumeUntilSlaveHasOffsets(t, ns, master, slave, group, topic, queues, n1)

	// A stream of sends; the slave and then the master die in its middle.
	load := startSendLoop(t, "second-", func(body string) (*primitive.SendResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return p.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
	})
	// The slave dies too, once: it recovers its CommitLog (a transfer
	// may have been cut in a record) and follows the master again.
	waitUntil(t, 60*time.Second, "60 acknowledged sends", func() bool { return load.ackedCount() >= 60 })
	slave.kill()
	slave.restart(t)
	waitUntil(t, 60*time.Second, "150 acknowledged sends", func() bool { return load.ackedCount() >= 150 })
	master.kill()
	time.Sleep(300 * time.Millisecond)
	want, _ := load.stopAndResults()
	t.Logf("%d sends acknowledged before the master died", len(want))

	got2 := consumePromoted(t, ns, slave, topic, group)
	lost := got2.missingAfter(want, 90*time.Second)
	seen := got2.snapshot()
	var again []string
	for b := range seen {
		if strings.HasPrefix(b, "first-") {
			again = append(again, b)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged messages lost with the master: %v", len(lost), lost)
	}
	if len(again) > 0 {
		t.Errorf("%d messages committed before the failover were delivered again: %v", len(again), again)
	}
}
