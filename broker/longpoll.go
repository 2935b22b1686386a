package broker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
)

// pullHolds keeps long-polling requests (pull, and later pop) that found
// nothing, without a goroutine each: a held request is a notifier callback
// plus a timer. Whichever fires first hands the re-run to a small worker
// pool; the re-run answers the client. RocketMQ's PullRequestHoldService.
type pullHolds struct {
	b    *Broker
	jobs chan func()
	// wg counts the workers and the re-runs a burst sent to goroutines of
	// their own: stop waits for both.
	wg sync.WaitGroup
	// submitMu orders submit against stop: no re-run starts (nor is
	// counted in wg) once stop closed jobs.
	submitMu sync.Mutex
	stopped  atomic.Bool

	// woken counts the requests a dispatch re-ran (tests and benchmarks
	// read it: a dispatch their filter rejects must not count).
	woken atomic.Int64

	mu      sync.Mutex
	all     map[*heldRequest]struct{} // every request still held
	closing bool                      // set by releaseAll: nothing is held any more
}

// count returns how many requests are held.
func (h *pullHolds) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.all)
}

// holdWorkers re-run woken requests; holdQueue buffers wake-ups in bursts.
const (
	holdWorkers = 8
	holdQueue   = 1 << 16
)

func newPullHolds(b *Broker) *pullHolds {
	return &pullHolds{b: b, jobs: make(chan func(), holdQueue), all: map[*heldRequest]struct{}{}}
}

func (h *pullHolds) start() {
	for i := 0; i < holdWorkers; i++ {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			for job := range h.jobs {
				job()
			}
		}()
	}
}

// released reports whether releaseAll ran: nothing is held any more.
func (h *pullHolds) released() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closing
}

// releaseAll answers every held request now and holds no more (each re-runs and, finding
// nothing, answers PULL_NOT_FOUND), and waits until the answers are queued
// for sending. The broker calls it before it stops serving, so clients
// pull again at once instead of waiting for their request timeout (the Go
// client does not fail requests of a closed connection).
func (h *pullHolds) releaseAll() {
	var wg sync.WaitGroup
	for _, r := range h.snapshot(true) {
		wg.Add(1)
		if !r.fireIf(true, false, wg.Done) {
			wg.Done() // its timer or a dispatch got there first
		}
	}
	wg.Wait()
}

// wakeAll re-runs every held request now, as a dispatch on its queue
// would, and goes on holding new ones: a slave whose master came back
// sends its held consumers there (see onMasterOnline).
func (h *pullHolds) wakeAll() {
	for _, r := range h.snapshot(false) {
		r.fireIf(true, false, nil)
	}
}

// snapshot returns the requests held now, taken under the lock so the
// caller can fire them without it; closing also stops new holds.
func (h *pullHolds) snapshot(closing bool) []*heldRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	if closing {
		h.closing = true
	}
	held := make([]*heldRequest, 0, len(h.all))
	for r := range h.all {
		held = append(held, r)
	}
	return held
}

// stop stops accepting holds, runs what is queued and waits for the
// workers and the re-runs running on goroutines of their own: the stores
// they read close after.
func (h *pullHolds) stop() {
	h.submitMu.Lock()
	if h.stopped.Swap(true) {
		h.submitMu.Unlock()
		return
	}
	close(h.jobs)
	h.submitMu.Unlock()
	h.wg.Wait()
}

// submit queues a re-run without blocking the caller (the dispatcher's
// goroutine or a timer); in a burst beyond the queue it runs on its own
// goroutine, which stop waits for too. After stop a late wake-up is
// dropped.
func (h *pullHolds) submit(job func()) {
	h.submitMu.Lock()
	defer h.submitMu.Unlock()
	if h.stopped.Load() {
		return
	}
	select {
	case h.jobs <- job:
	default:
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			job()
		}()
	}
}

// heldMatch is the match a held request registers with the notifier:
// m, or nil (every dispatch wakes it) under wakeEveryHeld.
func (b *Broker) heldMatch(m func(kvindex.Arrival) bool) func(kvindex.Arrival) bool {
	if b.wakeEveryHeld {
		return nil
	}
	return m
}

// heldRequest is one suspended request.
type heldRequest struct {
	h      *pullHolds
	state  atomic.Bool // fired
	waiter atomic.Pointer[kvindex.Waiter]
	timer  atomic.Pointer[time.Timer]
	rerun  func()
}

// hold suspends a request on topic/queueID (kvindex.AnyQueue for any queue
// of the topic) for at most timeout. rerun is called once, on the pool,
// when a message match accepts is dispatched there (any message when
// match is nil) or the time is up. ready reports whether there is already
// something to read; it is checked after the registration, closing the
// race with a dispatch in between.
func (h *pullHolds) hold(topic string, queueID int32, timeout time.Duration, match func(kvindex.Arrival) bool, ready func() bool, rerun func()) {
	r := &heldRequest{h: h, rerun: rerun}
	h.mu.Lock()
	if h.closing {
		// Released already: answer now rather than hold until the
		// timeout past the broker's shutdown.
		h.mu.Unlock()
		r.state.Store(true)
		h.submit(rerun)
		return
	}
	h.all[r] = struct{}{}
	h.mu.Unlock()
	r.waiter.Store(h.b.notifier.WaitMatch(topic, queueID, match, func() { r.fireIf(false, true, nil) }))
	r.timer.Store(time.AfterFunc(timeout, func() { r.fire(true) }))
	if ready() {
		r.fire(true)
	}
	if r.state.Load() {
		// Fired while being set up: make sure nothing stays registered.
		r.waiter.Load().Cancel()
		r.timer.Load().Stop()
	}
}

// fire runs the request once. cancel is false when the notifier fired
// (the waiter is already removed, and its lock is held: Cancel would
// deadlock).
func (r *heldRequest) fire(cancel bool) {
	r.fireIf(cancel, false, nil)
}

// fireIf fires the request unless it already fired, reporting whether this
// call fired it; done, when set, runs after the re-run. byDispatch counts
// the re-run in woken (before it can answer).
func (r *heldRequest) fireIf(cancel, byDispatch bool, done func()) bool {
	if r.state.Swap(true) {
		return false
	}
	if byDispatch {
		r.h.woken.Add(1)
	}
	r.h.mu.Lock()
	delete(r.h.all, r)
	r.h.mu.Unlock()
	if w := r.waiter.Load(); cancel && w != nil {
		w.Cancel()
	}
	if t := r.timer.Load(); t != nil {
		t.Stop()
	}
	if done == nil {
		r.h.submit(r.rerun)
	} else {
		r.h.submit(func() { defer done(); r.rerun() })
	}
	return true
}
