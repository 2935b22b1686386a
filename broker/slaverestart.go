package broker

import (
	"fmt"
	"sync"
)

// A topic its master deleted and created again restarts, on a slave, each
// queue the new topic writes (kvindex's queue restart, restart.go there).
// The master deleted the topic's consumer state with it: every group's
// committed offsets, pop positions, checkpoints and orderly batches. The
// slave's copies of the offsets keep what the master no longer lists
// (RocketMQ's putAll), so without more the slave would keep the old
// queue's offsets for good, and a consumer of the slave promoted (its
// master dead) would resume the new queue at the old offset: it would
// skip the new topic's messages below it, every one of a queue whose
// offset lies past them.
//
// So the dispatcher tells the slave's broker of each restart before it
// drops the queue (DispatcherOptions.QueueRestarted; a crash before the
// drop tells it again), and the broker drops the queue's consumer state
// as the master dropped the topic's: in the store
// (kvindex.PopStore.DeleteQueueState), in its POP service's memory and
// in the pull offset table. What the master's consumers commit of the
// new topic comes with the next copy.
//
// A copy of the master's offsets fetched before the master deleted the
// topic, and applied after the restart, would put the old offsets back.
// The restarts noted while a step of a copy is under way are dropped
// again after the step applied its table (runSyncSteps). A step whose
// fetch came after the restart brought the new topic's offsets instead,
// which that drops too, until the next copy: a consumer of the slave
// promoted in between gets messages again rather than losing them.

// queueRestarts collects the queues the slave's dispatcher started anew
// since the sync step under way began; the sync loop's steps run one at
// a time.
type queueRestarts struct {
	mu     sync.Mutex
	queues []restartedQueue
}

// restartedQueue names a queue a replicated record started anew.
type restartedQueue struct {
	topic   string
	queueID int32
}

// maxQueueRestarts bounds the queues kept between two takes. Past it a
// restart is not kept: its queue's state was dropped when it restarted,
// only the drop after the step is not repeated for it.
const maxQueueRestarts = 4096

// note records a restarted queue.
func (q *queueRestarts) note(topic string, queueID int32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queues) < maxQueueRestarts {
		q.queues = append(q.queues, restartedQueue{topic, queueID})
	}
}

// take returns the queues noted since the last take and forgets them.
func (q *queueRestarts) take() []restartedQueue {
	q.mu.Lock()
	defer q.mu.Unlock()
	taken := q.queues
	q.queues = nil
	return taken
}

// queueRestartedHook is the dispatcher's QueueRestarted hook: nil on a
// master, whose queues restart only by its own deletions.
func (b *Broker) queueRestartedHook() func(string, int32) error {
	if !b.isSlave() {
		return nil
	}
	b.repl.restarts = &queueRestarts{}
	return func(topic string, queueID int32) error {
		if err := b.dropQueueConsumerState(topic, queueID); err != nil {
			return err
		}
		b.repl.restarts.note(topic, queueID)
		b.log.Warn().Str("topic", topic).Int32("queue", queueID).
			Msg("slave: the master created the topic again; the consumer offsets and pop state of the old queue are dropped")
		return nil
	}
}

// dropQueueConsumerState drops what every group consumed of one queue:
// its committed offsets, pop positions, checkpoints and orderly batches,
// what a slave's own pops keep of it, and its pull offsets.
func (b *Broker) dropQueueConsumerState(topic string, queueID int32) error {
	if err := b.db.Pop().DeleteQueueState(topic, queueID); err != nil {
		return err
	}
	if svc := b.reviving.Load(); svc != nil {
		if err := svc.SlaveQueueRestarted(topic, queueID); err != nil {
			return err
		}
	}
	b.pulled.forget(func(q groupQueue) bool { return q.topic == topic && q.queueID == queueID })
	return nil
}

// dropRestartedAgain drops once more the consumer state of the queues
// that restarted since the sync step under way fetched its table, which
// may have put the old queue's back (see above).
func (b *Broker) dropRestartedAgain() error {
	if b.repl.restarts == nil {
		return nil
	}
	for _, q := range b.repl.restarts.take() {
		if err := b.dropQueueConsumerState(q.topic, q.queueID); err != nil {
			return fmt.Errorf("drop again the consumer state of %s/%d, restarted while the table was copied: %w", q.topic, q.queueID, err)
		}
	}
	return nil
}
