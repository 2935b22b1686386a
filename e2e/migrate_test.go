package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestConsumeRocketMQStore: the broker opens a store written by Apache
// RocketMQ 4.9.8 (../shared/fixtures) and the unchanged Go push consumer
// of a group whose offsets RocketMQ committed (GroupA on TopicA at 5, 6, 7,
// 8) receives exactly the messages after them: none it consumed before
// the move, none lost.
func TestConsumeRocketMQStore(t *testing.T) {
	t.Parallel()
	store := copyRocketMQStore(t)
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{store: store, sets: []string{"mappedFileSizeCommitLog=16384"}})
	const topic = "TopicA"
	waitRoute(t, ns.addr, topic, b.name)

	// The queues as RocketMQ left them (expected.json): 16, 16, 18 and 19
	// messages; GroupA committed 5, 6, 7 and 8.
	committed := []int64{5, 6, 7, 8}
	var want int64
	for q, c := range committed {
		want += maxOffset(t, b.addr, topic, q) - c
	}
	if want != 43 {
		t.Fatalf("TopicA holds %d messages past GroupA's offsets, the fixture 43", want)
	}
	var mu sync.Mutex
	var early []int64
	got := newCollector()
	startPushConsumerFunc(t, ns.addr, "GroupA", topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				if m.QueueOffset < committed[m.Queue.QueueId] {
					mu.Lock()
					early = append(early, m.QueueOffset)
					mu.Unlock()
				}
				got.add(m.MsgId)
			}
			return consumer.ConsumeSuccess, nil
		}, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, int(want), 60*time.Second)
	time.Sleep(2 * time.Second) // nothing more comes
	if n := len(got.snapshot()); n != int(want) {
		t.Errorf("consumed %d distinct messages, want %d", n, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(early) > 0 {
		t.Errorf("consumed queue offsets %v, below GroupA's committed offsets: the move lost the group's position", early)
	}
}

// copyRocketMQStore copies the store Apache RocketMQ 4.9.8 wrote
// (../shared/fixtures, 16 KiB CommitLog segments) into the test's
// directory and returns its root; the test is skipped without fixtures.
func copyRocketMQStore(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "..", "shared", "fixtures", "rocketmq-store-4.9.8", "clean")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("RocketMQ fixtures not found at %s: %v", src, err)
	}
	store := filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(store, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return store
}
