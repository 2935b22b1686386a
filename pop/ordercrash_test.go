package pop_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

const (
	orderGroup     = "crash-og"
	orderTopic     = "CrashOrderT"
	orderQueues    = 4
	orderPerQueue  = 150
	orderInvisible = 1500 * time.Millisecond
)

// orderDelivery is one message of an answered orderly pop, as the test
// saw it.
type orderDelivery struct {
	batch  *orderBatch
	offset int64
	msg    popclient.Message
	// deadline is the earliest the broker may hand the message out
	// again: the pop's, or the one an answered change of invisible time
	// gave.
	deadline int64
	// ackSentAt is when an ack of this delivery was sent (0: never), and
	// ackedAt when its SUCCESS answer arrived (0: never).
	ackSentAt, ackedAt int64
}

// orderBatch is one answered orderly pop of one queue.
type orderBatch struct {
	queue int32
	// popTime is the broker's time the pop started at (its messages'
	// deadlines count from it); answeredAt when the test had its answer.
	// The broker read the queue between the two.
	popTime, answeredAt int64
	messages            []*orderDelivery
}

// orderLedger is the test's record of orderly batches, acks and changes.
type orderLedger struct {
	mu      sync.Mutex
	batches []*orderBatch
}

func (l *orderLedger) add(b *orderBatch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batches = append(l.batches, b)
}

// stamp sets one of a delivery's times under the ledger's lock.
func (l *orderLedger) stamp(field *int64, at int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*field = at
}

// consumeOrderly pops batches of random queues as an orderly consumer
// and, unless ackAll, acks all of a batch, a prefix of it, all but its
// first message after moving that one's deadline (always for its first
// batch), or nothing, until stop ends or the connection fails.
func consumeOrderly(stop context.Context, addr, brokerName string, l *orderLedger, rng *rand.Rand, ackAll bool) {
	ctx := context.Background()
	rc, err := remoting.Dial(ctx, addr, remoting.ClientOptions{})
	if err != nil {
		return
	}
	defer rc.Close()
	c := popclient.New(rc, brokerName)
	now := func() int64 { return time.Now().UnixMilli() }
	ack := func(d *orderDelivery) bool {
		l.stamp(&d.ackSentAt, now())
		code, err := c.Ack(ctx, orderGroup, d.msg)
		if err != nil {
			return false
		}
		if code == remoting.Success {
			l.stamp(&d.ackedAt, now())
		}
		return true
	}
	firstBatch := true
	for stop.Err() == nil {
		inv := orderInvisible
		if ackAll {
			inv = 5 * time.Second
		}
		q := int32(rng.IntN(orderQueues))
		res, err := c.Pop(ctx, popclient.PopRequest{Group: orderGroup, Topic: orderTopic, QueueID: q, MaxMsgNums: 8,
			InvisibleTime: inv, PollTime: 200 * time.Millisecond, Order: true})
		if err != nil {
			return
		}
		if len(res.Messages) == 0 {
			continue
		}
		b := &orderBatch{queue: q, popTime: res.PopTime, answeredAt: now()}
		for _, m := range res.Messages {
			b.messages = append(b.messages, &orderDelivery{batch: b, offset: m.QueueOffset, msg: m, deadline: res.PopTime + res.InvisibleTime})
		}
		l.add(b)
		toAck := b.messages
		if !ackAll {
			r := rng.IntN(10)
			if firstBatch {
				// Every consumer's first batch moves a deadline: a loaded
				// machine may leave a kill round only a few batches, and
				// the test must exercise the change of invisible time.
				r, firstBatch = 1, false
			}
			switch {
			case r == 0: // let the whole batch expire
				toAck = nil
			case r < 3: // hold the first message longer, ack the rest
				first := b.messages[0]
				code, h, err := c.ChangeInvisibleTime(ctx, orderGroup, first.msg, 2*orderInvisible)
				if err != nil {
					return
				}
				if code == remoting.Success {
					l.stamp(&first.deadline, h.PopTime+h.InvisibleTime)
				}
				toAck = b.messages[1:]
			case r < 5: // a prefix
				toAck = b.messages[:rng.IntN(len(b.messages))]
			}
		}
		for _, d := range toAck {
			if !ack(d) {
				return
			}
		}
	}
}

// A child broker under an orderly POP load (pops, acks, invisible-time
// changes) is SIGKILLed repeatedly. Afterwards, per queue:
//   - no message is lost: each was acked by the test in the end (or its
//     last delivery's ack was sent when a kill cut off the answer);
//   - a batch starts only past messages whose acks were sent before it;
//   - while a seen batch holds a message unacked before its deadline, the
//     queue gives no other batch: the lock outlives kills;
//   - once every message up to one had an ack answered while its batch
//     still held the queue, that message is never delivered again.
//
// Both indexWalSync modes, as the unordered crash test.
func TestOrderlyPopSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	for _, mode := range []string{configs.IndexWALSyncAlways, configs.IndexWALSyncInterval} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv(childEnvWALSync, mode)
			orderlyPopSurvivesSIGKILL(t)
		})
	}
}

func orderlyPopSurvivesSIGKILL(t *testing.T) {
	l := &orderLedger{}
	runCrashLoad(t, crashLoad{
		seed: 11, topic: orderTopic, queues: orderQueues, messages: orderQueues * orderPerQueue,
		body: func(i int) string { return fmt.Sprintf("q%d-%d", i%orderQueues, i/orderQueues) },
		consume: func(stop context.Context, addr string, rng *rand.Rand, ackAll bool) {
			consumeOrderly(stop, addr, crashBrokerName, l, rng, ackAll)
		},
		// Batches left unacked come back once expired.
		drained: func() bool { return allOrderAcked(l) }, drainFor: 60 * time.Second,
		verify: func(t *testing.T) []string { verifyOrderLedger(t, l); return nil },
	})
}

// byOffset groups a ledger's deliveries by queue and offset.
func (l *orderLedger) byOffset() map[int32]map[int64][]*orderDelivery {
	out := map[int32]map[int64][]*orderDelivery{}
	for _, b := range l.batches {
		if out[b.queue] == nil {
			out[b.queue] = map[int64][]*orderDelivery{}
		}
		for _, d := range b.messages {
			out[b.queue][d.offset] = append(out[b.queue][d.offset], d)
		}
	}
	return out
}

func allOrderAcked(l *orderLedger) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := l.byOffset()
	for q := int32(0); q < orderQueues; q++ {
		for off := int64(0); off < orderPerQueue; off++ {
			if !orderAckedSome(seen[q][off]) {
				return false
			}
		}
	}
	return true
}

// orderAckedSome reports whether a message is done with: an ack of one
// of its deliveries was answered, or one of its last delivery was sent
// (a kill may have cut off the answer to an ack the broker applied).
func orderAckedSome(ds []*orderDelivery) bool {
	for _, d := range ds {
		if d.ackedAt != 0 {
			return true
		}
	}
	return len(ds) > 0 && ds[len(ds)-1].ackSentAt != 0
}

func verifyOrderLedger(t *testing.T, l *orderLedger) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := l.byOffset()
	batchesOf := map[int32][]*orderBatch{}
	for _, b := range l.batches {
		batchesOf[b.queue] = append(batchesOf[b.queue], b)
	}
	expired, changed := 0, 0
	for q := int32(0); q < orderQueues; q++ {
		failedBefore := t.Failed()
		defer func() {
			if t.Failed() && !failedBefore {
				logQueueHistory(t, l, q)
			}
		}()
		// No loss.
		for off := int64(0); off < orderPerQueue; off++ {
			ds := seen[q][off]
			if !orderAckedSome(ds) {
				t.Errorf("queue %d offset %d lost: %d deliveries, no ack answered, none sent for the last", q, off, len(ds))
			}
			for _, d := range ds {
				if want := fmt.Sprintf("q%d-%d", q, off); string(d.msg.Body) != want {
					t.Fatalf("queue %d offset %d delivered body %q, want %q", q, off, d.msg.Body, want)
				}
			}
		}
		// firstAckSent[o]: the first time an ack of offset o was sent.
		firstAckSent := map[int64]int64{}
		for off, ds := range seen[q] {
			for _, d := range ds {
				if d.ackSentAt != 0 && (firstAckSent[off] == 0 || d.ackSentAt < firstAckSent[off]) {
					firstAckSent[off] = d.ackSentAt
				}
			}
		}
		bs := batchesOf[q]
		sort.Slice(bs, func(i, j int) bool { return bs[i].popTime < bs[j].popTime })
		for i, b := range bs {
			// A batch starts past messages whose acks were sent before it
			// was answered.
			start := b.messages[0].offset
			for off := int64(0); off < start; off++ {
				if sent := firstAckSent[off]; sent == 0 || sent > b.answeredAt {
					t.Errorf("queue %d: batch at %d starts at offset %d, but offset %d had no ack sent before it (first sent at %d)",
						q, b.popTime, start, off, sent)
					break
				}
			}
			// No other batch while this one holds a message before its
			// deadline (the broker compares with the pop's popTime) and
			// no ack of it was sent (before the other was answered).
			for _, later := range bs[i+1:] {
				for _, d := range b.messages {
					if (d.ackSentAt == 0 || d.ackSentAt > later.answeredAt) && later.popTime < d.deadline {
						t.Errorf("queue %d: batch at %d handed out while the batch at %d held offset %d unacked until %d",
							q, later.popTime, b.popTime, d.offset, d.deadline)
					}
				}
			}
			for _, d := range b.messages {
				if d.ackSentAt == 0 {
					expired++
				}
				if d.deadline != b.popTime+int64(orderInvisible/time.Millisecond) && d.deadline != b.popTime+5000 {
					changed++
				}
			}
		}
		// The committed offset passes o when, in one batch, o and every
		// message of the batch before it had an ack answered while the
		// batch still held the queue (before its deadline: no other batch
		// could have replaced it, and a replaced batch's acks above the
		// committed offset are forgotten). committedBy is when it passed
		// o and every offset before.
		invisibleMs := int64(orderInvisible / time.Millisecond)
		committedBy := int64(0)
		for off := int64(0); off < orderPerQueue; off++ {
			passed := int64(-1)
			for _, b := range bs {
				at := int64(-1)
				for _, d := range b.messages {
					if d.offset > off {
						break
					}
					if d.ackedAt == 0 || d.ackedAt >= b.popTime+invisibleMs {
						at = -1
						break
					}
					at = max(at, d.ackedAt)
				}
				if at >= 0 && b.messages[0].offset <= off && b.messages[len(b.messages)-1].offset >= off && (passed < 0 || at < passed) {
					passed = at
				}
			}
			if passed < 0 {
				break
			}
			committedBy = max(committedBy, passed)
			for _, d := range seen[q][off] {
				if d.batch.popTime > committedBy {
					t.Errorf("queue %d offset %d delivered at %d although the committed offset passed it by %d",
						q, off, d.batch.popTime, committedBy)
				}
			}
		}
	}
	if expired == 0 || changed == 0 {
		t.Errorf("%d deliveries expired unacked and %d had their invisible time changed: the test did not exercise both", expired, changed)
	}
	t.Logf("%d batches, %d deliveries left to expire, %d with a changed invisible time", len(l.batches), expired, changed)
}

// logQueueHistory logs every batch of queue q the test saw.
func logQueueHistory(t *testing.T, l *orderLedger, q int32) {
	for _, b := range l.batches {
		if b.queue != q {
			continue
		}
		line := fmt.Sprintf("queue %d batch at %d:", q, b.popTime)
		for _, d := range b.messages {
			line += fmt.Sprintf(" [%d deadline %d sent %d acked %d count %d]", d.offset, d.deadline, d.ackSentAt, d.ackedAt, d.msg.OrderCount)
		}
		t.Log(line)
	}
}
