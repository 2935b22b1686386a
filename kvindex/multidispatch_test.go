package kvindex

import (
	"context"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/meta"
)

// With MultiDispatch a record is indexed in its own queue and in each light
// message queue it names, at the offsets its append gave; names that are
// not light message queues, and records of topics that do not allow them,
// are left out. A layout caught up later (the file ConsumeQueue added in
// double-write) gets the same entries.
func TestDispatchMultiDispatch(t *testing.T) {
	root := t.TempDir()
	cfg := commitlog.DefaultConfig("")
	cfg.SegmentSize = 1 << 20
	multi := func(o *DispatcherOptions) { o.MultiDispatch = true }
	s := openStackWith(t, root, cfg, LayoutKV, "", multi)
	names := []string{"%LMQ%a", "", "%LMQ%b"}
	put := func(topic, props string, dispatch []string) int64 {
		t.Helper()
		m := &commitlog.Message{Topic: topic, Body: []byte("b"), Properties: props, BornTimestamp: 1}
		r, err := s.log.Append(context.Background(), commitlog.AppendRequest{Message: m, Assigner: s.offsets, MultiDispatch: dispatch})
		if err != nil {
			t.Fatal(err)
		}
		return r.PhyOffset
	}
	props := commitlog.PropertyMultiDispatch + "\x01%LMQ%a,NotLMQ,%LMQ%b\x02"
	var phys []int64
	for range 3 {
		phys = append(phys, put("Parent", props, names))
	}
	// A retry topic's record carries the properties but is not dispatched
	// to them; nor is a name that is not a light message queue's.
	put("%RETRY%g", props+commitlog.PropertyMultiQueueOffset+"\x010,0,0\x02", nil)
	// A record naming a queue that is no valid topic name (written by
	// another broker) is not dispatched to it.
	put("Parent2", commitlog.PropertyMultiDispatch+"\x01%LMQ%a/../x\x02"+commitlog.PropertyMultiQueueOffset+"\x010\x02", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(store cq.Store, layout string) {
		t.Helper()
		for _, lmq := range []string{"%LMQ%a", "%LMQ%b"} {
			es, err := store.Get(lmq, 0, 0, 10)
			if err != nil || len(es) != 3 {
				t.Fatalf("%s: %s has %d entries (%v), want 3", layout, lmq, len(es), err)
			}
			for i, e := range es {
				if e.QueueOffset != int64(i) || e.PhyOffset != phys[i] {
					t.Errorf("%s: %s entry %d = offset %d at %d, want %d at %d", layout, lmq, i, e.QueueOffset, e.PhyOffset, i, phys[i])
				}
			}
		}
		for _, q := range []string{"NotLMQ", "", "%LMQ%a/../x"} {
			if hi, err := store.MaxOffset(q, 0); err != nil || hi != 0 {
				t.Errorf("%s: queue %q got entries (max %d, %v)", layout, q, hi, err)
			}
		}
		if hi, err := store.MaxOffset("Parent", 0); err != nil || hi != 3 {
			t.Errorf("%s: Parent/0 max %d, %v, want 3", layout, hi, err)
		}
	}
	check(s.store, LayoutKV)
	s.close(t)
	// The file layout, added now, is caught up from the CommitLog.
	s = openStackWith(t, root, cfg, LayoutKV, LayoutFile, multi)
	defer s.close(t)
	check(s.mirror, LayoutFile)
	// Offsets go on from the index after the restart.
	phys = append(phys, put("Parent", props, names))
	if err := s.disp.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if es, err := s.store.Get("%LMQ%b", 0, 3, 1); err != nil || len(es) != 1 || es[0].PhyOffset != phys[3] {
		t.Fatalf("fourth entry of %%LMQ%%b after the restart: %v %v", es, err)
	}
}

// FuzzMultiDispatchProperties: whatever a record's properties hold, the
// dispatcher indexes it in its own queue and only in valid light message
// queues at offsets that are not negative.
func FuzzMultiDispatchProperties(f *testing.F) {
	f.Add("%LMQ%a,x,%LMQ%b", "0,,7")
	f.Add("%LMQ%a,%LMQ%a", "1,2")
	f.Add("%LMQ%../x,%LMQ%", "-1,abc")
	f.Add(",,,", ",,")
	d := &Dispatcher{opts: DispatcherOptions{MultiDispatch: true}}
	f.Fuzz(func(t *testing.T, names, offsets string) {
		props := commitlog.RewriteProperties("", nil, [2]string{commitlog.PropertyMultiDispatch, names}, [2]string{commitlog.PropertyMultiQueueOffset, offsets})
		m := &commitlog.Message{Topic: "Parent", QueueID: 1, QueueOffset: 5, Properties: props}
		out := d.entriesOf(nil, m, commitlog.Entry{Offset: 100, Size: 60})
		if len(out) == 0 || out[0].Topic != "Parent" || out[0].Entry.QueueOffset != 5 {
			t.Fatalf("own entry missing: %+v", out)
		}
		for _, e := range out[1:] {
			if !meta.ValidLMQ(e.Topic) || e.QueueID != 0 || e.Entry.QueueOffset < 0 || e.Entry.PhyOffset != 100 {
				t.Fatalf("entry %+v from names %q offsets %q", e, names, offsets)
			}
		}
	})
}
