// Package periodic runs background work at a fixed interval under a
// context: the loop of the broker's client and lock expiries, index WAL
// syncs, scheduler, timer and transaction checker. Loops that also wake on a
// signal (the CommitLog flusher, name-server registration, the index's
// compaction gate) or stop on a channel rather than a context (the name
// server's broker scan, CommitLog retention) keep their own select.
// Sleep is the pause of a retry loop that a stop ends at once.
package periodic

import (
	"context"
	"time"
)

// Run calls fn every interval until ctx ends, first one interval after it
// starts. fn runs on Run's goroutine, so a slow call delays the next one
// instead of overlapping it; Run returns once ctx has ended and no call
// is running.
func Run(ctx context.Context, every time.Duration, fn func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}

// RunVarying is Run with an interval that next gives anew before each
// wait (work paced by a setting that can change while it runs): it calls
// fn next() after it starts and then next() after each call ends, until
// ctx ends.
func RunVarying(ctx context.Context, next func() time.Duration, fn func(context.Context)) {
	for {
		t := time.NewTimer(next())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
			fn(ctx)
		}
	}
}

// RunDelayed calls fn first after the delay first, then every interval
// after each call ends, until ctx ends (RocketMQ's scheduleAtFixedDelay
// with an initial delay: a name-server lookup 10 s after start, then
// every 2 minutes).
func RunDelayed(ctx context.Context, first, every time.Duration, fn func(context.Context)) {
	next := first
	RunVarying(ctx, func() time.Duration {
		d := next
		next = every
		return d
	}, fn)
}

// Sleep waits d, or less when ctx ends first; it reports whether d ran
// out (false: ctx ended). The pause of a retry loop that a stop must
// not wait out.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
