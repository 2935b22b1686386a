package kvindex

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
)

// appendAt appends a record of queue qid of topic at queue offset off, as
// a replica's log holds its master's: the offset is the one given.
func appendAt(t *testing.T, s *stack, topic string, qid int32, off int64, body string) int64 {
	t.Helper()
	m := &commitlog.Message{Topic: topic, QueueID: qid, QueueOffset: off, Body: []byte(body),
		Properties: commitlog.FormatProperties(map[string]string{"TAGS": "t"}), BornHost: netip.MustParseAddrPort("127.0.0.1:1")}
	r, err := s.log.Append(context.Background(), commitlog.AppendRequest{Message: m})
	if err != nil {
		t.Fatal(err)
	}
	return r.PhyOffset
}

// queuePhys returns the bounds of a queue and the records its entries
// name.
func queuePhys(t *testing.T, st cq.Store, topic string, qid int32) string {
	t.Helper()
	es, err := st.Get(topic, qid, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var phys []int64
	for _, e := range es {
		phys = append(phys, e.PhyOffset)
	}
	return fmt.Sprint(bounds(t, st, topic, qid), phys)
}

// A replica's log in which the master deleted T and created it again: T/0
// held offsets 0-2, and one more record at 3 came before the deletion;
// the new T numbers T/0 from 0 again, and T/1, which had no entries, too.
// Whether the records come in one batch (held behind a gate until all are
// appended, so the restart is in its middle) or as they come, every
// layout ends holding the new topic's records only, and a reopen changes
// nothing.
func TestReplicaIndexesATopicCreatedAgain(t *testing.T) {
	for _, tc := range []struct {
		name         string
		read, mirror string
		held         bool
	}{
		{"kv, one batch", LayoutKV, "", true},
		{"kv, as they come", LayoutKV, "", false},
		{"kv and file, one batch", LayoutKV, LayoutFile, true},
		{"file and kv, one batch", LayoutFile, LayoutKV, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newDispatchGate()
			root := t.TempDir()
			replica := func(o *DispatcherOptions) { o.Replica = true }
			s := openStackWith(t, root, layoutsConfig(root), tc.read, tc.mirror, g.on("Gate"), replica)
			for i := range 3 {
				appendAt(t, s, "T", 0, int64(i), fmt.Sprint("old-", i))
			}
			s.catchUp(t)
			if tc.held {
				g.armed.Store(true)
				appendAt(t, s, "Gate", 0, 0, "gate")
				g.waitHeld(t)
			}
			appendAt(t, s, "T", 0, 3, "old-3")
			new1 := appendAt(t, s, "T", 1, 0, "new-1-0")
			new0 := []int64{appendAt(t, s, "T", 0, 0, "new-0-0"), appendAt(t, s, "T", 0, 1, "new-0-1")}
			close(g.release)
			s.catchUp(t)

			want0, want1 := fmt.Sprint([2]int64{0, 2}, new0), fmt.Sprint([2]int64{0, 1}, []int64{new1})
			check := func(when string) {
				t.Helper()
				wantQueuesOfT(t, s, tc.read, tc.mirror, when, want0, want1)
			}
			check("dispatched")
			s.close(t)
			s = openStackWith(t, root, layoutsConfig(root), tc.read, tc.mirror, replica)
			defer s.close(t)
			check("reopened")
			// The queue goes on from the new numbering.
			want0 = fmt.Sprint([2]int64{0, 3}, append(new0, appendAt(t, s, "T", 0, 2, "new-0-2")))
			s.catchUp(t)
			check("one more")
		})
	}
}

// findRestart tells a queue started anew from a range dispatched again:
// only an entry below its queue's end whose record lies past the record
// of the queue's last entry (in the index or earlier in the batch)
// restarts it.
func TestFindRestart(t *testing.T) {
	root := t.TempDir()
	s := openStackWith(t, root, layoutsConfig(root), LayoutKV, "", func(o *DispatcherOptions) { o.Replica = true })
	defer s.close(t)
	var p []int64
	for i := range 3 {
		p = append(p, appendAt(t, s, "T", 0, int64(i), fmt.Sprint("m-", i)))
	}
	s.catchUp(t)
	past := s.log.MaxOffset() + 100 // a record after every one indexed
	entry := func(qid int32, off, phy int64) cq.Dispatch {
		return cq.Dispatch{Topic: "T", QueueID: qid, Entry: cq.Entry{QueueOffset: off, PhyOffset: phy, Size: 10}}
	}
	for _, tc := range []struct {
		name    string
		entries []cq.Dispatch
		want    int64 // offset of the restart's record, -1 for none
	}{
		{"the last entry dispatched again", []cq.Dispatch{entry(0, 2, p[2])}, -1},
		{"a range dispatched again, then new", []cq.Dispatch{entry(0, 1, p[1]), entry(0, 2, p[2]), entry(0, 3, past)}, -1},
		{"an earlier record at a lower offset", []cq.Dispatch{entry(0, 0, p[1])}, -1},
		{"new entries", []cq.Dispatch{entry(0, 3, past), entry(0, 4, past+10)}, -1},
		{"a queue not in the index", []cq.Dispatch{entry(7, 5, past)}, -1},
		{"a later record at 0", []cq.Dispatch{entry(0, 0, past)}, past},
		{"a later record at the last offset", []cq.Dispatch{entry(0, 2, past)}, past},
		{"after an entry of the batch", []cq.Dispatch{entry(0, 3, past), entry(0, 0, past+10)}, past + 10},
		{"after an entry of another queue", []cq.Dispatch{entry(1, 0, past), entry(0, 1, past+10)}, past + 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, found, err := s.disp.findRestart(tc.entries)
			if err != nil {
				t.Fatal(err)
			}
			got := int64(-1)
			if found {
				got = r.phy
			}
			if got != tc.want {
				t.Errorf("restart at %d (%+v), want %d", got, r, tc.want)
			}
		})
	}
}

// A layout that catches up from the CommitLog (a file ConsumeQueue added
// to a replica's store that had only the Pebble one) passes a restart in
// its range as dispatch did: it ends holding the new topic's records, as
// the layout dispatch wrote.
func TestReplicaLayoutCatchesUpAcrossARestart(t *testing.T) {
	root := t.TempDir()
	replica := func(o *DispatcherOptions) { o.Replica = true }
	s := openStackWith(t, root, layoutsConfig(root), LayoutKV, "", replica)
	for i := range 3 {
		appendAt(t, s, "T", 0, int64(i), fmt.Sprint("old-", i))
	}
	appendAt(t, s, "T", 0, 3, "old-3")
	new0 := []int64{appendAt(t, s, "T", 0, 0, "new-0-0"), appendAt(t, s, "T", 0, 1, "new-0-1")}
	s.catchUp(t)
	s.close(t)

	s = openStackWith(t, root, layoutsConfig(root), LayoutKV, LayoutFile, replica)
	defer s.close(t)
	want := fmt.Sprint([2]int64{0, 2}, new0)
	wantQueuesOfT(t, s, LayoutKV, LayoutFile, "caught up", want)
	s.agree(t)
}

// wantQueuesOfT checks that each layout of s (the serving one named read,
// the mirror, when there is one, named mirror) holds queue i of T as
// queuePhys gives it, want[i].
func wantQueuesOfT(t *testing.T, s *stack, read, mirror, when string, want ...string) {
	t.Helper()
	for _, l := range []struct {
		name string
		st   cq.Store
	}{{read, s.store}, {mirror, s.mirror}} {
		if l.st == nil {
			continue
		}
		for qid, w := range want {
			if got := queuePhys(t, l.st, "T", int32(qid)); got != w {
				t.Errorf("%s, %s: T/%d is %s, want %s (the new topic's records)", when, l.name, qid, got, w)
			}
		}
	}
}

// QueueRestarted hears of a restart before the queue is dropped (the old
// entries are still there), with the queue's name; when it fails the
// batch is not written and the restart is met again, and once it
// succeeds it is not called again for that restart. A queue that gets its
// first entry at offset 0 is no restart.
func TestReplicaTellsOfARestartBeforeTheDrop(t *testing.T) {
	root := t.TempDir()
	var (
		mu    sync.Mutex
		calls []string
	)
	var s *stack
	tell := func(o *DispatcherOptions) {
		o.Replica = true
		o.QueueRestarted = func(topic string, queueID int32) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, fmt.Sprintf("%s/%d %s", topic, queueID, queuePhys(t, s.store, topic, queueID)))
			if len(calls) == 1 {
				return errors.New("the first call fails")
			}
			return nil
		}
	}
	s = openStackWith(t, root, layoutsConfig(root), LayoutKV, "", tell)
	defer s.close(t)
	var old []int64
	for i := range 2 {
		old = append(old, appendAt(t, s, "T", 0, int64(i), fmt.Sprint("old-", i)))
	}
	s.catchUp(t)
	appendAt(t, s, "T", 1, 0, "new-1-0")
	new0 := appendAt(t, s, "T", 0, 0, "new-0-0")
	s.catchUp(t)

	oldQueue := fmt.Sprint("T/0 ", [2]int64{0, 2}, old)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{oldQueue, oldQueue}; !slices.Equal(calls, want) {
		t.Errorf("QueueRestarted calls %q, want %q (a failed call, then one that drops)", calls, want)
	}
	if got, want := queuePhys(t, s.store, "T", 0), fmt.Sprint([2]int64{0, 1}, []int64{new0}); got != want {
		t.Errorf("T/0 is %s, want %s", got, want)
	}
}

// A replica's compacted topic created again: the old queue's copies go
// with the restart, and so do its key entries, which named later offsets
// than the new messages of their keys and would have kept them from
// being copied.
func TestReplicaCompactedQueueStartsAnew(t *testing.T) {
	root := t.TempDir()
	var c *Compaction
	s := openStackWith(t, root, layoutsConfig(root), LayoutKV, "", withCompaction(&c), func(o *DispatcherOptions) { o.Replica = true })
	defer s.close(t)
	put := func(off int64, key, value string) {
		t.Helper()
		m := &commitlog.Message{Topic: "C", QueueID: 0, QueueOffset: off, Body: []byte(value),
			Properties: commitlog.FormatProperties(map[string]string{"TAGS": "t", "KEYS": key}), BornHost: netip.MustParseAddrPort("127.0.0.1:1")}
		if _, err := s.log.Append(context.Background(), commitlog.AppendRequest{Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	put(0, "a", "old-a")
	put(1, "b", "old-b")
	put(2, "a", "old-a2")
	s.catchUp(t)
	if got, want := compacted(t, c, "C"), "1:b=old-b 2:a=old-a2"; got != want {
		t.Fatalf("copies before the restart: %s, want %s", got, want)
	}
	put(0, "a", "new-a")
	s.catchUp(t)
	if got, want := compacted(t, c, "C"), "0:a=new-a"; got != want {
		t.Errorf("copies after the topic was created again: %s, want %s", got, want)
	}
}
