package pop

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
)

// A queue cut below the group's pop position (its tail lost) takes the
// position back to its end, with a warning: the messages put there next
// are popped, not skipped.
func TestPopFollowsACutQueueBackToItsEnd(t *testing.T) {
	h := newStageHarness(t, 4)
	if got := h.popAll(t, 60_000); len(got) != 4 {
		t.Fatalf("first pop got %d messages, want 4", len(got))
	}
	var logged bytes.Buffer
	h.svc.log = zerolog.New(&logged)
	h.broker.queues.mu.Lock()
	h.broker.queues.queues[queueName("T", 0)] = h.broker.queues.queues[queueName("T", 0)][:2]
	h.broker.queues.mu.Unlock()
	if got := h.popAll(t, 60_000); len(got) != 0 {
		t.Fatalf("a pop of the cut queue got %d messages, want none", len(got))
	}
	if !strings.Contains(logged.String(), "the queue ends below the group's pop position") {
		t.Errorf("no warning of the position moved back; log: %s", logged.String())
	}
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	for i := range 2 {
		if err := h.broker.store(&commitlog.Message{Topic: "T", Body: []byte(fmt.Sprintf("n%d", i)), BornHost: host, StoreHost: host}); err != nil {
			t.Fatal(err)
		}
	}
	got := h.popAll(t, 60_000)
	if len(got) != 2 || string(got[0].Body) != "n0" || string(got[1].Body) != "n1" {
		var bodies []string
		for _, m := range got {
			bodies = append(bodies, fmt.Sprintf("%s@%d", m.Body, m.QueueOffset))
		}
		t.Fatalf("after the cut the pop got %v, want n0@2 n1@3", bodies)
	}
}

// An orderly pop, which starts from the committed offset, follows a cut
// queue back to its end the same way, with the warning.
func TestOrderlyPopFollowsACutQueueBackToItsEnd(t *testing.T) {
	h := newStageHarness(t, 2)
	if err := h.svc.cfg.Offsets.Set("O", "T", 0, 4); err != nil { // as if it had consumed 4 before the cut
		t.Fatal(err)
	}
	var logged bytes.Buffer
	h.svc.log = zerolog.New(&logged)
	pop := func() []string {
		t.Helper()
		res, err := h.svc.Pop(PopRequest{Group: "O", Topic: "T", QueueID: 0, MaxMsgNums: 32, InvisibleTime: 60_000, Order: true})
		if err != nil {
			t.Fatalf("orderly pop: %v", err)
		}
		var bodies []string
		for _, rec := range res.Records {
			m, err := commitlog.Decode(rec)
			if err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, fmt.Sprintf("%s@%d", m.Body, m.QueueOffset))
		}
		return bodies
	}
	if got := pop(); len(got) != 0 {
		t.Fatalf("an orderly pop of the cut queue got %v, want none", got)
	}
	if !strings.Contains(logged.String(), "the queue ends below the group's pop position") {
		t.Errorf("no warning of the offset moved back; log: %s", logged.String())
	}
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	if err := h.broker.store(&commitlog.Message{Topic: "T", Body: []byte("n0"), BornHost: host, StoreHost: host}); err != nil {
		t.Fatal(err)
	}
	if got := pop(); len(got) != 1 || got[0] != "n0@2" {
		t.Fatalf("after the cut the orderly pop got %v, want [n0@2]", got)
	}
}

// unpublishedQueues is memQueues whose MaxOffset leaves out the newest
// hidden entries of every queue while Get still returns them: a store
// caught between committing entries and publishing its new end.
type unpublishedQueues struct {
	*memQueues
	hidden atomic.Int64
}

func (u *unpublishedQueues) MaxOffset(topic string, queueID int32) (int64, error) {
	n, err := u.memQueues.MaxOffset(topic, queueID)
	return max(n-u.hidden.Load(), 0), err
}

// A pop takes nothing past the queue's end as it read it, even from a
// store whose reads run ahead of that end: otherwise its position would
// pass the end the next pop reads, which moves the position back and
// hands the same messages out twice (the duplicate the POP crash test
// met, from the KV ConsumeQueue before its Get stopped at the published
// end).
func TestPopTakesNothingPastTheEndItRead(t *testing.T) {
	var store *unpublishedQueues
	h := newStageHarnessWith(t, 4, func(c *Config) {
		store = &unpublishedQueues{memQueues: c.CQ.(*memQueues)}
		store.hidden.Store(2)
		c.CQ = store
	})
	seen := map[string]int{}
	pop := func() []string {
		t.Helper()
		got := bodies(h.popAll(t, 60_000))
		for _, b := range got {
			seen[b]++
		}
		return got
	}
	if got := pop(); !slices.Equal(got, []string{"m0", "m1"}) {
		t.Fatalf("first pop got %v, want [m0 m1]: m2 and m3 lie past the end it read", got)
	}
	if got := pop(); len(got) != 0 {
		t.Fatalf("a pop before the end moves got %v", got)
	}
	store.hidden.Store(0)
	if got := pop(); !slices.Equal(got, []string{"m2", "m3"}) {
		t.Fatalf("pop after the end moved got %v, want [m2 m3]", got)
	}
	if got := pop(); len(got) != 0 {
		t.Fatalf("a last pop got %v", got)
	}
	for b, n := range seen {
		if n != 1 {
			t.Errorf("%s handed out %d times", b, n)
		}
	}
}
