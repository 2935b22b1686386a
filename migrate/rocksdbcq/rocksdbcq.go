// Package rocksdbcq reads RocketMQ 5.3's RocksDB ConsumeQueue (the RocksDB
// database a broker with storeType=defaultRocksDB keeps directly in
// <root>/consumequeue) for what a migration needs from it: which queues
// RocketMQ held, where each one's valid units begin and end, and so where
// a queue whose records retention deleted stands. It reads through
// internal/rocksread and changes nothing.
//
// # Layout (spec 4.3, 4.4)
//
// Column family "offset", one record per queue and kind, and the
// checkpoint:
//
//	key:   [topicLen:int32][0x01][topic][0x01]["max"|"min"][0x01][queueId:int32]
//	value: [phyOffset:int64][cqOffset:int64]        (16 bytes)
//	checkpoint: topic CHECKPOINT_TOPIC, "max", queue 0; value [phy+size:int64]
//
// "max" is the last unit written (the queue's next offset is cqOffset+1);
// "min" is updated lazily and may lag, so Read does not trust it.
//
// Column family "default", one record per unit:
//
//	key:   [topicLen:int32][0x01][topic][0x01][queueId:int32][0x01][cqOffset:int64]
//	value: [phyOffset:int64][size:int32][tagsCode:int64][storeTimestamp:int64]
//
// All integers are big-endian, so a queue's units sort by offset.
package rocksdbcq

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/rocketkv/rocketkv/internal/rocksread"
)

// Column family names and key parts of RocketMQ's RocksDB ConsumeQueue.
const (
	UnitsColumnFamily   = "default"
	OffsetsColumnFamily = "offset"
	// CheckpointTopic is TopicValidator.RMQ_SYS_ROCKSDB_OFFSET_TOPIC, the
	// topic of the checkpoint key.
	CheckpointTopic = "CHECKPOINT_TOPIC"

	sep        = 0x01
	unitValue  = 28
	offsetVal  = 16
	checkpoint = 8
)

// Queue is one queue of the RocksDB ConsumeQueue as RocketMQ would serve it
// over a CommitLog holding [minPhy, endPhy).
type Queue struct {
	Topic   string
	QueueID int32
	// Max is the queue's next offset: one past the last unit whose record
	// ends at or below endPhy (RocketMQ's truncateDirty), or, when
	// compaction dropped every unit, one past the max record.
	Max int64
	// Min is the offset of the first unit whose record lies in
	// [minPhy, endPhy) (RocketMQ's getMinOffsetInQueue correction), or Max
	// when no unit does: retention deleted every record of the queue.
	Min int64
	// FirstPhy is the CommitLog offset of the unit at Min (when Min < Max).
	FirstPhy int64
	// LastEnd is phyOffset+size of the unit at Max-1, 0 when that unit is
	// gone.
	LastEnd int64
	// Written is one past the max record: Max plus the units past the
	// CommitLog's end that RocketMQ's start would cut.
	Written int64
}

// View is what Read found.
type View struct {
	// Queues lists every queue with a max record, by topic and queue id.
	Queues []Queue
	// Checkpoint is the checkpoint key's value (the end of the newest
	// record dispatched), -1 when absent.
	Checkpoint int64
	// Foreign counts records in neither layout (left out).
	Foreign int
	// Orphans counts units of queues without a max record: RocketMQ
	// serves none of them (a deleted queue's units the dirty sweep had not
	// yet removed).
	Orphans int
}

type queueKey struct {
	topic string
	qid   int32
}

type maxRecord struct {
	phy, cq int64
}

// queueScan collects one queue's valid units while the units stream by.
type queueScan struct {
	max       maxRecord
	lastCQ    int64
	lastEnd   int64
	haveLast  bool
	haveFirst bool
	firstCQ   int64
	firstPhy  int64
}

// Read reads the RocksDB ConsumeQueue in dir (<root>/consumequeue) against
// a CommitLog holding [minPhy, endPhy). It reads the offset column family
// and then every unit once, in order.
func Read(dir string, minPhy, endPhy int64) (*View, error) {
	db, err := rocksread.Open(dir)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	v := &View{Checkpoint: -1}
	queues := map[queueKey]*queueScan{}
	err = db.Scan(OffsetsColumnFamily, func(k, val []byte) error {
		topic, kind, qid, ok := parseOffsetKey(k)
		if !ok {
			v.Foreign++
			return nil
		}
		if topic == CheckpointTopic && kind == "max" && qid == 0 && len(val) == checkpoint {
			v.Checkpoint = int64(binary.BigEndian.Uint64(val))
			return nil
		}
		if len(val) != offsetVal {
			v.Foreign++
			return nil
		}
		if kind == "max" {
			queues[queueKey{topic, qid}] = &queueScan{max: maxRecord{
				phy: int64(binary.BigEndian.Uint64(val)), cq: int64(binary.BigEndian.Uint64(val[8:])),
			}}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the offset column family of %s: %w", dir, err)
	}
	var (
		curKey  queueKey
		cur     *queueScan
		curSeen bool
	)
	err = db.Scan(UnitsColumnFamily, func(k, val []byte) error {
		topic, qid, off, ok := parseUnitKey(k)
		if !ok || len(val) != unitValue {
			v.Foreign++
			return nil
		}
		if !curSeen || curKey.qid != qid || curKey.topic != string(topic) {
			curKey, curSeen = queueKey{string(topic), qid}, true
			cur = queues[curKey]
		}
		if cur == nil {
			v.Orphans++
			return nil
		}
		if off > cur.max.cq {
			return nil // stale units above a truncated max (spec 4.7)
		}
		phy := int64(binary.BigEndian.Uint64(val))
		end := phy + int64(binary.BigEndian.Uint32(val[8:]))
		if end > endPhy {
			return nil
		}
		cur.lastCQ, cur.lastEnd, cur.haveLast = off, end, true
		if phy >= minPhy && !cur.haveFirst {
			cur.firstCQ, cur.firstPhy, cur.haveFirst = off, phy, true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the units of %s: %w", dir, err)
	}
	for k, s := range queues {
		q := Queue{Topic: k.topic, QueueID: k.qid, Written: s.max.cq + 1}
		switch {
		case s.haveLast:
			q.Max, q.LastEnd = s.lastCQ+1, s.lastEnd
		case s.max.phy < endPhy:
			q.Max = s.max.cq + 1
		}
		q.Min = q.Max
		if s.haveFirst && s.firstCQ < q.Max {
			q.Min, q.FirstPhy = s.firstCQ, s.firstPhy
		}
		v.Queues = append(v.Queues, q)
	}
	sort.Slice(v.Queues, func(i, j int) bool {
		if v.Queues[i].Topic != v.Queues[j].Topic {
			return v.Queues[i].Topic < v.Queues[j].Topic
		}
		return v.Queues[i].QueueID < v.Queues[j].QueueID
	})
	return v, nil
}

// Present reports whether dir holds a RocksDB database (its CURRENT file
// and a MANIFEST), as RocketMQ's RocksDB ConsumeQueue keeps in
// consumequeue/ beside (or instead of) the file ConsumeQueue's directories.
func Present(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err != nil {
		return false
	}
	manifests, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	return len(manifests) > 0
}

// parseOffsetKey splits an offset column family key.
func parseOffsetKey(k []byte) (topic, kind string, qid int32, ok bool) {
	t, rest, ok := splitTopic(k)
	if !ok || len(rest) != 3+1+4 || rest[3] != sep {
		return "", "", 0, false
	}
	kind = string(rest[:3])
	if kind != "max" && kind != "min" {
		return "", "", 0, false
	}
	return string(t), kind, int32(binary.BigEndian.Uint32(rest[4:])), true
}

// parseUnitKey splits a unit key.
func parseUnitKey(k []byte) (topic []byte, qid int32, off int64, ok bool) {
	t, rest, ok := splitTopic(k)
	if !ok || len(rest) != 4+1+8 || rest[4] != sep {
		return nil, 0, 0, false
	}
	off = int64(binary.BigEndian.Uint64(rest[5:]))
	if off < 0 {
		return nil, 0, 0, false
	}
	return t, int32(binary.BigEndian.Uint32(rest)), off, true
}

// splitTopic reads [topicLen][0x01][topic][0x01] and returns the rest.
func splitTopic(k []byte) (topic, rest []byte, ok bool) {
	if len(k) < 6 || k[4] != sep {
		return nil, nil, false
	}
	n := int(binary.BigEndian.Uint32(k))
	if n <= 0 || n > len(k)-6 || k[5+n] != sep {
		return nil, nil, false
	}
	return k[5 : 5+n], k[6+n:], true
}

// DescribeKey renders a key of either column family for people, or ""
// when it is in neither layout.
func DescribeKey(cf string, k []byte) string {
	switch cf {
	case OffsetsColumnFamily:
		if t, kind, qid, ok := parseOffsetKey(k); ok {
			return fmt.Sprintf("%s %s %d", t, kind, qid)
		}
	case UnitsColumnFamily:
		if t, qid, off, ok := parseUnitKey(k); ok {
			return fmt.Sprintf("%s %d @%d", t, qid, off)
		}
	}
	return ""
}

// DescribeValue renders a value of either column family, or "".
func DescribeValue(cf string, v []byte) string {
	switch {
	case cf == OffsetsColumnFamily && len(v) == offsetVal:
		return fmt.Sprintf("phy=%d cq=%d", binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:]))
	case cf == OffsetsColumnFamily && len(v) == checkpoint:
		return fmt.Sprintf("dispatched=%d", binary.BigEndian.Uint64(v))
	case cf == UnitsColumnFamily && len(v) == unitValue:
		return fmt.Sprintf("phy=%d size=%d tags=%d stored=%d", binary.BigEndian.Uint64(v), binary.BigEndian.Uint32(v[8:]),
			int64(binary.BigEndian.Uint64(v[12:])), int64(binary.BigEndian.Uint64(v[20:])))
	}
	return ""
}
