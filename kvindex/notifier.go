package kvindex

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Notifier wakes long-polling readers (pull, pop) when the dispatcher
// indexes new entries for their queue. It holds only queues somebody is
// waiting on, so its size is bounded by the number of held requests.
//
// Use it as: w := n.Wait(topic, q); re-check the queue; if still empty,
// select on w.C() and a timer; then w.Cancel(). Registering before the
// re-check closes the race with a dispatch in between.
//
// A waiter may carry a match (WaitMatch): a dispatch wakes it only when
// the match accepts the Arrival, which tells the tag codes of the new
// entries; the others stay registered. That is RocketMQ's check of a held
// request's MessageFilter against the dispatched tagsCode before it is
// woken, so a consumer group filtering by tag is not re-run for every
// message of the other tags of its topic.
type Notifier struct {
	mu      sync.Mutex
	byQueue map[qkey]map[*Waiter]struct{}
	byTopic map[string]map[*Waiter]struct{}
	// count is the number of registered waiters; written under mu, read
	// without it by Idle.
	count atomic.Int64
}

// Waiter is one registration with a Notifier.
type Waiter struct {
	n     *Notifier
	q     qkey
	any   bool
	ch    chan struct{}
	fn    func()
	match func(Arrival) bool
	fired bool
}

// Arrival is what one dispatch brought to a queue: its entries from
// queue offset First up to Next (exclusive), and their tag codes.
type Arrival struct {
	Topic       string
	QueueID     int32
	First, Next int64
	// Codes are the ConsumeQueue tag codes of the new entries, each once,
	// in no particular order. Nil means unknown (Notify: a wake that is
	// no dispatch): every waiter is woken then, whatever its match.
	Codes []int64
	// records and queue give EachProperties the new entries (nil records:
	// not known).
	records *arrivalRecords
	queue   int
}

// EachProperties calls yield with the properties (RocketMQ's
// name\x01value\x02 string) of each new entry, in queue order, until yield
// returns false. It reads the records back from the CommitLog, so only a
// match that needs more than the tag codes calls it (a SQL92 selector).
// It reports false when it cannot tell the properties (an Arrival of
// Notify, or a record that could not be read), having stopped: the match
// must then accept, as with an Arrival without Codes. Only a match may
// call it, during its call.
func (a Arrival) EachProperties(yield func(props string) bool) bool {
	if a.records == nil {
		return false
	}
	return a.records.each(a.queue, yield)
}

// AnyQueue registers a wait on every queue of a topic.
const AnyQueue int32 = -1

// NewNotifier returns an empty notifier.
func NewNotifier() *Notifier {
	return &Notifier{byQueue: map[qkey]map[*Waiter]struct{}{}, byTopic: map[string]map[*Waiter]struct{}{}}
}

// Wait registers interest in topic/queueID (AnyQueue for all queues of the
// topic). The returned waiter's channel is closed on the next dispatch of
// an entry there.
func (n *Notifier) Wait(topic string, queueID int32) *Waiter {
	return n.register(&Waiter{n: n, q: queueIDOf(topic, queueID), any: queueID == AnyQueue, ch: make(chan struct{})})
}

// WaitFunc registers fn to be called on the next dispatch to topic/queueID
// (AnyQueue for all queues). fn runs on the dispatcher's goroutine with the
// notifier locked: it must return at once and must not call the
// notifier (hand the work to another goroutine). A held request costs no
// goroutine this way. C must not be used on such a waiter.
func (n *Notifier) WaitFunc(topic string, queueID int32, fn func()) *Waiter {
	return n.WaitMatch(topic, queueID, nil, fn)
}

// WaitMatch is WaitFunc for the first dispatch whose Arrival match
// accepts (any dispatch when match is nil, and any Arrival without Codes).
// match runs like fn, on the dispatcher's goroutine with the notifier
// locked, once per dispatch to the queue while the waiter is registered:
// it must be cheap (a lookup of a few codes, or a selector evaluated over
// EachProperties), must not block and must not keep the Arrival's Codes,
// which the dispatcher reuses.
func (n *Notifier) WaitMatch(topic string, queueID int32, match func(Arrival) bool, fn func()) *Waiter {
	return n.register(&Waiter{n: n, q: queueIDOf(topic, queueID), any: queueID == AnyQueue, fn: fn, match: match})
}

func (n *Notifier) register(w *Waiter) *Waiter {
	topic := w.q.topic
	n.mu.Lock()
	defer n.mu.Unlock()
	if w.any {
		set := n.byTopic[topic]
		if set == nil {
			set = map[*Waiter]struct{}{}
			n.byTopic[topic] = set
		}
		set[w] = struct{}{}
	} else {
		set := n.byQueue[w.q]
		if set == nil {
			set = map[*Waiter]struct{}{}
			n.byQueue[w.q] = set
		}
		set[w] = struct{}{}
	}
	n.count.Add(1)
	return w
}

// C returns the channel closed when the wait is over.
func (w *Waiter) C() <-chan struct{} { return w.ch }

// Cancel removes the registration; safe after the channel fired and more
// than once.
func (w *Waiter) Cancel() {
	n := w.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if w.fired {
		return
	}
	w.fired = true
	if w.any {
		if set := n.byTopic[w.q.topic]; set != nil {
			delete(set, w)
			if len(set) == 0 {
				delete(n.byTopic, w.q.topic)
			}
		}
	} else if set := n.byQueue[w.q]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(n.byQueue, w.q)
		}
	}
	n.count.Add(-1)
}

// Notify wakes every waiter of topic/queueID and of the whole topic,
// whatever their matches (an Arrival without Codes).
func (n *Notifier) Notify(topic string, queueID int32) {
	n.NotifyArrival(Arrival{Topic: topic, QueueID: queueID})
}

// NotifyArrival wakes the waiters of a.Topic/a.QueueID and of the whole
// topic that a accepts. It may reorder a.Codes (it drops repeats before
// the first match runs). With nothing registered it returns at once.
func (n *Notifier) NotifyArrival(a Arrival) {
	if n.Idle() {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	q := queueIDOf(a.Topic, a.QueueID)
	compacted := false
	wake := func(set map[*Waiter]struct{}) int {
		for w := range set {
			if w.match != nil && a.Codes != nil {
				if !compacted {
					// Sorted once per dispatch, and only when somebody
					// filters: matches then see each code once.
					slices.Sort(a.Codes)
					a.Codes = slices.Compact(a.Codes)
					compacted = true
				}
				if !w.match(a) {
					continue
				}
			}
			delete(set, w)
			n.fire(w)
		}
		return len(set)
	}
	if set := n.byQueue[q]; set != nil && wake(set) == 0 {
		delete(n.byQueue, q)
	}
	if set := n.byTopic[a.Topic]; set != nil && wake(set) == 0 {
		delete(n.byTopic, a.Topic)
	}
}

func (n *Notifier) fire(w *Waiter) {
	w.fired = true
	n.count.Add(-1)
	if w.fn != nil {
		w.fn()
		return
	}
	close(w.ch)
}

// Waiting returns the number of registered waiters.
func (n *Notifier) Waiting() int { return int(n.count.Load()) }

// Idle reports whether nothing is registered: the dispatcher then neither
// collects tag codes nor takes the notifier's lock.
func (n *Notifier) Idle() bool { return n.count.Load() == 0 }
