package txn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
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
	f.now = f.now.Add(time.Minute) // the half is due
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

// A half whose properties leave no room for TRANSACTION_CHECK_TIMES is
// asked about and given up without the count, instead of failing every
// pass; a give-up whose copy no retry can store gives the transaction up
// without it.
func TestAHalfTooLargeForItsCheckCountIsCheckedAndGivenUp(t *testing.T) {
	f := newFixture(t, Config{Timeout: time.Second, CheckInterval: time.Second, CheckMax: 1})
	probe := &commitlog.Message{Topic: "T", QueueID: 1, Properties: "PGROUP\x01pg\x02UNIQ_KEY\x01U-BIG\x02TRAN_MSG\x01true\x02PAD\x01\x02"}
	ToHalf(probe)
	pad := strings.Repeat("x", commitlog.MaxPropertiesLen-len(probe.Properties)-10)
	h := f.sendHalf("U-BIG", "PAD\x01"+pad+"\x02")
	if n := len(h.Properties); n > commitlog.MaxPropertiesLen || n+len(PropCheckTimes+"\x011\x02") <= commitlog.MaxPropertiesLen {
		t.Fatalf("properties of %d bytes: the test does not test what it says", n)
	}
	f.now = f.now.Add(time.Minute)
	if ps := f.pass(); ps.Checked != 1 || ps.Discarded != 1 {
		t.Fatalf("pass %+v, want the producer asked and the half given up", ps)
	}
	if got := f.store.putsIn(meta.TransCheckMaxTopic); len(got) != 1 {
		t.Fatalf("%d copies given up, want 1", len(got))
	}

	// A copy no retry stores (the store refuses the message itself).
	h = f.sendHalf("U-REFUSED", "")
	f.store.failPut = fmt.Errorf("put: %w", commitlog.ErrMessageTooLarge)
	f.now = f.now.Add(time.Minute)
	if ps := f.pass(); ps.Discarded != 1 {
		t.Fatalf("pass with an unstorable copy %+v, want the half given up", ps)
	}
	if e, ok, err := f.db.Transactions().Ended(h.PhyOffset); err != nil || !ok || e.State != kvindex.TxnDiscarded {
		t.Fatalf("end of the transaction whose copy was refused: %+v %v %v", e, ok, err)
	}
}

// A commit stored and durable whose message the dispatcher has not
// indexed in time (Config.WaitDispatched failing: a dispatcher far behind,
// the request's deadline) fails without recording the end, and is not
// stored again: a repeated commit waits for the indexing and then ends
// the transaction, its message in its queue once.
func TestACommitNotYetIndexedIsNotStoredTwice(t *testing.T) {
	f := newFixture(t, Config{Timeout: time.Second, CheckInterval: time.Second})
	h := f.sendHalf("U-UNINDEXED", "")
	behind := errors.New("the dispatcher is behind")
	fail := true
	f.svc.cfg.WaitDispatched = func(ctx context.Context, end int64) error {
		if fail {
			return behind
		}
		return f.disp.WaitFor(ctx, end)
	}
	if err := f.svc.End(context.Background(), commitReq(h)); !errors.Is(err, behind) {
		t.Fatalf("commit with the dispatcher behind: %v", err)
	}
	fail = false
	if err := f.svc.End(context.Background(), commitReq(h)); err != nil {
		t.Fatalf("repeated commit once indexed: %v", err)
	}
	if n := len(f.store.putsIn("T")); n != 1 {
		t.Fatalf("the committed message stored %d times", n)
	}
	if _, ok := f.svc.unsettledCommit(h.PhyOffset); ok {
		t.Fatal("the note outlived the end")
	}
	f.caughtUp()
	if entries, err := f.db.ConsumeQueue(16).Get("T", 1, 0, 32); err != nil || len(entries) != 1 {
		t.Fatalf("the committed transaction is in T/1 %d times (%v), want once", len(entries), err)
	}
}
