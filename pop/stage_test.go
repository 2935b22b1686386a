package pop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
)

// memQueues is a ConsumeQueue of any number of topics in memory.
type memQueues struct {
	cq.Store
	mu     sync.Mutex
	queues map[string][]cq.Entry // topic/queue -> entries from offset 0
}

func queueName(topic string, queueID int32) string { return topic + "/" + strconv.Itoa(int(queueID)) }

func (q *memQueues) MinOffset(string, int32) (int64, error) { return 0, nil }

func (q *memQueues) MaxOffset(topic string, queueID int32) (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int64(len(q.queues[queueName(topic, queueID)])), nil
}

func (q *memQueues) Get(topic string, queueID int32, from int64, max int) ([]cq.Entry, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	es := q.queues[queueName(topic, queueID)]
	if from >= int64(len(es)) {
		return nil, nil
	}
	return slices.Clone(es[from:min(int64(len(es)), from+int64(max))]), nil
}

// storingBroker stores what a revive puts: in the CommitLog and in queue 0
// of its topic, as a broker with its dispatcher does (failPuts puts fail
// before storing anything).
type storingBroker struct {
	log      *commitlog.Log
	queues   *memQueues
	failPuts int
	// failWaits WaitDispatched calls fail (a dispatcher behind).
	failWaits int
}

func (b *storingBroker) ReadQueueNums(string) (int, bool, error)   { return 1, true, nil }
func (b *storingBroker) EnsureTopic(string) error                  { return nil }
func (b *storingBroker) RetryMaxTimes(string) (int32, bool, error) { return 16, true, nil }
func (b *storingBroker) WaitDispatched(context.Context) error {
	if b.failWaits > 0 {
		b.failWaits--
		return context.DeadlineExceeded
	}
	return nil
}

func (b *storingBroker) Put(_ context.Context, msgs []*commitlog.Message) (commitlog.AppendStatus, error) {
	if b.failPuts > 0 {
		b.failPuts--
		return 0, errors.New("put refused")
	}
	for _, m := range msgs {
		if err := b.store(m); err != nil {
			return 0, err
		}
	}
	return commitlog.PutOK, nil
}

func (b *storingBroker) store(m *commitlog.Message) error {
	b.queues.mu.Lock()
	defer b.queues.mu.Unlock()
	name := queueName(m.Topic, m.QueueID)
	m.QueueOffset = int64(len(b.queues.queues[name]))
	res, err := b.log.Append(context.Background(), commitlog.AppendRequest{Message: m})
	if err != nil {
		return err
	}
	b.queues.queues[name] = append(b.queues.queues[name], cq.Entry{QueueOffset: m.QueueOffset, PhyOffset: res.PhyOffset,
		Size: res.Records[0].Size})
	return nil
}

// stageHarness is a Service with staged revive on, over topic T (queue 0)
// holding n messages, with a clock the test moves.
type stageHarness struct {
	svc    *Service
	broker *storingBroker
	now    int64
	ready  chan string // OnQueueReady calls, "topic/queue"
}

func newStageHarness(t *testing.T, n int) *stageHarness {
	t.Helper()
	return newStageHarnessWith(t, n, nil)
}

// newStageHarnessWith is newStageHarness with tune, when not nil, given
// the service's Config to change before the service is made.
func newStageHarnessWith(t *testing.T, n int, tune func(*Config)) *stageHarness {
	t.Helper()
	db := openIndex(t)
	l := openTestLog(t)
	h := &stageHarness{now: 1_000_000, ready: make(chan string, 64)}
	h.broker = &storingBroker{log: l, queues: &memQueues{queues: map[string][]cq.Entry{}}}
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	for i := range n {
		if err := h.broker.store(&commitlog.Message{Topic: "T", Body: []byte(fmt.Sprintf("m%d", i)), BornHost: host, StoreHost: host}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{DB: db, CQ: h.broker.queues, Log: l, Offsets: db.ConsumerOffsets(), Broker: h.broker,
		StoreHost: host, StageAhead: 30 * time.Second, RetryFirstPercent: -1,
		OnQueueReady: func(topic, _ string, queueID int32) {
			select {
			case h.ready <- queueName(topic, queueID):
			default:
			}
		},
		Now: func() time.Time { return time.UnixMilli(h.now) }}
	if tune != nil {
		tune(&cfg)
	}
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	h.svc = svc
	return h
}

// popAll pops up to 32 messages of T with the clock at now and returns
// them decoded.
func (h *stageHarness) popAll(t *testing.T, invisible int64) []commitlog.Message {
	t.Helper()
	res, err := h.svc.Pop(PopRequest{Group: "G", Topic: "T", QueueID: 0, MaxMsgNums: 32, InvisibleTime: invisible})
	if err != nil {
		t.Fatalf("pop: %v", err)
	}
	var out []commitlog.Message
	for _, rec := range res.Records {
		m, err := commitlog.Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := commitlog.LookupProperty(m.Properties, PropertyVisibleAt); ok {
			if at, err := strconv.ParseInt(v, 10, 64); err != nil || at > res.PopTime {
				t.Fatalf("a staged copy visible at %s handed out at %d", v, res.PopTime)
			}
		}
		out = append(out, m)
	}
	return out
}

func (h *stageHarness) stage(t *testing.T) int {
	t.Helper()
	n, err := h.svc.StageOnce(context.Background())
	if err != nil {
		t.Fatalf("stage: %v", err)
	}
	return n
}

func bodies(ms []commitlog.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Body))
	}
	slices.Sort(out)
	return out
}

// TestStagedReviveHandsCopiesOutAtTheirDeadline walks a staged revive: no
// staging while there is time, copies made ahead once re-putting would
// not be done in time, none handed out before the deadline, the copy of a
// message acknowledged meanwhile skipped, the others handed out at the
// deadline with their original's committed offset moved past them.
func TestStagedReviveHandsCopiesOutAtTheirDeadline(t *testing.T) {
	h := newStageHarness(t, 4)
	first := h.popAll(t, 60_000) // deadline 1,060,000
	if len(first) != 4 {
		t.Fatalf("first pop: %d messages, want 4", len(first))
	}
	h.now = 1_040_000
	if n := h.stage(t); n != 0 {
		t.Fatalf("staged %d messages 20 s before their deadline; 4 messages take far less to re-put", n)
	}
	h.now = 1_059_500
	h.svc.stage.nextPlan = 0
	if n := h.stage(t); n != 4 {
		t.Fatalf("staged %d messages within the slack before their deadline, want 4", n)
	}
	ck, ok, err := h.svc.store.Checkpoint("G", "T", 0, 0, 1_000_000)
	if err != nil || !ok || !ck.Staged || len(ck.Offsets) != 4 {
		t.Fatalf("checkpoint after staging: %+v %v %v", ck, ok, err)
	}
	if n, err := h.svc.ReviveOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("revive at the deadline of staged messages handled %d (%v), want 0", n, err)
	}
	// The consumer acks m1 before its deadline, through its first handle.
	h.now = 1_059_600
	if _, err := h.svc.Ack("G", "T", 0, 1, Handle{CKOffset: 0, PopTime: 1_000_000, InvisibleTime: 60_000}); err != nil {
		t.Fatal(err)
	}
	h.now = 1_059_700
	if got := h.popAll(t, 60_000); len(got) != 0 {
		t.Fatalf("pop before the deadline got %v", bodies(got))
	}
	h.now = 1_060_000
	got := h.popAll(t, 60_000)
	if want := []string{"m0", "m2", "m3"}; !slices.Equal(bodies(got), want) {
		t.Fatalf("pop at the deadline got %v, want %v (m1 was acknowledged)", bodies(got), want)
	}
	for _, m := range got {
		if m.ReconsumeTimes != 1 {
			t.Fatalf("copy %s reconsumeTimes %d, want 1", m.Body, m.ReconsumeTimes)
		}
	}
	if _, ok, err := h.svc.store.Checkpoint("G", "T", 0, 0, 1_000_000); err != nil || ok {
		t.Fatalf("the staged checkpoint is still there after its copies were handed out (%v)", err)
	}
	if off, _, err := h.svc.cfg.Offsets.Get("G", "T", 0); err != nil || off != 4 {
		t.Fatalf("committed offset of T/0: %d (%v), want 4", off, err)
	}
	if got := h.popAll(t, 60_000); len(got) != 0 {
		t.Fatalf("a second pop got %v", bodies(got))
	}
}

// failingOffsets is an OffsetTable that fails the next read of one
// queue's committed offset once armed.
type failingOffsets struct {
	OffsetTable
	mu    sync.Mutex
	queue queueKey
	armed bool
}

func (f *failingOffsets) arm(group, topic string, queueID int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue, f.armed = queueKey{group, topic, queueID}, true
}

func (f *failingOffsets) Get(group, topic string, queueID int32) (int64, bool, error) {
	f.mu.Lock()
	fail := f.armed && f.queue == queueKey{group, topic, queueID}
	if fail {
		f.armed = false
	}
	f.mu.Unlock()
	if fail {
		return 0, false, errors.New("injected read failure")
	}
	return f.OffsetTable.Get(group, topic, queueID)
}

// TestStagedCopiesGoOutWhenTheirOriginalsOffsetCannotMove: once a pop
// that hands out staged copies has committed, a failure to move the
// committed offset of the copies' original queue does not fail the pop:
// its messages are recorded in flight and go out, the failure is logged,
// and the original queue's committed offset, left behind, moves again at
// its next pop that takes a message.
func TestStagedCopiesGoOutWhenTheirOriginalsOffsetCannotMove(t *testing.T) {
	var logs bytes.Buffer
	var offsets *failingOffsets
	h := newStageHarnessWith(t, 4, func(c *Config) {
		offsets = &failingOffsets{OffsetTable: c.Offsets}
		c.Offsets = offsets
		c.RetryFirstPercent = 100 // the pop-retry queue first, so its admission is the first read of T/0
		c.Logger = zerolog.New(&logs)
	})
	if first := h.popAll(t, 60_000); len(first) != 4 { // deadline 1,060,000
		t.Fatalf("first pop: %d messages, want 4", len(first))
	}
	h.now = 1_059_500
	if n := h.stage(t); n != 4 {
		t.Fatalf("staged %d messages, want 4", n)
	}
	h.now = 1_060_000
	offsets.arm("G", "T", 0)
	got := h.popAll(t, 60_000)
	if want := []string{"m0", "m1", "m2", "m3"}; !slices.Equal(bodies(got), want) {
		t.Fatalf("pop at the deadline got %v, want the copies %v", bodies(got), want)
	}
	if !strings.Contains(logs.String(), "committed offsets of staged copies' queues not moved") {
		t.Fatalf("the failure to move T/0's committed offset was not logged; log:\n%s", logs.String())
	}
	if off, _, err := h.svc.cfg.Offsets.Get("G", "T", 0); err != nil || off != 0 {
		t.Fatalf("committed offset of T/0 after the failed move: %d (%v), want 0 (left behind)", off, err)
	}
	// The copies are in flight under the pop's own checkpoint: no second
	// pop gets them.
	if again := h.popAll(t, 60_000); len(again) != 0 {
		t.Fatalf("a second pop got %v", bodies(again))
	}
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	if err := h.broker.store(&commitlog.Message{Topic: "T", Body: []byte("m4"), BornHost: host, StoreHost: host}); err != nil {
		t.Fatal(err)
	}
	if next := h.popAll(t, 60_000); !slices.Equal(bodies(next), []string{"m4"}) {
		t.Fatalf("pop after a new message got %v, want [m4]", bodies(next))
	}
	if off, _, err := h.svc.cfg.Offsets.Get("G", "T", 0); err != nil || off != 4 {
		t.Fatalf("committed offset of T/0 after the next pop of it: %d (%v), want 4 (m4 in flight)", off, err)
	}
}

// TestStagedCopyOfAMessageGivenANewInvisibleTimeIsSkipped: a change of
// invisible time after the staging takes the message out of its staged
// checkpoint, so its copy is skipped and revive re-delivers it at its new
// deadline.
func TestStagedCopyOfAMessageGivenANewInvisibleTimeIsSkipped(t *testing.T) {
	h := newStageHarness(t, 2)
	h.popAll(t, 60_000)
	h.now = 1_059_500
	if n := h.stage(t); n != 2 {
		t.Fatalf("staged %d, want 2", n)
	}
	res, err := h.svc.ChangeInvisibleTime("G", "T", 0, 0, Handle{CKOffset: 0, PopTime: 1_000_000, InvisibleTime: 60_000}, 120_000)
	if err != nil || !res.Changed {
		t.Fatalf("change invisible time: %+v %v", res, err)
	}
	h.now = 1_060_000
	if got := h.popAll(t, 600_000); !slices.Equal(bodies(got), []string{"m1"}) {
		t.Fatalf("pop at the first deadline got %v, want [m1]", bodies(got))
	}
	h.now = 1_059_500 + 120_000
	if n, err := h.svc.ReviveOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("revive at the new deadline handled %d (%v), want 1", n, err)
	}
	if got := h.popAll(t, 60_000); !slices.Equal(bodies(got), []string{"m0"}) {
		t.Fatalf("pop after the revive got %v, want [m0]", bodies(got))
	}
}

// TestFailedStagedPutIsRevivedAtTheDeadline: a staging whose put fails
// unstages its checkpoint (its deadline entry back), and revive
// re-delivers the messages at their deadline as usual.
func TestFailedStagedPutIsRevivedAtTheDeadline(t *testing.T) {
	h := newStageHarness(t, 3)
	h.popAll(t, 60_000)
	h.now = 1_059_500
	h.broker.failPuts = 1
	if n := h.stage(t); n != 0 {
		t.Fatalf("a staging whose put failed staged %d", n)
	}
	ck, ok, err := h.svc.store.Checkpoint("G", "T", 0, 0, 1_000_000)
	if err != nil || !ok || ck.Staged || len(ck.Offsets) != 3 || ck.VisibleAt != 1_060_000 {
		t.Fatalf("checkpoint after the failed staging: %+v %v %v", ck, ok, err)
	}
	h.now = 1_060_000
	if n, err := h.svc.ReviveOnce(context.Background()); err != nil || n != 3 {
		t.Fatalf("revive at the deadline handled %d (%v), want 3", n, err)
	}
	if got := h.popAll(t, 60_000); !slices.Equal(bodies(got), []string{"m0", "m1", "m2"}) {
		t.Fatalf("pop after the revive got %v", bodies(got))
	}
}

// TestStagedCopiesAreLeftWhenTheirCheckpointWasUnstaged: copies a put
// stored before it failed are skipped once the checkpoint is unstaged, so
// the message is re-delivered once, by revive, not twice.
func TestStagedCopiesAreLeftWhenTheirCheckpointWasUnstaged(t *testing.T) {
	h := newStageHarness(t, 2)
	h.popAll(t, 60_000)
	h.now = 1_059_500
	if n := h.stage(t); n != 2 {
		t.Fatalf("staged %d, want 2", n)
	}
	// As settle does with a batch one of whose copies was not stored.
	ck, _, err := h.svc.store.Checkpoint("G", "T", 0, 0, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	b := h.svc.store.NewBatch()
	if err := b.UnstageCheckpoint(&ck); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	h.now = 1_060_000
	if n, err := h.svc.ReviveOnce(context.Background()); err != nil || n != 2 {
		t.Fatalf("revive handled %d (%v), want 2", n, err)
	}
	if got := h.popAll(t, 60_000); !slices.Equal(bodies(got), []string{"m0", "m1"}) {
		t.Fatalf("pop got %v, want each message once", bodies(got))
	}
	if got := h.popAll(t, 60_000); len(got) != 0 {
		t.Fatalf("a second pop got %v", bodies(got))
	}
}

// TestPopHeldOnAStagedCopyWakesAtItsTime: a pop, a peek and a
// notification that meet a copy not yet visible get nothing, and the held
// pops of the pop-retry queue are woken when it may be handed out.
func TestPopHeldOnAStagedCopyWakesAtItsTime(t *testing.T) {
	h := newStageHarness(t, 1)
	h.popAll(t, 60_000)
	h.now = 1_059_500
	if n := h.stage(t); n != 1 {
		t.Fatalf("staged %d, want 1", n)
	}
	h.now = 1_059_990 // 10 ms before the copy's time
	if got := h.popAll(t, 60_000); len(got) != 0 {
		t.Fatalf("pop before the copy's time got %v", bodies(got))
	}
	recs, _, err := h.svc.Peek("G", "T", 0, 32, InitMin)
	if err != nil || len(recs) != 0 {
		t.Fatalf("peek before the copy's time: %d records, %v", len(recs), err)
	}
	if has, err := h.svc.HasMessage("G", "T", 0, false, ""); err != nil || has {
		t.Fatalf("notification before the copy's time: %v %v", has, err)
	}
	retry := queueName(RetryTopicV1("T", "G"), 0)
	deadline := time.After(10 * time.Second) // a hang guard, not a timing check
	for woken := false; !woken; {
		select {
		case q := <-h.ready:
			woken = q == retry
		case <-deadline:
			t.Fatalf("the pops held on %s were not woken", retry)
		}
	}
	h.now = 1_060_000
	if has, err := h.svc.HasMessage("G", "T", 0, false, ""); err != nil || !has {
		t.Fatalf("notification at the copy's time: %v %v", has, err)
	}
	if got := h.popAll(t, 60_000); !slices.Equal(bodies(got), []string{"m0"}) {
		t.Fatalf("pop at the copy's time got %v", bodies(got))
	}
}

// TestStagingLeavesWhatCannotWait: a checkpoint whose message goes to the
// DLQ is not staged (a dead letter cannot wait for its deadline), nor is
// one that failed a revive before.
func TestStagingLeavesWhatCannotWait(t *testing.T) {
	h := newStageHarness(t, 0)
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	if err := h.broker.store(&commitlog.Message{Topic: "T", Body: []byte("tired"), ReconsumeTimes: 16, BornHost: host, StoreHost: host}); err != nil {
		t.Fatal(err)
	}
	h.popAll(t, 60_000)
	putCheckpoints(t, h.svc, kvindex.Checkpoint{Group: "G", Topic: "T", QueueID: 0, CKOffset: 0, PopTime: 1_000_001,
		InvisibleTime: 60_000, VisibleAt: 1_060_001, Attempts: 1, Offsets: []int64{0}})
	h.now = 1_059_500
	if n := h.stage(t); n != 0 {
		t.Fatalf("staged %d messages, want none", n)
	}
	var due int
	if err := h.svc.store.DueEntries(0, 2_000_000, 0, func(kvindex.DueEntry) bool { due++; return true }); err != nil {
		t.Fatal(err)
	}
	if due != 2 {
		t.Fatalf("deadline entries left for revive: %d, want 2", due)
	}
}

// TestStagingResumesAtItsFrontier: a service started again on the same
// state stages from the last copies' time on, not before it (their order
// in the pop-retry queue holds) and not a look-ahead later; one on a store
// that never staged, from a look-ahead past its start.
func TestStagingResumesAtItsFrontier(t *testing.T) {
	h := newStageHarness(t, 1)
	// A store without a frontier (a promoted slave's may hold its master's
	// copies) stages past the look-ahead.
	if h.svc.stage.frontier != 1_030_000 {
		t.Fatalf("a new store's frontier: %d, want 1030000 (now + StageAhead)", h.svc.stage.frontier)
	}
	h.popAll(t, 60_000)
	h.now = 1_059_500
	if n := h.stage(t); n != 1 {
		t.Fatalf("staged %d, want 1", n)
	}
	again, err := New(h.svc.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.stage.frontier != 1_060_000 {
		t.Fatalf("frontier after a restart: %d, want 1060000 (the staged copy's time)", again.stage.frontier)
	}
}

// TestReadOnlyPopSkipsCopiesOfSettledMessages: a slave's read-only pop
// hands a staged copy out from its time on, only while the copy of the
// master's state holds its message, and changes none of that state.
func TestReadOnlyPopSkipsCopiesOfSettledMessages(t *testing.T) {
	h := newStageHarness(t, 3)
	h.popAll(t, 60_000)
	h.now = 1_059_500
	if n := h.stage(t); n != 3 {
		t.Fatalf("staged %d, want 3", n)
	}
	if _, err := h.svc.Ack("G", "T", 0, 2, Handle{CKOffset: 0, PopTime: 1_000_000, InvisibleTime: 60_000}); err != nil {
		t.Fatal(err)
	}
	readOnly := func() []string {
		t.Helper()
		res, err := h.svc.PopReadOnly(PopRequest{Group: "G", Topic: "T", QueueID: 0, MaxMsgNums: 32, InvisibleTime: 60_000})
		if err != nil {
			t.Fatal(err)
		}
		var ms []commitlog.Message
		for _, rec := range res.Records {
			m, err := commitlog.Decode(rec)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		return bodies(ms)
	}
	// As on a slave whose copy of the offsets has the group past the
	// originals.
	if err := h.svc.cfg.Offsets.Set("G", "T", 0, 3); err != nil {
		t.Fatal(err)
	}
	h.now = 1_059_900
	if got := readOnly(); len(got) != 0 {
		t.Fatalf("read-only pop before the copies' time got %v", got)
	}
	h.now = 1_060_000
	if got := readOnly(); !slices.Equal(got, []string{"m0", "m1"}) {
		t.Fatalf("read-only pop at the copies' time got %v, want [m0 m1] (m2 was acknowledged)", got)
	}
	ck, ok, err := h.svc.store.Checkpoint("G", "T", 0, 0, 1_000_000)
	if err != nil || !ok || !ck.Staged || !slices.Equal(ck.Offsets, []int64{0, 1}) {
		t.Fatalf("the staged checkpoint after a read-only pop: %+v %v %v", ck, ok, err)
	}
}

// TestStagedMessageWhoseCopyNoPopTookIsRevivedAtTheBackstop: a copy no pop
// takes (here the group's pops filter it out) leaves its message staged
// until the backstop, when revive re-delivers it; the message reaches the
// group once, the old copy skipped.
func TestStagedMessageWhoseCopyNoPopTookIsRevivedAtTheBackstop(t *testing.T) {
	h := newStageHarness(t, 2)
	h.popAll(t, 60_000)
	h.now = 1_059_500
	if n := h.stage(t); n != 2 {
		t.Fatalf("staged %d, want 2", n)
	}
	// No pop reads the pop-retry topic until well past the copies' time.
	h.now = 1_060_000 + stageBackstop.Milliseconds() - 1
	if n, err := h.svc.ReviveOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("revive before the backstop handled %d (%v), want 0", n, err)
	}
	if off, _, err := h.svc.cfg.Offsets.Get("G", "T", 0); err != nil || off != 0 {
		t.Fatalf("committed offset of T/0 while staged: %d (%v), want 0", off, err)
	}
	h.now++
	if n, err := h.svc.ReviveOnce(context.Background()); err != nil || n != 2 {
		t.Fatalf("revive at the backstop handled %d (%v), want 2", n, err)
	}
	if _, ok, err := h.svc.store.Checkpoint("G", "T", 0, 0, 1_000_000); err != nil || ok {
		t.Fatalf("the staged checkpoint is still there after its backstop (%v)", err)
	}
	if off, _, err := h.svc.cfg.Offsets.Get("G", "T", 0); err != nil || off != 2 {
		t.Fatalf("committed offset of T/0 after the backstop: %d (%v), want 2", off, err)
	}
	if got := h.popAll(t, 60_000); !slices.Equal(bodies(got), []string{"m0", "m1"}) {
		t.Fatalf("pop after the backstop got %v, want each message once", bodies(got))
	}
	if got := h.popAll(t, 60_000); len(got) != 0 {
		t.Fatalf("a second pop got %v", bodies(got))
	}
}

// TestUnstagedBehindTheReviveCursorIsRevived: a staging whose put failed
// and could not be settled before the messages' deadline passed (the
// dispatcher behind) is unstaged behind the revive cursor; the next round
// still revives it.
func TestUnstagedBehindTheReviveCursorIsRevived(t *testing.T) {
	h := newStageHarness(t, 2)
	h.popAll(t, 60_000)
	h.now = 1_059_500
	h.broker.failPuts, h.broker.failWaits = 1, 1
	if _, err := h.svc.StageOnce(context.Background()); err == nil {
		t.Fatal("a staging left unsettled reported no error")
	}
	h.now = 1_070_000
	if n, err := h.svc.ReviveOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("revive with the staging unsettled handled %d (%v), want 0", n, err)
	}
	if n, err := h.svc.reviveIntents(context.Background(), true); err != nil || n != 2 {
		t.Fatalf("settling gave back %d (%v), want 2", n, err)
	}
	if n, err := h.svc.ReviveOnce(context.Background()); err != nil || n != 2 {
		t.Fatalf("revive after the settle handled %d (%v), want 2", n, err)
	}
	if got := h.popAll(t, 60_000); !slices.Equal(bodies(got), []string{"m0", "m1"}) {
		t.Fatalf("pop after the revive got %v", bodies(got))
	}
}

// FuzzStagedCopy: stagedCopy reads the properties of any CommitLog record
// a pop-retry queue holds without panicking, and reads back what
// stagedSet wrote.
func FuzzStagedCopy(f *testing.F) {
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	in := kvindex.ReviveIntent{InFlight: kvindex.InFlight{Group: "G", Topic: "T", QueueID: 3, QueueOffset: 17, CKOffset: 16, PopTime: 1000}}
	set := stagedSet([][2]string{{kvindex.PropertyRevivedFrom, in.PropertyValue()}}, "%RETRY%G_T", &in, 61_000)
	rec, err := commitlog.AppendRecord(nil, &commitlog.Message{Topic: "%RETRY%G_T", Body: []byte("b"), BornHost: host, StoreHost: host,
		Properties: commitlog.RewriteProperties("", nil, set...)})
	if err != nil {
		f.Fatal(err)
	}
	at, name, staged, named := stagedCopy(rec)
	want := stagedName{queueKey: queueKey{"G", "T", 3}, offset: 17, ckOffset: 16, popTime: 1000}
	if at != 61_000 || !staged || !named || name != want {
		f.Fatalf("stagedCopy of a staged copy: %d %+v %v %v", at, name, staged, named)
	}
	f.Add(rec)
	f.Add(rec[:len(rec)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		at, _, staged, _ := stagedCopy(b)
		if !staged && at != 0 {
			t.Fatalf("a record that is no staged copy gave a time %d", at)
		}
	})
}
