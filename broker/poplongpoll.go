package broker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// rerunHeld answers a request long polling held, unless its connection
// closed meanwhile: nobody would read the answer, and a pop would take
// messages out of sight until their invisible time ran out (RocketMQ's
// PopLongPollingService drops a woken request whose channel is gone).
func rerunHeld(conn *remoting.Conn, req *remoting.Command, answer func() *remoting.Command) {
	conn.ServeHeldFunc(req, func() *remoting.Command {
		if conn.Closed() {
			return nil
		}
		return answer()
	})
}

// popHoldKey names a queue of held pops: RocketMQ's polling key
// topic@group@queueId (queueId -1 for pops of every queue).
type popHoldKey struct {
	topic, group string
	queueID      int32
}

// Outcomes of popHolds.hold.
const (
	holdOK      = iota // held: the rerun answers later
	holdFull           // POLLING_FULL
	holdTimeout        // POLLING_TIMEOUT (or not polling)
)

// popTimeoutSlack: a request due within this long is not held
// (RocketMQ's PopRequest.isTimeout).
const popTimeoutSlack = 50 * time.Millisecond

// popHolds keeps long-polling POP and NOTIFICATION requests without a
// goroutine each (RocketMQ's PopLongPollingService): a held request is a
// notifier callback per topic it waits on plus a timer; whichever fires
// first hands the rerun to the pull holds' worker pool. The rerun
// processes the request again from scratch, and may hold it again until
// its deadline.
type popHolds struct {
	b       *Broker
	mu      sync.Mutex
	byKey   map[popHoldKey]map[*popHeld]struct{}
	byTopic map[string]map[*popHeld]struct{}
	total   int
	closing bool // set by releaseAll: nothing is held any more
	// woken counts the requests a dispatch re-ran (tests and benchmarks
	// read it: a dispatch their filter rejects must not count).
	woken atomic.Int64
	// reruns counts the requests re-run for any reason (tests read it).
	reruns atomic.Int64
}

// popHeld is one held request.
type popHeld struct {
	h     *popHolds
	key   popHoldKey
	rerun func()
	// Guarded by h.mu.
	waiters []*kvindex.Waiter
	timer   *time.Timer
	fired   bool
}

func newPopHolds(b *Broker) *popHolds {
	return &popHolds{b: b, byKey: map[popHoldKey]map[*popHeld]struct{}{}, byTopic: map[string]map[*popHeld]struct{}{}}
}

// hold suspends a request until deadline (ms since the epoch) or a
// dispatch to one of topics (the key's queue of the first, any queue of
// the others). A dispatch to the first topic wakes it only when match
// accepts it (always when match is nil); to the others (pop-retry topics,
// read without a filter), always. It returns holdFull when
// maxPopPollingSize requests are held or the key already holds more than
// popPollingSize, holdTimeout when the deadline is (nearly) past. ready
// reports whether there is something to read already; it is checked after
// the registration, closing the race with a dispatch in between.
func (h *popHolds) hold(key popHoldKey, deadline int64, topics []string, match func(kvindex.Arrival) bool, ready func() bool, rerun func()) int {
	wait := time.Until(time.UnixMilli(deadline)) - popTimeoutSlack
	cfg := h.b.cfg
	h.mu.Lock()
	if h.total >= cfg.MaxPopPollingSize {
		h.mu.Unlock()
		return holdFull
	}
	if wait <= 0 || h.closing {
		h.mu.Unlock()
		return holdTimeout
	}
	set := h.byKey[key]
	if len(set) > cfg.PopPollingSize {
		h.mu.Unlock()
		return holdFull
	}
	r := &popHeld{h: h, key: key, rerun: rerun}
	if set == nil {
		set = map[*popHeld]struct{}{}
		h.byKey[key] = set
	}
	set[r] = struct{}{}
	tset := h.byTopic[key.topic]
	if tset == nil {
		tset = map[*popHeld]struct{}{}
		h.byTopic[key.topic] = tset
	}
	tset[r] = struct{}{}
	h.total++
	h.mu.Unlock()

	waiters := make([]*kvindex.Waiter, 0, len(topics))
	woken := func() { r.fireIf(true, nil) }
	for i, t := range topics {
		q, m := key.queueID, match
		if i > 0 {
			q, m = kvindex.AnyQueue, nil
		}
		if q < 0 {
			q = kvindex.AnyQueue
		}
		waiters = append(waiters, h.b.notifier.WaitMatch(t, q, m, woken))
	}
	timer := time.AfterFunc(wait, r.fire)
	h.mu.Lock()
	r.waiters, r.timer = waiters, timer
	fired := r.fired
	h.mu.Unlock()
	if fired {
		// Fired while being set up, before the job could see the
		// registrations: release them here (Cancel and Stop are
		// idempotent).
		r.release(waiters, timer)
	} else if ready() {
		r.fire()
	}
	return holdOK
}

// fire hands the rerun to the worker pool once. It may run on the
// dispatcher's goroutine inside the notifier's lock, so the other waiters
// are cancelled by the job, not here.
func (r *popHeld) fire() { r.fireIf(false, nil) }

// fireIf fires the request unless it already fired, reporting whether this
// call fired it; done, when set, runs after the re-run. byDispatch counts
// the re-run in woken (before it can answer).
func (r *popHeld) fireIf(byDispatch bool, done func()) bool {
	h := r.h
	h.mu.Lock()
	if r.fired {
		h.mu.Unlock()
		return false
	}
	r.fired = true
	h.reruns.Add(1)
	if byDispatch {
		h.woken.Add(1)
	}
	h.remove(r)
	h.mu.Unlock()
	h.b.holds.submit(func() {
		if done != nil {
			defer done()
		}
		h.mu.Lock()
		waiters, timer := r.waiters, r.timer
		h.mu.Unlock()
		r.release(waiters, timer)
		r.rerun()
	})
	return true
}

// releaseAll answers every held request now and holds no more (each
// re-runs once and answers what it finds: 210 or hasMsg=false when
// nothing), then waits until the answers are queued. The broker calls it
// before it stops serving, so POP clients do not wait for their timeouts.
func (h *popHolds) releaseAll() {
	h.mu.Lock()
	h.closing = true
	var held []*popHeld
	for _, set := range h.byKey {
		for r := range set {
			held = append(held, r)
		}
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range held {
		wg.Add(1)
		if !r.fireIf(false, wg.Done) {
			wg.Done()
		}
	}
	wg.Wait()
}

// release cancels a request's registrations.
func (r *popHeld) release(waiters []*kvindex.Waiter, timer *time.Timer) {
	for _, w := range waiters {
		w.Cancel()
	}
	if timer != nil {
		timer.Stop()
	}
}

// remove drops r from the tables; h.mu is held.
func (h *popHolds) remove(r *popHeld) {
	if set := h.byKey[r.key]; set != nil {
		delete(set, r)
		if len(set) == 0 {
			delete(h.byKey, r.key)
		}
	}
	if set := h.byTopic[r.key.topic]; set != nil {
		delete(set, r)
		if len(set) == 0 {
			delete(h.byTopic, r.key.topic)
		}
	}
	h.total--
}

// notifyGroup wakes the requests of group (every group's when group is
// empty) held on topic for queueID or for every queue (either negative):
// RocketMQ's notifyMessageArriving by the broker itself, keyed by topic,
// group and queue. The POP service's wakes are of one group (an orderly
// ack, the end of an orderly batch's lock, a revive, a queue the
// in-flight threshold releases, the end of the invisible time of what a
// slave handed out: pop.Config.OnQueueReady), and so is that of a pop
// that left messages behind: what it left is the group's backlog, which
// no other group's pop can take.
func (h *popHolds) notifyGroup(topic, group string, queueID int32) {
	h.mu.Lock()
	var wake []*popHeld
	for r := range h.byTopic[topic] {
		if (group == "" || r.key.group == group) && (r.key.queueID == queueID || r.key.queueID < 0 || queueID < 0) {
			wake = append(wake, r)
		}
	}
	h.mu.Unlock()
	for _, r := range wake {
		r.fire()
	}
}

// popArrivalMatch is the match of a POP held with sub (nil: every
// dispatch wakes it): sub's, or one of the new messages at a queue offset
// whose successor is a multiple of popLongPollingForceNotifyInterval
// (RocketMQ's force notify, which skips the filter so that a consumer
// whose filter rejects a long run of messages still moves its offset past
// them now and then, not only when its poll time is up).
func (b *Broker) popArrivalMatch(sub *subscription) func(kvindex.Arrival) bool {
	m := b.heldMatch(sub.arrivalMatch())
	if m == nil {
		return nil
	}
	every := b.current().PopLongPollingForceNotifyInterval
	if every <= 0 {
		return m
	}
	return func(a kvindex.Arrival) bool {
		// RocketMQ forces when (queue offset + 1) % every == 0 for a new
		// message: one of First+1 .. Next is a multiple of every.
		return a.Next/every > a.First/every || m(a)
	}
}

// count returns the requests held under key.
func (h *popHolds) count(key popHoldKey) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byKey[key])
}
