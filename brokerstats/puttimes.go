package brokerstats

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Put and read latencies (RocketMQ's StoreStatsService).
//
// Every put is timed from the store's taking it to the end of the waits it
// does (the group commit under SYNC_FLUSH, the slaves under SYNC_MASTER),
// in whole milliseconds as RocketMQ's clock gives them, and counted twice:
// in one of the 13 buckets GET_BROKER_RUNTIME_INFO reports as
// putMessageDistributeTime, and in one of 76 finer buckets from which
// putLatency99 and putLatency999 are read:
//
//	coarse: <=0 | <10 | <50 | <100 | <200 | <500 | <1000 | <2000 | <3000 | <4000 | <5000 | <10000 | more   (ms)
//	fine:   1, 2, ... 20 | 22, 24, ... 50 | 55, ... 100 | 110, ... 200 | 250, ... 500 | 600, ... 1000 |
//	        2000, ... 10000 | unbounded    (a put counts in the first bound at or above its time)
//
// Both sets are swapped for empty ones every minute from the start; the
// runtime info reports the minute that ended last (before the first has
// ended, the distribution is all zeros and the percentiles 0.00: RocketMQ
// then writes "null" for the distribution). The maxima of a put and of a
// read are kept since the start.

// coarseBuckets are the upper bounds (exclusive, in ms) of the coarse
// buckets after the first ("<= 0"); a time at or past the last is in the
// final bucket.
var coarseBuckets = [...]int64{10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000}

// coarseNames are RocketMQ's names of the coarse buckets
// (PUT_MESSAGE_ENTIRE_TIME_MAX_DESC).
var coarseNames = [...]string{"[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]",
	"[500ms~1s]", "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]"}

// fineBounds are the inclusive upper bounds of the fine buckets, the last
// unbounded (RocketMQ's PUT_MESSAGE_ENTIRE_TIME_BUCKETS: steps of 1 ms 20
// times, 2 ms 15 times, 5 ms 10 times, 10 ms 10 times, 50 ms 6 times,
// 100 ms 5 times, 1 s 9 times).
var fineBounds = func() [76]int64 {
	var out [76]int64
	i, at := 0, int64(0)
	for _, step := range [...]struct{ width, times int64 }{{1, 20}, {2, 15}, {5, 10}, {10, 10}, {50, 6}, {100, 5}, {1000, 9}} {
		for range step.times {
			at += step.width
			out[i] = at
			i++
		}
	}
	out[i] = math.MaxInt64
	return out
}()

// putMinute is the put counts of one minute.
type putMinute struct {
	coarse [len(coarseNames)]atomic.Int64
	fine   [len(fineBounds)]atomic.Int64
}

// add counts one put of ms milliseconds.
func (m *putMinute) add(ms int64) {
	c := 0
	if ms > 0 {
		c = 1
		for c < len(coarseNames)-1 && ms >= coarseBuckets[c-1] {
			c++
		}
	}
	m.coarse[c].Add(1)
	f := 0
	for fineBounds[f] < ms {
		f++
	}
	m.fine[f].Add(1)
}

// percentile is RocketMQ's findPutMessageEntireTimePX: the position
// total*px (truncated) among the minute's puts, placed by linear
// interpolation inside the fine bucket it falls in.
func (m *putMinute) percentile(px float64) float64 {
	var total int64
	for i := range m.fine {
		total += m.fine[i].Load()
	}
	at := int64(float64(total) * px)
	var passed int64
	for i := range m.fine {
		n := m.fine[i].Load()
		if at > passed+n {
			passed += n
			continue
		}
		if n == 0 {
			if i == 0 {
				return 0
			}
			return float64(fineBounds[i-1])
		}
		lower := int64(0)
		if i > 0 {
			lower = fineBounds[i-1]
		}
		return float64(lower) + float64(fineBounds[i]-lower)*float64(at-passed)/float64(n)
	}
	return 0
}

// putTimes is the put and read latencies.
type putTimes struct {
	current atomic.Pointer[putMinute]
	last    atomic.Pointer[putMinute] // nil until the first minute ended
	// nextSwap is when current becomes last; guarded by Stats.mu.
	nextSwap time.Time

	putMax, getMax atomic.Int64 // ms
	failed         atomic.Int64
}

// putMinutePeriod is how long a distribution counts (RocketMQ's
// printTPSInterval).
const putMinutePeriod = time.Minute

// PutTook counts a put that took d, from the store's taking it to the end
// of its waits; failed says the store refused it (RocketMQ's
// putMessageFailedTimes: not a flush or slave timeout, which store it).
func (s *Stats) PutTook(d time.Duration, failed bool) {
	ms := d.Milliseconds()
	s.putTimes.current.Load().add(ms)
	raiseTo(&s.putTimes.putMax, ms)
	if failed {
		s.putTimes.failed.Add(1)
	}
}

// GetTook records a read of the store that began at began and ends now
// (the slowest is getMessageEntireTimeMax).
func (s *Stats) GetTook(began time.Time) {
	raiseTo(&s.putTimes.getMax, time.Since(began).Milliseconds())
}

// raiseTo raises max to v when v is larger (a load, and a compare-and-swap
// only for a new maximum).
func raiseTo(max *atomic.Int64, v int64) {
	for {
		old := max.Load()
		if v <= old || max.CompareAndSwap(old, v) {
			return
		}
	}
}

// tickPutTimes starts a new minute of put counts when one is due at now;
// the caller holds s.mu.
func (s *Stats) tickPutTimes(now time.Time) {
	if s.putTimes.nextSwap.IsZero() {
		s.putTimes.nextSwap = now.Add(putMinutePeriod)
		return
	}
	if now.Before(s.putTimes.nextSwap) {
		return
	}
	s.putTimes.last.Store(s.putTimes.current.Swap(new(putMinute)))
	s.putTimes.nextSwap = nextSampling(s.putTimes.nextSwap, now, putMinutePeriod)
}

// putRuntime adds the latency keys of GET_BROKER_RUNTIME_INFO to table.
func (s *Stats) putRuntime(table map[string]string) {
	last := s.putTimes.last.Load()
	if last == nil {
		last = new(putMinute)
	}
	var dist strings.Builder
	for i, name := range coarseNames {
		fmt.Fprintf(&dist, "%s:%d ", name, last.coarse[i].Load())
	}
	table["putMessageDistributeTime"] = dist.String()
	table["putLatency99"] = strconv.FormatFloat(last.percentile(0.99), 'f', 2, 64)
	table["putLatency999"] = strconv.FormatFloat(last.percentile(0.999), 'f', 2, 64)
	table["putMessageEntireTimeMax"] = strconv.FormatInt(s.putTimes.putMax.Load(), 10)
	table["getMessageEntireTimeMax"] = strconv.FormatInt(s.putTimes.getMax.Load(), 10)
	table["putMessageFailedTimes"] = strconv.FormatInt(s.putTimes.failed.Load(), 10)
}
