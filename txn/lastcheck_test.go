package txn

import (
	"context"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// checkTimesOf returns a message's TRANSACTION_CHECK_TIMES ("" when it
// carries none).
func checkTimesOf(m *commitlog.Message) string {
	v, _ := commitlog.LookupProperty(m.Properties, PropCheckTimes)
	return v
}

// A half is given up in the pass of its transactionCheckMax-th check, as
// RocketMQ's pass goes on to the copy it just stored again with that count
// and gives it up (needDiscard): the copy in TRANS_CHECK_MAX_TIME_TOPIC
// carries the count, and the producer's answer to that last check still
// commits, its message carrying the count as RocketMQ's commit of the
// copy the check named does.
func TestTheLastCheckGivesTheHalfUpInItsPassAndItsAnswerStillCommits(t *testing.T) {
	f := newFixture(t, Config{Timeout: 6 * time.Second, CheckInterval: 30 * time.Second, CheckMax: 15})
	h := f.sendHalf("U-LAST", "")
	f.now = time.UnixMilli(h.BornTimestamp).Add(6*time.Second + time.Millisecond)
	for i := 1; i < 15; i++ {
		if st := f.pass(); st != (PassStats{Checked: 1}) {
			t.Fatalf("pass %d: %+v, want one check", i, st)
		}
		f.now = f.now.Add(30 * time.Second)
	}
	if st := f.pass(); st != (PassStats{Checked: 1, Discarded: 1}) {
		t.Fatalf("pass of the 15th check: %+v, want the check and the give-up", st)
	}
	if n := f.askedCount(); n != 15 {
		t.Fatalf("asked %d times, want 15", n)
	}
	copies := f.store.putsIn(meta.TransCheckMaxTopic)
	if len(copies) != 1 || checkTimesOf(copies[0]) != "15" {
		t.Fatalf("%d copies in %s (%v), want one with TRANSACTION_CHECK_TIMES 15", len(copies), meta.TransCheckMaxTopic, copies)
	}
	// The answer to the 15th check, after the give-up.
	answer := commitReq(h)
	answer.FromTransactionCheck = true
	if err := f.svc.End(context.Background(), answer); err != nil {
		t.Fatalf("commit answering the last check: %v", err)
	}
	committed := f.store.putsIn("T")
	if len(committed) != 1 || checkTimesOf(committed[0]) != "15" {
		t.Fatalf("committed %v, want one message carrying TRANSACTION_CHECK_TIMES 15", committed)
	}
	if e, ok, err := f.db.Transactions().Ended(h.PhyOffset); err != nil || !ok || e.State != kvindex.TxnCommit {
		t.Fatalf("end after the answer: %+v %v %v, want COMMIT", e, ok, err)
	}
	f.now = f.now.Add(time.Hour)
	if st := f.pass(); st != (PassStats{}) || f.askedCount() != 15 {
		t.Fatalf("pass after: %+v, %d asked; want nothing more", st, f.askedCount())
	}
}

// transactionCheckMax 0 (accepted, as RocketMQ accepts it): RocketMQ's
// needDiscard gives a half stored without TRANSACTION_CHECK_TIMES its
// first check, counted 1, and gives up the copy carrying that count in
// the same pass; a half stored with a count (RESUME_CHECK_HALF_MESSAGE
// stores 0) is given up without a check. The half still waits for its
// immunity (transactionTimeOut) first.
func TestACheckMaxOfZeroAsksOnceAndGivesUpAResumedHalfUnasked(t *testing.T) {
	f := newFixture(t, Config{Limits: func() Limits {
		return Limits{Timeout: 6 * time.Second, CheckInterval: 30 * time.Second, CheckMax: 0}
	}})
	h := f.sendHalf("U-ZERO", "")
	if o, _ := f.open(h.PhyOffset); o.NextCheckAt != h.BornTimestamp+6001 {
		t.Fatalf("first check at %d, want after transactionTimeOut (%d)", o.NextCheckAt, h.BornTimestamp+6001)
	}
	f.now = f.now.Add(6 * time.Second)
	if st := f.pass(); st != (PassStats{}) {
		t.Fatalf("pass within the immunity: %+v, want nothing", st)
	}
	f.now = f.now.Add(time.Millisecond)
	if st := f.pass(); st != (PassStats{Checked: 1, Discarded: 1}) {
		t.Fatalf("pass after the immunity: %+v, want one check and the give-up", st)
	}
	copies := f.store.putsIn(meta.TransCheckMaxTopic)
	if len(copies) != 1 || checkTimesOf(copies[0]) != "1" {
		t.Fatalf("copies %v, want one with TRANSACTION_CHECK_TIMES 1", copies)
	}

	// The copy resumed: it carries a count of 0, and is given up at its
	// first pass without a check.
	at := f.log.MaxOffset()
	if err := f.svc.Resume(context.Background(), copyOffset(t, f, h)); err != nil {
		t.Fatal(err)
	}
	f.caughtUp()
	resumed, ok, err := f.st.ReadMessage(at)
	if err != nil || !ok || resumed.Topic != meta.TransHalfTopic {
		t.Fatalf("resumed half at %d: %+v %v %v", at, resumed, ok, err)
	}
	f.now = f.now.Add(time.Minute)
	if st := f.pass(); st != (PassStats{Discarded: 1}) || f.askedCount() != 1 {
		t.Fatalf("pass over the resumed half: %+v, %d asked; want it given up unasked", st, f.askedCount())
	}
	if copies := f.store.putsIn(meta.TransCheckMaxTopic); len(copies) != 2 || checkTimesOf(copies[1]) != "0" {
		t.Fatalf("copies %v, want a second one with TRANSACTION_CHECK_TIMES 0", copies)
	}
}

// copyOffset returns the CommitLog offset of the copy in
// TRANS_CHECK_MAX_TIME_TOPIC its give-up recorded for half h.
func copyOffset(t *testing.T, f *fixture, h *commitlog.Message) int64 {
	t.Helper()
	e, ok, err := f.db.Transactions().Ended(h.PhyOffset)
	if err != nil || !ok || e.State != kvindex.TxnDiscarded || e.By <= h.PhyOffset {
		t.Fatalf("give-up of the half at %d: %+v %v %v, want DISCARDED naming its copy", h.PhyOffset, e, ok, err)
	}
	m, ok, err := f.st.ReadMessage(e.By)
	if err != nil || !ok || m.Topic != meta.TransCheckMaxTopic {
		t.Fatalf("record at %d: %+v %v %v, want the copy in %s", e.By, m, ok, err, meta.TransCheckMaxTopic)
	}
	return e.By
}
