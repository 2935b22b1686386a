package pop

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/rocketkv/rocketkv/kvindex"
)

// checkAppendJSON fails t when the body AppendJSON writes for b is not
// valid JSON, or DecodeBatchAck reads from it other than what it reads
// from json.Marshal's body (the bytes may differ in how strings are
// escaped: encoding/json also escapes '<', '>', '&', U+2028 and U+2029).
func checkAppendJSON(t *testing.T, b BatchAckBody) {
	t.Helper()
	want, err := json.Marshal(b)
	if err != nil {
		t.Fatalf("marshal %+v: %v", b, err)
	}
	prefix := []byte("kept")
	got := b.AppendJSON(prefix)
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("AppendJSON lost what dst held: %q", got)
	}
	got = got[len(prefix):]
	if !json.Valid(got) {
		t.Fatalf("AppendJSON wrote invalid JSON: %s", got)
	}
	fromGot, errGot := DecodeBatchAck(got)
	fromWant, errWant := DecodeBatchAck(want)
	if errGot != nil || errWant != nil || !reflect.DeepEqual(fromGot, fromWant) {
		t.Fatalf("decoded %+v (%v) from\n%s\nand %+v (%v) from json.Marshal's\n%s", fromGot, errGot, got, fromWant, errWant, want)
	}
}

// awkwardNames are names that need JSON escapes, or look as if they did.
var awkwardNames = []string{
	"", "g", `q"uote`, `back\slash`, `\"`, "tab\tnew\nline\r", "\b\f\x00\x01\x1f\x7f", "<a href=x>&amp;</a>",
	"ünïcødé", "日本語トピック", "emoji 🚀", "\u2028\u2029", "bad \xff utf8 \xc3", "\xe2\x80", "%RETRY%g+T", " spaces ",
}

// randomName draws a name from awkwardNames or from random bytes.
func randomName(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return awkwardNames[r.IntN(len(awkwardNames))]
	}
	b := make([]byte, r.IntN(24))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return string(b)
}

// randomInt64 draws small numbers, extremes and everything between.
func randomInt64(r *rand.Rand) int64 {
	switch r.IntN(4) {
	case 0:
		return int64(r.IntN(100))
	case 1:
		return []int64{math.MinInt64, math.MaxInt64, -1, 0}[r.IntN(4)]
	default:
		return int64(r.Uint64())
	}
}

func TestAppendJSONMatchesMarshal(t *testing.T) {
	checkAppendJSON(t, BatchAckBody{})
	checkAppendJSON(t, BatchAckBody{BrokerName: "broker-a", Acks: []BatchAck{}})
	checkAppendJSON(t, BatchAckBody{BrokerName: "broker-a", Acks: []BatchAck{{}}})
	for _, name := range awkwardNames {
		checkAppendJSON(t, BatchAckBody{BrokerName: name, Acks: []BatchAck{{ConsumerGroup: name, Topic: name, Retry: name}}})
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := BatchAckBody{BrokerName: randomName(r)}
		if r.IntN(10) > 0 {
			b.Acks = make([]BatchAck, r.IntN(5))
		}
		for i := range b.Acks {
			a := &b.Acks[i]
			a.ConsumerGroup, a.Topic, a.Retry = randomName(r), randomName(r), randomName(r)
			a.StartOffset, a.PopTime, a.InvisibleTime = randomInt64(r), randomInt64(r), randomInt64(r)
			a.QueueID, a.ReviveQueueID = int32(randomInt64(r)), int32(randomInt64(r))
			for range r.IntN(40) {
				if err := a.SetBit(r.Int64N(300)); err != nil {
					t.Fatal(err)
				}
			}
		}
		checkAppendJSON(t, b)
	}
}

func FuzzAppendJSON(f *testing.F) {
	f.Add("broker-a", "g", "T", "0", int64(5), int32(3), int64(1700000000000), []byte{3, 2})
	f.Add("b\"", "<g>\\", "\u2028\xff", "1", int64(-1), int32(-1), int64(0), []byte(nil))
	f.Fuzz(func(t *testing.T, broker, group, topic, retry string, so int64, q int32, pt int64, bits []byte) {
		checkAppendJSON(t, BatchAckBody{BrokerName: broker, Acks: []BatchAck{
			{ConsumerGroup: group, Topic: topic, Retry: retry, StartOffset: so, QueueID: q, ReviveQueueID: q, PopTime: pt, InvisibleTime: so, Bits: bits},
			{ConsumerGroup: topic, Topic: retry, Retry: group, StartOffset: pt},
		}})
	})
}

// An entry's bit set counts only within a checkpoint's span of its
// StartOffset, whatever its length and the queue's range: a body's bytes
// cannot make more offsets than a checkpoint holds.
func TestBatchAckOffsetsStayWithinACheckpointsSpan(t *testing.T) {
	a := BatchAck{StartOffset: 100, Bits: bytes.Repeat([]byte{0xff}, 1<<20)}
	got := a.OffsetsIn(0, 1<<40)
	if len(got) != kvindex.MaxCheckpointSpan || got[0] != 100 || got[len(got)-1] != 100+kvindex.MaxCheckpointSpan-1 {
		t.Fatalf("%d offsets from %v to %v, want the %d of the span from 100", len(got), got[0], got[len(got)-1], kvindex.MaxCheckpointSpan)
	}
	if n := a.Count(); n != kvindex.MaxCheckpointSpan {
		t.Fatalf("Count %d, want %d", n, kvindex.MaxCheckpointSpan)
	}
	if got := a.OffsetsIn(150, 160); len(got) != 11 || got[0] != 150 {
		t.Fatalf("offsets in [150, 160]: %v", got)
	}
}
