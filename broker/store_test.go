package broker

import (
	"strconv"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
)

// growingCQ is a ConsumeQueue whose MaxOffset lags its entries by lag, as
// when the dispatcher indexes more between a read's MaxOffset and its Get.
type growingCQ struct {
	cq.Store
	lag int64
}

func (g growingCQ) MaxOffset(topic string, queueID int32) (int64, error) {
	m, err := g.Store.MaxOffset(topic, queueID)
	return m - g.lag, err
}

// A pull whose first matching record lies past the queue's end as the
// read first saw it (entries dispatched meanwhile, the earlier ones
// filtered out by tag) returns it; sizing the body from that end once
// gave a negative capacity and a panic.
func TestPullMatchPastTheEndSeenAtStart(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for i := range 20 {
		tag := "a"
		if i >= 15 {
			tag = "b"
		}
		mustSend(t, c, "Grow", 0, "m", "TAGS\x01"+tag+"\x02")
	}
	b.caughtUp()
	b.cqs = growingCQ{Store: b.cqs, lag: 8} // the read sees the end at 12
	filter, err := newSubscription("Grow", "b", exprTag, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.getMessages("Grow", 0, 10, 32, 0, filter)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != getFound || r.count != 5 {
		t.Fatalf("status %s, %d records, want FOUND with the 5 tagged b", r.status, r.count)
	}
}

// GET_BROKER_RUNTIME_INFO counts the ConsumeQueue reads answered from
// memory: the second read of a queue's end comes from its tail.
func TestRuntimeInfoCountsCQReadsFromMemory(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for range 3 {
		mustSend(t, c, "Mem", 0, "m", "")
	}
	b.caughtUp()
	count := func(key string) int64 {
		n, err := strconv.ParseInt(runtimeInfo(t, c)[key], 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return n
	}
	mem, idx := count("consumeQueueReadsFromMemory"), count("consumeQueueReadsFromIndex")
	for range 2 {
		if _, err := b.getMessages("Mem", 0, 0, 32, 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	if d := count("consumeQueueReadsFromIndex") - idx; d != 1 {
		t.Fatalf("%d reads from the index, want 1 (the first)", d)
	}
	if d := count("consumeQueueReadsFromMemory") - mem; d != 1 {
		t.Fatalf("%d reads from memory, want 1 (the second)", d)
	}
}
