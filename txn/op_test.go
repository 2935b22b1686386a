package txn

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/storetest"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// endAllThreeWays commits one half, rolls one back and has the checker
// give one up (CheckMax 1), and returns the three halves in that order.
func endAllThreeWays(t *testing.T, f *fixture) []*commitlog.Message {
	t.Helper()
	ctx := context.Background()
	committed, rolledBack, givenUp := f.sendHalf("C", ""), f.sendHalf("R", ""), f.sendHalf("D", "")
	if err := f.svc.End(ctx, commitReq(committed)); err != nil {
		t.Fatal(err)
	}
	rb := commitReq(rolledBack)
	rb.State = kvindex.TxnRollback
	if err := f.svc.End(ctx, rb); err != nil {
		t.Fatal(err)
	}
	// The given-up half is checked once and given up in the same pass;
	// the other two ended before the checker came to them.
	f.now = f.now.Add(time.Minute)
	if st := f.pass(); st != (PassStats{Checked: 1, Discarded: 1}) {
		t.Fatalf("first pass %+v, want one check and its give-up", st)
	}
	f.caughtUp()
	return []*commitlog.Message{committed, rolledBack, givenUp}
}

// Every end the index records (commit, rollback, given up) is followed by
// an op message: RMQ_SYS_TRANS_OP_HALF_TOPIC queue 0, tag "d" (tagsCode
// 100, as in the RocketMQ 4.9.8 fixture), WAIT true, a fresh UNIQ_KEY (as
// RocketMQ 5 writes them) and the half's queue offset in decimal as the
// body. The dispatcher records each as ending its half.
func TestEveryEndStoresItsOpMessage(t *testing.T) {
	ids := 0
	f := newFixture(t, Config{CheckMax: 1, NewUniqID: func() string { ids++; return "OP" + strconv.Itoa(ids) }})
	halves := endAllThreeWays(t, f)
	entries, err := f.db.ConsumeQueue(16).Get(meta.TransOpHalfTopic, 0, 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(halves) {
		t.Fatalf("%d op messages in %s/0, want one per ended transaction (%d)", len(entries), meta.TransOpHalfTopic, len(halves))
	}
	for i, e := range entries {
		h := halves[i]
		m, ok, err := f.st.ReadMessage(e.PhyOffset)
		if err != nil || !ok {
			t.Fatalf("op message %d at %d: %v %v", i, e.PhyOffset, ok, err)
		}
		p := commitlog.ParseProperties(m.Properties)
		if m.Topic != meta.TransOpHalfTopic || m.QueueID != 0 || m.QueueOffset != int64(i) ||
			string(m.Body) != strconv.FormatInt(h.QueueOffset, 10) || len(p) != 3 || p["TAGS"] != "d" || p["WAIT"] != "true" ||
			p["UNIQ_KEY"] != "OP"+strconv.Itoa(i+1) ||
			m.SysFlag != 0 || m.Flag != 0 || m.BornHost != storetest.StoreHost {
			t.Errorf("op message %d for the half at queue offset %d: %+v, properties %v", i, h.QueueOffset, m, p)
		}
		if e.TagsCode != 100 {
			t.Errorf("op message %d: tagsCode %d, want 100 (the hash of \"d\")", i, e.TagsCode)
		}
		if ended, err := f.db.Transactions().RocketMQOpEnded(h.QueueOffset, h.PhyOffset); !ended || err != nil {
			t.Errorf("op of the half at queue offset %d not recorded: %v %v", h.QueueOffset, ended, err)
		}
	}
}

// A slave copies the CommitLog, not the index: its dispatcher indexes the
// halves as open, the committed record as a commit, and nothing of a
// rollback or a give-up but their op messages. Promoted, its checker
// forgets all three halves and asks no producer about them.
func TestAPromotedSlaveKnowsWhichTransactionsEnded(t *testing.T) {
	f := newFixture(t, Config{CheckMax: 1})
	halves := endAllThreeWays(t, f)
	asked := f.askedCount()

	slaveDB, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(t.TempDir(), "kvindex"), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slaveDB.Close() })
	slave := &fixture{t: t, st: &storetest.Store{Dir: f.st.Dir, Log: f.log, DB: slaveDB}, log: f.log, db: slaveDB, now: f.now, answer: true}
	slave.store = &testStore{f: slave, Offsets: storetest.Offsets{}, gone: map[int64]bool{}}
	slave.svc = New(Config{CheckMax: 1}, slaveDB.Transactions(), slave.store, slave.ask, zerolog.Nop())
	slave.svc.now = func() time.Time { return slave.now }
	slave.disp = slave.st.StartDispatcher(t, kvindex.DispatcherOptions{
		Hooks:      map[string]kvindex.Hook{meta.TransHalfTopic: slave.svc.HalfHook(), meta.TransOpHalfTopic: slave.svc.OpHook()},
		CommitHook: slave.svc.CommitHook()})
	slave.caughtUp()

	if st := slave.pass(); st != (PassStats{Ended: 3}) {
		t.Fatalf("the promoted slave's first pass %+v, want the three ended halves forgotten", st)
	}
	if slave.askedCount() != 0 || len(slave.store.puts) != 0 {
		t.Fatalf("the promoted slave asked %d producers and stored %d messages about ended transactions",
			slave.askedCount(), len(slave.store.puts))
	}
	if f.askedCount() != asked {
		t.Fatal("the master was asked again")
	}

	// A late END_TRANSACTION on the promoted slave is answered as the
	// master would: the committed message tells a commit, an op without
	// one a rollback or a give-up.
	for _, tc := range []struct {
		half  int
		state kvindex.TxnState
		ok    bool
	}{
		{0, kvindex.TxnCommit, true}, {0, kvindex.TxnRollback, false},
		{1, kvindex.TxnRollback, true}, {1, kvindex.TxnCommit, false},
		{2, kvindex.TxnRollback, true}, {2, kvindex.TxnCommit, false},
	} {
		req := commitReq(halves[tc.half])
		req.State, req.FromTransactionCheck = tc.state, true
		err := slave.svc.End(context.Background(), req)
		if tc.ok && err != nil || !tc.ok && !errors.Is(err, ErrAlreadyEnded) {
			t.Errorf("END_TRANSACTION %s of half %d on the promoted slave: %v", tc.state, tc.half, err)
		}
	}
	if len(slave.store.puts) != 0 {
		t.Fatalf("late ends stored %d messages on the promoted slave", len(slave.store.puts))
	}
}

// The op message is advice to slaves and to RocketMQ: a rollback whose op
// cannot be stored is still recorded and answered as done.
func TestEndWithoutItsOpMessage(t *testing.T) {
	f := newFixture(t, Config{})
	h := f.sendHalf("U30", "")
	f.store.failPut = errors.New("disk full")
	rb := commitReq(h)
	rb.State = kvindex.TxnRollback
	if err := f.svc.End(context.Background(), rb); err != nil {
		t.Fatalf("rollback whose op cannot be stored: %v", err)
	}
	if e, ended, err := f.db.Transactions().Ended(h.PhyOffset); !ended || err != nil || e.State != kvindex.TxnRollback {
		t.Fatalf("end recorded %+v %v %v, want a rollback", e, ended, err)
	}
	if len(f.store.puts) != 0 {
		t.Fatalf("stored %+v", f.store.puts)
	}
}

// Retention drops the op keys of the halves before the half queue's
// minimum, and keeps the others.
func TestRetentionDropsOpsBelowTheHalfQueueMinimum(t *testing.T) {
	halfMin := int64(0)
	f := newFixture(t, Config{HalfQueueMin: func() (int64, error) { return halfMin, nil }})
	var halves []*commitlog.Message
	for _, uniq := range []string{"U40", "U41", "U42"} {
		h := f.sendHalf(uniq, "")
		rb := commitReq(h)
		rb.State = kvindex.TxnRollback
		if err := f.svc.End(context.Background(), rb); err != nil {
			t.Fatal(err)
		}
		halves = append(halves, h)
	}
	f.caughtUp()
	halfMin = halves[2].QueueOffset
	f.svc.LogMinOffsetChanged(halves[2].PhyOffset)
	for i, h := range halves {
		ended, err := f.db.Transactions().RocketMQOpEnded(h.QueueOffset, h.PhyOffset)
		if err != nil || ended != (i == 2) {
			t.Errorf("op of half %d (queue offset %d) recorded: %v %v, want %v", i, h.QueueOffset, ended, err, i == 2)
		}
	}
}

// An op message stored before a half is about another half that had its
// queue offset (the half queue's numbering started again after it, as
// when RocketMQ lost the half topic's consume queue): it does not end
// the half, which is checked. The op stored after it does.
func TestAnOpStoredBeforeTheHalfDoesNotEndIt(t *testing.T) {
	f := newFixture(t, Config{})
	stale := &commitlog.Message{Topic: meta.TransOpHalfTopic, QueueID: 0, BornTimestamp: f.now.UnixMilli(),
		Body: []byte("0,"), Properties: "TAGS\x01d\x02WAIT\x01true\x02"}
	if _, err := f.log.Append(context.Background(), commitlog.AppendRequest{Message: stale, Assigner: f.store}); err != nil {
		t.Fatal(err)
	}
	h := f.sendHalf("U50", "")
	if h.QueueOffset != 0 {
		t.Fatalf("the half took queue offset %d, want 0, the stale op's", h.QueueOffset)
	}
	f.now = f.now.Add(time.Minute)
	if st := f.pass(); st != (PassStats{Checked: 1}) {
		t.Fatalf("pass %+v, want the half checked: the op before it ended another half", st)
	}
	if f.askedCount() != 1 {
		t.Fatalf("%d producers asked, want 1", f.askedCount())
	}
	rb := commitReq(h)
	rb.State, rb.FromTransactionCheck = kvindex.TxnRollback, true
	if err := f.svc.End(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
	f.caughtUp()
	if ended, err := f.db.Transactions().RocketMQOpEnded(h.QueueOffset, h.PhyOffset); !ended || err != nil {
		t.Fatalf("the op stored after the half: ended %v %v", ended, err)
	}
}
