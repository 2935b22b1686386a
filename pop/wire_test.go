package pop

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/rocketkv/rocketkv/commitlog"
)

// Worked examples of the spec's formats (remoting-protocol.md 4.5,
// storage-formats.md 7.2).
func TestHandleWorkedExample(t *testing.T) {
	h := Handle{CKOffset: 5, PopTime: 1700000000000, InvisibleTime: 60000, ReviveQID: 0, RetryFlag: FlagNormal,
		BrokerName: "broker-a", QueueID: 3, QueueOffset: 7}
	const want = "5 1700000000000 60000 0 0 broker-a 3 7"
	if got := h.String(); got != want {
		t.Fatalf("handle %q, want %q", got, want)
	}
	back, err := ParseHandle(want)
	if err != nil || back != h {
		t.Fatalf("parse: %+v %v", back, err)
	}
	seven, err := ParseHandle("5 1700000000000 60000 999 1 broker-a 3")
	if err != nil || seven.QueueOffset != -1 || !seven.Orderly() || seven.RetryFlag != FlagRetryV1 {
		t.Fatalf("7-field handle: %+v %v", seven, err)
	}
	for _, bad := range []string{"", "1 2 3", "x 2 3 4", "1 2 3 4 0 b q", "1 2 3 99999999999"} {
		if _, err := ParseHandle(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestRetryTopicNames(t *testing.T) {
	if got := RetryTopicV1("T", "g"); got != "%RETRY%g_T" {
		t.Fatal(got)
	}
	if got := RetryTopicV2("T", "g"); got != "%RETRY%g+T" {
		t.Fatal(got)
	}
	for topic, flag := range map[string]string{"T": "0", "%RETRY%g_T": "1", "%RETRY%g+T": "2", "%RETRY%g": "1"} {
		if got := RetryFlagOf(topic); got != flag {
			t.Errorf("flag of %s = %s, want %s", topic, got, flag)
		}
	}
	if got, _ := RealTopic("T", "g", "2"); got != "%RETRY%g+T" {
		t.Fatal(got)
	}
	if _, err := RealTopic("T", "g", "3"); err == nil {
		t.Fatal("flag 3 accepted")
	}
	if originalTopic("%RETRY%g_T_x", "g") != "T_x" || originalTopic("%RETRY%g+T", "g") != "T" || originalTopic("T", "g") != "T" {
		t.Fatal("originalTopic")
	}
}

func TestInfoStringsWorkedExample(t *testing.T) {
	var ib InfoBuilder
	ib.AddQueue(FlagRetryV1, 0, 4, []int64{4, 5})
	ib.AddQueue(FlagNormal, 2, 10, []int64{10, 11, 12})
	if got := ib.StartOffsetInfo(); got != "1 0 4;0 2 10" {
		t.Fatalf("startOffsetInfo %q", got)
	}
	if got := ib.MsgOffsetInfo(); got != "1 0 4,5;0 2 10,11,12" {
		t.Fatalf("msgOffsetInfo %q", got)
	}
	ib.AddOrderOffset(FlagNormal, 2, 10, 1)
	ib.AddOrderQueue(FlagNormal, 2, 0)
	if got := ib.OrderCountInfo(); got != "0 qo2%10 1;0 2 0" {
		t.Fatalf("orderCountInfo %q", got)
	}
	so, err := ParseStartOffsetInfo(ib.StartOffsetInfo())
	if err != nil || !reflect.DeepEqual(so, map[string]int64{"1@0": 4, "0@2": 10}) {
		t.Fatalf("parse start %v %v", so, err)
	}
	mo, err := ParseMsgOffsetInfo(ib.MsgOffsetInfo())
	if err != nil || !reflect.DeepEqual(mo, map[string][]int64{"1@0": {4, 5}, "0@2": {10, 11, 12}}) {
		t.Fatalf("parse msg %v %v", mo, err)
	}
	oc, err := ParseOrderCountInfo(ib.OrderCountInfo())
	if err != nil || oc[OrderOffsetKey("0", 2, 10)] != 1 || oc[InfoKey("0", 2)] != 0 || len(oc) != 2 {
		t.Fatalf("parse order %v %v", oc, err)
	}
	if _, err := ParseStartOffsetInfo("0 1 2;0 1 3"); err == nil {
		t.Fatal("duplicate accepted")
	}
}

func TestBatchAckBody(t *testing.T) {
	// Bits 0, 1 and 9 set: Java's BitSet.toByteArray gives {0x03, 0x02}.
	body := `{"acks":[{"b":"AwI=","c":"g","it":60000,"pt":1700000000000,"q":3,"r":"1","rq":0,"so":5,"t":"T"},` +
		`{"consumerGroup":"g","topic":"T","retry":"0","startOffset":"7","queueId":1,"popTime":1,"invisibleTime":2,"bitSet":[1]}],"brokerName":"broker-a"}`
	b, err := DecodeBatchAck([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if b.BrokerName != "broker-a" || len(b.Acks) != 2 {
		t.Fatalf("%+v", b)
	}
	a := b.Acks[0]
	if a.ConsumerGroup != "g" || a.Topic != "T" || a.Retry != "1" || a.QueueID != 3 || a.PopTime != 1700000000000 || a.InvisibleTime != 60000 {
		t.Fatalf("ack %+v", a)
	}
	if got := a.Offsets(); !reflect.DeepEqual(got, []int64{5, 6, 14}) {
		t.Fatalf("offsets %v", got)
	}
	if got := b.Acks[1].Offsets(); !reflect.DeepEqual(got, []int64{7}) || b.Acks[1].Retry != "0" {
		t.Fatalf("long names: %+v", b.Acks[1])
	}
	var c BatchAck
	c.StartOffset = 5
	for _, i := range []int64{0, 1, 9} {
		if err := c.SetBit(i); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int64{-1, MaxAckBits} {
		if err := c.SetBit(i); !errors.Is(err, ErrAckBit) {
			t.Fatalf("SetBit(%d) = %v, want ErrAckBit", i, err)
		}
	}
	out, err := json.Marshal(c)
	if err != nil || !json.Valid(out) {
		t.Fatal(err)
	}
	var round BatchAck
	if err := json.Unmarshal(out, &round); err != nil || !reflect.DeepEqual(round.Offsets(), []int64{5, 6, 14}) {
		t.Fatalf("round trip %s: %v", out, err)
	}
	for _, bad := range []string{`{`, `{"acks":[{"so":"x"}]}`, `{"acks":[{"b":"!!"}]}`, `{"acks":[{"q":99999999999}]}`} {
		if _, err := DecodeBatchAck([]byte(bad)); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}

// The forms of a batch ack entry that Java's fastjson writes or reads:
// short and long names (the short one wins, in either order), integers
// quoted or not, a number for a string field, nulls, the bit set as
// Base64 or as signed bytes, unknown members of any type.
func TestDecodeBatchAckForms(t *testing.T) {
	want := BatchAck{ConsumerGroup: "g", Topic: "T", Retry: "1", StartOffset: 5, QueueID: 3, ReviveQueueID: 2,
		PopTime: 1700000000000, InvisibleTime: 60000, Bits: []byte{0x03, 0x82}}
	for _, tc := range []struct{ name, ack string }{
		{"short", `{"c":"g","t":"T","r":"1","so":5,"q":3,"rq":2,"pt":1700000000000,"it":60000,"b":"A4I="}`},
		{"long", `{"consumerGroup":"g","topic":"T","retry":"1","startOffset":5,"queueId":3,"reviveQueueId":2,` +
			`"popTime":1700000000000,"invisibleTime":60000,"bitSet":"A4I="}`},
		{"short after long", `{"consumerGroup":"x","c":"g","topic":"x","t":"T","retry":"0","r":"1","startOffset":9,"so":5,` +
			`"queueId":9,"q":3,"reviveQueueId":9,"rq":2,"popTime":9,"pt":1700000000000,"invisibleTime":9,"it":60000,"bitSet":"AA==","b":"A4I="}`},
		{"long after short", `{"c":"g","consumerGroup":"x","t":"T","topic":"x","r":"1","retry":"0","so":5,"startOffset":9,` +
			`"q":3,"queueId":9,"rq":2,"reviveQueueId":9,"pt":1700000000000,"popTime":9,"it":60000,"invisibleTime":9,"b":"A4I=","bitSet":"AA=="}`},
		{"quoted numbers, number for a string, byte array", ` { "c" : "g" , "t":"T","r":1,"so":"5","q":"3","rq":"2",` +
			`"pt":"1700000000000","it":"60000","b":[3,-126]} `},
		{"escapes and unknown members", `{"c":"\u0067","t":"\u0054","r":"1","so":5,"q":3,"rq":2,"pt":1700000000000,"it":60000,` +
			`"b":"A4I=","x":{"y":[1,2.5e3,true,null,"z"]},"extra":null}`},
	} {
		got, err := DecodeBatchAck([]byte(`{"brokerName":"b","acks":[` + tc.ack + `]}`))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(got.Acks) != 1 || !reflect.DeepEqual(got.Acks[0], want) || got.BrokerName != "b" {
			t.Errorf("%s: %+v, want %+v", tc.name, got, want)
		}
	}
	nulls, err := DecodeBatchAck([]byte(`{"acks":[null,{"c":null,"t":null,"r":null,"so":null,"q":null,"rq":null,"pt":null,"it":null,"b":null}],"brokerName":null}`))
	if err != nil || len(nulls.Acks) != 2 || !reflect.DeepEqual(nulls.Acks[0], BatchAck{}) || !reflect.DeepEqual(nulls.Acks[1], BatchAck{}) {
		t.Errorf("nulls: %+v %v", nulls, err)
	}
	for _, empty := range []string{`null`, `{}`, `{"acks":null}`, `{"acks":[]}`} {
		if b, err := DecodeBatchAck([]byte(empty)); err != nil || len(b.Acks) != 0 {
			t.Errorf("%s: %+v %v", empty, b, err)
		}
	}
	for _, bad := range []string{``, `[]`, `{"acks":{}}`, `{"acks":[1]}`, `{"acks":[{"c":true}]}`, `{"acks":[{"b":[300]}]}`,
		`{"acks":[{"b":{}}]}`, `{"acks":[{"pt":1.5}]}`, `{"acks":[]} x`, `{"acks":[{"c":"g"]}`} {
		if _, err := DecodeBatchAck([]byte(bad)); !errors.Is(err, ErrBadBatchAck) {
			t.Errorf("%s: %v, want ErrBadBatchAck", bad, err)
		}
	}
}

func FuzzParseHandle(f *testing.F) {
	f.Add("5 1700000000000 60000 0 0 broker-a 3 7")
	f.Add("5 1 2 999 1 b 0")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHandle(s)
		if err != nil {
			return
		}
		if h.QueueOffset >= 0 && h.QueueID >= 0 {
			back, err := ParseHandle(h.String())
			if err != nil || back != h {
				t.Fatalf("%q -> %+v -> %q -> %+v %v", s, h, h.String(), back, err)
			}
		}
	})
}

func FuzzDecodeBatchAck(f *testing.F) {
	f.Add([]byte(`{"acks":[{"b":"AwI=","c":"g","it":60000,"pt":1,"q":3,"r":"1","rq":0,"so":5,"t":"T"}]}`))
	f.Add([]byte(`{"acks":[{"bitSet":[1,-1]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := DecodeBatchAck(body)
		if err != nil {
			return
		}
		// What the broker takes from an entry: its offsets within the
		// queue's bounds, in order, no more than Count says.
		for i := range b.Acks {
			a := &b.Acks[i]
			if a.StartOffset < 0 || a.StartOffset > 1<<62 {
				continue
			}
			lo, hi := a.StartOffset+3, a.StartOffset+int64(8*len(a.Bits))-3
			got := a.OffsetsIn(lo, hi)
			if len(got) > a.Count() {
				t.Fatalf("entry %d: %d offsets in [%d, %d], Count says %d", i, len(got), lo, hi, a.Count())
			}
			for j, off := range got {
				if off < lo || off > hi || j > 0 && off <= got[j-1] {
					t.Fatalf("entry %d: offsets %v in [%d, %d]", i, got, lo, hi)
				}
			}
		}
		// And the body the Java client would write of it reads back the
		// same (strings of invalid UTF-8 are written with U+FFFD).
		if !utf8.Valid(body) {
			return
		}
		again, err := DecodeBatchAck(b.AppendJSON(nil))
		if err != nil {
			t.Fatalf("the body written back does not read: %v", err)
		}
		if len(again.Acks) != len(b.Acks) || again.BrokerName != b.BrokerName {
			t.Fatalf("read back %+v, want %+v", again, b)
		}
		for i := range b.Acks {
			x, y := b.Acks[i], again.Acks[i]
			if !bytes.Equal(x.Bits, y.Bits) {
				t.Fatalf("entry %d: bits %x read back as %x", i, x.Bits, y.Bits)
			}
			x.Bits, y.Bits = nil, nil
			if !reflect.DeepEqual(x, y) {
				t.Fatalf("entry %d: %+v read back as %+v", i, x, y)
			}
		}
	})
}

func TestPutBatchesBoundBytesAndCount(t *testing.T) {
	big := make([]byte, 300<<10)
	var msgs []*commitlog.Message
	for i := 0; i < 10; i++ {
		msgs = append(msgs, &commitlog.Message{Body: big})
	}
	for i := 0; i < 600; i++ {
		msgs = append(msgs, &commitlog.Message{Body: []byte("x")})
	}
	n := 0
	for _, b := range putBatches(msgs) {
		size := 0
		for _, m := range b {
			size += len(m.Body)
		}
		if len(b) == 0 || len(b) > revivePutMessages || (len(b) > 1 && size > revivePutBytes) {
			t.Fatalf("batch of %d messages, %d bytes", len(b), size)
		}
		n += len(b)
	}
	if n != len(msgs) {
		t.Fatalf("%d of %d messages in batches", n, len(msgs))
	}
}

// BenchmarkDecodeBatchAck decodes the batch ack of one 32-message pop, as
// the Java client sends it.
func BenchmarkDecodeBatchAck(b *testing.B) {
	body := []byte(`{"acks":[{"b":"/////w==","c":"BenchPopGroup","it":60000,"pt":1700000000000,"q":3,"r":"0","rq":0,"so":5,"t":"BenchPop_1_0"}],"brokerName":"broker-a"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeBatchAck(body); err != nil {
			b.Fatal(err)
		}
	}
}
