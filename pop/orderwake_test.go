package pop

import (
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
)

func TestLockFreeAt(t *testing.T) {
	msgs := func(next ...int64) []kvindex.OrderMessage {
		var out []kvindex.OrderMessage
		for i, n := range next {
			out = append(out, kvindex.OrderMessage{QueueOffset: int64(i), NextVisibleAt: n})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		st   kvindex.OrderState
		want int64
	}{
		{"the batch's deadline", kvindex.OrderState{PopTime: 1000, InvisibleTime: 500, Messages: msgs(0, 0)}, 1500},
		{"a message extended past it", kvindex.OrderState{PopTime: 1000, InvisibleTime: 500, Messages: msgs(0, 9000)}, 9000},
		{"a message shortened below it", kvindex.OrderState{PopTime: 1000, InvisibleTime: 500, Messages: msgs(1200, 1100)}, 1200},
		{"acknowledged messages do not count", kvindex.OrderState{PopTime: 1000, InvisibleTime: 500, Acked: 0b10, Messages: msgs(0, 9000)}, 1500},
		{"all acknowledged", kvindex.OrderState{PopTime: 1000, InvisibleTime: 500, Acked: 0b11, Messages: msgs(0, 0)}, 0},
		{"no invisible time known", kvindex.OrderState{PopTime: 1000, Messages: msgs(0, 0)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lockFreeAt(&tc.st); got != tc.want {
				t.Fatalf("lockFreeAt = %d, want %d", got, tc.want)
			}
		})
	}
}

// The timer of a queue fires once, for its last deadline; a cleared or
// closed one does not fire.
func TestOrderWakes(t *testing.T) {
	woken := make(chan string, 16)
	w := newOrderWakes(func(topic, _ string, queueID int32) { woken <- topic })
	batch := func(topic string, deadline int64) *kvindex.OrderState {
		return &kvindex.OrderState{Group: "g", Topic: topic, PopTime: deadline, InvisibleTime: 1, Messages: []kvindex.OrderMessage{{}}}
	}
	now := time.Now().UnixMilli()
	w.set(batch("replaced", now+60_000), now)
	w.set(batch("replaced", now+20), now) // an earlier deadline replaces the first
	w.set(batch("cleared", now+20), now)
	w.clear("g", "cleared", 0)
	w.set(batch("past", now-1000), now) // already free: wakes at once
	got := map[string]int{}
	deadline := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case topic := <-woken:
			got[topic]++
		case <-deadline:
			t.Fatalf("woken %v, want replaced and past", got)
		}
	}
	if n := w.armedQueues(); n != 0 {
		t.Fatalf("%d timers still armed after they fired", n)
	}
	w.set(batch("closed", now+20), now)
	w.close()
	w.set(batch("after close", now), now)
	time.Sleep(100 * time.Millisecond)
	close(woken)
	for topic := range woken {
		got[topic]++
	}
	if len(got) != 2 || got["replaced"] != 1 || got["past"] != 1 {
		t.Fatalf("woken %v, want replaced and past once each", got)
	}
}

// armedQueues returns how many queues have a timer armed.
func (w *orderWakes) armedQueues() int { return w.timers.armed() }
