package kvindex

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// ConsumerOffsets is the committed-offset table (keyspace 0x30): per group,
// topic and queue, the next offset the group will consume.
//
// Set is durable: it returns after the write is synced (concurrent commits
// share one sync through Pebble's commit pipeline), so an acknowledged
// commit survives a crash. SetLazy is for offsets piggybacked on pulls,
// which RocketMQ itself only persists every 5 s: it returns once the write
// is in Pebble's WAL buffer, and the next Set or the broker's periodic WAL
// sync makes it durable.
type ConsumerOffsets struct {
	db *DB
}

// ConsumerOffsets returns the committed-offset table.
func (d *DB) ConsumerOffsets() *ConsumerOffsets { return &ConsumerOffsets{db: d} }

// OffsetUpdate is one committed offset.
type OffsetUpdate struct {
	Group, Topic string
	QueueID      int32
	Offset       int64
}

// Get returns the committed offset; ok is false when the group never
// committed one for the queue.
func (o *ConsumerOffsets) Get(group, topic string, queueID int32) (offset int64, ok bool, err error) {
	k := consumerOffsetKey(group, topic, queueID)
	off, hit, gen := o.db.committed.get(k)
	if hit {
		return max(off, 0), off != noPosition, nil
	}
	v, err := o.db.get(k)
	if err != nil {
		return 0, false, fmt.Errorf("read offset of %s on %s/%d: %w", group, topic, queueID, err)
	}
	if v == nil {
		o.db.committed.fill(k, noPosition, gen)
		return 0, false, nil
	}
	off, err = getInt64(v)
	if err != nil {
		return 0, false, fmt.Errorf("read offset of %s on %s/%d: %w", group, topic, queueID, err)
	}
	if off >= 0 {
		o.db.committed.fill(k, off, gen)
	}
	return off, true, nil
}

// Set commits one offset durably.
func (o *ConsumerOffsets) Set(group, topic string, queueID int32, offset int64) error {
	return o.SetMany([]OffsetUpdate{{group, topic, queueID, offset}}, true)
}

// SetLazy commits one offset without waiting for a sync.
func (o *ConsumerOffsets) SetLazy(group, topic string, queueID int32, offset int64) error {
	return o.SetMany([]OffsetUpdate{{group, topic, queueID, offset}}, false)
}

// SetMany commits several offsets in one batch, synced when durable.
func (o *ConsumerOffsets) SetMany(updates []OffsetUpdate, durable bool) error {
	if len(updates) == 0 {
		return nil
	}
	b := o.db.pdb.NewBatch()
	defer b.Close()
	cached := make([]positionUpdate, 0, len(updates))
	for _, u := range updates {
		if err := checkName("group", u.Group); err != nil {
			return fmt.Errorf("commit offset: %w", err)
		}
		if err := checkName("topic", u.Topic); err != nil {
			return fmt.Errorf("commit offset: %w", err)
		}
		k := consumerOffsetKey(u.Group, u.Topic, u.QueueID)
		if err := b.Set(k, putInt64(u.Offset), nil); err != nil {
			return fmt.Errorf("commit offset of %s on %s/%d: %w", u.Group, u.Topic, u.QueueID, err)
		}
		cached = append(cached, positionUpdate{string(k), u.Offset})
	}
	// The cache takes the commits in the order the database does: two
	// commits of one offset racing (a pull's and an UPDATE_CONSUMER_OFFSET)
	// left the cache with the one the database overwrote. The sync waits
	// outside the lock, so durable commits still share fsyncs.
	o.db.offsetsMu.Lock()
	err := b.Commit(pebble.NoSync)
	if err == nil {
		o.db.committed.apply(cached)
	}
	o.db.offsetsMu.Unlock()
	if err != nil {
		return fmt.Errorf("commit %d offsets: %w", len(updates), err)
	}
	if durable {
		// A synced empty write syncs the log up to it, this batch included.
		if err := o.db.pdb.LogData(nil, pebble.Sync); err != nil {
			return fmt.Errorf("sync %d offsets: %w", len(updates), err)
		}
	}
	return nil
}

// DeleteGroupTopic removes a group's offsets on one topic.
func (o *ConsumerOffsets) DeleteGroupTopic(group, topic string) error {
	p := make([]byte, 0, 5+len(group)+len(topic))
	p = append(p, prefixConsumerOf)
	p = appendString16(p, group)
	p = appendString16(p, topic)
	return o.deleteRange(p, "delete offsets of "+group+" on "+topic)
}

// DeleteGroup removes every offset of a group.
func (o *ConsumerOffsets) DeleteGroup(group string) error {
	return o.deleteRange(topicPrefix(prefixConsumerOf, group), "delete offsets of "+group)
}

func (o *ConsumerOffsets) deleteRange(p []byte, what string) error {
	err := o.db.pdb.DeleteRange(p, prefixEnd(p), pebble.Sync)
	o.db.committed.purge()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Each calls fn for every committed offset, of one group when group is not
// empty, in key order, until fn returns false.
func (o *ConsumerOffsets) Each(group string, fn func(u OffsetUpdate) bool) error {
	p := []byte{prefixConsumerOf}
	if group != "" {
		p = topicPrefix(prefixConsumerOf, group)
	}
	var derr error
	err := o.db.Scan(p, func(k, v []byte) bool {
		g, t, q, err := decodeConsumerOffsetKey(k)
		if err != nil {
			derr = fmt.Errorf("offset key %x: %w", k, err)
			return false
		}
		off, err := getInt64(v)
		if err != nil {
			derr = fmt.Errorf("offset value of %x: %w", k, err)
			return false
		}
		return fn(OffsetUpdate{g, t, q, off})
	})
	if err != nil {
		return err
	}
	return derr
}
