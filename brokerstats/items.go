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

// sample is the cumulative state of a counter at one moment.
type sample struct {
	at    time.Time
	value int64
	calls int64
}

// series holds the newest samples of a counter, up to max of them. The
// first sample is preceded by a zero sample one period earlier, so a
// counter seen for the first time reports what it did since then, as
// RocketMQ's StatsItem does.
type series struct {
	period time.Duration
	max    int
	s      []sample
}

func (r *series) add(x sample) {
	if len(r.s) == 0 {
		r.s = append(r.s, sample{at: x.at.Add(-r.period)})
	}
	r.s = append(r.s, x)
	if len(r.s) > r.max {
		r.s = append(r.s[:0], r.s[len(r.s)-r.max:]...)
	}
}

// window is the change between the oldest and the newest sample.
func (r *series) window() Window {
	if len(r.s) == 0 {
		return Window{}
	}
	first, last := r.s[0], r.s[len(r.s)-1]
	w := Window{Sum: last.value - first.value}
	if d := last.at.Sub(first.at); d > 0 {
		w.TPS = float64(w.Sum) * float64(time.Second) / float64(d)
	}
	if calls := last.calls - first.calls; calls > 0 {
		w.AvgPT = float64(w.Sum) / float64(calls)
	}
	return w
}

// The three windows of an item, RocketMQ's: samples every 10 s keeping 7
// (the last minute), every 10 min keeping 7 (the last hour) and every hour
// keeping 25 (the last day).
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
// the sets bounded by the keys in use rather than every key ever seen.
const idleLimit = 25 * time.Hour

// Item is one counter of a Set: a value and the number of calls that
// added to it, with its minute, hour and day windows.
type Item struct {
	value   atomic.Int64
	calls   atomic.Int64
	lastAdd atomic.Int64 // unix nanoseconds of the newest Add

	mu     sync.Mutex // guards the series
	minute series
	hour   series
	day    series
}

func newItem() *Item {
	return &Item{
		minute: series{period: minutePeriod, max: minuteSamples},
		hour:   series{period: hourPeriod, max: hourSamples},
		day:    series{period: dayPeriod, max: daySamples},
	}
}

// Minute is what the item did over the last minute (as of the last
// 10-second sampling).
func (it *Item) Minute() Window { return it.window(&it.minute) }

// Hour is what the item did over the last hour (as of the last 10-minute
// sampling).
func (it *Item) Hour() Window { return it.window(&it.hour) }

// Day is what the item did over the last day (as of the last hourly
// sampling).
func (it *Item) Day() Window { return it.window(&it.day) }

func (it *Item) window(r *series) Window {
	it.mu.Lock()
	defer it.mu.Unlock()
	return r.window()
}

func (it *Item) sample(r *series, now time.Time) {
	x := sample{at: now, value: it.value.Load(), calls: it.calls.Load()}
	it.mu.Lock()
	r.add(x)
	it.mu.Unlock()
}

// Set is the items of one statistic (RocketMQ's StatsItemSet), by key:
// a topic, "topic@group" or the cluster name. It is safe for concurrent
// use; Add on an existing key takes no lock.
type Set struct {
	name string
	// ticked is the time of the newest Tick in unix nanoseconds, shared by
	// the sets of one Stats: Add stamps items with it rather than reading
	// the clock on every call (idleness is judged in hours).
	ticked *atomic.Int64
	items  sync.Map // string -> *Item
}

// Name is the statistic's name (TOPIC_PUT_NUMS, ...).
func (s *Set) Name() string { return s.name }

// Add adds value, counted as calls calls, to key's item, creating it.
func (s *Set) Add(key string, value, calls int64) {
	v, ok := s.items.Load(key)
	if !ok {
		v, _ = s.items.LoadOrStore(key, newItem())
	}
	it := v.(*Item)
	it.value.Add(value)
	it.calls.Add(calls)
	if t := s.ticked.Load(); it.lastAdd.Load() != t {
		it.lastAdd.Store(t)
	}
}

// Item returns key's item, or false when nothing was added to it (or it
// was dropped, see Delete and idleLimit).
func (s *Set) Item(key string) (*Item, bool) {
	v, ok := s.items.Load(key)
	if !ok {
		return nil, false
	}
	return v.(*Item), true
}

// Len is the number of items.
func (s *Set) Len() int {
	n := 0
	s.items.Range(func(any, any) bool { n++; return true })
	return n
}

// Delete drops key's item.
func (s *Set) Delete(key string) { s.items.Delete(key) }

// DeletePrefix drops the items whose key starts with prefix.
func (s *Set) DeletePrefix(prefix string) {
	s.items.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), prefix) {
			s.items.Delete(k)
		}
		return true
	})
}

// sampleMinute, sampleHour and sampleDay take one sample of every item.
func (s *Set) sampleMinute(now time.Time) {
	s.each(func(it *Item) { it.sample(&it.minute, now) })
}

func (s *Set) sampleHour(now time.Time) {
	s.each(func(it *Item) { it.sample(&it.hour, now) })
}

// sampleDay samples every item and drops those idle for idleLimit.
func (s *Set) sampleDay(now time.Time) {
	s.items.Range(func(k, v any) bool {
		it := v.(*Item)
		if now.Sub(time.Unix(0, it.lastAdd.Load())) >= idleLimit {
			s.items.Delete(k)
			return true
		}
		it.sample(&it.day, now)
		return true
	})
}

func (s *Set) each(fn func(*Item)) {
	s.items.Range(func(_, v any) bool {
		fn(v.(*Item))
		return true
	})
}
