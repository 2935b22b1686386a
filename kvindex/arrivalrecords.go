package kvindex

import (
	"slices"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
)

// arrivalRecords lets the matches of a dispatch batch's Arrivals read the
// properties of the batch's new entries (Arrival.EachProperties): what a
// SQL92 selector needs to tell whether a held request would take one of
// them, as RocketMQ evaluates a held request's filter against each
// dispatched message's properties before it wakes the request. Nothing is
// collected while dispatching; the first match that asks for an entry
// reads its record back from the CommitLog (just written, so in the page
// cache), and the properties are kept for the other matches of the batch.
// The batch's entries are grouped by queue on the first ask. Only the
// dispatch goroutine uses it, during the batch's notifications.
type arrivalRecords struct {
	log     *commitlog.Log
	entries []cq.Dispatch
	touched map[qkey]int // queue of an entry: index into the batch's queues
	nqueues int
	grouped bool
	// order holds entry indexes queue by queue once grouped; queue q's
	// are order[start[q]:start[q+1]], in queue order. queueOf (each
	// entry's queue) and fill are group's scratch.
	order, start, queueOf, fill []int
	// props are the entries' properties once read (read[i]).
	props []string
	read  []bool
}

// begin makes the batch's entries available to the Arrivals about to be
// notified; end forgets them.
func (r *arrivalRecords) begin(log *commitlog.Log, entries []cq.Dispatch, touched map[qkey]int, nqueues int) {
	r.log, r.entries, r.touched, r.nqueues, r.grouped = log, entries, touched, nqueues, false
}

func (r *arrivalRecords) end() {
	r.entries, r.touched = nil, nil
	clear(r.props) // the strings of one batch are not kept into the next
}

// group computes order and start, a counting sort of the entries by queue
// (stable, so each queue's entries stay in queue order), and makes room
// for the properties read.
func (r *arrivalRecords) group() {
	n := len(r.entries)
	r.queueOf = resized(r.queueOf, n)
	r.start = resized(r.start, r.nqueues+1)
	clear(r.start)
	for i := range r.entries {
		q := r.touched[queueIDOf(r.entries[i].Topic, r.entries[i].QueueID)]
		r.queueOf[i] = q
		r.start[q+1]++
	}
	for q := range r.nqueues {
		r.start[q+1] += r.start[q]
	}
	r.order = resized(r.order, n)
	r.fill = append(r.fill[:0], r.start[:r.nqueues]...)
	for i, q := range r.queueOf {
		r.order[r.fill[q]] = i
		r.fill[q]++
	}
	r.props = resized(r.props, n)
	r.read = resized(r.read, n)
	clear(r.read)
	r.grouped = true
}

// resized returns s with length n, reusing its room (its contents are
// not kept).
func resized[T any](s []T, n int) []T { return slices.Grow(s[:0], n)[:n] }

// each calls yield with the properties of queue q's new entries in queue
// order until yield returns false. It reports false, having stopped, when
// a record cannot be read back.
func (r *arrivalRecords) each(q int, yield func(props string) bool) bool {
	if r.entries == nil {
		return false // outside the batch's notifications
	}
	if !r.grouped {
		r.group()
	}
	for _, i := range r.order[r.start[q]:r.start[q+1]] {
		if !r.read[i] {
			e := &r.entries[i]
			v, err := r.log.Read(e.PhyOffset, e.Size)
			if err != nil {
				return false
			}
			m, err := commitlog.Decode(v.Data) // Properties is a copy
			v.Release()
			if err != nil {
				return false
			}
			r.props[i], r.read[i] = m.Properties, true
		}
		if !yield(r.props[i]) {
			return true
		}
	}
	return true
}
