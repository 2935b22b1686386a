package broker

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/remoting"
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

// A pull whose byte limit fills before its message count returns the
// records that fit and the offset after them: with a backlog larger than
// a read's batch, the read once looped forever (a Java push consumer's
// 256 KiB limit with 10 KB messages and 60 waiting never got an answer).
func TestPullByteLimitEndsTheBatch(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	body := strings.Repeat("x", 1000)
	for range 100 {
		mustSend(t, c, "Bytes", 0, body, "")
	}
	b.caughtUp()
	done := make(chan getResult, 1)
	go func() {
		r, err := b.getMessages("Bytes", 0, 0, 32, 3000, nil)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	select {
	case r := <-done:
		if r.status != getFound || r.count < 1 || r.count > 3 || r.nextBegin != int64(r.count) {
			t.Fatalf("status %s, %d records, next %d: want the records that fit in 3,000 bytes and the offset after them",
				r.status, r.count, r.nextBegin)
		}
		if len(r.body) > 3000 && r.count > 1 {
			t.Fatalf("%d bytes in %d records, over the 3,000 asked", len(r.body), r.count)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a pull limited by bytes did not return")
	}
	// Through the protocol too, with the Java client's 256 KiB limit and
	// records of about 10 KB.
	big := strings.Repeat("y", 10_000)
	for range 60 {
		mustSend(t, c, "Bytes", 1, big, "")
	}
	b.caughtUp()
	req := pullReq("g", "Bytes", 1, 0, 0, 0, "*")
	req["maxMsgBytes"] = strconv.Itoa(256 << 10)
	r := call(t, c, remoting.PullMessage, req, nil)
	got := decodeRecords(t, r.Body)
	fit := int64(256<<10) / int64(got[0].StoreSize) // 25
	if r.Code != remoting.Success || int64(len(got)) != fit || header(t, r, "nextBeginOffset") != fit {
		t.Fatalf("pull of 10 KB records with maxMsgBytes 256 KiB: %d %q, %d records, next %s",
			r.Code, r.Remark, len(got), r.ExtFields["nextBeginOffset"])
	}
}

// indexBlockCacheMiB sizes the index's block cache, and GET_BROKER_RUNTIME_INFO
// reports its budget and use.
func TestIndexBlockCacheSizeAndRuntimeInfo(t *testing.T) {
	b := startTestBroker(t, map[string]string{"indexBlockCacheMiB": "16"})
	c := b.client(nil)
	info := runtimeInfo(t, c)
	if got := info["indexBlockCacheCapacity"]; got != strconv.Itoa(16<<20) {
		t.Fatalf("indexBlockCacheCapacity %q, want %d", got, 16<<20)
	}
	for _, key := range []string{"indexBlockCacheBytes", "indexBlockCacheHits", "indexBlockCacheMisses"} {
		if n, err := strconv.ParseInt(info[key], 10, 64); err != nil || n < 0 {
			t.Fatalf("%s = %q: %v", key, info[key], err)
		}
	}
}
