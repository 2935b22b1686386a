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

// TestConsumeFromTimestamp: a new group consuming from a timestamp. The
// Go client asks the broker for the group's offset without
// setZeroIfNotFound, so RocketMQ answers 0 for a queue that still starts
// at 0 while its first message is in the page cache, and the timestamp is
// not used ("young" queues); once retention has taken a queue's first
// messages (DELETE_EXPIRED_COMMITLOG with fileReservedTime=0 and small
// segments) the answer is QUERY_NOT_FOUND, and the client searches the
// offset by the timestamp and receives only the messages stored at or
// after it.
func TestConsumeFromTimestamp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		sets  []string
		older bool // the messages before the timestamp are delivered too
	}{
		{"young-queue", nil, true},
		{"searched", []string{"mappedFileSizeCommitLog=65536", "fileReservedTime=0"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := startNamesrv(t)
			b := startBroker(t, ns, brokerOpts{sets: tc.sets})
			const topic, n = "E2EFromTime", 8
			createTopic(t, b.addr, topic, 2)
			waitRoute(t, ns.addr, topic, b.name)
			p := newProducer(t, ns.addr, "pg-fromtime")
			if !tc.older {
				// Fill more than two 64 KiB segments, then let retention
				// take the full ones: both queues no longer start at 0.
				sendN(t, p, topic, "old-", 800)
				expireQueueStarts(t, b.addr, topic, 2)
			}
			sendN(t, p, topic, "before-", n)
			// The timestamp has a resolution of a second: the next whole
			// second after the first batch, and the second batch after it.
			ts := time.Now().Truncate(time.Second).Add(time.Second)
			time.Sleep(time.Until(ts) + 300*time.Millisecond)
			sendN(t, p, topic, "after-", n)
			if tc.older {
				waitDispatched(t, b.addr, topic, 2, 2*n)
			} else {
				waitDispatched(t, b.addr, topic, 2, 800+2*n)
			}

			got := newCollector()
			startPushConsumer(t, ns.addr, "cg-fromtime", topic, consumer.MessageSelector{}, got,
				consumer.WithConsumeFromWhere(consumer.ConsumeFromTimestamp),
				consumer.WithConsumeTimestamp(ts.UTC().Format("20060102150405")))
			want := n
			if tc.older {
				want = 2 * n
			}
			got.waitDistinct(t, want, 30*time.Second)
			time.Sleep(time.Second)
			checkBodies(t, got, "after-", n)
			before := 0
			for body := range got.snapshot() {
				if strings.HasPrefix(body, "before-") || strings.HasPrefix(body, "old-") {
					before++
				}
			}
			if tc.older && before != n || !tc.older && before != 0 {
				t.Errorf("received %d of the %d messages stored before the timestamp, older delivered: %v", before, n, tc.older)
			}
		})
	}
}

// expireQueueStarts deletes the broker's expired CommitLog segments
// (DELETE_EXPIRED_COMMITLOG; with fileReservedTime=0 every full one) and
// waits until each of the topic's queues starts past 0.
func expireQueueStarts(t *testing.T, broker, topic string, queues int) {
	t.Helper()
	const codeDeleteExpiredCommitLog, codeGetMinOffset = 329, 31
	if r, err := rawInvoke(broker, codeDeleteExpiredCommitLog, nil, nil); err != nil || r.Code != respSuccess {
		t.Fatalf("DELETE_EXPIRED_COMMITLOG: %+v %v", r, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for q := 0; q < queues; q++ {
		for {
			r, err := rawInvoke(broker, codeGetMinOffset, map[string]string{"topic": topic, "queueId": fmt.Sprint(q)}, nil)
			if err != nil || r.Code != respSuccess {
				t.Fatalf("GET_MIN_OFFSET of %s/%d: %+v %v", topic, q, r, err)
			}
			if parseOffset(t, r) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("queue %s/%d still starts at 0 after DELETE_EXPIRED_COMMITLOG", topic, q)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestOrderlySuspendAndDLQ: an orderly push consumer suspends its queue on
// one message twice (ConsumeSuspendCurrentQueueAMoment) and gives up on
// another, a poison message that always fails: past
// WithMaxReconsumeTimes(2) the client sends it back with delay level -1,
// which RocketMQ's broker puts in %DLQ%group at once. Each key's messages
// still arrive in send order, no later message of a queue overtakes a
// suspended one, and the poison message lands in the DLQ.
func TestOrderlySuspendAndDLQ(t *testing.T) {
	t.Parallel()
	const topic, group, keys, perKey = "E2EOrderlySuspend", "cg-orderly-suspend", 4, 10
	ns, b := startWithTopic(t, topic, 2)
	const flaky, poison = "key0:3", "key1:5"

	var mu sync.Mutex
	var errs []string
	seqs := map[string][]int{}       // key -> sequence numbers in arrival order (successes and failures)
	attempts := map[string][]int32{} // body -> reconsume times of each attempt
	lastQ := map[int]string{}        // queue -> last body delivered
	got := newCollector()
	startPushConsumerFunc(t, ns.addr, group, topic, consumer.MessageSelector{},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			result := consumer.ConsumeSuccess
			for _, m := range msgs {
				body := string(m.Body)
				key, seq, err := parseKeyed(body)
				if err != nil {
					errs = append(errs, err.Error())
					continue
				}
				attempts[body] = append(attempts[body], m.ReconsumeTimes)
				if prev := lastQ[m.Queue.QueueId]; prev != "" && prev != body && (prev == flaky || prev == poison) &&
					len(attempts[prev]) < map[string]int{flaky: 3, poison: 4}[prev] {
					errs = append(errs, fmt.Sprintf("%s delivered while %s was suspended on queue %d", body, prev, m.Queue.QueueId))
				}
				lastQ[m.Queue.QueueId] = body
				if s := seqs[key]; len(s) == 0 || s[len(s)-1] != seq {
					seqs[key] = append(seqs[key], seq)
				}
				if body == poison || body == flaky && len(attempts[body]) <= 2 {
					result = consumer.SuspendCurrentQueueAMoment
				} else {
					got.add(body)
				}
			}
			if oc, ok := primitive.GetOrderlyCtx(ctx); ok && result != consumer.ConsumeSuccess {
				oc.SuspendCurrentQueueTimeMillis = 200
			}
			return result, nil
		},
		consumer.WithConsumerOrder(true),
		consumer.WithMaxReconsumeTimes(2),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))

	p := newProducer(t, ns.addr, "pg-orderly-suspend", producer.WithQueueSelector(producer.NewHashQueueSelector()))
	for i := 0; i < perKey; i++ {
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("key%d", k)
			m := primitive.NewMessage(topic, []byte(fmt.Sprintf("%s:%d", key, i)))
			m.WithShardingKey(key)
			if _, err := p.SendSync(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	got.waitDistinct(t, keys*perKey-1, 60*time.Second)

	dlq := "%DLQ%" + group
	waitUntil(t, 20*time.Second, "the poison message in the DLQ", func() bool {
		r, err := rawInvoke(b.addr, codeGetMaxOffset, map[string]string{"topic": dlq, "queueId": "0"}, nil)
		return err == nil && r.Code == respSuccess && r.ExtFields["offset"] == "1"
	})
	mu.Lock()
	for _, e := range errs {
		t.Error(e)
	}
	checkKeyOrder(t, seqs, keys, perKey)
	if a := fmt.Sprint(attempts[flaky]); a != "[0 1 2]" {
		t.Errorf("%s attempted with reconsume times %s, want [0 1 2]", flaky, a)
	}
	if a := fmt.Sprint(attempts[poison]); a != "[0 1 2 3]" {
		t.Errorf("%s attempted with reconsume times %s, want [0 1 2 3]", poison, a)
	}
	mu.Unlock()
	waitRoute(t, ns.addr, dlq, b.name)
	msgs := readAll(t, ns.addr, b.addr, b.name, "cg-orderly-dlq-reader", dlq, 1)
	if len(msgs) != 1 || string(msgs[0].Body) != poison || msgs[0].GetProperty(primitive.PropertyRetryTopic) != topic {
		var bodies []string
		for _, m := range msgs {
			bodies = append(bodies, fmt.Sprintf("%s (RETRY_TOPIC %q)", m.Body, m.GetProperty(primitive.PropertyRetryTopic)))
		}
		t.Errorf("DLQ holds %v, want %s from %s", bodies, poison, topic)
	}
	// The group's committed offsets pass the poison message.
	waitCommitted(t, b.addr, group, topic, 2, 20*time.Second)
}

// TestAllocationStrategies: two push consumers of one group with the same
// allocation strategy split the queues as the strategy computes from the
// broker's consumer list: every queue's messages go to exactly the
// consumer the strategy gives it, none to the other.
func TestAllocationStrategies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		strategy consumer.AllocateStrategy
	}{
		{"averagely-circle", consumer.AllocateByAveragelyCircle},
		{"consistent-hash", consumer.AllocateByConsistentHash(10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := startNamesrv(t)
			b := startBroker(t, ns, brokerOpts{})
			const topic, group, queues = "E2EAlloc", "cg-alloc", 6
			createTopic(t, b.addr, topic, queues)
			waitRoute(t, ns.addr, topic, b.name)
			type seen struct {
				mu     sync.Mutex
				queues map[int]int
			}
			names := []string{uniqueInstance(t), uniqueInstance(t)}
			seens := []*seen{{queues: map[int]int{}}, {queues: map[int]int{}}}
			all := newCollector()
			var probesMu sync.Mutex
			probedBy := map[string]int{} // probe body -> consumer index
			for i := range names {
				s := seens[i]
				startPushConsumerFunc(t, ns.addr, group, topic, consumer.MessageSelector{},
					func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
						for _, m := range msgs {
							if body := string(m.Body); strings.HasPrefix(body, "probe-") {
								probesMu.Lock()
								probedBy[body] = i
								probesMu.Unlock()
								continue
							}
							s.mu.Lock()
							s.queues[m.Queue.QueueId]++
							s.mu.Unlock()
							all.add(string(m.Body))
						}
						return consumer.ConsumeSuccess, nil
					},
					consumer.WithInstance(names[i]),
					consumer.WithStrategy(tc.strategy),
					consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
			}
			var cids []string
			waitUntil(t, 20*time.Second, "the broker lists both consumers", func() bool {
				cids = consumerIDs(t, b.addr, group)
				return len(cids) == 2
			})
			sort.Strings(cids)
			var mqAll []*primitive.MessageQueue
			for q := 0; q < queues; q++ {
				mqAll = append(mqAll, &primitive.MessageQueue{Topic: topic, BrokerName: b.name, QueueId: q})
			}
			owner := map[int]int{} // queue -> consumer index
			for i, name := range names {
				var cid string
				for _, c := range cids {
					if strings.HasSuffix(c, "@"+name) {
						cid = c
					}
				}
				if cid == "" {
					t.Fatalf("consumer %s not among %v", name, cids)
				}
				for _, mq := range tc.strategy(group, cid, mqAll, cids) {
					if o, dup := owner[mq.QueueId]; dup {
						t.Fatalf("strategy gives queue %d to consumers %d and %d", mq.QueueId, o, i)
					}
					owner[mq.QueueId] = i
				}
			}
			if len(owner) != queues {
				t.Fatalf("strategy assigns %v of %d queues", owner, queues)
			}
			// Both rebalance on the broker's notice: rounds of one probe a
			// queue until a round reaches only the queues' owners.
			mp := newProducer(t, ns.addr, "pg-alloc", producer.WithQueueSelector(producer.NewManualQueueSelector()))
			deadline := time.Now().Add(30 * time.Second)
			for round := 0; ; round++ {
				for q := 0; q < queues; q++ {
					m := primitive.NewMessage(topic, []byte(fmt.Sprintf("probe-%d-%d", round, q)))
					m.Queue = mqAll[q]
					if _, err := mp.SendSync(context.Background(), m); err != nil {
						t.Fatal(err)
					}
				}
				settled := true
				waitUntil(t, 20*time.Second, fmt.Sprintf("probe round %d consumed", round), func() bool {
					probesMu.Lock()
					defer probesMu.Unlock()
					for q := 0; q < queues; q++ {
						by, ok := probedBy[fmt.Sprintf("probe-%d-%d", round, q)]
						if !ok {
							return false
						}
						settled = settled && by == owner[q]
					}
					return true
				})
				if settled {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("probes still reach consumers other than their queues' owners after %d rounds", round+1)
				}
				time.Sleep(200 * time.Millisecond)
			}
			const perQueue = 5
			for q := 0; q < queues; q++ {
				for i := 0; i < perQueue; i++ {
					m := primitive.NewMessage(topic, []byte(fmt.Sprintf("q%d-%d", q, i)))
					m.Queue = mqAll[q]
					if _, err := mp.SendSync(context.Background(), m); err != nil {
						t.Fatal(err)
					}
				}
			}
			all.waitDistinct(t, queues*perQueue, 30*time.Second)
			time.Sleep(500 * time.Millisecond)
			for i, s := range seens {
				s.mu.Lock()
				for q, k := range s.queues {
					if owner[q] != i {
						t.Errorf("consumer %d received %d messages of queue %d, which the strategy gives consumer %d", i, k, q, owner[q])
					}
				}
				s.mu.Unlock()
			}
		})
	}
}

// TestPullFromWithSQL: a pull consumer subscribed with an SQL92 selector
// pulls (PullFrom) only the messages matching it, and the next begin
// offset passes the ones that do not match.
func TestPullFromWithSQL(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{"enablePropertyFilter=true"}})
	const topic, n = "E2EPullSQL", 20
	createTopic(t, b.addr, topic, 1)
	waitRoute(t, ns.addr, topic, b.name)
	p := newProducer(t, ns.addr, "pg-pull-sql")
	want := map[string]bool{}
	for i := 0; i < n; i++ {
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("sql-%d", i)))
		m.WithProperty("n", fmt.Sprint(i))
		color := []string{"red", "green", "blue"}[i%3]
		m.WithProperty("color", color)
		m.WithTag([]string{"TagA", "TagB"}[i%2])
		if i >= 5 && i <= 9 || color == "red" && i%2 == 1 {
			want[string(m.Body)] = true
		}
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	waitDispatched(t, b.addr, topic, 1, n)
	pc := startPullConsumer(t, ns.addr, "cg-pull-sql", topic, consumer.MessageSelector{Type: consumer.SQL92,
		Expression: "(n BETWEEN 5 AND 9) OR (color = 'red' AND TAGS = 'TagB')"})
	mq := &primitive.MessageQueue{Topic: topic, BrokerName: b.name, QueueId: 0}
	got := map[string]int{}
	next := int64(0)
	for next < n {
		res, err := pc.PullFrom(context.Background(), mq, next, 4)
		if err != nil {
			t.Fatalf("pull at %d: %v", next, err)
		}
		if res.Status != primitive.PullFound && res.Status != primitive.PullNoMsgMatched {
			t.Fatalf("pull at %d: status %d", next, res.Status)
		}
		for _, m := range res.GetMessageExts() {
			got[string(m.Body)]++
		}
		if res.NextBeginOffset <= next {
			t.Fatalf("pull at %d: next begin offset %d", next, res.NextBeginOffset)
		}
		next = res.NextBeginOffset
	}
	for body := range got {
		if !want[body] {
			t.Errorf("pulled %s, which does not match", body)
		}
	}
	for body := range want {
		if got[body] != 1 {
			t.Errorf("%s pulled %d times, want once", body, got[body])
		}
	}
}

// TestBroadcastingKeepsLocalOffsets: a broadcasting consumer keeps its
// offsets in a local file, not on the broker: started again with the same
// instance name it resumes after what it consumed (nothing twice), and
// the broker holds no offset of the group.
func TestBroadcastingKeepsLocalOffsets(t *testing.T) {
	t.Parallel()
	const topic, group = "E2EBroadcastLocal", "cg-broadcast-local"
	ns, b := startWithTopic(t, topic, 2)
	p := newProducer(t, ns.addr, "pg-broadcast-local")
	instance := uniqueInstance(t)
	got := newCollector()
	opts := []consumer.Option{consumer.WithConsumerModel(consumer.BroadCasting), consumer.WithInstance(instance),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset)}
	c := startPushConsumer(t, ns.addr, group, topic, consumer.MessageSelector{}, got, opts...)
	sendN(t, p, topic, "one-", 10)
	got.waitDistinct(t, 10, 30*time.Second)
	time.Sleep(500 * time.Millisecond)
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	sendN(t, p, topic, "two-", 10)
	c2 := startPushConsumer(t, ns.addr, group, topic, consumer.MessageSelector{}, got, opts...)
	got.waitDistinct(t, 20, 30*time.Second)
	time.Sleep(time.Second)
	for body, k := range got.snapshot() {
		if k != 1 {
			t.Errorf("%s received %d times", body, k)
		}
	}
	_ = c2
	for q := 0; q < 2; q++ {
		if off := committedOffset(t, b.addr, group, topic, q); off >= 0 {
			t.Errorf("broker holds offset %d of broadcasting group %s on queue %d", off, group, q)
		}
	}
}
