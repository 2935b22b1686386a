// Package periodic runs background work at a fixed interval, the loop the
// broker's services (expiries, the scheduler, the timer, the transaction
// checker, WAL syncs) would otherwise each write out.
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
