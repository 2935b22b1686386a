package pop

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
)

// TestReviveCursorFollowsLateDeadlines checks that a deadline written
// behind the revive cursor (here a change of invisible time to a negative
// value, which the protocol does not forbid) lowers the cursor for the
// next round, so the record is scanned and revived rather than skipped
// until a restart.
func TestReviveCursorFollowsLateDeadlines(t *testing.T) {
	db, err := kvindex.Open(kvindex.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.UnixMilli(1_000_000)
	s := &Service{cfg: Config{Now: func() time.Time { return now }}, store: db.Pop(), seed: maphash.MakeSeed(), wake: make(chan struct{}, 1)}
	s.lowDeadline.Store(math.MaxInt64)

	rec := kvindex.Checkpoint{Group: "G", Topic: "T", QueueID: 0, CKOffset: 5, Offsets: []int64{7},
		VisibleAt: 1_060_000, PopTime: 1_000_000, InvisibleTime: 60_000}
	putCheckpoints(t, s, rec)
	// A revive round with nothing due moves the cursor up to now - margin.
	s.lowerCursor()
	s.cursor = max(s.cursor, s.now()-reviveCursorMargin)
	if s.cursor != 1_000_000-reviveCursorMargin {
		t.Fatalf("cursor %d", s.cursor)
	}

	res, err := s.ChangeInvisibleTime("G", "T", 0, 7, Handle{CKOffset: 5, PopTime: rec.PopTime, InvisibleTime: rec.InvisibleTime}, -10_000)
	if err != nil || !res.Changed {
		t.Fatalf("change invisible time: %+v, %v", res, err)
	}
	s.lowerCursor()
	if s.cursor > 990_000 {
		t.Fatalf("cursor %d stays above the new deadline 990000", s.cursor)
	}
	var due []kvindex.Checkpoint
	if err := s.store.DueCheckpoints(s.cursor, s.now(), 0, func(c kvindex.Checkpoint) bool { due = append(due, c); return true }); err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || len(due[0].Offsets) != 1 || due[0].Offsets[0] != 7 || due[0].VisibleAt != 990_000 {
		t.Fatalf("due from the cursor: %+v", due)
	}
}

// putCheckpoints writes cks, in order, in one durable commit.
func putCheckpoints(t *testing.T, s *Service, cks ...kvindex.Checkpoint) {
	t.Helper()
	b := s.store.NewBatch()
	defer b.Close()
	for i := range cks {
		if err := b.PutCheckpoint(&cks[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
}

// openTestLog opens a CommitLog of 1 MiB segments in a temporary
// directory, closed when the test ends.
func openTestLog(t *testing.T) *commitlog.Log {
	t.Helper()
	cfg := commitlog.DefaultConfig(t.TempDir())
	cfg.SegmentSize = 1 << 20
	cfg.Logger = zerolog.Nop()
	l, err := commitlog.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestFinishPopSkipsDeletedMessages checks the lazy pop path: a message
// recorded in flight whose record retention deleted before the pop read
// its body is left out of the answer, as the eager read leaves it out,
// instead of failing a pop whose records are already committed.
func TestFinishPopSkipsDeletedMessages(t *testing.T) {
	l := openTestLog(t)
	s := &Service{cfg: Config{Log: l}}
	gone := cq.Entry{QueueOffset: 5, PhyOffset: 1 << 40, Size: 100} // past the log: ErrOffsetOutOfRange
	r := readResult{from: 5, offsets: []int64{5, 6}, records: [][]byte{nil, []byte("kept")},
		entries: []cq.Entry{gone, {QueueOffset: 6}}, next: 7}
	var res PopResult
	var info InfoBuilder
	if err := s.finishPop(PopRequest{Topic: "T"}, source{topic: "T", flag: FlagNormal}, r, &res, &info); err != nil {
		t.Fatalf("finishPop: %v", err)
	}
	res.finish()
	if len(res.Records) != 1 || string(res.Records[0]) != "kept" || string(res.Body) != "kept" {
		t.Fatalf("records %q, want only the one still in the log", res.Records)
	}
	if got := info.MsgOffsetInfo(); got != "0 0 6" {
		t.Fatalf("msgOffsetInfo %q, want the kept message's offset only", got)
	}
	// A queue whose every popped message is gone has no entry: one
	// without offsets fails the client's parse of the whole header.
	r = readResult{from: 5, offsets: []int64{5}, records: [][]byte{nil}, entries: []cq.Entry{gone}, next: 6}
	if err := s.finishPop(PopRequest{Topic: "T"}, source{topic: "T", queueID: 3, flag: FlagNormal}, r, &res, &info); err != nil {
		t.Fatalf("finishPop: %v", err)
	}
	if got, want := info.MsgOffsetInfo(), "0 0 6"; got != want {
		t.Fatalf("msgOffsetInfo %q after a queue whose messages are gone, want %q", got, want)
	}
	if got, want := info.StartOffsetInfo(), "0 0 5"; got != want {
		t.Fatalf("startOffsetInfo %q after a queue whose messages are gone, want %q", got, want)
	}
}

// TestFinishPopSkipsUndecodableRetryRecords checks that a pop-retry
// record that cannot be decoded (for its re-encoding under the requested
// topic) is left out of the answer, as RocketMQ's pop skips it, instead of
// failing a pop whose checkpoint is already committed: the other messages
// are answered, and the header names their offsets only.
func TestFinishPopSkipsUndecodableRetryRecords(t *testing.T) {
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	retry := RetryTopicV1("T", "G")
	good, err := commitlog.AppendRecord(nil, &commitlog.Message{Topic: retry, Body: []byte("retried"), BornHost: host, StoreHost: host})
	if err != nil {
		t.Fatal(err)
	}
	garbage := []byte("not a record")
	for _, actual := range []bool{false, true} {
		s := &Service{cfg: Config{ReturnActualRetryTopic: actual}, log: zerolog.Nop()}
		r := readResult{from: 5, offsets: []int64{5, 6}, records: [][]byte{garbage, good},
			entries: []cq.Entry{{QueueOffset: 5}, {QueueOffset: 6}}, next: 7}
		var res PopResult
		var info InfoBuilder
		if err := s.finishPop(PopRequest{Group: "G", Topic: "T"}, source{topic: retry, flag: FlagRetryV1}, r, &res, &info); err != nil {
			t.Fatalf("finishPop (actual retry topic %v): %v", actual, err)
		}
		res.finish()
		if len(res.Records) != 1 {
			t.Fatalf("%d records (actual retry topic %v), want the decodable one", len(res.Records), actual)
		}
		m, err := commitlog.Decode(res.Records[0])
		if err != nil || string(m.Body) != "retried" {
			t.Fatalf("answered record %q: %v", m.Body, err)
		}
		if got := info.MsgOffsetInfo(); got != "1 0 6" {
			t.Fatalf("msgOffsetInfo %q (actual retry topic %v), want the answered message's offset only", got, actual)
		}
	}
}

// TestChangeInvisibleTimeInThePopMillisecond checks a change of invisible
// time of a checkpoint's first message in the millisecond it was popped:
// the message's new checkpoint would have the old one's name, so it gets
// the next millisecond as its popTime, and the other message of the pop
// stays in flight under its old handle.
func TestChangeInvisibleTimeInThePopMillisecond(t *testing.T) {
	db, err := kvindex.Open(kvindex.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.UnixMilli(1_000_000)
	s := &Service{cfg: Config{Now: func() time.Time { return now }, Offsets: db.ConsumerOffsets()}, store: db.Pop(), seed: maphash.MakeSeed(), wake: make(chan struct{}, 1)}
	s.lowDeadline.Store(math.MaxInt64)
	ck := kvindex.Checkpoint{Group: "G", Topic: "T", CKOffset: 7, Offsets: []int64{7, 8},
		VisibleAt: 1_060_000, PopTime: 1_000_000, InvisibleTime: 60_000}
	putCheckpoints(t, s, ck)
	old := Handle{CKOffset: 7, PopTime: ck.PopTime, InvisibleTime: ck.InvisibleTime}
	res, err := s.ChangeInvisibleTime("G", "T", 0, 7, old, 60_000)
	if err != nil || !res.Changed || res.PopTime != 1_000_001 {
		t.Fatalf("change invisible time: %+v, %v", res, err)
	}
	r, ok, err := s.InFlight("G", "T", 0, 7)
	if err != nil || !ok || r.PopTime != 1_000_001 || r.CKOffset != 7 || r.VisibleAt != 1_060_001 {
		t.Fatalf("moved message: %+v %v %v", r, ok, err)
	}
	if r, ok, _ := s.InFlight("G", "T", 0, 8); !ok || r.PopTime != 1_000_000 {
		t.Fatalf("other message of the pop: %+v %v", r, ok)
	}
	// The old handle no longer acks the moved message; the new one does.
	if a, err := s.Ack("G", "T", 0, 7, old); err != nil || a.Deleted != 0 {
		t.Fatalf("stale handle acked: %+v %v", a, err)
	}
	if a, err := s.Ack("G", "T", 0, 7, Handle{CKOffset: 7, PopTime: res.PopTime, InvisibleTime: res.InvisibleTime}); err != nil || a.Deleted != 1 {
		t.Fatalf("new handle: %+v %v", a, err)
	}
}

// TestReviveDeletesDeadlineEntriesWithoutCheckpoint checks that a deadline
// entry whose checkpoint now has another deadline (here left by writing
// the checkpoint twice, which the service never does) is deleted by the
// round that meets it, and that the checkpoint itself stays in flight.
func TestReviveDeletesDeadlineEntriesWithoutCheckpoint(t *testing.T) {
	db, err := kvindex.Open(kvindex.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.UnixMilli(1_000_000)
	s := &Service{cfg: Config{Now: func() time.Time { return now }, ReviveBatch: 100, OnQueueReady: func(string, string, int32) {}}, store: db.Pop(),
		seed: maphash.MakeSeed(), wake: make(chan struct{}, 1), log: zerolog.Nop()}
	s.lowDeadline.Store(math.MaxInt64)
	ck := kvindex.Checkpoint{Group: "G", Topic: "T", CKOffset: 3, Offsets: []int64{3, 4}, PopTime: 900_000, InvisibleTime: 60_000, VisibleAt: 960_000}
	later := ck
	later.VisibleAt = 5_000_000 // the record moves on; its first entry stays behind
	putCheckpoints(t, s, ck, later)
	if n, err := s.ReviveOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("revive round: %d messages, %v", n, err)
	}
	var left []kvindex.Checkpoint
	if err := s.store.DueCheckpoints(0, math.MaxInt64, 0, func(c kvindex.Checkpoint) bool { left = append(left, c); return true }); err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].VisibleAt != 5_000_000 || len(left[0].Offsets) != 2 {
		t.Fatalf("after the round: %+v", left)
	}
}

// Messages whose revive put failed (or whose intent a crash left and
// whose read then failed) go back to the checkpoint they came from, due
// after the first backoff: several of one checkpoint into one, merged
// with the messages of it still there (those a revive could not read).
func TestGiveBackMergesIntoTheirCheckpoint(t *testing.T) {
	db, err := kvindex.Open(kvindex.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := &Service{store: db.Pop(), log: zerolog.Nop()}
	const now = 1_000_000
	// One checkpoint whose offset 5 could not be read (moved on, first
	// attempt failed) and whose 6 and 7 were not put; another whose 9 was
	// not put.
	moved := kvindex.Checkpoint{Group: "G", Topic: "T", CKOffset: 5, PopTime: 900_000, InvisibleTime: 60_000,
		VisibleAt: now + reviveBackoff[0].Milliseconds(), Attempts: 1, Offsets: []int64{5}}
	orig := moved
	orig.Attempts, orig.Offsets = 0, []int64{5, 6, 7}
	other := kvindex.Checkpoint{Group: "G", Topic: "T", CKOffset: 8, PopTime: 910_000, InvisibleTime: 60_000, Offsets: []int64{9}}
	putCheckpoints(t, s, moved)
	in6, in7, in9 := kvindex.IntentOf(&orig, 6), kvindex.IntentOf(&orig, 7), kvindex.IntentOf(&other, 9)

	g := s.store.NewBatch()
	if err := s.giveBack(g, []*kvindex.ReviveIntent{&in6, &in7, &in9}, now, true); err != nil {
		t.Fatal(err)
	}
	if err := g.Commit(true); err != nil {
		t.Fatal(err)
	}
	g.Close()
	var cks []kvindex.Checkpoint
	if err := s.store.DueCheckpoints(0, math.MaxInt64, 0, func(c kvindex.Checkpoint) bool { cks = append(cks, c); return true }); err != nil {
		t.Fatal(err)
	}
	due := now + reviveBackoff[0].Milliseconds()
	if len(cks) != 2 || cks[0].CKOffset != 5 || !slices.Equal(cks[0].Offsets, []int64{5, 6, 7}) || cks[0].VisibleAt != due || cks[0].Attempts != 1 ||
		cks[1].CKOffset != 8 || !slices.Equal(cks[1].Offsets, []int64{9}) || cks[1].VisibleAt != due || cks[1].Attempts != 1 || cks[1].PopTime != 910_000 {
		t.Fatalf("checkpoints after the give-back: %+v", cks)
	}
}

// failingBroker is a pop.Broker whose puts fail and whose dispatcher
// cannot be waited for.
type failingBroker struct{ puts, waits int }

func (f *failingBroker) ReadQueueNums(string) (int, bool, error)   { return 1, true, nil }
func (f *failingBroker) EnsureTopic(string) error                  { return nil }
func (f *failingBroker) RetryMaxTimes(string) (int32, bool, error) { return 16, true, nil }
func (f *failingBroker) WaitDispatched(context.Context) error {
	f.waits++
	return context.DeadlineExceeded
}
func (f *failingBroker) Put(context.Context, []*commitlog.Message) (commitlog.AppendStatus, error) {
	f.puts++
	return commitlog.PutOK, errors.New("disk full")
}

// A revive put that fails while the dispatcher cannot be waited for
// cannot tell what it stored: its revive batch stays and the round
// reports it. (broker TestFailedRevivePutGivesBackWhatDidNotLand covers
// the give-back, TestFailedRevivePutSettledOnceTheDispatcherCatchesUp the
// settle of the batch left.)
func TestFailedRevivePutWithTheDispatcherStuckKeepsItsBatch(t *testing.T) {
	db, err := kvindex.Open(kvindex.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fb := &failingBroker{}
	s := &Service{cfg: Config{Broker: fb}, store: db.Pop(), log: zerolog.Nop()}
	const now = 1_000_000
	ck := kvindex.Checkpoint{Group: "G", Topic: "T", CKOffset: 4, PopTime: 900_000, InvisibleTime: 60_000, Offsets: []int64{4, 5}}
	batch := kvindex.ReviveBatch{Checkpoint: ck}
	var out []revived
	for _, in := range batch.Intents() {
		m := commitlog.Message{Topic: "T", Body: []byte("x")}
		out = append(out, revived{msg: s.reviveMessage(&m, 16, &in, 0), intent: in})
	}
	b := s.store.NewBatch()
	if err := b.PutReviveBatch(&batch); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()

	_, err = s.putIntents(context.Background(), queueKey{"G", "T", 0}, out, []kvindex.ReviveBatch{batch}, now)
	if fb.puts != 1 || fb.waits != 1 {
		t.Fatalf("%d puts and %d waits for the dispatcher, want 1 and 1", fb.puts, fb.waits)
	}
	var cks []kvindex.Checkpoint
	if err := s.store.DueCheckpoints(0, math.MaxInt64, 0, func(c kvindex.Checkpoint) bool { cks = append(cks, c); return true }); err != nil {
		t.Fatal(err)
	}
	left, cerr := s.store.CountReviveIntents()
	if cerr != nil {
		t.Fatal(cerr)
	}
	if !errors.Is(err, context.DeadlineExceeded) || len(cks) != 0 || left != 2 {
		t.Fatalf("put with a stuck dispatcher: %v, checkpoints %+v, %d messages reviving; want the error, none, 2", err, cks, left)
	}
	if st := s.ReviveStats(); st.Retried != 0 {
		t.Fatalf("revive stats %+v count a failed put", st)
	}
}

// oneQueue serves the entries of queue 0 of one topic; the rest of
// cq.Store is not used.
type oneQueue struct {
	cq.Store
	topic   string
	entries []cq.Entry
}

func (q *oneQueue) MinOffset(string, int32) (int64, error) { return 0, nil }

func (q *oneQueue) MaxOffset(topic string, queueID int32) (int64, error) {
	if topic != q.topic || queueID != 0 {
		return 0, nil
	}
	return int64(len(q.entries)), nil
}

func (q *oneQueue) Get(topic string, queueID int32, from int64, max int) ([]cq.Entry, error) {
	if topic != q.topic || queueID != 0 || from >= int64(len(q.entries)) {
		return nil, nil
	}
	return q.entries[from:min(int64(len(q.entries)), from+int64(max))], nil
}

// TestStoredRevivesSkipsUndecodableRecords checks that settling a revive
// batch is not stopped by a record of the pop-retry topic that cannot be
// decoded: the records around it still tell what was stored, and the
// batch's other messages count as not stored (put again) instead of the
// settle failing before every round, their revive never finished.
func TestStoredRevivesSkipsUndecodableRecords(t *testing.T) {
	l := openTestLog(t)
	ck := kvindex.Checkpoint{Group: "G", Topic: "T", CKOffset: 4, PopTime: 900_000, InvisibleTime: 60_000, Offsets: []int64{4, 5, 6}}
	batch := kvindex.ReviveBatch{Checkpoint: ck}
	retry := RetryTopicV1("T", "G")
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	var stored []cq.Entry
	for _, in := range batch.Intents() {
		if in.QueueOffset == 5 {
			continue // the put did not store this one
		}
		m := &commitlog.Message{Topic: retry, Body: []byte("revived"), BornHost: host, StoreHost: host,
			Properties: kvindex.PropertyRevivedFrom + "\x01" + in.PropertyValue() + "\x02"}
		res, err := l.Append(context.Background(), commitlog.AppendRequest{Message: m})
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, cq.Entry{PhyOffset: res.PhyOffset, Size: res.Records[0].Size})
	}
	// Between the two records, an entry that points inside the first.
	bad := cq.Entry{PhyOffset: stored[0].PhyOffset + 8, Size: stored[0].Size}
	entries := []cq.Entry{stored[0], bad, stored[1]}
	for i := range entries {
		entries[i].QueueOffset = int64(i)
	}
	s := &Service{cfg: Config{Log: l, CQ: &oneQueue{topic: retry, entries: entries}}, log: zerolog.Nop()}
	got, err := s.storedRevives([]kvindex.ReviveBatch{batch})
	if err != nil {
		t.Fatalf("stored revives past an undecodable record: %v", err)
	}
	for off, want := range map[int64]bool{4: true, 5: false, 6: true} {
		if k := (revivedKey{"G", "T", 0, off}); got[k] != want {
			t.Errorf("offset %d stored: %v, want %v (found %v)", off, got[k], want, got)
		}
	}
}

// puttingBroker is a pop.Broker whose puts succeed; it keeps what they
// put.
type puttingBroker struct{ put []*commitlog.Message }

func (p *puttingBroker) ReadQueueNums(string) (int, bool, error)   { return 1, true, nil }
func (p *puttingBroker) EnsureTopic(string) error                  { return nil }
func (p *puttingBroker) RetryMaxTimes(string) (int32, bool, error) { return 16, true, nil }
func (p *puttingBroker) WaitDispatched(context.Context) error      { return nil }
func (p *puttingBroker) Put(_ context.Context, msgs []*commitlog.Message) (commitlog.AppendStatus, error) {
	p.put = append(p.put, msgs...)
	return commitlog.PutOK, nil
}

// TestReviveDropsUndecodableMessages checks that a revive round drops an
// expired message whose record cannot be decoded, as RocketMQ's revive
// drops a message it cannot get from its store, instead of giving it back
// to its checkpoint to fail again every backoff for ever; the other
// message of the checkpoint is revived as usual.
func TestReviveDropsUndecodableMessages(t *testing.T) {
	l := openTestLog(t)
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	m := &commitlog.Message{Topic: "T", Body: []byte("popped"), BornHost: host, StoreHost: host}
	res, err := l.Append(context.Background(), commitlog.AppendRequest{Message: m})
	if err != nil {
		t.Fatal(err)
	}
	good := cq.Entry{QueueOffset: 0, PhyOffset: res.PhyOffset, Size: res.Records[0].Size}
	// The entry of offset 1 points inside that record; a record after it
	// keeps the bytes it names within the log.
	if _, err := l.Append(context.Background(), commitlog.AppendRequest{Message: &commitlog.Message{Topic: "other", BornHost: host, StoreHost: host}}); err != nil {
		t.Fatal(err)
	}
	bad := cq.Entry{QueueOffset: 1, PhyOffset: res.PhyOffset + 8, Size: res.Records[0].Size}
	db, err := kvindex.Open(kvindex.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.UnixMilli(1_000_000)
	pb := &puttingBroker{}
	s := &Service{cfg: Config{Now: func() time.Time { return now }, ReviveBatch: 100, OnQueueReady: func(string, string, int32) {},
		Log: l, CQ: &oneQueue{topic: "T", entries: []cq.Entry{good, bad}}, Broker: pb, Offsets: db.ConsumerOffsets()},
		store: db.Pop(), seed: maphash.MakeSeed(), wake: make(chan struct{}, 1), log: zerolog.Nop()}
	s.lowDeadline.Store(math.MaxInt64)
	ck := kvindex.Checkpoint{Group: "G", Topic: "T", CKOffset: 0, Offsets: []int64{0, 1}, PopTime: 900_000, InvisibleTime: 60_000, VisibleAt: 960_000}
	putCheckpoints(t, s, ck)

	if _, err := s.ReviveOnce(context.Background()); err != nil {
		t.Fatalf("revive round: %v", err)
	}
	if len(pb.put) != 1 || pb.put[0].Topic != RetryTopicV1("T", "G") || string(pb.put[0].Body) != "popped" {
		t.Fatalf("revive put %d messages (%+v), want the decodable one to the pop-retry topic", len(pb.put), pb.put)
	}
	var left []kvindex.Checkpoint
	if err := s.store.DueCheckpoints(0, math.MaxInt64, 0, func(c kvindex.Checkpoint) bool { left = append(left, c); return true }); err != nil {
		t.Fatal(err)
	}
	reviving, err := s.store.CountReviveIntents()
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 || reviving != 0 {
		t.Fatalf("after the round: checkpoints %+v, %d messages reviving; want none", left, reviving)
	}
	if st := s.ReviveStats(); st.Retried != 1 || st.Undecodable != 1 {
		t.Fatalf("revive stats %+v, want 1 retried and 1 undecodable", st)
	}
}

// retryFirst spreads popFromRetryProbability's share evenly over a
// group's pops: exactly that many of every 100, every fifth at 20, none
// at a negative value, all at 100 or more.
func TestRetryFirstShare(t *testing.T) {
	for _, tc := range []struct{ percent, want int }{{20, 20}, {33, 33}, {50, 50}, {1, 1}, {100, 100}, {150, 100}, {-1, 0}} {
		n := 0
		for c := uint64(1000); c < 1100; c++ {
			if retryFirst(c, tc.percent) {
				n++
			}
		}
		if n != tc.want {
			t.Errorf("percent %d: %d of 100 pops read retry first, want %d", tc.percent, n, tc.want)
		}
	}
	for c := uint64(0); c < 20; c++ {
		if retryFirst(c, 20) != (c%5 == 0) {
			t.Errorf("percent 20, pop %d: retry first %v, want every fifth", c, retryFirst(c, 20))
		}
	}
}

// A message whose revive failed maxReviveAttempts times is dropped at its
// next failure under DropExhaustedRevives (skipWhenCKRePutReachMaxTimes),
// and given back for another try every 2 h without it.
func TestGiveBackDropsExhaustedRevives(t *testing.T) {
	for _, drop := range []bool{false, true} {
		t.Run(fmt.Sprint("drop=", drop), func(t *testing.T) {
			db := openIndex(t)
			s := &Service{cfg: Config{DropExhaustedRevives: drop}, store: db.Pop(), log: zerolog.Nop()}
			const now = 1_000_000
			tired := kvindex.Checkpoint{Group: "G", Topic: "T", CKOffset: 5, PopTime: 900_000, InvisibleTime: 60_000,
				Attempts: maxReviveAttempts, Offsets: []int64{5}}
			fresh := kvindex.Checkpoint{Group: "G", Topic: "T", CKOffset: 8, PopTime: 910_000, InvisibleTime: 60_000,
				Attempts: maxReviveAttempts - 1, Offsets: []int64{8}}
			in5, in8 := kvindex.IntentOf(&tired, 5), kvindex.IntentOf(&fresh, 8)
			g := s.store.NewBatch()
			if err := s.giveBack(g, []*kvindex.ReviveIntent{&in5, &in8}, now, true); err != nil {
				t.Fatal(err)
			}
			if err := g.Commit(true); err != nil {
				t.Fatal(err)
			}
			g.Close()
			var got []string
			if err := s.store.DueCheckpoints(0, math.MaxInt64, 0, func(c kvindex.Checkpoint) bool {
				got = append(got, fmt.Sprintf("%d:%d@%d", c.CKOffset, c.Attempts, c.VisibleAt-now))
				return true
			}); err != nil {
				t.Fatal(err)
			}
			last := reviveBackoff[len(reviveBackoff)-1].Milliseconds()
			want := []string{fmt.Sprintf("5:%d@%d", maxReviveAttempts+1, last), fmt.Sprintf("8:%d@%d", maxReviveAttempts, last)}
			if drop {
				want = want[1:]
			}
			if !slices.Equal(got, want) {
				t.Fatalf("checkpoints after the give-back %v, want %v", got, want)
			}
		})
	}
}

// unreadableQueue answers the revive's range read with nothing and fails
// every read of one entry; its queues are empty.
type unreadableQueue struct{ cq.Store }

func (unreadableQueue) MaxOffset(string, int32) (int64, error) { return 0, nil }

func (unreadableQueue) Get(_ string, _ int32, _ int64, max int) ([]cq.Entry, error) {
	if max > 1 {
		return nil, nil
	}
	return nil, errors.New("read error")
}

// A message that cannot be read is dropped at its failure after
// maxReviveAttempts under DropExhaustedRevives, and kept for another try
// without it.
func TestReviveDropsExhaustedUnreadableMessages(t *testing.T) {
	for _, drop := range []bool{false, true} {
		t.Run(fmt.Sprint("drop=", drop), func(t *testing.T) {
			db := openIndex(t)
			now := time.UnixMilli(1_000_000)
			s := &Service{cfg: Config{Now: func() time.Time { return now }, ReviveBatch: 100, OnQueueReady: func(string, string, int32) {},
				CQ: unreadableQueue{}, Broker: &puttingBroker{}, Offsets: db.ConsumerOffsets(), DropExhaustedRevives: drop},
				store: db.Pop(), seed: maphash.MakeSeed(), wake: make(chan struct{}, 1), log: zerolog.Nop()}
			s.lowDeadline.Store(math.MaxInt64)
			putCheckpoints(t, s, kvindex.Checkpoint{Group: "G", Topic: "T", CKOffset: 0, Offsets: []int64{0, 1}, PopTime: 900_000,
				InvisibleTime: 60_000, VisibleAt: 960_000, Attempts: maxReviveAttempts})
			if _, err := s.ReviveOnce(context.Background()); err != nil {
				t.Fatalf("revive round: %v", err)
			}
			var left []kvindex.Checkpoint
			if err := s.store.DueCheckpoints(0, math.MaxInt64, 0, func(c kvindex.Checkpoint) bool { left = append(left, c); return true }); err != nil {
				t.Fatal(err)
			}
			if drop && len(left) != 0 {
				t.Fatalf("checkpoints left %+v, want the exhausted one dropped", left)
			}
			if !drop && (len(left) != 1 || left[0].Attempts != maxReviveAttempts+1) {
				t.Fatalf("checkpoints left %+v, want it kept with one more attempt", left)
			}
		})
	}
}

// openIndex opens an index in a temporary directory, closed with the test.
func openIndex(t *testing.T) *kvindex.DB {
	t.Helper()
	db, err := kvindex.Open(kvindex.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// The pop counters stay bounded as groups and topics come and go: once
// maxRequestCounts pairs are counted a new pair takes one's place, and the
// others go on counting (clearing them all made every pop of a broker
// with more active pairs than that count 0: queue 0 and the retry topics
// first, every time; found by a review).
func TestRequestCountsStayBounded(t *testing.T) {
	s := &Service{reqCount: map[string]uint64{}}
	for i := 0; i < 3; i++ {
		if n := s.nextRequest("g", "T"); n != uint64(i) {
			t.Fatalf("pop %d of g@T counted %d", i, n)
		}
	}
	for i := 0; len(s.reqCount) < maxRequestCounts; i++ {
		s.nextRequest(fmt.Sprintf("churn%d", i), "T")
	}
	if n := s.nextRequest("g", "T"); n != 3 {
		t.Errorf("pop 3 of g@T in a full table counted %d", n)
	}
	for i := 0; i < 100; i++ {
		s.nextRequest(fmt.Sprintf("more%d", i), "T")
		if len(s.reqCount) > maxRequestCounts {
			t.Fatalf("%d pop counters, want at most %d", len(s.reqCount), maxRequestCounts)
		}
	}
	// g@T was most likely not the one replaced (100 of 65,536).
	if n, ok := s.reqCount["g@T"]; ok && n != 4 {
		t.Errorf("g@T counted %d after other pairs came, want 4", n)
	}
	kept := 0
	for i := 0; i < 1000; i++ {
		if _, ok := s.reqCount[fmt.Sprintf("churn%d@T", i)]; ok {
			kept++
		}
	}
	if kept < 900 {
		t.Errorf("%d of 1,000 counted pairs kept after 100 more came, want most", kept)
	}
}
