package kvindex

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
)

// compactionStack is a stack whose dispatcher compacts topic "C".
func compactionStack(t *testing.T) (*stack, *Compaction) {
	t.Helper()
	var c *Compaction
	root := t.TempDir()
	cfg := commitlog.DefaultConfig(root)
	cfg.SegmentSize = 64 << 10
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	s := openStackWith(t, root, cfg, LayoutKV, "", func(o *DispatcherOptions) {
		tc := meta.NewTopicConfig("C", 1)
		tc.Attributes[meta.AttrCleanupPolicy] = "COMPACTION"
		c = NewCompaction(o.DB, []meta.TopicConfig{tc, meta.NewTopicConfig("plain", 1)})
		o.Compaction = c
	})
	t.Cleanup(func() { s.close(t) })
	return s, c
}

// putKV appends "key=value" messages (key "-" for none, an empty value
// for a tombstone) to queue 0 of topic, each alone or all in one
// dispatcher batch, and waits until they are dispatched.
func putKV(t *testing.T, s *stack, topic string, kvs ...string) {
	t.Helper()
	for _, kv := range kvs {
		key, value, _ := strings.Cut(kv, "=")
		props := map[string]string{"TAGS": "t"}
		if key != "-" {
			props["KEYS"] = key
		}
		s.appendMessage(t, topic, 0, []byte(value), props)
	}
	s.catchUp(t)
}

// compacted lists the copies of queue 0 of topic as "offset:key=value".
func compacted(t *testing.T, c *Compaction, topic string) string {
	t.Helper()
	var out []string
	if err := c.Read(topic, 0, 0, func(off int64, _ []byte, m *commitlog.Message) bool {
		if m.QueueOffset != off || m.Topic != topic {
			t.Fatalf("copy at %d is the record of %s@%d", off, m.Topic, m.QueueOffset)
		}
		key, _ := commitlog.LookupProperty(m.Properties, "KEYS")
		out = append(out, fmt.Sprintf("%d:%s=%s", off, key, m.Body))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}

// The newest message of each key stays; a tombstone drops the key's
// earlier message and stays until a newer one comes; messages without a
// key stay. Keys set in one dispatcher batch see each other.
func TestCompactionKeepsTheNewestMessageOfEachKey(t *testing.T) {
	s, c := compactionStack(t)
	putKV(t, s, "C", "a=1", "b=1", "a=2", "-=loose", "c=1")
	if got, want := compacted(t, c, "C"), "1:b=1 2:a=2 3:=loose 4:c=1"; got != want {
		t.Fatalf("after the first messages: %s, want %s", got, want)
	}
	putKV(t, s, "C", "b=", "c=2")
	if got, want := compacted(t, c, "C"), "2:a=2 3:=loose 5:b= 6:c=2"; got != want {
		t.Fatalf("after a tombstone of b: %s, want %s", got, want)
	}
	putKV(t, s, "C", "b=3")
	if got, want := compacted(t, c, "C"), "2:a=2 3:=loose 6:c=2 7:b=3"; got != want {
		t.Fatalf("after b came back: %s, want %s", got, want)
	}
	if off, ok, err := c.MinOffset("C", 0); off != 2 || !ok || err != nil {
		t.Fatalf("MinOffset = %d %v %v, want 2", off, ok, err)
	}
	// Other topics are not copied.
	putKV(t, s, "plain", "a=1")
	if got := compacted(t, c, "plain"); got != "" {
		t.Fatalf("a topic without compaction has copies: %s", got)
	}
	if _, ok, err := c.MinOffset("plain", 0); ok || err != nil {
		t.Fatalf("MinOffset of an uncompacted topic: %v %v", ok, err)
	}
}

// Dispatching the log again (a crash before the dispatched offset moved,
// or a rebuild) leaves the same copies.
func TestCompactionAfterDispatchingAgain(t *testing.T) {
	s, c := compactionStack(t)
	putKV(t, s, "C", "a=1", "a=2", "b=", "-=x")
	want := compacted(t, c, "C")
	if err := s.disp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.db.SetDispatched(0); err != nil {
		t.Fatal(err)
	}
	s.startDispatcher(t, DispatcherOptions{Compaction: c})
	s.catchUp(t)
	if got := compacted(t, c, "C"); got != want {
		t.Fatalf("after dispatching again: %s, want %s", got, want)
	}
}

// Retention deletes the tombstones and messages without a key whose
// records left the CommitLog, and the key entry of such a tombstone; the
// newest message of a key stays whatever its age.
func TestCompactionRetention(t *testing.T) {
	s, c := compactionStack(t)
	putKV(t, s, "C", "a=1", "b=1", "b=", "-=x")
	var phys []int64
	if err := c.Read("C", 0, 0, func(_ int64, _ []byte, m *commitlog.Message) bool {
		phys = append(phys, m.PhyOffset)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	putKV(t, s, "C", "c=1")
	if err := c.DropBelow(phys[len(phys)-1] + 1); err != nil {
		t.Fatal(err)
	}
	if got, want := compacted(t, c, "C"), "0:a=1 4:c=1"; got != want {
		t.Fatalf("after retention: %s, want %s", got, want)
	}
	if v, err := s.db.get(compactKeyKey("C", 0, "b")); v != nil || err != nil {
		t.Fatalf("key entry of the expired tombstone of b: %x %v", v, err)
	}
	if v, err := s.db.get(compactKeyKey("C", 0, "a")); len(v) != 8 || err != nil {
		t.Fatalf("key entry of a: %x %v", v, err)
	}
	// A new message of an expired key is kept as any other.
	putKV(t, s, "C", "b=2")
	if got, want := compacted(t, c, "C"), "0:a=1 4:c=1 5:b=2"; got != want {
		t.Fatalf("after b came back: %s, want %s", got, want)
	}
	if err := c.DropTopic("C"); err != nil {
		t.Fatal(err)
	}
	if got := compacted(t, c, "C"); got != "" {
		t.Fatalf("after the topic was deleted: %s", got)
	}
}

// TopicChanged starts and stops the copies of a topic.
func TestCompactionTopicChanged(t *testing.T) {
	s, c := compactionStack(t)
	if !c.TopicChanged("late", true) || c.TopicChanged("late", true) {
		t.Fatal("TopicChanged does not report the change to compacted once")
	}
	putKV(t, s, "late", "a=1", "a=2")
	if got, want := compacted(t, c, "late"), "1:a=2"; got != want {
		t.Fatalf("a topic made compacted: %s, want %s", got, want)
	}
	if c.TopicChanged("late", false) || c.TopicChanged("C", true) {
		t.Fatal("TopicChanged reports a topic that did not become compacted")
	}
	putKV(t, s, "late", "a=3")
	if got, want := compacted(t, c, "late"), "1:a=2"; got != want {
		t.Fatalf("a topic no longer compacted: %s, want %s", got, want)
	}
	if !c.Compacts("C") || c.Compacts("late") || (*Compaction)(nil).Compacts("C") {
		t.Fatal("Compacts answers wrongly")
	}
}

// CompactedTopics lists each topic with copies once.
func TestCompactedTopics(t *testing.T) {
	s, c := compactionStack(t)
	c.TopicChanged("B", true)
	c.TopicChanged("AA", true)
	putKV(t, s, "C", "a=1", "b=1")
	putKV(t, s, "B", "a=1", "-=x")
	putKV(t, s, "AA", "a=1")
	putKV(t, s, "plain", "a=1")
	got, err := s.db.CompactedTopics()
	if err != nil || strings.Join(got, ",") != "B,C,AA" {
		t.Fatalf("CompactedTopics = %v %v, want B, C, AA (names by length, then bytes)", got, err)
	}
}

// A CommitLog cut at recovery (a slave's records that were not its
// master's, a tail a power failure lost) takes with it the copies,
// transaction halves and ends and timer entries of the records past the
// cut: the offsets will hold other records. A key entry naming a cut
// copy's later queue offset would make the dispatcher skip the key's
// next message below it as superseded. A key whose newest message was
// cut gets the copy of its message before back. A commit or an op key a
// record past the cut wrote for a half before it is undone, the half
// open again.
func TestRecoveryDropsWhatRecordsPastTheCutWrote(t *testing.T) {
	root, cfg, open := compactedStack(t)
	s, c := open()
	putKV(t, s, "C", "a=1", "b=1")
	putKV(t, s, meta.TransHalfTopic, "-=h0", "-=h1")
	cut := s.log.MaxOffset()
	putKV(t, s, "C", "a=2", "c=1") // queue offsets 2 and 3, to be cut
	putKV(t, s, meta.TransHalfTopic, "-=h2")
	halves, err := s.store.Get(meta.TransHalfTopic, 0, 0, 2)
	if err != nil || len(halves) != 2 {
		t.Fatalf("halves h0 and h1: %+v %v", halves, err)
	}
	h1 := halves[1].PhyOffset
	// What hooks wrote for records on both sides of the cut.
	w := s.db.pdb.NewBatch()
	for _, phy := range []int64{0, cut, cut + 100} {
		if err := s.db.Timers().Add(w, TimerEntry{DeliverMs: 1000, PhyOffset: phy, Size: 100}); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Transactions().AddHalf(w, TxnHalf{PhyOffset: phy, QueueOffset: phy}); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Transactions().AddCommitted(w, phy, cut+200); err != nil {
			t.Fatal(err)
		}
	}
	// A commit by a record before the cut, of a half ended by its
	// END_TRANSACTION (no open half left).
	if err := s.db.Transactions().AddCommitted(w, 1, 5); err != nil {
		t.Fatal(err)
	}
	// Ops ending the halves at queue offsets 0 and 2, written by op
	// messages past the cut (the half at 2 goes with the cut), and one
	// of a store from before ops named their message, at 1.
	for _, halfOff := range []int64{0, 2} {
		if err := s.db.Transactions().AddRocketMQOp(w, halfOff, cut+300); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Set(txnKey(prefixTxnOp, 1), []byte{1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(nil); err != nil {
		t.Fatal(err)
	}
	// h1's END_TRANSACTION committed it with a message past the cut.
	if err := s.db.Transactions().End(h1, TxnEnd{State: TxnCommit, At: 1, By: cut + 400}); err != nil {
		t.Fatal(err)
	}
	s.close(t)

	cfg.CutAt = cut
	s = openStackWith(t, root, *cfg, LayoutKV, "", withCompaction(&c))
	defer s.close(t)
	// a=1's copy went when a=2 came: it is copied again, a's newest
	// message left in the CommitLog.
	if got, want := compacted(t, c, "C"), "0:a=1 1:b=1"; got != want {
		t.Fatalf("copies after the cut: %s, want %s", got, want)
	}
	putKV(t, s, "C", "c=2", "a=3") // queue offsets 2 and 3 again
	if got, want := compacted(t, c, "C"), "1:b=1 2:c=2 3:a=3"; got != want {
		t.Fatalf("copies of the messages after the cut: %s, want %s", got, want)
	}
	due, err := s.db.Timers().Due(2000, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].PhyOffset != 0 {
		t.Fatalf("timer entries after the cut: %+v, want only the one at 0", due)
	}
	// The commits whose messages went with the cut are open again, the
	// one whose half had ended recorded open from its record; the commit
	// by a record before the cut stays; the transactions of halves past
	// the cut are gone.
	for _, tc := range []struct {
		phy         int64
		open, ended bool
	}{{0, true, false}, {1, false, true}, {h1, true, false}, {cut, false, false}, {cut + 100, false, false}} {
		h, open, err := s.db.Transactions().Half(tc.phy)
		if err != nil {
			t.Fatal(err)
		}
		_, ended, err := s.db.Transactions().Ended(tc.phy)
		if err != nil {
			t.Fatal(err)
		}
		if open != tc.open || ended != tc.ended {
			t.Fatalf("transaction at %d after the cut at %d: open %v, ended %v; want %v, %v", tc.phy, cut, open, ended, tc.open, tc.ended)
		}
		if tc.phy == h1 && (h.QueueOffset != 1 || h.StoreTimestamp != halves[1].StoreTimestamp || h.Checks != 0) {
			t.Fatalf("h1 opened again as %+v", h)
		}
	}
	// The half stored next takes queue offset 2 again: no op ends it.
	putKV(t, s, meta.TransHalfTopic, "-=h2 again")
	for halfOff, want := range map[int64]bool{0: false, 1: true, 2: false} {
		ended, err := s.db.Transactions().RocketMQOpEnded(halfOff, -1)
		if err != nil {
			t.Fatal(err)
		}
		if ended != want {
			t.Fatalf("half at queue offset %d ended by an op after the cut: %v, want %v", halfOff, ended, want)
		}
	}
}

// A recovery that stops after dropping the cut copies and before copying
// the messages before them again (a crash, a failed read) leaves the keys
// marked: the next recovery copies them, and the mark goes.
func TestRecoveryRestoresKeysAfterAStopInBetween(t *testing.T) {
	root, cfg, open := compactedStack(t)
	s, c := open()
	putKV(t, s, "C", "a=1", "b=1")
	cut := s.log.MaxOffset()
	putKV(t, s, "C", "a=2", "c=1")
	// The first recovery dropped the copies past the cut, then stopped.
	if n, err := c.DropAbove(cut); err != nil || n != 2 {
		t.Fatalf("DropAbove: %d copies, %v; want 2", n, err)
	}
	pending, err := c.PendingRestores()
	if err != nil || len(pending) != 2 {
		t.Fatalf("keys to restore: %v, %v; want a and c", pending, err)
	}
	if _, _, ok, err := c.Newest("C", 0, "a"); ok || err != nil {
		t.Fatalf("a key pending its restore has a newest message: %v %v", ok, err)
	}
	s.close(t)

	cfg.CutAt = cut
	s = openStackWith(t, root, *cfg, LayoutKV, "", withCompaction(&c))
	defer s.close(t)
	if got, want := compacted(t, c, "C"), "0:a=1 1:b=1"; got != want {
		t.Fatalf("copies after the second recovery: %s, want %s", got, want)
	}
	if pending, err := c.PendingRestores(); err != nil || len(pending) != 0 {
		t.Fatalf("keys still marked after the restore: %v, %v", pending, err)
	}
	if _, m, ok, err := c.Newest("C", 0, "a"); !ok || err != nil || string(m.Body) != "1" {
		t.Fatalf("a's newest message after the restore: %v %v %q", ok, err, m.Body)
	}
}

// withCompaction makes a stack's dispatcher compact topic C, and sets *c
// to its Compaction.
func withCompaction(c **Compaction) func(o *DispatcherOptions) {
	return func(o *DispatcherOptions) {
		tc := meta.NewTopicConfig("C", 1)
		tc.Attributes[meta.AttrCleanupPolicy] = "COMPACTION"
		*c = NewCompaction(o.DB, []meta.TopicConfig{tc})
		o.Compaction = *c
	}
}

// compactedStack returns a store root, the CommitLog configuration of its
// stacks (64 KiB segments) and an opener of a stack that compacts topic C.
func compactedStack(t *testing.T) (string, *commitlog.Config, func() (*stack, *Compaction)) {
	t.Helper()
	root := t.TempDir()
	cfg := commitlog.DefaultConfig(root)
	cfg.SegmentSize = 64 << 10
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	return root, &cfg, func() (*stack, *Compaction) {
		var c *Compaction
		s := openStackWith(t, root, cfg, LayoutKV, "", withCompaction(&c))
		return s, c
	}
}
