package kvindex

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
)

// After retention deletes CommitLog segments, queue minima move past the
// deleted records (a queue whose records are all gone keeps its max), and
// the key index forgets them.
func TestMinOffsetCorrectionAfterRetention(t *testing.T) {
	root := t.TempDir()
	cfg := commitlog.DefaultConfig(root)
	cfg.SegmentSize = 64 << 10
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	s := openStack(t, root, cfg)
	defer s.close(t)
	s.log.OnMinOffsetChange(s.disp.LogMinOffsetChanged)

	appendMsg := func(topic string, qid int32, key string) {
		t.Helper()
		if err := s.offsets.Acquire(topic, qid); err != nil {
			t.Fatal(err)
		}
		defer s.offsets.Release(topic, qid)
		_, err := s.log.Append(context.Background(), commitlog.AppendRequest{Assigner: s.offsets, Message: &commitlog.Message{
			Topic: topic, QueueID: qid, Body: make([]byte, 1000),
			Properties: "KEYS\x01" + key + "\x02", BornHost: netip.MustParseAddrPort("127.0.0.1:1"),
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// "old" only has messages in the first segments; "live" spans them all.
	for i := 0; i < 100; i++ {
		appendMsg("old", 0, fmt.Sprintf("old-%d", i))
		appendMsg("live", 0, fmt.Sprintf("live-%d", i))
	}
	for i := 100; i < 300; i++ {
		appendMsg("live", 0, fmt.Sprintf("live-%d", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	// Delete every segment but the active one.
	if _, err := s.log.DeleteExpired(time.Now().Add(1000*time.Hour), true); err != nil {
		t.Fatal(err)
	}
	newMin := s.log.MinOffset()
	if newMin == 0 {
		t.Fatal("retention deleted nothing")
	}

	oldMin, _ := s.store.MinOffset("old", 0)
	oldMax, _ := s.store.MaxOffset("old", 0)
	if oldMin != 100 || oldMax != 100 {
		t.Errorf("old/0 bounds [%d,%d), want [100,100): emptied but keeping its max", oldMin, oldMax)
	}
	liveMin, _ := s.store.MinOffset("live", 0)
	liveMax, _ := s.store.MaxOffset("live", 0)
	if liveMax != 300 || liveMin <= 0 || liveMin >= 300 {
		t.Fatalf("live/0 bounds [%d,%d)", liveMin, liveMax)
	}
	first, err := s.store.Get("live", 0, liveMin, 1)
	if err != nil || len(first) != 1 || first[0].PhyOffset < newMin {
		t.Fatalf("first readable entry of live/0 %v (%v), log min %d", first, err, newMin)
	}
	if liveMin > 0 {
		before, _ := s.store.Get("live", 0, liveMin-1, 1)
		if len(before) != 0 {
			t.Fatalf("entry below the minimum still readable: %v", before)
		}
	}
	// Keys of deleted records are gone; keys of kept ones are found.
	res, err := s.db.KeyIndex().Lookup(KeyQuery{Topic: "old", Key: "old-0", Kind: KindKey})
	if err != nil || len(res) != 0 {
		t.Fatalf("key of a deleted record still indexed: %v %v", res, err)
	}
	res, err = s.db.KeyIndex().Lookup(KeyQuery{Topic: "live", Key: "live-299", Kind: KindKey})
	if err != nil || len(res) != 1 {
		t.Fatalf("key of a kept record: %v %v", res, err)
	}
	// New appends continue after the old maximum.
	appendMsg("old", 0, "old-new")
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := s.store.Get("old", 0, 100, 10)
	if len(got) != 1 || got[0].QueueOffset != 100 {
		t.Fatalf("append after emptying: %v", got)
	}
}
