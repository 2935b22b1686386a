package kvindex

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/migrate/cqcompare"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// layoutsConfig is a CommitLog config with small segments, so retention
// has segments to delete.
func layoutsConfig(root string) commitlog.Config {
	cfg := commitlog.DefaultConfig(root)
	cfg.SegmentSize = 64 << 10
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	return cfg
}

// put appends n messages of 1,000 bytes to a queue (tagged, so tagsCode is
// compared too) and waits until they are dispatched.
func (s *stack) put(t *testing.T, topic string, qid int32, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		s.appendMessage(t, topic, qid, make([]byte, 1000), map[string]string{"TAGS": fmt.Sprintf("t%d", i%3)})
	}
	s.catchUp(t)
}

// appendMessage appends one message to a queue, its queue offset assigned
// as the broker assigns it.
func (s *stack) appendMessage(t *testing.T, topic string, qid int32, body []byte, props map[string]string) {
	t.Helper()
	if err := s.offsets.Acquire(topic, qid); err != nil {
		t.Fatal(err)
	}
	_, err := s.log.Append(context.Background(), commitlog.AppendRequest{Assigner: s.offsets, Message: &commitlog.Message{
		Topic: topic, QueueID: qid, Body: body, Properties: commitlog.FormatProperties(props),
		BornHost: netip.MustParseAddrPort("127.0.0.1:1"),
	}})
	s.offsets.Release(topic, qid)
	if err != nil {
		t.Fatal(err)
	}
}

// catchUp waits until the dispatcher indexed everything appended.
func (s *stack) catchUp(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
}

// agree fails the test unless both layouts of a running double-write stack
// hold the same queues and entries, and returns how many entries they hold.
func (s *stack) agree(t *testing.T) int64 {
	t.Helper()
	if s.mirror == nil {
		t.Fatal("not a double-write stack")
	}
	var r cqcompare.Report
	err := s.disp.Quiesced(func() error {
		var err error
		r, err = cqcompare.Compare(context.Background(), s.store, s.mirror, [2]string{"read", "mirror"}, cqcompare.Options{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("layouts differ:\n%s", r)
	}
	return r.Entries
}

// progress returns the recorded progress of a layout.
func (s *stack) progress(t *testing.T, name string) int64 {
	t.Helper()
	v, ok, err := s.db.metaInt64(metaCQWritten + name)
	if err != nil || !ok {
		t.Fatalf("progress of %s: %d %v %v", name, v, ok, err)
	}
	return v
}

// bounds returns a queue's [min, max) in store st.
func bounds(t *testing.T, st cq.Store, topic string, qid int32) [2]int64 {
	t.Helper()
	lo, err := st.MinOffset(topic, qid)
	if err != nil {
		t.Fatal(err)
	}
	hi, err := st.MaxOffset(topic, qid)
	if err != nil {
		t.Fatal(err)
	}
	return [2]int64{lo, hi}
}

// A store's layouts move from one to the other and back through
// double-write, every way round, without an entry lost or renumbered:
// each layout that was not written for a while gets what it missed at the
// next start, and reads can use either layout afterwards.
func TestLayoutTransitions(t *testing.T) {
	type step struct{ read, mirror string }
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"kv then double-write then file", []step{{"kv", ""}, {"kv", "file"}, {"file", ""}}},
		{"file then double-write then kv", []step{{"file", ""}, {"file", "kv"}, {"kv", ""}}},
		{"double-write, kv left behind, double-write again", []step{{"kv", "file"}, {"file", ""}, {"file", "kv"}}},
		{"double-write, file left behind, double-write again", []step{{"kv", "file"}, {"kv", ""}, {"kv", "file"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			want := map[string]int64{}
			for i, st := range tc.steps {
				s := openStackWith(t, root, layoutsConfig(root), st.read, st.mirror)
				for q := int32(0); q < 3; q++ {
					if got := bounds(t, s.store, "T", q); got != [2]int64{0, want[fmt.Sprint(q)]} {
						t.Fatalf("step %d (%s reads): T/%d bounds %v, want [0,%d)", i, st.read, q, got, want[fmt.Sprint(q)])
					}
				}
				if s.mirror != nil {
					s.agree(t)
				}
				for q := int32(0); q < 3; q++ {
					s.put(t, "T", q, 5+int(q))
					want[fmt.Sprint(q)] += int64(5 + int(q))
				}
				if s.mirror != nil {
					if n := s.agree(t); n != want["0"]+want["1"]+want["2"] {
						t.Fatalf("step %d: %d entries compared, want %d", i, n, want["0"]+want["1"]+want["2"])
					}
				}
				end := s.disp.Dispatched()
				s.close(t)
				for _, name := range []string{st.read, st.mirror} {
					if name == "" {
						continue
					}
					db := openTestDBAt(t, root)
					if v, ok, err := db.metaInt64(metaCQWritten + name); err != nil || !ok || v != end {
						t.Errorf("step %d: %s progress after a clean stop %d %v %v, want %d", i, name, v, ok, err, end)
					}
					_ = db.Close()
				}
			}
		})
	}
}

// openTestDBAt opens a stack's index by itself.
func openTestDBAt(t *testing.T, root string) *DB {
	t.Helper()
	db, err := Open(Options{Dir: root + "/" + DirName, Logger: stackLogger})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// A file layout that lost writes it never flushed (a power failure: the
// files lack the newest units, the recorded progress is older) gets them
// again at the next start; the flusher records progress while running.
func TestFileLayoutLostWritesRewritten(t *testing.T) {
	root := t.TempDir()
	s := openStackWith(t, root, layoutsConfig(root), LayoutKV, LayoutFile)
	s.put(t, "T", 0, 20)
	mid := s.disp.Dispatched()
	deadline := time.Now().Add(10 * time.Second)
	for s.progress(t, LayoutFile) < mid {
		if time.Now().After(deadline) {
			t.Fatalf("file progress %d never reached %d: the flusher does not record it", s.progress(t, LayoutFile), mid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.put(t, "T", 0, 20)
	s.close(t)

	// What a power failure leaves: the last 20 units gone, progress at mid.
	fs, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 100, Logger: stackLogger})
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Truncate(mid); err != nil {
		t.Fatal(err)
	}
	if got := bounds(t, fs, "T", 0); got != [2]int64{0, 20} {
		t.Fatalf("cut file layout %v", got)
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	db := openTestDBAt(t, root)
	if err := db.setMetaInt64(metaCQWritten+LayoutFile, mid); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()

	s = openStackWith(t, root, layoutsConfig(root), LayoutFile, LayoutKV)
	defer s.close(t)
	if got := bounds(t, s.store, "T", 0); got != [2]int64{0, 40} {
		t.Fatalf("file layout after restart %v, want [0,40)", got)
	}
	s.agree(t)
}

// leaveBehind writes at root a store whose layout behind is stale past
// retention: Gone/0 (30 messages) and Live/0 (5) are written with both
// layouts, then only keep's while Gone/0 gets goneMore messages and
// Live/0 200, and retention deletes every record of Gone.
func leaveBehind(t *testing.T, root, keep, behind string, goneMore int) {
	t.Helper()
	s := openStackWith(t, root, layoutsConfig(root), keep, behind)
	s.put(t, "Gone", 0, 30)
	s.put(t, "Live", 0, 5)
	s.close(t)
	s = openStackWith(t, root, layoutsConfig(root), keep, "")
	s.log.OnMinOffsetChange(s.disp.LogMinOffsetChanged)
	s.put(t, "Gone", 0, goneMore)
	s.put(t, "Live", 0, 200)
	if _, err := s.log.DeleteExpired(time.Now().Add(1000*time.Hour), true); err != nil {
		t.Fatal(err)
	}
	logMin := s.log.MinOffset()
	gone := int64(30 + goneMore)
	if logMin == 0 || bounds(t, s.store, "Gone", 0) != [2]int64{gone, gone} {
		t.Fatalf("retention: log min %d, Gone %v", logMin, bounds(t, s.store, "Gone", 0))
	}
	s.close(t)
	db := openTestDBAt(t, root)
	defer db.Close()
	if v, _, _ := db.metaInt64(metaCQWritten + behind); v >= logMin {
		t.Fatalf("%s progress %d is not below the log minimum %d", behind, v, logMin)
	}
}

// A layout that misses records retention has since deleted cannot be
// completed (its next entries would be numbered after its last one, not
// after the deleted ones): it is rebuilt from the CommitLog, and a queue
// whose records are all gone stands where the complete layout says
// instead of restarting at 0.
func TestStaleLayoutRebuilt(t *testing.T) {
	for _, tc := range []struct{ first, stale string }{{"kv", "file"}, {"file", "kv"}} {
		t.Run(tc.stale+" stale", func(t *testing.T) {
			root := t.TempDir()
			leaveBehind(t, root, tc.first, tc.stale, 0)
			s := openStackWith(t, root, layoutsConfig(root), tc.stale, tc.first)
			defer s.close(t)
			if got := bounds(t, s.store, "Gone", 0); got != [2]int64{30, 30} {
				t.Errorf("Gone/0 in the rebuilt %s layout %v, want [30,30)", tc.stale, got)
			}
			live := bounds(t, s.store, "Live", 0)
			if live[1] != 205 || live[0] <= 5 {
				t.Errorf("Live/0 in the rebuilt %s layout %v", tc.stale, live)
			}
			s.agree(t)
			s.put(t, "Gone", 0, 1)
			if got := bounds(t, s.store, "Gone", 0); got != [2]int64{30, 31} {
				t.Errorf("Gone/0 after a new message %v, want [30,31)", got)
			}
			s.agree(t)
		})
	}
}

// A topic deleted (and created again) while a layout is not written is
// dropped from that layout when it catches up, and its old records are
// not put back: both layouts number the new topic's messages from 0.
func TestTopicDeletedWhileLayoutNotWritten(t *testing.T) {
	root := t.TempDir()
	s := openStackWith(t, root, layoutsConfig(root), LayoutKV, LayoutFile)
	s.put(t, "T", 0, 10)
	s.close(t)

	s = openStackWith(t, root, layoutsConfig(root), LayoutKV, "")
	// What DELETE_TOPIC does: record the deletion, drop the written layout.
	if err := s.disp.DeleteTopic("T", func() error { return s.store.DeleteTopic("T") }); err != nil {
		t.Fatal(err)
	}
	s.offsets.Forget("T", AnyQueue)
	s.put(t, "T", 0, 3)
	s.close(t)

	s = openStackWith(t, root, layoutsConfig(root), LayoutFile, LayoutKV)
	defer s.close(t)
	if got := bounds(t, s.store, "T", 0); got != [2]int64{0, 3} {
		t.Fatalf("T/0 in the file layout after it caught up %v, want [0,3): the deleted topic's entries are still there", got)
	}
	s.agree(t)
}

// A layout switched to alone, stale past retention, is rebuilt with the
// numbering of the database's ConsumeQueue even when this run does not
// write that one.
func TestStaleLayoutAloneTakesNumberingFromIndex(t *testing.T) {
	root := t.TempDir()
	leaveBehind(t, root, LayoutKV, LayoutFile, 10) // the file layout never sees 10 of Gone's
	s := openStackWith(t, root, layoutsConfig(root), LayoutFile, "")
	defer s.close(t)
	if got := bounds(t, s.store, "Gone", 0); got != [2]int64{40, 40} {
		t.Errorf("Gone/0 in the file layout rebuilt alone %v, want [40,40)", got)
	}
	if got := bounds(t, s.store, "Live", 0); got[1] != 205 || got[0] <= 5 {
		t.Errorf("Live/0 in the file layout rebuilt alone %v", got)
	}
}

// Entries a layout holds past where it was complete (of records the
// CommitLog lost since) are cut before it catches up, and a recorded
// progress past the CommitLog's end is moved back to it.
func TestLaggingLayoutCutBeforeCatchUp(t *testing.T) {
	root := t.TempDir()
	s := openStackWith(t, root, layoutsConfig(root), LayoutKV, LayoutFile)
	s.put(t, "T", 0, 10)
	s.close(t)
	// A progress past the CommitLog's end (the log lost records since) is
	// moved back to it, written this run or not.
	db := openTestDBAt(t, root)
	if err := db.setMetaInt64(metaCQWritten+LayoutFile, 1<<40); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	s = openStackWith(t, root, layoutsConfig(root), LayoutKV, "")
	fileDone := s.log.MaxOffset()
	if p := s.progress(t, LayoutFile); p != fileDone {
		t.Fatalf("file progress %d after a start, want the CommitLog's end %d", p, fileDone)
	}
	s.put(t, "T", 0, 5)
	s.close(t)

	fs, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 100, Logger: stackLogger})
	if err != nil {
		t.Fatal(err)
	}
	// An entry of a record the log lost, where the log now holds another.
	stray := cq.Dispatch{Topic: "T", QueueID: 0, Entry: cq.Entry{QueueOffset: 10, PhyOffset: fileDone, Size: 7}}
	if err := fs.Put([]cq.Dispatch{stray}); err != nil {
		t.Fatal(err)
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStackWith(t, root, layoutsConfig(root), LayoutFile, LayoutKV)
	defer s.close(t)
	if got := bounds(t, s.store, "T", 0); got != [2]int64{0, 15} {
		t.Fatalf("T/0 in the file layout %v, want [0,15)", got)
	}
	s.agree(t)
}

// failingStore is a ConsumeQueue whose Put fails while fail is set.
type failingStore struct {
	*filecq.Store
	fail atomic.Bool
}

func (f *failingStore) Put(entries []cq.Dispatch) error {
	if f.fail.Load() {
		return errors.New("no space left on device (injected)")
	}
	return f.Store.Put(entries)
}

// A write to the mirror layout that fails stops dispatch (neither layout
// gets the batch, the dispatched offset stays) until it succeeds; then
// both layouts hold every entry.
func TestFailingMirrorStopsDispatch(t *testing.T) {
	root := t.TempDir()
	var mirror *failingStore
	s := openStackWith(t, root, layoutsConfig(root), LayoutKV, LayoutFile, func(o *DispatcherOptions) {
		mirror = &failingStore{Store: o.Mirror.(*filecq.Store)}
		o.Mirror = mirror
	})
	s.mirror = mirror
	defer s.close(t)
	s.put(t, "T", 0, 3)
	mirror.fail.Store(true)
	before := s.disp.Dispatched()
	for i := 0; i < 4; i++ {
		if err := s.offsets.Acquire("T", 0); err != nil {
			t.Fatal(err)
		}
		_, err := s.log.Append(context.Background(), commitlog.AppendRequest{Assigner: s.offsets, Message: &commitlog.Message{
			Topic: "T", QueueID: 0, Body: []byte("x"), BornHost: netip.MustParseAddrPort("127.0.0.1:1")}})
		s.offsets.Release("T", 0)
		if err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // several dispatch attempts
	if got := s.disp.Dispatched(); got != before {
		t.Fatalf("dispatched moved from %d to %d while the mirror failed", before, got)
	}
	if got := bounds(t, s.store, "T", 0); got != [2]int64{0, 3} {
		t.Fatalf("the Pebble layout got entries of a batch the mirror refused: %v", got)
	}
	mirror.fail.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.agree(t); n != 7 {
		t.Fatalf("%d entries after the mirror recovered, want 7", n)
	}
}

// The other way round: the database's ConsumeQueue, left behind past
// retention while the file layout served alone, is rebuilt with the file
// layout's numbering when the broker can open it (OpenFileLayout).
func TestStaleIndexAloneTakesNumberingFromFiles(t *testing.T) {
	root := t.TempDir()
	leaveBehind(t, root, LayoutFile, LayoutKV, 10) // the Pebble layout never sees 10 of Gone's
	opened := 0
	s := openStackWith(t, root, layoutsConfig(root), LayoutKV, "", func(o *DispatcherOptions) {
		o.OpenFileLayout = func() (cq.Store, error) {
			opened++
			return filecq.OpenReadOnly(filecq.Options{Dir: root, UnitsPerFile: 100, Logger: stackLogger})
		}
	})
	defer s.close(t)
	if opened != 1 {
		t.Errorf("the file layout was opened %d times, want once", opened)
	}
	if got := bounds(t, s.store, "Gone", 0); got != [2]int64{40, 40} {
		t.Errorf("Gone/0 in the Pebble layout rebuilt alone %v, want [40,40)", got)
	}
	if got := bounds(t, s.store, "Live", 0); got[1] != 205 || got[0] <= 5 {
		t.Errorf("Live/0 in the Pebble layout rebuilt alone %v", got)
	}
}

// The starts a rebuild records read back, decode for kvdump, and go with
// the layout's completion; another layout's stay.
func TestRebuildStartsRecorded(t *testing.T) {
	db := openTestDBAt(t, t.TempDir())
	defer db.Close()
	starts := []QueueStart{{Topic: "A", QueueID: 0, Offset: 30}, {Topic: "Dotted.Topic", QueueID: 12, Offset: 7}}
	if err := db.recordRebuildStarts(LayoutFile, starts); err != nil {
		t.Fatal(err)
	}
	if err := db.recordRebuildStarts(LayoutKV, starts[:1]); err != nil {
		t.Fatal(err)
	}
	got, err := db.rebuildStarts(LayoutFile)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b QueueStart) int { return strings.Compare(a.Topic, b.Topic) })
	if !slices.Equal(got, starts) {
		t.Fatalf("rebuild starts %v, want %v", got, starts)
	}
	r, err := DecodeKey(metaKey(rebuildStartName(LayoutFile, starts[1])), putInt64(7))
	if err != nil || r != (RebuildStartRecord{Layout: LayoutFile, Topic: "Dotted.Topic", QueueID: 12, Offset: 7}) {
		t.Fatalf("decoded %v (%v)", r, err)
	}
	if err := db.completeLayout(LayoutFile, 4096); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.rebuildStarts(LayoutFile); len(got) != 0 {
		t.Fatalf("starts left after the layout completed: %v", got)
	}
	if got, _ := db.rebuildStarts(LayoutKV); len(got) != 1 {
		t.Fatalf("the other layout's starts: %v", got)
	}
	if v, _, _ := db.metaInt64(metaCQWritten + LayoutFile); v != 4096 {
		t.Fatalf("progress %d, want 4096", v)
	}
}

// A comparison's bounds read (QuiescedMinima) waits while the CommitLog
// minimum is being applied to the layouts one after the other, so it never
// sees one layout's minima moved and the other's not.
func TestQuiescedMinimaWaitsForMinimaCorrection(t *testing.T) {
	root := t.TempDir()
	s := openStackWith(t, root, layoutsConfig(root), LayoutKV, LayoutFile)
	defer s.close(t)
	s.disp.minMu.Lock() // a correction in progress
	ran := make(chan struct{})
	go func() {
		_ = s.disp.QuiescedMinima(func() error { close(ran); return nil })
	}()
	select {
	case <-ran:
		t.Fatal("the bounds were read while the minima were being corrected")
	case <-time.After(50 * time.Millisecond):
	}
	s.disp.minMu.Unlock()
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the bounds read never ran after the correction")
	}
}
