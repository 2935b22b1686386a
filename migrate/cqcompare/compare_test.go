package cqcompare_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/cq/cqtest"
	"github.com/rocketkv/rocketkv/migrate/cqcompare"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// ent is the entry at offset off of queue topic/id in these tests: phy
// id x 1,000,000 + (off+1) x 1000, size 100, tags off, stored at
// (off+1) x 1000 ms. Queues with higher ids have higher CommitLog offsets.
func ent(topic string, id int32, off int64) cq.Dispatch {
	return cq.Dispatch{Topic: topic, QueueID: id, Entry: cq.Entry{
		QueueOffset: off, PhyOffset: int64(id)*1_000_000 + (off+1)*1000, Size: 100, TagsCode: off, StoreTimestamp: (off + 1) * 1000,
	}}
}

// run returns the entries [from, from+n) of topic/id, each passed through
// the edits whose offset it is.
func run(topic string, id int32, from, n int64, edits ...edit) []cq.Dispatch {
	var ds []cq.Dispatch
	for off := from; off < from+n; off++ {
		d := ent(topic, id, off)
		for _, e := range edits {
			if e.off == off {
				e.fn(&d.Entry)
			}
		}
		ds = append(ds, d)
	}
	return ds
}

// edit changes the entry at off.
type edit struct {
	off int64
	fn  func(*cq.Entry)
}

func phyPlus1(off int64) edit  { return edit{off, func(e *cq.Entry) { e.PhyOffset++ }} }
func sizePlus1(off int64) edit { return edit{off, func(e *cq.Entry) { e.Size++ }} }
func tags99(off int64) edit    { return edit{off, func(e *cq.Entry) { e.TagsCode = 99 }} }
func time0(off int64) edit     { return edit{off, func(e *cq.Entry) { e.StoreTimestamp = 7 }} }

func concat(runs ...[]cq.Dispatch) []cq.Dispatch {
	var ds []cq.Dispatch
	for _, r := range runs {
		ds = append(ds, r...)
	}
	return ds
}

// memory returns a Memory holding ds.
func memory(t *testing.T, ds []cq.Dispatch) *cqtest.Memory {
	t.Helper()
	m := cqtest.NewMemory()
	if len(ds) > 0 {
		if err := m.Put(ds); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	return m
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var names = [2]string{"kv", "file"}

// fields formats a report field by field (%+v would print its String).
func fields(r cqcompare.Report) string {
	type plain cqcompare.Report
	return fmt.Sprintf("%+v", plain(r))
}

func queueDiff(topic string, id int32, problem string) cqcompare.Difference {
	return cqcompare.Difference{Topic: topic, QueueID: id, QueueOffset: -1, Problem: problem}
}

func entryDiff(topic string, id int32, off int64, problem string) cqcompare.Difference {
	return cqcompare.Difference{Topic: topic, QueueID: id, QueueOffset: off, Problem: problem}
}

// The comparison of two Memory stores, case by case: what each holds,
// what happens to them after (retention, recovery), the options, and the
// whole report expected.
func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name  string
		a, b  []cq.Dispatch
		after func(t *testing.T, a, b *cqtest.Memory)
		opts  cqcompare.Options
		want  cqcompare.Report
	}{
		{
			name: "identical",
			a:    concat(run("T", 0, 0, 5), run("T", 1, 0, 3), run("U", 0, 4, 2)),
			b:    concat(run("T", 0, 0, 5), run("T", 1, 0, 3), run("U", 0, 4, 2)),
			want: cqcompare.Report{Topics: 2, Queues: 3, Entries: 10},
		},
		{
			name: "no queues",
			want: cqcompare.Report{},
		},
		{
			name: "store timestamps are not compared",
			a:    run("T", 0, 0, 3),
			b:    run("T", 0, 0, 3, time0(0), time0(2)),
			want: cqcompare.Report{Topics: 1, Queues: 1, Entries: 3},
		},
		{
			name: "max offset differs",
			a:    run("T", 0, 0, 5),
			b:    run("T", 0, 0, 3),
			want: cqcompare.Report{Topics: 1, Queues: 1, Entries: 3, DifferenceCount: 1, QueuesWithDifferences: 1,
				Differences: []cqcompare.Difference{queueDiff("T", 0, "max offset: kv 5, file 3")}},
		},
		{
			name:  "min offset differs",
			a:     run("T", 0, 0, 5),
			b:     run("T", 0, 0, 5),
			after: func(t *testing.T, _, b *cqtest.Memory) { must(t, b.CorrectMin(ent("T", 0, 2).PhyOffset)) },
			want: cqcompare.Report{Topics: 1, Queues: 1, Entries: 3, DifferenceCount: 1, QueuesWithDifferences: 1,
				Differences: []cqcompare.Difference{queueDiff("T", 0, "min offset: kv 0, file 2")}},
		},
		{
			name: "phy offset differs, the first difference of a queue only",
			a:    run("T", 0, 0, 6),
			b:    run("T", 0, 0, 6, phyPlus1(2), phyPlus1(4)),
			want: cqcompare.Report{Topics: 1, Queues: 1, Entries: 3, DifferenceCount: 1, QueuesWithDifferences: 1,
				Differences: []cqcompare.Difference{entryDiff("T", 0, 2, "entry: kv {phy 3000 size 100 tags 2}, file {phy 3001 size 100 tags 2}")}},
		},
		{
			name: "size differs",
			a:    run("T", 0, 0, 6),
			b:    run("T", 0, 0, 6, sizePlus1(0)),
			want: cqcompare.Report{Topics: 1, Queues: 1, Entries: 1, DifferenceCount: 1, QueuesWithDifferences: 1,
				Differences: []cqcompare.Difference{entryDiff("T", 0, 0, "entry: kv {phy 1000 size 100 tags 0}, file {phy 1000 size 101 tags 0}")}},
		},
		{
			name: "tags code differs, other queues still compared",
			a:    concat(run("T", 0, 0, 6, tags99(5)), run("T", 1, 0, 2)),
			b:    concat(run("T", 0, 0, 6), run("T", 1, 0, 2)),
			want: cqcompare.Report{Topics: 1, Queues: 2, Entries: 8, DifferenceCount: 1, QueuesWithDifferences: 1,
				Differences: []cqcompare.Difference{entryDiff("T", 0, 5, "entry: kv {phy 6000 size 100 tags 99}, file {phy 6000 size 100 tags 5}")}},
		},
		{
			name: "bounds and an entry of one queue count as one queue with differences",
			a:    run("T", 0, 0, 6),
			b:    run("T", 0, 0, 5, tags99(3)),
			after: func(t *testing.T, _, b *cqtest.Memory) {
				must(t, b.CorrectMin(ent("T", 0, 1).PhyOffset))
			},
			want: cqcompare.Report{Topics: 1, Queues: 1, Entries: 3, DifferenceCount: 3, QueuesWithDifferences: 1,
				Differences: []cqcompare.Difference{
					queueDiff("T", 0, "max offset: kv 6, file 5"),
					queueDiff("T", 0, "min offset: kv 0, file 1"),
					entryDiff("T", 0, 3, "entry: kv {phy 4000 size 100 tags 3}, file {phy 4000 size 100 tags 99}"),
				}},
		},
		{
			name: "queue only in kv",
			a:    concat(run("T", 0, 0, 2), run("T", 1, 0, 3)),
			b:    run("T", 0, 0, 2),
			want: cqcompare.Report{Topics: 1, Queues: 2, Entries: 2, DifferenceCount: 1, QueuesWithDifferences: 1,
				Differences: []cqcompare.Difference{queueDiff("T", 1, "queue only in kv (max 3)")}},
		},
		{
			name: "queue only in file",
			a:    run("T", 0, 0, 2),
			b:    concat(run("T", 0, 0, 2), run("U", 1, 4, 3)),
			want: cqcompare.Report{Topics: 2, Queues: 2, Entries: 2, DifferenceCount: 1, QueuesWithDifferences: 1,
				Differences: []cqcompare.Difference{queueDiff("U", 1, "queue only in file (max 7)")}},
		},
		{
			name: "a queue only in one, emptied by retention, still has its offsets",
			a:    concat(run("T", 0, 0, 3), run("T", 1, 0, 2)),
			b:    run("T", 1, 0, 2),
			after: func(t *testing.T, a, b *cqtest.Memory) {
				must(t, a.CorrectMin(1_000_000))
				must(t, b.CorrectMin(1_000_000))
			},
			want: cqcompare.Report{Topics: 1, Queues: 2, Entries: 2, DifferenceCount: 1, QueuesWithDifferences: 1,
				Differences: []cqcompare.Difference{queueDiff("T", 0, "queue only in kv (max 3)")}},
		},
		{
			name: "an empty queue (max 0) only in one is fine",
			a:    concat(run("T", 1, 0, 2), run("T", 5, 0, 1)),
			b:    run("T", 1, 0, 2),
			after: func(t *testing.T, a, _ *cqtest.Memory) {
				must(t, a.Truncate(ent("T", 5, 0).PhyOffset)) // T/5 back to [0, 0)
			},
			want: cqcompare.Report{Topics: 1, Queues: 2, Entries: 2},
		},
		{
			name: "topic filter leaves other topics out",
			a:    concat(run("T", 0, 0, 5), run("U", 0, 0, 5), run("V", 0, 0, 1)),
			b:    concat(run("T", 0, 0, 3), run("U", 0, 0, 5)),
			opts: cqcompare.Options{Topic: "U"},
			want: cqcompare.Report{Topics: 1, Queues: 1, Entries: 5},
		},
		{
			name: "topic filter compares its topic",
			a:    concat(run("T", 0, 0, 5), run("U", 0, 0, 5)),
			b:    concat(run("T", 0, 0, 3), run("U", 0, 0, 5)),
			opts: cqcompare.Options{Topic: "T"},
			want: cqcompare.Report{Topics: 1, Queues: 1, Entries: 3, DifferenceCount: 1, QueuesWithDifferences: 1,
				Differences: []cqcompare.Difference{queueDiff("T", 0, "max offset: kv 5, file 3")}},
		},
		// Entry off is stored at (off+1) x 1000 ms.
		{
			name: "from time skips entries stored before it",
			a:    run("T", 0, 0, 10),
			b:    run("T", 0, 0, 10, tags99(3)),
			opts: cqcompare.Options{FromTime: 5000},
			want: cqcompare.Report{Topics: 1, Queues: 1, Entries: 6},
		},
		{
			name: "from time compares the entry stored at it",
			a:    run("T", 0, 0, 10),
			b:    run("T", 0, 0, 10, tags99(4)),
			opts: cqcompare.Options{FromTime: 5000},
			want: cqcompare.Report{Topics: 1, Queues: 1, Entries: 1, DifferenceCount: 1, QueuesWithDifferences: 1,
				Differences: []cqcompare.Difference{entryDiff("T", 0, 4, "entry: kv {phy 5000 size 100 tags 4}, file {phy 5000 size 100 tags 99}")}},
		},
		{
			name: "from time compares newer entries",
			a:    run("T", 0, 0, 10),
			b:    run("T", 0, 0, 10, tags99(7)),
			opts: cqcompare.Options{FromTime: 5000},
			want: cqcompare.Report{Topics: 1, Queues: 1, Entries: 4, DifferenceCount: 1, QueuesWithDifferences: 1,
				Differences: []cqcompare.Difference{entryDiff("T", 0, 7, "entry: kv {phy 8000 size 100 tags 7}, file {phy 8000 size 100 tags 99}")}},
		},
		{
			name: "from time between two entries starts at the older (Upper)",
			a:    run("T", 0, 0, 10),
			b:    run("T", 0, 0, 10, tags99(3)),
			opts: cqcompare.Options{FromTime: 4500},
			want: cqcompare.Report{Topics: 1, Queues: 1, Entries: 1, DifferenceCount: 1, QueuesWithDifferences: 1,
				Differences: []cqcompare.Difference{entryDiff("T", 0, 3, "entry: kv {phy 4000 size 100 tags 3}, file {phy 4000 size 100 tags 99}")}},
		},
		{
			name: "from time does not skip bounds",
			a:    run("T", 0, 0, 10),
			b:    run("T", 0, 0, 9),
			opts: cqcompare.Options{FromTime: 1 << 40}, // after every entry: kv's last, 9, is not in file
			want: cqcompare.Report{Topics: 1, Queues: 1, Entries: 0, DifferenceCount: 1, QueuesWithDifferences: 1,
				Differences: []cqcompare.Difference{queueDiff("T", 0, "max offset: kv 10, file 9")}},
		},
		{
			name: "max differences caps the list, not the count",
			a:    concat(run("B", 2, 0, 3), run("A", 10, 0, 3), run("A", 2, 0, 3)),
			b:    concat(run("B", 2, 0, 2), run("A", 10, 0, 2), run("A", 2, 0, 2)),
			opts: cqcompare.Options{MaxDifferences: 2},
			want: cqcompare.Report{Topics: 2, Queues: 3, Entries: 6, DifferenceCount: 3, QueuesWithDifferences: 3,
				Differences: []cqcompare.Difference{
					queueDiff("A", 2, "max offset: kv 3, file 2"),
					queueDiff("A", 10, "max offset: kv 3, file 2"),
				}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := memory(t, tc.a), memory(t, tc.b)
			if tc.after != nil {
				tc.after(t, a, b)
			}
			got, err := cqcompare.Compare(context.Background(), a, b, names, tc.opts)
			if err != nil {
				t.Fatalf("compare: %v", err)
			}
			tc.want.Names = names
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("report:\ngot  %s\nwant %s", fields(got), fields(tc.want))
			}
			if got.OK() != (tc.want.DifferenceCount == 0) {
				t.Errorf("OK() = %v with %d differences", got.OK(), got.DifferenceCount)
			}
		})
	}
}

// reversed lists a store's queues in reverse topic, then id order.
type reversed struct{ cq.Store }

func (r reversed) Queues(fn func(topic string, id int32) bool) error {
	var qs []cq.Dispatch
	if err := r.Store.Queues(func(topic string, id int32) bool {
		qs = append(qs, cq.Dispatch{Topic: topic, QueueID: id})
		return true
	}); err != nil {
		return err
	}
	slices.SortFunc(qs, func(x, y cq.Dispatch) int {
		return -cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.QueueID, y.QueueID))
	})
	for _, q := range qs {
		if !fn(q.Topic, q.QueueID) {
			break
		}
	}
	return nil
}

// Differences come in topic, then numeric queue id order, whatever order
// the stores list their queues in.
func TestCompareQueueOrder(t *testing.T) {
	a := reversed{memory(t, concat(run("B", 2, 0, 3), run("A", 10, 0, 3), run("A", 2, 0, 3)))}
	b := reversed{memory(t, concat(run("B", 2, 0, 2), run("A", 10, 0, 2), run("A", 2, 0, 2), run("A", 3, 0, 1)))}
	r, err := cqcompare.Compare(context.Background(), a, b, names, cqcompare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []cqcompare.Difference{
		queueDiff("A", 2, "max offset: kv 3, file 2"),
		queueDiff("A", 3, "queue only in file (max 1)"),
		queueDiff("A", 10, "max offset: kv 3, file 2"),
		queueDiff("B", 2, "max offset: kv 3, file 2"),
	}
	if !reflect.DeepEqual(r.Differences, want) {
		t.Errorf("differences\n%v\nwant\n%v", r.Differences, want)
	}
}

// Without MaxDifferences, the report keeps DefaultMaxDifferences and counts
// the rest.
func TestCompareDefaultMaxDifferences(t *testing.T) {
	const queues = cqcompare.DefaultMaxDifferences + 20
	var da, db []cq.Dispatch
	for id := range int32(queues) {
		da = append(da, run("T", id, 0, 2)...)
		db = append(db, run("T", id, 0, 1)...)
	}
	r, err := cqcompare.Compare(context.Background(), memory(t, da), memory(t, db), names, cqcompare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Differences) != cqcompare.DefaultMaxDifferences || r.DifferenceCount != queues || r.QueuesWithDifferences != queues {
		t.Errorf("%d differences kept, %d counted in %d queues; want %d, %d, %d",
			len(r.Differences), r.DifferenceCount, r.QueuesWithDifferences, cqcompare.DefaultMaxDifferences, queues, queues)
	}
}

// hooked wraps a store: before runs at the start of each read method, and
// fail makes the named methods return an error instead.
type hooked struct {
	cq.Store
	before func(method string)
	fail   map[string]error
	get    func(topic string, id int32, from int64, max int) ([]cq.Entry, error) // replaces Get when set
}

func (h *hooked) call(method string) error {
	if h.before != nil {
		h.before(method)
	}
	return h.fail[method]
}

func (h *hooked) Get(topic string, id int32, from int64, max int) ([]cq.Entry, error) {
	if err := h.call("Get"); err != nil {
		return nil, err
	}
	if h.get != nil {
		return h.get(topic, id, from, max)
	}
	return h.Store.Get(topic, id, from, max)
}

func (h *hooked) MinOffset(topic string, id int32) (int64, error) {
	if err := h.call("MinOffset"); err != nil {
		return 0, err
	}
	return h.Store.MinOffset(topic, id)
}

func (h *hooked) MaxOffset(topic string, id int32) (int64, error) {
	if err := h.call("MaxOffset"); err != nil {
		return 0, err
	}
	return h.Store.MaxOffset(topic, id)
}

func (h *hooked) OffsetByTime(topic string, id int32, ts int64, b cq.Boundary) (int64, error) {
	if err := h.call("OffsetByTime"); err != nil {
		return 0, err
	}
	return h.Store.OffsetByTime(topic, id, ts, b)
}

func (h *hooked) Queues(fn func(topic string, id int32) bool) error {
	if err := h.call("Queues"); err != nil {
		return err
	}
	return h.Store.Queues(fn)
}

// An error of either store stops the comparison and comes back wrapped,
// naming the store and, but for listing, the queue.
func TestCompareStoreErrors(t *testing.T) {
	errBoom := errors.New("boom")
	ds := concat(run("T", 0, 0, 3), run("T", 1, 0, 3))
	for _, tc := range []struct {
		method string
		side   int
		opts   cqcompare.Options
		want   string
	}{
		{"Get", 1, cqcompare.Options{}, "compare queue T/0: get 3 entries from 0 in file: boom"},
		{"Get", 0, cqcompare.Options{}, "compare queue T/0: get 3 entries from 0 in kv: boom"},
		{"MinOffset", 1, cqcompare.Options{}, "compare queue T/0: min offset in file: boom"},
		{"MaxOffset", 0, cqcompare.Options{}, "compare queue T/0: max offset in kv: boom"},
		{"OffsetByTime", 0, cqcompare.Options{FromTime: 2000}, "compare queue T/0: offset by time 2000 in kv: boom"},
		{"Queues", 1, cqcompare.Options{}, "list the queues of file: boom"},
	} {
		t.Run(fmt.Sprintf("%s of %s", tc.method, names[tc.side]), func(t *testing.T) {
			stores := [2]cq.Store{memory(t, ds), memory(t, ds)}
			stores[tc.side] = &hooked{Store: stores[tc.side], fail: map[string]error{tc.method: errBoom}}
			_, err := cqcompare.Compare(context.Background(), stores[0], stores[1], names, tc.opts)
			if !errors.Is(err, errBoom) || err.Error() != tc.want {
				t.Errorf("error %v, want %q wrapping boom", err, tc.want)
			}
		})
	}
}

// A cancelled context stops the comparison between queues and between
// chunks of one queue.
func TestCompareCancelled(t *testing.T) {
	ds := concat(run("T", 0, 0, 3000), run("T", 1, 0, 3), run("T", 2, 0, 3))

	t.Run("before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r, err := cqcompare.Compare(ctx, memory(t, ds), memory(t, ds), names, cqcompare.Options{})
		if !errors.Is(err, context.Canceled) || r.Queues != 0 {
			t.Errorf("error %v after %d queues, want context.Canceled after none", err, r.Queues)
		}
	})
	t.Run("between chunks", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b := &hooked{Store: memory(t, ds), before: func(m string) {
			if m == "Get" {
				cancel()
			}
		}}
		r, err := cqcompare.Compare(ctx, memory(t, ds), b, names, cqcompare.Options{})
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "T/0") {
			t.Errorf("error %v, want context.Canceled naming T/0", err)
		}
		if r.Entries != 1024 || r.Queues != 1 {
			t.Errorf("%d entries of %d queues compared, want the first chunk (1024) of one", r.Entries, r.Queues)
		}
	})
	t.Run("between queues", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ds := concat(run("T", 0, 0, 3), run("T", 1, 0, 3), run("T", 2, 0, 3))
		opts := cqcompare.Options{Bounds: func(read func() error) error {
			cancel() // after the bounds, before any entry of the first queue
			return read()
		}}
		r, err := cqcompare.Compare(ctx, memory(t, ds), memory(t, ds), names, opts)
		if !errors.Is(err, context.Canceled) || r.Queues != 1 || r.Entries != 0 {
			t.Errorf("error %v after %d queues and %d entries, want context.Canceled after 1 queue, no entry", err, r.Queues, r.Entries)
		}
	})
}

// Options.Bounds is called once per queue, and every bound is read inside
// it; its own error is returned wrapped with the queue.
func TestCompareBoundsHook(t *testing.T) {
	ds := concat(run("T", 0, 0, 3), run("T", 1, 0, 3), run("U", 0, 0, 2))
	inside, calls := false, 0
	var outside []string
	check := func(m string) {
		if (m == "MinOffset" || m == "MaxOffset") && !inside {
			outside = append(outside, m)
		}
	}
	a := &hooked{Store: memory(t, ds), before: check}
	b := &hooked{Store: memory(t, ds[:len(ds)-1]), before: check}
	opts := cqcompare.Options{Bounds: func(read func() error) error {
		calls++
		inside = true
		defer func() { inside = false }()
		return read()
	}}
	r, err := cqcompare.Compare(context.Background(), a, b, names, opts)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Errorf("Bounds called %d times for 3 queues", calls)
	}
	if len(outside) > 0 {
		t.Errorf("bounds read outside the hook: %v", outside)
	}
	if want := []cqcompare.Difference{queueDiff("U", 0, "max offset: kv 2, file 1")}; !reflect.DeepEqual(r.Differences, want) {
		t.Errorf("differences %v, want %v (the bounds read inside the hook)", r.Differences, want)
	}

	errHook := errors.New("dispatcher closed")
	opts.Bounds = func(func() error) error { return errHook }
	_, err = cqcompare.Compare(context.Background(), a, b, names, opts)
	if !errors.Is(err, errHook) || !strings.Contains(err.Error(), "T/0") {
		t.Errorf("error %v, want the hook's error naming T/0", err)
	}
}

// A queue created in one store after it was listed (between the two
// listings, under double-write) is compared, not reported as missing.
func TestCompareQueueCreatedAfterListing(t *testing.T) {
	a := memory(t, concat(run("T", 0, 0, 2), run("T", 1, 0, 3)))
	b := memory(t, run("T", 0, 0, 2))
	first := true
	opts := cqcompare.Options{Bounds: func(read func() error) error {
		if first { // T/0's bounds: the listings are done
			first = false
			must(t, b.Put(run("T", 1, 0, 3)))
		}
		return read()
	}}
	r, err := cqcompare.Compare(context.Background(), a, b, names, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.Queues != 2 || r.Entries != 5 {
		t.Errorf("report %s, want OK with both queues compared", fields(r))
	}
}

// Retention moving the minima up while the entries are read is not a
// difference; a store returning fewer entries without it is one.
func TestCompareShortRead(t *testing.T) {
	ds := run("T", 0, 0, 10)
	t.Run("retention meanwhile", func(t *testing.T) {
		a, b := memory(t, ds), memory(t, ds)
		first := true
		hb := &hooked{Store: b, before: func(m string) {
			if m == "Get" && first {
				first = false
				// a answered [0, 10); both lose 0..3 before b answers.
				must(t, a.CorrectMin(ent("T", 0, 4).PhyOffset))
				must(t, b.CorrectMin(ent("T", 0, 4).PhyOffset))
			}
		}}
		r, err := cqcompare.Compare(context.Background(), a, hb, names, cqcompare.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() || r.Entries != 6 {
			t.Errorf("report %s, want OK with entries 4..9 compared", fields(r))
		}
	})
	t.Run("entries missing", func(t *testing.T) {
		b := memory(t, ds)
		hb := &hooked{Store: b, get: func(topic string, id int32, from int64, max int) ([]cq.Entry, error) {
			es, err := b.Get(topic, id, from, max)
			return es[:min(len(es), 5)], err
		}}
		r, err := cqcompare.Compare(context.Background(), memory(t, ds), hb, names, cqcompare.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := []cqcompare.Difference{entryDiff("T", 0, 5, "entry: kv {phy 6000 size 100 tags 5}, file missing")}
		if !reflect.DeepEqual(r.Differences, want) || r.Entries != 5 {
			t.Errorf("report %s, want %v after 5 entries", fields(r), want)
		}
	})
}

// A real file store against a Memory: the file layout reports no store
// timestamps and reads times from the CommitLog for FromTime, and a queue
// seeded at an offset agrees with one retention emptied there.
func TestCompareFileStore(t *testing.T) {
	log := cqtest.NewCommitLog()
	dir := t.TempDir()
	opts := filecq.Options{Dir: dir, UnitsPerFile: 10, StoreTime: log.StoreTime}
	fs, err := filecq.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	mem := cqtest.NewMemory()
	emptied := run("S", 0, 0, 12) // below T/1 in the CommitLog
	entries := run("T", 1, 0, 25)
	for _, d := range concat(emptied, entries) {
		log.Add(d.PhyOffset, d.Size, d.StoreTimestamp)
	}
	must(t, mem.Put(concat(emptied, run("T", 1, 0, 25, tags99(3)))))
	must(t, fs.Put(entries))
	must(t, fs.SeedStart("S", 0, 12))
	log.SetMin(1_000_000)
	must(t, mem.CorrectMin(1_000_000))

	// Reopen as the broker does: Truncate to the log's end, CorrectMin to
	// its minimum.
	must(t, fs.Close())
	if fs, err = filecq.Open(opts); err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	must(t, fs.Truncate(1<<40))
	must(t, fs.CorrectMin(1_000_000))

	fileFirst := [2]string{"file", "kv"}
	r, err := cqcompare.Compare(context.Background(), fs, mem, fileFirst, cqcompare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := cqcompare.Report{Names: fileFirst, Topics: 2, Queues: 2, Entries: 4, DifferenceCount: 1, QueuesWithDifferences: 1,
		Differences: []cqcompare.Difference{entryDiff("T", 1, 3, "entry: file {phy 1004000 size 100 tags 3}, kv {phy 1004000 size 100 tags 99}")}}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("report:\ngot  %s\nwant %s", fields(r), fields(want))
	}

	// Entry 10 is stored at 11,000 ms: compared from it on, they agree.
	r, err = cqcompare.Compare(context.Background(), fs, mem, fileFirst, cqcompare.Options{FromTime: 11_000})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.Entries != 15 || r.Queues != 2 {
		t.Errorf("from 11,000 ms: %s, want OK, entries 10..24 of T/1 compared", fields(r))
	}
}

func TestReportString(t *testing.T) {
	ok := cqcompare.Report{Names: names, Topics: 2, Queues: 5, Entries: 1200}
	if got, want := ok.String(), "kv and file agree: 2 topics, 5 queues, 1200 entries compared"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}

	r := cqcompare.Report{Names: names, Topics: 2, Queues: 40, Entries: 1200, DifferenceCount: 13, QueuesWithDifferences: 12}
	r.Differences = append(r.Differences,
		queueDiff("A", 0, "max offset: kv 12, file 10"),
		entryDiff("A", 0, 7, "entry: kv {phy 700 size 80 tags 0}, file missing"))
	for id := range int32(10) {
		r.Differences = append(r.Differences, queueDiff("B", id, "queue only in kv (max 4)"))
	}
	want := `kv and file differ: 13 differences in 12 of 40 queues (2 topics, 1200 entries compared)
A/0: max offset: kv 12, file 10
A/0 at 7: entry: kv {phy 700 size 80 tags 0}, file missing
B/0: queue only in kv (max 4)
B/1: queue only in kv (max 4)
B/2: queue only in kv (max 4)
B/3: queue only in kv (max 4)
B/4: queue only in kv (max 4)
B/5: queue only in kv (max 4)
B/6: queue only in kv (max 4)
B/7: queue only in kv (max 4)
... and 3 more`
	if got := r.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
