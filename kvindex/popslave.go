package kvindex

import (
	"encoding/binary"
	"fmt"
)

// prefixPopSlaveOwn is keyspace 0x59: what a slave's own pops keep of a
// group's queue (see doc.go).
const prefixPopSlaveOwn byte = 0x59

// SlaveOwn is what the pops, acks and changes of invisible time answered
// by a slave keep of one group's queue (keyspace 0x59): the slave's own
// entry of its offset table and the last orderly batch it handed out, the
// parts of Apache RocketMQ's consumerOffset.json and consumerOrderInfo.json
// that a slave writes itself. They live apart from the committed offsets
// (0x30) and orderly batches (0x53) the slave copies from its master,
// which its sync overwrites.
type SlaveOwn struct {
	Group   string `json:"group"`
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	// Committed is the slave's own committed offset of the queue, -1 when
	// it has none (the copied one counts then).
	Committed int64 `json:"committed"`
	// Batch is the last orderly batch a pop on the slave handed out of
	// the queue, nil when none; its Group, Topic and QueueID are the
	// entry's.
	Batch *OrderState `json:"batch,omitempty"`
}

// slaveOwnValue is committed int64 | the 0x53 value of the batch, when
// there is one.
func slaveOwnValue(o *SlaveOwn) []byte {
	v := binary.BigEndian.AppendUint64(nil, uint64(o.Committed))
	if o.Batch != nil {
		v = append(v, encodeOrderState(o.Batch)...)
	}
	return v
}

// decodeSlaveOwn decodes a key and value of keyspace 0x59.
func decodeSlaveOwn(k, v []byte) (SlaveOwn, error) {
	g, t, q, rest, err := decodeGroupTopicQueue(k, prefixPopSlaveOwn)
	if err != nil || len(rest) != 0 || len(v) < 8 {
		return SlaveOwn{}, ErrBadKey
	}
	o := SlaveOwn{Group: g, Topic: t, QueueID: q, Committed: int64(binary.BigEndian.Uint64(v))}
	if o.Committed < -1 {
		return SlaveOwn{}, ErrBadKey
	}
	if len(v) == 8 {
		return o, nil
	}
	st := OrderState{Group: g, Topic: t, QueueID: q}
	if err := decodeOrderValue(&st, v[8:]); err != nil {
		return SlaveOwn{}, err
	}
	o.Batch = &st
	return o, nil
}

// SetSlaveOwn records (or replaces) what a slave's own pops keep of a
// group's queue; an entry with neither a committed offset nor a batch is
// deleted instead.
func (p *PopBatch) SetSlaveOwn(o *SlaveOwn) error {
	if err := checkGroupTopic(o.Group, o.Topic); err != nil {
		return fmt.Errorf("set a slave's own pop state: %w", err)
	}
	if o.Committed < -1 {
		return fmt.Errorf("set a slave's own pop state of %s on %s/%d: negative offset %d", o.Group, o.Topic, o.QueueID, o.Committed)
	}
	if o.Committed < 0 && o.Batch == nil {
		return p.DeleteSlaveOwn(o.Group, o.Topic, o.QueueID)
	}
	if b := o.Batch; b != nil && (len(b.Messages) > MaxOrderBatch || len(b.Carried) > MaxOrderBatch || len(b.AttemptID) > maxKeyLen) {
		return fmt.Errorf("set a slave's own pop state of %s on %s/%d: %d messages and %d carried counts (max %d each), attemptId of %d bytes",
			o.Group, o.Topic, o.QueueID, len(b.Messages), len(b.Carried), MaxOrderBatch, len(b.AttemptID))
	}
	p.key = groupTopicQueue(p.key[:0], prefixPopSlaveOwn, o.Group, o.Topic, o.QueueID)
	if err := p.b.Set(p.key, slaveOwnValue(o), nil); err != nil {
		return fmt.Errorf("set a slave's own pop state of %s on %s/%d: %w", o.Group, o.Topic, o.QueueID, err)
	}
	return nil
}

// DeleteSlaveOwn removes what a slave's own pops keep of a group's queue.
func (p *PopBatch) DeleteSlaveOwn(group, topic string, queueID int32) error {
	p.key = groupTopicQueue(p.key[:0], prefixPopSlaveOwn, group, topic, queueID)
	if err := p.b.Delete(p.key, nil); err != nil {
		return fmt.Errorf("delete a slave's own pop state of %s on %s/%d: %w", group, topic, queueID, err)
	}
	return nil
}

// EachSlaveOwn calls fn for every entry of a slave's own pop state, in
// key order (group, topic, queue), until fn returns false.
func (s *PopStore) EachSlaveOwn(fn func(SlaveOwn) bool) error {
	var derr error
	err := s.db.Scan([]byte{prefixPopSlaveOwn}, func(k, v []byte) bool {
		o, err := decodeSlaveOwn(k, v)
		if err != nil {
			derr = fmt.Errorf("slave's own pop state key %x: %w", k, err)
			return false
		}
		return fn(o)
	})
	if err != nil {
		return err
	}
	return derr
}
