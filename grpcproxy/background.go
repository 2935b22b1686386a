package grpcproxy

import (
	"context"
	"errors"
	"sync"
)

// errStopped is the error of background work asked for after Shutdown.
var errStopped = errors.New("grpcproxy: shut down")

// background owns the goroutines of the proxy's background work (handle
// renewals, route and group policy refreshes), which no caller waits
// for: they run with a context that stop cancels, and stop waits for
// them. Work asked for after stop is refused.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

func newBackground() *background {
	ctx, cancel := context.WithCancel(context.Background())
	return &background{ctx: ctx, cancel: cancel}
}

// enter counts one piece of work in, or reports false after stop.
func (b *background) enter() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return false
	}
	b.wg.Add(1)
	return true
}

// start runs f in a new goroutine with the background context; it
// reports false, without running f, after stop.
func (b *background) start(f func(ctx context.Context)) bool {
	if !b.enter() {
		return false
	}
	go func() {
		defer b.wg.Done()
		f(b.ctx)
	}()
	return true
}

// do runs f in the calling goroutine with the background context,
// counted as background work (for work run by a goroutine the proxy does
// not start itself, such as a singleflight call's); after stop it
// returns errStopped without running f.
func (b *background) do(f func(ctx context.Context) (any, error)) (any, error) {
	if !b.enter() {
		return nil, errStopped
	}
	defer b.wg.Done()
	return f(b.ctx)
}

// stop refuses later work, cancels the running work's context and waits
// for it to end.
func (b *background) stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
}
