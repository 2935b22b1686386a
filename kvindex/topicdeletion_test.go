package kvindex

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/meta"
)

// dispatchGate is a dispatch hook that holds the dispatcher at a record:
// armed, the first record it sees blocks the batch until release; failing,
// every record fails its batch, so dispatch stays where it is.
type dispatchGate struct {
	armed   atomic.Bool
	failing atomic.Bool
	held    chan struct{} // closed when a record is held or a batch failed
	release chan struct{}
	seen    atomic.Bool
}

func newDispatchGate() *dispatchGate {
	return &dispatchGate{held: make(chan struct{}), release: make(chan struct{})}
}

var errGateShut = errors.New("dispatch gate shut")

// Dispatch implements Hook.
func (g *dispatchGate) Dispatch(_ *pebble.Batch, _ *commitlog.Message) error {
	if g.failing.Load() {
		if g.seen.CompareAndSwap(false, true) {
			close(g.held)
		}
		return errGateShut
	}
	if g.armed.CompareAndSwap(true, false) {
		close(g.held)
		<-g.release
	}
	return nil
}

// on makes the gate the hook of topic's records.
func (g *dispatchGate) on(topic string) func(*DispatcherOptions) {
	return func(o *DispatcherOptions) { o.Hooks = map[string]Hook{topic: g} }
}

// waitHeld waits until the gate holds the dispatcher.
func (g *dispatchGate) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-g.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the dispatcher never reached the gate")
	}
}

// appendKeyed appends n messages to queue 0 of topic, keyed prefix-0,
// prefix-1, ..., without waiting for their dispatch, and returns their
// CommitLog offsets.
func appendKeyed(t *testing.T, s *stack, topic, prefix string, n int, multi ...string) []int64 {
	t.Helper()
	var phys []int64
	for i := range n {
		props := map[string]string{"KEYS": fmt.Sprintf("%s-%d", prefix, i), "TAGS": "t"}
		if len(multi) > 0 {
			props[commitlog.PropertyMultiDispatch] = multi[0]
		}
		m := &commitlog.Message{Topic: topic, Body: []byte(prefix),
			Properties: commitlog.FormatProperties(props), BornHost: netip.MustParseAddrPort("127.0.0.1:1")}
		r, err := s.log.Append(context.Background(), commitlog.AppendRequest{Assigner: s.offsets, Message: m, MultiDispatch: multi})
		if err != nil {
			t.Fatal(err)
		}
		phys = append(phys, r.PhyOffset)
	}
	return phys
}

// deleteTopicAsBroker deletes topic as DELETE_TOPIC_IN_BROKER does: the
// deletion is recorded with the dispatcher, which drops the topic from
// every layout written (and runs more, when given), then the topic's
// cached queue offsets go.
func deleteTopicAsBroker(t *testing.T, s *stack, topic string, more ...func() error) {
	t.Helper()
	err := s.disp.DeleteTopic(topic, func() error {
		for _, st := range []cq.Store{s.store, s.mirror} {
			if st == nil {
				continue
			}
			if err := st.DeleteTopic(topic); err != nil {
				return err
			}
		}
		for _, f := range more {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.offsets.Forget(topic, AnyQueue)
}

// wantQueue fails the test unless queue 0 of topic in st holds exactly
// the records at phys, numbered from 0.
func wantQueue(t *testing.T, st cq.Store, layout, topic string, phys []int64) {
	t.Helper()
	if got := bounds(t, st, topic, 0); got != [2]int64{0, int64(len(phys))} {
		t.Errorf("%s: %s/0 spans %v, want [0,%d)", layout, topic, got, len(phys))
	}
	es, err := st.Get(topic, 0, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, e := range es {
		got = append(got, e.PhyOffset)
	}
	if fmt.Sprint(got) != fmt.Sprint(phys) {
		t.Errorf("%s: %s/0 holds the records at %v, want %v", layout, topic, got, phys)
	}
}

// keysFound returns how many of prefix-0 .. prefix-(n-1) the key index
// finds in topic.
func keysFound(t *testing.T, s *stack, topic, prefix string, n int) int {
	t.Helper()
	found := 0
	for i := range n {
		es, err := s.db.KeyIndex().Lookup(KeyQuery{Topic: topic, Key: fmt.Sprintf("%s-%d", prefix, i), Kind: KindKey})
		if err != nil {
			t.Fatal(err)
		}
		found += len(es)
	}
	return found
}

// Records of a topic appended before its deletion that dispatch reaches
// only after it (held at the first of them until the topic is deleted
// and created again, and new messages are sent to it) are left out of
// every ConsumeQueue layout and the key index: the topic created again
// holds its new messages alone, numbered from 0. A topic deleted once
// dispatch has indexed all its records is dropped as before. Either way
// dispatch keeps no deletion to look records up against afterwards.
func TestTopicDeletedAheadOfDispatch(t *testing.T) {
	for _, tc := range []struct {
		name         string
		read, mirror string
		late         int // records appended before the deletion and held
	}{
		{"kv held", LayoutKV, "", 4},
		{"kv and file held", LayoutKV, LayoutFile, 4},
		{"file and kv held", LayoutFile, LayoutKV, 4},
		{"kv all dispatched", LayoutKV, "", 0},
		{"kv and file all dispatched", LayoutKV, LayoutFile, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newDispatchGate()
			root := t.TempDir()
			s := openStackWith(t, root, layoutsConfig(root), tc.read, tc.mirror, g.on("T"))
			defer s.close(t)
			appendKeyed(t, s, "T", "done", 3)
			s.catchUp(t)
			if tc.late > 0 {
				g.armed.Store(true)
				appendKeyed(t, s, "T", "late", tc.late)
				g.waitHeld(t)
			}
			deleteTopicAsBroker(t, s, "T")
			fresh := appendKeyed(t, s, "T", "new", 2)
			close(g.release)
			s.catchUp(t)

			wantQueue(t, s.store, tc.read, "T", fresh)
			if s.mirror != nil {
				wantQueue(t, s.mirror, tc.mirror, "T", fresh)
				s.agree(t)
			}
			if n := keysFound(t, s, "T", "late", tc.late); n != 0 {
				t.Errorf("the key index finds %d keys of the deleted topic's held records", n)
			}
			if n := keysFound(t, s, "T", "new", 2); n != 2 {
				t.Errorf("the key index finds %d of the 2 new keys", n)
			}
			if d := s.disp.deleted.Load(); d != nil {
				t.Errorf("dispatch passed the deletion and still looks records up against %v", d.at)
			}
			// Messages sent later are indexed as any.
			fresh = append(fresh, appendKeyed(t, s, "T", "later", 1)...)
			s.catchUp(t)
			wantQueue(t, s.store, tc.read, "T", fresh)
		})
	}
}

// The deletion outlives a restart: records of the deleted topic that
// dispatch had not indexed when the broker stopped are left out when a
// later start dispatches them, while the topic created again gets its new
// messages from 0.
func TestTopicDeletionSurvivesRestart(t *testing.T) {
	g := newDispatchGate()
	root := t.TempDir()
	cfg := layoutsConfig(root)
	s := openStackWith(t, root, cfg, LayoutKV, LayoutFile, g.on("T"))
	appendKeyed(t, s, "T", "done", 3)
	s.catchUp(t)
	g.failing.Store(true)
	appendKeyed(t, s, "T", "late", 4)
	g.waitHeld(t)
	deleteTopicAsBroker(t, s, "T")
	s.close(t)
	db := openTestDBAt(t, root)
	at, _, err := db.metaInt64(metaDispatched)
	deletedAt, ok, err2 := db.metaInt64(metaTopicDeleted + "T")
	if err := errors.Join(err, err2, db.Close()); err != nil {
		t.Fatal(err)
	}
	if !ok || at >= deletedAt {
		t.Fatalf("dispatched to %d, deletion recorded at %d (%v): the test does not stop dispatch before the deletion", at, deletedAt, ok)
	}

	s = openStackWith(t, root, cfg, LayoutKV, LayoutFile)
	defer s.close(t)
	fresh := appendKeyed(t, s, "T", "new", 2)
	s.catchUp(t)
	wantQueue(t, s.store, LayoutKV, "T", fresh)
	wantQueue(t, s.mirror, LayoutFile, "T", fresh)
	if n := keysFound(t, s, "T", "late", 4); n != 0 {
		t.Errorf("the key index finds %d keys of the deleted topic's records dispatched after the restart", n)
	}
}

// A deletion recorded past the end of a CommitLog whose recovery cut its
// tail (lost before it was flushed) is moved back to that end: the
// messages of the topic created again are appended from there on and are
// indexed, not left out as records of the deleted topic.
func TestTopicDeletionPastRecoveredEnd(t *testing.T) {
	root := t.TempDir()
	cfg := layoutsConfig(root)
	s := openStack(t, root, cfg)
	appendKeyed(t, s, "T", "done", 3)
	s.catchUp(t)
	end := s.log.MaxOffset()
	s.close(t)
	db := openTestDBAt(t, root)
	err := db.recordTopicDeleted("T", end+1<<20)
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}

	s = openStack(t, root, cfg)
	defer s.close(t)
	fresh := appendKeyed(t, s, "T", "new", 2)
	s.catchUp(t)
	es, err := s.store.Get("T", 0, 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].PhyOffset != fresh[0] || es[1].PhyOffset != fresh[1] {
		t.Fatalf("T/0 after the done ones holds %v, want the new records at %v", es, fresh)
	}
	if v, _, err := s.db.metaInt64(metaTopicDeleted + "T"); err != nil || v != end {
		t.Fatalf("deletion recorded at %d (%v), want the recovered end %d", v, err, end)
	}
}

// A light message queue deleted while records multi-dispatched to it are
// held gets none of their entries, while their own topic keeps them, and
// the queue created again numbers its new entries from 0.
func TestLightQueueDeletedAheadOfDispatch(t *testing.T) {
	g := newDispatchGate()
	root := t.TempDir()
	cfg := layoutsConfig(root)
	s := openStackWith(t, root, cfg, LayoutKV, "", g.on("Parent"), func(o *DispatcherOptions) { o.MultiDispatch = true })
	defer s.close(t)
	g.armed.Store(true)
	const lmq = "%LMQ%a"
	late := appendKeyed(t, s, "Parent", "late", 3, lmq)
	g.waitHeld(t)
	deleteTopicAsBroker(t, s, lmq)
	fresh := appendKeyed(t, s, "Parent", "new", 2, lmq)
	close(g.release)
	s.catchUp(t)
	wantQueue(t, s.store, LayoutKV, lmq, fresh)
	wantQueue(t, s.store, LayoutKV, "Parent", append(late, fresh...))
}

// A compacted topic deleted and created again while records of it are
// held gets no copies of them: the copies of the new messages alone
// serve it.
func TestCompactedTopicDeletedAheadOfDispatch(t *testing.T) {
	g := newDispatchGate()
	var c *Compaction
	root := t.TempDir()
	s := openStackWith(t, root, layoutsConfig(root), LayoutKV, "", g.on("C"), withCompaction(&c))
	defer s.close(t)
	g.armed.Store(true)
	appendKeyed(t, s, "C", "late", 3)
	g.waitHeld(t)
	deleteTopicAsBroker(t, s, "C", func() error {
		c.TopicChanged("C", false)
		return c.DropTopic("C")
	})
	tc := meta.NewTopicConfig("C", 1)
	tc.Attributes[meta.AttrCleanupPolicy] = "COMPACTION"
	c.TopicChanged(tc.TopicName, tc.Compacted())
	appendKeyed(t, s, "C", "new", 2)
	close(g.release)
	s.catchUp(t)
	if got, want := compacted(t, c, "C"), "0:new-0=new 1:new-1=new"; got != want {
		t.Errorf("copies of C created again: %q, want %q", got, want)
	}
}

// A light message queue deleted while the file layout is not written is
// left without the entries of records multi-dispatched to it before the
// deletion when that layout catches up, as its own topic would be.
func TestLightQueueDeletedWhileLayoutNotWritten(t *testing.T) {
	root := t.TempDir()
	cfg := layoutsConfig(root)
	multi := func(o *DispatcherOptions) { o.MultiDispatch = true }
	const lmq = "%LMQ%a"
	s := openStackWith(t, root, cfg, LayoutKV, LayoutFile, multi)
	s.close(t)

	s = openStackWith(t, root, cfg, LayoutKV, "", multi)
	old := appendKeyed(t, s, "Parent", "old", 3, lmq)
	s.catchUp(t)
	deleteTopicAsBroker(t, s, lmq)
	fresh := appendKeyed(t, s, "Parent", "new", 2, lmq)
	s.catchUp(t)
	s.close(t)

	s = openStackWith(t, root, cfg, LayoutFile, LayoutKV, multi)
	defer s.close(t)
	wantQueue(t, s.store, LayoutFile, lmq, fresh)
	wantQueue(t, s.store, LayoutFile, "Parent", append(old, fresh...))
	s.agree(t)
}

// A batch is read again only when a topic it wrote something of may have
// been deleted while it read its records: one with entries in a queue of
// a topic deleted since, or one with a record of no queue of its own. A
// deletion of a topic the batch has nothing of lets it be written: a run
// of deletions does not hold dispatch back.
func TestMustRereadBatch(t *testing.T) {
	before := newDeletedTopics(map[string]int64{"Old": 100}, 0)
	queues := []pendingQueue{{topic: "A"}, {topic: "%LMQ%x"}, {topic: "Old"}}
	for _, tc := range []struct {
		name     string
		gone     *deletedTopics
		cur      *deletedTopics
		unqueued bool
		want     bool
	}{
		{"no deletion", nil, nil, true, false},
		{"none since the batch began", before, before, true, false},
		{"a topic of the batch", nil, newDeletedTopics(map[string]int64{"A": 500}, 0), false, true},
		{"a light queue of the batch", nil, newDeletedTopics(map[string]int64{"%LMQ%x": 500}, 0), false, true},
		{"a topic of the batch again", before, before.with("Old", 900), false, true},
		{"another topic", before, before.with("B", 500), false, false},
		{"another topic, a record without a queue", before, before.with("B", 500), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustReread(tc.gone, tc.cur, queues, tc.unqueued); got != tc.want {
				t.Errorf("mustReread = %v, want %v", got, tc.want)
			}
		})
	}
}

// A deletion begun and not ended is named by PendingTopicDeletions after
// a reopen (the marker is synced before the deletion's first step); an
// ended one is not. The markers are not read as recorded deletions.
func TestPendingTopicDeletionsSurviveAReopen(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Options{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"Orders", "a.b%c", "Done"} {
		if err := db.BeginTopicDeletion(topic); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.EndTopicDeletion("Done"); err != nil {
		t.Fatal(err)
	}
	// A name no key can hold is refused before anything is written.
	if err := db.BeginTopicDeletion(strings.Repeat("t", maxKeyLen+1)); err == nil || !strings.Contains(err.Error(), "begin the deletion of a topic") {
		t.Fatalf("deletion of a topic whose name is too long: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDBAt(t, dir)
	pending, err := db.PendingTopicDeletions()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pending) != "[Orders a.b%c]" {
		t.Fatalf("pending deletions after a reopen: %q", pending)
	}
	deleted, err := db.topicsDeleted(0, 1<<40)
	if err != nil || len(deleted) != 0 {
		t.Fatalf("markers of deletions under way read as recorded deletions: %v %v", deleted, err)
	}
	r, err := DecodeKey(metaKey(metaDeletingTopic+"Orders"), nil)
	if m, ok := r.(MetaRecord); err != nil || !ok || m.Name != "deletingTopic.Orders" {
		t.Fatalf("kvdump's decoding of a marker: %#v %v", r, err)
	}
	for _, topic := range pending {
		if err := db.EndTopicDeletion(topic); err != nil {
			t.Fatal(err)
		}
	}
	if pending, err := db.PendingTopicDeletions(); err != nil || len(pending) != 0 {
		t.Fatalf("pending deletions after they ended: %q %v", pending, err)
	}
}

// RecordRocketMQConsumeQueue records where each RocketMQ topic begins as
// its deletion there, keeping a deletion recorded before, and the topics
// and the offset below which their ConsumeQueue was complete until
// EndRocketMQTopics; it writes nothing once the index has dispatched (the
// first open is over).
func TestRecordRocketMQConsumeQueue(t *testing.T) {
	dir := t.TempDir()
	db := openDBAt(t, dir)
	if err := db.recordTopicDeleted("Gone", 500); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := db.RocketMQTopics(); ok || err != nil {
		t.Fatalf("RocketMQ topics before any were recorded: %v %v", ok, err)
	}
	if err := db.RecordRocketMQConsumeQueue(map[string]int64{"TopicA": 100, "Gone": 200}, nil, []string{"TopicA", "Gone", "%RETRY%G"}, 900); err != nil {
		t.Fatal(err)
	}
	deleted, err := db.topicsDeleted(0, 1<<40)
	if err != nil || fmt.Sprint(deleted) != "map[Gone:500 TopicA:100]" {
		t.Fatalf("deletions after the first open's record: %v %v", deleted, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDBAt(t, dir)
	complete, topics, ok, err := db.RocketMQTopics()
	if err != nil || !ok || complete != 900 || fmt.Sprint(topics) != "map[%RETRY%G:true Gone:true TopicA:true]" {
		t.Fatalf("RocketMQ topics after a reopen: %d %v %v %v", complete, topics, ok, err)
	}
	if err := db.EndRocketMQTopics(); err != nil {
		t.Fatal(err)
	}
	if _, topics, ok, err := db.RocketMQTopics(); ok || err != nil || len(topics) != 0 {
		t.Fatalf("RocketMQ topics after their end: %v %v %v", topics, ok, err)
	}
	if err := db.SetDispatched(0); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordRocketMQConsumeQueue(map[string]int64{"TopicB": 300}, nil, []string{"TopicB"}, 900); err != nil {
		t.Fatal(err)
	}
	if deleted, err := db.topicsDeleted(0, 1<<40); err != nil || deleted["TopicB"] != 0 {
		t.Fatalf("a record after dispatch began was written: %v %v", deleted, err)
	}
	if _, _, ok, err := db.RocketMQTopics(); ok || err != nil {
		t.Fatalf("RocketMQ topics recorded after dispatch began: %v %v", ok, err)
	}
}

// Passing deletions moves the set's lowest offset without building it
// again until half of them are passed; what it covers stays exact, and a
// deletion added keeps only those not passed.
func TestDeletedTopicsPassed(t *testing.T) {
	at := map[string]int64{}
	for i := range 10 {
		at[fmt.Sprintf("T%d", i)] = int64(100 * (i + 1)) // T0 at 100 ... T9 at 1000
	}
	set := newDeletedTopics(at, 0)
	p := set.passed(250) // T0, T1 passed
	if p == nil || p.low != 300 || len(p.offs) != 10 {
		t.Fatalf("after 250: %+v, want the same offsets with low 300", p)
	}
	for topic, want := range map[string]bool{"T2": true, "T9": true, "T1": false, "T0": false, "X": false} {
		if got := p.covers(topic, 0, 299, 0); got != want {
			t.Errorf("after 250, covers(%s, 299) = %v, want %v", topic, got, want)
		}
	}
	w := p.with("T1", 2000)
	if w.low != 300 || len(w.at) != 9 || w.at["T1"] != 2000 || w.at["T0"] != 0 {
		t.Fatalf("T1 deleted again after 250: %+v", w)
	}
	q := p.passed(550) // half passed: built again
	if q == nil || q.low != 600 || len(q.offs) != 5 || len(q.at) != 5 {
		t.Fatalf("after 550: %+v, want T5..T9", q)
	}
	if q.passed(1000) != nil {
		t.Fatal("every deletion passed, the set is not nil")
	}
}

// What a first open of a RocketMQ store records of a topic's queues
// decides queue by queue which of the topic's records below its first
// entries are left out: those of a queue's earlier numbering (queue
// offset at or above its first entry's), not those continuing its
// numbering below its first files, and, for a queue consumequeue/
// lacked, those below the topic's first entry. It survives a reopen,
// and a deletion of the topic afterwards replaces it (every record
// below the deletion goes), in memory and on disk.
func TestRocketMQQueueBegins(t *testing.T) {
	dir := t.TempDir()
	db := openDBAt(t, dir)
	queues := map[string]map[int32]QueueBegin{"T": {0: {Phy: 1000, Offset: 10}, 1: {Phy: 400, Offset: 0}}}
	if err := db.RecordRocketMQConsumeQueue(map[string]int64{"T": 400, "U": 300}, queues, []string{"T", "U"}, 5000); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDBAt(t, dir)
	deleted, err := db.topicsDeleted(0, 1<<40)
	if err != nil || fmt.Sprint(deleted) != "map[T:1000 U:300]" {
		t.Fatalf("deletions: %v %v", deleted, err)
	}
	begins, err := db.queueBegins(deleted)
	if err != nil {
		t.Fatal(err)
	}
	set := newDeletedTopics(deleted, 0).withQueues(begins)
	for _, tc := range []struct {
		name     string
		topic    string
		qid      int32
		phy, off int64
		want     bool
	}{
		{"below the queue's first files", "T", 0, 200, 9, false},
		{"an earlier numbering of the queue", "T", 0, 900, 10, true},
		{"an earlier numbering below the topic's first entry", "T", 0, 100, 3, false},
		{"the queue's first entry", "T", 0, 1000, 10, false},
		{"another queue's earlier numbering", "T", 1, 300, 0, true},
		{"another queue's entries", "T", 1, 500, 5, false},
		{"a queue consumequeue/ lacked, below the topic's first entry", "T", 2, 399, 0, true},
		{"a queue consumequeue/ lacked, above it", "T", 2, 400, 0, false},
		{"a topic without queue starts", "U", 0, 299, 50, true},
	} {
		if got := set.covers(tc.topic, tc.qid, tc.phy, tc.off); got != tc.want {
			t.Errorf("%s: covers(%s/%d, phy %d, offset %d) = %v, want %v", tc.name, tc.topic, tc.qid, tc.phy, tc.off, got, tc.want)
		}
	}
	if p := set.passed(450); !p.covers("T", 0, 900, 10) || p.covers("T", 0, 200, 9) {
		t.Errorf("the queue starts were lost once dispatch passed another topic's")
	}
	// A deletion of T afterwards: every record of it below the deletion.
	if again := set.with("T", 2000); !again.covers("T", 0, 200, 9) || !again.covers("T", 2, 1500, 0) {
		t.Errorf("a deletion after the first open keeps the first open's queue starts")
	}
	if err := db.recordTopicDeleted("T", 2000); err != nil {
		t.Fatal(err)
	}
	deleted, err = db.topicsDeleted(0, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	if begins, err := db.queueBegins(deleted); err != nil || len(begins) != 0 {
		t.Fatalf("queue starts after T's deletion: %v %v", begins, err)
	}
	// A topic whose deletion record retention dropped loses its starts:
	// a deletion recorded later does not find them.
	if err := db.RecordRocketMQConsumeQueue(map[string]int64{"V": 100}, map[string]map[int32]QueueBegin{"V": {0: {Phy: 100}}}, []string{"V"}, 5000); err != nil {
		t.Fatal(err)
	}
	if _, err := db.queueBegins(map[string]int64{}); err != nil {
		t.Fatal(err)
	}
	if begins, err := db.queueBegins(map[string]int64{"V": 100}); err != nil || len(begins) != 0 {
		t.Fatalf("queue starts kept after retention passed their topic's record: %v %v", begins, err)
	}
}

// A stored queue start that does not decode (a value of another length,
// a queue id that is no number) refuses the read with ErrBadKey, naming
// the key, rather than a start taken from bytes it does not have.
func TestRocketMQQueueBeginsRefuseAnEntryThatDoesNotDecode(t *testing.T) {
	for name, kv := range map[string][2][]byte{
		"short value":     {metaKey(metaQueueBegin + "T/0"), make([]byte, 8)},
		"queue id":        {metaKey(metaQueueBegin + "T/x"), make([]byte, 16)},
		"no queue at all": {metaKey(metaQueueBegin + "T"), make([]byte, 16)},
	} {
		t.Run(name, func(t *testing.T) {
			db := openDBAt(t, t.TempDir())
			if err := db.pdb.Set(kv[0], kv[1], pebble.Sync); err != nil {
				t.Fatal(err)
			}
			if _, err := db.queueBegins(map[string]int64{"T": 100}); !errors.Is(err, ErrBadKey) || !strings.Contains(err.Error(), "rmqQueueBegin.T") {
				t.Fatalf("queueBegins over %q = %x: %v, want ErrBadKey naming the key", kv[0], kv[1], err)
			}
		})
	}
}

// A stored topic deletion whose offset does not decode refuses the read,
// naming its key (taken before the iterator's close invalidates it).
func TestTopicDeletionThatDoesNotDecodeNamesItsKey(t *testing.T) {
	db := openDBAt(t, t.TempDir())
	if err := db.pdb.Set(metaKey(metaTopicDeleted+"T"), []byte{1, 2, 3}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := db.topicsDeleted(0, 1<<40); err == nil || !strings.Contains(err.Error(), metaTopicDeleted+"T") {
		t.Fatalf("topicsDeleted over a 3-byte offset: %v, want an error naming the key", err)
	}
}
