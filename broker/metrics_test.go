package broker

import (
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// With metricsExporterType=PROM the broker serves RocketMQ 5's metrics:
// producers' sends by topic and message type (not retries), pulls by
// topic and group, connections by client, and the broker's gauges.
func TestPrometheusMetrics(t *testing.T) {
	b := startTestBroker(t, map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
		"metricsLabel": "region:eu,bad,topic:x,a-b:c,node_id:n", "brokerClusterName": "MetricsCluster",
	})
	if b.MetricsAddr() == nil {
		t.Fatal("no exporter")
	}
	c := b.client(nil)
	mustSend(t, c, "MetT", 0, "a", "")
	mustSend(t, c, "MetT", 0, "bb", "")
	mustSend(t, c, "MetT", 0, "delayed", "DELAY\x012\x02")
	mustSend(t, c, "%RETRY%g-met", 0, "retry", "")
	heartbeat(t, c, heartbeatBody("10.0.0.7@met", "pg-met", "g-met", map[string]string{"MetT": "*"}))
	b.caughtUp()
	r := call(t, c, remoting.PullMessage, pullReq("g-met", "MetT", 0, 0, 0, 0, "*"), nil)
	if r.Code != remoting.Success || len(decodeRecords(t, r.Body)) != 2 {
		t.Fatalf("pull: %d %s", r.Code, r.Remark)
	}
	commit(t, c, "g-met", "MetT", 0, 1) // one of the two messages consumed
	// The first message fails for good: to the group's dead-letter topic.
	first := decodeRecords(t, r.Body)[0]
	if r := call(t, c, remoting.ConsumerSendMsgBack, map[string]string{
		"offset": strconv.FormatInt(first.PhyOffset, 10), "group": "g-met", "delayLevel": "-1",
		"originMsgId": commitlog.MessageID(first.StoreHost, first.PhyOffset), "originTopic": "MetT",
	}, nil); r.Code != remoting.Success {
		t.Fatalf("send back to the DLQ: %d %s", r.Code, r.Remark)
	}
	// A committed and a rolled-back transaction of TxMetT (their half
	// sends count as messages in of type transaction, as RocketMQ counts
	// them).
	born := time.Now().UnixMilli()
	for i, state := range []int{8, 12} {
		h := sendHalf(t, c, "TxMetT", 0, "UNIQ-MET-"+strconv.Itoa(i), "tx", "", born)
		if r := endTxn(t, c, h, "pg", state, false); r.Code != remoting.Success {
			t.Fatalf("END_TRANSACTION %d: %d %s", state, r.Code, r.Remark)
		}
	}
	// A topic and a group created by an admin tool: their creation times.
	if r := call(t, c, remoting.UpdateAndCreateTopic, map[string]string{"topic": "CreatedT", "readQueueNums": "2",
		"writeQueueNums": "2", "perm": "6"}, nil); r.Code != remoting.Success {
		t.Fatalf("create topic: %d %s", r.Code, r.Remark)
	}
	ensureGroup(t, c, "g-created")
	// A retried message that ends in the DLQ counts under the topic it was
	// first sent to (RETRY_TOPIC), not the retry topic.
	b.countDLQ([]*commitlog.Message{{Topic: "%DLQ%g-met",
		Properties: "DLQ_ORIGIN_TOPIC\x01%RETRY%g-met\x02RETRY_TOPIC\x01MetT\x02"}})
	resp, err := http.Get("http://" + b.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	const l = `cluster="MetricsCluster",`
	const n = `node_id="broker-a",node_type="broker",region="eu"`
	for _, want := range []string{
		`rocketmq_messages_in_total{` + l + `is_system="false",message_type="normal",` + n + `,topic="MetT"} 2`,
		`rocketmq_messages_in_total{` + l + `is_system="false",message_type="delay",` + n + `,topic="MetT"} 1`,
		`rocketmq_messages_out_total{` + l + `consumer_group="g-met",is_system="false",` + n + `,topic="MetT"} 2`,
		`rocketmq_broker_permission{` + l + n + `} 6`,
		`rocketmq_producer_connections{` + l + `language="go",node_id="broker-a",node_type="broker",protocol_type="remoting",region="eu",version="479"} 1`,
		`rocketmq_consumer_connections{` + l + `consume_mode="push",consumer_group="g-met",is_system="false",language="go",node_id="broker-a",node_type="broker",protocol_type="remoting",region="eu",version="479"} 1`,
		`rocketmq_storage_dispatch_behind_bytes{` + l + n + `,storage_medium="disk",storage_type="local"} 0`,
		`rocketmq_send_to_dlq_messages_total{` + l + `consumer_group="g-met",is_system="false",` + n + `,topic="MetT"} 2`,
		`rocketmq_commit_messages_total{` + l + n + `,topic="TxMetT"} 1`,
		`rocketmq_rollback_messages_total{` + l + n + `,topic="TxMetT"} 1`,
		`rocketmq_messages_in_total{` + l + `is_system="false",message_type="transaction",` + n + `,topic="TxMetT"} 2`,
		`rocketmq_consumer_lag_messages{` + l + `consumer_group="g-met",is_retry="false",is_system="false",` + n + `,topic="MetT"} 1`,
		`rocketmq_message_size_count{` + l + `is_system="false",message_type="normal",` + n + `,topic="MetT"} 2`,
		`rocketmq_finish_message_latency_count{` + l + n + `,topic="TxMetT"} 1`,
		`rocketmq_topic_create_execution_time_count{` + l + `invocation_status="success",is_system="false",` + n + `} 1`,
		`rocketmq_consumer_group_create_execution_time_count{` + l + `invocation_status="success",` + n + `} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("scrape lacks\n%s", want)
		}
	}
	for _, unwanted := range []string{`topic="%RETRY%g-met"`} {
		if strings.Contains(text, unwanted) {
			t.Errorf("scrape counts %s", unwanted)
		}
	}
	if !regexp.MustCompile(`rocketmq_consumer_lag_latency\{[^}]*consumer_group="g-met"[^}]*topic="MetT"\} \d+\n`).MatchString(text) {
		t.Error("scrape lacks the lag latency of g-met on MetT")
	}
	if !strings.Contains(text, "rocketmq_topic_number{") || !strings.Contains(text, "rocketmq_consumer_group_number{") {
		t.Error("scrape lacks the topic and group numbers")
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// A broker whose Prometheus port is taken does not start, says why, and
// leaves its store free for the next start.
func TestMetricsPortTakenStopsTheStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	store := t.TempDir()
	err = startError(t, map[string]string{
		"storePathRootDir": store, "listenPort": "0", "brokerIP1": "127.0.0.1", "mappedFileSizeCommitLog": strconv.Itoa(4 << 20),
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1",
		"metricsPromExporterPort": strconv.Itoa(taken.Addr().(*net.TCPAddr).Port),
	})
	if err == nil || !strings.Contains(err.Error(), "metrics exporter: listen") {
		t.Fatalf("start with the metrics port taken: %v", err)
	}
	again := startTestBrokerAt(t, store, nil)
	mustSend(t, again.client(nil), "AfterFailedStart", 0, "x", "")
}
