package txn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/storetest"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// fixture is a CommitLog, an index and a dispatcher with the service's
// hooks: what the broker wires, without the network.
type fixture struct {
	t     testing.TB
	st    *storetest.Store
	log   *commitlog.Log
	db    *kvindex.DB
	disp  *kvindex.Dispatcher
	svc   *Service
	store *testStore
	now   time.Time
	// storeMs is the CommitLog's clock (Unix ms): sendHalf sets it to
	// now, so a half is stored when it is born unless a test says
	// otherwise.
	storeMs atomic.Int64

	mu     sync.Mutex
	asked  []Check
	answer bool // what ask reports: a producer was connected
}

// testStore appends to the fixture's log; failPut makes Put fail, gone
// makes Read find nothing at an offset, and stalled makes what Put
// stores undurable: Put reports ErrNotDurable, WaitDurable false.
type testStore struct {
	f  *fixture
	mu sync.Mutex
	storetest.Offsets
	failPut error
	stalled bool
	gone    map[int64]bool
	puts    []*commitlog.Message
}

func (s *testStore) Put(ctx context.Context, m *commitlog.Message) (commitlog.AppendResult, error) {
	s.mu.Lock()
	err, stalled := s.failPut, s.stalled
	s.mu.Unlock()
	if err != nil {
		return commitlog.AppendResult{}, err
	}
	res, err := s.f.log.Append(ctx, commitlog.AppendRequest{Message: m, Assigner: s})
	if err == nil {
		s.mu.Lock()
		s.puts = append(s.puts, m)
		s.mu.Unlock()
		if stalled {
			err = fmt.Errorf("stored at %d: %w", res.PhyOffset, ErrNotDurable)
		}
	}
	return res, err
}

func (s *testStore) WaitDurable(context.Context, int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.stalled
}

func (s *testStore) stall(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalled = on
}

// putsIn returns the messages Put stored in topic, in order.
func (s *testStore) putsIn(topic string) []*commitlog.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var in []*commitlog.Message
	for _, m := range s.puts {
		if m.Topic == topic {
			in = append(in, m)
		}
	}
	return in
}

func (s *testStore) Read(phy int64) (commitlog.Message, bool, error) {
	s.mu.Lock()
	gone := s.gone[phy]
	s.mu.Unlock()
	if gone {
		return commitlog.Message{}, false, nil
	}
	return s.f.st.ReadMessage(phy)
}

func newFixture(t testing.TB, cfg Config) *fixture {
	t.Helper()
	return newFixtureHooking(t, cfg, nil)
}

// newFixtureHooking is newFixture whose dispatcher runs the half hook
// wrap returns for the service's (nil: the service's own).
func newFixtureHooking(t testing.TB, cfg Config, wrap func(kvindex.Hook) kvindex.Hook) *fixture {
	t.Helper()
	f := &fixture{t: t, now: time.UnixMilli(1_700_000_000_000), answer: true}
	f.storeMs.Store(f.now.UnixMilli())
	f.st = storetest.OpenWithClock(t, func() time.Time { return time.UnixMilli(f.storeMs.Load()) })
	f.log, f.db = f.st.Log, f.st.DB
	f.store = &testStore{f: f, Offsets: storetest.Offsets{}, gone: map[int64]bool{}}
	f.svc = New(cfg, f.db.Transactions(), f.store, f.ask, zerolog.Nop())
	f.svc.now = func() time.Time { return f.now }
	f.log.OnMinOffsetChange(f.svc.LogMinOffsetChanged)
	half := f.svc.HalfHook()
	if wrap != nil {
		half = wrap(half)
	}
	f.disp = f.st.StartDispatcher(t, kvindex.DispatcherOptions{
		Hooks:      map[string]kvindex.Hook{meta.TransHalfTopic: half, meta.TransOpHalfTopic: f.svc.OpHook()},
		CommitHook: f.svc.CommitHook()})
	return f
}

func (f *fixture) ask(c Check) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, c)
	return f.answer
}

func (f *fixture) askedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

// sendHalf stores a half as the broker does for a send, born and stored
// now, and waits until it is dispatched (and so open).
func (f *fixture) sendHalf(uniq string, props string) *commitlog.Message {
	f.t.Helper()
	return f.sendHalfBorn(uniq, props, f.now)
}

// sendHalfBorn is sendHalf with the producer's clock at born.
func (f *fixture) sendHalfBorn(uniq string, props string, born time.Time) *commitlog.Message {
	f.t.Helper()
	m := &commitlog.Message{Topic: "T", QueueID: 1, BornTimestamp: born.UnixMilli(), Body: []byte("b-" + uniq),
		Properties: "PGROUP\x01pg\x02UNIQ_KEY\x01" + uniq + "\x02TRAN_MSG\x01true\x02" + props}
	ToHalf(m)
	f.storeMs.Store(f.now.UnixMilli())
	res, err := f.log.Append(context.Background(), commitlog.AppendRequest{Message: m, Assigner: f.store})
	if err != nil {
		f.t.Fatal(err)
	}
	f.caughtUp()
	m.PhyOffset = res.PhyOffset
	m.QueueOffset = res.QueueOffset
	return m
}

func (f *fixture) caughtUp() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.disp.WaitFor(ctx, f.log.MaxOffset()); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) open(phy int64) (kvindex.TxnHalf, bool) {
	f.t.Helper()
	h, ok, err := f.db.Transactions().Half(phy)
	if err != nil {
		f.t.Fatal(err)
	}
	return h, ok
}

func (f *fixture) pass() PassStats {
	f.t.Helper()
	st, err := f.svc.CheckDue(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

func commitReq(h *commitlog.Message) EndRequest {
	return EndRequest{ProducerGroup: "pg", TranStateTableOffset: h.QueueOffset, CommitLogOffset: h.PhyOffset, State: kvindex.TxnCommit}
}

func TestEndKeepsTheTransactionOpenWhenTheCommitCannotBeStored(t *testing.T) {
	f := newFixture(t, Config{})
	h := f.sendHalf("U1", "")
	f.store.failPut = errors.New("disk full")
	if err := f.svc.End(context.Background(), commitReq(h)); err == nil || !errors.Is(err, f.store.failPut) {
		t.Fatalf("End with a failing store: %v", err)
	}
	if _, open := f.open(h.PhyOffset); !open {
		t.Fatal("a commit that could not be stored ended the transaction")
	}
	if _, ended, _ := f.db.Transactions().Ended(h.PhyOffset); ended {
		t.Fatal("a commit that could not be stored was recorded")
	}
	f.store.failPut = nil
	if err := f.svc.End(context.Background(), commitReq(h)); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.End(context.Background(), commitReq(h)); err != nil {
		t.Fatal(err)
	}
	if got := f.store.putsIn("T"); len(got) != 1 || got[0].QueueID != 1 {
		t.Fatalf("stored %d committed messages, want 1 in T/1: %+v", len(got), got)
	}
	if ops := f.store.putsIn(meta.TransOpHalfTopic); len(ops) != 1 {
		t.Fatalf("stored %d op messages for one commit, want 1", len(ops))
	}
}

func TestCheckSchedule(t *testing.T) {
	f := newFixture(t, Config{Timeout: 6 * time.Second, CheckInterval: 30 * time.Second, CheckMax: 3})
	h := f.sendHalf("U2", "")
	open, _ := f.open(h.PhyOffset)
	// RocketMQ checks a half once now-born exceeds transactionTimeOut.
	if open.NextCheckAt != h.BornTimestamp+6001 || open.QueueOffset != h.QueueOffset || open.Checks != 0 {
		t.Fatalf("open half %+v, want the first check 6 s after its born time %d", open, h.BornTimestamp)
	}
	f.now = time.UnixMilli(h.BornTimestamp)
	steps := []struct {
		advance time.Duration
		answer  bool
		want    PassStats
		checks  int32
	}{
		{6000 * time.Millisecond, true, PassStats{}, 0},
		{time.Millisecond, true, PassStats{Checked: 1}, 1},
		{29 * time.Second, true, PassStats{}, 1},
		{time.Second, false, PassStats{Unasked: 1}, 2},                   // no producer: counts all the same
		{30 * time.Second, true, PassStats{Checked: 1, Discarded: 1}, 3}, // the third check, then given up
		{time.Hour, true, PassStats{}, 3},
	}
	for i, s := range steps {
		f.now = f.now.Add(s.advance)
		f.mu.Lock()
		f.answer = s.answer
		f.mu.Unlock()
		if got := f.pass(); got != s.want {
			t.Fatalf("step %d: pass %+v, want %+v", i, got, s.want)
		}
		if cur, ok := f.open(h.PhyOffset); ok && cur.Checks != s.checks {
			t.Fatalf("step %d: %d checks recorded, want %d", i, cur.Checks, s.checks)
		}
	}
	if n := f.askedCount(); n != 3 {
		t.Fatalf("asked %d times, want 3 (two checks sent, one without a producer)", n)
	}
	c := f.asked[0]
	body, err := commitlog.Decode(c.Body)
	if err != nil || c.ProducerGroup != "pg" || c.CommitLogOffset != h.PhyOffset || c.TranStateTableOffset != h.QueueOffset ||
		c.MsgID != "U2" || c.TransactionID != "U2" || c.Topic != meta.TransHalfTopic || body.Topic != "T" || body.QueueID != 1 {
		t.Fatalf("check %+v, body %+v (%v)", c, body, err)
	}
	if got := f.store.putsIn(meta.TransCheckMaxTopic); len(got) != 1 || len(f.store.puts) != 2 {
		t.Fatalf("discard stored %+v, want the half in %s and its op", f.store.puts, meta.TransCheckMaxTopic)
	}
	if e, ended, _ := f.db.Transactions().Ended(h.PhyOffset); !ended || e.State != kvindex.TxnDiscarded {
		t.Fatalf("discarded transaction ended %+v %v", e, ended)
	}
}

// A half naming CHECK_IMMUNITY_TIME_IN_SECONDS is first checked once
// now-born exceeds those seconds, whether longer or shorter than
// transactionTimeOut, as RocketMQ's checker reads them (its
// END_TRANSACTION takes the longer of the two, endImmunity); a value that
// is no number, or -1, is transactionTimeOut.
func TestImmunityTimeSetsTheFirstCheck(t *testing.T) {
	f := newFixture(t, Config{Timeout: 6 * time.Second})
	for i, c := range []struct {
		secs string
		want int64 // ms after the born time, +1
	}{{"60", 60_000}, {"1", 1000}, {"0", 0}, {"x", 6000}, {"", 6000}, {"-1", 6000}} {
		h := f.sendHalf(fmt.Sprintf("UI%d", i), "CHECK_IMMUNITY_TIME_IN_SECONDS\x01"+c.secs+"\x02")
		open, _ := f.open(h.PhyOffset)
		if open.NextCheckAt != h.BornTimestamp+c.want+1 {
			t.Errorf("immunity %q: first check at born+%d ms, want +%d", c.secs, open.NextCheckAt-h.BornTimestamp, c.want+1)
		}
	}
}

// An immunity time too long for int64 milliseconds is the latest check
// time, not an overflowed one that would check the half at once or at a
// random time.
func TestAnImmunityTimeBeyondMillisecondsIsTheLatestCheck(t *testing.T) {
	f := newFixture(t, Config{Timeout: 6 * time.Second})
	for _, c := range []struct {
		secs string
		want func(born int64) int64
	}{
		{"9300000000", func(born int64) int64 { return born + 9_300_000_000_000 + 1 }},
		{"9223372036854775", func(int64) int64 { return math.MaxInt64 }},
		{"9223372036854775807", func(int64) int64 { return math.MaxInt64 }},
	} {
		h := f.sendHalf("UX"+c.secs, "CHECK_IMMUNITY_TIME_IN_SECONDS\x01"+c.secs+"\x02")
		open, _ := f.open(h.PhyOffset)
		if want := c.want(h.BornTimestamp); open.NextCheckAt != want {
			t.Fatalf("immunity %s s: first check at %d, want %d", c.secs, open.NextCheckAt, want)
		}
	}
}

// The first check counts from the born time (the producer's clock), not
// the store time, as RocketMQ's: a half born long before it was stored
// is checked at the first pass, one born in the future is checked at
// once until its born time comes, then not before transactionTimeOut
// after it; one naming an immunity is not checked before born+immunity.
func TestTheFirstCheckCountsFromTheBornTime(t *testing.T) {
	f := newFixture(t, Config{Timeout: 20 * time.Second, CheckInterval: 30 * time.Second, CheckMax: 10})
	stored := f.now
	behind := f.sendHalfBorn("BEHIND", "", stored.Add(-time.Minute))
	ahead := f.sendHalfBorn("AHEAD", "", stored.Add(45*time.Second))
	aheadImm := f.sendHalfBorn("AHEAD-IMM", "CHECK_IMMUNITY_TIME_IN_SECONDS\x0110\x02", stored.Add(45*time.Second))
	checks := func(h *commitlog.Message) int32 {
		o, _ := f.open(h.PhyOffset)
		return o.Checks
	}
	steps := []struct {
		at                      time.Duration // after the store time
		behind, ahead, aheadImm int32
		immune                  int // halves due but put off at the pass
	}{
		{0, 1, 1, 0, 0}, // the one behind is overdue, the one ahead not yet born
		{30 * time.Second, 2, 2, 0, 0},
		{55 * time.Second, 2, 2, 0, 0},
		{55*time.Second + time.Millisecond, 2, 2, 1, 0}, // born 10.001 s ago
		{60 * time.Second, 3, 2, 1, 1},                  // born 15 s ago: within the 20 s
		{65 * time.Second, 3, 2, 1, 0},
		{65*time.Second + time.Millisecond, 3, 3, 1, 0},
		{85*time.Second + time.Millisecond, 3, 3, 2, 0},
		{90 * time.Second, 4, 3, 2, 0},
		{95*time.Second + time.Millisecond, 4, 4, 2, 0},
	}
	for i, s := range steps {
		f.now = stored.Add(s.at)
		st := f.pass()
		if b, a, ai := checks(behind), checks(ahead), checks(aheadImm); b != s.behind || a != s.ahead || ai != s.aheadImm || st.Immune != s.immune {
			t.Fatalf("step %d (+%v): checks %d, %d, %d, %d put off; want %d, %d, %d, %d",
				i, s.at, b, a, ai, st.Immune, s.behind, s.ahead, s.aheadImm, s.immune)
		}
	}
}

func TestCheckerForgetsHalvesThatEndedOrLeftTheLog(t *testing.T) {
	f := newFixture(t, Config{Timeout: time.Second})
	ended := f.sendHalf("U5", "")
	gone := f.sendHalf("U6", "")
	// A commit ended the first without removing its open record (as after a
	// crash that re-dispatched the half); the second's record is gone.
	if err := f.db.Transactions().End(ended.PhyOffset, kvindex.TxnEnd{State: kvindex.TxnCommit}); err != nil {
		t.Fatal(err)
	}
	f.disp.Close()
	if err := f.db.SetDispatched(ended.PhyOffset); err != nil {
		t.Fatal(err)
	}
	f.disp = f.st.StartDispatcher(t, kvindex.DispatcherOptions{Hooks: map[string]kvindex.Hook{meta.TransHalfTopic: f.svc.HalfHook()}})
	f.caughtUp()
	if _, open := f.open(ended.PhyOffset); !open {
		t.Fatal("re-dispatch did not bring the ended half back: the test does not test what it says")
	}
	f.store.gone[gone.PhyOffset] = true
	f.now = f.now.Add(time.Minute)
	if st := f.pass(); st != (PassStats{Ended: 1, Gone: 1}) {
		t.Fatalf("pass %+v, want one ended and one gone", st)
	}
	for _, h := range []*commitlog.Message{ended, gone} {
		if _, open := f.open(h.PhyOffset); open {
			t.Errorf("half at %d still open", h.PhyOffset)
		}
	}
	if f.askedCount() != 0 {
		t.Fatalf("asked %d producers about ended or gone transactions", f.askedCount())
	}
}

func TestRetentionDropsTransactionsBelowTheLogMinimum(t *testing.T) {
	f := newFixture(t, Config{})
	first := f.sendHalf("U7", "")
	second := f.sendHalf("U8", "")
	if err := f.db.Transactions().End(first.PhyOffset, kvindex.TxnEnd{State: kvindex.TxnRollback}); err != nil {
		t.Fatal(err)
	}
	f.svc.LogMinOffsetChanged(second.PhyOffset)
	if _, ended, _ := f.db.Transactions().Ended(first.PhyOffset); ended {
		t.Fatal("end of a half below the minimum kept")
	}
	if _, open := f.open(second.PhyOffset); !open {
		t.Fatal("half at the minimum dropped")
	}
}

// The checker's passes start at the first open half, or after every half
// the dispatcher committed when none is open, and still see every half
// indexed later.
func TestCheckerPassesStartAfterEndedHalves(t *testing.T) {
	f := newFixture(t, Config{Timeout: time.Second})
	f.svc.cfg.Dispatched = f.disp.Dispatched
	a := f.sendHalf("U9", "")
	b := f.sendHalf("U10", "")
	if err := f.svc.End(context.Background(), commitReq(a)); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(time.Minute)
	if st := f.pass(); st.Checked != 1 || f.svc.scanFrom != b.PhyOffset {
		t.Fatalf("pass %+v starts next at %d, want at the open half %d", st, f.svc.scanFrom, b.PhyOffset)
	}
	if err := f.svc.End(context.Background(), commitReq(b)); err != nil {
		t.Fatal(err)
	}
	// The commit record is appended but dispatched asynchronously; the
	// cursor can only move past what the dispatcher has committed. The
	// pass lists at the checked half's next check (nothing could be due
	// before).
	f.caughtUp()
	f.now = f.now.Add(f.svc.cfg.CheckInterval)
	if st := f.pass(); st != (PassStats{}) || f.svc.scanFrom != f.disp.Dispatched() {
		t.Fatalf("pass %+v starts next at %d, want after everything dispatched (%d)", st, f.svc.scanFrom, f.disp.Dispatched())
	}
	c := f.sendHalf("U11", "")
	f.now = f.now.Add(time.Minute)
	if st := f.pass(); st.Checked != 1 || f.asked[len(f.asked)-1].CommitLogOffset != c.PhyOffset {
		t.Fatalf("a half indexed after the cursor moved: pass %+v", st)
	}
}

// OnEnd hears of each transaction an END_TRANSACTION ends, once, with
// the topic its message was sent to and its born time; not of a repeated
// end, nor of a failed one.
func TestOnEndCountsEachEndOnce(t *testing.T) {
	type ended struct {
		topic string
		state kvindex.TxnState
		born  int64
	}
	var got []ended
	f := newFixture(t, Config{OnEnd: func(topic string, state kvindex.TxnState, born int64) { got = append(got, ended{topic, state, born}) }})
	a := f.sendHalf("U20", "")
	b := f.sendHalf("U21", "")
	ctx := context.Background()
	if err := f.svc.End(ctx, commitReq(a)); err != nil {
		t.Fatal(err)
	}
	_ = f.svc.End(ctx, commitReq(a)) // repeated: changes nothing
	rb := commitReq(b)
	rb.State = kvindex.TxnRollback
	if err := f.svc.End(ctx, rb); err != nil {
		t.Fatal(err)
	}
	c := f.sendHalf("U22", "")
	f.store.failPut = errors.New("disk full")
	if err := f.svc.End(ctx, commitReq(c)); err == nil {
		t.Fatal("a commit that could not be stored succeeded")
	}
	topic, _, _ := commitlog.RealDestination(a.Properties)
	want := []ended{{topic, kvindex.TxnCommit, a.BornTimestamp}, {topic, kvindex.TxnRollback, b.BornTimestamp}}
	if topic == "" || len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("OnEnd heard %v, want %v", got, want)
	}
}

// A pass before any open half can be due lists none of them: the listing
// walks every open half and the deletion marks of every half ended after
// the oldest open one. A half indexed since the last listing, due
// earlier, makes the next pass list again, and so does a checked half's
// next check.
func TestAPassListsNothingBeforeAHalfCanBeDue(t *testing.T) {
	f := newFixture(t, Config{Timeout: 6 * time.Second, CheckInterval: 30 * time.Second, CheckMax: 5})
	long := f.sendHalf("L", "CHECK_IMMUNITY_TIME_IN_SECONDS\x0160\x02")
	open, _ := f.open(long.PhyOffset)
	f.now = time.UnixMilli(open.StoreTimestamp + 1000)
	listings := func() int { return f.svc.listings }
	f.pass()
	if listings() != 1 {
		t.Fatalf("the first pass listed %d times, want 1", listings())
	}
	for i := range 5 {
		f.now = f.now.Add(time.Second)
		if st := f.pass(); st != (PassStats{}) {
			t.Fatalf("pass %d: %+v", i, st)
		}
	}
	if listings() != 1 {
		t.Fatalf("passes before any half could be due listed %d times, want once", listings())
	}
	// A half due 6 s after its store time, before the long one.
	short := f.sendHalf("S", "")
	so, _ := f.open(short.PhyOffset)
	f.now = time.UnixMilli(so.NextCheckAt)
	if st := f.pass(); st.Checked != 1 || listings() != 2 {
		t.Fatalf("pass when the new half is due: %+v after %d listings, want it checked by a second listing", st, listings())
	}
	// Its next check comes 30 s later, the long one's at +60 s.
	f.now = f.now.Add(29 * time.Second)
	if st := f.pass(); st != (PassStats{}) || listings() != 2 {
		t.Fatalf("pass before the next check: %+v after %d listings", st, listings())
	}
	f.now = f.now.Add(time.Second)
	if st := f.pass(); st.Checked != 1 || listings() != 3 {
		t.Fatalf("pass at the short half's second check: %+v after %d listings", st, listings())
	}
	f.now = time.UnixMilli(open.NextCheckAt)
	if st := f.pass(); st.Checked < 1 || listings() != 4 {
		t.Fatalf("pass at the long half's first check: %+v after %d listings", st, listings())
	}
	if h, _ := f.open(long.PhyOffset); h.Checks != 1 {
		t.Fatalf("the long half was checked %d times, want 1", h.Checks)
	}
}
