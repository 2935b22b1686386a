package brokerstats

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Window is what a counter did over one of an item's windows: the amount
// added (Sum), its rate per second (TPS), and the average amount per call
// (AvgPT, Sum divided by the calls; 0 when there was none). It is
// RocketMQ's StatsSnapshot as VIEW_BROKER_STATS_DATA reports it.
type Window struct {
	Sum   int64
	TPS   float64
	AvgPT float64
}

// Windows is a statistic over its three windows.
type Windows struct {
	Minute, Hour, Day Window
}

// The three windows, RocketMQ's: samples every 10 s keeping 7 (the last
// minute), every 10 min keeping 7 (the last hour) and every hour keeping
// 25 (the last day).
const (
	minutePeriod  = 10 * time.Second
	minuteSamples = 7
	hourPeriod    = 10 * time.Minute
	hourSamples   = 7
	dayPeriod     = time.Hour
	daySamples    = 25
)

// idleLimit is how long an item may go without an Add before the hourly
// sampling drops it: by then its day window is flat, and dropping it keeps
// the tables bounded by the keys in use rather than every key ever seen.
const idleLimit = 25 * time.Hour

// level is one window's sampling schedule, shared by every item: the times
// of its newest samplings. An item keeps only its counters at those times,
// which is what makes an item small (about 1 KiB for all three windows of
// two counters).
type level struct {
	period time.Duration
	max    int
	times  []int64 // unix nanoseconds of the newest samplings, oldest first, at most max
}

func (l *level) record(now time.Time) {
	l.times = append(l.times, now.UnixNano())
	if len(l.times) > l.max {
		l.times = append(l.times[:0], l.times[len(l.times)-l.max:]...)
	}
}

// point is an item's counters at one sampling.
type point struct {
	value, size, calls int64
}

// ring is an item's points of one level, oldest first: n points in p
// starting at start. When zero is set the oldest is not a sampling but the
// zero point one period before the item's first sampling (RocketMQ counts
// what an item did before it was first sampled that way). The real points
// are those of the level's newest samplings.
type ring[A ~[minuteSamples + 1]point | ~[daySamples + 1]point] struct {
	p     A
	start uint8
	n     uint8
	zero  bool
}

func (r *ring[A]) at(i int) point { return r.p[(int(r.start)+i)%len(r.p)] }

// add appends x, preceded by the zero point when the ring is empty, and
// drops the oldest beyond max.
func (r *ring[A]) add(x point, max int) {
	if r.n == 0 {
		r.start, r.zero = 0, true
		r.p[0] = point{}
		r.n = 1
	}
	r.p[(int(r.start)+int(r.n))%len(r.p)] = x
	r.n++
	if int(r.n) > max {
		r.start = uint8((int(r.start) + 1) % len(r.p))
		r.n--
		r.zero = false
	}
}

// window is the change between the oldest and the newest point, the
// first counter (size false) or the second (size true), timed by l.
func (r *ring[A]) window(l *level, size bool) Window {
	if r.n < 2 {
		return Window{}
	}
	first, last := r.at(0), r.at(int(r.n)-1)
	real := int(r.n)
	if r.zero {
		real--
	}
	if real > len(l.times) {
		return Window{} // not possible while samplings and rings agree
	}
	lastAt := l.times[len(l.times)-1]
	firstAt := l.times[len(l.times)-real]
	if r.zero {
		firstAt -= int64(l.period)
	}
	w := Window{Sum: last.value - first.value}
	if size {
		w.Sum = last.size - first.size
	}
	if d := lastAt - firstAt; d > 0 {
		w.TPS = float64(w.Sum) * float64(time.Second) / float64(d)
	}
	if calls := last.calls - first.calls; calls > 0 {
		w.AvgPT = float64(w.Sum) / float64(calls)
	}
	return w
}

// item is the counters of one key of a table: a value (messages), a size
// (bytes; unused by tables that count one thing) and the number of calls
// that added to them, with their points in each window.
type item struct {
	value   atomic.Int64
	size    atomic.Int64
	calls   atomic.Int64
	lastAdd atomic.Int64 // unix nanoseconds of the sampling before the newest Add

	mu     sync.Mutex // guards the rings
	minute ring[[minuteSamples + 1]point]
	hour   ring[[minuteSamples + 1]point]
	day    ring[[daySamples + 1]point]
}

func (it *item) now() point {
	return point{value: it.value.Load(), size: it.size.Load(), calls: it.calls.Load()}
}

// table is the items of one or two statistics (RocketMQ's StatsItemSet),
// by key: a topic, "topic@group" or the cluster name. It is safe for
// concurrent use; Add on an existing key takes no lock.
type table struct {
	// ticked is the time of the newest Tick in unix nanoseconds, shared by
	// the tables of one Stats: Add stamps items with it rather than
	// reading the clock on every call (idleness is judged in hours).
	ticked *atomic.Int64
	items  sync.Map // string -> *item
}

// add adds value and size to key's item, creating it, and counts one call
// unless uncounted is set (RocketMQ counts no calls for the BROKER_*
// statistics, whose avgpt is therefore 0).
func (t *table) add(key string, value, size int64, uncounted bool) {
	now := t.ticked.Load()
	v, ok := t.items.Load(key)
	if !ok {
		// Stamped before it is visible: the hourly sampling must not take
		// a new item for one idle since 1970.
		fresh := new(item)
		fresh.lastAdd.Store(now)
		v, _ = t.items.LoadOrStore(key, fresh)
	}
	it := v.(*item)
	if it.lastAdd.Load() != now {
		it.lastAdd.Store(now)
	}
	it.value.Add(value)
	if size != 0 {
		it.size.Add(size)
	}
	if !uncounted {
		it.calls.Add(1)
	}
}

// windows is key's counter (the size when size is set) over the three
// windows, or false when the table has no such key.
func (t *table) windows(key string, size bool, levels *levels) (Windows, bool) {
	v, ok := t.items.Load(key)
	if !ok {
		return Windows{}, false
	}
	it := v.(*item)
	it.mu.Lock()
	defer it.mu.Unlock()
	return Windows{
		Minute: it.minute.window(&levels.minute, size),
		Hour:   it.hour.window(&levels.hour, size),
		Day:    it.day.window(&levels.day, size),
	}, true
}

// deleteKey drops key's item.
func (t *table) deleteKey(key string) { t.items.Delete(key) }

// deletePrefix drops the items whose key starts with prefix.
func (t *table) deletePrefix(prefix string) {
	t.deleteWhere(func(k string) bool { return strings.HasPrefix(k, prefix) })
}

// deleteSuffix drops the items whose key ends with suffix.
func (t *table) deleteSuffix(suffix string) {
	t.deleteWhere(func(k string) bool { return strings.HasSuffix(k, suffix) })
}

func (t *table) deleteWhere(drop func(key string) bool) {
	t.items.Range(func(k, _ any) bool {
		if drop(k.(string)) {
			t.items.Delete(k)
		}
		return true
	})
}

// levels are the three windows' schedules.
type levels struct {
	minute, hour, day level
}

// sampleMinute, sampleHour and sampleDay take one point of every item;
// sampleDay also drops the items idle for idleLimit.
func (t *table) sampleMinute() {
	t.each(func(it *item, p point) { it.minute.add(p, minuteSamples) })
}

func (t *table) sampleHour() {
	t.each(func(it *item, p point) { it.hour.add(p, hourSamples) })
}

func (t *table) sampleDay(now time.Time) {
	idle := func(it *item) bool { return now.Sub(time.Unix(0, it.lastAdd.Load())) >= idleLimit }
	t.items.Range(func(k, v any) bool {
		it := v.(*item)
		if idle(it) && t.items.CompareAndDelete(k, it) {
			if !idle(it) {
				// An Add came between the check and the delete: keep what
				// it counted (unless a new item took the key since).
				t.items.LoadOrStore(k, it)
			}
			return true
		}
		p := it.now()
		it.mu.Lock()
		it.day.add(p, daySamples)
		it.mu.Unlock()
		return true
	})
}

func (t *table) each(fn func(*item, point)) {
	t.items.Range(func(_, v any) bool {
		it := v.(*item)
		p := it.now()
		it.mu.Lock()
		fn(it, p)
		it.mu.Unlock()
		return true
	})
}
