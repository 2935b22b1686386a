package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestOrderlyConsume: a producer with a hash queue selector sends the
// messages of each key to one queue; an orderly push consumer (queue locks,
// one message at a time per queue) receives the bodies of every key exactly
// in send order while the producer is still sending.
func TestOrderlyConsume(t *testing.T) {
	t.Parallel()
	const topic, keys, perKey = "E2EOrderly", 8, 25
	ns, _ := startWithTopic(t, topic, 4)

	var mu sync.Mutex
	seqs := map[string][]int{} // key -> sequence numbers in arrival order
	lastOff := map[int]int64{} // queue -> last consumed offset
	var orderErrs []string     // offsets going backwards within a queue
	got := newCollector()
	startPushConsumerFunc(t, ns.addr, "cg-orderly", topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			for _, m := range msgs {
				key, seq, err := parseKeyed(string(m.Body))
				if err != nil {
					orderErrs = append(orderErrs, err.Error())
					continue
				}
				seqs[key] = append(seqs[key], seq)
				if last, ok := lastOff[m.Queue.QueueId]; ok && m.QueueOffset <= last {
					orderErrs = append(orderErrs, fmt.Sprintf("queue %d: offset %d consumed after %d", m.Queue.QueueId, m.QueueOffset, last))
				}
				lastOff[m.Queue.QueueId] = m.QueueOffset
			}
			mu.Unlock()
			for _, m := range msgs {
				got.add(string(m.Body))
			}
			return consumer.ConsumeSuccess, nil
		},
		consumer.WithConsumerOrder(true),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))

	p := newProducer(t, ns.addr, "pg-orderly", producer.WithQueueSelector(producer.NewHashQueueSelector()))
	queueOf := map[string]int{}
	for i := 0; i < perKey; i++ {
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("key%d", k)
			m := primitive.NewMessage(topic, []byte(fmt.Sprintf("%s:%d", key, i)))
			m.WithShardingKey(key)
			res, err := p.SendSync(context.Background(), m)
			if err != nil {
				t.Fatalf("send %s:%d: %v", key, i, err)
			}
			if q, ok := queueOf[key]; ok && q != res.MessageQueue.QueueId {
				t.Fatalf("%s went to queue %d and %d: the selector must keep a key on one queue", key, q, res.MessageQueue.QueueId)
			}
			queueOf[key] = res.MessageQueue.QueueId
		}
	}
	got.waitDistinct(t, keys*perKey, 60*time.Second)
	mu.Lock()
	defer mu.Unlock()
	for _, e := range orderErrs {
		t.Error(e)
	}
	checkKeyOrder(t, seqs, keys, perKey)
}

// checkKeyOrder fails t unless every key0 … key<keys-1> of seqs holds the
// sequence numbers 0 … perKey-1 in order, each once.
func checkKeyOrder(t testing.TB, seqs map[string][]int, keys, perKey int) {
	t.Helper()
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("key%d", k)
		s := seqs[key]
		ok := len(s) == perKey
		for i := 0; ok && i < perKey; i++ {
			ok = s[i] == i
		}
		if !ok {
			t.Errorf("%s arrived as %v, want 0..%d in order, each once", key, s, perKey-1)
		}
	}
}

// parseKeyed splits "key:seq".
func parseKeyed(body string) (string, int, error) {
	key, s, ok := strings.Cut(body, ":")
	if !ok {
		return "", 0, fmt.Errorf("unexpected body %q", body)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return "", 0, fmt.Errorf("unexpected body %q", body)
	}
	return key, n, nil
}

// TestBroadcasting: two push consumers of one group in broadcasting mode
// each receive every message (clustering would split the queues).
func TestBroadcasting(t *testing.T) {
	t.Parallel()
	const topic, n = "E2EBroadcast", 40
	ns, _ := startWithTopic(t, topic, 4)
	got1, got2 := newCollector(), newCollector()
	for _, got := range []*collector{got1, got2} {
		startPushConsumer(t, ns.addr, "cg-broadcast", topic, consumer.MessageSelector{}, got,
			consumer.WithConsumerModel(consumer.BroadCasting),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	}
	p := newProducer(t, ns.addr, "pg-broadcast")
	for i := 0; i < n; i++ {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("bc-%d", i)))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for i, got := range []*collector{got1, got2} {
		got.waitDistinct(t, n, 60*time.Second)
		checkBodies(t, got, "bc-", n)
		if s := got.snapshot(); len(s) != n {
			t.Errorf("consumer %d received %d distinct messages, want %d", i+1, len(s), n)
		}
	}
}

// TestTagFilter: with the subscription "TagA || TagC" a push consumer gets
// every TagA and TagC message and nothing else (TagB, no tag); a pull with
// the same expression shows that the broker itself returns only those (the
// Go client filters again by tag, which would hide a broker that does
// not).
func TestTagFilter(t *testing.T) {
	t.Parallel()
	const topic, rounds, queues = "E2ETags", 15, 2
	ns, b := startWithTopic(t, topic, queues)
	p := newProducer(t, ns.addr, "pg-tags")
	wanted := map[string]bool{}
	for i := 0; i < rounds; i++ {
		for _, tag := range []string{"TagA", "TagB", "TagC", ""} {
			body := fmt.Sprintf("%s-%d", tag, i)
			if tag == "" {
				body = fmt.Sprintf("untagged-%d", i)
			}
			m := primitive.NewMessage(topic, []byte(body))
			if tag != "" {
				m.WithTag(tag)
			}
			if _, err := p.SendSync(context.Background(), m); err != nil {
				t.Fatalf("send %s: %v", body, err)
			}
			if tag == "TagA" || tag == "TagC" {
				wanted[body] = true
			}
		}
	}
	sel := consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA || TagC"}
	waitDispatched(t, b.addr, topic, queues, rounds*4)

	// The broker's answer to pulls with the expression, read raw.
	pc := startPullConsumer(t, ns.addr, "cg-tags-pull", topic, sel)
	fromBroker := map[string]bool{}
	for q := 0; q < queues; q++ {
		mq := &primitive.MessageQueue{Topic: topic, BrokerName: b.name, QueueId: q}
		max := maxOffset(t, b.addr, topic, q)
		for off := int64(0); off < max; {
			res, err := pc.PullFrom(context.Background(), mq, off, 8)
			if err != nil {
				t.Fatalf("pull %s/%d@%d: %v", topic, q, off, err)
			}
			for _, m := range primitive.DecodeMessage(res.GetBody()) {
				if tag := m.GetTags(); tag != "TagA" && tag != "TagC" {
					t.Errorf("broker returned %q (tag %q) to a pull for TagA || TagC", m.Body, tag)
				}
				fromBroker[string(m.Body)] = true
			}
			if res.NextBeginOffset <= off {
				t.Fatalf("pull %s/%d@%d: next begin offset %d does not advance (status %d)", topic, q, off, res.NextBeginOffset, res.Status)
			}
			off = res.NextBeginOffset
		}
	}
	for body := range wanted {
		if !fromBroker[body] {
			t.Errorf("broker did not return %s to the pulls for TagA || TagC", body)
		}
	}

	got := newCollector()
	startPushConsumer(t, ns.addr, "cg-tags", topic, sel, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, len(wanted), 60*time.Second)
	for body := range got.snapshot() {
		if !wanted[body] {
			t.Errorf("push consumer of TagA || TagC received %s", body)
		}
	}
	for body := range wanted {
		if got.snapshot()[body] == 0 {
			t.Errorf("push consumer of TagA || TagC did not receive %s", body)
		}
	}
}

// startPullConsumer starts a pull consumer subscribed to topic, retrying
// while the route propagates.
func startPullConsumer(t testing.TB, ns, group, topic string, sel consumer.MessageSelector, opts ...consumer.Option) rocketmq.PullConsumer {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		all := append([]consumer.Option{consumer.WithNameServer([]string{ns}), consumer.WithGroupName(group),
			consumer.WithInstance(uniqueInstance(t))}, opts...)
		raw, err := rocketmq.NewPullConsumer(all...)
		if err != nil {
			t.Fatal(err)
		}
		c := &safePullConsumer{PullConsumer: raw, subs: subscriptions{group: group}}
		if err = c.Subscribe(topic, sel); err == nil {
			err = c.Start()
		}
		if err == nil {
			t.Cleanup(func() { _ = c.Shutdown() })
			return c
		}
		_ = raw.Shutdown()
		if time.Now().After(deadline) {
			t.Fatalf("start pull consumer %s on %s: %v", group, topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestPullConsumer exercises the Go client's pull consumer three ways:
// Poll/ACK (rebalanced queues, offsets committed to the broker), PullFrom
// over every queue (contiguous queue offsets from 0 to the max offset,
// every message once), and a PullFrom at the end of a queue that the
// broker holds and answers when a message arrives.
func TestPullConsumer(t *testing.T) {
	t.Parallel()
	const topic, n, queues = "E2EPull", 48, 4
	ns, b := startWithTopic(t, topic, queues)
	p := newProducer(t, ns.addr, "pg-pull")
	for i := 0; i < n; i++ {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("pull-%d", i)))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	waitDispatched(t, b.addr, topic, queues, n)

	t.Run("poll", func(t *testing.T) {
		const group = "cg-pull-poll"
		pc := startPullConsumer(t, ns.addr, group, topic, consumer.MessageSelector{},
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
		got := map[string]int{}
		deadline := time.Now().Add(60 * time.Second)
		for len(got) < n {
			if time.Now().After(deadline) {
				t.Fatalf("polled %d distinct messages in 60 s, want %d", len(got), n)
			}
			cr, err := pc.Poll(context.Background(), time.Second)
			if consumer.IsNoNewMsgError(err) {
				continue
			}
			if err != nil {
				t.Fatalf("poll: %v", err)
			}
			for _, m := range cr.GetMsgList() {
				got[string(m.Body)]++
			}
			pc.ACK(context.Background(), cr, consumer.ConsumeSuccess)
		}
		for i := 0; i < n; i++ {
			if got[fmt.Sprintf("pull-%d", i)] == 0 {
				t.Errorf("pull-%d not polled", i)
			}
		}
		// Acknowledged offsets reach the broker (the client persists every
		// 5 s and at shutdown).
		if err := pc.Shutdown(); err != nil {
			t.Fatal(err)
		}
		waitCommitted(t, b.addr, group, topic, queues, 20*time.Second)
	})

	t.Run("pull-from", func(t *testing.T) {
		pc := startPullConsumer(t, ns.addr, "cg-pull-from", topic, consumer.MessageSelector{})
		seen := map[string]int{}
		for q := 0; q < queues; q++ {
			mq := &primitive.MessageQueue{Topic: topic, BrokerName: b.name, QueueId: q}
			max := maxOffset(t, b.addr, topic, q)
			next := int64(0)
			for next < max {
				res, err := pc.PullFrom(context.Background(), mq, next, 5)
				if err != nil {
					t.Fatalf("pull %s/%d@%d: %v", topic, q, next, err)
				}
				if res.Status != primitive.PullFound {
					t.Fatalf("pull %s/%d@%d below max offset %d: status %d", topic, q, next, max, res.Status)
				}
				if res.MaxOffset != max || res.MinOffset != 0 {
					t.Errorf("pull %s/%d: min/max offsets %d/%d, want 0/%d", topic, q, res.MinOffset, res.MaxOffset, max)
				}
				msgs := res.GetMessageExts()
				if len(msgs) == 0 || len(msgs) > 5 {
					t.Fatalf("pull %s/%d@%d of 5: %d messages", topic, q, next, len(msgs))
				}
				for _, m := range msgs {
					if m.QueueOffset != next {
						t.Fatalf("pull %s/%d: message at offset %d where %d was due", topic, q, m.QueueOffset, next)
					}
					seen[string(m.Body)]++
					next++
				}
				if res.NextBeginOffset != next {
					t.Fatalf("pull %s/%d: next begin offset %d after the message at %d", topic, q, res.NextBeginOffset, next-1)
				}
			}
		}
		if len(seen) != n {
			t.Errorf("pulled %d distinct messages, want %d", len(seen), n)
		}
		for body, k := range seen {
			if k != 1 {
				t.Errorf("%s pulled %d times", body, k)
			}
		}
	})

	t.Run("long-poll", func(t *testing.T) {
		pc := startPullConsumer(t, ns.addr, "cg-pull-wake", topic, consumer.MessageSelector{})
		mq := &primitive.MessageQueue{Topic: topic, BrokerName: b.name, QueueId: 1}
		end := maxOffset(t, b.addr, topic, 1)
		type result struct {
			res *primitive.PullResult
			err error
		}
		ch := make(chan result, 1)
		go func() {
			res, err := pc.PullFrom(context.Background(), mq, end, 32)
			ch <- result{res, err}
		}()
		mp := newProducer(t, ns.addr, "pg-pull-wake", producer.WithQueueSelector(producer.NewManualQueueSelector()))
		m := primitive.NewMessage(topic, []byte("wake-up"))
		m.Queue = mq
		if _, err := mp.SendSync(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		// The Go client asks the broker to hold the pull for 20 s; the
		// answer must come with the message, not after the hold.
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatal(r.err)
			}
			msgs := r.res.GetMessageExts()
			if r.res.Status != primitive.PullFound || len(msgs) != 1 || string(msgs[0].Body) != "wake-up" || msgs[0].QueueOffset != end {
				t.Fatalf("held pull answered status %d with %d messages, want the new message at offset %d", r.res.Status, len(msgs), end)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("held pull not answered within 15 s of the message's arrival")
		}
	})
}

// waitCommitted waits until a group's committed offset of every queue of a
// topic equals the queue's max offset.
func waitCommitted(t testing.TB, broker, group, topic string, queues int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var behind []string
		for q := 0; q < queues; q++ {
			if c, m := committedOffset(t, broker, group, topic, q), maxOffset(t, broker, topic, q); c != m {
				behind = append(behind, fmt.Sprintf("queue %d: committed %d, max %d", q, c, m))
			}
		}
		if len(behind) == 0 {
			return
		}
		if time.Now().After(deadline) {
			sort.Strings(behind)
			t.Fatalf("%s has not committed %s within %v: %s", group, topic, timeout, strings.Join(behind, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusteringSplitsQueues: two push consumers of one group in
// clustering mode share the queues (the broker lists both to each and tells
// them to rebalance when the second joins): together they receive every
// message, and each receives part of them.
func TestClusteringSplitsQueues(t *testing.T) {
	t.Parallel()
	const topic, group, batch = "E2EClustering", "cg-clustering", 40
	ns, b := startWithTopic(t, topic, 4)
	got1, got2, all := newCollector(), newCollector(), newCollector()
	for _, got := range []*collector{got1, got2} {
		got := got
		startPushConsumerFunc(t, ns.addr, group, topic, consumer.MessageSelector{},
			func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				for _, m := range msgs {
					got.add(string(m.Body))
					all.add(string(m.Body))
				}
				return consumer.ConsumeSuccess, nil
			}, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	}
	waitUntil(t, 20*time.Second, "the broker lists both consumers of the group", func() bool {
		return len(consumerIDs(t, b.addr, group)) == 2
	})
	p := newProducer(t, ns.addr, "pg-clustering")
	// The consumers rebalance when the broker notifies them; send batches
	// until both have received messages (at most 30 s: the Go client also
	// rebalances every 20 s by itself).
	sent := 0
	deadline := time.Now().Add(30 * time.Second)
	for len(got1.snapshot()) == 0 || len(got2.snapshot()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after %d messages the consumers received %d and %d: the queues are not shared",
				sent, len(got1.snapshot()), len(got2.snapshot()))
		}
		sendN(t, p, topic, fmt.Sprintf("cl-%d-", sent/batch), batch)
		sent += batch
		all.waitDistinct(t, sent, 60*time.Second)
	}
	for r := 0; r < sent/batch; r++ {
		checkBodies(t, all, fmt.Sprintf("cl-%d-", r), batch)
	}
}

// consumerIDs asks a broker for the client ids of a consumer group.
func consumerIDs(t testing.TB, broker, group string) []string {
	t.Helper()
	var body struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}
	invokeJSON(t, broker, codeGetConsumerList, map[string]string{"consumerGroup": group}, &body)
	return body.ConsumerIDList
}

// TestConsumeRetry: a concurrently consuming push consumer that answers
// "retry later" for the first delivery of each message gets each message
// again, from the group's retry topic after the broker's delay (level 3,
// 10 s), with its body, its original topic and a reconsume count of 1.
func TestConsumeRetry(t *testing.T) {
	t.Parallel()
	const topic, n = "E2ERetry", 10
	ns, b := startWithTopic(t, topic, 2)
	// The broker creates a group's retry topic at the group's first
	// heartbeat, after the Go client looked up its route at start; the
	// client would find it only at its next route refresh (30 s) and
	// rebalance (20 s). Create it first, as for a group that existed.
	createTopic(t, b.addr, "%RETRY%cg-retry", 1)
	waitRoute(t, ns.addr, "%RETRY%cg-retry", b.name)
	p := newProducer(t, ns.addr, "pg-retry")
	sendN(t, p, topic, "retry-", n)

	var mu sync.Mutex
	deliveries := map[string][]int32{} // body -> reconsume times of each delivery
	var bad []string
	retried := newCollector()
	startPushConsumerFunc(t, ns.addr, "cg-retry", topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			result := consumer.ConsumeSuccess
			for _, m := range msgs {
				body := string(m.Body)
				deliveries[body] = append(deliveries[body], m.ReconsumeTimes)
				if m.Topic != topic {
					bad = append(bad, fmt.Sprintf("%s delivered with topic %q", body, m.Topic))
				}
				if m.ReconsumeTimes == 0 {
					result = consumer.ConsumeRetryLater
				} else {
					retried.add(body)
				}
			}
			return result, nil
		}, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	retried.waitDistinct(t, n, 60*time.Second)
	mu.Lock()
	defer mu.Unlock()
	for _, e := range bad {
		t.Error(e)
	}
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("retry-%d", i)
		d := deliveries[body]
		if len(d) < 2 || d[0] != 0 || d[1] != 1 {
			t.Errorf("%s delivered with reconsume times %v, want [0 1]", body, d)
		}
	}
}

// TestOrderlyTwoConsumers: a second orderly consumer joins a group whose
// first consumer holds the locks of all four queues. The Go client v2 does
// not unlock the queues a rebalance takes from it (its push consumer's
// removeUnnecessaryMessageQueue leaves orderly mode as a TODO) and stops
// renewing them, so the second consumer can lock them (LOCK_BATCH_MQ) only
// when the broker lets the first consumer's locks lapse, 60 s after their
// last renewal. Then both consume, every message arrives, and in each
// consumer the bodies of each key arrive in send order.
func TestOrderlyTwoConsumers(t *testing.T) {
	t.Parallel()
	const topic, group, keys = "E2EOrderly2", "cg-orderly2", 8
	ns, b := startWithTopic(t, topic, 4)

	type consumed struct {
		mu   sync.Mutex
		seqs map[string][]int
		errs []string
	}
	cs := []*consumed{{seqs: map[string][]int{}}, {seqs: map[string][]int{}}}
	all := newCollector()
	start := func(c *consumed) {
		startPushConsumerFunc(t, ns.addr, group, topic, consumer.MessageSelector{},
			func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				c.mu.Lock()
				for _, m := range msgs {
					key, seq, err := parseKeyed(string(m.Body))
					if err != nil {
						c.errs = append(c.errs, err.Error())
						continue
					}
					c.seqs[key] = append(c.seqs[key], seq)
				}
				c.mu.Unlock()
				for _, m := range msgs {
					all.add(string(m.Body))
				}
				return consumer.ConsumeSuccess, nil
			},
			consumer.WithConsumerOrder(true),
			// Lock (and renew) every second instead of every 20 s, so the
			// second consumer locks its queues as soon as they lapse.
			consumer.WithRebalanceLockInterval(time.Second),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	}
	start(cs[0])
	p := newProducer(t, ns.addr, "pg-orderly2", producer.WithQueueSelector(producer.NewHashQueueSelector()))
	rounds := 0
	send := func(n int) {
		for i := 0; i < n; i++ {
			for k := 0; k < keys; k++ {
				m := primitive.NewMessage(topic, []byte(fmt.Sprintf("key%d:%d", k, rounds)))
				m.WithShardingKey(fmt.Sprintf("key%d", k))
				if _, err := p.SendSync(context.Background(), m); err != nil {
					t.Fatalf("send: %v", err)
				}
			}
			rounds++
		}
	}
	send(5)
	all.waitDistinct(t, rounds*keys, 60*time.Second)

	start(cs[1])
	waitUntil(t, 20*time.Second, "the broker lists both consumers of the group", func() bool {
		return len(consumerIDs(t, b.addr, group)) == 2
	})
	received := func(c *consumed) int {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := 0
		for _, s := range c.seqs {
			n += len(s)
		}
		return n
	}
	firstBefore := received(cs[0])
	send(5)
	waitUntil(t, 100*time.Second, "the second consumer locks its queues and everything is consumed", func() bool {
		return received(cs[1]) > 0 && len(all.snapshot()) == rounds*keys
	})
	send(5)
	all.waitDistinct(t, rounds*keys, 60*time.Second)

	for i, c := range cs {
		c.mu.Lock()
		for _, e := range c.errs {
			t.Error(e)
		}
		for key, s := range c.seqs {
			for j := 1; j < len(s); j++ {
				if s[j] <= s[j-1] {
					t.Errorf("consumer %d received %s out of order: %v", i+1, key, s)
					break
				}
			}
		}
		c.mu.Unlock()
	}
	snap := all.snapshot()
	for r := 0; r < rounds; r++ {
		for k := 0; k < keys; k++ {
			if snap[fmt.Sprintf("key%d:%d", k, r)] == 0 {
				t.Errorf("key%d:%d not consumed", k, r)
			}
		}
	}
	if received(cs[0]) <= firstBefore {
		t.Error("the first orderly consumer received nothing after the second joined")
	}
}
