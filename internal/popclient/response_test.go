package popclient

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// Test responses are built the way the broker builds them: records with
// commitlog.AppendRecord (pop-retry records renamed to the requested
// topic and given a POP_CK, as pop.reencodeRetry does) and the header
// strings with pop.InfoBuilder.

const (
	testTopic    = "BenchTopic"
	testGroup    = "bench-group"
	testBroker   = "broker-a"
	testPopTime  = 1700000000000
	testInvis    = 60000
	testBodySize = 1024
)

// queueSpec is one queue of a test pop response.
type queueSpec struct {
	flag    string
	queueID int32
	ck      int64
	n       int
}

// responseSpec describes a test pop response.
type responseSpec struct {
	queues []queueSpec
	// order makes an orderly pop: reviveQid 999 and an orderCountInfo.
	order bool
}

// testProperties are the properties a Java producer's message carries.
func testProperties(queueID int32, offset int64) string {
	return commitlog.FormatProperties(map[string]string{
		commitlog.PropertyUniqID: fmt.Sprintf("7F0000010001%04X%016X", queueID, offset),
		commitlog.PropertyTags:   "TagA",
		commitlog.PropertyWait:   "true",
		"MSG_REGION":             "DefaultRegion",
		"TRACE_ON":               "true",
	})
}

// buildResponse returns a successful pop response as the broker sends it.
func buildResponse(tb testing.TB, spec responseSpec) *remoting.Command {
	tb.Helper()
	reviveQID := int32(0)
	if spec.order {
		reviveQID = pop.OrderReviveQueue
	}
	payload := []byte(strings.Repeat("x", testBodySize))
	var ib pop.InfoBuilder
	var body []byte
	for _, q := range spec.queues {
		offsets := make([]int64, q.n)
		for i := range offsets {
			off := q.ck + int64(i)
			offsets[i] = off
			m := commitlog.Message{QueueID: q.queueID, QueueOffset: off, PhyOffset: 4096 * off, BornTimestamp: testPopTime - 5,
				BornHost: netip.MustParseAddrPort("10.0.0.7:51234"), StoreTimestamp: testPopTime - 4,
				StoreHost: netip.MustParseAddrPort("10.0.0.1:10911"), Body: payload, Topic: testTopic,
				Properties: testProperties(q.queueID, off)}
			if q.flag != pop.FlagNormal {
				h := pop.Handle{CKOffset: q.ck, PopTime: testPopTime, InvisibleTime: testInvis, ReviveQID: reviveQID,
					RetryFlag: q.flag, BrokerName: testBroker, QueueID: q.queueID, QueueOffset: off}
				m.Properties += pop.PropertyPopCK + "\x01" + h.String() + "\x02"
			}
			var err error
			if body, err = commitlog.AppendRecord(body, &m); err != nil {
				tb.Fatal(err)
			}
			if spec.order {
				ib.AddOrderOffset(q.flag, q.queueID, off, int32(i%3))
			}
		}
		ib.AddQueue(q.flag, q.queueID, q.ck, offsets)
		if spec.order {
			ib.AddOrderQueue(q.flag, q.queueID, 0)
		}
	}
	h := remoting.Header{}
	h.SetInt64("popTime", testPopTime)
	h.SetInt64("invisibleTime", testInvis)
	h.SetInt32("reviveQid", reviveQID)
	h.SetInt64("restNum", 100)
	h.Set("startOffsetInfo", ib.StartOffsetInfo())
	h.Set("msgOffsetInfo", ib.MsgOffsetInfo())
	if spec.order {
		h.Set("orderCountInfo", ib.OrderCountInfo())
	}
	return &remoting.Command{Code: remoting.Success, ExtFields: h, Body: body}
}

// benchResponses are 32-message pops like those of `bench pop`.
var benchResponses = []struct {
	name string
	spec responseSpec
}{
	{"normal", responseSpec{queues: []queueSpec{{pop.FlagNormal, 1, 1000, 16}, {pop.FlagNormal, 2, 2000, 16}}}},
	{"retry", responseSpec{queues: []queueSpec{{pop.FlagNormal, 1, 1000, 16}, {pop.FlagRetryV2, 0, 30, 16}}}},
	{"order", responseSpec{queues: []queueSpec{{pop.FlagNormal, 1, 1000, 32}}, order: true}},
}

func BenchmarkDecodePop(b *testing.B) {
	c := &Client{BrokerName: testBroker}
	for _, r := range benchResponses {
		b.Run(r.name, func(b *testing.B) {
			resp := buildResponse(b, r.spec)
			b.ReportAllocs()
			for b.Loop() {
				res, err := c.decodePop(resp, testTopic, testGroup)
				if err != nil || len(res.Messages) != 32 {
					b.Fatal(len(res.Messages), err)
				}
			}
		})
	}
}

func BenchmarkBatchAckBody(b *testing.B) {
	c := &Client{BrokerName: testBroker}
	res, err := c.decodePop(buildResponse(b, benchResponses[0].spec), testTopic, testGroup)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if body, err := c.batchAckBody(testGroup, testTopic, res.Messages); err != nil || len(body) == 0 {
			b.Fatalf("batch ack body %q: %v", body, err)
		}
	}
}

// decodePopPlain is decodePop as first written: a string key built per
// lookup, RealTopic per message, the slice grown by append. decodePop
// must return what it returns.
func decodePopPlain(c *Client, resp *remoting.Command, topic, group string) (PopResult, error) {
	res := PopResult{Code: resp.Code, Remark: resp.Remark, Header: resp.ExtFields}
	if resp.Code != remoting.Success {
		return res, nil
	}
	h := remoting.Header(resp.ExtFields)
	var err error
	if res.PopTime, err = h.Int64("popTime"); err != nil {
		return res, err
	}
	if res.InvisibleTime, err = h.Int64("invisibleTime"); err != nil {
		return res, err
	}
	if res.ReviveQID, err = h.Int32("reviveQid"); err != nil {
		return res, err
	}
	res.RestNum, _ = h.OptInt64("restNum", 0)
	starts, err := pop.ParseStartOffsetInfo(h.OptString("startOffsetInfo", ""))
	if err != nil {
		return res, err
	}
	offs, err := pop.ParseMsgOffsetInfo(h.OptString("msgOffsetInfo", ""))
	if err != nil {
		return res, err
	}
	counts, err := pop.ParseOrderCountInfo(h.OptString("orderCountInfo", ""))
	if err != nil {
		return res, err
	}
	for body := resp.Body; len(body) > 0; {
		m, err := commitlog.Decode(body)
		if err != nil {
			return res, fmt.Errorf("decode popped record: %w", err)
		}
		body = body[m.StoreSize:]
		pm := Message{Message: m}
		if ck, ok := commitlog.LookupProperty(m.Properties, pop.PropertyPopCK); ok {
			if pm.Handle, err = pop.ParseHandle(ck); err != nil {
				return res, err
			}
		} else {
			flag := pop.RetryFlagOf(m.Topic)
			pm.Handle = pop.Handle{CKOffset: starts[pop.InfoKey(flag, m.QueueID)], PopTime: res.PopTime, InvisibleTime: res.InvisibleTime,
				ReviveQID: res.ReviveQID, RetryFlag: flag, BrokerName: c.BrokerName, QueueID: m.QueueID, QueueOffset: m.QueueOffset}
		}
		if pm.RealTopic, err = pop.RealTopic(topic, group, pm.Handle.RetryFlag); err != nil {
			return res, err
		}
		if n, ok := counts[pop.OrderOffsetKey(pm.Handle.RetryFlag, m.QueueID, m.QueueOffset)]; ok {
			pm.OrderCount = n
		} else if n, ok := counts[pop.InfoKey(pm.Handle.RetryFlag, m.QueueID)]; ok {
			pm.OrderCount = n
		}
		if len(offs[pop.InfoKey(pm.Handle.RetryFlag, pm.Handle.QueueID)]) == 0 {
			return res, fmt.Errorf("message %s/%d@%d missing from msgOffsetInfo", m.Topic, m.QueueID, m.QueueOffset)
		}
		res.Messages = append(res.Messages, pm)
	}
	return res, nil
}

// checkDecodePop fails t when decodePop and decodePopPlain disagree on
// resp: on the result, and on the error's text.
func checkDecodePop(t *testing.T, resp *remoting.Command) {
	t.Helper()
	c := &Client{BrokerName: testBroker}
	got, gotErr := c.decodePop(resp, testTopic, testGroup)
	want, wantErr := decodePopPlain(c, resp, testTopic, testGroup)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("error %v, want %v", gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", got, want)
	}
}

// record encodes one record of a test response.
func record(tb testing.TB, topic string, queueID int32, offset int64, props string) []byte {
	tb.Helper()
	m := commitlog.Message{QueueID: queueID, QueueOffset: offset, BornHost: netip.MustParseAddrPort("10.0.0.7:51234"),
		StoreHost: netip.MustParseAddrPort("10.0.0.1:10911"), Body: []byte("b"), Topic: topic, Properties: props}
	rec, err := commitlog.AppendRecord(nil, &m)
	if err != nil {
		tb.Fatal(err)
	}
	return rec
}

// withHeader returns a copy of resp with header key set to value, or
// removed when value is "-".
func withHeader(resp *remoting.Command, key, value string) *remoting.Command {
	out := *resp
	out.ExtFields = map[string]string{}
	for k, v := range resp.ExtFields {
		out.ExtFields[k] = v
	}
	if value == "-" {
		delete(out.ExtFields, key)
	} else {
		out.ExtFields[key] = value
	}
	return &out
}

func TestDecodePopMatchesPlainDecoding(t *testing.T) {
	for _, r := range benchResponses {
		t.Run(r.name, func(t *testing.T) { checkDecodePop(t, buildResponse(t, r.spec)) })
	}
	normal := buildResponse(t, benchResponses[0].spec)
	ordered := buildResponse(t, benchResponses[2].spec)
	ck := func(flag string, q int32, off int64) string {
		h := pop.Handle{CKOffset: off, PopTime: testPopTime, InvisibleTime: testInvis, RetryFlag: flag, BrokerName: "b", QueueID: q, QueueOffset: off}
		return pop.PropertyPopCK + "\x01" + h.String() + "\x02"
	}
	cases := map[string]*remoting.Command{
		"mixed queues": buildResponse(t, responseSpec{queues: []queueSpec{{pop.FlagRetryV1, 0, 7, 3}, {pop.FlagNormal, 3, 0, 5},
			{pop.FlagRetryV2, 1, 9, 2}, {pop.FlagNormal, 0, 1, 1}}}),
		"empty body":        withHeader(&remoting.Command{Code: remoting.Success, ExtFields: normal.ExtFields}, "msgOffsetInfo", ""),
		"polling timeout":   {Code: remoting.PollingTimeout, Remark: "NO_MESSAGE_IN_QUEUE", ExtFields: map[string]string{"popTime": "x"}},
		"no popTime":        withHeader(normal, "popTime", "-"),
		"bad reviveQid":     withHeader(normal, "reviveQid", "x"),
		"bad restNum":       withHeader(normal, "restNum", "x"),
		"bad start info":    withHeader(normal, "startOffsetInfo", "0 1"),
		"bad msg info":      withHeader(normal, "msgOffsetInfo", "0 1 x"),
		"bad order info":    withHeader(normal, "orderCountInfo", "0 1 2 3"),
		"queue unlisted":    withHeader(normal, "msgOffsetInfo", "0 1 1000"),
		"queue unstarted":   withHeader(normal, "startOffsetInfo", "0 1 1000"),
		"queue counts only": withHeader(ordered, "orderCountInfo", "0 1 4"),
		"truncated body":    {Code: remoting.Success, ExtFields: normal.ExtFields, Body: normal.Body[:len(normal.Body)-3]},
		"garbage after":     {Code: remoting.Success, ExtFields: normal.ExtFields, Body: append(slices.Clone(normal.Body), 1, 2, 3, 4, 5, 6, 7, 8, 9)},
		"zero size record":  {Code: remoting.Success, ExtFields: normal.ExtFields, Body: make([]byte, 16)},
		"other topic": {Code: remoting.Success, ExtFields: map[string]string{"popTime": "1", "invisibleTime": "2", "reviveQid": "0",
			"startOffsetInfo": "1 0 3;0 0 3", "msgOffsetInfo": "1 0 3;0 0 3"},
			Body: slices.Concat(record(t, "%RETRY%"+testGroup+"_"+testTopic, 0, 3, ""), record(t, "Other", 0, 3, "A\x01b\x02"))},
		"handles": {Code: remoting.Success, ExtFields: map[string]string{"popTime": "1", "invisibleTime": "2", "reviveQid": "0",
			"msgOffsetInfo": "1 0 3;2 0 4;0 4 5"},
			Body: slices.Concat(record(t, testTopic, 0, 3, ck("1", 0, 3)), record(t, testTopic, 0, 4, "X\x01y\x02"+ck("2", 0, 4)),
				record(t, testTopic, 0, 5, ck("0", 4, 5)+"POP_CK\x01\x02"), record(t, testTopic, 0, 6, "NOT_POP_CK\x01x"))},
		"bad handle":   {Code: remoting.Success, ExtFields: normal.ExtFields, Body: record(t, testTopic, 1, 1000, "POP_CK\x011 2 x 4")},
		"bad flag":     {Code: remoting.Success, ExtFields: normal.ExtFields, Body: record(t, testTopic, 1, 1000, ck("7", 1, 1000))},
		"ck queue off": {Code: remoting.Success, ExtFields: normal.ExtFields, Body: record(t, testTopic, 1, 1000, ck("0", 9, 1000))},
	}
	for name, resp := range cases {
		t.Run(name, func(t *testing.T) { checkDecodePop(t, resp) })
	}
}

func FuzzDecodePop(f *testing.F) {
	seed := buildResponse(f, responseSpec{queues: []queueSpec{{pop.FlagNormal, 1, 5, 2}, {pop.FlagRetryV1, 0, 3, 1}}, order: true})
	h := seed.ExtFields
	f.Add(h["reviveQid"], h["startOffsetInfo"], h["msgOffsetInfo"], h["orderCountInfo"], seed.Body)
	f.Add("0", "0 0 3", "0 0 3;1 0 3", "", slices.Concat(record(f, testTopic, 0, 3, "POP_CK\x013 1 2 0 1 b 0 3\x02"),
		record(f, "%RETRY%g+"+testTopic, 0, 3, "")))
	f.Add("0", "0 0 3", "0 0 3", "", record(f, testTopic, 1, 9, "INNER_MULTI_DISPATCH\x01%LMQ%x,%LMQ%"+testTopic+"\x02INNER_MULTI_QUEUE_OFFSET\x015,3\x02"))
	f.Fuzz(func(t *testing.T, reviveQid, startInfo, msgInfo, orderInfo string, body []byte) {
		resp := &remoting.Command{Code: remoting.Success, Body: body, ExtFields: map[string]string{
			"popTime": "1", "invisibleTime": "2", "reviveQid": reviveQid,
			"startOffsetInfo": startInfo, "msgOffsetInfo": msgInfo, "orderCountInfo": orderInfo}}
		checkDecodePop(t, resp)
		// Popped from a light message queue: the records' places come
		// from their properties; nothing may panic.
		_, _ = (&Client{BrokerName: testBroker}).decodePop(resp, "%LMQ%"+testTopic, testGroup)
	})
}

// batchAckBodyPlain is batchAckBody as first written: entries found
// through a map, the body written by json.Marshal.
func batchAckBodyPlain(c *Client, group, topic string, msgs []Message) ([]byte, error) {
	type key struct {
		flag       string
		q          int32
		pt, it, ck int64
	}
	idx := map[key]int{}
	body := pop.BatchAckBody{BrokerName: c.BrokerName}
	for _, m := range msgs {
		h := m.Handle
		k := key{h.RetryFlag, h.QueueID, h.PopTime, h.InvisibleTime, h.CKOffset}
		i, ok := idx[k]
		if !ok {
			i = len(body.Acks)
			idx[k] = i
			body.Acks = append(body.Acks, pop.BatchAck{ConsumerGroup: group, Topic: topic, Retry: h.RetryFlag,
				StartOffset: h.CKOffset, QueueID: h.QueueID, ReviveQueueID: h.ReviveQID, PopTime: h.PopTime, InvisibleTime: h.InvisibleTime})
		}
		if err := body.Acks[i].SetBit(h.QueueOffset - h.CKOffset); err != nil {
			return nil, err
		}
	}
	return json.Marshal(body)
}

func TestBatchAckBodyMatchesPlainBody(t *testing.T) {
	c := &Client{BrokerName: `broker "a"`}
	var all []Message
	for _, r := range benchResponses {
		res, err := c.decodePop(buildResponse(t, r.spec), testTopic, testGroup)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, res.Messages...)
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	shuffled := slices.Clone(all)
	rnd.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	// Handles differing in one field at a time, interleaved.
	base := pop.Handle{CKOffset: 10, PopTime: 1, InvisibleTime: 2, ReviveQID: 0, RetryFlag: pop.FlagNormal, QueueID: 1, QueueOffset: 12}
	var mixed []Message
	for i, change := range []func(*pop.Handle){
		func(*pop.Handle) {},
		func(h *pop.Handle) { h.CKOffset = 11 },
		func(h *pop.Handle) { h.PopTime = 3 },
		func(h *pop.Handle) { h.InvisibleTime = 4 },
		func(h *pop.Handle) { h.RetryFlag = pop.FlagRetryV1 },
		func(h *pop.Handle) { h.QueueID = 2 },
		func(h *pop.Handle) { h.ReviveQID = 5 }, // same entry: the first handle's reviveQid stays
	} {
		h := base
		change(&h)
		h.QueueOffset += int64(i)
		mixed = append(mixed, Message{Handle: h}, Message{Handle: base})
	}
	for name, msgs := range map[string][]Message{"none": nil, "one": all[:1], "responses": all, "shuffled": shuffled, "mixed": mixed} {
		for _, names := range [][2]string{{testGroup, testTopic}, {"g\\\"<>", "t\u2028\xff日本"}} {
			want, err := batchAckBodyPlain(c, names[0], names[1], msgs)
			if err != nil {
				t.Fatal(err)
			}
			// The same acks, whatever the escaping of the names.
			got, err := c.batchAckBody(names[0], names[1], msgs)
			if err != nil {
				t.Fatal(err)
			}
			fromGot, errGot := pop.DecodeBatchAck(got)
			fromWant, errWant := pop.DecodeBatchAck(want)
			if errGot != nil || errWant != nil || !reflect.DeepEqual(fromGot, fromWant) {
				t.Errorf("%s %q: body\n%s\nreads as\n%+v (%v)\nwant\n%+v (%v)", name, names, got, fromGot, errGot, fromWant, errWant)
			}
		}
	}
}

// A handle whose queue offset lies below its check point's, or absurdly
// far above it, cannot be acknowledged: an error, not a panic or a
// gigabyte bit set.
func TestBatchAckBodyRefusesOffsetsOutsideTheBitSet(t *testing.T) {
	c := &Client{BrokerName: testBroker}
	for name, off := range map[string]int64{"below": 99, "far above": 100 + pop.MaxAckBits} {
		msgs := []Message{{Handle: pop.Handle{CKOffset: 100, QueueOffset: 100}}, {Handle: pop.Handle{CKOffset: 100, QueueOffset: off}}}
		if body, err := c.batchAckBody(testGroup, testTopic, msgs); err == nil {
			t.Errorf("%s: body of %d bytes, want an error", name, len(body))
		}
	}
	msgs := []Message{{Handle: pop.Handle{CKOffset: 100, QueueOffset: 100 + pop.MaxAckBits - 1}}}
	if _, err := c.batchAckBody(testGroup, testTopic, msgs); err != nil {
		t.Fatalf("last offset of the span: %v", err)
	}
}
