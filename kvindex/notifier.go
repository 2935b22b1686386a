package kvindex

import "sync"

// Notifier wakes long-polling readers (pull, pop) when the dispatcher
// indexes new entries for their queue. It holds only queues somebody is
// waiting on, so its size is bounded by the number of held requests.
//
// Use it as: w := n.Wait(topic, q); re-check the queue; if still empty,
// select on w.C() and a timer; then w.Cancel(). Registering before the
// re-check closes the race with a dispatch in between.
type Notifier struct {
	mu      sync.Mutex
	byQueue map[qkey]map[*Waiter]struct{}
	byTopic map[string]map[*Waiter]struct{}
	count   int
}

// Waiter is one registration with a Notifier.
type Waiter struct {
	n     *Notifier
	q     qkey
	any   bool
	ch    chan struct{}
	fn    func()
	fired bool
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
	return n.register(&Waiter{n: n, q: queueIDOf(topic, queueID), any: queueID == AnyQueue, fn: fn})
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
	n.count++
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
	n.count--
}

// Notify wakes every waiter of topic/queueID and of the whole topic.
func (n *Notifier) Notify(topic string, queueID int32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.byQueue) == 0 && len(n.byTopic) == 0 {
		return
	}
	q := queueIDOf(topic, queueID)
	if set := n.byQueue[q]; set != nil {
		for w := range set {
			n.fire(w)
		}
		delete(n.byQueue, q)
	}
	if set := n.byTopic[topic]; set != nil {
		for w := range set {
			n.fire(w)
		}
		delete(n.byTopic, topic)
	}
}

func (n *Notifier) fire(w *Waiter) {
	w.fired = true
	n.count--
	if w.fn != nil {
		w.fn()
		return
	}
	close(w.ch)
}

// Waiting returns the number of registered waiters.
func (n *Notifier) Waiting() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.count
}
