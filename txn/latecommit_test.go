package txn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
)

// A late commit of a transaction given up after its checks whose message
// is stored but not durable in time is noted in s.unsettled. Its half left
// 0x60 with the give-up, so the checker never visits it: once the message
// is durable and indexed the dispatcher records the commit (CommitHook),
// and a checker pass drops the note.
func TestALateCommitOfAGivenUpTransactionEndsOnceIndexed(t *testing.T) {
	f := newFixture(t, Config{Timeout: time.Second, CheckInterval: time.Second, CheckMax: 1})
	f.svc.cfg.WaitDispatched = f.disp.WaitFor
	h := f.sendHalf("U-LATE", "")
	f.now = f.now.Add(time.Minute)
	if ps := f.pass(); ps.Checked != 1 || ps.Discarded != 1 {
		t.Fatalf("pass %+v, want one check and the half given up", ps)
	}

	f.store.stall(true)
	late := commitReq(h)
	late.FromTransactionCheck = true
	if err := f.svc.End(context.Background(), late); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("late commit on a stalled disk: %v, want ErrNotDurable", err)
	}
	// The disk catches up; the message is indexed; the checker runs.
	f.store.stall(false)
	f.caughtUp()
	for range 3 {
		f.now = f.now.Add(time.Minute)
		f.pass()
	}
	f.svc.unsettledMu.Lock()
	n := len(f.svc.unsettled)
	f.svc.unsettledMu.Unlock()
	e, _, _ := f.db.Transactions().Ended(h.PhyOffset)
	if n != 0 || e.State != kvindex.TxnCommit {
		t.Fatalf("after the late commit became durable and indexed: %d unsettled entries left, end %v; want 0 and COMMIT",
			n, e.State)
	}
}

// The dispatcher's CommitHook records the commit of a committed record
// whose half ended as DISCARDED: a crash between storing a late commit of
// a given-up transaction and recording its end must not let the
// producer's repeated commit store the message a second time.
func TestALateCommitCrashedBeforeItsEndIsStoredOnce(t *testing.T) {
	f := newFixture(t, Config{Timeout: time.Second, CheckInterval: time.Second, CheckMax: 1})
	f.svc.cfg.WaitDispatched = f.disp.WaitFor
	h := f.sendHalf("U-LATE2", "")
	f.now = f.now.Add(time.Minute)
	if ps := f.pass(); ps.Checked != 1 || ps.Discarded != 1 {
		t.Fatalf("pass %+v, want one check and the half given up", ps)
	}
	// End stored the committed message, then the broker crashed before
	// recording the end (the in-memory unsettled note is lost with it).
	m, err := committedMessage(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Put(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	f.caughtUp()
	if err := f.svc.End(context.Background(), commitReq(h)); err != nil {
		t.Fatalf("repeated late commit: %v", err)
	}
	if n := len(f.store.putsIn("T")); n != 1 {
		t.Fatalf("the committed message is stored %d times, want 1", n)
	}
}
