package kvindex

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
)

// TestCQEmptyTopicState checks the answers CQ gives from its memory of
// empty topics: queues written after a topic was found empty, queues whose
// cached bounds were evicted, a deleted and recreated topic, and a topic
// that held data before the CQ was opened.
func TestCQEmptyTopicState(t *testing.T) {
	db := openTestDB(t)
	put := func(c *CQ, topic string, qid int32, from, n int64) {
		t.Helper()
		var ds []cq.Dispatch
		for i := from; i < from+n; i++ {
			ds = append(ds, cq.Dispatch{Topic: topic, QueueID: qid, Entry: cq.Entry{QueueOffset: i, PhyOffset: 1000 + i*10, Size: 10}})
		}
		if err := c.Put(ds); err != nil {
			t.Fatal(err)
		}
	}
	wantMax := func(c *CQ, topic string, qid int32, want int64) {
		t.Helper()
		got, err := c.MaxOffset(topic, qid)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("MaxOffset(%s, %d) = %d, want %d", topic, qid, got, want)
		}
	}

	c := db.ConsumeQueue(2) // two queues' bounds: most writes evict
	wantMax(c, "T", 0, 0)   // T is now known to be empty
	put(c, "T", 1, 0, 5)
	wantMax(c, "T", 1, 5)
	wantMax(c, "T", 0, 0)
	for q := int32(2); q < 6; q++ { // evicts T/1's bounds
		put(c, "T", q, 0, int64(q))
	}
	wantMax(c, "T", 1, 5)
	for q := int32(2); q < 6; q++ {
		wantMax(c, "T", q, int64(q))
	}
	wantMax(c, "T", 7, 0)

	if err := c.DeleteTopic("T"); err != nil {
		t.Fatal(err)
	}
	wantMax(c, "T", 1, 0)
	put(c, "T", 1, 0, 2)
	wantMax(c, "T", 1, 2)

	// A new CQ over the same database knows nothing yet and must find the
	// data written by the first.
	c2 := db.ConsumeQueue(2)
	wantMax(c2, "T", 1, 2)
	wantMax(c2, "T", 3, 0)
	wantMax(c2, "U", 0, 0)
}

// TestCQEmptyTopicStateConcurrent races readers of fresh topics' queues
// against a writer: once a Put returned, every later MaxOffset of its
// queues must see it, whatever the readers remembered meanwhile.
func TestCQEmptyTopicStateConcurrent(t *testing.T) {
	db := openTestDB(t)
	c := db.ConsumeQueue(16)
	const topics, queues, rounds = 20, 8, 30
	var written [topics][queues]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Value
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tp, q := (i*7+r)%topics, int32((i*3+r)%queues)
				floor := written[tp][q].Load()
				got, err := c.MaxOffset(fmt.Sprintf("T%d", tp), q)
				if err != nil || got < floor {
					failed.CompareAndSwap(nil, fmt.Sprintf("MaxOffset(T%d, %d) = %d (%v), written %d", tp, q, got, err, floor))
					return
				}
			}
		}(r)
	}
	for round := 0; round < rounds; round++ {
		for tp := 0; tp < topics; tp++ {
			q := int32((round + tp) % queues)
			from := written[tp][q].Load()
			if err := c.Put([]cq.Dispatch{{Topic: fmt.Sprintf("T%d", tp), QueueID: q, Entry: cq.Entry{QueueOffset: from, PhyOffset: int64(round*1000 + tp), Size: 1}}}); err != nil {
				t.Fatal(err)
			}
			written[tp][q].Store(from + 1)
		}
	}
	close(stop)
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatal(f)
	}
	for tp := 0; tp < topics; tp++ {
		for q := int32(0); q < queues; q++ {
			got, err := c.MaxOffset(fmt.Sprintf("T%d", tp), q)
			if err != nil || got != written[tp][q].Load() {
				t.Fatalf("MaxOffset(T%d, %d) = %d (%v), want %d", tp, q, got, err, written[tp][q].Load())
			}
		}
	}
}
