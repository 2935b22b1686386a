package timer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
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

// base is the fixture's starting clock, on a whole second.
const base = int64(1_700_000_000_000)

// fixture is a CommitLog, an index and a dispatcher with the service's
// hook on the timer topic: what the broker wires, without the network.
// (txn's fixture lives in a _test file of its own package, so it cannot
// be shared; this one is kept to what the timer needs.)
type fixture struct {
	t     testing.TB
	st    *storetest.Store
	log   *commitlog.Log
	db    *kvindex.DB
	disp  *kvindex.Dispatcher
	svc   *Service
	store *fakeStore
	nowMs atomic.Int64 // read by the hook on the dispatcher's goroutine
	// stopEnqueue is the service's Options.StopEnqueue.
	stopEnqueue atomic.Bool
}

// fakeStore appends to the fixture's log. fail, when set, is asked
// before each PutBatch (call counts from 1) and can refuse it; stored
// records every batch that was appended, reads how often each offset was
// read.
type fakeStore struct {
	f  *fixture
	mu sync.Mutex
	storetest.Offsets
	calls  int
	fail   func(call int, msgs []*commitlog.Message) error
	stored [][]*commitlog.Message
	reads  map[int64]int
}

func (s *fakeStore) PutBatch(ctx context.Context, msgs []*commitlog.Message) error {
	s.mu.Lock()
	s.calls++
	call, fail := s.calls, s.fail
	s.mu.Unlock()
	if fail != nil {
		if err := fail(call, msgs); err != nil {
			return err
		}
	}
	if _, err := s.f.log.Append(ctx, commitlog.AppendRequest{Batch: msgs, Assigner: s}); err != nil {
		return err
	}
	s.mu.Lock()
	s.stored = append(s.stored, msgs)
	s.mu.Unlock()
	return nil
}

func (s *fakeStore) Read(phy int64) (commitlog.Message, bool, error) {
	s.mu.Lock()
	if s.reads == nil {
		s.reads = map[int64]int{}
	}
	s.reads[phy]++
	s.mu.Unlock()
	return s.f.st.ReadMessage(phy)
}

// readCounts returns how often each offset was read, and forgets it.
func (s *fakeStore) readCounts() map[int64]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reads
	s.reads = nil
	return r
}

// batches returns the stored batches.
func (s *fakeStore) batches() [][]*commitlog.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]*commitlog.Message(nil), s.stored...)
}

// errTransient is a store failure a later round retries.
var errTransient = errors.New("disk full")

// tooLarge refuses, as the log would, any batch holding a message whose
// body starts with "huge".
func tooLarge(_ int, msgs []*commitlog.Message) error {
	for _, m := range msgs {
		if strings.HasPrefix(string(m.Body), "huge") {
			return fmt.Errorf("append %d messages: %w", len(msgs), commitlog.ErrMessageTooLarge)
		}
	}
	return nil
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{t: t}
	f.nowMs.Store(base)
	f.st = storetest.OpenWithClock(t, func() time.Time { return time.UnixMilli(f.nowMs.Load()) })
	f.log, f.db = f.st.Log, f.st.DB
	f.store = &fakeStore{f: f, Offsets: storetest.Offsets{}}
	f.svc = New(f.db.Timers(), f.store, Options{Dispatched: func() int64 { return f.disp.Dispatched() }, StopEnqueue: f.stopEnqueue.Load}, zerolog.Nop())
	f.svc.now = func() time.Time { return time.UnixMilli(f.nowMs.Load()) }
	f.disp = f.st.StartDispatcher(t, kvindex.DispatcherOptions{Hooks: map[string]kvindex.Hook{meta.TimerTopic: f.svc.Hook()}})
	return f
}

// parked is a timer message as the fixture parked it.
type parked struct {
	uniq           string
	phy            int64
	outMs          int64
	storeTimestamp int64
}

// park parks a message for topic/queue due sec seconds after base (half a
// second more, which Park floors away) as the broker does at send, with
// the fixture's clock as the send time, and appends it. Call caughtUp
// before a round.
func (f *fixture) park(uniq, topic string, qid int32, sec int, props string) parked {
	f.t.Helper()
	return f.parkAt(time.UnixMilli(f.nowMs.Load()), uniq, topic, qid, sec, props)
}

func (f *fixture) parkAt(now time.Time, uniq, topic string, qid int32, sec int, props string) parked {
	f.t.Helper()
	deliver := base + int64(sec)*1000 + 500
	m := &commitlog.Message{Topic: topic, QueueID: qid, BornTimestamp: now.UnixMilli(), Body: []byte("body-" + uniq),
		Properties: "UNIQ_KEY\x01" + uniq + "\x02TIMER_DELIVER_MS\x01" + strconv.FormatInt(deliver, 10) + "\x02" + props}
	if strings.HasPrefix(uniq, "huge") {
		m.Body = []byte(uniq)
	}
	ok, err := Park(m, now, DefaultConfig())
	if err != nil || !ok {
		f.t.Fatalf("park %s: parked %v, %v", uniq, ok, err)
	}
	return f.appendParked(m, uniq)
}

// appendParked appends a record of the timer topic.
func (f *fixture) appendParked(m *commitlog.Message, uniq string) parked {
	f.t.Helper()
	res, err := f.log.Append(context.Background(), commitlog.AppendRequest{Message: m, Assigner: f.store})
	if err != nil {
		f.t.Fatal(err)
	}
	out, _ := commitlog.LookupProperty(m.Properties, PropOutMs)
	outMs, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		f.t.Fatalf("parked %s without TIMER_OUT_MS: %q", uniq, m.Properties)
	}
	return parked{uniq: uniq, phy: res.PhyOffset, outMs: outMs, storeTimestamp: res.StoreTimestamp}
}

func (f *fixture) caughtUp() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.disp.WaitFor(ctx, f.log.MaxOffset()); err != nil {
		f.t.Fatal(err)
	}
}

// at sets the clock to sec seconds after base.
func (f *fixture) at(sec int) { f.nowMs.Store(base + int64(sec)*1000) }

// pending returns every timer entry still in the index.
func (f *fixture) pending() []kvindex.TimerEntry {
	f.t.Helper()
	due, err := f.db.Timers().Due(math.MaxInt64, 10_000)
	if err != nil {
		f.t.Fatal(err)
	}
	return due
}

func (f *fixture) pendingAt(phys ...int64) bool {
	got := map[int64]bool{}
	for _, e := range f.pending() {
		got[e.PhyOffset] = true
	}
	for _, p := range phys {
		if !got[p] {
			return false
		}
	}
	return len(got) == len(phys)
}

// deliveries counts the stored messages by UNIQ_KEY.
func (f *fixture) deliveries() map[string]int {
	n := map[string]int{}
	for _, b := range f.store.batches() {
		for _, m := range b {
			u, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyUniqID)
			n[u]++
		}
	}
	return n
}

// wantDelivered fails unless exactly the named messages were stored, each
// once.
func (f *fixture) wantDelivered(uniqs ...string) {
	f.t.Helper()
	got := f.deliveries()
	want := map[string]int{}
	for _, u := range uniqs {
		want[u] = 1
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		f.t.Fatalf("delivered %v, want %v", got, want)
	}
}

func (f *fixture) round() (int, error) {
	return f.svc.DeliverDue(context.Background())
}

func (f *fixture) roundOK() int {
	f.t.Helper()
	n, err := f.round()
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

func TestDeliverDueDeliversWhatIsDueOnceAndKeepsTheRest(t *testing.T) {
	f := newFixture(t)
	a := f.park("A", "Orders", 3, 5, "KEYS\x01k\x02")
	b := f.park("B", "Orders", 3, 10, "")
	later := f.park("L", "Orders", 3, 60, "")
	f.caughtUp()
	if a.outMs != base+5000 || later.outMs != base+60_000 {
		t.Fatalf("parked at %d and %d: the fixture's clock is off", a.outMs, later.outMs)
	}

	if n := f.roundOK(); n != 0 {
		t.Fatalf("%d delivered before anything was due", n)
	}
	f.at(30)
	if n := f.roundOK(); n != 2 {
		t.Fatalf("delivered %d, want 2", n)
	}
	f.wantDelivered("A", "B")
	if !f.pendingAt(later.phy) {
		t.Fatalf("entries left %v, want only the one not due at %d", f.pending(), later.phy)
	}
	bs := f.store.batches()
	if len(bs) != 1 || len(bs[0]) != 2 {
		t.Fatalf("stored %d batches, want one of A and B", len(bs))
	}
	for i, p := range []parked{a, b} {
		m := bs[0][i]
		props := commitlog.ParseProperties(m.Properties)
		if m.Topic != "Orders" || m.QueueID != 3 || string(m.Body) != "body-"+p.uniq || props["UNIQ_KEY"] != p.uniq {
			t.Fatalf("delivered %d: %s/%d body %q uniq %s, want Orders/3 %s in order", i, m.Topic, m.QueueID, m.Body, props["UNIQ_KEY"], p.uniq)
		}
		// RocketMQ's TIMER_ENQUEUE_MS is its timer's write time when it
		// took the message in: a multiple of timerPrecisionMs.
		if enq := p.storeTimestamp / 1000 * 1000; props[PropEnqueueMs] != strconv.FormatInt(enq, 10) || props[PropDequeueMs] != strconv.FormatInt(base+30_000, 10) {
			t.Fatalf("%s delivered with TIMER_ENQUEUE_MS %s TIMER_DEQUEUE_MS %s, want %d and %d", p.uniq,
				props[PropEnqueueMs], props[PropDequeueMs], enq, base+30_000)
		}
		// RocketMQ's timer builds the delivered message's properties
		// string before it clears REAL_TOPIC and REAL_QID from the map:
		// the stored record, what consumers pull, keeps both.
		if props["REAL_TOPIC"] != "Orders" || props["REAL_QID"] != "3" {
			t.Fatalf("%s delivered without its REAL_TOPIC and REAL_QID: %q", p.uniq, m.Properties)
		}
		if props[PropOutMs] != strconv.FormatInt(p.outMs, 10) {
			t.Fatalf("%s delivered without its TIMER_OUT_MS (it would be parked again): %q", p.uniq, m.Properties)
		}
	}
	if props := commitlog.ParseProperties(bs[0][0].Properties); props["KEYS"] != "k" {
		t.Fatalf("A lost its other properties: %v", props)
	}

	// A second round at the same time finds nothing: nothing twice.
	if n := f.roundOK(); n != 0 {
		t.Fatalf("a second round delivered %d", n)
	}
	f.at(61)
	if n := f.roundOK(); n != 1 {
		t.Fatalf("the later message: delivered %d, want 1", n)
	}
	f.wantDelivered("A", "B", "L")
	if left := f.pending(); len(left) != 0 {
		t.Fatalf("entries left after every message was delivered: %v", left)
	}
}

func TestDeliverDueGroupsEachQueueInOneBatch(t *testing.T) {
	f := newFixture(t)
	// Interleaved queues: o1 o2 x0 o1 o2 o1.
	for i, q := range []struct {
		topic string
		qid   int32
	}{{"Orders", 1}, {"Orders", 2}, {"Other", 0}, {"Orders", 1}, {"Orders", 2}, {"Orders", 1}} {
		f.park(fmt.Sprintf("%s-%d-%d", q.topic, q.qid, i), q.topic, q.qid, 5, "")
	}
	f.caughtUp()
	f.at(10)
	if n := f.roundOK(); n != 6 {
		t.Fatalf("delivered %d, want 6", n)
	}
	got := map[string][]string{}
	for _, b := range f.store.batches() {
		k := b[0].Topic + "/" + strconv.Itoa(int(b[0].QueueID))
		if got[k] != nil {
			t.Fatalf("queue %s got two batches in one round", k)
		}
		for _, m := range b {
			if m.Topic != b[0].Topic || m.QueueID != b[0].QueueID {
				t.Fatalf("a batch of %s holds a message of %s/%d", k, m.Topic, m.QueueID)
			}
			u, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyUniqID)
			got[k] = append(got[k], u)
		}
	}
	want := map[string][]string{
		"Orders/1": {"Orders-1-0", "Orders-1-3", "Orders-1-5"},
		"Orders/2": {"Orders-2-1", "Orders-2-4"},
		"Other/0":  {"Other-0-2"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batches %v, want %v", got, want)
	}
}

func TestDeliverDueSplitsALongRunAt64(t *testing.T) {
	f := newFixture(t)
	var uniqs []string
	for i := range 70 {
		u := fmt.Sprintf("M%02d", i)
		uniqs = append(uniqs, u)
		f.park(u, "Orders", 0, 5+i/10, "")
	}
	f.caughtUp()
	f.at(20)
	if n := f.roundOK(); n != 70 {
		t.Fatalf("delivered %d, want 70", n)
	}
	bs := f.store.batches()
	if len(bs) != 2 || len(bs[0]) != maxAppendBatch || len(bs[1]) != 70-maxAppendBatch {
		sizes := []int{}
		for _, b := range bs {
			sizes = append(sizes, len(b))
		}
		t.Fatalf("batch sizes %v, want [64 6]", sizes)
	}
	i := 0
	for _, b := range bs {
		for _, m := range b {
			if u, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyUniqID); u != uniqs[i] {
				t.Fatalf("message %d delivered is %s, want %s: the queue's order was lost", i, u, uniqs[i])
			}
			i++
		}
	}
	if left := f.pending(); len(left) != 0 {
		t.Fatalf("%d entries left", len(left))
	}
}

func TestDeliverDueRetriesATransientFailureNextRound(t *testing.T) {
	f := newFixture(t)
	a1 := f.park("A1", "A", 0, 5, "")
	b1 := f.park("B1", "B", 0, 5, "")
	c1 := f.park("C1", "C", 0, 5, "")
	a2 := f.park("A2", "A", 0, 6, "")
	b2 := f.park("B2", "B", 0, 6, "")
	f.caughtUp()
	// The second put (queue B) fails: A's run is stored, B's and C's wait.
	f.store.fail = func(call int, _ []*commitlog.Message) error {
		if call == 2 {
			return errTransient
		}
		return nil
	}
	f.at(10)
	n, err := f.round()
	if !errors.Is(err, errTransient) {
		t.Fatalf("a round with a failing put: %v, want %v", err, errTransient)
	}
	if n != 2 {
		t.Fatalf("delivered %d before the failure, want A's 2", n)
	}
	f.wantDelivered("A1", "A2")
	if !f.pendingAt(b1.phy, b2.phy, c1.phy) {
		t.Fatalf("entries left %v, want those of B1, B2, C1 (%d %d %d), not A's (%d %d)",
			f.pending(), b1.phy, b2.phy, c1.phy, a1.phy, a2.phy)
	}

	if n := f.roundOK(); n != 3 {
		t.Fatalf("the next round delivered %d, want the 3 left", n)
	}
	f.wantDelivered("A1", "A2", "B1", "B2", "C1")
	if left := f.pending(); len(left) != 0 {
		t.Fatalf("entries left: %v", left)
	}
	if n := f.roundOK(); n != 0 {
		t.Fatalf("a third round delivered %d", n)
	}
	f.wantDelivered("A1", "A2", "B1", "B2", "C1")
}

func TestDeliverDueDropsOnlyTheMessageThatCanNeverBeStored(t *testing.T) {
	f := newFixture(t)
	f.park("A", "Orders", 1, 5, "")
	huge := f.park("huge-B", "Orders", 1, 5, "")
	f.park("C", "Orders", 1, 5, "")
	f.park("D", "Other", 0, 5, "")
	f.caughtUp()
	f.store.fail = tooLarge
	f.at(10)
	n, err := f.round()
	if err != nil {
		t.Fatalf("a message too large failed the round: %v", err)
	}
	if n != 3 {
		t.Fatalf("delivered %d, want 3", n)
	}
	f.wantDelivered("A", "C", "D")
	if left := f.pending(); len(left) != 0 {
		t.Fatalf("entries left %v; the too large one at %d should be dropped", left, huge.phy)
	}
	// The too large run was retried one message at a time, in order.
	var order []string
	for _, b := range f.store.batches() {
		if b[0].Topic != "Orders" {
			continue
		}
		if len(b) != 1 {
			t.Fatalf("a retried run stored %d messages in one batch", len(b))
		}
		order = append(order, string(b[0].Body))
	}
	if fmt.Sprint(order) != "[body-A body-C]" {
		t.Fatalf("stored %v in Orders/1, want A then C", order)
	}
}

func TestDeliverDueKeepsTheRunWhenTheOneByOneRetryFailsTransiently(t *testing.T) {
	f := newFixture(t)
	f.park("A", "Orders", 1, 5, "")
	f.park("huge-B", "Orders", 1, 5, "")
	c := f.park("C", "Orders", 1, 5, "")
	f.caughtUp()
	// Call 1: the run, too large. Calls 2 and 3: A stored, huge-B refused.
	// Call 4: C fails for the store.
	f.store.fail = func(call int, msgs []*commitlog.Message) error {
		if call == 4 {
			return errTransient
		}
		return tooLarge(call, msgs)
	}
	f.at(10)
	if _, err := f.round(); !errors.Is(err, errTransient) {
		t.Fatalf("round: %v, want %v", err, errTransient)
	}
	f.wantDelivered("A")
	if !f.pendingAt(c.phy) {
		t.Fatalf("entries left %v, want only C's at %d: what was stored or dropped is done", f.pending(), c.phy)
	}
	f.store.fail = tooLarge
	f.roundOK()
	f.wantDelivered("A", "C")
	if left := f.pending(); len(left) != 0 {
		t.Fatalf("entries left: %v", left)
	}
}

func TestDeliverDueCancelsTheMessageNamedByTimerDelUniqKey(t *testing.T) {
	f := newFixture(t)
	target := f.park("T", "Orders", 1, 5, "")
	other := f.park("O", "Orders", 1, 5, "")
	// The cancel goes to the target's topic, at the target's time.
	cancel := f.park("X", "Orders", 1, 5, "TIMER_DEL_UNIQKEY\x01Orders+T\x02")
	// A cancel due a second later than the O2 it names does not reach it,
	// even in one round with it (as a round between the two times would
	// have delivered O2 already).
	elsewhere := f.park("Y", "Orders", 1, 6, "TIMER_DEL_UNIQKEY\x01Orders+O2\x02")
	other2 := f.park("O2", "Orders", 1, 5, "")
	f.caughtUp()
	if target.outMs != cancel.outMs || elsewhere.outMs == other2.outMs {
		t.Fatal("the fixture parked the cancels at other times than meant")
	}
	f.at(10)
	if n := f.roundOK(); n != 2 {
		t.Fatalf("delivered %d, want 2", n)
	}
	f.wantDelivered("O", "O2")
	if left := f.pending(); len(left) != 0 {
		t.Fatalf("entries left %v: the cancel and the cancelled message are done (%d %d %d)", left, target.phy, other.phy, cancel.phy)
	}
}

func TestDeliverDueDeliversARolledMessageOnce(t *testing.T) {
	f := newFixture(t)
	orig := &commitlog.Message{Topic: "Orders", QueueID: 2, Body: []byte("body-R"),
		Properties: "UNIQ_KEY\x01R\x02TIMER_DELIVER_MS\x01" + strconv.FormatInt(base+5500, 10) + "\x02"}
	if ok, err := Park(orig, time.UnixMilli(base), DefaultConfig()); err != nil || !ok {
		t.Fatalf("park: %v %v", ok, err)
	}
	// Apache RocketMQ's roll: the same message parked again, counted.
	roll := *orig
	roll.Properties = commitlog.RewriteProperties(orig.Properties, nil, [2]string{PropRollTimes, "1"})
	p1 := f.appendParked(orig, "R")
	p2 := f.appendParked(&roll, "R")
	f.park("S", "Orders", 2, 5, "")
	f.caughtUp()
	if p1.outMs != p2.outMs {
		t.Fatal("the roll is at another time")
	}
	f.at(10)
	if n := f.roundOK(); n != 2 {
		t.Fatalf("delivered %d, want R once and S", n)
	}
	f.wantDelivered("R", "S")
	if left := f.pending(); len(left) != 0 {
		t.Fatalf("entries left %v: the roll is done too", left)
	}
}

func TestDeliverDueFindsAnEntryIndexedBehindTheCursor(t *testing.T) {
	f := newFixture(t)
	f.park("A", "Orders", 0, 10, "")
	f.caughtUp()
	f.at(20)
	if n := f.roundOK(); n != 1 {
		t.Fatalf("delivered %d, want 1", n)
	}
	// Sent at base, due at base+5s, but indexed only now: its entry lies
	// before the round's cursor (past A, at base+10s).
	late := f.parkAt(time.UnixMilli(base), "B", "Orders", 0, 5, "")
	f.caughtUp()
	if late.outMs >= base+10_000 {
		t.Fatalf("the late entry is due at %d, not behind the cursor", late.outMs)
	}
	if n := f.roundOK(); n != 1 {
		t.Fatalf("delivered %d after a late entry was indexed, want 1", n)
	}
	f.wantDelivered("A", "B")
	if left := f.pending(); len(left) != 0 {
		t.Fatalf("entries left: %v", left)
	}
}

// The watermark covers what the rounds delivered and nothing else, and a
// slave's index (the same parked records, never delivered) forgets
// exactly that with it.
func TestWatermarkCoversWhatWasDelivered(t *testing.T) {
	master, slave := newFixture(t), newFixture(t)
	var a1, b1, c1 parked
	for i, f := range []*fixture{master, slave} {
		pa := f.park("A1", "A", 0, 5, "")
		pb := f.park("B1", "B", 0, 5, "")
		pc := f.park("C1", "C", 0, 20, "")
		f.caughtUp()
		if i == 0 {
			a1, b1, c1 = pa, pb, pc
		} else if pa.phy != a1.phy || pb.phy != b1.phy || pc.phy != c1.phy {
			t.Fatal("the two logs differ")
		}
	}
	// B's put fails: A1 is delivered, B1 waits, C1 is not due.
	master.store.fail = func(call int, _ []*commitlog.Message) error {
		if call == 2 {
			return errTransient
		}
		return nil
	}
	master.at(10)
	if _, err := master.round(); !errors.Is(err, errTransient) {
		t.Fatalf("round: %v", err)
	}
	master.wantDelivered("A1")
	wm := master.svc.Watermark()
	for _, c := range []struct {
		p    parked
		want bool
	}{{a1, true}, {b1, false}, {c1, false}} {
		e := kvindex.TimerEntry{DeliverMs: c.p.outMs, PhyOffset: c.p.phy}
		if got := wm.Covers(e); got != c.want {
			t.Errorf("%s: covered %v, want %v (watermark %+v)", c.p.uniq, got, c.want, wm)
		}
	}
	n, err := slave.svc.ForgetDelivered(wm)
	if err != nil || n != 1 || !slave.pendingAt(b1.phy, c1.phy) || len(slave.pending()) != 2 {
		t.Fatalf("the slave forgot %d (%v), keeps %v; want A1 forgotten, B1 and C1 kept", n, err, slave.pending())
	}
	// Once everything due is delivered the watermark moves past B1 too.
	if n := master.roundOK(); n != 1 {
		t.Fatalf("the next round delivered %d, want B1", n)
	}
	if n, err := slave.svc.ForgetDelivered(master.svc.Watermark()); err != nil || n != 1 || !slave.pendingAt(c1.phy) {
		t.Fatalf("second watermark: forgot %d (%v), keeps %v", n, err, slave.pending())
	}
}

// The clock steps back by more than lateWindow after a round: an entry
// indexed then, due before the rounds' position but more than a minute
// after its indexing, is still delivered when it is due.
func TestClockSteppedBackEntryBehindTheCursorIsDelivered(t *testing.T) {
	f := newFixture(t)
	f.park("A", "Orders", 0, 100, "")
	f.caughtUp()
	f.at(101)
	if n := f.roundOK(); n != 1 {
		t.Fatalf("delivered %d, want A", n)
	}
	f.at(0) // the clock steps back 101 s
	f.park("B", "Orders", 0, 90, "")
	f.caughtUp()
	for _, sec := range []int{95, 120, 300} {
		f.at(sec)
		f.roundOK()
	}
	if n := f.deliveries()["B"]; n != 1 {
		t.Fatalf("B (due at +90 s, behind the position at +101 s) delivered %d times; pending %v", n, f.pending())
	}
}

// With no round to empty it (a slave, or delivery stopped), the list of
// entries indexed behind the rounds' position stays bounded; the entries
// left out of it are found when rounds resume, by a scan from the start.
func TestLateEntriesOverflowToARescan(t *testing.T) {
	f := newFixture(t)
	f.svc.maxLate = 10
	f.park("A", "Orders", 0, 100, "")
	f.caughtUp()
	f.at(101)
	if n := f.roundOK(); n != 1 {
		t.Fatalf("delivered %d, want A", n)
	}
	for i := range 25 {
		// Sent before, due behind the position; those left out of the
		// list are due before those in it, which the cursor goes back to.
		due := 50
		if i >= 10 {
			due = 40
		}
		f.parkAt(time.UnixMilli(base), fmt.Sprintf("L%d", i), "Orders", 0, due, "")
	}
	f.caughtUp()
	f.svc.lateMu.Lock()
	held := len(f.svc.late)
	f.svc.lateMu.Unlock()
	if held > 10 {
		t.Fatalf("the late list holds %d entries, bound 10", held)
	}
	f.at(120)
	f.roundOK()
	for i := range 25 {
		if n := f.deliveries()[fmt.Sprintf("L%d", i)]; n != 1 {
			t.Fatalf("L%d delivered %d times; pending %v", i, n, f.pending())
		}
	}
}

// A cancel reaches its message at their delivery time however many other
// messages share it: RocketMQ reads a whole slot's cancels before its
// messages, and a round reads a delivery time that fills its batch whole.
func TestCancelBeyondAFullBatchOfItsTime(t *testing.T) {
	f := newFixture(t)
	f.park("T", "Orders", 1, 5, "")
	for i := range deliverBatch {
		f.park(fmt.Sprintf("F%d", i), "Other", 0, 5, "")
	}
	f.park("X", "Orders", 1, 5, "TIMER_DEL_UNIQKEY\x01Orders+T\x02")
	f.caughtUp()
	f.at(10)
	f.roundOK()
	d := f.deliveries()
	if d["T"] != 0 || d["X"] != 0 {
		t.Fatalf("the cancelled message delivered %d times, the cancel %d", d["T"], d["X"])
	}
	for i := range deliverBatch {
		if n := d[fmt.Sprintf("F%d", i)]; n != 1 {
			t.Fatalf("F%d delivered %d times", i, n)
		}
	}
	if p := f.pending(); len(p) != 0 {
		t.Fatalf("entries left after the round: %v", p)
	}
}

// A parked message is never delivered before the time it asked for: Park
// rounds TIMER_OUT_MS down by up to one precision (RocketMQ's wheel
// slot), and a round takes an entry only once now has passed its slot, as
// RocketMQ's TimerMessageStore reads slot TIMER_OUT_MS only while it is
// below currWriteTimeMs (now rounded down). It is delivered at the end of
// its slot.
func TestATimerMessageIsNeverDeliveredBeforeItsTime(t *testing.T) {
	for _, c := range []struct {
		name        string
		sentMs      int64
		props       string
		askedMs     int64 // the time the producer asked for
		deliveredMs int64 // the first time a round takes it
	}{
		{"deliver at a whole second", base, "TIMER_DELIVER_MS\x01" + strconv.FormatInt(base+5000, 10), base + 5000, base + 5000},
		{"deliver within a second", base, "TIMER_DELIVER_MS\x01" + strconv.FormatInt(base+5500, 10), base + 5500, base + 6000},
		{"one second's delay sent late in a second", base + 999, "TIMER_DELAY_SEC\x011", base + 1999, base + 2000},
		{"a delay in ms", base + 250, "TIMER_DELAY_MS\x011000", base + 1250, base + 2000},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.nowMs.Store(c.sentMs)
			m := &commitlog.Message{Topic: "Orders", QueueID: 1, BornTimestamp: c.sentMs, Body: []byte("b"),
				Properties: "UNIQ_KEY\x01E\x02" + c.props + "\x02"}
			if ok, err := Park(m, time.UnixMilli(c.sentMs), DefaultConfig()); err != nil || !ok {
				t.Fatalf("park: %v %v", ok, err)
			}
			f.appendParked(m, "E")
			f.caughtUp()
			for _, at := range []int64{c.askedMs - 1000, c.askedMs - 1, c.deliveredMs - 1} {
				if at < c.sentMs {
					continue
				}
				f.nowMs.Store(at)
				if n := f.roundOK(); n != 0 {
					t.Fatalf("asked for %d, delivered at %d", c.askedMs, at)
				}
			}
			f.nowMs.Store(c.deliveredMs)
			if n := f.roundOK(); n != 1 {
				t.Fatalf("asked for %d: a round at %d delivered %d messages, want 1", c.askedMs, c.deliveredMs, n)
			}
		})
	}
}

// rollPoint follows RocketMQ's TimerMessageStore.doEnqueue: a message due
// a roll window or more after its store time is indexed within the
// window, half of it when the rest after one window would be under a
// third of a window.
func TestRollPoint(t *testing.T) {
	const day = int64(24 * time.Hour / time.Millisecond)
	window := 2 * day
	for _, c := range []struct{ due, stored, window, want int64 }{
		{due: 5 * day, stored: 0, window: window, want: 2 * day},         // 3 days past the window
		{due: 2*day + 1000, stored: 0, window: window, want: day},        // just past it: half a window
		{due: 2*day + 2*day/3 - 1, stored: 0, window: window, want: day}, // under a third of a window past it
		{due: 2*day + 2*day/3, stored: 0, window: window, want: 2 * day}, // a third past it
		{due: 2*day - 1, stored: 0, window: window, want: 2*day - 1},     // within the window: its time
		{due: 10 * day, stored: 3 * day, window: window, want: 5 * day},  // from the store time
		{due: 1000, stored: 5000, window: window, want: 1000},            // overdue when stored
		{due: 7 * day, stored: 0, window: 0, want: 7 * day},              // no window
	} {
		if got := rollPoint(c.due, c.stored, c.window); got != c.want {
			t.Errorf("rollPoint(%d, %d, %d) = %d, want %d", c.due, c.stored, c.window, got, c.want)
		}
	}
}

// A message parked for longer than CommitLog retention keeps (here due in
// 5 days, past a fileReservedTime of 72 h) is parked again at its roll
// points (every 2 days at most), as RocketMQ rolls it through its wheel:
// when retention deletes the segment of the first record, a copy in a
// newer one is delivered, once, at its time.
func TestALongDelayedMessageIsRolledPastRetention(t *testing.T) {
	f := newFixture(t)
	const day = 24 * time.Hour
	due := base + int64(5*day/time.Millisecond)
	m := &commitlog.Message{Topic: "Orders", QueueID: 1, BornTimestamp: base, Body: []byte("long"),
		Properties: "UNIQ_KEY\x01LONG\x02TIMER_DELIVER_MS\x01" + strconv.FormatInt(due, 10) + "\x02"}
	if ok, err := Park(m, time.UnixMilli(base), Config{Enable: true, Precision: time.Second, MaxDelay: 7 * day}); err != nil || !ok {
		t.Fatalf("park: %v %v", ok, err)
	}
	first := f.appendParked(m, "LONG")
	// Other traffic moves the log past the first segment.
	for i := range 6 {
		big := &commitlog.Message{Topic: "Other", Body: make([]byte, 300<<10), Properties: "UNIQ_KEY\x01o" + strconv.Itoa(i) + "\x02"}
		if _, err := f.log.Append(context.Background(), commitlog.AppendRequest{Message: big, Assigner: f.store}); err != nil {
			t.Fatal(err)
		}
	}
	f.caughtUp()
	rolls := func() []*commitlog.Message {
		var got []*commitlog.Message
		for _, b := range f.store.batches() {
			for _, m := range b {
				if m.Topic == meta.TimerTopic {
					got = append(got, m)
				}
			}
		}
		return got
	}
	// Two days after it was parked it is parked again, not delivered.
	f.nowMs.Store(base + int64(2*day/time.Millisecond) + 1000)
	if n := f.roundOK(); n != 0 {
		t.Fatalf("a message due in 5 days was delivered after 2: %d", n)
	}
	if r := rolls(); len(r) != 1 || r[0].Properties != commitlog.RewriteProperties(m.Properties, nil, [2]string{PropRollTimes, "1"}) || string(r[0].Body) != "long" {
		t.Fatalf("after 2 days: parked again %d times (%v), want once with TIMER_ROLL_TIMES 1 and the rest as parked", len(r), r)
	}
	f.caughtUp()
	// Retention deletes the first record's segment a day later (it ages
	// segments by their files' times: the real clock's).
	if n, err := f.log.DeleteExpired(time.Now().Add(3*day+time.Hour), false); err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	if _, ok, _ := f.store.Read(first.phy); ok {
		t.Fatal("the first record is still readable after retention")
	}
	// Two days after the roll: parked again (1 day left, within the window).
	f.nowMs.Store(base + int64(4*day/time.Millisecond) + 2000)
	if n := f.roundOK(); n != 0 || len(rolls()) != 2 {
		t.Fatalf("4 days after parking: %d delivered, parked again %d times in all, want 0 and 2", n, len(rolls()))
	}
	f.caughtUp()
	f.nowMs.Store(due - 1)
	if n := f.roundOK(); n != 0 {
		t.Fatalf("delivered %d a millisecond before its time", n)
	}
	f.nowMs.Store(due)
	if n := f.roundOK(); n != 1 {
		t.Fatalf("at its time: delivered %d, want 1", n)
	}
	f.nowMs.Store(due + int64(day/time.Millisecond))
	if n := f.roundOK(); n != 0 || len(rolls()) != 2 {
		t.Fatalf("a day later: %d more delivered, %d rolls, want 0 and 2", n, len(rolls()))
	}
}

// A round reads and puts its records in chunks of at most chunkBytes (one
// record at least), so a slot of many large messages is not held in
// memory at once; a cancel still reaches its message in a later chunk,
// every other message is delivered once, and a queue's messages keep
// their order.
func TestARoundPutsItsRecordsInChunks(t *testing.T) {
	f := newFixture(t)
	f.svc.chunkBytes = 1 // every record a chunk of its own
	for i := range 6 {
		f.park(fmt.Sprintf("C%d", i), "Orders", 1, 5, "")
	}
	f.park("X", "Orders", 1, 5, "TIMER_DEL_UNIQKEY\x01Orders+C4\x02")
	f.caughtUp()
	f.at(10)
	if n := f.roundOK(); n != 5 {
		t.Fatalf("delivered %d, want 5 (C4 cancelled)", n)
	}
	d := f.deliveries()
	var order []string
	for _, b := range f.store.batches() {
		if len(b) != 1 {
			t.Fatalf("a chunk of one record put %d messages together", len(b))
		}
		uniq, _ := commitlog.LookupProperty(b[0].Properties, commitlog.PropertyUniqID)
		order = append(order, uniq)
	}
	if want := []string{"C0", "C1", "C2", "C3", "C5"}; !slices.Equal(order, want) || d["C4"] != 0 || d["X"] != 0 {
		t.Fatalf("put %v (C4 %d times, the cancel %d), want %v", order, d["C4"], d["X"], want)
	}
	if p := f.pending(); len(p) != 0 {
		t.Fatalf("entries left after the round: %v", p)
	}
}

// A round reads each parked record once when its records fit in one
// chunk: the first pass keeps them for the put. With a smaller chunk
// it keeps only the first chunk's records (the memory bound), and reads
// a later chunk's records again to put them; a cancel and the message it
// cancels, which are not put, are read once wherever they are.
func TestARoundReadsItsFirstChunkOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chunk int // records per chunk; 0: chunkBytes
		twice []string
	}{
		{name: "one chunk"},
		{name: "chunks of 3 records", chunk: 3, twice: []string{"C3", "C5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			phys := map[string]int64{}
			for i := range 6 {
				u := fmt.Sprintf("C%d", i)
				phys[u] = f.park(u, "Orders", int32(i%2), 5, "").phy
			}
			phys["X"] = f.park("X", "Orders", 0, 5, "TIMER_DEL_UNIQKEY\x01Orders+C4\x02").phy
			f.caughtUp()
			if tc.chunk > 0 {
				// The records are the same size but for their one-digit
				// names: tc.chunk of them fill a chunk.
				size := int64(f.pending()[0].Size)
				f.svc.chunkBytes = int64(tc.chunk) * size
			}
			f.store.readCounts()
			f.at(10)
			if n := f.roundOK(); n != 5 {
				t.Fatalf("delivered %d, want 5 (C4 cancelled)", n)
			}
			f.wantDelivered("C0", "C1", "C2", "C3", "C5")
			reads := f.store.readCounts()
			for u, phy := range phys {
				want := 1
				if slices.Contains(tc.twice, u) {
					want = 2
				}
				if reads[phy] != want {
					t.Errorf("%s read %d times, want %d (reads %v)", u, reads[phy], want, reads)
				}
			}
		})
	}
}

// BenchmarkDeliverBurst times the round that delivers a burst: one slot
// of maxSlot parked 1 KiB messages over 8 queues, all due at one time
// (what `bench timer` sends), read from the CommitLog, put in their
// topic and deleted from the index. Parking and indexing are not timed.
func BenchmarkDeliverBurst(b *testing.B) {
	f := newFixture(b)
	body := strings.Repeat("b", 1024)
	b.SetBytes(int64(maxSlot * len(body)))
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sec := 10 * i
		f.at(sec)
		now := time.UnixMilli(f.nowMs.Load())
		deliver := strconv.FormatInt(base+int64(sec+5)*1000, 10)
		for j := range maxSlot {
			m := &commitlog.Message{Topic: "Orders", QueueID: int32(j % 8), BornTimestamp: now.UnixMilli(), Body: []byte(body),
				Properties: "UNIQ_KEY\x01" + strconv.Itoa(i) + "-" + strconv.Itoa(j) + "\x02TIMER_DELIVER_MS\x01" + deliver + "\x02"}
			if ok, err := Park(m, now, DefaultConfig()); err != nil || !ok {
				b.Fatalf("park: %v %v", ok, err)
			}
			if _, err := f.log.Append(context.Background(), commitlog.AppendRequest{Message: m, Assigner: f.store}); err != nil {
				b.Fatal(err)
			}
		}
		f.caughtUp()
		f.store.mu.Lock()
		f.store.stored = nil
		f.store.mu.Unlock()
		f.at(sec + 6)
		b.StartTimer()
		if n := f.roundOK(); n != maxSlot {
			b.Fatalf("delivered %d, want %d", n, maxSlot)
		}
	}
}

// A committed transactional message parked for its timer is delivered
// with its COMMIT bits but without the PREPARED TX OFFSET of its half, as
// RocketMQ's timer builds the message it stores (convertMessage sets no
// prepared offset): the consumer's MessageExt reads 0.
func TestDeliveredCommitHasNoPreparedOffset(t *testing.T) {
	f := newFixture(t)
	now := time.UnixMilli(f.nowMs.Load())
	m := &commitlog.Message{Topic: "Orders", QueueID: 1, BornTimestamp: now.UnixMilli(), Body: []byte("body-C"),
		SysFlag: commitlog.TransactionCommit, PreparedTransactionOffset: 4096,
		Properties: "UNIQ_KEY\x01C\x02TIMER_DELAY_SEC\x015\x02"}
	if ok, err := Park(m, now, DefaultConfig()); err != nil || !ok {
		t.Fatalf("park: %v, %v", ok, err)
	}
	f.appendParked(m, "C")
	f.caughtUp()
	f.at(30)
	if n := f.roundOK(); n != 1 {
		t.Fatalf("delivered %d, want 1", n)
	}
	got := f.store.batches()[0][0]
	if commitlog.TransactionType(got.SysFlag) != commitlog.TransactionCommit || got.PreparedTransactionOffset != 0 {
		t.Fatalf("delivered sysFlag %#x prepared offset %d, want COMMIT and 0", got.SysFlag, got.PreparedTransactionOffset)
	}
}

// DeliveredBefore, RocketMQ's lastReadTimeMs, moves on with the clock on
// an idle timer, slot by slot as RocketMQ's dequeue moves over empty
// slots; never past a message still waiting (after the rounds' cursor or
// indexed behind it); and it stays where it is while no round runs
// (delivery stopped), as RocketMQ's stays under timerStopDequeue.
func TestDeliveredBeforeMovesOnWhileIdle(t *testing.T) {
	f := newFixture(t)
	before := func() int64 {
		t.Helper()
		ms, err := f.svc.DeliveredBefore(time.UnixMilli(f.nowMs.Load()))
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	a := f.park("A", "Orders", 0, 5, "")
	c := f.park("C", "Orders", 0, 200, "")
	f.caughtUp()
	f.at(6)
	if n := f.roundOK(); n != 1 {
		t.Fatalf("delivered %d, want A", n)
	}
	// Idle from +6 s to +100 s: nothing due in between.
	f.nowMs.Store(base + 100_250)
	f.roundOK()
	if got, want := before(), base+100_000; got != want {
		t.Fatalf("idle at +100.25 s after A (due %d) was delivered: lastReadTimeMs %d, want the slot of now %d", a.outMs, got, want)
	}
	// Delivery stopped from +100 s: no round, the read time stays.
	f.at(150)
	if got, want := before(), base+100_000; got != want {
		t.Fatalf("no round since +100 s: lastReadTimeMs %d at +150 s, want it kept at %d", got, want)
	}
	// A round delivers C (due at +200 s) late and moves on to now.
	f.at(300)
	if n := f.roundOK(); n != 1 {
		t.Fatalf("delivered %d, want C (due %d)", n, c.outMs)
	}
	f.nowMs.Store(base + 350_500)
	f.roundOK()
	f.wantDelivered("A", "C")
	if got := before(); got != base+350_000 {
		t.Fatalf("after C: lastReadTimeMs %d, want %d", got, base+350_000)
	}
	// The clock steps back: D, due at +340 s, is indexed after the
	// cursor (C) and before the read time of the last round.
	f.at(0)
	d := f.park("D", "Orders", 0, 340, "")
	f.caughtUp()
	f.at(350)
	if got := before(); got != d.outMs {
		t.Fatalf("D (due %d) waits: lastReadTimeMs %d, want D's slot", d.outMs, got)
	}
	// An entry indexed behind the cursor (sent before and due before it)
	// holds the read time back until a round delivers it.
	f.park("E", "Orders", 0, 480, "")
	f.caughtUp()
	f.at(500)
	f.roundOK()
	f.wantDelivered("A", "C", "D", "E")
	l := f.parkAt(time.UnixMilli(base), "L", "Orders", 0, 450, "")
	f.caughtUp()
	if got := before(); got != l.outMs {
		t.Fatalf("L (due %d, behind the cursor at +480 s) waits: lastReadTimeMs %d, want L's slot", l.outMs, got)
	}
	f.roundOK()
	f.wantDelivered("A", "C", "D", "E", "L")
	if got := before(); got != base+500_000 {
		t.Fatalf("everything delivered at +500 s: lastReadTimeMs %d, want %d", got, base+500_000)
	}
}

// With OneByOne each due message is put alone: a store that fails the
// second put of a round has stored the first, whose entry the round
// deletes, and the next round puts only the second.
func TestOneByOnePutsEachMessageAlone(t *testing.T) {
	f := newFixture(t)
	f.svc.oneByOne = func() bool { return true }
	f.park("A", "T", 0, 1, "")
	f.park("B", "T", 0, 1, "")
	f.caughtUp()
	f.store.fail = func(call int, _ []*commitlog.Message) error {
		if call == 2 {
			return errTransient
		}
		return nil
	}
	f.at(3)
	if n, err := f.svc.DeliverDue(context.Background()); n != 1 || !errors.Is(err, errTransient) {
		t.Fatalf("first round: %d delivered, %v; want 1 and the store's failure", n, err)
	}
	if n, err := f.svc.DeliverDue(context.Background()); n != 1 || err != nil {
		t.Fatalf("second round: %d delivered, %v; want 1", n, err)
	}
	var bodies []string
	for _, b := range f.store.batches() {
		if len(b) != 1 {
			t.Fatalf("a put of %d messages, want each alone", len(b))
		}
		bodies = append(bodies, string(b[0].Body))
	}
	if len(bodies) != 2 || bodies[0] != "body-A" || bodies[1] != "body-B" {
		t.Fatalf("stored %q, want body-A then body-B once each", bodies)
	}
	if left := f.pending(); len(left) != 0 {
		t.Fatalf("%d entries left", len(left))
	}
}
