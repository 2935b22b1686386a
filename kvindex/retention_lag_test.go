package kvindex

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rocketkv/rocketkv/commitlog"
)

// A dispatcher that lags behind retention holds the segment retention
// deletes, so it goes on dispatching that segment's records after the new
// minimum was applied to the ConsumeQueue. The queue's minimum is moved
// past them before the batch is told (and so after a restart too): it
// used to be left naming a deleted record until the next deletion, and
// GET_MIN_OFFSET and the earliest store time were read from it.
func TestADispatchBehindRetentionLeavesNoMinimumOnADeletedRecord(t *testing.T) {
	root := t.TempDir()
	cfg := commitlog.DefaultConfig(root)
	cfg.SegmentSize = 64 << 10
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	var lg atomic.Pointer[commitlog.Log]
	var armed atomic.Bool
	ready := make(chan struct{})
	var once sync.Once
	hook := HookFunc(func(_ *pebble.Batch, m *commitlog.Message) error {
		if !armed.Load() {
			return nil
		}
		once.Do(func() {
			<-ready
			// Retention runs while the dispatcher is inside segment 0.
			if _, err := lg.Load().DeleteExpired(time.Now().Add(1000*time.Hour), true); err != nil {
				t.Errorf("delete: %v", err)
			}
		})
		return nil
	})
	s := openStackWith(t, root, cfg, LayoutKV, "", func(o *DispatcherOptions) {
		o.Hooks = map[string]Hook{"T": hook}
	})
	lg.Store(s.log)
	s.log.OnMinOffsetChange(s.disp.LogMinOffsetChanged)
	armed.Store(true)
	for s.log.MaxOffset() < 64<<10+4096 {
		if err := s.offsets.Acquire("T", 0); err != nil {
			t.Fatal(err)
		}
		_, err := s.log.Append(context.Background(), commitlog.AppendRequest{Assigner: s.offsets, Message: &commitlog.Message{
			Topic: "T", Body: make([]byte, 1000), BornHost: netip.MustParseAddrPort("127.0.0.1:1")}})
		s.offsets.Release("T", 0)
		if err != nil {
			t.Fatal(err)
		}
	}
	close(ready)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	logMin := s.log.MinOffset()
	if logMin == 0 {
		t.Fatal("retention deleted nothing")
	}
	check := func(when string) {
		lo, _ := s.store.MinOffset("T", 0)
		hi, _ := s.store.MaxOffset("T", 0)
		es, err := s.store.Get("T", 0, lo, 1)
		if err != nil || len(es) != 1 {
			t.Fatalf("%s: first entry of T/0 [%d,%d): %v %v", when, lo, hi, es, err)
		}
		if es[0].PhyOffset < logMin {
			t.Errorf("%s: T/0 minimum %d (of [%d,%d)) names phy %d, below the CommitLog minimum %d: a deleted record", when, lo, lo, hi, es[0].PhyOffset, logMin)
		}
	}
	check("after catch-up")
	s.close(t)
	s = openStack(t, root, cfg)
	defer s.close(t)
	check("after a restart")
}
