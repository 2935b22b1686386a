package txn

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
)

// A half whose dispatch batch is not yet committed when a listing begins
// (its hook has run, its record is not visible) is still checked once
// due: the listing cannot see it, so its due time is kept for the passes
// after. Once forgotten, no pass listed again until another half came,
// and a producer that never ended its transaction was never asked.
func TestAHalfIndexedDuringAListingIsChecked(t *testing.T) {
	inHook, release := make(chan struct{}), make(chan struct{})
	f := newFixtureHooking(t, Config{Timeout: 6 * time.Second, CheckInterval: 30 * time.Second, CheckMax: 15}, func(halfHook kvindex.Hook) kvindex.Hook {
		return kvindex.HookFunc(func(w *pebble.Batch, m *commitlog.Message) error {
			err := halfHook.Dispatch(w, m)
			if u, _ := commitlog.LookupProperty(m.Properties, "UNIQ_KEY"); u == "H2" {
				close(inHook)
				<-release // the batch commits once the hook returns
			}
			return err
		})
	})
	f.svc.cfg.Dispatched = f.disp.Dispatched // as the broker's

	// H1 is committed at once.
	h1 := f.sendHalf("H1", "")
	o1, _ := f.open(h1.PhyOffset)
	if err := f.svc.End(context.Background(), commitReq(h1)); err != nil {
		t.Fatal(err)
	}
	// H2's producer never ends it; its batch is held after its hook ran.
	m := &commitlog.Message{Topic: "T", QueueID: 1, BornTimestamp: f.now.UnixMilli(), Body: []byte("b"),
		Properties: "PGROUP\x01pg\x02UNIQ_KEY\x01H2\x02TRAN_MSG\x01true\x02"}
	ToHalf(m)
	res, err := f.log.Append(context.Background(), commitlog.AppendRequest{Message: m, Assigner: f.store})
	if err != nil {
		t.Fatal(err)
	}
	<-inHook
	// H1's first check time comes while H2's batch is held: the pass
	// lists, and finds nothing open.
	f.now = time.UnixMilli(o1.NextCheckAt)
	if st := f.pass(); st != (PassStats{}) {
		t.Fatalf("pass while H2's batch was held: %+v", st)
	}
	close(release)
	f.caughtUp()
	h2, ok := f.open(res.PhyOffset)
	if !ok {
		t.Fatal("H2 not open")
	}
	for f.now.UnixMilli() <= h2.NextCheckAt+5_000 {
		f.now = f.now.Add(time.Second)
		f.pass()
	}
	if n := f.askedCount(); n == 0 {
		t.Fatalf("H2, due at %d, never checked by %d (%d listings)", h2.NextCheckAt, f.now.UnixMilli(), f.svc.listings)
	}
}

// The halves the hook records for the listings are dropped once their
// batches are committed even when no checker pass runs (a slave indexes
// halves and checks none): the record stays bounded, not one entry per
// half for ever.
func TestUnlistedHalvesStayBoundedWithoutPasses(t *testing.T) {
	f := newFixture(t, Config{Timeout: 6 * time.Second, CheckInterval: 30 * time.Second, CheckMax: 15})
	f.svc.cfg.Dispatched = f.disp.Dispatched // as the broker's
	const halves = 3 * minUnlistedPrune
	for i := range halves {
		m := &commitlog.Message{Topic: "T", QueueID: 1, BornTimestamp: f.now.UnixMilli(), Body: []byte("b"),
			Properties: "PGROUP\x01pg\x02TRAN_MSG\x01true\x02"}
		ToHalf(m)
		if _, err := f.log.Append(context.Background(), commitlog.AppendRequest{Message: m, Assigner: f.store}); err != nil {
			t.Fatal(err)
		}
		if i%512 == 0 {
			f.caughtUp() // the batches commit as a running dispatcher's would
		}
	}
	f.caughtUp()
	f.svc.addedMu.Lock()
	n := len(f.svc.unlisted)
	f.svc.addedMu.Unlock()
	if n > 2*minUnlistedPrune {
		t.Fatalf("%d halves recorded after %d indexed with no pass, want at most %d", n, halves, 2*minUnlistedPrune)
	}
}
