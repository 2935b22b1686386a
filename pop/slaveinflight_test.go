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

// clear takes one queue out of the count (an orderly pop on the slave),
// forget every queue that matches (a deleted topic or group), each
// leaving the other queues counted and no entry behind.
func TestSlaveInFlightClearAndForget(t *testing.T) {
	f := newSlaveInFlight(func(queueKey) {})
	defer f.close()
	a, b, c := queueKey{"g", "T", 0}, queueKey{"g", "T", 1}, queueKey{"h", "U", 0}
	for _, k := range []queueKey{a, b, c} {
		f.add(k, heldOn{k.topic, k.queueID}, 100, 60_100, []int64{0, 1}, 100)
	}
	count := func(k queueKey) int64 {
		t.Helper()
		n, _ := f.count(k, 200)
		return n
	}
	f.armWake(a, 200)
	f.clear(a)
	if count(a) != 0 || count(b) != 2 || count(c) != 2 {
		t.Fatalf("after clearing %v: %d, %d, %d in flight, want 0, 2, 2", a, count(a), count(b), count(c))
	}
	gone := f.forget(func(k queueKey) bool { return k.topic == "T" })
	if len(gone) != 1 || gone[0] != b || count(b) != 0 || count(c) != 2 {
		t.Fatalf("forget of topic T: %v gone, %d and %d in flight, want [%v], 0 and 2", gone, count(b), count(c), b)
	}
	f.mu.Lock()
	left := len(f.queues)
	f.mu.Unlock()
	if left != 1 {
		t.Fatalf("%d queues kept, want only %v", left, c)
	}
}
