package kvindex

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/commitlog"
)

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

// A waiter with a match is woken only by an Arrival it accepts and stays
// registered through the others; an Arrival without codes (Notify, a wake
// that is no dispatch) wakes it whatever its match.
func TestNotifierMatchKeepsRejectingWaiters(t *testing.T) {
	n := NewNotifier()
	wants := func(code int64) func(Arrival) bool {
		return func(a Arrival) bool { return slices.Contains(a.Codes, code) }
	}
	var woken []string
	wake := func(name string) func() { return func() { woken = append(woken, name) } }
	n.WaitMatch("T", 0, wants(7), wake("q0 wants 7"))
	n.WaitMatch("T", AnyQueue, wants(8), wake("any wants 8"))
	n.WaitFunc("T", 0, wake("q0 takes all"))
	n.WaitMatch("T", 1, wants(7), wake("q1 wants 7"))

	n.NotifyArrival(Arrival{Topic: "T", QueueID: 0, First: 0, Next: 3, Codes: []int64{5, 6, 5}})
	if fmt.Sprint(woken) != "[q0 takes all]" || n.Waiting() != 3 {
		t.Fatalf("codes 5 and 6 woke %v, %d still waiting; want only the waiter without a match, 3 left", woken, n.Waiting())
	}
	woken = nil
	n.NotifyArrival(Arrival{Topic: "T", QueueID: 0, First: 3, Next: 6, Codes: []int64{9, 8, 7, 9}})
	slices.Sort(woken)
	if fmt.Sprint(woken) != "[any wants 8 q0 wants 7]" || n.Waiting() != 1 {
		t.Fatalf("codes 7 and 8 woke %v, %d still waiting", woken, n.Waiting())
	}
	woken = nil
	n.NotifyArrival(Arrival{Topic: "T", QueueID: 1, First: 0, Next: 1, Codes: []int64{8}})
	if len(woken) != 0 || n.Waiting() != 1 {
		t.Fatalf("code 8 on queue 1 woke %v", woken)
	}
	n.Notify("T", 1) // no codes: whatever the match
	if fmt.Sprint(woken) != "[q1 wants 7]" || n.Waiting() != 0 || !n.Idle() {
		t.Fatalf("a wake without codes woke %v, %d left", woken, n.Waiting())
	}
	if len(n.byQueue) != 0 || len(n.byTopic) != 0 {
		t.Fatal("empty sets kept in the maps")
	}
}

// A match sees each code once, however often the dispatch repeated it,
// and a cancelled waiter is never asked.
func TestNotifierMatchSeesCodesOnce(t *testing.T) {
	n := NewNotifier()
	var seen []int64
	w := n.WaitMatch("T", 0, func(a Arrival) bool { seen = append(seen, a.Codes...); return false }, func() {})
	n.NotifyArrival(Arrival{Topic: "T", QueueID: 0, Codes: []int64{3, 1, 3, 2, 1}})
	if fmt.Sprint(seen) != "[1 2 3]" {
		t.Fatalf("match saw %v, want each code once", seen)
	}
	w.Cancel()
	n.NotifyArrival(Arrival{Topic: "T", QueueID: 0, Codes: []int64{4}})
	if len(seen) != 3 || !n.Idle() {
		t.Fatalf("cancelled waiter asked: %v", seen)
	}
}

// The dispatcher tells the notifier each queue's new offsets and the tag
// codes of their entries while somebody waits, so a waiter for one tag
// sleeps through a run of other tags and wakes with its own.
func TestDispatcherTellsTagCodes(t *testing.T) {
	root := t.TempDir()
	cfg := commitlog.DefaultConfig(root)
	cfg.SegmentSize = 1 << 20
	n := NewNotifier()
	s := openStackWith(t, root, cfg, LayoutKV, "", func(o *DispatcherOptions) { o.Notifier = n })
	defer s.close(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var mu sync.Mutex
	arrivals := map[int32][]Arrival{}
	codes := map[int32]map[int64]bool{0: {}, 1: {}}
	record := func(a Arrival) bool {
		mu.Lock()
		defer mu.Unlock()
		a.Codes = slices.Clone(a.Codes)
		arrivals[a.QueueID] = append(arrivals[a.QueueID], a)
		for _, c := range a.Codes {
			codes[a.QueueID][c] = true
		}
		return false
	}
	watcher := n.WaitMatch("T", AnyQueue, record, func() { t.Error("a match that accepts nothing fired") })
	defer watcher.Cancel()
	var cWoken atomic.Int32
	n.WaitMatch("T", 0, func(a Arrival) bool { return slices.Contains(a.Codes, commitlog.TagsCode("c")) }, func() { cWoken.Add(1) })

	send := func(qid int32, tag string) {
		appendForInspect(t, s, "T", qid, map[string]string{commitlog.PropertyTags: tag})
	}
	for i := 0; i < 50; i++ {
		send(0, "a")
		send(0, "b")
	}
	send(1, "d")
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if cWoken.Load() != 0 {
		t.Fatal("the waiter for tag c woke on tags a, b and d")
	}
	send(0, "a")
	send(0, "c")
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if cWoken.Load() != 1 {
		t.Fatalf("the waiter for tag c woke %d times, want once", cWoken.Load())
	}

	mu.Lock()
	defer mu.Unlock()
	want := map[int32][]string{0: {"a", "b", "c"}, 1: {"d"}}
	for q, tags := range want {
		if len(codes[q]) != len(tags) {
			t.Errorf("queue %d: codes %v, want those of %v", q, codes[q], tags)
		}
		for _, tag := range tags {
			if !codes[q][commitlog.TagsCode(tag)] {
				t.Errorf("queue %d: code of %s never told", q, tag)
			}
		}
		next := int64(0)
		for _, a := range arrivals[q] {
			if a.First != next || a.Next <= a.First {
				t.Fatalf("queue %d: arrivals %v do not cover its offsets in turn", q, arrivals[q])
			}
			next = a.Next
		}
	}
	if last := arrivals[0][len(arrivals[0])-1]; last.Next != 102 {
		t.Errorf("queue 0 told up to %d, want 102", last.Next)
	}
}

// A waiter that registers while a batch is being indexed, which began
// with nobody waiting (so it collected no codes record by record), is
// still told the batch's codes: a tag it rejects does not wake it.
func TestDispatcherTellsCodesToWaiterOfRunningBatch(t *testing.T) {
	root := t.TempDir()
	cfg := commitlog.DefaultConfig(root)
	cfg.SegmentSize = 1 << 20
	n := NewNotifier()
	var woken atomic.Int32
	registered := false
	// The hook runs on the dispatcher's goroutine in the middle of the
	// batch of the record it sees.
	hook := HookFunc(func(*pebble.Batch, *commitlog.Message) error {
		if !registered {
			registered = true
			n.WaitMatch("T", 0, func(a Arrival) bool { return slices.Contains(a.Codes, commitlog.TagsCode("c")) }, func() { woken.Add(1) })
		}
		return nil
	})
	s := openStackWith(t, root, cfg, LayoutKV, "", func(o *DispatcherOptions) {
		o.Notifier = n
		o.Hooks = map[string]Hook{"T": hook}
	})
	defer s.close(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	appendForInspect(t, s, "T", 0, map[string]string{commitlog.PropertyTags: "a"})
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if n.Waiting() != 1 || woken.Load() != 0 {
		t.Fatalf("a message of tag a woke the waiter for tag c registered during its batch (waiting %d)", n.Waiting())
	}
	appendForInspect(t, s, "T", 0, map[string]string{commitlog.PropertyTags: "c"})
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if woken.Load() != 1 || n.Waiting() != 0 {
		t.Fatalf("the waiter for tag c woken %d times by a message of tag c", woken.Load())
	}
}
