package rocksdbcq

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// unitKey builds a unit key as RocketMQ lays it out (spec 4.3):
// [topicLen][0x01][topic][0x01][queueId][0x01][cqOffset].
func unitKey(topic string, qid int32, off int64) []byte {
	k := binary.BigEndian.AppendUint32(nil, uint32(len(topic)))
	k = append(k, sep)
	k = append(k, topic...)
	k = append(k, sep)
	k = binary.BigEndian.AppendUint32(k, uint32(qid))
	k = append(k, sep)
	return binary.BigEndian.AppendUint64(k, uint64(off))
}

// offsetKey builds an offset key (spec 4.4):
// [topicLen][0x01][topic][0x01][max|min][0x01][queueId].
func offsetKey(topic, kind string, qid int32) []byte {
	k := binary.BigEndian.AppendUint32(nil, uint32(len(topic)))
	k = append(k, sep)
	k = append(k, topic...)
	k = append(k, sep)
	k = append(k, kind...)
	k = append(k, sep)
	return binary.BigEndian.AppendUint32(k, uint32(qid))
}

// FuzzKeys feeds arbitrary bytes to the key and value decoders of both
// column families: none panics or reads out of bounds, and a key that
// parses is exactly the key its parts build again.
func FuzzKeys(f *testing.F) {
	f.Add(unitKey("TopicTest", 3, 42), []byte{})
	f.Add(offsetKey("TopicTest", "max", 1), make([]byte, offsetVal))
	f.Add(offsetKey(CheckpointTopic, "max", 0), make([]byte, checkpoint))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, sep, 'a', sep}, make([]byte, unitValue))
	f.Add([]byte{0, 0, 0, 1, sep}, []byte{1})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		if topic, qid, off, ok := parseUnitKey(k); ok {
			if again := unitKey(string(topic), qid, off); !bytes.Equal(again, k) {
				t.Fatalf("unit key %x parsed as %q %d %d, which builds %x", k, topic, qid, off, again)
			}
			if off < 0 {
				t.Fatalf("unit key %x parsed with a negative offset %d", k, off)
			}
		}
		if topic, kind, qid, ok := parseOffsetKey(k); ok {
			if again := offsetKey(topic, kind, qid); !bytes.Equal(again, k) {
				t.Fatalf("offset key %x parsed as %q %s %d, which builds %x", k, topic, kind, qid, again)
			}
		}
		for _, cf := range []string{UnitsColumnFamily, OffsetsColumnFamily, "other"} {
			_ = DescribeKey(cf, k)
			_ = DescribeValue(cf, v)
		}
	})
}
