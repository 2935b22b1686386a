package kvindex

import (
	"context"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
)

// Under a controller-mode confirm limit the dispatcher indexes only the
// records the limit confirms: one the limit cuts through waits, CatchUp
// returns once the confirmed ones are indexed, Lag leaves the held bytes
// out, and raising the limit indexes the rest.
func TestDispatchStopsAtTheConfirmLimit(t *testing.T) {
	root := t.TempDir()
	cfg := commitlog.DefaultConfig("")
	cfg.SegmentSize = 1 << 20
	s := openStackWith(t, root, cfg, LayoutKV, "")
	defer s.close(t)
	var ends []int64
	put := func() {
		t.Helper()
		m := &commitlog.Message{Topic: "T", Body: []byte("body"), BornTimestamp: 1}
		r, err := s.log.Append(context.Background(), commitlog.AppendRequest{Message: m, Assigner: s.offsets})
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, r.PhyOffset+int64(r.WroteBytes))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	put()
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	// Confirmed: the first record and part of the third.
	s.log.SetConfirmLimit(ends[0])
	put()
	put()
	s.log.SetConfirmLimit(ends[1] + 5)
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatalf("CatchUp under a limit inside a record: %v", err)
	}
	if hi, err := s.store.MaxOffset("T", 0); err != nil || hi != 2 {
		t.Fatalf("T/0 max offset under the limit %d (%v), want 2: the record the limit cuts is not indexed", hi, err)
	}
	if got := s.disp.Dispatched(); got != ends[1] {
		t.Fatalf("Dispatched %d, want %d (the confirmed records' end)", got, ends[1])
	}
	if lag := s.disp.Lag(); lag != 5 {
		t.Fatalf("Lag %d, want 5 (only the confirmed bytes not indexed)", lag)
	}
	s.log.SetConfirmLimit(ends[2])
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if hi, err := s.store.MaxOffset("T", 0); err != nil || hi != 3 {
		t.Fatalf("T/0 max offset after the limit passed the third record %d (%v), want 3", hi, err)
	}
	s.log.SetConfirmLimit(-1)
	put()
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if hi, err := s.store.MaxOffset("T", 0); err != nil || hi != 4 {
		t.Fatalf("T/0 max offset with the limit lifted %d (%v), want 4", hi, err)
	}
}
