package txn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// A commit whose message was stored but not confirmed durable in time
// (a disk slower than syncFlushTimeout under SYNC_FLUSH, whose dispatcher
// indexes only flushed records) fails without recording the end, and is
// never stored again: the producer is not asked about the half meanwhile,
// a repeated commit (the producer's, or one answering a check) waits for
// the flush instead of storing the message a second time, a rollback is
// refused, and once the disk catches up the transaction ends with its
// message in its queue once.
func TestACommitNotYetDurableIsNotStoredTwice(t *testing.T) {
	f := newFixture(t, Config{Timeout: time.Second, CheckInterval: time.Second})
	h := f.sendHalf("U-UNFLUSHED", "")
	f.disp.Close() // a SYNC_FLUSH dispatcher sees nothing unflushed
	f.store.stall(true)

	if err := f.svc.End(context.Background(), commitReq(h)); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("commit on a stalled disk: %v, want ErrNotDurable", err)
	}
	f.now = time.Now().Add(time.Minute) // the half is due
	if ps := f.pass(); ps.Checked != 0 || ps.Unflushed != 1 || f.askedCount() != 0 {
		t.Fatalf("check pass while the commit is unflushed: %+v, %d asked; want the producer not asked", ps, f.askedCount())
	}
	again := commitReq(h)
	again.FromTransactionCheck = true
	if err := f.svc.End(context.Background(), again); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("repeated commit on a stalled disk: %v, want ErrNotDurable", err)
	}
	rollback := commitReq(h)
	rollback.State = kvindex.TxnRollback
	if err := f.svc.End(context.Background(), rollback); !errors.Is(err, ErrAlreadyEnded) {
		t.Fatalf("rollback of a stored commit: %v, want ErrAlreadyEnded", err)
	}
	if n := len(f.store.putsIn("T")); n != 1 {
		t.Fatalf("the committed message stored %d times", n)
	}

	// The disk catches up: the next pass ends the transaction.
	f.store.stall(false)
	f.now = f.now.Add(time.Minute)
	if ps := f.pass(); ps.Ended != 1 || f.askedCount() != 0 {
		t.Fatalf("check pass once durable: %+v, %d asked", ps, f.askedCount())
	}
	if e, ok, err := f.db.Transactions().Ended(h.PhyOffset); err != nil || !ok || e.State != kvindex.TxnCommit {
		t.Fatalf("end of the transaction: %+v %v %v", e, ok, err)
	}
	if err := f.svc.End(context.Background(), again); err != nil {
		t.Fatalf("repeated commit once ended: %v", err)
	}
	f.disp = f.st.StartDispatcher(t, kvindex.DispatcherOptions{
		Hooks:      map[string]kvindex.Hook{meta.TransHalfTopic: f.svc.HalfHook(), meta.TransOpHalfTopic: f.svc.OpHook()},
		CommitHook: f.svc.CommitHook()})
	f.caughtUp()
	if entries, err := f.db.ConsumeQueue(16).Get("T", 1, 0, 32); err != nil || len(entries) != 1 {
		t.Fatalf("the committed transaction is in T/1 %d times (%v), want once", len(entries), err)
	}
	if ops := f.store.putsIn(meta.TransOpHalfTopic); len(ops) != 1 {
		t.Fatalf("%d op messages, want 1", len(ops))
	}
}
