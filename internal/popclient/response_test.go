package popclient

import (
	"fmt"
	"net/netip"
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
		if _, err := c.batchAckBody(testGroup, testTopic, res.Messages); err != nil {
			b.Fatal(err)
		}
	}
}
