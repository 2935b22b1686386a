package broker

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// TestPopStateUnderConcurrentPopAckAndRevive runs four POP consumers at
// once over two queues and their retry queue, acking, batch-acking,
// changing invisible times (some short enough for revive to re-deliver
// during the run) and leaving messages in flight, then checks the pop
// state the broker answers from memory (the checkpoint cache) against a
// scan of the index: every in-flight message's checkpoint is found by its
// handle's name with exactly the offsets the scan shows, each queue's
// smallest in-flight offset is the scan's, and no committed offset passed
// a message still in flight.
func TestPopStateUnderConcurrentPopAckAndRevive(t *testing.T) {
	b := startTestBroker(t, nil)
	_, rc := popClient(b)
	const topic, group = "PopState", "g-state"
	for i := range 600 {
		mustSend(t, rc, topic, int32(i%2), "x", "")
	}
	b.caughtUp()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	runPopConsumers(ctx, b, 4, 9, func(c *popclient.Client, rng *rand.Rand) bool {
		res, err := c.Pop(ctx, popclient.PopRequest{Group: group, Topic: topic, QueueID: int32(rng.IntN(3)) - 1,
			MaxMsgNums: 1 + rng.IntN(8), InvisibleTime: time.Minute})
		if err != nil || res.Code != remoting.Success {
			return true
		}
		var batch []popclient.Message
		for _, m := range res.Messages {
			switch r := rng.IntN(20); {
			case r < 8:
				_, _ = c.Ack(ctx, group, m)
			case r < 12:
				batch = append(batch, m)
			case r < 15:
				_, _, _ = c.ChangeInvisibleTime(ctx, group, m, 100*time.Millisecond)
			case r < 16:
				_, _, _ = c.ChangeInvisibleTime(ctx, group, m, 2*time.Minute)
			}
		}
		for len(batch) > 0 {
			same := batch[:0:0]
			rest := batch[:0:0]
			for _, m := range batch {
				if m.RealTopic == batch[0].RealTopic {
					same = append(same, m)
				} else {
					rest = append(rest, m)
				}
			}
			_, _ = c.BatchAck(ctx, group, same[0].RealTopic, same)
			batch = rest
		}
		return true
	})

	// Let revive re-deliver what became visible, until nothing is due
	// within the next 30 s: from then on nothing changes the state.
	s := b.db.Pop()
	deadline := time.Now().Add(15 * time.Second)
	for {
		due := 0
		if err := s.DueCheckpoints(0, time.Now().Add(30*time.Second).UnixMilli(), 0, func(kvindex.Checkpoint) bool {
			due++
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if due == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d checkpoints still due after 15 s", due)
		}
		time.Sleep(50 * time.Millisecond)
	}

	type queueKey struct {
		topic string
		id    int32
	}
	type ckName struct {
		queueKey
		ck, popTime int64
	}
	scanned := map[ckName][]int64{}
	lowest := map[queueKey]int64{}
	if err := s.EachInFlight(func(r kvindex.InFlight) bool {
		if r.Group != group {
			return true
		}
		q := queueKey{r.Topic, r.QueueID}
		n := ckName{q, r.CKOffset, r.PopTime}
		scanned[n] = append(scanned[n], r.QueueOffset)
		if low, ok := lowest[q]; !ok || r.QueueOffset < low {
			lowest[q] = r.QueueOffset
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(scanned) == 0 {
		t.Fatal("nothing left in flight: the run exercised nothing")
	}
	for n, offs := range scanned {
		slices.Sort(offs)
		c, ok, err := s.Checkpoint(group, n.topic, n.id, n.ck, n.popTime)
		if err != nil || !ok || !slices.Equal(c.Offsets, offs) {
			t.Errorf("checkpoint %+v: %v %v %v, the scan shows offsets %v", n, c.Offsets, ok, err, offs)
		}
	}
	queues := []queueKey{{topic, 0}, {topic, 1}}
	for q := range lowest {
		if !slices.Contains(queues, q) {
			queues = append(queues, q)
		}
	}
	for _, q := range queues {
		committed, _, err := b.offsets.Get(group, q.topic, q.id)
		if err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.MinInFlight(group, q.topic, q.id, committed)
		want, wantOK := lowest[q]
		if err != nil || ok != wantOK || got != want {
			t.Errorf("queue %+v: smallest in flight %d %v %v, the scan shows %d %v", q, got, ok, err, want, wantOK)
		}
		if wantOK && committed > want {
			t.Errorf("queue %+v: committed offset %d passed in-flight offset %d", q, committed, want)
		}
	}
}
