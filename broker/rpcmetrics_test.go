package broker

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// rocketmq_rpc_latency_milliseconds counts every answer of the broker under the codes
// RocketMQ names (the codes no one defines under "unknown"), and tells held
// requests (long polling) from the others.
func TestRPCLatencyCountsTheAnswers(t *testing.T) {
	b := startTestBroker(t, map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	})
	c := b.client(nil)
	for i := range 3 {
		mustSend(t, c, "RpcT", 0, "m"+strconv.Itoa(i), "")
	}
	b.caughtUp()
	if r := call(t, c, 9999, nil, nil); r.Code != remoting.RequestCodeNotSupported {
		t.Fatalf("unknown code: %d", r.Code)
	}
	if r := call(t, c, remoting.PullMessage, pullReq("g-rpc", "NoSuchTopic", 0, 0, 0, 0, "*"), nil); r.Code != remoting.TopicNotExist {
		t.Fatalf("pull of a missing topic: %d %s", r.Code, r.Remark)
	}
	if r := call(t, c, remoting.PullMessage, pullReq("g-rpc", "RpcT", 0, 0, pullSuspend, 15*time.Second, "*"), nil); r.Code != remoting.Success {
		t.Fatalf("pull: %d %s", r.Code, r.Remark)
	}
	// A pull held until a send wakes it, at least 50 ms later.
	done := b.holdPull(c, pullReq("g-rpc", "RpcT", 0, 3, pullSuspend, 15*time.Second, "*"))
	time.Sleep(50 * time.Millisecond)
	mustSend(t, c, "RpcT", 0, "wake", "")
	if r := <-done; r.resp == nil || r.resp.Code != remoting.Success {
		t.Fatalf("held pull: %+v", r.resp)
	}
	// A pop of an empty queue held until its poll time is up.
	if r := call(t, c, remoting.UpdateAndCreateTopic, map[string]string{"topic": "RpcEmpty", "readQueueNums": "1",
		"writeQueueNums": "1", "perm": "6"}, nil); r.Code != remoting.Success {
		t.Fatalf("create topic: %d %s", r.Code, r.Remark)
	}
	pc := popclient.New(c, b.cfg.BrokerName)
	if res := mustPop(t, pc, popclient.PopRequest{Group: "g-rpc", Topic: "RpcEmpty", QueueID: 0, MaxMsgNums: 1,
		InvisibleTime: time.Minute, PollTime: 300 * time.Millisecond}); res.Code != remoting.PollingTimeout {
		t.Fatalf("held pop of an empty topic: %d %s", res.Code, res.Remark)
	}
	if code, has, _, err := pc.Notification(ctx20(t), "g-rpc", "RpcEmpty", 0, 300*time.Millisecond, false); err != nil ||
		code != remoting.Success || has {
		t.Fatalf("held notification of an empty topic: %d %v %v", code, has, err)
	}
	text := scrapeMetrics(t, b)
	count := func(request, response, held string) float64 {
		return metricValue(t, text, "rocketmq_rpc_latency_milliseconds_count", `request_code="`+request+`"`,
			`response_code="`+response+`"`, `is_long_polling="`+held+`"`, `result="success"`, `protocol_type="remoting"`)
	}
	for _, w := range []struct {
		request, response, held string
		want                    float64
	}{
		{"send_message_v2", "success", "false", 4},
		// A code no one defines is the client's choice: "unknown", not its
		// number as RocketMQ writes it, so that made-up codes cannot add
		// series without bound (metrics.requestCodeUnknown).
		{"unknown", "request_code_not_supported", "false", 1},
		{"pull_message", "topic_not_exist", "false", 1},
		{"pull_message", "success", "false", 1},
		{"pull_message", "success", "true", 1},
		{"pop_message", "polling_timeout", "true", 1},
		{"notification", "success", "true", 1},
	} {
		if got := count(w.request, w.response, w.held); got != w.want {
			t.Errorf("%s answered %s, held %s: %v answers counted, want %v", w.request, w.response, w.held, got, w.want)
		}
	}
	// The held pull's latency includes its hold: nothing at or below 10 ms.
	if v := metricValue(t, text, "rocketmq_rpc_latency_milliseconds_bucket", `request_code="pull_message"`, `is_long_polling="true"`, `le="10"`); v != 0 {
		t.Errorf("held pull counted at or below 10 ms: %v", v)
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// scrapeMetrics returns one scrape of the broker's exporter.
func scrapeMetrics(t *testing.T, b *testBroker) string {
	t.Helper()
	return testutil.Scrape(t, b.MetricsAddr().String())
}

// metricValue returns the value of the one series of metric whose labels
// include every pair given (`k="v"`), failing the test unless exactly one
// series matches.
func metricValue(t *testing.T, text, metric string, pairs ...string) float64 {
	t.Helper()
	var found []string
	for _, line := range strings.Split(text, "\n") {
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, metric+"{"), "} ")
		if !ok || len(labels) == len(line) || !strings.HasPrefix(line, metric+"{") {
			continue
		}
		all := true
		for _, p := range pairs {
			all = all && (strings.HasPrefix(labels, p+",") || strings.Contains(labels, ","+p+",") ||
				strings.HasSuffix(labels, ","+p) || labels == p)
		}
		if all {
			found = append(found, value)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d series of %s with %v, want 1", len(found), metric, pairs)
	}
	v, err := strconv.ParseFloat(found[0], 64)
	if err != nil {
		t.Fatalf("%s %v: %v", metric, pairs, err)
	}
	return v
}
