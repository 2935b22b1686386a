package broker

import (
	"testing"
	"time"
)

// A held cold pull is run again by the first scan at least coldHoldFor
// after it was held, not before; a full queue refuses more; release runs
// the rest at once and refuses new ones.
func TestColdPullHoldsScanAndRelease(t *testing.T) {
	h := newColdPullHolds(func() bool { return true })
	now := time.UnixMilli(1_700_000_000_000)
	h.now = func() time.Time { return now }
	ran := map[string]int{}
	if !h.hold(func() { ran["early"]++ }) {
		t.Fatal("hold refused")
	}
	now = now.Add(2 * time.Second)
	if !h.hold(func() { ran["late"]++ }) {
		t.Fatal("hold refused")
	}
	now = now.Add(time.Second - time.Millisecond)
	h.scan()
	if len(ran) != 0 {
		t.Fatalf("run before %v: %v", coldHoldFor, ran)
	}
	now = now.Add(time.Millisecond)
	h.scan()
	if ran["early"] != 1 || ran["late"] != 0 || h.size() != 1 {
		t.Fatalf("after %v: ran %v, %d held", coldHoldFor, ran, h.size())
	}
	for h.size() < coldHoldMax {
		if !h.hold(func() { ran["filler"]++ }) {
			t.Fatalf("hold refused at %d", h.size())
		}
	}
	if h.hold(func() {}) {
		t.Fatalf("a hold beyond %d taken", coldHoldMax)
	}
	h.release()
	if ran["late"] != 1 || ran["filler"] != coldHoldMax-1 || h.size() != 0 {
		t.Fatalf("release ran %v, %d held", ran, h.size())
	}
	if h.hold(func() {}) {
		t.Fatal("a hold taken after release")
	}
}
