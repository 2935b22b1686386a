package e2e

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
)

// codeGetBrokerRuntimeInfo is GET_BROKER_RUNTIME_INFO.
const codeGetBrokerRuntimeInfo = 28

// runtimeValue reads one value of a broker's runtime info.
func runtimeValue(t testing.TB, addr, key string) string {
	t.Helper()
	r, err := rawInvoke(addr, codeGetBrokerRuntimeInfo, nil, nil)
	if err != nil || r.Code != respSuccess {
		t.Fatalf("GET_BROKER_RUNTIME_INFO of %s: %v %v", addr, r, err)
	}
	var info struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(r.Body, &info); err != nil {
		t.Fatalf("runtime info of %s %q: %v", addr, r.Body, err)
	}
	return info.Table[key]
}

// TestSlowConsumerReadsFromTheSlave: with slaveReadEnable on a master and
// its slave, the unchanged Go push consumer reading messages older than
// the page cache (accessMessageInMemoryMaxRatio=0 makes every message
// old) is sent to the slave by suggestWhichBrokerId after its first pull
// (of 32 messages: the queues hold 100 each), pulls from it, and
// gets every message.
func TestSlowConsumerReadsFromTheSlave(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	sets := []string{"slaveReadEnable=true", "accessMessageInMemoryMaxRatio=0", "haSendHeartbeatInterval=200", "slaveSyncIntervalMillis=300"}
	master := startBroker(t, ns, brokerOpts{sets: sets})
	slave := startBroker(t, ns, brokerOpts{store: t.TempDir() + "/slave", sets: append([]string{"brokerRole=SLAVE", "brokerId=1"}, sets...)})
	slave.waitLog(t, "replicating the master's CommitLog", 30*time.Second)
	const topic, group, queues, n = "E2ESlaveRead", "cg-slave-read", 2, 200
	createTopic(t, master.addr, topic, queues)
	waitRoute(t, ns.addr, topic, master.name)
	p := newProducer(t, ns.addr, "pg-slave-read")
	sendN(t, p, topic, "old-", n)
	end := runtimeValue(t, master.addr, "commitLogMaxOffset")
	waitUntil(t, 30*time.Second, "the slave to hold the master's CommitLog", func() bool {
		return runtimeValue(t, slave.addr, "commitLogMaxOffset") == end
	})

	got := newCollector()
	startPushConsumer(t, ns.addr, group, topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, n, 60*time.Second)
	served, err := strconv.ParseInt(runtimeValue(t, slave.addr, "msgGetTotalTodayNow"), 10, 64)
	if err != nil || served == 0 {
		t.Fatalf("the slave served %d messages (%v): the consumer never pulled from it", served, err)
	}
	t.Logf("the slave served %d of the %d messages", served, n)
}
