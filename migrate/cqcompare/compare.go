package cqcompare

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/rocketkv/rocketkv/cq"
)

// DefaultMaxDifferences is the number of differences a Report keeps when
// Options.MaxDifferences is 0.
const DefaultMaxDifferences = 100

// chunkSize is the number of entries read from each store per Get.
const chunkSize = 1024

// Options selects what Compare compares.
type Options struct {
	// Topic limits the comparison to one topic; "" compares every topic of
	// either store.
	Topic string

	// FromTime (ms since the epoch, RocketMQ's checkStoreTime) leaves out
	// the entries stored before it: each queue is compared from the last
	// entry stored at or before FromTime on (see the package
	// documentation). Bounds are compared all the same. 0 compares every
	// entry.
	FromTime int64

	// MaxDifferences is the number of differences the Report keeps; later
	// ones are only counted. 0 (or less) means DefaultMaxDifferences.
	MaxDifferences int

	// Bounds, when set, is called once per queue with a function that
	// reads the queue's bounds in both stores, and must call it so that no
	// write to the stores happens meanwhile (the broker passes its
	// dispatcher's Quiesced). It returns what read returns, or its own
	// error. nil calls read directly. (The minima read again after a
	// short read of entries, see the package documentation, are read
	// directly: retention only moves them up.)
	Bounds func(read func() error) error
}

// Difference is one way the two stores disagree.
type Difference struct {
	Topic   string
	QueueID int32
	// QueueOffset is the offset of the entry that differs, -1 for a
	// difference of the queue itself (its bounds, or its presence).
	QueueOffset int64
	// Problem says what differs, naming the stores, e.g. "max offset: file
	// 12, kv 10", "entry: file {phy 100 size 80 tags 0}, kv missing" or
	// "queue only in kv (max 12)".
	Problem string
}

// String returns the difference on one line, prefixed by its queue and,
// for an entry, its offset: "TopicA/0 at 7: entry: ...".
func (d Difference) String() string {
	if d.QueueOffset < 0 {
		return fmt.Sprintf("%s/%d: %s", d.Topic, d.QueueID, d.Problem)
	}
	return fmt.Sprintf("%s/%d at %d: %s", d.Topic, d.QueueID, d.QueueOffset, d.Problem)
}

// Report is the outcome of a comparison.
type Report struct {
	// Names are the names of the two stores, as passed to Compare.
	Names [2]string
	// Topics and Queues count the topics and queues compared.
	Topics, Queues int
	// Entries counts the entries compared (pairs, one from each store).
	Entries int64
	// Differences holds the first Options.MaxDifferences differences, in
	// queue order.
	Differences []Difference
	// DifferenceCount counts every difference found.
	DifferenceCount int64
	// QueuesWithDifferences counts the queues with at least one.
	QueuesWithDifferences int
}

// OK reports whether no difference was found.
func (r Report) OK() bool { return r.DifferenceCount == 0 }

// Compare compares the ConsumeQueue stores a and b queue by queue, as the
// package documentation describes, and reports where they differ. names
// name the stores in the report ("a" and "b" when empty).
//
// A store's error stops the comparison and is returned wrapped with the
// queue it happened on; so is ctx's error, checked between queues and
// between chunks of entries. The Report returned with an error holds what
// was compared until then.
func Compare(ctx context.Context, a, b cq.Store, names [2]string, opts Options) (Report, error) {
	c := newComparer(a, b, names, opts)
	queues, err := c.listQueues()
	if err != nil {
		return c.report, err
	}
	topics := make(map[string]bool)
	for _, q := range queues {
		if err := ctx.Err(); err != nil {
			return c.report, fmt.Errorf("compare ConsumeQueues %s and %s: %w", c.names[0], c.names[1], err)
		}
		topics[q.topic] = true
		c.report.Topics = len(topics)
		c.report.Queues++
		if err := c.compareQueue(ctx, q); err != nil {
			return c.report, fmt.Errorf("compare queue %s/%d: %w", q.topic, q.id, err)
		}
	}
	return c.report, nil
}

// comparer holds one comparison's stores, options and report.
type comparer struct {
	stores [2]cq.Store
	names  [2]string
	opts   Options
	report Report
}

func newComparer(a, b cq.Store, names [2]string, opts Options) *comparer {
	if names[0] == "" {
		names[0] = "a"
	}
	if names[1] == "" {
		names[1] = "b"
	}
	if opts.MaxDifferences <= 0 {
		opts.MaxDifferences = DefaultMaxDifferences
	}
	if opts.Bounds == nil {
		opts.Bounds = func(read func() error) error { return read() }
	}
	return &comparer{stores: [2]cq.Store{a, b}, names: names, opts: opts, report: Report{Names: names}}
}

// queueRef is one queue of the union of both stores' queues.
type queueRef struct {
	topic string
	id    int32
	in    [2]bool // listed by store a, b
}

// listQueues returns the queues of both stores (of opts.Topic only, if
// set), sorted by topic, then queue id.
func (c *comparer) listQueues() ([]queueRef, error) {
	type key struct {
		topic string
		id    int32
	}
	seen := make(map[key]*queueRef)
	var refs []*queueRef
	for i, s := range c.stores {
		err := s.Queues(func(topic string, id int32) bool {
			if c.opts.Topic != "" && topic != c.opts.Topic {
				return true
			}
			r := seen[key{topic, id}]
			if r == nil {
				r = &queueRef{topic: topic, id: id}
				seen[key{topic, id}] = r
				refs = append(refs, r)
			}
			r.in[i] = true
			return true
		})
		if err != nil {
			return nil, fmt.Errorf("list the queues of %s: %w", c.names[i], err)
		}
	}
	queues := make([]queueRef, len(refs))
	for i, r := range refs {
		queues[i] = *r
	}
	slices.SortFunc(queues, func(x, y queueRef) int {
		return cmp.Or(cmp.Compare(x.topic, y.topic), cmp.Compare(x.id, y.id))
	})
	return queues, nil
}

// bounds is a queue's [min, max) in one store.
type bounds struct{ min, max int64 }

// readBounds reads q's bounds in both stores.
func (c *comparer) readBounds(q queueRef) ([2]bounds, error) {
	var bs [2]bounds
	for i, s := range c.stores {
		lo, err := s.MinOffset(q.topic, q.id)
		if err != nil {
			return bs, fmt.Errorf("min offset in %s: %w", c.names[i], err)
		}
		hi, err := s.MaxOffset(q.topic, q.id)
		if err != nil {
			return bs, fmt.Errorf("max offset in %s: %w", c.names[i], err)
		}
		bs[i] = bounds{lo, hi}
	}
	return bs, nil
}

// compareQueue compares one queue: its presence, its bounds, its entries.
func (c *comparer) compareQueue(ctx context.Context, q queueRef) error {
	before := c.report.DifferenceCount
	defer func() {
		if c.report.DifferenceCount > before {
			c.report.QueuesWithDifferences++
		}
	}()
	var bs [2]bounds
	err := c.opts.Bounds(func() error {
		var err error
		bs, err = c.readBounds(q)
		return err
	})
	if err != nil {
		return err
	}
	if !c.bothHold(q, bs) {
		return nil
	}
	if bs[0].max != bs[1].max {
		c.addf(q, -1, "max offset: %s %d, %s %d", c.names[0], bs[0].max, c.names[1], bs[1].max)
	}
	if bs[0].min != bs[1].min {
		c.addf(q, -1, "min offset: %s %d, %s %d", c.names[0], bs[0].min, c.names[1], bs[1].min)
	}
	lo, hi := max(bs[0].min, bs[1].min), min(bs[0].max, bs[1].max)
	if c.opts.FromTime > 0 && lo < hi {
		t, err := c.stores[0].OffsetByTime(q.topic, q.id, c.opts.FromTime, cq.Upper)
		if err != nil {
			return fmt.Errorf("offset by time %d in %s: %w", c.opts.FromTime, c.names[0], err)
		}
		lo = max(lo, t)
	}
	return c.compareEntries(ctx, q, lo, hi)
}

// bothHold reports whether both stores hold q, so that its bounds and
// entries are to be compared. A queue listed by one store only is held by
// the other after all if it has offsets there now (created after the
// listing); otherwise it is a difference if the listing store has given
// it offsets.
func (c *comparer) bothHold(q queueRef, bs [2]bounds) bool {
	for i := range 2 {
		j := 1 - i
		if q.in[i] || bs[i].max > 0 {
			continue
		}
		if bs[j].max > 0 {
			c.addf(q, -1, "queue only in %s (max %d)", c.names[j], bs[j].max)
		}
		return false
	}
	return true
}

// compareEntries compares q's entries at [lo, hi) chunk by chunk until the
// first one that differs.
func (c *comparer) compareEntries(ctx context.Context, q queueRef, lo, hi int64) error {
	for pos := lo; pos < hi; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int(min(chunkSize, hi-pos))
		var got [2][]cq.Entry
		for i, s := range c.stores {
			es, err := s.Get(q.topic, q.id, pos, n)
			if err != nil {
				return fmt.Errorf("get %d entries from %d in %s: %w", n, pos, c.names[i], err)
			}
			got[i] = es
		}
		k := min(len(got[0]), len(got[1]))
		for i := range k {
			c.report.Entries++
			if !sameEntry(got[0][i], got[1][i]) {
				c.addf(q, pos+int64(i), "entry: %s %s, %s %s",
					c.names[0], formatEntry(got[0][i], pos+int64(i)), c.names[1], formatEntry(got[1][i], pos+int64(i)))
				return nil
			}
		}
		pos += int64(k)
		if k == n {
			continue
		}
		next, err := c.afterShortRead(q, pos, got)
		if err != nil || next < 0 {
			return err
		}
		pos = next
	}
	return nil
}

// afterShortRead decides how to go on when a store returned fewer entries
// than asked for at pos (the entries before pos agree): from the new
// minimum if retention moved one past pos meanwhile; nowhere (-1) if both
// stores ended at pos (the queue was cut or deleted in both); and
// otherwise, the entry one store lacks being a difference, nowhere either.
func (c *comparer) afterShortRead(q queueRef, pos int64, got [2][]cq.Entry) (int64, error) {
	bs, err := c.readBounds(q)
	if err != nil {
		return 0, err
	}
	if lo := max(bs[0].min, bs[1].min); lo > pos {
		return lo, nil
	}
	k := min(len(got[0]), len(got[1]))
	switch {
	case len(got[0]) > k:
		c.addf(q, pos, "entry: %s %s, %s missing", c.names[0], formatEntry(got[0][k], pos), c.names[1])
	case len(got[1]) > k:
		c.addf(q, pos, "entry: %s missing, %s %s", c.names[0], c.names[1], formatEntry(got[1][k], pos))
	}
	return -1, nil
}

// sameEntry compares what both layouts keep of an entry (not its store
// timestamp: the file layout reports 0).
func sameEntry(x, y cq.Entry) bool {
	return x.QueueOffset == y.QueueOffset && x.PhyOffset == y.PhyOffset && x.Size == y.Size && x.TagsCode == y.TagsCode
}

// formatEntry writes e as "{phy 100 size 80 tags 0}", with its queue
// offset too when it is not the expected one.
func formatEntry(e cq.Entry, at int64) string {
	if e.QueueOffset != at {
		return fmt.Sprintf("{offset %d phy %d size %d tags %d}", e.QueueOffset, e.PhyOffset, e.Size, e.TagsCode)
	}
	return fmt.Sprintf("{phy %d size %d tags %d}", e.PhyOffset, e.Size, e.TagsCode)
}

// addf counts a difference of q and keeps it while the report has room.
func (c *comparer) addf(q queueRef, off int64, format string, args ...any) {
	c.report.DifferenceCount++
	if len(c.report.Differences) < c.opts.MaxDifferences {
		c.report.Differences = append(c.report.Differences, Difference{
			Topic: q.topic, QueueID: q.id, QueueOffset: off, Problem: fmt.Sprintf(format, args...),
		})
	}
}
