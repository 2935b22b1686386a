package testutil

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ThreadCPU reads the CPU time (user and system) the calling OS thread
// has used. A benchmark that compares settings on a machine others load
// measures each block of work with it as well as with the wall clock: a
// thread that waits for the CPU accrues wall time, not CPU time. The
// caller must hold its thread (runtime.LockOSThread, with a deferred
// runtime.UnlockOSThread), or two readings may be of different threads.
func ThreadCPU(tb testing.TB) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		tb.Fatalf("read the thread's CPU time: %v", err)
	}
	return time.Duration(ts.Nano())
}

// ProcessCPU reads the CPU time (user and system) every thread of the
// process has used. It measures a block of work that runs on goroutines
// besides the caller's (ThreadCPU sees only the caller's thread), at the
// price of counting whatever else the process does meanwhile (a
// database's background work, the garbage collector); a benchmark that
// compares settings in turn spreads that over the settings alike.
func ProcessCPU(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("read the process's CPU time: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BlockClock sums the wall and thread CPU time (ThreadCPU) of the blocks
// of work of one setting of a benchmark that compares settings in turn.
// The caller holds its OS thread from Start to Stop.
type BlockClock struct {
	// Wall and CPU are the sums of the blocks measured so far.
	Wall, CPU time.Duration
	// Process measures CPU with ProcessCPU instead of ThreadCPU, for
	// blocks whose work runs on other goroutines too (the caller then
	// need not hold its thread).
	Process bool
	wall0   time.Time
	cpu0    time.Duration
}

// cpu reads the clock's CPU time.
func (c *BlockClock) cpu(tb testing.TB) time.Duration {
	if c.Process {
		return ProcessCPU(tb)
	}
	return ThreadCPU(tb)
}

// Start starts a block.
func (c *BlockClock) Start(tb testing.TB) {
	c.wall0, c.cpu0 = time.Now(), c.cpu(tb)
}

// Stop ends the block Start started and adds it to the sums.
func (c *BlockClock) Stop(tb testing.TB) {
	c.CPU += c.cpu(tb) - c.cpu0
	c.Wall += time.Since(c.wall0)
}

// ReportPair reports, of a setting next against its baseline base, the
// mean wall and CPU time of one of ops operations as base-unit,
// next-unit, base-cpu-unit and next-cpu-unit, and the ratios next/base
// (wall) and cpu-next/base.
func ReportPair(b *testing.B, unit string, ops float64, baseName string, base *BlockClock, nextName string, next *BlockClock) {
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / ops }
	b.ReportMetric(per(base.Wall), baseName+"-"+unit)
	b.ReportMetric(per(next.Wall), nextName+"-"+unit)
	b.ReportMetric(per(base.CPU), baseName+"-cpu-"+unit)
	b.ReportMetric(per(next.CPU), nextName+"-cpu-"+unit)
	b.ReportMetric(float64(next.Wall)/float64(base.Wall), nextName+"/"+baseName)
	b.ReportMetric(float64(next.CPU)/float64(base.CPU), "cpu-"+nextName+"/"+baseName)
}
