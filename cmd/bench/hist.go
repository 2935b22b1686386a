package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency range a Recorder tracks: 1 µs to 60 s with 3 significant digits
// (values outside are clamped to the range, so nothing is lost silently).
const (
	minTrackable = int64(time.Microsecond)
	maxTrackable = int64(time.Minute)
	sigFigs      = 3
)

// Recorder collects latencies into an HDR histogram. It is safe for
// concurrent use.
type Recorder struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{h: hdrhistogram.New(minTrackable, maxTrackable, sigFigs)}
}

// Record adds one latency, clamped to [1 µs, 60 s].
func (r *Recorder) Record(d time.Duration) {
	v := min(max(int64(d), minTrackable), maxTrackable)
	r.mu.Lock()
	_ = r.h.RecordValue(v) // in range by construction
	r.mu.Unlock()
}

// Reset forgets every recorded value.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.h.Reset()
	r.mu.Unlock()
}

// Merge adds every value of other.
func (r *Recorder) Merge(other *Recorder) {
	other.mu.Lock()
	c := other.h.Export()
	other.mu.Unlock()
	r.mu.Lock()
	r.h.Merge(hdrhistogram.Import(c))
	r.mu.Unlock()
}

// Summary returns the count and percentiles recorded so far.
func (r *Recorder) Summary() Latency {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.h.TotalCount() == 0 {
		return Latency{}
	}
	q := func(p float64) time.Duration { return time.Duration(r.h.ValueAtQuantile(p)) }
	return Latency{
		Count: r.h.TotalCount(),
		Mean:  time.Duration(r.h.Mean()),
		P50:   q(50),
		P90:   q(90),
		P99:   q(99),
		P999:  q(99.9),
		Max:   time.Duration(r.h.Max()),
	}
}

// Latency is a latency distribution summary.
type Latency struct {
	Count int64         `json:"count"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Max   time.Duration `json:"max_ns"`
}

// String formats the summary on one line, e.g.
// "p50 1.20 ms  p90 2.31 ms  p99 4.00 ms  p99.9 9.10 ms  max 12.0 ms".
func (l Latency) String() string {
	if l.Count == 0 {
		return "no samples"
	}
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  p99.9 %s  max %s",
		fmtDur(l.P50), fmtDur(l.P90), fmtDur(l.P99), fmtDur(l.P999), fmtDur(l.Max))
}

// fmtDur prints a duration with three significant digits in the unit that
// suits it: "850 ns", "12.3 µs", "1.20 ms", "2.50 s".
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%d ns", int64(d))
	case d < time.Millisecond:
		return sig3(float64(d)/float64(time.Microsecond)) + " µs"
	case d < time.Second:
		return sig3(float64(d)/float64(time.Millisecond)) + " ms"
	default:
		return sig3(d.Seconds()) + " s"
	}
}

// sig3 formats v (>= 0) with three significant digits.
func sig3(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
