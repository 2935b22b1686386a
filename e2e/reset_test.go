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
	const topic, group, queues, n = "E2EReset", "cg-reset", 2, 20
	ns, b := startWithTopic(t, topic, queues)
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
	waitReconsumedAfterReset(t, got, n)
	// The broker's committed offsets follow the client again.
	waitCommitted(t, b.addr, group, topic, queues, 20*time.Second)
}

// Request codes of the reset-survives-a-kill test's setup.
const (
	codeUpdateConsumerOffset             = 15
	codeUpdateAndCreateSubscriptionGroup = 200
)

// TestResetOffsetSurvivesKill: offsets a reset answered are the ones a
// broker SIGKILLed right after it has when it starts again.
func TestResetOffsetSurvivesKill(t *testing.T) {
	t.Parallel()
	const topic, group, queues = "E2EResetKill", "cg-reset-kill", 2
	ns, b := startWithTopic(t, topic, queues)
	sendN(t, newProducer(t, ns.addr, "pg-reset-kill"), topic, "m-", 10)
	waitDispatched(t, b.addr, topic, queues, 10)
	invoke := func(code int, ext map[string]string, body []byte) {
		t.Helper()
		if r, err := rawInvoke(b.addr, code, ext, body); err != nil || r.Code != respSuccess {
			t.Fatalf("request %d %v: %+v %v", code, ext, r, err)
		}
	}
	invoke(codeUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+group+`"}`))
	want := make([]int64, queues)
	for q := range want {
		end := maxOffset(t, b.addr, topic, q)
		invoke(codeUpdateConsumerOffset, map[string]string{"consumerGroup": group, "topic": topic,
			"queueId": strconv.Itoa(q), "commitOffset": strconv.FormatInt(end, 10)}, nil)
		if end < 2 {
			t.Fatalf("queue %d holds %d messages; the test needs 2", q, end)
		}
	}
	// Every queue to its start (a time before the first message), then
	// queue 1 to offset 1.
	invoke(codeInvokeBrokerToResetOffset, map[string]string{"topic": topic, "group": group, "timestamp": "0", "isForce": "true"}, nil)
	invoke(codeInvokeBrokerToResetOffset, map[string]string{"topic": topic, "group": group, "timestamp": "-1",
		"queueId": "1", "offset": "1", "isForce": "true"}, nil)
	want[0], want[1] = 0, 1
	for q, w := range want {
		if got := committedOffset(t, b.addr, group, topic, q); got != w {
			t.Fatalf("queue %d: committed offset %d after the reset, want %d", q, got, w)
		}
	}

	b.kill()
	b.restart(t)
	for q, w := range want {
		if got := committedOffset(t, b.addr, group, topic, q); got != w {
			t.Errorf("queue %d: committed offset %d after the kill, want %d (the reset's)", q, got, w)
		}
	}
}

// codeConsumerNotOnline is RocketMQ's CONSUMER_NOT_ONLINE.
const codeConsumerNotOnline = 206

// TestResetOffsetThroughClientsReconsumes: on a broker with
// useServerSideResetOffset=false, a reset by time (as mqadmin
// resetOffsetByTime sends it) is pushed to the running Go push consumer
// as RESET_CONSUMER_CLIENT_OFFSET; the unchanged client takes the offsets
// (internal/client.go's handler of request 220), commits them and
// consumes the messages after the reset time again, nothing before it.
// Before it runs, the same reset is answered CONSUMER_NOT_ONLINE.
func TestResetOffsetThroughClientsReconsumes(t *testing.T) {
	t.Parallel()
	const topic, group, queues, n = "E2EResetClients", "cg-reset-clients", 2, 20
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{"useServerSideResetOffset=false"}})
	createTopic(t, b.addr, topic, queues)
	waitRoute(t, ns.addr, topic, b.name)
	p := newProducer(t, ns.addr, "pg-reset-clients")
	sendN(t, p, topic, "before-", n)
	time.Sleep(20 * time.Millisecond) // store times have millisecond precision
	at := time.Now().UnixMilli()
	time.Sleep(20 * time.Millisecond)
	sendN(t, p, topic, "after-", n)
	reset := map[string]string{"topic": topic, "group": group, "timestamp": strconv.FormatInt(at, 10),
		"isForce": "true", "offset": "-1"}

	// Nobody to tell yet (the group's offsets exist: the reset gets as
	// far as the clients).
	if r, err := rawInvoke(b.addr, codeUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+group+`"}`)); err != nil || r.Code != respSuccess {
		t.Fatalf("create group: %+v %v", r, err)
	}
	for q := range queues {
		if r, err := rawInvoke(b.addr, codeUpdateConsumerOffset, map[string]string{"consumerGroup": group, "topic": topic,
			"queueId": strconv.Itoa(q), "commitOffset": "0"}, nil); err != nil || r.Code != respSuccess {
			t.Fatalf("commit offset: %+v %v", r, err)
		}
	}
	if r, err := rawInvoke(b.addr, codeInvokeBrokerToResetOffset, reset, nil); err != nil || r.Code != codeConsumerNotOnline {
		t.Fatalf("reset without consumers: %+v %v, want CONSUMER_NOT_ONLINE", r, err)
	}

	got := newCollector()
	startPushConsumer(t, ns.addr, group, topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, 2*n, 60*time.Second)
	waitCommitted(t, b.addr, group, topic, queues, 20*time.Second)

	r, err := rawInvoke(b.addr, codeInvokeBrokerToResetOffset, reset, nil)
	if err != nil || r.Code != respSuccess || !strings.Contains(string(r.Body), `"offsetTable":{`) {
		t.Fatalf("reset offset: %+v %v", r, err)
	}
	// The broker moved nothing itself: the offsets are still the end of
	// each queue until the client commits the reset ones.
	ends := make([]int64, queues)
	for q := range queues {
		ends[q] = maxOffset(t, b.addr, topic, q)
		if c := committedOffset(t, b.addr, group, topic, q); c != ends[q] {
			t.Fatalf("queue %d: committed offset %d right after the reset, want %d (the client's)", q, c, ends[q])
		}
	}
	// The client waits 10 s after the push, commits the offsets and
	// takes the queues back at its next rebalance (every 20 s).
	waitReconsumedAfterReset(t, got, n)
	waitCommitted(t, b.addr, group, topic, queues, 20*time.Second)
}

// waitReconsumedAfterReset waits until each of the n messages sent after
// the reset time ("after-i") was delivered a second time, then checks
// that none sent before it ("before-i") came again.
func waitReconsumedAfterReset(t *testing.T, got *collector, n int) {
	t.Helper()
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
}
