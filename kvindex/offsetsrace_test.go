package kvindex

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rs/zerolog"
)

// gatedStore is a cq.Store whose MaxOffset of queue gateTopic/0 stops,
// once, after reading the answer, until release is closed; failOnce makes
// the first MaxOffset fail instead.
type gatedStore struct {
	cq.Store
	gateTopic string
	read      chan struct{}
	release   chan struct{}
	gated     atomic.Bool
	failOnce  atomic.Bool
}

func (g *gatedStore) MaxOffset(topic string, qid int32) (int64, error) {
	if g.failOnce.Swap(false) {
		return 0, errors.New("injected read error")
	}
	v, err := g.Store.MaxOffset(topic, qid)
	if topic == g.gateTopic {
		if g.gated.CompareAndSwap(false, true) {
			close(g.read)
			<-g.release
		}
	}
	return v, err
}

// Two appenders Acquire the same cold queue. The first loads its max
// offset (0) and is descheduled before it takes the table's lock; the
// second loads it too, assigns offset 0, the dispatcher indexes it, and
// the queue, idle and fully dispatched, is evicted by other queues. The
// first must not insert its stale 0 (offset 0 was handed out twice): an
// eviction while it loaded makes it load again.
func TestAStaleLoadOfAQueuesNextOffsetIsDoneAgain(t *testing.T) {
	db := openTestDB(t)
	c := db.ConsumeQueue(0)
	g := &gatedStore{Store: c, gateTopic: "T", read: make(chan struct{}), release: make(chan struct{})}
	tab := NewQueueOffsets(g, 1, zerolog.Nop())
	done := make(chan error, 1)
	go func() { done <- tab.Acquire("T", 0) }()
	<-g.read
	// The second appender (its MaxOffset does not stop).
	if err := tab.Acquire("T", 0); err != nil {
		t.Fatal(err)
	}
	first := tab.Assign("T", 0, 1)
	tab.Release("T", 0)
	// Dispatched: the entry is in the ConsumeQueue and the table knows.
	if err := c.Put([]cq.Dispatch{{Topic: "T", QueueID: 0, Entry: cq.Entry{QueueOffset: first, PhyOffset: 0, Size: 100}}}); err != nil {
		t.Fatal(err)
	}
	tab.Dispatched("T", 0, first+1)
	// Another queue takes the table's only place: T is evicted.
	if err := tab.Acquire("U", 0); err != nil {
		t.Fatal(err)
	}
	tab.Release("U", 0)
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	second := tab.Assign("T", 0, 1)
	tab.Release("T", 0)
	if second == first {
		t.Fatalf("queue offset %d handed out twice", first)
	}
}

// Two commits of one group's offset on one queue race: the committed-
// offset cache must take them in the order the database does, or Get
// answers from the cache a value the database (and so the broker after a
// restart or an eviction) does not hold.
func TestConcurrentOffsetCommitsLeaveTheCacheAsTheDatabase(t *testing.T) {
	db := openTestDB(t)
	o := db.ConsumerOffsets()
	k := consumerOffsetKey("G", "T", 0)
	for trial := 0; trial < 2000; trial++ {
		var wg sync.WaitGroup
		for g := int64(0); g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := o.SetLazy("G", "T", 0, int64(trial)*10+g); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		got, _, err := o.Get("G", "T", 0)
		if err != nil {
			t.Fatal(err)
		}
		v, err := db.get(k)
		if err != nil {
			t.Fatal(err)
		}
		stored, _ := getInt64(v)
		if got != stored {
			t.Fatalf("trial %d: Get answers %d from the cache, the database holds %d", trial, got, stored)
		}
	}
}
