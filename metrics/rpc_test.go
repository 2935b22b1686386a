package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

func TestRPCLatencyAsRocketMQ(t *testing.T) {
	for _, names := range []struct {
		naming Naming
		name   string
	}{
		{UnitSuffixed, "rocketmq_rpc_latency_milliseconds"},
		{Bare, "rocketmq_rpc_latency"},
	} {
		t.Run(namingName(names.naming), func(t *testing.T) { testRPCLatencyAsRocketMQ(t, names.naming, names.name) })
	}
}

// testRPCLatencyAsRocketMQ checks the histogram served as name.
func testRPCLatencyAsRocketMQ(t *testing.T, naming Naming, name string) {
	m := New(map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "broker-a"}, Sources{}, naming)
	send := remoting.Answer{RequestCode: remoting.SendMessageV2, ResponseCode: remoting.Success}
	for _, d := range []time.Duration{300 * time.Microsecond, 999 * time.Microsecond, 2 * time.Millisecond, 40 * time.Millisecond} {
		send.Elapsed = d
		m.Answered(send)
	}
	m.Answered(remoting.Answer{RequestCode: remoting.PullMessage, ResponseCode: remoting.PullNotFound, Held: true,
		Elapsed: 1500 * time.Millisecond})
	m.Answered(remoting.Answer{RequestCode: remoting.UpdateConsumerOffset, ResponseCode: remoting.Success,
		Outcome: remoting.AnswerOneway})
	m.Answered(remoting.Answer{RequestCode: remoting.HeartBeat, ResponseCode: remoting.Success,
		Outcome: remoting.AnswerFailed, Elapsed: 4 * time.Second})
	m.Answered(remoting.Answer{RequestCode: 10001, ResponseCode: 77})
	var off *Broker
	off.Answered(send) // the exporter is off: no panic

	text := scrape(t, m)
	const c = `cluster="c1",`
	const n = `node_id="broker-a",node_type="broker",protocol_type="remoting"`
	send1 := name + `_bucket{` + c + `is_long_polling="false",` + n + `,request_code="send_message_v2",response_code="success",result="success",le=`
	for _, want := range []string{
		// Whole milliseconds, as RocketMQ records them: 0.3 and 0.999 ms
		// are 0, 2 ms falls in the 3 ms bucket, 40 ms in the 100 ms one.
		send1 + `"1"} 2`,
		send1 + `"3"} 3`,
		send1 + `"10"} 3`,
		send1 + `"100"} 4`,
		name + `_sum{` + c + `is_long_polling="false",` + n + `,request_code="send_message_v2",response_code="success",result="success"} 42`,
		name + `_count{` + c + `is_long_polling="false",` + n + `,request_code="send_message_v2",response_code="success",result="success"} 4`,
		name + `_bucket{` + c + `is_long_polling="true",` + n + `,request_code="pull_message",response_code="pull_not_found",result="success",le="1000"} 0`,
		name + `_bucket{` + c + `is_long_polling="true",` + n + `,request_code="pull_message",response_code="pull_not_found",result="success",le="2000"} 1`,
		name + `_count{` + c + `is_long_polling="false",` + n + `,request_code="update_consumer_offset",response_code="success",result="oneway"} 1`,
		name + `_bucket{` + c + `is_long_polling="false",` + n + `,request_code="heart_beat",response_code="success",result="write_channel_failed",le="3000"} 0`,
		name + `_bucket{` + c + `is_long_polling="false",` + n + `,request_code="heart_beat",response_code="success",result="write_channel_failed",le="+Inf"} 1`,
		name + `_count{` + c + `is_long_polling="false",` + n + `,request_code="10001",response_code="77",result="success"} 1`,
	} {
		if !strings.Contains(text, "\n"+want+"\n") {
			t.Errorf("scrape lacks\n%s", want)
		}
	}
	// RocketMQ's buckets, no others.
	var les []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, send1) {
			les = append(les, strings.SplitN(strings.TrimPrefix(line, send1), "}", 2)[0])
		}
	}
	if got := strings.Join(les, " "); got != `"1" "3" "5" "7" "10" "100" "1000" "2000" "3000" "+Inf"` {
		t.Errorf("buckets %s", got)
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// Past maxRPCSeriesCached kinds of answer the rest still count. The kinds
// differ by response code: request codes no one defines all share the
// "unknown" series (TestRPCLatencySeriesAreBoundedUnderMadeUpRequestCodes),
// so they can no longer fill the cache as this test once had them do.
func TestRPCSeriesBeyondTheCache(t *testing.T) {
	m := New(nil, Sources{}, UnitSuffixed)
	for code := range int32(maxRPCSeriesCached + 10) {
		m.Answered(remoting.Answer{RequestCode: remoting.SendMessageV2, ResponseCode: 100000 + code})
	}
	m.Answered(remoting.Answer{RequestCode: remoting.SendMessageV2, ResponseCode: 100000 + maxRPCSeriesCached + 5})
	if n := len(*m.rpc.seen.Load()); n != maxRPCSeriesCached {
		t.Fatalf("%d kinds cached", n)
	}
	text := scrape(t, m)
	want := `rocketmq_rpc_latency_milliseconds_count{is_long_polling="false",protocol_type="remoting",request_code="send_message_v2",response_code="` +
		"104101" + `",result="success"} 2`
	if !strings.Contains(text, want+"\n") {
		t.Fatalf("scrape lacks %s", want)
	}
}

// A request code neither RocketMQ nor rocketkv defines is the client's
// choice: labelled by its number (as RocketMQ does) every made-up code
// would add a series of rocketmq_rpc_latency, kept forever. They are all
// labelled "unknown"; known codes, rocketkv's own among them, keep their
// labels.
func TestRPCLatencySeriesAreBoundedUnderMadeUpRequestCodes(t *testing.T) {
	m := New(map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "b"}, Sources{}, UnitSuffixed)
	const codes = 20000
	for i := range int32(codes) {
		m.Answered(remoting.Answer{RequestCode: 1_000_000 + i, ResponseCode: remoting.RequestCodeNotSupported})
	}
	m.Answered(remoting.Answer{RequestCode: -7, ResponseCode: remoting.RequestCodeNotSupported})
	m.Answered(remoting.Answer{RequestCode: remoting.PullMessage, ResponseCode: remoting.Success})
	m.Answered(remoting.Answer{RequestCode: remoting.GetPopState, ResponseCode: remoting.Success})
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), RPCLatency) {
			series += len(mf.GetMetric())
		}
	}
	if series != 3 {
		t.Errorf("%d made-up request codes and 2 known ones made %d series of %s, want 3", codes+1, series, RPCLatency)
	}
	text := scrape(t, m)
	const p = `rocketmq_rpc_latency_milliseconds_count{cluster="c1",is_long_polling="false",node_id="b",node_type="broker",protocol_type="remoting",request_code=`
	for _, want := range []string{
		p + `"unknown",response_code="request_code_not_supported",result="success"} 20001`,
		p + `"pull_message",response_code="success",result="success"} 1`,
		p + `"10003",response_code="success",result="success"} 1`,
	} {
		if !strings.Contains(text, "\n"+want+"\n") {
			t.Errorf("scrape lacks\n%s", want)
		}
	}
}

// BenchmarkAnswered is what recording one answer adds to a request: the
// send path's series, seen before, from one goroutine and from all.
func BenchmarkAnswered(b *testing.B) {
	m := New(map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "broker-a"}, Sources{}, UnitSuffixed)
	a := remoting.Answer{RequestCode: remoting.SendMessageV2, ResponseCode: remoting.Success, Elapsed: 700 * time.Microsecond}
	m.Answered(a)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.Answered(a)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Answered(a)
			}
		})
	})
}
