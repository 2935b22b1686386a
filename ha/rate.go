package ha

import (
	"sync"
	"time"
)

// Rate measures bytes per second over whole one-second windows, as
// RocketMQ's FlowMonitor reports transferredByteInSecond. The zero value
// is ready; it is safe for concurrent use. Both HA protocols count their
// transfers with it.
type Rate struct {
	mu    sync.Mutex
	start time.Time // current window's start
	cur   int64     // bytes in the current window
	last  int64     // bytes in the last complete window
}

// Add counts n bytes now.
func (r *Rate) Add(n int) { r.addAt(time.Now(), n) }

// PerSecond returns the bytes of the last complete second (0 after an
// idle one).
func (r *Rate) PerSecond() int64 { return r.perSecondAt(time.Now()) }

func (r *Rate) addAt(now time.Time, n int) {
	r.mu.Lock()
	r.roll(now)
	r.cur += int64(n)
	r.mu.Unlock()
}

func (r *Rate) perSecondAt(now time.Time) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roll(now)
	return r.last
}

// budgetAt returns how many bytes may still go in the current second at
// now under limit bytes per second, and when that is none, how long until
// the next second starts (RocketMQ's FlowMonitor.canTransferMaxByteNum).
func (r *Rate) budgetAt(now time.Time, limit int64) (int64, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roll(now)
	if left := limit - r.cur; left > 0 {
		return left, 0
	}
	return 0, max(r.start.Add(time.Second).Sub(now), time.Millisecond)
}

// roll closes the windows that ended before now. Caller holds mu.
func (r *Rate) roll(now time.Time) {
	if r.start.IsZero() {
		r.start = now
		return
	}
	switch d := now.Sub(r.start); {
	case d < time.Second:
	case d < 2*time.Second:
		r.last, r.cur = r.cur, 0
		r.start = r.start.Add(time.Second)
	default:
		r.last, r.cur = 0, 0
		r.start = now
	}
}
