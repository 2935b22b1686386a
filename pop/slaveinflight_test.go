package pop

import "testing"

// A slave's count of what its pops handed out: an ack takes out only the
// offsets of the pop it names (by pop time) that are still counted, once
// each; a pop's offsets leave the count when its invisible time is over.
func TestSlaveInFlightCount(t *testing.T) {
	f := newSlaveInFlight(func(queueKey) {})
	defer f.close()
	k := queueKey{"g", "T", 0}
	on := heldOn{"T", 0}
	f.add(k, on, 100, 1_100, []int64{0, 1, 2}, 100)
	f.add(k, on, 200, 60_200, []int64{3, 4}, 200)
	count := func(now int64) int64 {
		t.Helper()
		n, _ := f.count(k, now)
		return n
	}
	if n := count(300); n != 5 {
		t.Fatalf("after two pops: %d in flight, want 5", n)
	}
	if f.ack(k, 999, []int64{0, 1}, 300) {
		t.Fatal("an ack of a pop the slave did not make took messages out")
	}
	if !f.ack(k, 100, []int64{1, 7}, 300) || f.ack(k, 100, []int64{1}, 300) {
		t.Fatal("an ack of offset 1 did not take it out once")
	}
	if n := count(300); n != 4 {
		t.Fatalf("after an ack: %d in flight, want 4", n)
	}
	if n := count(1_100); n != 2 {
		t.Fatalf("once the first pop's invisible time is over: %d in flight, want 2", n)
	}
	if f.ack(k, 100, []int64{0}, 1_100) {
		t.Fatal("an ack of an expired pop took messages out")
	}
	f.ack(k, 200, []int64{3, 4}, 1_200)
	if n := count(1_200); n != 0 {
		t.Fatalf("after every ack: %d in flight, want 0", n)
	}
	f.mu.Lock()
	left := len(f.queues)
	f.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d queues kept with nothing in flight", left)
	}
}
