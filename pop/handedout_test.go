package pop

import (
	"testing"
	"time"
)

// The marks a slave keeps of what its pops handed out: a pop starts past
// the furthest one still invisible, or at the committed offset when that
// is further; a mark that ends earlier than a later one is dropped, so a
// message whose time ran out waits for the later ones; a read that
// started below its start (the queue created again) forgets the marks.
func TestHandedOutMarks(t *testing.T) {
	k := queueKey{"g", "T", 0}
	h := newHandedOut(nil, nil)
	check := func(what string, base int64, committed bool, now, want int64) {
		t.Helper()
		if got := h.from(k, base, committed, now); got != want {
			t.Fatalf("%s: start %d, want %d", what, got, want)
		}
	}
	check("nothing handed out", 3, true, 0, 3)
	h.handOut(k, heldOn{}, 0, 0, 2, 100, 0) // [0,2) until 100
	h.handOut(k, heldOn{}, 2, 2, 4, 50, 10) // [2,4) until 50
	check("past both", 0, true, 20, 4)
	check("the second ran out", 0, true, 60, 2)
	check("the committed offset further", 5, true, 60, 5)
	check("the committed offset passed the marks", 0, true, 60, 0)
	if len(h.queues) != 0 {
		t.Fatalf("queues left with nothing are kept: %v", h.queues)
	}

	h.handOut(k, heldOn{}, 0, 0, 2, 50, 0)  // [0,2) until 50
	h.handOut(k, heldOn{}, 2, 2, 4, 100, 0) // [2,4) until 100: the first is of no use
	if n := len(h.queues[k].marks); n != 1 {
		t.Fatalf("%d marks, want 1: %v", n, h.queues[k].marks)
	}
	check("the first ran out, not the second", 0, true, 60, 4)
	h.handOut(k, heldOn{}, 4, 4, 4, 200, 60) // nothing read: no mark
	h.handOut(k, heldOn{}, 4, 1, 2, 200, 60) // the queue ends below 4
	check("the queue created again", 0, true, 60, 2)
}

// The timer of a queue with marks wakes the pops held on it when its
// earliest mark runs out, when a pop would start earlier again, and then
// at the next mark's end; a pop-retry topic's wakes every queue of the
// popped topic. Closed, it wakes nobody.
func TestHandedOutWakesAtMarkEnds(t *testing.T) {
	woken := make(chan heldOn, 4)
	h := newHandedOut(func(topic, _ string, queueID int32) { woken <- heldOn{topic, queueID} }, nil)
	now := time.Now().UnixMilli()
	k := queueKey{"g", "T", 3}
	h.handOut(k, heldOn{"T", 3}, 0, 0, 2, now+400, now) // [0,2) until +400
	h.handOut(k, heldOn{"T", 3}, 2, 2, 4, now+100, now) // [2,4) until +100
	wait := func(what string, want heldOn, base, start int64) {
		t.Helper()
		select {
		case got := <-woken:
			if got != want {
				t.Fatalf("%s: woke %+v, want %+v", what, got, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no wake", what)
		}
		if got := h.from(k, base, true, time.Now().UnixMilli()); got != start {
			t.Fatalf("%s: a pop starts at %d, want %d", what, got, start)
		}
	}
	wait("the second mark ran out", heldOn{"T", 3}, 0, 2)
	wait("the first mark ran out", heldOn{"T", 3}, 0, 0)
	if len(h.queues) != 0 {
		t.Fatalf("queues left with nothing are kept: %v", h.queues)
	}

	retry := queueKey{"g", RetryTopicV2("T", "g"), 0}
	h.handOut(retry, heldOn{"T", -1}, 0, 0, 1, time.Now().UnixMilli()+50, time.Now().UnixMilli())
	select {
	case got := <-woken:
		if got != (heldOn{"T", -1}) {
			t.Fatalf("pop-retry mark ran out: woke %+v, want every queue of T", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("pop-retry mark ran out: no wake")
	}

	h.handOut(k, heldOn{"T", 3}, 0, 0, 2, time.Now().UnixMilli()+50, time.Now().UnixMilli())
	h.close()
	select {
	case got := <-woken:
		t.Fatalf("closed, and woke %+v", got)
	case <-time.After(300 * time.Millisecond):
	}
}
