package kvindex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// stack is a CommitLog, an index and a running dispatcher over one store
// root, as the broker wires them.
type stack struct {
	root    string
	log     *commitlog.Log
	db      *DB
	store   cq.Store
	mirror  cq.Store      // the other layout in double-write, or nil
	files   *filecq.Store // the file layout when written
	offsets *QueueOffsets
	disp    *Dispatcher
}

var stackLogger = zerolog.Nop()

func openStack(t testing.TB, root string, cfg commitlog.Config) *stack {
	t.Helper()
	return openStackWith(t, root, cfg, LayoutKV, "")
}

// openStackWith opens a stack whose reads use the layout read ("kv" or
// "file") and which also writes the layout mirror ("" for none); adjust
// changes the dispatcher's options.
func openStackWith(t testing.TB, root string, cfg commitlog.Config, read, mirror string, adjust ...func(*DispatcherOptions)) *stack {
	t.Helper()
	db, err := Open(Options{Dir: filepath.Join(root, DirName), CacheSize: 8 << 20, MemTableSize: 4 << 20, Logger: stackLogger})
	if err != nil {
		t.Fatalf("open index: %v", err)
	}
	from, err := db.Dispatched()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dir = root
	cfg.RecoverFrom = from
	l, err := commitlog.Open(cfg)
	if err != nil {
		_ = db.Close()
		t.Fatalf("open commitlog: %v", err)
	}
	db.log = stackLogger
	s := &stack{root: root, log: l, db: db}
	layout := func(name string) cq.Store {
		switch name {
		case LayoutKV:
			return db.ConsumeQueue(0)
		case LayoutFile:
			s.files, err = filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 100, StoreTime: s.storeTime, Logger: stackLogger})
			if err != nil {
				t.Fatalf("open file cq: %v", err)
			}
			return s.files
		}
		return nil
	}
	s.store, s.mirror = layout(read), layout(mirror)
	s.offsets = NewQueueOffsets(s.store, 0, stackLogger)
	opts := DispatcherOptions{Log: l, DB: db, Store: s.store, Mirror: s.mirror, Offsets: s.offsets,
		FileFlushInterval: 20 * time.Millisecond, Logger: stackLogger}
	for _, f := range adjust {
		f(&opts)
	}
	s.disp, err = NewDispatcher(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.disp.Recover(); err != nil {
		t.Fatalf("recover: %v", err)
	}
	s.disp.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatalf("catch up: %v", err)
	}
	return s
}

// storeTime reads a record's store time, for the file layout.
func (s *stack) storeTime(phy int64, size int32) (int64, error) {
	v, err := s.log.Read(phy, size)
	if err != nil {
		return 0, err
	}
	defer v.Release()
	m, err := commitlog.Decode(v.Data)
	return m.StoreTimestamp, err
}

func (s *stack) close(t testing.TB) {
	t.Helper()
	if err := s.disp.Close(); err != nil {
		t.Error(err)
	}
	if s.files != nil {
		if err := s.files.Close(); err != nil {
			t.Error(err)
		}
	}
	if err := s.log.Close(); err != nil {
		t.Error(err)
	}
	if err := s.db.Close(); err != nil {
		t.Error(err)
	}
}

// startDispatcher replaces the stack's dispatcher, which the caller has
// closed, by one with opts (Log, DB, Store, Offsets and Logger set to the
// stack's), recovered and started.
func (s *stack) startDispatcher(t testing.TB, opts DispatcherOptions) {
	t.Helper()
	opts.Log, opts.DB, opts.Store, opts.Offsets, opts.Logger = s.log, s.db, s.store, s.offsets, stackLogger
	d, err := NewDispatcher(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Recover(); err != nil {
		t.Fatalf("recover: %v", err)
	}
	d.Start()
	s.disp = d
}

type fixtureQueue struct {
	Topic     string `json:"topic"`
	QueueID   int32  `json:"queueId"`
	MinOffset int64  `json:"minOffset"`
	MaxOffset int64  `json:"maxOffset"`
	// Entries is [queueOffset, commitLogOffset, size, tagsCode] per entry;
	// its JSON name has commas, which a struct tag cannot spell.
	Entries [][]int64 `json:"-"`
}

func (q *fixtureQueue) UnmarshalJSON(b []byte) error {
	type plain fixtureQueue
	if err := json.Unmarshal(b, (*plain)(q)); err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	return json.Unmarshal(m["entries[queueOffset,commitLogOffset,size,tagsCode]"], &q.Entries)
}

type fixtureView struct {
	View struct {
		ConsumeQueues []fixtureQueue `json:"consumeQueues"`
		IndexQueries  []struct {
			Topic   string  `json:"topic"`
			Key     string  `json:"key"`
			Offsets []int64 `json:"commitLogOffsets"`
		} `json:"indexQueries"`
		Messages []struct {
			Topic           string            `json:"topic"`
			CommitLogOffset int64             `json:"commitLogOffset"`
			Properties      map[string]string `json:"properties"`
		} `json:"messages"`
	} `json:"view"`
}

// Dispatching the CommitLog that Apache RocketMQ 4.9.8 wrote yields, for
// every queue (business topics, delay levels, transaction topics), exactly
// the ConsumeQueue entries RocketMQ itself wrote, and the key index answers
// RocketMQ's index queries.
func TestDispatchRocketMQFixture(t *testing.T) {
	fix := filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8")
	raw, err := os.ReadFile(filepath.Join(fix, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want fixtureView
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	root := testutil.CopyStore(t, filepath.Join(fix, "clean"))
	s := openStack(t, root, commitlog.DefaultConfig(root))
	defer s.close(t)

	if s.disp.Dispatched() != 53272 {
		t.Fatalf("dispatched up to %d, want RocketMQ's max offset 53272", s.disp.Dispatched())
	}
	if len(want.View.ConsumeQueues) == 0 {
		t.Fatal("fixture lists no queues")
	}
	for _, q := range want.View.ConsumeQueues {
		maxOff, _ := s.store.MaxOffset(q.Topic, q.QueueID)
		minOff, _ := s.store.MinOffset(q.Topic, q.QueueID)
		if maxOff != q.MaxOffset || minOff != q.MinOffset {
			t.Errorf("%s/%d: bounds [%d,%d), RocketMQ [%d,%d)", q.Topic, q.QueueID, minOff, maxOff, q.MinOffset, q.MaxOffset)
		}
		got, err := s.store.Get(q.Topic, q.QueueID, q.MinOffset, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(q.Entries) {
			t.Errorf("%s/%d: %d entries, RocketMQ %d", q.Topic, q.QueueID, len(got), len(q.Entries))
			continue
		}
		for i, e := range got {
			w := q.Entries[i]
			if e.QueueOffset != w[0] || e.PhyOffset != w[1] || int64(e.Size) != w[2] || e.TagsCode != w[3] {
				t.Errorf("%s/%d entry %d: (%d,%d,%d,%d), RocketMQ %v", q.Topic, q.QueueID, i, e.QueueOffset, e.PhyOffset, e.Size, e.TagsCode, w)
			}
		}
	}
	// Every queue we indexed is one RocketMQ has.
	known := map[string]bool{}
	for _, q := range want.View.ConsumeQueues {
		known[fmt.Sprintf("%s/%d", q.Topic, q.QueueID)] = true
	}
	_ = s.store.Queues(func(topic string, qid int32) bool {
		if !known[fmt.Sprintf("%s/%d", topic, qid)] {
			t.Errorf("indexed queue %s/%d that RocketMQ does not have", topic, qid)
		}
		return true
	})

	for _, iq := range want.View.IndexQueries {
		res, err := s.db.KeyIndex().Lookup(KeyQuery{Topic: iq.Topic, Key: iq.Key, Kind: KindKey, Max: 100})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, r := range res {
			got = append(got, r.PhyOffset)
		}
		slices.Sort(got)
		w := slices.Clone(iq.Offsets)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("key %s/%s: offsets %v, RocketMQ %v", iq.Topic, iq.Key, got, w)
		}
	}
	// Unique keys are indexed too: each finds its record.
	n := 0
	for _, m := range want.View.Messages {
		uk := m.Properties["UNIQ_KEY"]
		if uk == "" {
			continue
		}
		n++
		res, err := s.db.KeyIndex().Lookup(KeyQuery{Topic: m.Topic, Key: uk, Kind: KindUniqKey, Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range res {
			found = found || r.PhyOffset == m.CommitLogOffset
		}
		if !found {
			t.Errorf("unique key %s of %s@%d not found: %v", uk, m.Topic, m.CommitLogOffset, res)
		}
	}
	if n < 90 {
		t.Fatalf("only %d fixture messages carry UNIQ_KEY", n)
	}
}

// Admit holds appenders back while dispatch is more than MaxLagBytes
// behind, lets them go once dispatch comes within the bound, and reports
// ErrDispatchBehind (leaving no waiter behind) when its wait runs out.
func TestDispatcherAdmit(t *testing.T) {
	s := openStack(t, t.TempDir(), commitlog.DefaultConfig(""))
	defer s.close(t)
	if err := s.disp.Close(); err != nil {
		t.Fatal(err)
	}
	stall := make(chan struct{})
	stalled := make(chan struct{}, 1)
	s.startDispatcher(t, DispatcherOptions{MaxLagBytes: 4096,
		Hooks: map[string]Hook{"STALL": HookFunc(func(*pebble.Batch, *commitlog.Message) error {
			stalled <- struct{}{}
			<-stall
			return nil
		})},
	})
	ctx := context.Background()

	if err := s.disp.Admit(ctx, time.Millisecond); err != nil {
		t.Fatalf("admit with nothing behind: %v", err)
	}
	appendForInspect(t, s, "STALL", 0, nil)
	<-stalled // dispatch now waits in the hook
	for range 40 {
		appendForInspect(t, s, "TopicA", 1, map[string]string{"UNIQ_KEY": "k"})
	}
	if lag := s.disp.Lag(); lag <= 4096 {
		t.Fatalf("lag %d after 40 appends behind a stalled dispatcher, want > 4096", lag)
	}
	err := s.disp.Admit(ctx, 20*time.Millisecond)
	if !errors.Is(err, ErrDispatchBehind) {
		t.Fatalf("admit while %d bytes behind: %v, want ErrDispatchBehind", s.disp.Lag(), err)
	}
	// A caller that gives up is told so, not that dispatch is behind.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.disp.Admit(cctx, time.Minute); !errors.Is(err, context.Canceled) || errors.Is(err, ErrDispatchBehind) {
		t.Fatalf("admit with a cancelled context while behind: %v, want context.Canceled", err)
	}
	s.disp.mu.Lock()
	left := len(s.disp.waiters)
	s.disp.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d waiters left after Admit gave up", left)
	}

	admitted := make(chan error, 1)
	go func() { admitted <- s.disp.Admit(ctx, time.Minute) }()
	select {
	case err := <-admitted:
		t.Fatalf("admit returned %v while dispatch is stalled", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(stall)
	if err := <-admitted; err != nil {
		t.Fatalf("admit after dispatch resumed: %v", err)
	}
	if lag := s.disp.Lag(); lag > 4096 {
		t.Fatalf("admitted with %d bytes behind, bound 4096", lag)
	}

	// No bound: Admit never waits, however far behind.
	unbounded := &Dispatcher{opts: DispatcherOptions{Log: s.log}}
	if err := unbounded.Admit(ctx, time.Nanosecond); err != nil {
		t.Fatalf("admit without a bound: %v", err)
	}
}

// topicName hands out one string per topic, and stops keeping names past
// maxDispatchTopics rather than growing without bound: the names kept
// stay, and other topics get a new string each time.
func TestDispatcherTopicNames(t *testing.T) {
	told := map[string]int{}
	d := &Dispatcher{topics: map[string]string{}, opts: DispatcherOptions{NewTopic: func(topic string) { told[topic]++ }}}
	a := d.topicName([]byte("Orders"))
	if b := d.topicName([]byte("Orders")); a != "Orders" || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatalf("two records of Orders got %q and %q, not one string", a, b)
	}
	if told["Orders"] != 1 {
		t.Fatalf("NewTopic told of Orders %d times after two of its records, want once", told["Orders"])
	}
	for i := 0; i < maxDispatchTopics+10; i++ {
		if got, want := d.topicName(fmt.Appendf(nil, "T%d", i)), fmt.Sprintf("T%d", i); got != want {
			t.Fatalf("topic %q for %q", got, want)
		}
		if len(d.topics) > maxDispatchTopics {
			t.Fatalf("%d names kept, bound %d", len(d.topics), maxDispatchTopics)
		}
	}
	if len(d.topics) != maxDispatchTopics {
		t.Fatalf("%d names kept, want the bound %d", len(d.topics), maxDispatchTopics)
	}
	if c := d.topicName([]byte("Orders")); unsafe.StringData(c) != unsafe.StringData(a) {
		t.Errorf("Orders got a new string once the set was full; the names kept should stay")
	}
	if told["Orders"] != 1 || told["T0"] != 1 {
		t.Errorf("NewTopic told of Orders %d times and of T0 %d, want once each: their names are kept", told["Orders"], told["T0"])
	}
	late := []byte(fmt.Sprint("T", maxDispatchTopics+5))
	if x, y := d.topicName(late), d.topicName(late); x != string(late) || y != string(late) || unsafe.StringData(x) == unsafe.StringData(y) {
		t.Errorf("a topic past the bound got %q and %q, want a new string each", x, y)
	}
	// Its first record when the loop above met it, then the two here: a
	// topic whose name is not kept cannot be told apart from a new one.
	if n := told[string(late)]; n != 3 {
		t.Errorf("NewTopic told of a topic past the bound %d times over three of its records, want each time", n)
	}
	if _, ok := d.topics[string(late)]; ok || len(d.topics) != maxDispatchTopics {
		t.Errorf("a topic past the bound was kept: %d names", len(d.topics))
	}
}

// Under BatchInterval a batch that was not full holds the records after
// it back until the interval has passed since it began, while full batches
// follow each other at once; Close ends the wait.
func TestDispatcherBatchInterval(t *testing.T) {
	s := openStack(t, t.TempDir(), commitlog.DefaultConfig(""))
	defer s.close(t)
	if err := s.disp.Close(); err != nil {
		t.Fatal(err)
	}
	// Five records wait before the dispatcher starts: two full batches of
	// two, then one of one.
	for range 5 {
		appendForInspect(t, s, "TopicA", 0, nil)
	}
	s.startDispatcher(t, DispatcherOptions{MaxBatchRecords: 2, BatchInterval: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.disp.WaitFor(ctx, s.log.MaxOffset()); err != nil {
		t.Fatalf("wait for five records in batches of two under an hour's interval: %v (a full batch must not wait)", err)
	}

	// The batch of one began the interval: a record now waits for its end.
	appendForInspect(t, s, "TopicA", 0, nil)
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	if err := s.disp.WaitFor(short, s.log.MaxOffset()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("record appended right after a batch that was not full: WaitFor = %v, want it held back by the interval", err)
	}
	if q, err := s.store.MaxOffset("TopicA", 0); err != nil || q != 5 {
		t.Fatalf("max offset of TopicA/0 = %d, %v during the interval, want 5", q, err)
	}

	closed := make(chan error, 1)
	go func() { closed <- s.disp.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the wait for the batch interval")
	}
	// Reopened without an interval, the held record is dispatched.
	s.startDispatcher(t, DispatcherOptions{})
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if q, err := s.store.MaxOffset("TopicA", 0); err != nil || q != 6 {
		t.Fatalf("max offset of TopicA/0 = %d, %v after a restart without an interval, want 6", q, err)
	}
}

// A match sees, through EachProperties, the properties of exactly the new
// entries of its queue in queue order, also when one batch interleaves
// several queues; yield can stop early; an Arrival of Notify tells none.
func TestArrivalEachProperties(t *testing.T) {
	s := openStack(t, t.TempDir(), commitlog.DefaultConfig(""))
	defer s.close(t)
	if err := s.disp.Close(); err != nil {
		t.Fatal(err)
	}
	// One batch: q0 k=1, q1 k=x, q0 k=2, q1 k=y, q2 (nobody waits), q0 k=3.
	for _, r := range []struct {
		q int32
		k string
	}{{0, "1"}, {1, "x"}, {0, "2"}, {1, "y"}, {2, "z"}, {0, "3"}} {
		appendForInspect(t, s, "TopicP", r.q, map[string]string{"k": r.k})
	}
	n := NewNotifier()
	seen := map[int32][]string{}
	var firstOnly []string
	watch := func(q int32) func(Arrival) bool {
		return func(a Arrival) bool {
			known := a.EachProperties(func(props string) bool {
				k, _ := commitlog.LookupProperty(props, "k")
				seen[q] = append(seen[q], k)
				return true
			})
			if !known {
				t.Errorf("queue %d: properties of a dispatch not known", q)
			}
			return false // stay registered
		}
	}
	stopEarly := func(a Arrival) bool {
		known := a.EachProperties(func(props string) bool {
			k, _ := commitlog.LookupProperty(props, "k")
			firstOnly = append(firstOnly, k)
			return false
		})
		if !known {
			t.Error("properties not known to a match that stopped early")
		}
		return false
	}
	for _, w := range []*Waiter{n.WaitMatch("TopicP", 0, watch(0), func() {}), n.WaitMatch("TopicP", 1, watch(1), func() {}),
		n.WaitMatch("TopicP", 0, stopEarly, func() {})} {
		defer w.Cancel()
	}
	s.startDispatcher(t, DispatcherOptions{Notifier: n})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(seen[0], seen[1], firstOnly); got != "[1 2 3] [x y] [1]" {
		t.Fatalf("properties seen by the matches of queues 0 and 1 and by the one that stops early: %s, want [1 2 3] [x y] [1]", got)
	}
	if (Arrival{Topic: "TopicP"}).EachProperties(func(string) bool { t.Error("yield called for an Arrival of Notify"); return true }) {
		t.Fatal("an Arrival of Notify claims to know its properties")
	}
}

// An entry whose record cannot be read back makes its Arrival's
// properties unknown (the match must then accept), and every match of the
// batch sees the same properties of the entries it could read.
func TestArrivalPropertiesUnreadable(t *testing.T) {
	s := openStack(t, t.TempDir(), commitlog.DefaultConfig(""))
	defer s.close(t)
	res := appendForInspect(t, s, "TopicU", 0, map[string]string{"k": "v"})
	var r arrivalRecords
	entries := []cq.Dispatch{
		{Topic: "TopicU", QueueID: 0, Entry: cq.Entry{PhyOffset: res.PhyOffset, Size: int32(res.WroteBytes)}},
		{Topic: "TopicU", QueueID: 1, Entry: cq.Entry{PhyOffset: 1 << 40, Size: 100}}, // past the log's end
	}
	r.begin(s.log, entries, map[qkey]int{queueIDOf("TopicU", 0): 0, queueIDOf("TopicU", 1): 1}, 2)
	defer r.end()
	for pass := range 2 {
		var got []string
		if known := r.each(0, func(p string) bool { got = append(got, p); return true }); !known || len(got) != 1 || got[0] != "k\x01v\x02" {
			t.Fatalf("pass %d over the readable entry: %q, known %v", pass, got, known)
		}
	}
	if r.each(1, func(string) bool { t.Error("yield called for an unreadable record"); return true }) {
		t.Fatal("the properties of an entry past the log's end are reported known")
	}
}

// Appends to queues the offset table does not hold (which read the
// ConsumeQueue under the table's lock) while the dispatcher indexes the
// records before them (which tells the table what it indexed) never
// deadlock: the dispatcher tells the table after it released the
// ConsumeQueue's lock. TestDispatchMultiDispatch hung once this way in CI.
func TestAssignOfUnheldQueuesWhileDispatching(t *testing.T) {
	root := t.TempDir()
	cfg := commitlog.DefaultConfig("")
	cfg.SegmentSize = 4 << 20
	s := openStackWith(t, root, cfg, LayoutKV, "")
	const topics = 3000
	done := make(chan error, 1)
	go func() {
		for i := range topics {
			// A new topic each time: Assign loads the queue, and the
			// ConsumeQueue checks whether the topic has entries.
			m := &commitlog.Message{Topic: fmt.Sprintf("Unheld%d", i), Body: []byte("b"), BornTimestamp: 1}
			if _, err := s.log.Append(context.Background(), commitlog.AppendRequest{Message: m, Assigner: s.offsets}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		// Not closed: the stack's goroutines are stuck for good.
		t.Fatal("appends to unheld queues stopped while the dispatcher ran (lock-order deadlock)")
	}
	defer s.close(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.store.MaxOffset(fmt.Sprintf("Unheld%d", topics-1), 0); err != nil || got != 1 {
		t.Fatalf("last topic's queue end %d %v, want 1", got, err)
	}
}
