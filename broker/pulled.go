package broker

import (
	"maps"
	"sync"
)

// groupQueue names one queue of a topic as a consumer group reads it.
type groupQueue struct {
	group, topic string
	queueID      int32
}

// pullPositions is RocketMQ's pull offset table (ConsumerOffsetManager's
// pullOffsetTable): the nextBeginOffset of the last pull answered on each
// group's queue. GET_CONSUME_STATS answers it as a queue's pullOffset
// (mqadmin consumerProgress prints pullOffset - consumerOffset as the
// queue's messages in flight), and the consumer gauges read it at a
// scrape: the messages between the committed offset and it are in
// flight, those past it ready. It lives in memory, as RocketMQ's does, so
// after a restart both start from the committed offsets. The first open
// of a RocketMQ store does not seed it: RocketMQ's starts empty too (its
// pull offsets are on disk only under config v2, and read back only for
// light message queues; the import makes those pop positions, which
// outlive a restart where an entry here would not). A nil table ignores
// every call.
//
// As RocketMQ's, it holds an entry per queue pulled by a group since the
// start, until the group's offsets or the topic are deleted. While the
// lag metrics are on it is also pruned at each computation of the gauges
// (prune): a queue whose pull position is not past the committed offset,
// or without a committed offset at all, says nothing the committed
// offsets do not, so what stays are the queues with messages in flight.
type pullPositions struct {
	mu   sync.Mutex
	next map[groupQueue]int64
}

func newPullPositions() *pullPositions {
	return &pullPositions{next: map[groupQueue]int64{}}
}

// note records the nextBeginOffset of a pull answered. Cost on the pull
// path: a lock and a map assignment (no allocation once the queue is
// known).
func (p *pullPositions) note(group, topic string, queueID int32, next int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.next[groupQueue{group, topic, queueID}] = next
	p.mu.Unlock()
}

// get returns the last pull position of a group's queue, if it has one.
func (p *pullPositions) get(group, topic string, queueID int32) (int64, bool) {
	if p == nil {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	next, ok := p.next[groupQueue{group, topic, queueID}]
	return next, ok
}

// snapshot returns a copy of the table, for one computation of the gauges.
func (p *pullPositions) snapshot() map[groupQueue]int64 {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.next)
}

// prune drops the entries of a snapshot that useful does not keep, unless
// a pull changed them since.
func (p *pullPositions) prune(snap map[groupQueue]int64, useful map[groupQueue]bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, v := range snap {
		if !useful[k] && p.next[k] == v {
			delete(p.next, k)
		}
	}
}

// forget drops the entries of which drop reports true: a deleted group's
// or topic's, which no later scrape would prune while nobody scrapes.
func (p *pullPositions) forget(drop func(groupQueue) bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	maps.DeleteFunc(p.next, func(k groupQueue, _ int64) bool { return drop(k) })
}
