package rmqpop

import (
	"reflect"
	"testing"
	"unicode/utf8"
)

// Bodies in the shape RocketMQ 5's fastjson writes (PopCheckPoint,
// AckMsg, BatchAckMsg with their @JSONField short names).
const (
	ckA      = `{"bm":0,"bn":"broker-a","c":"cg","d":[0,1,3],"it":60000,"n":3,"pt":1700000000000,"q":2,"rp":"0","so":10,"t":"Orders"}`
	ackA     = `{"ao":11,"bn":"broker-a","c":"cg","pt":1700000000000,"q":2,"so":10,"t":"Orders"}`
	bAckA    = `{"aol":[10],"bn":"broker-a","c":"cg","pt":1700000000000,"q":2,"so":10,"t":"Orders"}`
	ckNoDiff = `{"bm":2,"bn":"broker-a","c":"cg","it":30000,"n":3,"pt":1700000001000,"q":0,"so":0,"t":"%RETRY%cg_Orders"}`
	ackLong  = `{"ackOffset":0,"brokerName":"broker-a","consumerGroup":"cg","popTime":1700000001000,"queueId":0,"startOffset":0,"topic":"%RETRY%cg_Orders"}`
	ckRePut  = `{"bm":0,"bn":"broker-a","c":"cg","d":[0],"it":70000,"n":1,"pt":1700000002000,"q":1,"rp":"2","so":5,"t":"Orders"}`
	ckOldRP  = `{"bm":0,"bn":"broker-a","c":"cg","d":[0],"it":60000,"n":1,"pt":1700000002000,"q":1,"rp":"1","so":5,"t":"Orders"}`
	ackOther = `{"ao":99,"bn":"broker-b","c":"cg","pt":1700000000000,"q":2,"so":10,"t":"Orders"}`
)

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs [][2]string
		want []Checkpoint
	}{
		{"a check-point alone", [][2]string{{TagCheckpoint, ckA}}, []Checkpoint{
			{Group: "cg", Topic: "Orders", QueueID: 2, StartOffset: 10, PopTime: 1700000000000, InvisibleTime: 60000, BrokerName: "broker-a", Offsets: []int64{10, 11, 13}}}},
		{"acked by ack and batch ack, in any order", [][2]string{{TagAck, ackA}, {TagCheckpoint, ckA}, {TagBatchAck, bAckA}}, []Checkpoint{
			{Group: "cg", Topic: "Orders", QueueID: 2, StartOffset: 10, PopTime: 1700000000000, InvisibleTime: 60000, BrokerName: "broker-a", Offsets: []int64{13}}}},
		{"an ack of another broker's check-point changes nothing", [][2]string{{TagCheckpoint, ckA}, {TagAck, ackOther}}, []Checkpoint{
			{Group: "cg", Topic: "Orders", QueueID: 2, StartOffset: 10, PopTime: 1700000000000, InvisibleTime: 60000, BrokerName: "broker-a", Offsets: []int64{10, 11, 13}}}},
		{"no diffs: consecutive offsets; bitmap bit 1 acked; long-named ack", [][2]string{{TagCheckpoint, ckNoDiff}, {TagAck, ackLong}}, []Checkpoint{
			{Group: "cg", Topic: "%RETRY%cg_Orders", QueueID: 0, StartOffset: 0, PopTime: 1700000001000, InvisibleTime: 30000, BrokerName: "broker-a", Offsets: []int64{2}}}},
		{"the latest re-put of a check-point wins", [][2]string{{TagCheckpoint, ckRePut}, {TagCheckpoint, ckOldRP}}, []Checkpoint{
			{Group: "cg", Topic: "Orders", QueueID: 1, StartOffset: 5, PopTime: 1700000002000, InvisibleTime: 70000, BrokerName: "broker-a", RePuts: 2, Offsets: []int64{5}}}},
		{"fully acked: nothing in flight", [][2]string{{TagCheckpoint, ckNoDiff}, {TagAck, ackLong},
			{TagBatchAck, `{"aol":[2],"bn":"broker-a","c":"cg","pt":1700000001000,"q":0,"so":0,"t":"%RETRY%cg_Orders"}`}}, nil},
		{"other tags ignored", [][2]string{{"x", "not json"}}, nil},
	} {
		m := NewMerger()
		for _, msg := range tc.msgs {
			if err := m.Add(msg[0], []byte(msg[1])); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if got := m.InFlight(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestMergeErrors(t *testing.T) {
	for _, tc := range [][2]string{
		{TagCheckpoint, `{"so":`},
		{TagCheckpoint, `{"n":500,"so":0}`},
		{TagAck, `{"ao":"x"}`},
		{TagBatchAck, `[1]`},
	} {
		if err := NewMerger().Add(tc[0], []byte(tc[1])); err == nil {
			t.Errorf("%s %s: no error", tc[0], tc[1])
		}
	}
}

// FuzzAdd: arbitrary revive-topic bodies never panic the merger, and a
// check-point it holds encodes to a body read back as the same.
func FuzzAdd(f *testing.F) {
	for _, b := range []string{ckA, ackA, bAckA, ckNoDiff, ackLong, ckRePut} {
		f.Add(TagCheckpoint, []byte(b))
		f.Add(TagAck, []byte(b))
	}
	f.Fuzz(func(t *testing.T, tag string, body []byte) {
		m := NewMerger()
		_ = m.Add(tag, body)
		for _, c := range m.InFlight() {
			if len(c.Offsets) == 0 || len(c.Offsets) > maxMessages {
				t.Fatalf("check-point with %d offsets", len(c.Offsets))
			}
			// What was read writes back (as the migration writes a
			// check-point for RocketMQ) to a body read as the same.
			if !utf8.ValidString(c.Group) || !utf8.ValidString(c.Topic) || !utf8.ValidString(c.BrokerName) {
				continue // JSON cannot carry the bytes
			}
			enc, err := EncodeCheckpoint(c)
			if err != nil {
				continue // too many offsets, or one below the start
			}
			again := NewMerger()
			if err := again.Add(TagCheckpoint, enc); err != nil {
				t.Fatalf("check-point %+v encoded as %s, which does not read: %v", c, enc, err)
			}
			if got := again.InFlight(); len(got) != 1 || !reflect.DeepEqual(got[0], c) {
				t.Fatalf("check-point %+v encoded as %s, read back as %+v", c, enc, got)
			}
		}
	})
}

// FuzzMerge: a check-point merged with an ack (or batch ack) body never
// panics the merger, the ack only ever removes offsets the check-point
// alone had in flight, and the order the two were read in does not
// matter (RocketMQ's revive meets them in either order across its
// queues).
func FuzzMerge(f *testing.F) {
	for _, ck := range []string{ckA, ckNoDiff, ckRePut} {
		for _, a := range []string{ackA, bAckA, ackLong, ackOther} {
			f.Add([]byte(ck), true, []byte(a))
			f.Add([]byte(ck), false, []byte(a))
		}
	}
	f.Fuzz(func(t *testing.T, ck []byte, batch bool, ack []byte) {
		tag := TagAck
		if batch {
			tag = TagBatchAck
		}
		alone := NewMerger()
		if err := alone.Add(TagCheckpoint, ck); err != nil {
			return
		}
		ckFirst, ackFirst := NewMerger(), NewMerger()
		_ = ckFirst.Add(TagCheckpoint, ck)
		errAfter := ckFirst.Add(tag, ack)
		errBefore := ackFirst.Add(tag, ack)
		_ = ackFirst.Add(TagCheckpoint, ck)
		if (errAfter == nil) != (errBefore == nil) {
			t.Fatalf("ack %q read after the check-point: %v, before it: %v", ack, errAfter, errBefore)
		}
		merged := ckFirst.InFlight()
		if again := ackFirst.InFlight(); !reflect.DeepEqual(merged, again) {
			t.Fatalf("check-point %q and ack %q: %+v read in that order, %+v in the other", ck, ack, merged, again)
		}
		before := alone.InFlight()
		if len(merged) > len(before) {
			t.Fatalf("an ack added check-points: %+v from %+v", merged, before)
		}
		for _, m := range merged {
			var had []int64
			for _, b := range before {
				if b.Group == m.Group && b.Topic == m.Topic && b.QueueID == m.QueueID && b.StartOffset == m.StartOffset &&
					b.PopTime == m.PopTime && b.BrokerName == m.BrokerName {
					had = b.Offsets
				}
			}
			in := map[int64]bool{}
			for _, o := range had {
				in[o] = true
			}
			for _, o := range m.Offsets {
				if !in[o] {
					t.Fatalf("offset %d in flight after the ack %q but not before it (%v)", o, ack, had)
				}
			}
		}
	})
}
