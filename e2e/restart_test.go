package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// sendN sends prefix-0 … prefix-(n-1) synchronously and fails on any error.
func sendN(t testing.TB, p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, topic, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("%s%d", prefix, i))))
		if err != nil {
			t.Fatalf("send %s%d: %v", prefix, i, err)
		}
		if res.Status != primitive.SendOK {
			t.Fatalf("send %s%d: %v", prefix, i, res)
		}
	}
}

// TestRestartKeepsCommittedOffsets: a group consumes and commits the first
// part of a topic; more messages are sent and acknowledged; the broker is
// shut down cleanly (SIGTERM) and restarted on the same store and port. The
// committed offsets and the queues' contents are the same after the
// restart, and a new consumer of the group receives every acknowledged
// message it had not consumed (the part sent before the shutdown and a
// part sent after) and none of those committed before the shutdown.
func TestRestartKeepsCommittedOffsets(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{})
	const topic, group, queues = "E2ERestart", "cg-restart", 4
	const n1, n2, n3 = 60, 60, 20
	createTopic(t, b.addr, topic, queues)
	waitRoute(t, ns.addr, topic, b.name)
	p := newProducer(t, ns.addr, "pg-restart")

	sendN(t, p, topic, "first-", n1)
	got1 := newCollector()
	c1 := startPushConsumer(t, ns.addr, group, topic, consumer.MessageSelector{}, got1,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got1.waitDistinct(t, n1, 60*time.Second)
	checkBodies(t, got1, "first-", n1)
	// The Go client commits every 5 s (and at shutdown, oneway): wait until
	// the broker has the offsets, then stop the consumer.
	waitCommitted(t, b.addr, group, topic, queues, 20*time.Second)
	if err := c1.Shutdown(); err != nil {
		t.Fatal(err)
	}

	sendN(t, p, topic, "second-", n2)
	waitDispatched(t, b.addr, topic, queues, n1+n2)
	before := make([][2]int64, queues) // committed, max per queue
	for q := range before {
		before[q] = [2]int64{committedOffset(t, b.addr, group, topic, q), maxOffset(t, b.addr, topic, q)}
	}

	b.stop(t)
	b.restart(t)

	for q := range before {
		after := [2]int64{committedOffset(t, b.addr, group, topic, q), maxOffset(t, b.addr, topic, q)}
		if after != before[q] {
			t.Errorf("queue %d: committed/max offsets %v before the restart, %v after", q, before[q], after)
		}
	}
	sendN(t, p, topic, "third-", n3)

	got2 := newCollector()
	startPushConsumer(t, ns.addr, group, topic, consumer.MessageSelector{}, got2,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got2.waitDistinct(t, n2+n3, 60*time.Second)
	checkBodies(t, got2, "second-", n2)
	checkBodies(t, got2, "third-", n3)
	// Each queue is consumed in order and the first part sits before the
	// second in every queue: had the committed offsets been lost, the first
	// part would have come before the rest did.
	var again []string
	for body := range got2.snapshot() {
		if strings.HasPrefix(body, "first-") {
			again = append(again, body)
		}
	}
	if len(again) > 0 {
		sort.Strings(again)
		t.Errorf("%d messages committed before the shutdown were delivered again: %v", len(again), again)
	}
}

// TestKillKeepsAcknowledged: the broker is killed with SIGKILL while a
// producer sends, then restarted on the same store and port; the producer
// carries on. Every message whose send was acknowledged, before the kill or
// after the restart, is consumed (at least once).
func TestKillKeepsAcknowledged(t *testing.T) {
	t.Parallel()
	const topic, queues = "E2EKill", 4
	ns, b := startWithTopic(t, topic, queues)
	p := newProducer(t, ns.addr, "pg-kill", producer.WithSendMsgTimeout(2*time.Second), producer.WithRetry(0))

	load := startSendLoop(t, "kill-", func(body string) (*primitive.SendResult, error) {
		return p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)))
	})
	waitUntil(t, 30*time.Second, "300 acknowledged sends before the kill", func() bool { return load.ackedCount() >= 300 })
	b.kill()
	killedAt := load.ackedCount()
	b.restart(t)
	waitUntil(t, 60*time.Second, "200 acknowledged sends after the restart", func() bool { return load.ackedCount() >= killedAt+200 })
	want, failed := load.stopAndResults()
	t.Logf("%d sends acknowledged (%d before the kill), %d failed", len(want), killedAt, len(failed))

	got := newCollector()
	startPushConsumer(t, ns.addr, "cg-kill", topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	waitUntil(t, 60*time.Second, "every acknowledged message consumed", func() bool {
		snap := got.snapshot()
		for _, body := range want {
			if snap[body] == 0 {
				return false
			}
		}
		return true
	})
	// The queues hold at least the acknowledged messages (a send cut by the
	// kill may be stored without its acknowledgement).
	total := topicTotal(t, b.addr, topic, queues)
	if total < int64(len(want)) {
		t.Errorf("broker holds %d messages of %s, %d were acknowledged", total, topic, len(want))
	}
}

// waitUntil polls cond every 20 ms until it holds or timeout passes.
// sendLoop sends one message after another until stopped and keeps the
// names of the sends acknowledged and those that failed: the load a kill
// test cuts through.
type sendLoop struct {
	mu     sync.Mutex
	acked  []string
	failed []string

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// startSendLoop sends prefix+"0", prefix+"1", ... with send until
// stopAndResults (or the test's cleanup). A send that fails is followed
// by a 20 ms pause: the broker is down, and the loop should not spin on
// refused connections.
func startSendLoop(t testing.TB, prefix string, send func(name string) (*primitive.SendResult, error)) *sendLoop {
	l := &sendLoop{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			default:
			}
			name := fmt.Sprintf("%s%d", prefix, i)
			res, err := send(name)
			l.mu.Lock()
			if err == nil && res.Status == primitive.SendOK {
				l.acked = append(l.acked, name)
			} else {
				l.failed = append(l.failed, name)
			}
			l.mu.Unlock()
			if err != nil {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(func() { l.stopAndResults() })
	return l
}

// ackedCount is how many sends have been acknowledged so far.
func (l *sendLoop) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// stopAndResults stops the loop, waits for its last send and returns the
// names sent with an acknowledgement and without one.
func (l *sendLoop) stopAndResults() (acked, failed []string) {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.acked...), append([]string(nil), l.failed...)
}

func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestartWithLiveClients: a producer and a push consumer keep running
// while the broker is shut down cleanly and restarted. They reconnect: the
// messages sent after the restart are consumed, and the messages consumed
// and committed before it are not delivered again. (The Go client does not
// fail a request pending on a connection that closes: the consumer's pulls
// held by the stopped broker resume only at the client's timeout, up to
// 30 s later.)
func TestRestartWithLiveClients(t *testing.T) {
	t.Parallel()
	const topic, group, queues, n = "E2ELive", "cg-live", 4, 40
	ns, b := startWithTopic(t, topic, queues)
	p := newProducer(t, ns.addr, "pg-live")
	got := newCollector()
	startPushConsumer(t, ns.addr, group, topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	sendN(t, p, topic, "before-", n)
	got.waitDistinct(t, n, 60*time.Second)
	waitCommitted(t, b.addr, group, topic, queues, 20*time.Second)

	b.stop(t)
	b.restart(t)

	// The producer's connection died with the broker: a send may fail
	// until it reconnects.
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("after-%d", i)
		var err error
		for try := 0; try < 50; try++ {
			if _, err = p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body))); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("send %s after the restart: %v", body, err)
		}
	}
	got.waitDistinct(t, 2*n, 60*time.Second)
	checkBodies(t, got, "after-", n)
	for body, k := range got.snapshot() {
		if k != 1 {
			t.Errorf("%s delivered %d times", body, k)
		}
	}
}

// TestRestartKeepsDelayed: of messages sent with delay levels 1 (1 s) and
// 2 (5 s), the level-1 ones are delivered before a clean shutdown and the
// level-2 ones are still parked; after the restart every message is in its
// topic exactly once (the scheduler's progress survived the restart) and
// consumed, none stored earlier than its delay.
func TestRestartKeepsDelayed(t *testing.T) {
	t.Parallel()
	const topic, n = "E2EDelayRestart", 20
	ns, b := startWithTopic(t, topic, 2)
	p := newProducer(t, ns.addr, "pg-delay-restart")
	// Half are due before the restart (level 1, 1 s): the scheduler's
	// progress must survive it too, or they come twice.
	for i := 0; i < n; i++ {
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("parked-%d", i)))
		m.WithDelayTimeLevel(1 + i%2)
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	// The level-1 messages are delivered and the level-2 ones still parked
	// (more than n/2 would fail) when the broker stops.
	waitDispatched(t, b.addr, topic, 2, n/2)
	b.stop(t)
	b.restart(t)

	consumeDelayed(t, ns.addr, "cg-delay-restart", topic, "parked-", n, func(i int) int64 { return []int64{1000, 5000}[i%2] })
	// Every parked message is in the topic once: the queues hold n.
	if total := topicTotal(t, b.addr, topic, 2); total != n {
		t.Errorf("the topic holds %d messages after the restart, %d were sent: the scheduler delivered some twice or lost some", total, n)
	}
}
