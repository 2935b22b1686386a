package rmqconfig

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/internal/rocksread"
)

// Config v2 (configManagerVersion=v2; spec 6.3): one RocksDB database at
// <root>/config/rdb, column family default, big-endian integers:
//
//	[0x01][table:int16][0x01]"data_version"         -> [stateVersion:8][timestamp:8][counter:8]
//	[0x01][table:int16][0x02][len:int16][name]      -> [0x01 = JSON][config JSON]    tables 3 topic, 4 group
//	[0x01][table:int16][0x02][len:int16][group][0x01][len:int16][topic][0x01][queueId:int32]
//	                                                 -> [offset:int64]                tables 1 consumer, 2 pull offset
//
// RocketMQ's v2 managers load only this database (JSON files beside it are
// not merged); ReadWith does the same. What they do with the two offset
// tables decides what is imported from them:
//
//   - consumer offsets of ordinary topics are loaded at start; those of
//     light message queues (%LMQ% topics) are not loaded but read from the
//     database whenever asked for (ConsumerOffsetManagerV2.queryOffset), so
//     they are live too: imported with ReadOptions.LMQ (rocketkv serves
//     light message queues only with enableLmq), reported otherwise.
//   - pull offsets (where a group's next pull or non-orderly pop of a
//     queue reads: PopConsumerService commits one per queue read, at the
//     read's nextBeginOffset, and starts each pop from queryPullOffset)
//     are written for every topic, but only a light message queue's is
//     ever read back from the database. An ordinary topic's lives in the
//     manager's memory (nothing loads it at start), so after a restart
//     RocketMQ pops it from the committed offset: not imported (see
//     Config.PullOffsets for why not even as a better guess).
const (
	v2TablePrefix   = 0x01
	v2RecordVersion = 0x01
	v2RecordData    = 0x02
	v2JSON          = 0x01
	v2ConsumerTable = 1
	v2PullTable     = 2
	v2TopicTable    = 3
	v2GroupTable    = 4
	lmqPrefix       = "%LMQ%"
)

// v2Replaces are the JSON files config v2 replaces.
var v2Replaces = map[string]bool{"topics.json": true, "subscriptionGroup.json": true, "consumerOffset.json": true}

// readRocksDBConfigV2 fills topics, groups, consumer offsets and the pull
// offsets of light message queues from the config v2 database dir; lmq
// takes light message queues' offsets in (ReadOptions.LMQ).
func (c *Config) readRocksDBConfigV2(dir string, lmq bool) error {
	fail := func(err error) error {
		return fmt.Errorf("read RocketMQ's config v2 RocksDB %s (or export it with mqadmin rocksDBConfigToJson and move %s aside): %w", dir, dir, err)
	}
	db, err := rocksread.Open(dir)
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	var topics, groups []adminbody.Member
	var skipped []string
	lmqLeft, pullLeft, lmqPullLeft, foreign := 0, 0, 0, 0
	err = db.Scan(v1DefaultCF, func(k, v []byte) error {
		if len(k) < 4 || k[0] != v2TablePrefix {
			foreign++
			return nil
		}
		table := binary.BigEndian.Uint16(k[1:])
		if k[3] != v2RecordData {
			return nil // data versions
		}
		rest := k[4:]
		switch table {
		case v2TopicTable, v2GroupTable:
			name, tail, ok := cut16(rest)
			if !ok || len(tail) != 0 || len(v) < 1 {
				return fmt.Errorf("table %d: malformed key %x", table, k)
			}
			if v[0] != v2JSON {
				return fmt.Errorf("table %d %q: serialization type %d, not JSON", table, name, v[0])
			}
			m := adminbody.Member{Key: []byte(name), Value: bytes.Clone(v[1:])}
			if table == v2TopicTable {
				topics = append(topics, m)
			} else {
				groups = append(groups, m)
			}
		case v2ConsumerTable:
			o, err := DecodeV2Offset(rest, v)
			switch {
			case err != nil:
				return fmt.Errorf("consumer offsets: record %x = %x: %w", k, v, err)
			case o.QueueID < 0:
				skipped = append(skipped, fmt.Sprintf("%s@%s queue %d", o.Topic, o.Group, o.QueueID))
			case strings.HasPrefix(o.Topic, lmqPrefix) && !lmq:
				lmqLeft++
			default:
				c.Offsets = append(c.Offsets, o)
			}
		case v2PullTable:
			o, err := DecodeV2Offset(rest, v)
			switch {
			case err != nil:
				return fmt.Errorf("pull offsets: record %x = %x: %w", k, v, err)
			case !strings.HasPrefix(o.Topic, lmqPrefix):
				pullLeft++
			case !lmq || o.Group == "" || o.QueueID < 0 || o.Offset < 0:
				lmqPullLeft++
			default:
				c.PullOffsets = append(c.PullOffsets, o)
			}
		default:
			foreign++
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	var b bytes.Buffer
	b.WriteString(`{"topicConfigTable":`)
	if err := jsonObject(&b, topics, rawValue); err != nil {
		return fail(err)
	}
	b.WriteByte('}')
	if err := c.parseTopics(b.Bytes()); err != nil {
		return fail(err)
	}
	b.Reset()
	b.WriteString(`{"subscriptionGroupTable":`)
	if err := jsonObject(&b, groups, rawValue); err != nil {
		return fail(err)
	}
	b.WriteByte('}')
	if err := c.parseGroups(b.Bytes()); err != nil {
		return fail(err)
	}
	sortOffsets(c.Offsets)
	sortOffsets(c.PullOffsets)
	base := filepath.Base(dir)
	c.noteNegativeQueues(base, skipped)
	if pullLeft > 0 {
		c.NotCarried = append(c.NotCarried, fmt.Sprintf("%s: %d pull offsets of topics other than light message queues are not carried over: RocketMQ never reads them back (after a restart its pops start from the committed offsets, as rocketkv's do)", base, pullLeft))
	}
	if lmqLeft > 0 {
		c.NotCarried = append(c.NotCarried, fmt.Sprintf("%s: %d consumer offsets of light message queues are not carried over: rocketkv reads them with enableLmq=true", base, lmqLeft))
	}
	if lmqPullLeft > 0 {
		c.NotCarried = append(c.NotCarried, fmt.Sprintf("%s: %d pull offsets of light message queues are not carried over: rocketkv reads them with enableLmq=true (those of an empty group, a negative queue id or offset never)", base, lmqPullLeft))
	}
	if foreign > 0 {
		c.NotCarried = append(c.NotCarried, fmt.Sprintf("%s: %d records of unknown tables are not carried over", base, foreign))
	}
	c.Files = append(c.Files, dir)
	return nil
}

// DecodeV2Offset decodes one record of config v2's consumer-offset or
// pull-offset table: rest is its key after [0x01][table:int16][0x02],
// [len:int16][group][0x01][len:int16][topic][0x01][queueId:int32], and v
// its value, [offset:int64], big-endian (ConsumerOffsetManagerV2). Any
// other shape is an error.
func DecodeV2Offset(rest, v []byte) (Offset, error) {
	group, topic, qid, ok := parseV2OffsetKey(rest)
	switch {
	case !ok:
		return Offset{}, fmt.Errorf("key is not [len][group]0x01[len][topic]0x01[queueId]")
	case len(v) != 8:
		return Offset{}, fmt.Errorf("value of %d bytes, not an 8-byte offset", len(v))
	}
	return Offset{Group: group, Topic: topic, QueueID: qid, Offset: int64(binary.BigEndian.Uint64(v))}, nil
}

// cut16 reads [len:int16][bytes] and returns the bytes as text and the rest.
func cut16(b []byte) (string, []byte, bool) {
	if len(b) < 2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return "", nil, false
	}
	return string(b[2 : 2+n]), b[2+n:], true
}

// parseV2OffsetKey splits [len][group][0x01][len][topic][0x01][queueId].
func parseV2OffsetKey(b []byte) (group, topic string, qid int32, ok bool) {
	group, b, ok = cut16(b)
	if !ok || len(b) < 1 || b[0] != 0x01 {
		return "", "", 0, false
	}
	topic, b, ok = cut16(b[1:])
	if !ok || len(b) != 5 || b[0] != 0x01 {
		return "", "", 0, false
	}
	return group, topic, int32(binary.BigEndian.Uint32(b[1:])), true
}

// v2TableNames names config v2's tables as DescribeV2Key prints them.
var v2TableNames = map[uint16]string{v2ConsumerTable: "consumerOffset", v2PullTable: "pullOffset", v2TopicTable: "topic", v2GroupTable: "subscriptionGroup"}

// DescribeV2Key decodes a config v2 key for display ("topic T1",
// "consumerOffset group=G topic=T queue=0", "topic data_version"), or
// returns "" when k is not one.
func DescribeV2Key(k []byte) string {
	if len(k) < 4 || k[0] != v2TablePrefix {
		return ""
	}
	table, ok := v2TableNames[binary.BigEndian.Uint16(k[1:])]
	if !ok {
		return ""
	}
	rest := k[4:]
	switch k[3] {
	case v2RecordVersion:
		if !utf8.Valid(rest) {
			return ""
		}
		return table + " " + string(rest)
	case v2RecordData:
		if name, tail, ok := cut16(rest); ok && len(tail) == 0 {
			return table + " " + name
		}
		if group, topic, qid, ok := parseV2OffsetKey(rest); ok {
			return fmt.Sprintf("%s group=%s topic=%s queue=%d", table, group, topic, qid)
		}
	}
	return ""
}

// DescribeV2Value decodes a config v2 value for display: a config's JSON,
// an offset, or a data version; "" when v is none of them.
func DescribeV2Value(v []byte) string {
	switch {
	case len(v) > 1 && v[0] == v2JSON && utf8.Valid(v[1:]):
		return string(v[1:])
	case len(v) == 8:
		return strconv.FormatInt(int64(binary.BigEndian.Uint64(v)), 10)
	case len(v) == 24:
		return fmt.Sprintf("stateVersion=%d timestamp=%d counter=%d", int64(binary.BigEndian.Uint64(v)),
			int64(binary.BigEndian.Uint64(v[8:])), int64(binary.BigEndian.Uint64(v[16:])))
	}
	return ""
}
