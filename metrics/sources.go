package metrics

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// bound holds the Sources a Broker's gauges read at a scrape, which a
// controller-mode broker hands from the Broker it stops at a role switch
// to the one it starts (Rebind), so that its counters and histograms
// live on: RocketMQ keeps one BrokerMetricsManager across a role change.
// A Broker stopping detaches its sources (Detach) before it closes its
// stores; until the next Broker rebinds, the gauges report nothing.
//
// Each binding has a context, which set cancels before it waits for the
// reads in progress: a source that reads a whole store (Sources.Lags, at
// a million queues seconds of work) stops at its next check of the
// context, so a switch waits for a scrape to let go of the stores, not
// for its whole computation.
//
// The counters and histograms the processors feed never take its lock:
// only a scrape's gauges do, to read the sources.
type bound struct {
	mu  sync.RWMutex
	src *Sources        // nil: detached
	ctx context.Context // the binding's, handed to the reads under mu

	// setMu serializes set and guards cancel, the binding's cancel
	// function, which set calls before it takes mu (the reads it
	// cancels hold mu's read lock). Reads never take it.
	setMu  sync.Mutex
	cancel context.CancelFunc
}

// read calls f with the sources bound, under the read lock, so that
// set waits for the reads in progress; it returns false when none are
// bound.
func (b *bound) read(f func(s *Sources) bool) bool {
	return b.readContext(func(_ context.Context, s *Sources) bool { return f(s) })
}

// readContext is read with the binding's context, which set cancels
// before it waits for f: a long read checks it and returns early.
func (b *bound) readContext(f func(ctx context.Context, s *Sources) bool) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.src == nil {
		return false
	}
	return f(b.ctx, b.src)
}

// readSource is the value get takes from the sources bound: ok is
// false, and v zero, when none are bound or get finds no value (its
// source not set, or without a value at this scrape).
func readSource[T any](b *bound, get func(s *Sources) (T, bool)) (v T, ok bool) {
	b.read(func(s *Sources) bool {
		v, ok = get(s)
		return ok
	})
	return v, ok
}

// always is the value of f, a source that always has one: ok is false
// when f is not set (a Rebind left it out).
func always[T any](f func() T) (v T, ok bool) {
	if f == nil {
		return v, false
	}
	return f(), true
}

// optional is the value of f, a source that may have none: ok is false
// when f is not set or has none.
func optional[T any](f func() (T, bool)) (v T, ok bool) {
	if f == nil {
		return v, false
	}
	return f()
}

// count is the value of f, a source that always has one, as a gauge's.
func count[T int | int64](f func() T) (int64, bool) {
	v, ok := always(f)
	return int64(v), ok
}

// set binds src (nil detaches): it cancels the binding's context, then
// waits for the reads in progress to return.
func (b *bound) set(src *Sources) {
	b.setMu.Lock()
	defer b.setMu.Unlock()
	if b.cancel != nil {
		b.cancel()
	}
	var ctx context.Context
	b.cancel = nil
	if src != nil {
		ctx, b.cancel = context.WithCancel(context.Background())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.src, b.ctx = src, ctx
}

// The sources a layout records, one bit each (layout.has).
const (
	hasPermission = 1 << iota
	hasTopics
	hasGroups
	hasProducers
	hasConsumers
	hasDispatch
	hasFlush
	hasSize
	hasReserve
	hasLags
	hasTimers
	hasRevive
	hasHalf
)

// layout is what New registers for a set of constant labels, names and
// sources: two Brokers of one layout serve the same metrics.
type layout struct {
	labels string
	names  Naming
	off    Families
	limit  int
	has    uint32
}

// layoutOf is the layout of New(labels, src, names), src as prepare
// returned it.
func layoutOf(labels map[string]string, src *Sources, names Naming) layout {
	var l string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		l += k + "\xff" + labels[k] + "\xff"
	}
	var has uint32
	for bit, on := range map[uint32]bool{
		hasPermission: src.BrokerPermission != nil, hasTopics: src.TopicCount != nil,
		hasGroups: src.ConsumerGroupCount != nil, hasProducers: src.Producers != nil,
		hasConsumers: src.Consumers != nil, hasDispatch: src.DispatchBehindBytes != nil,
		hasFlush: src.FlushBehindBytes != nil, hasSize: src.StorageSize != nil,
		hasReserve: src.MessageReserveMillis != nil, hasLags: src.Lags != nil,
		hasTimers: src.Timers != nil, hasRevive: src.PopRevive != nil,
		hasHalf: src.HalfMessages != nil,
	} {
		if on {
			has |= bit
		}
	}
	limit := src.CardinalityLimit
	if limit <= 0 {
		limit = DefaultCardinalityLimit
	}
	return layout{labels: l, names: names, off: src.Off, limit: limit, has: has}
}

// prepare leaves out of src the sources of the families src.Off turns
// off, whose gauges New does not register.
func prepare(src Sources) Sources {
	off := src.Off
	if off.Pop {
		src.PopRevive = nil
	}
	if off.Stats {
		src.BrokerPermission, src.TopicCount, src.ConsumerGroupCount = nil, nil, nil
	}
	if off.Store {
		src.DispatchBehindBytes, src.FlushBehindBytes, src.StorageSize, src.MessageReserveMillis, src.Timers = nil, nil, nil, nil, nil
	}
	if off.Connection {
		src.Producers, src.Consumers = nil, nil
	}
	if off.Transaction {
		src.HalfMessages = nil
	}
	return src
}

// Rebind makes m's gauges read src from now on, in place of the sources
// bound (New's, or the last Rebind's), for a broker that replaces the
// one m was built for and keeps its counters and histograms. It reports
// false, and changes nothing, when New(labels, src, names) would serve
// other metrics than m (other labels, names, families or cardinality
// limit, or a gauge m has not registered): the caller then builds a
// new Broker. A source m has a gauge for and src lacks leaves that gauge
// out of the scrapes. src.Log is not read: m keeps New's.
func (m *Broker) Rebind(labels map[string]string, src Sources, names Naming) bool {
	if m == nil {
		return false
	}
	src = prepare(src)
	l := layoutOf(labels, &src, names)
	if l.labels != m.layout.labels || l.names != m.layout.names || l.off != m.layout.off ||
		l.limit != m.layout.limit || l.has&^m.layout.has != 0 {
		return false
	}
	m.sources.set(&src)
	return true
}

// Detach stops m's gauges reading the sources bound, once the reads in
// progress returned: a broker detaches its sources before it closes
// what they read. It first cancels the context the reads in progress
// were handed (Sources.Lags'), so that it waits for them to let go of
// the sources, not for their whole computation. Until the next Rebind a scrape shows m's counters and
// histograms and none of the gauges read from the sources.
func (m *Broker) Detach() {
	if m == nil {
		return
	}
	m.sources.set(nil)
}
