package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// codeCheckCQWriteProgress is CHECK_ROCKSDB_CQ_WRITE_PROGRESS.
const codeCheckCQWriteProgress = 354

// checkLayouts asks a double-writing broker to compare its two
// ConsumeQueue layouts and waits for the result (rocketkvWait).
func checkLayouts(t testing.TB, broker string) (status int, result string) {
	t.Helper()
	r, err := rawInvoke(broker, codeCheckCQWriteProgress,
		map[string]string{"topic": "", "checkStoreTime": "0", "rocketkvWait": "true"}, nil)
	if err != nil || r.Code != respSuccess {
		t.Fatalf("check layouts: %+v %v", r, err)
	}
	var body struct {
		CheckResult string `json:"checkResult"`
		CheckStatus int    `json:"checkStatus"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("check body %q: %v", r.Body, err)
	}
	return body.CheckStatus, body.CheckResult
}

func requireLayoutsAgree(t testing.TB, broker, when string) {
	t.Helper()
	if status, result := checkLayouts(t, broker); status != 0 {
		t.Fatalf("%s: the layouts do not agree (status %d):\n%s", when, status, result)
	}
}

// TestMoveRocketMQStoreThroughDoubleWrite moves a store Apache RocketMQ
// 4.9.8 wrote from its file ConsumeQueue to Pebble the way an operator
// would: first RocketMQ's own consumequeue/ serves reads while the Pebble
// layout is written beside it, under load and SIGKILLs; then reads switch
// to Pebble with a restart, and the unchanged Go push consumer receives
// every acknowledged message; then a rollback to the file layout alone
// finds every queue where Pebble left it.
func TestMoveRocketMQStoreThroughDoubleWrite(t *testing.T) {
	t.Parallel()
	store := copyRocketMQStore(t)
	const topic, queues = "TopicA", 4
	ns := startNamesrv(t)
	sets := func(extra ...string) []string { return append([]string{"mappedFileSizeCommitLog=16384"}, extra...) }
	b := startBroker(t, ns, brokerOpts{store: store, sets: sets("storeType=file", "rocksdbCQDoubleWriteEnable=true")})
	waitRoute(t, ns.addr, topic, b.name)
	requireLayoutsAgree(t, b.addr, "first start on RocketMQ's store")
	if got := topicTotal(t, b.addr, topic, queues); got != 16+16+18+19 {
		t.Fatalf("TopicA holds %d messages in RocketMQ's ConsumeQueue, the fixture 69", got)
	}

	// Load with SIGKILLs: each round sends until some sends are
	// acknowledged, kills the broker in the middle of sending, restarts it.
	var mu sync.Mutex
	acked := map[string]bool{}
	for round := 0; round < 3; round++ {
		p := newProducer(t, ns.addr, fmt.Sprintf("pg-double-write-%d", round))
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("dw-%d-%d", round, i)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
				cancel()
				if err == nil && res.Status == primitive.SendOK {
					mu.Lock()
					acked[body] = true
					mu.Unlock()
				}
			}
		}()
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			n := len(acked)
			mu.Unlock()
			if n >= 40*(round+1) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: only %d sends acknowledged", round, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.kill()
		close(stop)
		<-done
		_ = p.Shutdown()
		b.restart(t)
		requireLayoutsAgree(t, b.addr, fmt.Sprintf("restart after kill %d", round+1))
	}
	mu.Lock()
	t.Logf("%d sends acknowledged over 3 kills; the file layout was caught up from its flushed point at %d of the restarts",
		len(acked), b.countLog("ConsumeQueue layout is behind the dispatched offset"))
	mu.Unlock()
	b.stop(t)

	// Reads switch to Pebble; the file layout is still written.
	b = startBroker(t, ns, brokerOpts{store: store, sets: sets("storeType=kv", "rocksdbCQDoubleWriteEnable=true")})
	waitRoute(t, ns.addr, topic, b.name)
	requireLayoutsAgree(t, b.addr, "reads switched to Pebble")
	var maxes [queues]int64
	for q := range maxes {
		maxes[q] = maxOffset(t, b.addr, topic, q)
	}
	mu.Lock()
	want := len(acked)
	mu.Unlock()
	got := newCollector()
	startPushConsumerFunc(t, ns.addr, "cg-double-write", topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				if body := string(m.Body); strings.HasPrefix(body, "dw-") {
					got.add(body)
				}
			}
			return consumer.ConsumeSuccess, nil
		}, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	// Sends the kills cut may be stored unacknowledged: wait for the
	// acknowledged ones by name.
	got.waitDistinct(t, want, 60*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var missing []string
		seen := got.snapshot()
		for body := range acked {
			if seen[body] == 0 {
				missing = append(missing, body)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acknowledged messages not consumed after the move: %v", missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.stop(t)

	// Rollback: the file layout alone, as it was kept.
	b = startBroker(t, ns, brokerOpts{store: store, sets: sets("storeType=file")})
	for q, want := range maxes {
		if got := maxOffset(t, b.addr, topic, q); got != want {
			t.Errorf("queue %d after the rollback to the file layout: max offset %d, Pebble had %d", q, got, want)
		}
	}
}
