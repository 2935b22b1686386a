package cqtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
)

// MetamorphicConfig sizes a Metamorphic run. Zero fields take the defaults
// noted.
type MetamorphicConfig struct {
	// Seed selects the operation sequence; the same seed gives the same
	// sequence as long as the stores answer the same.
	Seed int64
	// Ops is the number of operations (default 1000).
	Ops int
	// Topics is the number of topics used (default 5).
	Topics int
	// QueuesPerTopic is the number of queue ids per topic (default 4).
	QueuesPerTopic int
}

func (c MetamorphicConfig) withDefaults() MetamorphicConfig {
	if c.Ops <= 0 {
		c.Ops = 1000
	}
	if c.Topics <= 0 {
		c.Topics = 5
	}
	if c.QueuesPerTopic <= 0 {
		c.QueuesPerTopic = 4
	}
	return c
}

// Metamorphic drives the stores opened by a and b with the same random
// sequence of operations, the way the dispatcher and the broker use a
// ConsumeQueue, and fails t at the first answer on which they differ
// (StoreTimestamp aside: a layout without it reports 0). The operations:
// batches of puts over many queues (with re-dispatched ranges, queues
// starting above 0, entries above the end), reads with count limits around
// both bounds, bounds of known and unknown queues, OffsetByTime at stored
// times and around them, CorrectMin as retention advances, Truncate as
// recovery cuts the log, DeleteQueue, DeleteTopic, Flush, Queues, and
// reopening both stores. Every 50 operations and at the end it compares the
// full contents.
//
// Both stores share one CommitLog stand-in. Store times never decrease along
// the log, so they never decrease along a queue either.
func Metamorphic(t *testing.T, cfg MetamorphicConfig, a, b Opener) {
	t.Helper()
	runMetamorphic(t, cfg, a, b, func(msg string) { t.Helper(); t.Fatal(msg) })
}

// runMetamorphic is Metamorphic reporting the first difference to fatal,
// which must not return.
func runMetamorphic(t *testing.T, cfg MetamorphicConfig, a, b Opener, fatal func(string)) {
	cfg = cfg.withDefaults()
	m := &metamorphic{
		t:      t,
		fatal:  fatal,
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5eed)),
		log:    NewCommitLog(),
		open:   [2]Opener{a, b},
		dirs:   [2]string{t.TempDir(), t.TempDir()},
		now:    1_700_000_000_000,
		exists: make(map[queueKey]bool),
	}
	for i := range m.s {
		m.s[i] = m.open[i](t, m.dirs[i], m.log)
	}
	defer func() {
		for _, s := range m.s {
			s.Close()
		}
	}()
	for i := 0; i < cfg.Ops && !t.Failed(); i++ {
		m.step(i)
		if i%50 == 49 {
			m.compareAll(i)
		}
	}
	if !t.Failed() {
		m.compareAll(cfg.Ops)
		t.Logf("seed %d: %d ops; %d entries read, %d of %d reads non-empty; %d queues, %d readable entries at the end",
			cfg.Seed, cfg.Ops, m.stats.entriesRead, m.stats.fullReads, m.stats.reads, m.stats.queues, m.stats.readable)
	}
}

type metamorphic struct {
	t     *testing.T
	fatal func(string)
	cfg   MetamorphicConfig
	rng   *rand.Rand
	log   *CommitLog
	open  [2]Opener
	dirs  [2]string
	s     [2]cq.Store

	now     int64             // store time of the next record
	history []cq.Dispatch     // dispatched entries (as stored) whose record is still in the log
	exists  map[queueKey]bool // queues put and not deleted since
	trace   []string          // recent operations, for failure messages
	stats   struct {
		reads, fullReads, entriesRead int
		queues, readable              int
	}
}

func (m *metamorphic) note(i int, format string, args ...any) {
	m.trace = append(m.trace, fmt.Sprintf("#%d ", i)+fmt.Sprintf(format, args...))
	if len(m.trace) > 25 {
		m.trace = m.trace[1:]
	}
}

func (m *metamorphic) fail(format string, args ...any) {
	m.t.Helper()
	m.fatal(fmt.Sprintf("seed %d: %s\nrecent operations:\n  %s", m.cfg.Seed, fmt.Sprintf(format, args...), strings.Join(m.trace, "\n  ")))
}

func (m *metamorphic) topic(i int) string {
	switch i {
	case 0:
		return "%RETRY%group-0"
	case 1:
		return "LongTopic_" + strings.Repeat("x", 117)
	default:
		return fmt.Sprintf("topic-%d", i)
	}
}

func (m *metamorphic) pickQueue() (string, int32) {
	return m.topic(m.rng.IntN(m.cfg.Topics)), int32(m.rng.IntN(m.cfg.QueuesPerTopic) * 7)
}

// same fails unless both stores returned the same errors (nil or not).
func (m *metamorphic) sameErr(what string, errs [2]error) bool {
	m.t.Helper()
	if (errs[0] == nil) != (errs[1] == nil) {
		m.fail("%s: errors differ: %v vs %v", what, errs[0], errs[1])
		return false
	}
	if errs[0] != nil {
		m.fail("%s: both failed: %v / %v", what, errs[0], errs[1])
		return false
	}
	return true
}

func (m *metamorphic) each(what string, fn func(s cq.Store) error) {
	m.t.Helper()
	var errs [2]error
	for i, s := range m.s {
		errs[i] = fn(s)
	}
	m.sameErr(what, errs)
}

func (m *metamorphic) step(i int) {
	switch r := m.rng.IntN(100); {
	case r < 35:
		m.put(i)
	case r < 55:
		m.get(i)
	case r < 63:
		m.bounds(i)
	case r < 75:
		m.byTime(i)
	case r < 79:
		m.correctMin(i)
	case r < 83:
		m.truncate(i)
	case r < 85:
		tp, q := m.pickQueue()
		m.note(i, "delete-queue %s %d", tp, q)
		m.each("delete-queue", func(s cq.Store) error { return s.DeleteQueue(tp, q) })
		m.forget(func(d cq.Dispatch) bool { return d.Topic == tp && d.QueueID == q })
		delete(m.exists, queueKey{tp, q})
	case r < 86:
		tp := m.topic(m.rng.IntN(m.cfg.Topics))
		m.note(i, "delete-topic %s", tp)
		m.each("delete-topic", func(s cq.Store) error { return s.DeleteTopic(tp) })
		m.forget(func(d cq.Dispatch) bool { return d.Topic == tp })
		for k := range m.exists {
			if k.topic == tp {
				delete(m.exists, k)
			}
		}
	case r < 90:
		m.note(i, "flush")
		m.each("flush", func(s cq.Store) error { return s.Flush() })
	case r < 94:
		m.note(i, "queues")
		m.compareQueues()
	default:
		m.note(i, "reopen")
		var errs [2]error
		for k := range m.s {
			m.s[k], errs[k] = reopen(m.t, m.open[k], m.s[k], m.dirs[k], m.log)
		}
		m.sameErr("reopen", errs)
	}
}

// forget drops history entries of deleted queues: the dispatcher never
// re-dispatches them.
func (m *metamorphic) forget(drop func(cq.Dispatch) bool) {
	m.history = slices.DeleteFunc(m.history, drop)
}

func (m *metamorphic) maxOffset(topic string, q int32) int64 {
	m.t.Helper()
	var got [2]int64
	var errs [2]error
	for k, s := range m.s {
		got[k], errs[k] = s.MaxOffset(topic, q)
	}
	if m.sameErr("max offset", errs) && got[0] != got[1] {
		m.fail("max offset of %s/%d: %d vs %d", topic, q, got[0], got[1])
	}
	return got[0]
}

func (m *metamorphic) put(i int) {
	var ds []cq.Dispatch
	// Re-dispatch of the last few records, as after a crash.
	if len(m.history) > 0 && m.rng.IntN(10) == 0 {
		k := 1 + m.rng.IntN(min(len(m.history), 12))
		ds = append(ds, m.history[len(m.history)-k:]...)
	}
	redispatched := len(ds)
	next := make(map[queueKey]int64)   // next queue offset to ask for
	stored := make(map[queueKey]int64) // where the next entry will land
	n := 1 + m.rng.IntN(16)
	for range n {
		tp, q := m.pickQueue()
		k := queueKey{tp, q}
		off, ok := next[k]
		if !ok {
			hi := m.maxOffset(tp, q)
			off = hi
			switch r := m.rng.IntN(40); {
			case hi == 0 && r < 4:
				off = 1 + m.rng.Int64N(25) // a queue starting above 0 (or a gap in an empty queue)
			case r == 4:
				off += 1 + m.rng.Int64N(3) // above the end: lands at the end
			}
			stored[k] = hi
			if !m.exists[k] {
				stored[k] = off // a new queue starts where its first entry says
			}
		}
		d := cq.Dispatch{Topic: tp, QueueID: q, Entry: cq.Entry{
			QueueOffset:    off,
			PhyOffset:      m.log.End(),
			Size:           int32(1 + m.rng.IntN(4000)),
			TagsCode:       m.rng.Int64N(5) - 2,
			StoreTimestamp: m.now,
		}}
		if m.rng.IntN(3) == 0 {
			d.TagsCode = m.rng.Int64()
		}
		m.now += m.rng.Int64N(3) // equal store times are frequent
		m.log.Add(d.PhyOffset, d.Size, d.StoreTimestamp)
		ds = append(ds, d)
		next[k] = off + 1
		h := d
		h.QueueOffset = stored[k]
		stored[k]++
		m.history = append(m.history, h)
		m.exists[k] = true
	}
	m.note(i, "put %d entries (%d re-dispatched)", len(ds), redispatched)
	m.each("put", func(s cq.Store) error { return s.Put(ds) })
}

func (m *metamorphic) get(i int) {
	tp, q := m.pickQueue()
	lo, _ := m.s[0].MinOffset(tp, q)
	hi := m.maxOffset(tp, q)
	from := lo - 2 + m.rng.Int64N(hi-lo+5)
	max := m.rng.IntN(40) - 1
	if m.rng.IntN(10) == 0 {
		max = 100_000
	}
	m.note(i, "get %s %d %d %d", tp, q, from, max)
	m.compareGet(tp, q, from, max)
}

func (m *metamorphic) compareGet(tp string, q int32, from int64, max int) {
	m.t.Helper()
	var got [2][]cq.Entry
	var errs [2]error
	for k, s := range m.s {
		got[k], errs[k] = s.Get(tp, q, from, max)
		if errs[k] == nil {
			if err := checkEntryTimes(m.log, got[k]); err != nil {
				m.fail("get %s/%d from %d max %d on store %d: %v", tp, q, from, max, k, err)
			}
			for j := range got[k] {
				got[k][j].StoreTimestamp = 0
			}
		}
	}
	if !m.sameErr("get", errs) {
		return
	}
	if !slices.Equal(got[0], got[1]) {
		m.fail("get %s/%d from %d max %d:\n%s\nvs\n%s", tp, q, from, max, formatEntries(got[0]), formatEntries(got[1]))
	}
	m.stats.reads++
	m.stats.entriesRead += len(got[0])
	if len(got[0]) > 0 {
		m.stats.fullReads++
	}
}

func (m *metamorphic) bounds(i int) {
	tp, q := m.pickQueue()
	m.note(i, "bounds %s %d", tp, q)
	m.compareBounds(tp, q)
}

func (m *metamorphic) compareBounds(tp string, q int32) {
	m.t.Helper()
	var lo, hi [2]int64
	var errs [2]error
	for k, s := range m.s {
		var err1, err2 error
		lo[k], err1 = s.MinOffset(tp, q)
		hi[k], err2 = s.MaxOffset(tp, q)
		errs[k] = errors.Join(err1, err2)
	}
	if m.sameErr("bounds", errs) && (lo != [2]int64{lo[0], lo[0]} || hi != [2]int64{hi[0], hi[0]}) {
		m.fail("bounds of %s/%d: [%d, %d) vs [%d, %d)", tp, q, lo[0], hi[0], lo[1], hi[1])
	}
}

func (m *metamorphic) byTime(i int) {
	tp, q := m.pickQueue()
	var ts int64
	switch r := m.rng.IntN(10); {
	case r == 0:
		ts = 0
	case r == 1:
		ts = m.now + 10
	default:
		// Around a store time of the queue (or of the log).
		var times []int64
		for _, d := range m.history {
			if d.Topic == tp && d.QueueID == q {
				times = append(times, d.StoreTimestamp)
			}
		}
		if len(times) == 0 {
			ts = m.now - m.rng.Int64N(100)
		} else {
			ts = times[m.rng.IntN(len(times))] + m.rng.Int64N(3) - 1
		}
	}
	for _, b := range []cq.Boundary{cq.Lower, cq.Upper} {
		m.note(i, "bytime %s %d %d %d", tp, q, ts, b)
		var got [2]int64
		var errs [2]error
		for k, s := range m.s {
			got[k], errs[k] = s.OffsetByTime(tp, q, ts, b)
		}
		if m.sameErr("offset by time", errs) && got[0] != got[1] {
			m.fail("offset by time %s/%d ts %d boundary %d: %d vs %d", tp, q, ts, b, got[0], got[1])
		}
	}
}

// correctMin advances the CommitLog's minimum to the start of a record
// still in the log (or, rarely, to its end), as retention does.
func (m *metamorphic) correctMin(i int) {
	min := m.log.End()
	if len(m.history) > 0 && m.rng.IntN(8) != 0 {
		// Mostly among the oldest records, as retention goes.
		min = m.history[m.rng.IntN(len(m.history)/3+1)].PhyOffset
	}
	if min < m.log.Min() {
		min = m.log.Min()
	}
	m.note(i, "correct-min %d", min)
	m.log.SetMin(min)
	m.forget(func(d cq.Dispatch) bool { return d.PhyOffset < min })
	m.each("correct-min", func(s cq.Store) error { return s.CorrectMin(min) })
}

// truncate cuts the log at the start of a record (or at its end), as
// CommitLog recovery does with a torn tail.
func (m *metamorphic) truncate(i int) {
	end := m.log.End()
	if len(m.history) > 0 && m.rng.IntN(4) != 0 {
		// Mostly near the end.
		k := len(m.history) - 1 - m.rng.IntN(min(len(m.history), 20))
		end = m.history[k].PhyOffset
	}
	m.note(i, "truncate %d", end)
	m.log.Truncate(end)
	m.forget(func(d cq.Dispatch) bool { return d.PhyOffset >= end })
	m.each("truncate", func(s cq.Store) error { return s.Truncate(end) })
}

func (m *metamorphic) compareQueues() []string {
	m.t.Helper()
	var got [2][]string
	var errs [2]error
	for k, s := range m.s {
		got[k], errs[k] = listQueues(s)
	}
	if m.sameErr("queues", errs) && !slices.Equal(got[0], got[1]) {
		m.fail("queues:\n  %s\nvs\n  %s", strings.Join(got[0], "\n  "), strings.Join(got[1], "\n  "))
	}
	return got[0]
}

// compareAll compares the queue lists, every queue's bounds and contents.
func (m *metamorphic) compareAll(i int) {
	m.t.Helper()
	m.note(i, "compare everything")
	var keys []queueKey
	err := m.s[0].Queues(func(topic string, queueID int32) bool {
		keys = append(keys, queueKey{topic, queueID})
		return true
	})
	if err != nil {
		m.fail("queues: %v", err)
	}
	m.compareQueues()
	m.stats.queues, m.stats.readable = len(keys), 0
	for _, k := range keys {
		m.compareBounds(k.topic, k.queueID)
		lo, _ := m.s[0].MinOffset(k.topic, k.queueID)
		hi, _ := m.s[0].MaxOffset(k.topic, k.queueID)
		m.compareGet(k.topic, k.queueID, lo, int(hi-lo)+1)
		m.stats.readable += int(hi - lo)
	}
}
