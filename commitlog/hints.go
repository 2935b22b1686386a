package commitlog

import (
	"sort"
	"sync"
	"sync/atomic"
)

// Record starts cannot be found by reading backwards: a record says how
// long it is, not where the one before it began. RecordStart walks forward
// from a known start, which without hints is the segment's first byte: up
// to a whole segment (1 GiB by default) read from disk when the tail is no
// longer cached. boundaryHints keeps one record start every hintSpacing
// bytes of the records recovery scanned and a replica received, so the
// walk covers at most hintSpacing bytes and a record.
const (
	hintSpacing = 16 << 10
	// maxHints bounds the hints to the last 128 MiB of records.
	maxHints = 8192
)

// boundaryHints is a sparse, increasing list of record starts.
type boundaryHints struct {
	// next is where the next hint may go (the last one plus hintSpacing):
	// note's lock-free test for the many starts it skips.
	next atomic.Int64
	mu   sync.Mutex
	offs []int64
}

// note records off, the start of a record, when it lies at least
// hintSpacing past the last hint. Starts must be noted in log order.
func (h *boundaryHints) note(off int64) {
	if off < h.next.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.offs); n > 0 && off < h.offs[n-1]+hintSpacing {
		return
	}
	h.next.Store(off + hintSpacing)
	if len(h.offs) == maxHints {
		h.offs = append(h.offs[:0], h.offs[maxHints/2:]...)
	}
	h.offs = append(h.offs, off)
}

// reset forgets every hint: recovery scans again from an earlier segment
// and may end before some of them.
func (h *boundaryHints) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.offs = h.offs[:0]
	h.next.Store(0)
}

// before returns the greatest hint at or below off.
func (h *boundaryHints) before(off int64) (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := sort.Search(len(h.offs), func(i int) bool { return h.offs[i] > off })
	if i == 0 {
		return 0, false
	}
	return h.offs[i-1], true
}
