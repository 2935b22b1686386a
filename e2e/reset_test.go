package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
)

// codeInvokeBrokerToResetOffset is RocketMQ's INVOKE_BROKER_TO_RESET_OFFSET,
// what mqadmin resetOffsetByTime sends to every broker of the topic.
const codeInvokeBrokerToResetOffset = 222

// TestResetOffsetReconsumes: a push consumer has consumed and committed a
// topic; an administrator resets the group to a store time between its
// two halves (as mqadmin resetOffsetByTime does, while the consumer runs).
// The unchanged Go client, told by its next pull, consumes the second half
// again and nothing of the first.
func TestResetOffsetReconsumes(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{})
	const topic, group, queues, n = "E2EReset", "cg-reset", 2, 20
	createTopic(t, b.addr, topic, queues)
	waitRoute(t, ns.addr, topic, b.name)
	p := newProducer(t, ns.addr, "pg-reset")
	sendN(t, p, topic, "before-", n)
	time.Sleep(20 * time.Millisecond) // store times have millisecond precision
	at := time.Now().UnixMilli()
	time.Sleep(20 * time.Millisecond)
	sendN(t, p, topic, "after-", n)

	got := newCollector()
	startPushConsumer(t, ns.addr, group, topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, 2*n, 60*time.Second)
	waitCommitted(t, b.addr, group, topic, queues, 20*time.Second)

	r, err := rawInvoke(b.addr, codeInvokeBrokerToResetOffset, map[string]string{
		"topic": topic, "group": group, "timestamp": strconv.FormatInt(at, 10), "isForce": "true"}, nil)
	if err != nil || r.Code != respSuccess {
		t.Fatalf("reset offset: %+v %v", r, err)
	}
	// The client waits 10 s after PULL_OFFSET_MOVED, then takes the new
	// offset at its next rebalance (every 20 s).
	waitUntil(t, 90*time.Second, "the second half consumed again", func() bool {
		seen := got.snapshot()
		for i := 0; i < n; i++ {
			if seen["after-"+strconv.Itoa(i)] < 2 {
				return false
			}
		}
		return true
	})
	for body, times := range got.snapshot() {
		if strings.HasPrefix(body, "before-") && times != 1 {
			t.Errorf("%s, sent before the reset time, delivered %d times", body, times)
		}
	}
	// The broker's committed offsets follow the client again.
	waitCommitted(t, b.addr, group, topic, queues, 20*time.Second)
}
