package kvindex

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/rocketkv/rocketkv/commitlog"
)

// Prefixes of the compaction keyspaces, for inspection tools.
const (
	PrefixCompacted     = prefixCompacted
	PrefixCompactKey    = prefixCompactKey
	PrefixCompactExpiry = prefixCompactExpiry
)

// compactionKeyspaces are the compaction keyspaces of doc.go. None is
// derivable: the copies outlive the CommitLog records they came from.
func compactionKeyspaces() []Keyspace {
	return []Keyspace{
		{PrefixCompacted, "compacted", false},
		{PrefixCompactKey, "compaction-key", false},
		{PrefixCompactExpiry, "compaction-expiry", false},
	}
}

// CompactedRecord is the copy of a message of a compacted topic (keyspace
// 0x80).
type CompactedRecord struct {
	Topic       string `json:"topic"`
	QueueID     int32  `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	PhyOffset   int64  `json:"phyOffset"`
	Size        int    `json:"size"`
	Keys        string `json:"keys"`
	BodyLen     int    `json:"bodyLength"`
}

// CompactKeyRecord is the queue offset of the newest message of a message
// key in a queue of a compacted topic (keyspace 0x81).
type CompactKeyRecord struct {
	Topic       string `json:"topic"`
	QueueID     int32  `json:"queueId"`
	Key         string `json:"key"`
	QueueOffset int64  `json:"queueOffset"` // -1 while RestorePending
	// RestorePending marks a key whose newest message a recovery cut,
	// before the message before it is copied again.
	RestorePending bool `json:"restorePending,omitempty"`
}

// CompactExpiryRecord is a copy kept only while its record is in the
// CommitLog (keyspace 0x82): a message without a key or a tombstone.
type CompactExpiryRecord struct {
	PhyOffset   int64  `json:"phyOffset"`
	Topic       string `json:"topic"`
	QueueID     int32  `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	Key         string `json:"key"`
}

// Keyspace implements Record.
func (CompactedRecord) Keyspace() Keyspace { return mustKeyspace(PrefixCompacted) }

// Keyspace implements Record.
func (CompactKeyRecord) Keyspace() Keyspace { return mustKeyspace(PrefixCompactKey) }

// Keyspace implements Record.
func (CompactExpiryRecord) Keyspace() Keyspace { return mustKeyspace(PrefixCompactExpiry) }

// String implements Record.
func (r CompactedRecord) String() string {
	return fmt.Sprintf("topic=%s queueId=%d queueOffset=%d phyOffset=%d size=%d keys=%q bodyLength=%d",
		r.Topic, r.QueueID, r.QueueOffset, r.PhyOffset, r.Size, r.Keys, r.BodyLen)
}

// String implements Record.
func (r CompactKeyRecord) String() string {
	if r.RestorePending {
		return fmt.Sprintf("topic=%s queueId=%d key=%q restorePending", r.Topic, r.QueueID, r.Key)
	}
	return fmt.Sprintf("topic=%s queueId=%d key=%q queueOffset=%d", r.Topic, r.QueueID, r.Key, r.QueueOffset)
}

// String implements Record.
func (r CompactExpiryRecord) String() string {
	return fmt.Sprintf("phyOffset=%d topic=%s queueId=%d queueOffset=%d key=%q", r.PhyOffset, r.Topic, r.QueueID, r.QueueOffset, r.Key)
}

// decodeCompactedKey splits a 0x80 key: prefix | topic | queueId | offset.
func decodeCompactedKey(k []byte) (topic string, qid int32, off int64, err error) {
	return decodeQueueOffsetKey(prefixCompacted, k)
}

// decodeCompactionKey decodes a key of a compaction keyspace; ok is false
// for any other prefix.
func decodeCompactionKey(key, value []byte) (rec Record, ok bool, err error) {
	bad := func() error {
		return fmt.Errorf("%s key %x (value %d bytes): %w", mustKeyspace(key[0]).Name, key, len(value), ErrBadKey)
	}
	switch key[0] {
	case PrefixCompacted:
		topic, qid, off, err := decodeCompactedKey(key)
		if err != nil {
			return nil, true, bad()
		}
		m, err := commitlog.Decode(value)
		if err != nil {
			return nil, true, fmt.Errorf("compacted %s/%d@%d: %w: %w", topic, qid, off, ErrBadKey, err)
		}
		keys, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyKeys)
		return CompactedRecord{Topic: topic, QueueID: qid, QueueOffset: off, PhyOffset: m.PhyOffset, Size: len(value),
			Keys: keys, BodyLen: len(m.Body)}, true, nil
	case PrefixCompactKey:
		topic, rest, err := readString16(key[1:])
		if err != nil || len(rest) < 4 || (len(value) != 8 && !bytes.Equal(value, restorePending)) {
			return nil, true, bad()
		}
		r := CompactKeyRecord{Topic: topic, QueueID: int32(binary.BigEndian.Uint32(rest)), Key: string(rest[4:]), QueueOffset: -1}
		if len(value) == 8 {
			r.QueueOffset = int64(binary.BigEndian.Uint64(value))
		} else {
			r.RestorePending = true
		}
		return r, true, nil
	case PrefixCompactExpiry:
		if len(key) < 9 {
			return nil, true, bad()
		}
		topic, qid, off, err := decodeCompactedKey(key[9:])
		if err != nil {
			return nil, true, bad()
		}
		return CompactExpiryRecord{PhyOffset: int64(binary.BigEndian.Uint64(key[1:9])), Topic: topic, QueueID: qid,
			QueueOffset: off, Key: string(value)}, true, nil
	}
	return nil, false, nil
}
