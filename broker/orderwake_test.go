package broker

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
)

// A consumer held on an orderly queue that another consumer's batch locks
// gets the batch when the lock runs out, not at the end of its poll time
// (enableNotifyAfterPopOrderLockRelease, on by default). Off, it sleeps
// to the end of its poll time.
func TestHeldOrderlyPopWokenWhenItsLockRunsOut(t *testing.T) {
	for _, notify := range []bool{true, false} {
		t.Run("notify="+strconv.FormatBool(notify), func(t *testing.T) {
			b := startTestBroker(t, map[string]string{"enableNotifyAfterPopOrderLockRelease": strconv.FormatBool(notify)})
			c, req := lockOrderlyQueue(t, b, 300*time.Millisecond)
			held := req
			held.InvisibleTime = time.Minute
			held.PollTime = 20 * time.Second
			if !notify {
				held.PollTime = 2 * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			res, err := c.Pop(ctx, held)
			if err != nil {
				t.Fatalf("held pop of the locked queue: %v (not woken when the lock ran out)", err)
			}
			if notify && fmt.Sprint(bodies(res.Messages)) != "[m0 m1]" {
				t.Fatalf("held pop woken with %d %v, want the batch again", res.Code, bodies(res.Messages))
			}
			if !notify && time.Since(start) < held.PollTime-100*time.Millisecond {
				t.Fatalf("held pop answered after %v with %v: woken although notifications are off", time.Since(start), bodies(res.Messages))
			}
			// Woken once, by the end of the lock or of the poll time: a
			// held pop does not wake itself for messages the lock keeps
			// from it (it did, about 100,000 times a second).
			if n := b.popHolds.reruns.Load(); n > 3 {
				t.Fatalf("the held pop was re-run %d times", n)
			}
		})
	}
}

// A batch in flight when the broker stopped frees its queue on time after
// the restart too.
func TestHeldOrderlyPopWokenAfterARestart(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	_, req := lockOrderlyQueue(t, b, 2*time.Second)
	b.stop()

	b = startTestBrokerAt(t, store, nil)
	c, _ := popClient(b)
	held := req
	held.PollTime = 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Pop(ctx, held)
	if err != nil || fmt.Sprint(bodies(res.Messages)) != "[m0 m1]" {
		t.Fatalf("held pop after the restart: %v %v (not woken when the lock ran out)", err, bodies(res.Messages))
	}
}

// lockOrderlyQueue sends two messages to queue 0 of topic OW and pops them
// as an orderly batch of group g with the invisible time given, which
// locks the queue; it returns the client and the request.
func lockOrderlyQueue(t *testing.T, b *testBroker, invisible time.Duration) (*popclient.Client, popclient.PopRequest) {
	t.Helper()
	c, rc := popClient(b)
	sendBodies(t, rc, "OW", 2)
	b.caughtUp()
	req := popclient.PopRequest{Group: "g", Topic: "OW", QueueID: 0, MaxMsgNums: 2, InvisibleTime: invisible, Order: true}
	if first := mustPop(t, c, req); fmt.Sprint(bodies(first.Messages)) != "[m0 m1]" {
		t.Fatalf("first batch %v", bodies(first.Messages))
	}
	return c, req
}
