package kvindex

import (
	"fmt"

	"github.com/rocketkv/rocketkv/cq"
)

// A replica learns that its master deleted a topic from the master's
// topic table, which no longer lists it, not from its CommitLog: the
// master dropped the topic's ConsumeQueue, and the replica's would keep
// the deleted messages for good (Apache RocketMQ's slave keeps them too:
// its SlaveSynchronize only replaces the table).
//
// The replica asks for the table when its own log ends at below. Every
// record of the topic below that offset was in the master's log before
// the master answered without the topic, so it is a deleted topic's. A
// record from below on may be of the topic created again since, which
// the replica may have indexed already: the created topic numbers its
// queues from 0, so its first record in a queue holding the old entries
// started that queue anew (restart.go), and the queue's last entry then
// names a record at or past below. So a queue is dropped only when its
// last entry names a record below it, in each layout on its own, and the
// deletion is recorded at below (DeleteTopic's record), so that records
// of the topic below it that dispatch has not reached yet are left out
// too.
//
//	log:  ... T/0@4 ... T/1@2 ... | below ... T/0@0 (created again) ...
//	      T/1 is dropped; T/0, whose last entry lies past below, stays

// DeleteReplicaTopic records, on a replica, that its master deleted topic
// while the replica's CommitLog ended at below (at most its end now), and
// drops from each layout the queues of queueIDs whose last entry names a
// record below it, with their cached offsets and compacted copies. It
// returns the queues it dropped from some layout. A queue without an
// entry to look at (emptied by retention) keeps its numbering.
func (d *Dispatcher) DeleteReplicaTopic(topic string, below int64, queueIDs []int32) ([]int32, error) {
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	var dropped []int32
	err := d.deleteTopicAt(topic, min(below, d.opts.Log.MaxOffset()), func() error {
		for _, qid := range queueIDs {
			var old []layout // the layouts whose last entry of the queue lies below
			for _, l := range d.layouts {
				last, ok, err := cq.LastEntry(l.store, topic, qid)
				if err != nil {
					return err
				}
				if ok && last.PhyOffset < below {
					old = append(old, l)
				}
			}
			if len(old) == 0 {
				continue
			}
			if err := d.dropQueue(old, topic, qid, func(l layout) error {
				if err := l.store.DeleteQueue(topic, qid); err != nil {
					return fmt.Errorf("drop %s/%d, deleted on the master, from the %s ConsumeQueue: %w", topic, qid, l.name, err)
				}
				return nil
			}); err != nil {
				return err
			}
			dropped = append(dropped, qid)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delete topic %s of the master below %d: %w", topic, below, err)
	}
	return dropped, nil
}
