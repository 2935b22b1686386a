package kvindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Keyspace prefixes; see doc.go for the layout of each.
const (
	prefixMeta       byte = 0x01
	prefixCQ         byte = 0x10
	prefixCQMin      byte = 0x11
	prefixCQJournal  byte = 0x12
	prefixKeyIndex   byte = 0x20
	prefixKeyBucket  byte = 0x21
	prefixConsumerOf byte = 0x30
	prefixTopic      byte = 0x40
	prefixGroup      byte = 0x41
	prefixAuthUser   byte = 0x42
	prefixAuthACL    byte = 0x43
	prefixForbidden  byte = 0x44
	prefixMapping    byte = 0x45
)

// Meta key names.
const (
	metaSchema     = "schema"
	metaDispatched = "dispatched"
	metaTopicsVer  = "topicsVer"
	metaGroupsVer  = "groupsVer"
	metaUsersVer   = "authUsersVer"
	metaACLsVer    = "authAclsVer"
	metaForbidVer  = "groupForbiddenVer"
	metaMappingVer = "topicQueueMappingVer"
	metaMinApplied = "cqMinApplied"
	// metaCQWritten + layout name ("kv", "file"): the CommitLog offset
	// below which that ConsumeQueue layout holds every record's entry.
	metaCQWritten = "cqWritten."
	// metaTopicDeleted + topic: the topic was deleted when the CommitLog
	// ended at the value (for dispatch, which leaves its records below
	// the value out, and for layouts not written at the time).
	metaTopicDeleted = "topicDeleted."
	// metaQueueBegin + topic + "/" + queueId: where that queue of the
	// topic began in the consumequeue/ of a RocketMQ store first opened
	// (value: CommitLog offset | queue offset, QueueBegin); + topic + "/":
	// where the topic began (CommitLog offset | 0), for its queues with no
	// key of their own. Kept with the topic's metaTopicDeleted record.
	metaQueueBegin = "rmqQueueBegin."
	// metaDeletingTopic + topic: a deletion of the topic (its config,
	// queues and consumer state) began and has not ended; a start after a
	// crash half way through completes it.
	metaDeletingTopic = "deletingTopic."
	// metaRebuildStart + layout + "." + queueId + "." + topic: where that
	// queue stood in the layout when a rebuild of it began (the value, a
	// queue offset), kept until the rebuilt layout is complete, so a
	// rebuild interrupted after it dropped the queues still knows them.
	metaRebuildStart = "rebuildStart."
	// metaConfigImported: an Apache RocketMQ store's config files were
	// imported (value: when, ms).
	metaConfigImported = "rmqConfigImported"
	// metaTimerProgress: the dequeue progress of an Apache RocketMQ store's
	// timer (its timercheck's lastReadTimeMs), imported with its config.
	metaTimerProgress = "rmqTimerReadMs"
	// metaTimerQueueOffset: how far that timer had read its topic
	// (timercheck's lastTimerQueueOffset), imported with it.
	metaTimerQueueOffset = "rmqTimerQueueOffset"
	// metaTimerReadMs: the timer's read time as last saved (a master's
	// rounds', a slave's copy of its master's checkpoint).
	metaTimerReadMs = "timerReadMs"
	// metaTimerHold: where the timer began holding parked messages back
	// (timerStopEnqueue; value: CommitLog offset | queue offset in
	// rmq_sys_wheel_timer, Timers.SetHold).
	metaTimerHold = "timerHold"
	// metaRocketMQTopic + topic: the topic has queues in the consumequeue/
	// of the Apache RocketMQ store opened for the first time (value:
	// empty); with metaRocketMQComplete, kept until the broker dropped
	// the queues of the topics RocketMQ had deleted.
	metaRocketMQTopic = "rmqTopic."
	// metaRocketMQComplete: the CommitLog offset below which that
	// consumequeue/ held every record's entry.
	metaRocketMQComplete = "rmqCQComplete"
	// metaPopImported: the POP in-flight state of an Apache RocketMQ
	// store (its revive topic) was imported (value: when, ms).
	metaPopImported = "rmqPopImported"
	// metaPopStageFrontier: the latest time a staged revive's copy is
	// handed out from (RKV_VISIBLE_AT; value: ms), so that staging after a
	// restart keeps the copies of a pop-retry queue in order of it.
	metaPopStageFrontier = "popStageFrontier"
	// metaPopRollback: the POP state in flight was written to a revive
	// topic as RocketMQ check-points (POP_ROLLBACK; value: PopRollback).
	metaPopRollback = "popRollback"
	// metaSlaveTopicsAt: on a store serving as a slave, the CommitLog
	// offset below which its topic table holds every topic its master
	// had (SlaveTopicsAt).
	metaSlaveTopicsAt = "slaveTopicsAt"
)

// schemaVersion is the layout version this code writes. Version 1 stored
// the record's store time as the value of every key-index entry (0x20);
// version 2 leaves it empty. Versions 1 and 2 kept one in-flight record
// per popped message (0x50, 0x51); version 3 keeps one checkpoint per pop
// and queue (0x55, 0x56). This code reads key-index entries of every
// version (minSchemaVersion and up). Opening an older store for writing
// moves its in-flight records to checkpoints and marks it version 3 in
// one synced batch: a build that knows only an older version then refuses
// the store at open (ErrSchema) instead of misreading it later.
const schemaVersion = 3

// checkpointSchemaVersion is the first layout version with POP
// checkpoints; older stores are migrated to them (popmigrate.go).
const checkpointSchemaVersion = 3

// minSchemaVersion is the oldest layout version this code reads.
const minSchemaVersion = 1

// keyBucketShift makes a key-index bucket 64 MiB of CommitLog.
const keyBucketShift = 26

// maxKeyLen bounds a topic, group or message key inside an index key.
const maxKeyLen = 1<<16 - 1

// cqValueLen is the size of a cq entry value.
const cqValueLen = 28

// ErrBadKey is returned when a key or value read from the database does not
// follow the layout of doc.go: the database was written by something else
// or is corrupt.
var ErrBadKey = errors.New("kvindex: malformed key or value")

func appendString16(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func readString16(b []byte) (string, []byte, error) {
	if len(b) < 2 {
		return "", nil, ErrBadKey
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return "", nil, ErrBadKey
	}
	return string(b[2 : 2+n]), b[2+n:], nil
}

func metaKey(name string) []byte {
	return append([]byte{prefixMeta}, name...)
}

// queuePrefix is prefix | topicLen | topic | queueId: the common head of a
// queue's cq entries and of its cq min key.
func queuePrefix(prefix byte, topic string, queueID int32) []byte {
	b := make([]byte, 0, 1+2+len(topic)+4+8)
	b = append(b, prefix)
	b = appendString16(b, topic)
	return binary.BigEndian.AppendUint32(b, uint32(queueID))
}

// topicPrefix is prefix | topicLen | topic: the head of all queues of a
// topic.
func topicPrefix(prefix byte, topic string) []byte {
	b := make([]byte, 0, 1+2+len(topic))
	b = append(b, prefix)
	return appendString16(b, topic)
}

func cqKey(topic string, queueID int32, queueOffset int64) []byte {
	return binary.BigEndian.AppendUint64(queuePrefix(prefixCQ, topic, queueID), uint64(queueOffset))
}

// appendCQKey appends a cq key to dst, for the allocation-free dispatch path.
func appendCQKey(dst []byte, topic string, queueID int32, queueOffset int64) []byte {
	dst = append(dst, prefixCQ)
	dst = appendString16(dst, topic)
	dst = binary.BigEndian.AppendUint32(dst, uint32(queueID))
	return binary.BigEndian.AppendUint64(dst, uint64(queueOffset))
}

// decodeCQKey splits a cq key.
func decodeCQKey(k []byte) (topic string, queueID int32, queueOffset int64, err error) {
	return decodeQueueOffsetKey(prefixCQ, k)
}

// decodeQueueOffsetKey splits a key prefix | topicLen | topic | queueId |
// queueOffset (cq and compacted keys).
func decodeQueueOffsetKey(prefix byte, k []byte) (topic string, queueID int32, queueOffset int64, err error) {
	if len(k) < 1 || k[0] != prefix {
		return "", 0, 0, ErrBadKey
	}
	topic, rest, err := readString16(k[1:])
	if err != nil || len(rest) != 12 {
		return "", 0, 0, ErrBadKey
	}
	return topic, int32(binary.BigEndian.Uint32(rest)), int64(binary.BigEndian.Uint64(rest[4:])), nil
}

func appendCQValue(dst []byte, phy int64, size int32, tags, storeTs int64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(phy))
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	dst = binary.BigEndian.AppendUint64(dst, uint64(tags))
	return binary.BigEndian.AppendUint64(dst, uint64(storeTs))
}

func decodeCQValue(v []byte) (phy int64, size int32, tags, storeTs int64, err error) {
	if len(v) != cqValueLen {
		return 0, 0, 0, 0, ErrBadKey
	}
	return int64(binary.BigEndian.Uint64(v)), int32(binary.BigEndian.Uint32(v[8:])),
		int64(binary.BigEndian.Uint64(v[12:])), int64(binary.BigEndian.Uint64(v[20:])), nil
}

func cqMinKey(topic string, queueID int32) []byte {
	return queuePrefix(prefixCQMin, topic, queueID)
}

// decodeQueueKey splits a key made of prefix | topic | queueId.
func decodeQueueKey(k []byte) (topic string, queueID int32, err error) {
	if len(k) < 1 {
		return "", 0, ErrBadKey
	}
	topic, rest, err := readString16(k[1:])
	if err != nil || len(rest) != 4 {
		return "", 0, ErrBadKey
	}
	return topic, int32(binary.BigEndian.Uint32(rest)), nil
}

func journalKey(firstPhy int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixCQJournal}, uint64(firstPhy))
}

// journalQueue is one queue named by a journal record.
type journalQueue struct {
	topic            string
	queueID          int32
	firstQueueOffset int64
}

func decodeJournalValue(v []byte) (end int64, queues []journalQueue, err error) {
	if len(v) < 8 {
		return 0, nil, ErrBadKey
	}
	end = int64(binary.BigEndian.Uint64(v))
	rest := v[8:]
	for len(rest) > 0 {
		var q journalQueue
		q.topic, rest, err = readString16(rest)
		if err != nil || len(rest) < 12 {
			return 0, nil, ErrBadKey
		}
		q.queueID = int32(binary.BigEndian.Uint32(rest))
		q.firstQueueOffset = int64(binary.BigEndian.Uint64(rest[4:]))
		rest = rest[12:]
		queues = append(queues, q)
	}
	return end, queues, nil
}

// Key-index kinds.
const (
	// KindKey marks a word of the KEYS property.
	KindKey byte = 0
	// KindUniqKey marks a UNIQ_KEY (client message id).
	KindUniqKey byte = 1
)

func keyBucket(phy int64) int64 { return phy >> keyBucketShift }

// keyIndexPrefix is 0x20 | bucket | topic | kind | key: the head of every
// entry of one key in one bucket.
func keyIndexPrefix(bucket int64, topic string, kind byte, key string) []byte {
	b := make([]byte, 0, 1+8+2+len(topic)+1+2+len(key)+8)
	b = append(b, prefixKeyIndex)
	b = binary.BigEndian.AppendUint64(b, uint64(bucket))
	b = appendString16(b, topic)
	b = append(b, kind)
	return appendString16(b, key)
}

func appendKeyIndexKey(dst []byte, topic string, kind byte, key string, phy int64) []byte {
	dst = append(dst, prefixKeyIndex)
	dst = binary.BigEndian.AppendUint64(dst, uint64(keyBucket(phy)))
	dst = appendString16(dst, topic)
	dst = append(dst, kind)
	dst = appendString16(dst, key)
	return binary.BigEndian.AppendUint64(dst, uint64(phy))
}

// KeyIndexEntry is one decoded key-index key.
type KeyIndexEntry struct {
	Topic     string
	Kind      byte
	Key       string
	PhyOffset int64
	// StoreTimestamp is the record's store time when the entry carries
	// it (entries written before store times were left out), else 0.
	StoreTimestamp int64
}

func decodeKeyIndex(k, v []byte) (KeyIndexEntry, error) {
	var e KeyIndexEntry
	if len(k) < 9 || k[0] != prefixKeyIndex || (len(v) != 0 && len(v) != 8) {
		return e, ErrBadKey
	}
	topic, rest, err := readString16(k[9:])
	if err != nil || len(rest) < 1 {
		return e, ErrBadKey
	}
	e.Topic, e.Kind = topic, rest[0]
	key, rest, err := readString16(rest[1:])
	if err != nil || len(rest) != 8 {
		return e, ErrBadKey
	}
	e.Key = key
	e.PhyOffset = int64(binary.BigEndian.Uint64(rest))
	if len(v) == 8 {
		e.StoreTimestamp = int64(binary.BigEndian.Uint64(v))
	}
	return e, nil
}

func keyBucketKey(bucket int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixKeyBucket}, uint64(bucket))
}

func consumerOffsetKey(group, topic string, queueID int32) []byte {
	b := make([]byte, 0, 1+2+len(group)+2+len(topic)+4)
	b = append(b, prefixConsumerOf)
	b = appendString16(b, group)
	b = appendString16(b, topic)
	return binary.BigEndian.AppendUint32(b, uint32(queueID))
}

func decodeConsumerOffsetKey(k []byte) (group, topic string, queueID int32, err error) {
	if len(k) < 1 || k[0] != prefixConsumerOf {
		return "", "", 0, ErrBadKey
	}
	group, rest, err := readString16(k[1:])
	if err != nil {
		return "", "", 0, err
	}
	topic, rest, err = readString16(rest)
	if err != nil || len(rest) != 4 {
		return "", "", 0, ErrBadKey
	}
	return group, topic, int32(binary.BigEndian.Uint32(rest)), nil
}

func nameKey(prefix byte, name string) []byte {
	return append([]byte{prefix}, name...)
}

// prefixEnd returns the smallest key greater than every key starting with
// p (nil when there is none).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

func checkName(what, s string) error {
	if len(s) > maxKeyLen {
		return fmt.Errorf("%s of %d bytes is longer than %d", what, len(s), maxKeyLen)
	}
	return nil
}

func putInt64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func getInt64(v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, ErrBadKey
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

func nowMillis() int64 { return time.Now().UnixMilli() }
