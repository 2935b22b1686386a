package rmqconfig

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// v2LMQStore is a store whose config is testdata/rocksdb-v2-lmq (written
// by ldb: gen.sh there): config v2 with KV POP's consumer and pull offsets
// of a light message queue and of an ordinary topic.
func v2LMQStore(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, "config"), os.DirFS(filepath.Join("testdata", "rocksdb-v2-lmq", "config"))); err != nil {
		t.Fatal(err)
	}
	return root
}

// Config v2's pull offsets of light message queues, which RocketMQ reads
// back from the database to start a pop, are read with ReadOptions.LMQ,
// and so are their consumer offsets; an ordinary topic's pull offset,
// which RocketMQ never reads back, is named as not carried over. Without
// LMQ, none of the light message queues' offsets is read, and each is
// named.
func TestReadRocksDBConfigV2PullOffsets(t *testing.T) {
	c, err := ReadWith(v2LMQStore(t), ReadOptions{LMQ: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.PullOffsets); got != "[{%LMQ%pg %LMQ%p1 0 6}]" {
		t.Errorf("pull offsets %s, want %%LMQ%%pg's of %%LMQ%%p1/0 at 6 only", got)
	}
	if got := fmt.Sprint(c.Offsets); got != "[{%LMQ%pg %LMQ%p1 0 3} {%LMQ%qg %LMQ%p1 0 3} {GroupN TopicL 0 3}]" {
		t.Errorf("consumer offsets %s", got)
	}
	notes := strings.Join(c.NotCarried, "\n")
	if !strings.Contains(notes, "1 pull offsets of topics other than light message queues are not carried over") || len(c.NotCarried) != 1 {
		t.Errorf("not-carried notes:\n%s\nwant one naming GroupN's pull offset", notes)
	}

	c, err = ReadWith(v2LMQStore(t), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.PullOffsets) != 0 || fmt.Sprint(c.Offsets) != "[{GroupN TopicL 0 3}]" {
		t.Errorf("without LMQ: pull offsets %v, consumer offsets %v; want none and GroupN's", c.PullOffsets, c.Offsets)
	}
	notes = strings.Join(c.NotCarried, "\n")
	for _, want := range []string{"1 pull offsets of topics other", "2 consumer offsets of light message queues", "1 pull offsets of light message queues"} {
		if !strings.Contains(notes, want) {
			t.Errorf("without LMQ, the not-carried notes lack %q:\n%s", want, notes)
		}
	}
}

// v2OffsetRest is the key of a config v2 offset record after its table
// prefix, as ConsumerOffsetManagerV2 builds it.
func v2OffsetRest(group, topic string, qid int32) []byte {
	k := binary.BigEndian.AppendUint16(nil, uint16(len(group)))
	k = append(append(k, group...), 0x01)
	k = binary.BigEndian.AppendUint16(k, uint16(len(topic)))
	k = append(append(k, topic...), 0x01)
	return binary.BigEndian.AppendUint32(k, uint32(qid))
}

// A config v2 offset record decodes to its group, topic, queue and offset;
// a key cut short or run long, or a value not of 8 bytes, is refused.
func TestDecodeV2Offset(t *testing.T) {
	rest := v2OffsetRest("%LMQ%pg", "%LMQ%p1", 0)
	o, err := DecodeV2Offset(rest, []byte{0, 0, 0, 0, 0, 0, 0, 6})
	if err != nil || o != (Offset{Group: "%LMQ%pg", Topic: "%LMQ%p1", QueueID: 0, Offset: 6}) {
		t.Fatalf("decoded %+v %v", o, err)
	}
	for _, bad := range []struct{ rest, v []byte }{
		{rest[:len(rest)-1], make([]byte, 8)},
		{append(rest, 0), make([]byte, 8)},
		{rest, make([]byte, 7)},
		{[]byte{0, 9, 'G'}, make([]byte, 8)},
	} {
		if o, err := DecodeV2Offset(bad.rest, bad.v); err == nil {
			t.Errorf("%x = %x decoded to %+v", bad.rest, bad.v, o)
		}
	}
}

// FuzzDecodeV2Offset: any key and value decode or are refused without a
// panic, and what decodes is the record its fields build again.
func FuzzDecodeV2Offset(f *testing.F) {
	f.Add(v2OffsetRest("%LMQ%pg", "%LMQ%p1", 0), []byte{0, 0, 0, 0, 0, 0, 0, 6})
	f.Add(v2OffsetRest("GroupN", "TopicL", -1), []byte{0xff, 0, 0, 0, 0, 0, 0, 6})
	f.Add([]byte{0, 1, 'G', 1, 0}, []byte{})
	f.Fuzz(func(t *testing.T, rest, v []byte) {
		o, err := DecodeV2Offset(rest, v)
		if err != nil {
			return
		}
		if again := v2OffsetRest(o.Group, o.Topic, o.QueueID); string(again) != string(rest) || int64(binary.BigEndian.Uint64(v)) != o.Offset {
			t.Fatalf("%x = %x decoded to %+v, which builds %x", rest, v, o, again)
		}
	})
}
