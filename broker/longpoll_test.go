package broker

import (
	"sync/atomic"
	"testing"
	"time"
)

// A re-run a burst sent to a goroutine of its own (the queue full) is
// waited for by stop, as the queued ones are: the stores it reads close
// after stop returns.
func TestStopWaitsForReRunsBeyondTheQueue(t *testing.T) {
	h := &pullHolds{jobs: make(chan func()), all: map[*heldRequest]struct{}{}} // no queue, no workers
	var done atomic.Bool
	h.submit(func() {
		time.Sleep(200 * time.Millisecond)
		done.Store(true)
	})
	h.stop()
	if !done.Load() {
		t.Fatal("stop returned while a re-run was still running")
	}
	ran := false
	h.submit(func() { ran = true })
	time.Sleep(10 * time.Millisecond)
	if ran {
		t.Fatal("a re-run submitted after stop ran")
	}
}
