package kvindex

import (
	"fmt"
	"strings"
)

// Prefixes of the POP keyspaces, for inspection tools.
const (
	PrefixPopInFlight = prefixPopInFlight
	PrefixPopAckIndex = prefixPopAckIndex
	PrefixPopPosition = prefixPopPosition
	PrefixPopOrder    = prefixPopOrder
	PrefixRequestMode = prefixPopRequestMd
	PrefixPopCKDue    = prefixPopCKDue
	PrefixPopCK       = prefixPopCK
	PrefixPopRevive   = prefixPopRevive
	PrefixPopReviveB  = prefixPopReviveBatch
	PrefixPopSlaveOwn = prefixPopSlaveOwn
)

// popKeyspaces are the POP keyspaces of doc.go, in prefix order.
func popKeyspaces() []Keyspace {
	return []Keyspace{
		{PrefixPopInFlight, "pop-inflight-v2", false},
		{PrefixPopAckIndex, "pop-ack-index-v2", false},
		{PrefixPopPosition, "pop-position", false},
		{PrefixPopOrder, "pop-order", false},
		{PrefixRequestMode, "request-mode", false},
		{PrefixPopCKDue, "pop-checkpoint-due", false},
		{PrefixPopCK, "pop-checkpoint", false},
		{PrefixPopRevive, "pop-revive-intent", false},
		{PrefixPopReviveB, "pop-revive-batch", false},
		{PrefixPopSlaveOwn, "pop-slave-own", false},
	}
}

// PopInFlightRecord is one in-flight POP delivery of a schema-2 store not
// yet migrated (keyspace 0x50).
type PopInFlightRecord struct{ InFlight }

// PopAckIndexRecord is the ack index entry of an in-flight delivery of a
// schema-2 store (keyspace 0x51); CKOffset, RetryFlag and Attempts are
// zero.
type PopAckIndexRecord struct{ InFlight }

// PopCheckpointRecord is the checkpoint of one pop of one queue with
// messages still in flight (keyspace 0x56).
type PopCheckpointRecord struct{ Checkpoint }

// PopCheckpointDueRecord is the deadline entry of a checkpoint (keyspace
// 0x55): its fields but Offsets, InvisibleTime, RetryFlag and Attempts,
// and the offset count it had when the entry was written.
type PopCheckpointDueRecord struct {
	Checkpoint
	Count int `json:"count"`
}

// PopReviveRecord is a message an earlier version's revive was
// re-delivering (keyspace 0x57).
type PopReviveRecord struct{ ReviveIntent }

// Keyspace implements Record.
func (PopReviveRecord) Keyspace() Keyspace { return mustKeyspace(PrefixPopRevive) }

// PopReviveBatchRecord is the messages of one checkpoint a revive is
// re-delivering (keyspace 0x58).
type PopReviveBatchRecord struct{ ReviveBatch }

// Keyspace implements Record.
func (PopReviveBatchRecord) Keyspace() Keyspace { return mustKeyspace(PrefixPopReviveB) }

// String implements Record.
func (r PopReviveRecord) String() string {
	return fmt.Sprintf("group=%q topic=%q queue=%d offset=%d ckOffset=%d popTime=%s invisibleTime=%d retry=%d attempts=%d",
		r.Group, r.Topic, r.QueueID, r.QueueOffset, r.CKOffset, FormatMillis(r.PopTime), r.InvisibleTime, r.RetryFlag, r.Attempts)
}

// PopPositionRecord is a group's next pop offset on a queue (keyspace
// 0x52).
type PopPositionRecord struct{ PopPosition }

// PopOrderRecord is the in-flight orderly batch of a queue (keyspace 0x53).
type PopOrderRecord struct{ OrderState }

// PopSlaveOwnRecord is what a slave's own pops keep of a group's queue
// (keyspace 0x59).
type PopSlaveOwnRecord struct{ SlaveOwn }

// Keyspace implements Record.
func (PopSlaveOwnRecord) Keyspace() Keyspace { return mustKeyspace(PrefixPopSlaveOwn) }

// String implements Record.
func (r PopSlaveOwnRecord) String() string {
	s := fmt.Sprintf("group=%q topic=%q queue=%d committed=%d", r.Group, r.Topic, r.QueueID, r.Committed)
	if r.Batch == nil {
		return s
	}
	batch := PopOrderRecord{*r.Batch}.String()
	// The batch's fields after its group, topic and queue, the entry's.
	if i := strings.Index(batch, " popTime="); i >= 0 {
		batch = batch[i+1:]
	}
	return s + " batch: " + batch
}

// RequestModeRecord is a topic and group's message request mode (keyspace
// 0x54).
type RequestModeRecord struct {
	Topic string `json:"topic"`
	Group string `json:"group"`
	// Body is the SetMessageRequestModeRequestBody JSON as stored.
	Body string `json:"body"`
}

// Keyspace implements Record.
func (PopInFlightRecord) Keyspace() Keyspace { return mustKeyspace(PrefixPopInFlight) }

// Keyspace implements Record.
func (PopAckIndexRecord) Keyspace() Keyspace { return mustKeyspace(PrefixPopAckIndex) }

// Keyspace implements Record.
func (PopCheckpointRecord) Keyspace() Keyspace { return mustKeyspace(PrefixPopCK) }

// Keyspace implements Record.
func (PopCheckpointDueRecord) Keyspace() Keyspace { return mustKeyspace(PrefixPopCKDue) }

// Keyspace implements Record.
func (PopPositionRecord) Keyspace() Keyspace { return mustKeyspace(PrefixPopPosition) }

// Keyspace implements Record.
func (PopOrderRecord) Keyspace() Keyspace { return mustKeyspace(PrefixPopOrder) }

// Keyspace implements Record.
func (RequestModeRecord) Keyspace() Keyspace { return mustKeyspace(PrefixRequestMode) }

// String implements Record.
func (r PopInFlightRecord) String() string {
	return fmt.Sprintf("visibleAt=%s group=%q topic=%q queue=%d offset=%d popTime=%s invisibleTime=%d ckOffset=%d retry=%d attempts=%d",
		FormatMillis(r.VisibleAt), r.Group, r.Topic, r.QueueID, r.QueueOffset, FormatMillis(r.PopTime), r.InvisibleTime,
		r.CKOffset, r.RetryFlag, r.Attempts)
}

// String implements Record.
func (r PopAckIndexRecord) String() string {
	return fmt.Sprintf("group=%q topic=%q queue=%d offset=%d visibleAt=%s popTime=%s",
		r.Group, r.Topic, r.QueueID, r.QueueOffset, FormatMillis(r.VisibleAt), FormatMillis(r.PopTime))
}

// String implements Record.
func (r PopCheckpointRecord) String() string {
	staged := ""
	if r.Staged {
		staged = " staged"
	}
	return fmt.Sprintf("group=%q topic=%q queue=%d ckOffset=%d popTime=%s invisibleTime=%d visibleAt=%s retry=%d attempts=%d offsets=%v%s",
		r.Group, r.Topic, r.QueueID, r.CKOffset, FormatMillis(r.PopTime), r.InvisibleTime, FormatMillis(r.VisibleAt),
		r.RetryFlag, r.Attempts, r.Offsets, staged)
}

// String implements Record.
func (r PopReviveBatchRecord) String() string {
	return PopCheckpointRecord{r.Checkpoint}.String() + fmt.Sprintf(" floors=retryV1:%d,retryV2:%d,dlq:%d",
		r.Floors.RetryV1, r.Floors.RetryV2, r.Floors.DLQ)
}

// String implements Record.
func (r PopCheckpointDueRecord) String() string {
	return fmt.Sprintf("visibleAt=%s group=%q topic=%q queue=%d ckOffset=%d popTime=%s count=%d",
		FormatMillis(r.VisibleAt), r.Group, r.Topic, r.QueueID, r.CKOffset, FormatMillis(r.PopTime), r.Count)
}

// String implements Record.
func (r PopPositionRecord) String() string {
	return fmt.Sprintf("group=%q topic=%q queue=%d next=%d", r.Group, r.Topic, r.QueueID, r.Offset)
}

// String implements Record.
func (r PopOrderRecord) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "group=%q topic=%q queue=%d popTime=%s invisibleTime=%d acked=%#x attemptId=%q messages=[",
		r.Group, r.Topic, r.QueueID, FormatMillis(r.PopTime), r.InvisibleTime, r.Acked, r.AttemptID)
	for i, m := range r.Messages {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d/%d", m.QueueOffset, m.Consumed)
		if m.NextVisibleAt != 0 {
			fmt.Fprintf(&b, "@%s", FormatMillis(m.NextVisibleAt))
		}
	}
	b.WriteByte(']')
	if len(r.Carried) > 0 {
		b.WriteString(" carried=[")
		for i, c := range r.Carried {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d/%d", c.QueueOffset, c.Consumed)
		}
		b.WriteByte(']')
	}
	return b.String()
}

// String implements Record.
func (r RequestModeRecord) String() string {
	return fmt.Sprintf("topic=%q group=%q body=%s", r.Topic, r.Group, r.Body)
}

// decodePopKey decodes a key of a POP keyspace; ok is false when the
// prefix is not one.
func decodePopKey(key, value []byte) (rec Record, ok bool, err error) {
	// decoded is what every keyspace returns: the record, or ErrBadKey
	// naming the keyspace, key and value size.
	decoded := func(r Record, err error) (Record, bool, error) {
		if err != nil {
			return nil, true, fmt.Errorf("%s key %x (value %d bytes): %w", mustKeyspace(key[0]).Name, key, len(value), ErrBadKey)
		}
		return r, true, nil
	}
	switch key[0] {
	case PrefixPopInFlight:
		r, err := decodePopInFlight(key, value)
		return decoded(PopInFlightRecord{r}, err)
	case PrefixPopAckIndex:
		r, err := decodePopAck(key, value)
		return decoded(PopAckIndexRecord{r}, err)
	case PrefixPopCK:
		c, err := decodeCheckpoint(key, value)
		return decoded(PopCheckpointRecord{c}, err)
	case PrefixPopCKDue:
		c, n, err := decodeCheckpointDue(key, value)
		return decoded(PopCheckpointDueRecord{c, n}, err)
	case PrefixPopPosition:
		g, t, q, rest, err := decodeGroupTopicQueue(key, prefixPopPosition)
		if err == nil && len(rest) != 0 {
			err = ErrBadKey
		}
		var off int64
		if err == nil {
			off, err = getInt64(value)
		}
		return decoded(PopPositionRecord{PopPosition{Group: g, Topic: t, QueueID: q, Offset: off}}, err)
	case PrefixPopRevive:
		r, err := decodeReviveIntent(key, value)
		return decoded(PopReviveRecord{r}, err)
	case PrefixPopReviveB:
		r, err := decodeReviveBatch(key, value)
		return decoded(PopReviveBatchRecord{r}, err)
	case PrefixPopOrder:
		st, err := decodeOrderState(key, value)
		return decoded(PopOrderRecord{st}, err)
	case PrefixPopSlaveOwn:
		o, err := decodeSlaveOwn(key, value)
		return decoded(PopSlaveOwnRecord{o}, err)
	case PrefixRequestMode:
		m, err := decodeRequestMode(key, value)
		return decoded(RequestModeRecord{Topic: m.Topic, Group: m.Group, Body: string(m.JSON)}, err)
	}
	return nil, false, nil
}
