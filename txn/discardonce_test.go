package txn

import (
	"context"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// A half given up while the CommitLog's flush is slower than
// syncFlushTimeout is given up once: its copy in TRANS_CHECK_MAX_TIME_TOPIC
// is stored (ErrNotDurable only says its flush is pending), and the next
// passes do not store another one, each of which an operator could
// resume and its producer commit again.
func TestAHalfGivenUpWhileTheFlushIsSlowIsGivenUpOnce(t *testing.T) {
	f := newFixture(t, Config{Timeout: time.Second, CheckInterval: time.Second, CheckMax: 1})
	h := f.sendHalf("U1", "")
	o, _ := f.open(h.PhyOffset)
	f.now = time.UnixMilli(o.StoreTimestamp).Add(2 * time.Second)
	f.store.stall(true)
	if st, err := f.svc.CheckDue(context.Background()); err != nil || st.Checked != 1 || st.Discarded != 1 {
		t.Fatalf("first pass with the flush slow: %+v (%v), want one check and the half given up", st, err)
	}
	for i := range 3 {
		f.now = f.now.Add(2 * time.Second)
		if _, err := f.svc.CheckDue(context.Background()); err != nil {
			t.Errorf("pass %d with the flush slow: %v", i, err)
		}
	}
	f.store.stall(false)
	f.now = f.now.Add(2 * time.Second)
	f.pass()
	if got := f.store.putsIn(meta.TransCheckMaxTopic); len(got) != 1 {
		t.Fatalf("%d copies of the half given up in %s, want 1", len(got), meta.TransCheckMaxTopic)
	}
	if e, ended, err := f.db.Transactions().Ended(h.PhyOffset); err != nil || !ended || e.State != kvindex.TxnDiscarded {
		t.Fatalf("transaction ended %v as %v (%v), want given up", ended, e.State, err)
	}
	if ops := f.store.putsIn(meta.TransOpHalfTopic); len(ops) != 1 {
		t.Fatalf("%d op messages for the give-up, want 1", len(ops))
	}
}
