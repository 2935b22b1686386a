package pop

import "testing"

// The marks a slave keeps of what its pops handed out: a pop starts past
// the furthest one still invisible, or at the committed offset when that
// is further; a mark that ends earlier than a later one is dropped, so a
// message whose time ran out waits for the later ones; a read that
// started below its start (the queue created again) forgets the marks.
func TestHandedOutMarks(t *testing.T) {
	k := queueKey{"g", "T", 0}
	h := newHandedOut()
	check := func(what string, base int64, committed bool, now, want int64) {
		t.Helper()
		if got := h.from(k, base, committed, now); got != want {
			t.Fatalf("%s: start %d, want %d", what, got, want)
		}
	}
	check("nothing handed out", 3, true, 0, 3)
	h.handOut(k, 0, 0, 2, 100, 0) // [0,2) until 100
	h.handOut(k, 2, 2, 4, 50, 10) // [2,4) until 50
	check("past both", 0, true, 20, 4)
	check("the second ran out", 0, true, 60, 2)
	check("the committed offset further", 5, true, 60, 5)
	check("the committed offset passed the marks", 0, true, 60, 0)
	if len(h.queues) != 0 {
		t.Fatalf("queues left with nothing are kept: %v", h.queues)
	}

	h.handOut(k, 0, 0, 2, 50, 0)  // [0,2) until 50
	h.handOut(k, 2, 2, 4, 100, 0) // [2,4) until 100: the first is of no use
	if n := len(h.queues[k].marks); n != 1 {
		t.Fatalf("%d marks, want 1: %v", n, h.queues[k].marks)
	}
	check("the first ran out, not the second", 0, true, 60, 4)
	h.handOut(k, 4, 4, 4, 200, 60) // nothing read: no mark
	h.handOut(k, 4, 1, 2, 200, 60) // the queue ends below 4
	check("the queue created again", 0, true, 60, 2)

	// A group without a committed offset keeps its start until it has
	// one.
	h = newHandedOut()
	h.setInit(k, 7)
	if init, ok := h.initOf(k); !ok || init != 7 {
		t.Fatalf("remembered start %d %v", init, ok)
	}
	check("no committed offset", 7, false, 0, 7)
	if err := h.forgetStarts(func(queueKey) (bool, error) { return true, nil }); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.initOf(k); ok || len(h.queues) != 0 {
		t.Fatalf("start kept once the group has a committed offset: %v", h.queues)
	}
}
