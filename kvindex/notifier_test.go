package kvindex

import "testing"

func fired(w *Waiter) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

func TestNotifierWakesQueueAndTopicWaiters(t *testing.T) {
	n := NewNotifier()
	q0 := n.Wait("T", 0)
	q1 := n.Wait("T", 1)
	anyQ := n.Wait("T", AnyQueue)
	other := n.Wait("U", 0)
	if n.Waiting() != 4 {
		t.Fatalf("waiting %d, want 4", n.Waiting())
	}
	n.Notify("T", 0)
	if !fired(q0) || !fired(anyQ) {
		t.Fatal("queue 0 and topic waiters not woken")
	}
	if fired(q1) || fired(other) {
		t.Fatal("unrelated waiters woken")
	}
	if n.Waiting() != 2 {
		t.Fatalf("waiting %d after notify, want 2", n.Waiting())
	}
	q0.Cancel() // after firing: harmless
	q1.Cancel()
	q1.Cancel()
	if n.Waiting() != 1 {
		t.Fatalf("waiting %d after cancel, want 1", n.Waiting())
	}
	n.Notify("T", 1)
	if fired(q1) {
		t.Fatal("cancelled waiter woken")
	}
	n.Notify("U", 0)
	if !fired(other) || n.Waiting() != 0 {
		t.Fatalf("other not woken or waiters left: %d", n.Waiting())
	}
	if len(n.byQueue) != 0 || len(n.byTopic) != 0 {
		t.Fatal("empty sets kept in the maps")
	}
}

func TestNotifierCallbacks(t *testing.T) {
	n := NewNotifier()
	calls := 0
	w := n.WaitFunc("T", 2, func() { calls++ })
	n.Notify("T", 1)
	if calls != 0 {
		t.Fatal("callback of another queue ran")
	}
	n.Notify("T", 2)
	n.Notify("T", 2)
	if calls != 1 {
		t.Fatalf("callback ran %d times, want once", calls)
	}
	w.Cancel()
	w2 := n.WaitFunc("T", AnyQueue, func() { calls++ })
	w2.Cancel()
	n.Notify("T", 5)
	if calls != 1 || n.Waiting() != 0 {
		t.Fatalf("cancelled callback ran or leaked: calls %d waiting %d", calls, n.Waiting())
	}
}
