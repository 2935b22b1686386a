package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

// Four long-polling POP consumers of every queue of a topic, with
// invisible times short enough that revive keeps re-putting what they
// leave unacked into the group's pop-retry queue, never receive one
// stored record twice: each (queue, offset) of the topic and of its
// pop-retry topic is handed out once (a re-delivery is a new record), and
// every message's handle names the pop whose answer carried it. Messages
// are acked from their third delivery on, so the run ends.
func TestConcurrentPopsNeverShareARevivedMessage(t *testing.T) {
	b := startTestBroker(t, nil)
	_, rc := popClient(b)
	const topic, group, n = "CR", "g-cr", 400
	for i := range n {
		mustSend(t, rc, topic, int32(i%4), fmt.Sprintf("m%d", i), "")
	}
	b.caughtUp()
	type where struct {
		topic  string
		queue  int32
		offset int64
	}
	var mu sync.Mutex
	handedOut := map[where]int64{} // popTime of the answer
	acked := map[string]bool{}
	revived := 0
	var problems []string
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runPopConsumers(ctx, b, 4, 3, func(c *popclient.Client, rng *rand.Rand) bool {
		mu.Lock()
		done := len(acked) == n
		mu.Unlock()
		if done {
			return false
		}
		res, err := c.Pop(ctx, popclient.PopRequest{Group: group, Topic: topic, QueueID: -1, MaxMsgNums: 1 + rng.IntN(8),
			InvisibleTime: time.Duration(150+rng.IntN(150)) * time.Millisecond, PollTime: 200 * time.Millisecond})
		if err != nil || res.Code != remoting.Success {
			return true
		}
		var toAck []popclient.Message
		mu.Lock()
		for _, m := range res.Messages {
			k := where{m.RealTopic, m.QueueID, m.QueueOffset}
			if at, ok := handedOut[k]; ok {
				problems = append(problems, fmt.Sprintf("%s (%s/%d@%d) handed out by the pops of %d and %d", m.Body, k.topic, k.queue, k.offset, at, res.PopTime))
			}
			handedOut[k] = res.PopTime
			if m.Handle.PopTime != res.PopTime {
				problems = append(problems, fmt.Sprintf("%s in the answer of the pop of %d has the handle %q", m.Body, res.PopTime, m.Handle.String()))
			}
			if m.ReconsumeTimes > 0 {
				revived++
			}
			if m.ReconsumeTimes >= 2 || rng.IntN(10) < 5 {
				toAck = append(toAck, m)
			}
		}
		mu.Unlock()
		for _, m := range toAck {
			if code, err := c.Ack(ctx, group, m); err == nil && code == remoting.Success {
				mu.Lock()
				acked[string(m.Body)] = true
				mu.Unlock()
			}
		}
		return true
	})
	for _, p := range problems {
		t.Error(p)
	}
	if len(acked) != n {
		t.Fatalf("%d of %d messages acked before the deadline", len(acked), n)
	}
	if revived == 0 {
		t.Fatal("no message was revived: the run did not exercise the pop-retry queue")
	}
	t.Logf("%d records handed out, %d of them revived", len(handedOut), revived)
}

// runPopConsumers runs n POP consumers of b at once, each on its own
// connection with a random source seeded by its index and seed, calling
// step until ctx ends or step returns false; it returns when all ended.
func runPopConsumers(ctx context.Context, b *testBroker, n int, seed uint64, step func(c *popclient.Client, rng *rand.Rand) bool) {
	var wg sync.WaitGroup
	for w := range n {
		c, _ := popClient(b)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			for ctx.Err() == nil && step(c, rng) {
			}
		}()
	}
	wg.Wait()
}
