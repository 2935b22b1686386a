package broker

import (
	"context"
	"sync"
	"time"

	"github.com/rocketkv/rocketkv/internal/periodic"
)

// Pulls held back for reading cold data (RocketMQ 5's
// ColdDataPullRequestHoldService). A pull consumer's pull that a limited
// group starts on a cold message is not answered at once: it waits in
// coldPullHolds until it has been held coldHoldFor and a scan finds it,
// and is then run again, not to be held a second time and for one message
// only. A scan runs every coldHoldScanEvery under
// coldDataFlowControlEnable (coldHoldScanIdle without), so a pull waits
// between coldHoldFor and coldHoldFor+coldHoldScanEvery.

const (
	coldHoldFor       = 3 * time.Second
	coldHoldScanEvery = 5 * time.Second
	coldHoldScanIdle  = 20 * time.Second
	// coldHoldMax is how many pulls are held at once (RocketMQ's queue
	// of 10,000). RocketMQ drops a pull that finds it full unanswered;
	// this broker answers it SYSTEM_BUSY.
	coldHoldMax = 10_000
)

// heldColdPull is one held pull: when it was held and how to run it
// again.
type heldColdPull struct {
	since time.Time
	rerun func()
}

// coldPullHolds is the queue of held cold pulls. Its scan loop (run) is
// owned by the broker's background group; release runs every held pull
// at once and refuses new ones, for the shutdown.
type coldPullHolds struct {
	enabled func() bool
	now     func() time.Time
	// period, when positive, replaces coldHoldScanEvery and
	// coldHoldScanIdle.
	period time.Duration

	mu       sync.Mutex
	held     []heldColdPull // oldest first
	released bool
}

func newColdPullHolds(enabled func() bool) *coldPullHolds {
	return &coldPullHolds{enabled: enabled, now: time.Now}
}

// hold queues rerun; false when the queue is full or released (the caller
// answers the pull itself).
func (h *coldPullHolds) hold(rerun func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released || len(h.held) >= coldHoldMax {
		return false
	}
	h.held = append(h.held, heldColdPull{since: h.now(), rerun: rerun})
	return true
}

// run scans the held pulls until ctx ends.
func (h *coldPullHolds) run(ctx context.Context) {
	periodic.RunVarying(ctx, func() time.Duration {
		switch {
		case h.period > 0:
			return h.period
		case h.enabled():
			return coldHoldScanEvery
		}
		return coldHoldScanIdle
	}, func(context.Context) { h.scan() })
	h.release()
}

// scan runs again the pulls held coldHoldFor or longer.
func (h *coldPullHolds) scan() {
	now := h.now()
	h.mu.Lock()
	var due []heldColdPull
	kept := h.held[:0]
	for _, p := range h.held {
		if now.Sub(p.since) >= coldHoldFor {
			due = append(due, p)
		} else {
			kept = append(kept, p)
		}
	}
	clear(h.held[len(kept):])
	h.held = kept
	h.mu.Unlock()
	for _, p := range due {
		p.rerun()
	}
}

// release runs every held pull again now and holds no more.
func (h *coldPullHolds) release() {
	h.mu.Lock()
	all := h.held
	h.held, h.released = nil, true
	h.mu.Unlock()
	for _, p := range all {
		p.rerun()
	}
}

// size returns how many pulls are held.
func (h *coldPullHolds) size() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}
