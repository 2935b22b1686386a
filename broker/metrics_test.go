package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/metrics"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
	"github.com/rs/zerolog"
)

// With metricsExporterType=PROM the broker serves RocketMQ 5's metrics:
// producers' sends by topic and message type (not retries), pulls by
// topic and group, connections by client, and the broker's gauges.
func TestPrometheusMetrics(t *testing.T) {
	began := time.Now()
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
	text := scrapeMetrics(t, b)
	const l = `cluster="MetricsCluster",`
	const n = `node_id="broker-a",node_type="broker",region="eu"`
	for _, want := range []string{
		`rocketmq_messages_in_total{` + l + `is_system="false",message_type="normal",` + n + `,topic="MetT"} 2`,
		// A delayed message's send counts in the schedule topic, where
		// RocketMQ's store put it (its delivery, in 5 s, in MetT).
		`rocketmq_messages_in_total{` + l + `is_system="true",message_type="delay",` + n + `,topic="SCHEDULE_TOPIC_XXXX"} 1`,
		`rocketmq_messages_out_total{` + l + `consumer_group="g-met",is_system="false",` + n + `,topic="MetT"} 2`,
		`rocketmq_broker_permission{` + l + n + `} 6`,
		`rocketmq_producer_connections{` + l + `language="go",node_id="broker-a",node_type="broker",protocol_type="remoting",region="eu",version="v5_3_4"} 1`,
		`rocketmq_consumer_connections{` + l + `consume_mode="push",consumer_group="g-met",is_system="false",language="go",node_id="broker-a",node_type="broker",protocol_type="remoting",region="eu",version="v5_3_4"} 1`,
		`rocketmq_storage_dispatch_behind_bytes{` + l + n + `,storage_medium="disk",storage_type="local"} 0`,
		`rocketmq_send_to_dlq_messages_total{` + l + `consumer_group="g-met",is_system="false",` + n + `,topic="MetT"} 2`,
		`rocketmq_commit_messages_total{` + l + n + `,topic="TxMetT"} 1`,
		`rocketmq_rollback_messages_total{` + l + n + `,topic="TxMetT"} 1`,
		`rocketmq_messages_in_total{` + l + `is_system="true",message_type="transaction",` + n + `,topic="RMQ_SYS_TRANS_HALF_TOPIC"} 2`,
		`rocketmq_consumer_lag_messages{` + l + `consumer_group="g-met",is_retry="false",is_system="false",` + n + `,topic="MetT"} 1`,
		`rocketmq_message_size_count{` + l + `is_system="false",message_type="normal",` + n + `,topic="MetT"} 2`,
		`rocketmq_finish_message_latency_milliseconds_count{` + l + n + `,topic="TxMetT"} 1`,
		`rocketmq_topic_create_execution_time_milliseconds_count{` + l + `invocation_status="success",is_system="false",` + n + `} 1`,
		`rocketmq_consumer_group_create_execution_time_milliseconds_count{` + l + `invocation_status="success",` + n + `} 1`,
	} {
		if !strings.Contains(text, "\n"+want+"\n") {
			t.Errorf("scrape lacks\n%s", want)
		}
	}
	for _, unwanted := range []string{`topic="%RETRY%g-met"`, `message_type="delay",` + n + `,topic="MetT"`, `message_type="transaction",` + n + `,topic="TxMetT"`} {
		if strings.Contains(text, unwanted) {
			t.Errorf("scrape counts %s", unwanted)
		}
	}
	if !regexp.MustCompile(`\nrocketmq_consumer_lag_latency_milliseconds\{[^}]*consumer_group="g-met"[^}]*topic="MetT"\} \d+\n`).MatchString(text) {
		t.Error("scrape lacks the lag latency of g-met on MetT")
	}
	if !strings.Contains(text, "rocketmq_topic_number{") || !strings.Contains(text, "rocketmq_consumer_group_number{") {
		t.Error("scrape lacks the topic and group numbers")
	}
	// The store's size is the used bytes of its file system; the oldest
	// message is one this test stored.
	if v := metricValue(t, text, "rocketmq_storage_size_bytes", `storage_type="local"`); v <= 0 {
		t.Errorf("rocketmq_storage_size_bytes %v", v)
	}
	if v := metricValue(t, text, "rocketmq_storage_message_reserve_time_milliseconds", `storage_medium="disk"`); v < 0 || v > float64(time.Since(began).Milliseconds()) {
		t.Errorf("rocketmq_storage_message_reserve_time_milliseconds %v ms, the test began %v ago", v, time.Since(began))
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// metricsNameUnitSuffix chooses the metric names: left out or true, those
// of a RocketMQ 5.1.4 to 5.3.x broker (a declared unit appended unless the
// name holds it); false, the bare names of RocketMQ 5.0 to 5.1.3. Names
// without a unit, or that hold theirs, are the same either way.
func TestMetricsNameUnitSuffix(t *testing.T) {
	suffixed := []string{"rocketmq_rpc_latency_milliseconds_count", "rocketmq_storage_size_bytes",
		"rocketmq_storage_message_reserve_time_milliseconds", "rocketmq_consumer_lag_latency_milliseconds",
		"rocketmq_consumer_queueing_latency_milliseconds", "rocketmq_topic_create_execution_time_milliseconds_count"}
	bare := []string{"rocketmq_rpc_latency_count", "rocketmq_storage_size", "rocketmq_storage_message_reserve_time",
		"rocketmq_consumer_lag_latency", "rocketmq_consumer_queueing_latency", "rocketmq_topic_create_execution_time_count"}
	same := []string{"rocketmq_messages_in_total", "rocketmq_storage_flush_behind_bytes", "rocketmq_consumer_lag_messages",
		"rocketmq_message_size_count"}
	for _, c := range []struct {
		setting          string // "" leaves the key out
		served, notThere []string
	}{
		{"", suffixed, bare},
		{"true", suffixed, bare},
		{"false", bare, suffixed},
	} {
		t.Run("metricsNameUnitSuffix="+c.setting, func(t *testing.T) {
			cfg := map[string]string{
				"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
			}
			if c.setting != "" {
				cfg["metricsNameUnitSuffix"] = c.setting
			}
			b := startTestBroker(t, cfg)
			cl := b.client(nil)
			mustSend(t, cl, "UnitT", 0, "m", "")
			b.caughtUp()
			commit(t, cl, "g-unit", "UnitT", 0, 0)                                                          // one message behind: the consumer gauges
			heartbeat(t, cl, heartbeatBody("10.0.0.9@unit", "", "g-unit", map[string]string{"UnitT": "*"})) // of a group with a live client
			if r := call(t, cl, remoting.UpdateAndCreateTopic, map[string]string{"topic": "UnitCreated", "readQueueNums": "1",
				"writeQueueNums": "1", "perm": "6"}, nil); r.Code != remoting.Success {
				t.Fatalf("create topic: %d %s", r.Code, r.Remark)
			}
			text := scrapeMetrics(t, b)
			for _, name := range append(slices.Clone(c.served), same...) {
				if !strings.Contains(text, "\n"+name+"{") {
					t.Errorf("scrape lacks %s", name)
				}
			}
			for _, name := range c.notThere {
				if strings.Contains(text, "\n"+name+"{") {
					t.Errorf("scrape has %s", name)
				}
			}
			if t.Failed() {
				t.Logf("scrape:\n%s", text)
			}
		})
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

// The consumer gauges follow what consumers do, for a pull consumer (in
// flight: pulled and not committed) and a POP consumer (in flight: popped
// and not acknowledged): RocketMQ's ready, in-flight and queueing-latency
// gauges beside the lag.
func TestConsumerGaugesFollowTheConsumers(t *testing.T) {
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	}, func(b *Broker) { b.lagTTL = 0 }) // each scrape computes the gauges
	c := b.client(nil)
	// The gauges cover groups with a live client (a heartbeat).
	heartbeat(t, c, heartbeatBody("10.0.0.9@gauges", "", "g-pull", map[string]string{"GaugePull": "*"}))
	heartbeat(t, c, heartbeatBody("10.0.0.9@gauges", "", "g-pop", map[string]string{"GaugePop": "*"}))
	type gauges struct{ lag, inflight, ready int64 }
	read := func(group, topic string) (gauges, float64) {
		t.Helper()
		text := scrapeMetrics(t, b)
		v := func(metric string) int64 {
			return int64(metricValue(t, text, metric, `consumer_group="`+group+`"`, `topic="`+topic+`"`, `is_retry="false"`))
		}
		return gauges{v("rocketmq_consumer_lag_messages"), v("rocketmq_consumer_inflight_messages"),
				v("rocketmq_consumer_ready_messages")},
			metricValue(t, text, "rocketmq_consumer_queueing_latency_milliseconds", `consumer_group="`+group+`"`, `topic="`+topic+`"`)
	}
	expect := func(step, group, topic string, want gauges) float64 {
		t.Helper()
		got, queueing := read(group, topic)
		if got != want {
			t.Fatalf("%s: %s on %s: lag %d, in flight %d, ready %d; want %d, %d, %d", step, group, topic,
				got.lag, got.inflight, got.ready, want.lag, want.inflight, want.ready)
		}
		return queueing
	}

	// Pull: five messages stored, none pulled.
	beforeSend := time.Now()
	for i := range 5 {
		mustSend(t, c, "GaugePull", 0, "m"+strconv.Itoa(i), "")
	}
	b.caughtUp()
	commit(t, c, "g-pull", "GaugePull", 0, 0)
	time.Sleep(30 * time.Millisecond)
	q := expect("stored, not pulled", "g-pull", "GaugePull", gauges{lag: 5, ready: 5})
	// The oldest ready message is the first: stored after beforeSend,
	// and at least 30 ms before the scrape.
	if hi := float64(time.Since(beforeSend).Milliseconds() + 1); q < 30 || q > hi {
		t.Fatalf("queueing latency %v ms, want 30 to %v", q, hi)
	}
	pull := pullReq("g-pull", "GaugePull", 0, 0, 0, 0, "*")
	pull["maxMsgNums"] = "3"
	if r := call(t, c, remoting.PullMessage, pull, nil); r.Code != remoting.Success || len(decodeRecords(t, r.Body)) != 3 {
		t.Fatalf("pull 3: %d %s", r.Code, r.Remark)
	}
	expect("3 pulled, none committed", "g-pull", "GaugePull", gauges{lag: 5, inflight: 3, ready: 2})
	commit(t, c, "g-pull", "GaugePull", 0, 3)
	expect("3 pulled and committed", "g-pull", "GaugePull", gauges{lag: 2, ready: 2})
	// The last two pulled with a pull that commits the first three (the
	// push consumer's way): in flight until the next commit.
	pull = pullReq("g-pull", "GaugePull", 0, 3, pullCommitOffset, 0, "*")
	pull["commitOffset"] = "3"
	if r := call(t, c, remoting.PullMessage, pull, nil); r.Code != remoting.Success || len(decodeRecords(t, r.Body)) != 2 {
		t.Fatalf("pull the rest: %d %s", r.Code, r.Remark)
	}
	if q := expect("all pulled, 3 committed", "g-pull", "GaugePull", gauges{lag: 2, inflight: 2}); q != 0 {
		t.Fatalf("queueing latency %v with nothing ready", q)
	}
	commit(t, c, "g-pull", "GaugePull", 0, 5)
	expect("all committed", "g-pull", "GaugePull", gauges{})
	// Nothing in flight: the pull table keeps no entry.
	if n := len(b.pulled.snapshot()); n != 0 {
		t.Fatalf("%d pull positions kept with nothing in flight", n)
	}

	// POP: five messages, three popped and not acknowledged.
	pc := popclient.New(c, b.cfg.BrokerName)
	for i := range 5 {
		mustSend(t, c, "GaugePop", 0, "p"+strconv.Itoa(i), "")
	}
	b.caughtUp()
	popped := mustPop(t, pc, popclient.PopRequest{Group: "g-pop", Topic: "GaugePop", QueueID: 0, MaxMsgNums: 3, InvisibleTime: time.Minute})
	if len(popped.Messages) != 3 {
		t.Fatalf("popped %d", len(popped.Messages))
	}
	expect("3 popped, none acked", "g-pop", "GaugePop", gauges{lag: 5, inflight: 3, ready: 2})
	// Acknowledging the second leaves the first and third in flight: the
	// lag is RocketMQ's POP lag, the two not popped and the two in flight
	// (the acknowledged one no longer counts, though the committed offset
	// stays before it).
	if code, err := pc.Ack(ctx20(t), "g-pop", popped.Messages[1]); err != nil || code != remoting.Success {
		t.Fatalf("ack: %d %v", code, err)
	}
	expect("3 popped, 1 acked", "g-pop", "GaugePop", gauges{lag: 4, inflight: 2, ready: 2})
	if code, err := pc.BatchAck(ctx20(t), "g-pop", "GaugePop", []popclient.Message{popped.Messages[0], popped.Messages[2]}); err != nil || code != remoting.Success {
		t.Fatalf("batch ack: %d %v", code, err)
	}
	expect("3 popped and acked", "g-pop", "GaugePop", gauges{lag: 2, ready: 2})
	rest := mustPop(t, pc, popclient.PopRequest{Group: "g-pop", Topic: "GaugePop", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute})
	expect("all popped, 3 acked", "g-pop", "GaugePop", gauges{lag: 2, inflight: 2})
	if code, err := pc.BatchAck(ctx20(t), "g-pop", "GaugePop", rest.Messages); err != nil || code != remoting.Success {
		t.Fatalf("batch ack the rest: %d %v", code, err)
	}
	expect("all acked", "g-pop", "GaugePop", gauges{})
}

// One POP state record the broker cannot decode (a damaged store, or a
// key written by a later version) leaves the consumer gauges of every
// queue in place: the lag of a pull group is still reported.
func TestConsumerGaugesSurviveAnUndecodablePopRecord(t *testing.T) {
	store := t.TempDir()
	settings := map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	}
	b := startTestBrokerAt(t, store, settings)
	c := b.client(nil)
	mustSend(t, c, "LagT", 0, "a", "")
	mustSend(t, c, "LagT", 0, "b", "")
	ensureGroup(t, c, "g-lag")
	commit(t, c, "g-lag", "LagT", 0, 1)
	b.stop()

	db, err := pebble.Open(filepath.Join(store, kvindex.DirName), &pebble.Options{Logger: testutil.PebbleLogger{T: t}})
	if err != nil {
		t.Fatal(err)
	}
	// A checkpoint key (0x56) too short to name a queue.
	if err := db.Set([]byte{kvindex.PrefixPopCK, 0xff}, []byte{1}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	b = startTestBrokerAt(t, store, settings)
	heartbeat(t, b.client(nil), heartbeatBody("10.0.0.9@lag", "", "g-lag", map[string]string{"LagT": "*"}))
	lags, err := b.consumerLags(context.Background())
	if err != nil {
		t.Fatalf("consumer lags over an undecodable POP record: %v", err)
	}
	i := slices.IndexFunc(lags, func(l metrics.Lag) bool { return l.Group == "g-lag" && l.Topic == "LagT" })
	if i < 0 || lags[i].Messages != 1 {
		t.Fatalf("lag of g-lag on LagT: %+v, want 1 message", lags)
	}
}

// A metrics value whose computation fails keeps its last value and is not
// computed again before its ttl has passed, as one that succeeds.
func TestCachedMetricsValueBacksOffAfterAFailure(t *testing.T) {
	calls, fail := 0, false
	c := &cached[int]{ttl: time.Hour, compute: func(context.Context) (int, error) {
		calls++
		if fail {
			return 0, errors.New("keyspace unreadable")
		}
		return calls, nil
	}}
	log := zerolog.Nop()
	if v := c.get(context.Background(), log); v != 1 || calls != 1 {
		t.Fatalf("first get: %d after %d computations", v, calls)
	}
	c.at = time.Time{} // the ttl has passed
	fail = true
	for range 3 {
		if v := c.get(context.Background(), log); v != 1 {
			t.Fatalf("get after a failure: %d, want the last value 1", v)
		}
	}
	if calls != 2 {
		t.Fatalf("%d computations for three gets within the ttl after a failure, want 2 in all", calls)
	}
}

// A metrics value whose computation was cancelled (its sources were
// detached) gives nothing rather than the last value, and does not count
// as a computation: the next get with a live context computes.
func TestCachedMetricsValueCancelled(t *testing.T) {
	calls := 0
	c := &cached[int]{ttl: time.Hour, compute: func(ctx context.Context) (int, error) {
		calls++
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return calls, nil
	}}
	log := zerolog.Nop()
	if v := c.get(context.Background(), log); v != 1 {
		t.Fatalf("first get: %d", v)
	}
	c.at = time.Time{} // the ttl has passed
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if v := c.get(ctx, log); v != 0 {
		t.Fatalf("cancelled get: %d, want 0 (nothing)", v)
	}
	if v := c.get(context.Background(), log); v != 3 || calls != 3 {
		t.Fatalf("get after a cancelled one: %d after %d computations, want a new computation (3)", v, calls)
	}
}

// The timer metrics RocketMQ 5's store exports: timer messages taken in
// and delivered by destination topic, how far ahead of their birth they
// were due, how many wait, and how many are due within each bound.
func TestTimerMetrics(t *testing.T) {
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
		"timerPrecisionMs": "100",
	}, func(b *Broker) { b.timerCensusTTL = 0 }) // each scrape counts
	c := b.client(nil)
	now := time.Now()
	at := func(d time.Duration) string {
		return "TIMER_DELIVER_MS\x01" + strconv.FormatInt(now.Add(d).UnixMilli(), 10) + "\x02"
	}
	mustSend(t, c, "TmMetric", 0, "soon", at(1500*time.Millisecond))
	mustSend(t, c, "TmMetric", 0, "later", at(10*time.Minute))
	b.caughtUp()
	text := scrapeMetrics(t, b)
	store := []string{`storage_type="local"`, `storage_medium="disk"`}
	topic := append([]string{`topic="TmMetric"`}, store...)
	for metric, want := range map[string]float64{
		"rocketmq_timer_enqueue_total":                 2,
		"rocketmq_delay_message_latency_seconds_count": 2,
	} {
		if got := metricValue(t, text, metric, topic...); got != want {
			t.Errorf("%s = %v, want %v", metric, got, want)
		}
	}
	if got := metricValue(t, text, "rocketmq_delay_message_latency_seconds_bucket", append(topic, `le="60"`)...); got != 1 {
		t.Errorf("timer messages due within a minute of their birth: %v, want 1", got)
	}
	if got := metricValue(t, text, "rocketmq_timer_dequeue_lag", store...); got != 2 {
		t.Errorf("timer messages waiting: %v, want 2", got)
	}
	for bound, want := range map[string]float64{"5": 1, "60": 0, "900": 1, "86400": 0} {
		if got := metricValue(t, text, "rocketmq_timer_message_snapshot", append([]string{`timer_bound_s="` + bound + `"`}, store...)...); got != want {
			t.Errorf("timer messages due within the %s s bound: %v, want %v", bound, got, want)
		}
	}
	waitFor(t, "the first timer message's delivery", func() bool {
		return strings.Contains(scrapeMetrics(t, b), `rocketmq_timer_dequeue_total{`)
	})
	text = scrapeMetrics(t, b)
	if got := metricValue(t, text, "rocketmq_timer_dequeue_total", topic...); got != 1 {
		t.Errorf("timer messages delivered: %v, want 1", got)
	}
	if got := metricValue(t, text, "rocketmq_timer_dequeue_lag", store...); got != 1 {
		t.Errorf("timer messages waiting after a delivery: %v, want 1", got)
	}
	// Whole seconds the read time (the start of the last round's 100 ms
	// slot) is behind: 0 once a round has run, which a loaded machine
	// may delay past a second.
	waitFor(t, "the timer's read time under a second behind with nothing due", func() bool {
		return metricValue(t, scrapeMetrics(t, b), "rocketmq_timer_dequeue_latency_milliseconds", store...) == 0
	})
}

// timerReadBehind and rocketmq_timer_dequeue_latency are RocketMQ's
// getDequeueBehind: the seconds the timer's read time is behind the
// clock. With delivery stopped (timerStopDequeue) on a timer with nothing
// due they grow, as RocketMQ's read time stays where it stopped; they
// fall back under a second once delivery resumes.
func TestTimerReadBehindGrowsWhileDeliveryIsStopped(t *testing.T) {
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
		"timerPrecisionMs": "100",
	}, func(b *Broker) { b.timerCensusTTL = 0 })
	c := b.client(nil)
	store := []string{`storage_type="local"`, `storage_medium="disk"`}
	behind := func() (int64, float64) {
		n, err := strconv.ParseInt(runtimeInfo(t, c)["timerReadBehind"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n, metricValue(t, scrapeMetrics(t, b), "rocketmq_timer_dequeue_latency_milliseconds", store...)
	}
	waitFor(t, "the read time caught up, delivering with nothing due", func() bool {
		info, metric := behind()
		return info == 0 && metric == 0
	})
	updateConfig(t, c, "timerStopDequeue=true")
	waitFor(t, "the read time 2 s behind with delivery stopped", func() bool {
		info, metric := behind()
		return info >= 2 && metric >= 2
	})
	updateConfig(t, c, "timerStopDequeue=false")
	waitFor(t, "the read time caught up once delivery resumed", func() bool {
		info, metric := behind()
		return info == 0 && metric == 0
	})
}

// earlyMetricsSettings turn the exporter on, with a fine timer.
var earlyMetricsSettings = map[string]string{
	"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	"timerPrecisionMs": "100",
}

// rocketmq_timer_enqueue_lag and _latency: the timer takes a message in
// as the dispatcher indexes it, so while the dispatcher is held up the
// timer messages stored behind it are the lag, and the age of the first
// of them the latency. Once they are indexed the latency is RocketMQ's:
// how long ago the last one indexed was stored, for 2 s after, then 0.
func TestTimerEnqueueGaugesFollowTheDispatcher(t *testing.T) {
	o := maps.Clone(earlyMetricsSettings)
	o["maxDispatchLagBytes"] = strconv.Itoa(64 << 20) // sends are not held back
	sb := startStalledBroker(t, o, func(b *Broker) { b.timerCensusTTL = 0 })
	store := []string{`storage_type="local"`, `storage_medium="disk"`}
	later := "TIMER_DELIVER_MS\x01" + strconv.FormatInt(time.Now().Add(10*time.Minute).UnixMilli(), 10) + "\x02"
	sentAt := time.Now()
	mustSend(t, sb.c, "TmEnq", 0, "one", later)
	mustSend(t, sb.c, "TmEnq", 0, "two", later)
	time.Sleep(300 * time.Millisecond)
	text := scrapeMetrics(t, sb.testBroker)
	if got := metricValue(t, text, "rocketmq_timer_enqueue_lag", store...); got != 2 {
		t.Errorf("timer messages behind a held dispatcher: %v, want 2", got)
	}
	held := time.Since(sentAt).Milliseconds()
	if got := metricValue(t, text, "rocketmq_timer_enqueue_latency_milliseconds", store...); got < 300 || got > float64(held) {
		t.Errorf("latency of the first timer message behind the dispatcher: %v ms, want 300 to %d", got, held)
	}
	sb.release()
	sb.caughtUp()
	text = scrapeMetrics(t, sb.testBroker)
	if got := metricValue(t, text, "rocketmq_timer_enqueue_lag", store...); got != 0 {
		t.Errorf("timer messages behind once dispatched: %v, want 0", got)
	}
	if got := metricValue(t, text, "rocketmq_timer_enqueue_latency_milliseconds", store...); got < 300 {
		t.Errorf("latency just after the timer took the messages in: %v ms, want how long they waited, 300 or more", got)
	}
	time.Sleep(2100 * time.Millisecond)
	if got := metricValue(t, scrapeMetrics(t, sb.testBroker), "rocketmq_timer_enqueue_latency_milliseconds", store...); got != 0 {
		t.Errorf("latency 2 s after the last message taken in: %v ms, want 0", got)
	}
}

// rocketmq_timing_messages counts the timer messages waiting by
// destination topic, as RocketMQ's TimerMetrics: a cancel waiting takes
// the message it cancels off, a delivery its message. Nothing persists
// the count: a restart counts the timer index again (beside the start)
// and serves the same.
func TestTimingMessagesByTopicSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	noTTL := func(b *Broker) { b.timerCensusTTL = 0 }
	b := startTestBrokerWith(t, dir, earlyMetricsSettings, noTTL)
	c := b.client(nil)
	at := func(d time.Duration) string {
		return "TIMER_DELIVER_MS\x01" + strconv.FormatInt(time.Now().Add(d).UnixMilli(), 10) + "\x02"
	}
	later := at(10 * time.Minute)
	mustSend(t, c, "TmA", 0, "a1", "UNIQ_KEY\x01A1\x02"+later)
	mustSend(t, c, "TmA", 1, "a2", "UNIQ_KEY\x01A2\x02"+later)
	mustSend(t, c, "TmA", 0, "a-soon", "UNIQ_KEY\x01A3\x02"+at(1500*time.Millisecond))
	mustSend(t, c, "TmB", 0, "b1", "UNIQ_KEY\x01B1\x02"+later)
	mustSend(t, c, "TmB", 0, "b2", "UNIQ_KEY\x01B2\x02"+later)
	mustSend(t, c, "TmB", 0, "cancel b2", "UNIQ_KEY\x01B3\x02"+later+"TIMER_DEL_UNIQKEY\x01TmB+B2\x02")
	b.caughtUp()
	store := []string{`storage_type="local"`, `storage_medium="disk"`}
	timing := func(text, topic string) float64 {
		t.Helper()
		return metricValue(t, text, "rocketmq_timing_messages", append([]string{`topic="` + topic + `"`}, store...)...)
	}
	text := scrapeMetrics(t, b)
	if a, bb := timing(text, "TmA"), timing(text, "TmB"); a != 3 || bb != 1 {
		t.Errorf("waiting: TmA %v TmB %v, want 3 and 1 (2 less a cancel)", a, bb)
	}
	waitDelivered(t, b, c, "TmA", 0, 1)
	text = scrapeMetrics(t, b)
	if a, bb := timing(text, "TmA"), timing(text, "TmB"); a != 2 || bb != 1 {
		t.Errorf("waiting after a delivery: TmA %v TmB %v, want 2 and 1", a, bb)
	}
	b.stop()

	b = startTestBrokerWith(t, dir, earlyMetricsSettings, noTTL)
	waitFor(t, "the count of the timer messages waiting", func() bool {
		text = scrapeMetrics(t, b)
		return strings.Contains(text, "rocketmq_timing_messages{")
	})
	if a, bb := timing(text, "TmA"), timing(text, "TmB"); a != 2 || bb != 1 {
		t.Errorf("waiting after a restart: TmA %v TmB %v, want 2 and 1", a, bb)
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// A send's message_type label is RocketMQ's (BrokerMetricsManager.
// getMessageType): a prepared transaction first (TRAN_MSG read as Java's
// Boolean.parseBoolean), then a message group (FIFO), then a delivery
// time or delay level of any kind, __STARTDELIVERTIME included.
func TestMessageTypeOfASendIsRocketMQs(t *testing.T) {
	for _, c := range []struct{ props, want string }{
		{"", metrics.TypeNormal},
		{"TAGS\x01a\x02", metrics.TypeNormal},
		{"TRAN_MSG\x01true\x02", metrics.TypeTransaction},
		{"TRAN_MSG\x01TRUE\x02DELAY\x013\x02", metrics.TypeTransaction},
		{"TRAN_MSG\x01false\x02", metrics.TypeNormal},
		{"TRAN_MSG\x01true\x02TRAN_MSG\x01false\x02", metrics.TypeNormal}, // the last one counts
		{"TRAN_MSG\x01false\x02TRAN_MSG\x01true\x02DELAY\x013\x02", metrics.TypeTransaction},
		{"DELAY\x01\x02", metrics.TypeNormal}, // no value: no property
		{"__SHARDINGKEY\x01k\x02", metrics.TypeFIFO},
		{"__SHARDINGKEY\x01k\x02TIMER_DELAY_SEC\x015\x02", metrics.TypeFIFO},
		{"__STARTDELIVERTIME\x011700000005000\x02", metrics.TypeDelay},
		{"DELAY\x013\x02", metrics.TypeDelay},
		{"TIMER_DELIVER_MS\x011700000005000\x02", metrics.TypeDelay},
		{"TIMER_DELAY_SEC\x015\x02", metrics.TypeDelay},
		{"TIMER_DELAY_MS\x015000\x02", metrics.TypeDelay},
	} {
		if got := messageTypeOf(c.props); got != c.want {
			t.Errorf("%q: message_type %q, want %q", c.props, got, c.want)
		}
	}
}

// A send to %RETRY%group whose reconsume times are past the maximum is
// stored in %DLQ%group and counted in rocketmq_send_to_dlq_messages_total
// as RocketMQ's SendMessageProcessor.handleRetryAndDLQ counts it:
// consumer_group the send's producer group, topic the retry topic sent
// to.
func TestRetrySendMovedToTheDLQIsCounted(t *testing.T) {
	b := startTestBroker(t, map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	})
	c := b.client(nil)
	ensureGroup(t, c, "g-dlqsend")
	send := func(reconsume string) {
		t.Helper()
		r := call(t, c, remoting.SendMessageV2, map[string]string{
			"a": "pg-dlqsend", "b": "%RETRY%g-dlqsend", "c": "TBW102", "d": "4", "e": "0",
			"f": "0", "g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "",
			"j": reconsume, "l": "16",
		}, []byte("dead"))
		if r.Code != remoting.Success {
			t.Fatalf("send with reconsumeTimes %s: %d %s", reconsume, r.Code, r.Remark)
		}
	}
	send("3")  // a retry: stays in the retry topic, not counted
	send("17") // past the maximum of 16: to the DLQ
	b.caughtUp()
	if got := pullAll(t, b, c, "%DLQ%g-dlqsend", 0); len(got) != 1 {
		t.Fatalf("DLQ holds %d messages, want 1", len(got))
	}
	text := scrapeMetrics(t, b)
	if v := metricValue(t, text, "rocketmq_send_to_dlq_messages_total", `consumer_group="pg-dlqsend"`,
		`topic="%RETRY%g-dlqsend"`, `is_system="false"`); v != 1 {
		t.Errorf("retry sends moved to the DLQ counted %v, want 1", v)
	}
}

// The is_system label of the DLQ counter and the consumer gauges tells a
// system group as RocketMQ's BrokerMetricsManager.isSystemGroup does:
// the group lower-cased before matching cid_rmq_sys_. messages_out keeps
// the case-sensitive MixAll.isSysConsumerGroup (isSysGroup).
func TestIsSystemGroupIsCaseInsensitive(t *testing.T) {
	for group, want := range map[string]bool{
		"CID_RMQ_SYS_TRANS": true, "cid_rmq_sys_zz": true, "Cid_Rmq_Sys_x": true,
		"CID_RMQ_SYS": false, "g": false, "": false, "xCID_RMQ_SYS_": false,
	} {
		if got := isSystemGroup(group); got != want {
			t.Errorf("isSystemGroup(%q) = %v, want %v", group, got, want)
		}
	}
	b := startTestBroker(t, map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	})
	b.countDLQ([]*commitlog.Message{{Topic: "%DLQ%cid_rmq_sys_zz", Properties: "DLQ_ORIGIN_TOPIC\x01ZZT\x02"}})
	text := scrapeMetrics(t, b)
	if v := metricValue(t, text, "rocketmq_send_to_dlq_messages_total", `consumer_group="cid_rmq_sys_zz"`,
		`is_system="true"`); v != 1 {
		t.Errorf("DLQ counter of group cid_rmq_sys_zz with is_system=\"true\": %v, want 1", v)
	}
}

// A pull of a consumer group whose name is not valid UTF-8 (a ROCKETMQ
// binary header carries ext fields as raw bytes) is answered with its
// messages: the metrics label repairs the name rather than panicking,
// which would have turned the answer into SYSTEM_ERROR. Such a group is
// not auto-created (validGroupName), so the test stores its config as
// one written before that check, or by a tool, would be.
func TestPullOfAGroupNameThatIsNotUTF8IsAnswered(t *testing.T) {
	b := startTestBroker(t, map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	})
	if err := b.groups.Put(meta.NewSubscriptionGroupConfig("bad\xffgroup")); err != nil {
		t.Fatal(err)
	}
	c := b.client(nil)
	mustSend(t, c, "Utf8T", 0, "a", "")
	b.caughtUp()
	req := remoting.NewRequest(remoting.PullMessage, pullReq("bad\xffgroup", "Utf8T", 0, 0, 0, 0, "*"), nil)
	req.SerializeType = remoting.SerializeRocketMQ
	r, err := c.Invoke(ctx20(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Code != remoting.Success || len(decodeRecords(t, r.Body)) != 1 {
		t.Fatalf("pull of group %q: %d %s", "bad\xffgroup", r.Code, r.Remark)
	}
	text := scrapeMetrics(t, b)
	if v := metricValue(t, text, "rocketmq_messages_out_total", `consumer_group="bad`+"\uFFFD"+`group"`, `topic="Utf8T"`); v != 1 {
		t.Errorf("messages out of the repaired group name: %v, want 1", v)
	}
}

// The lag gauges report retry topics as RocketMQ's ConsumerLagCalculator
// does: a POP group's retry topic of T (here V1, %RETRY%g_T; V2's
// %RETRY%g+T cannot be sent to, pop.TestRetryOrigin reads it) as T with
// is_retry, a push group's own %RETRY%g not at all.
func TestConsumerLagOfARetryTopicIsLabelledByItsTopic(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for _, topic := range []string{"LagRT", "%RETRY%g-push", "%RETRY%g-pop_LagRT"} {
		mustSend(t, c, topic, 0, "m", "")
	}
	b.caughtUp()
	for _, gt := range [][2]string{{"g-push", "LagRT"}, {"g-push", "%RETRY%g-push"}, {"g-pop", "%RETRY%g-pop_LagRT"}} {
		ensureGroup(t, c, gt[0])
		commit(t, c, gt[0], gt[1], 0, 0)
	}
	for _, g := range []string{"g-push", "g-pop"} {
		heartbeat(t, c, heartbeatBody("10.0.0.9@retry", "", g, map[string]string{"LagRT": "*", "%RETRY%" + g: "*"}))
	}
	lags, err := b.consumerLags(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lags {
		got = append(got, fmt.Sprintf("%s %s retry=%v lag=%d", l.Group, l.Topic, l.Retry, l.Messages))
	}
	want := []string{"g-pop LagRT retry=true lag=1", "g-push LagRT retry=false lag=1"}
	if !slices.Equal(got, want) {
		t.Fatalf("lag rows %q, want %q", got, want)
	}
}

// The lag gauges cover the groups with a live client and the topics they
// subscribe to, as RocketMQ's ConsumerLagCalculator: a group whose
// clients are gone leaves no series behind, though its committed offsets
// stay.
func TestConsumerLagOnlyForOnlineGroups(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	mustSend(t, c, "LagOn", 0, "m", "")
	mustSend(t, c, "LagOther", 0, "m", "")
	b.caughtUp()
	ensureGroup(t, c, "g-on")
	commit(t, c, "g-on", "LagOn", 0, 0)
	commit(t, c, "g-on", "LagOther", 0, 0)
	rows := func() []string {
		t.Helper()
		lags, err := b.consumerLags(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range lags {
			out = append(out, l.Group+" "+l.Topic)
		}
		return out
	}
	if got := rows(); len(got) != 0 {
		t.Fatalf("rows of a group with no client: %q", got)
	}
	consumer := b.client(nil)
	heartbeat(t, consumer, heartbeatBody("10.0.0.9@on", "", "g-on", map[string]string{"LagOn": "*"}))
	if got := rows(); !slices.Equal(got, []string{"g-on LagOn"}) {
		t.Fatalf("rows of a group subscribed to LagOn: %q, want only g-on LagOn", got)
	}
	consumer.Close()
	waitFor(t, "the group's client gone", func() bool { return len(b.clients.consumerIDs("g-on")) == 0 })
	if got := rows(); len(got) != 0 {
		t.Fatalf("rows after the group's client left: %q", got)
	}
}

// A pop's messages_out and throughput_out are counted per kind of queue
// read, as RocketMQ's PopMessageProcessor counts them: under the
// requested topic, is_retry="true" for the messages from the group's
// pop-retry topic and "false" for the others. A pull's series carry no
// is_retry.
func TestPopMessagesOutTellRetries(t *testing.T) {
	b := startTestBroker(t, map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	})
	c, rc := popClient(b)
	mustSend(t, rc, "PopOutT", 0, "new-1", "")
	mustSend(t, rc, "PopOutT", 0, "new-2", "")
	mustSend(t, rc, pop.RetryTopicV1("PopOutT", "g-pop"), 0, "retried", "")
	b.caughtUp()
	res := mustPop(t, c, popclient.PopRequest{Group: "g-pop", Topic: "PopOutT", QueueID: -1, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if got := bodies(res.Messages); len(got) != 3 {
		t.Fatalf("popped %v, want the 2 new messages and the retried one", got)
	}
	if r := call(t, rc, remoting.PullMessage, pullReq("g-pull", "PopOutT", 0, 0, 0, 0, "*"), nil); r.Code != remoting.Success {
		t.Fatalf("pull: %d %s", r.Code, r.Remark)
	}
	text := scrapeMetrics(t, b)
	group := `consumer_group="g-pop"`
	if v := metricValue(t, text, "rocketmq_messages_out_total", group, `is_retry="false"`, `topic="PopOutT"`); v != 2 {
		t.Errorf("messages_out of g-pop with is_retry=false: %v, want 2", v)
	}
	if v := metricValue(t, text, "rocketmq_messages_out_total", group, `is_retry="true"`, `topic="PopOutT"`); v != 1 {
		t.Errorf("messages_out of g-pop with is_retry=true: %v, want 1", v)
	}
	fresh := metricValue(t, text, "rocketmq_throughput_out_total", group, `is_retry="false"`)
	retried := metricValue(t, text, "rocketmq_throughput_out_total", group, `is_retry="true"`)
	if fresh <= 0 || retried <= 0 {
		t.Errorf("throughput_out of g-pop: %v bytes new, %v retried; want both", fresh, retried)
	}
	if v := metricValue(t, text, "rocketmq_messages_out_total", `consumer_group="g-pull"`, `topic="PopOutT"`); v != 2 {
		t.Errorf("messages_out of the pull: %v, want 2", v)
	}
	if strings.Contains(text, `consumer_group="g-pull",is_retry=`) {
		t.Error("a pull's series carries is_retry")
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// popRetried splits a pop's records by the queues msgOffsetInfo lists in
// their order: those of entries whose flag is not the requested topic's
// came from pop-retry topics.
func TestPopRetriedFollowsMsgOffsetInfo(t *testing.T) {
	recs := [][]byte{make([]byte, 10), make([]byte, 20), make([]byte, 30), make([]byte, 40), make([]byte, 50)}
	for _, tc := range []struct {
		info  string
		n     int
		bytes int64
	}{
		{"0 1 5,6", 0, 0},
		{"1 0 4;0 2 10,11,12;2 0 7", 2, 10 + 50},
		{"0 0 1,2,3,4;1 3 9", 1, 50},
		{"", 0, 0},
		{"1 0 4,5,6,7,8,9,10", 5, 150}, // more offsets than records: the records
	} {
		if n, bytes := popRetried(recs, tc.info); n != tc.n || bytes != tc.bytes {
			t.Errorf("popRetried(%q) = %d, %d; want %d, %d", tc.info, n, bytes, tc.n, tc.bytes)
		}
	}
}

// metricsInDelta adds aggregation="delta" to every series, as RocketMQ's
// metrics manager adds it whatever its exporter.
func TestMetricsInDeltaLabelsEverySeries(t *testing.T) {
	b := startTestBroker(t, map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
		"metricsInDelta": "true",
	})
	mustSend(t, b.client(nil), "DeltaT", 0, "a", "")
	text := scrapeMetrics(t, b)
	if !strings.Contains(text, "\nrocketmq_messages_in_total{aggregation=\"delta\",") {
		t.Fatal("rocketmq_messages_in_total lacks aggregation=\"delta\"")
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "rocketmq_") && !strings.Contains(line, `aggregation="delta"`) {
			t.Fatalf("series without aggregation=\"delta\": %s", line)
		}
	}
}

// RocketMQ 5.3's per-family switches leave their metrics out of the
// scrape; the families left on are served.
func TestMetricFamiliesTurnOff(t *testing.T) {
	b := startTestBroker(t, map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
		"enableRequestMetrics": "false", "enableMessageStoreMetrics": "false", "enableTransactionMetrics": "false",
		"enableConnectionMetrics": "false",
	})
	c := b.client(nil)
	mustSend(t, c, "FamT", 0, "a", "")
	heartbeat(t, c, heartbeatBody("10.0.0.8@fam", "pg-fam", "g-fam", map[string]string{"FamT": "*"}))
	text := scrapeMetrics(t, b)
	for _, gone := range []string{"rocketmq_messages_in_total", "rocketmq_message_size", "rocketmq_storage_",
		"rocketmq_timer_", "rocketmq_commit_messages_total", "rocketmq_producer_connections"} {
		if strings.Contains(text, "\n"+gone) {
			t.Errorf("scrape has %s, whose family is off", gone)
		}
	}
	for _, kept := range []string{"rocketmq_broker_permission{", "rocketmq_rpc_latency_milliseconds_count{", "rocketmq_topic_number{"} {
		if !strings.Contains(text, "\n"+kept) {
			t.Errorf("scrape lacks %s, whose family is on", kept)
		}
	}
}

// The pull offsets behind the consumer gauges forget a deleted group's
// (with its offsets) and a deleted topic's queues at the deletion:
// otherwise only a scrape
// prunes them, and with the exporter on but rarely scraped, groups that
// come and go filled the table for good (RocketMQ's removeOffset and
// cleanOffsetByTopic drop their pullOffsetTable entries too).
func TestPullOffsetsForgetDeletedGroupsAndTopics(t *testing.T) {
	b := startTestBroker(t, map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	})
	c := b.client(nil)
	for _, topic := range []string{"PulledA", "PulledB"} {
		mustSend(t, c, topic, 0, "m", "")
	}
	b.caughtUp()
	for _, gt := range [][2]string{{"pg1", "PulledA"}, {"pg2", "PulledA"}, {"pg2", "PulledB"}, {"pg3", "PulledB"}} {
		ensureGroup(t, c, gt[0])
		if r := call(t, c, remoting.PullMessage, pullReq(gt[0], gt[1], 0, 0, 0, 0, "*"), nil); r.Code != remoting.Success {
			t.Fatalf("pull %v: %d %s", gt, r.Code, r.Remark)
		}
	}
	queues := func() []string {
		var out []string
		for q := range b.pulled.snapshot() {
			out = append(out, q.group+"@"+q.topic)
		}
		slices.Sort(out)
		return out
	}
	if got := queues(); len(got) != 4 {
		t.Fatalf("pull offsets before the deletions: %v", got)
	}
	if r := call(t, c, remoting.DeleteSubscriptionGroup, map[string]string{"groupName": "pg1", "cleanOffset": "true"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete group: %d %s", r.Code, r.Remark)
	}
	if r := call(t, c, remoting.DeleteTopicInBroker, map[string]string{"topic": "PulledB"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete topic: %d %s", r.Code, r.Remark)
	}
	if got := queues(); !slices.Equal(got, []string{"pg2@PulledA"}) {
		t.Errorf("pull offsets after deleting group pg1 and topic PulledB: %v, want [pg2@PulledA]", got)
	}
}

// BenchmarkMessageTypeOf measures the send path's classification of a
// Go client's properties (no special key, so every pair is read).
func BenchmarkMessageTypeOf(b *testing.B) {
	props := "KEYS\x01order-1\x02UNIQ_KEY\x017F000001000118B4AAC2470D4A0000\x02WAIT\x01true\x02TAGS\x01TagA\x02"
	for b.Loop() {
		if messageTypeOf(props) != metrics.TypeNormal {
			b.Fatal("not normal")
		}
	}
}

// RocketMQ's POP metrics after pops, acks, a change of invisible time and
// a revive: every non-orderly pop of a queue writes a checkpoint (CK) and
// every ack, batch ack entry or change of invisible time an ack (ACK),
// under the topic read; a change of invisible time a checkpoint too;
// revive reads the checkpoint due (CK got, revive queue 0) and puts its
// message to the pop-retry topic. A message revive moves to the DLQ
// instead (past its group's retryMaxTimes) is read as a checkpoint due
// but counts no retry: RocketMQ's revive puts every message to the
// pop-retry topic, and the move to the DLQ, its gRPC proxy's send-back,
// counts in rocketmq_send_to_dlq_messages_total only. Orderly
// pops and acks count nowhere, as RocketMQ puts none of them to its revive
// topic.
func TestPopReviveMetrics(t *testing.T) {
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	}, func(b *Broker) { b.lagTTL = 0 })
	c, rc := popClient(b)
	sendBodies(t, rc, "PopMetT", 4)
	sendBodies(t, rc, "PopMetOrderT", 1)
	sendBodies(t, rc, "PopMetDLQT", 1)
	b.caughtUp()
	// A group whose first revive goes to the DLQ.
	const dlqGroup = "g-popm-dlq"
	gc, err := b.groupConfig(dlqGroup, true)
	if err != nil {
		t.Fatal(err)
	}
	gc.RetryMaxTimes = 0
	if err := b.groups.Put(gc); err != nil {
		t.Fatal(err)
	}
	if res := mustPop(t, c, popclient.PopRequest{Group: dlqGroup, Topic: "PopMetDLQT", QueueID: -1, MaxMsgNums: 1,
		InvisibleTime: 100 * time.Millisecond}); len(res.Messages) != 1 {
		t.Fatalf("pop of %s: %d messages", dlqGroup, len(res.Messages))
	}
	const group = "g-popm"
	res := mustPop(t, c, popclient.PopRequest{Group: group, Topic: "PopMetT", QueueID: 0, MaxMsgNums: 4, InvisibleTime: time.Minute})
	if len(res.Messages) != 4 {
		t.Fatalf("popped %d messages, want 4", len(res.Messages))
	}
	if code, err := c.Ack(ctx20(t), group, res.Messages[0]); err != nil || code != remoting.Success {
		t.Fatalf("ack: %d %v", code, err)
	}
	if code, err := c.Ack(ctx20(t), group, res.Messages[0]); err != nil || code != remoting.Success { // stale: an ACK all the same
		t.Fatalf("second ack: %d %v", code, err)
	}
	if code, err := c.BatchAck(ctx20(t), group, "PopMetT", res.Messages[1:3]); err != nil || code != remoting.Success {
		t.Fatalf("batch ack: %d %v", code, err)
	}
	// The last one comes back through revive.
	if code, _, err := c.ChangeInvisibleTime(ctx20(t), group, res.Messages[3], 0); err != nil || code != remoting.Success {
		t.Fatalf("change invisible time: %d %v", code, err)
	}
	var retry popclient.PopResult
	for deadline := time.Now().Add(10 * time.Second); ; {
		retry = mustPop(t, c, popclient.PopRequest{Group: group, Topic: "PopMetT", QueueID: -1, MaxMsgNums: 1,
			InvisibleTime: time.Minute, PollTime: 2 * time.Second})
		if len(retry.Messages) == 1 || time.Now().After(deadline) {
			break
		}
	}
	if len(retry.Messages) != 1 || retry.Messages[0].RealTopic != pop.RetryTopicV1("PopMetT", group) {
		t.Fatalf("revived message not popped from the pop-retry topic: %+v", retry.Messages)
	}
	for deadline := time.Now().Add(10 * time.Second); b.popSvc.ReviveStats().DLQ < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s's message not moved to the DLQ: %+v", dlqGroup, b.popSvc.ReviveStats())
		}
	}
	// An orderly pop and its ack.
	ord := mustPop(t, c, popclient.PopRequest{Group: "g-popm-order", Topic: "PopMetOrderT", QueueID: 0, MaxMsgNums: 1,
		InvisibleTime: time.Minute, Order: true})
	if len(ord.Messages) != 1 {
		t.Fatalf("orderly pop: %d messages", len(ord.Messages))
	}
	if code, err := c.Ack(ctx20(t), "g-popm-order", ord.Messages[0]); err != nil || code != remoting.Success {
		t.Fatalf("orderly ack: %d %v", code, err)
	}
	text := scrapeMetrics(t, b)
	g := `consumer_group="` + group + `"`
	retryTopic := `topic="` + pop.RetryTopicV1("PopMetT", group) + `"`
	for _, c := range []struct {
		metric string
		labels []string
		want   float64
	}{
		// The pop and the change of invisible time.
		{"rocketmq_pop_revive_in_message_total", []string{g, `topic="PopMetT"`, `revive_message_type="CK"`, `put_status="PUT_OK"`}, 2},
		// Two acks, one batch ack entry, the change of invisible time.
		{"rocketmq_pop_revive_in_message_total", []string{g, `topic="PopMetT"`, `revive_message_type="ACK"`, `put_status="PUT_OK"`}, 4},
		// The pop of the revived message, from the pop-retry topic.
		{"rocketmq_pop_revive_in_message_total", []string{g, retryTopic, `revive_message_type="CK"`, `put_status="PUT_OK"`}, 1},
		{"rocketmq_pop_revive_out_message_total", []string{g, `topic="PopMetT"`, `queue_id="0"`, `revive_message_type="CK"`}, 1},
		{"rocketmq_pop_revive_retry_messages_total", []string{g, `topic="PopMetT"`, `put_status="PUT_OK"`}, 1},
		// The message moved to the DLQ: popped (CK put), its checkpoint
		// read by revive (CK got), no retry.
		{"rocketmq_pop_revive_in_message_total", []string{`consumer_group="` + dlqGroup + `"`, `topic="PopMetDLQT"`, `revive_message_type="CK"`, `put_status="PUT_OK"`}, 1},
		{"rocketmq_pop_revive_out_message_total", []string{`consumer_group="` + dlqGroup + `"`, `topic="PopMetDLQT"`, `queue_id="0"`, `revive_message_type="CK"`}, 1},
		{"rocketmq_send_to_dlq_messages_total", []string{`consumer_group="` + dlqGroup + `"`, `topic="PopMetDLQT"`, `is_system="false"`}, 1},
		// Nothing due is left: the revived message is in flight for a
		// minute.
		{"rocketmq_pop_revive_lag_milliseconds", []string{`queue_id="0"`}, 0},
		{"rocketmq_pop_revive_latency_milliseconds", []string{`queue_id="0"`}, 0},
	} {
		if v := metricValue(t, text, c.metric, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.metric, c.labels, v, c.want)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "rocketmq_pop_") && strings.Contains(line, `consumer_group="g-popm-order"`) {
			t.Errorf("an orderly pop or ack is counted: %s", line)
		}
		if strings.HasPrefix(line, "rocketmq_pop_revive_retry_messages_total{") && strings.Contains(line, `consumer_group="`+dlqGroup+`"`) {
			t.Errorf("a move to the DLQ is counted as a retry: %s", line)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// put_status names a revive put's or a POP state write's outcome as
// RocketMQ's PutMessageStatus does.
func TestPutStatusIsRocketMQs(t *testing.T) {
	for _, c := range []struct {
		status commitlog.AppendStatus
		err    error
		want   string
	}{
		{commitlog.PutOK, nil, "PUT_OK"},
		{commitlog.FlushDiskTimeout, nil, "FLUSH_DISK_TIMEOUT"},
		{commitlog.FlushSlaveTimeout, nil, "FLUSH_SLAVE_TIMEOUT"},
		{commitlog.PutOK, fmt.Errorf("put: %w", commitlog.ErrMessageTooLarge), "MESSAGE_ILLEGAL"},
		{commitlog.PutOK, fmt.Errorf("put: %w", commitlog.ErrMapFailed), "CREATE_MAPPED_FILE_FAILED"},
		{commitlog.PutOK, fmt.Errorf("put: %w", commitlog.ErrDiskFull), "SERVICE_NOT_AVAILABLE"},
		{commitlog.PutOK, errors.New("pebble: closed"), "UNKNOWN_ERROR"},
	} {
		if got := putStatus(c.status, c.err); got != c.want {
			t.Errorf("putStatus(%v, %v) = %s, want %s", c.status, c.err, got, c.want)
		}
	}
}

// enablePopMetrics=false leaves RocketMQ's POP metrics out of the scrape
// after pops, acks, a change of invisible time, a revive and a move to
// the DLQ, while the other metrics those feed are served; RocketMQ reads
// the switch at start, and UPDATE_BROKER_CONFIG refuses to change it while
// the broker runs.
func TestPopMetricsOff(t *testing.T) {
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
		"enablePopMetrics": "false",
	}, func(b *Broker) { b.lagTTL = 0 })
	c, rc := popClient(b)
	sendBodies(t, rc, "PopOffT", 3)
	b.caughtUp()
	const group = "g-popoff"
	gc, err := b.groupConfig(group, true)
	if err != nil {
		t.Fatal(err)
	}
	gc.RetryMaxTimes = 1
	if err := b.groups.Put(gc); err != nil {
		t.Fatal(err)
	}
	res := mustPop(t, c, popclient.PopRequest{Group: group, Topic: "PopOffT", QueueID: 0, MaxMsgNums: 3, InvisibleTime: time.Minute})
	if len(res.Messages) != 3 {
		t.Fatalf("popped %d messages, want 3", len(res.Messages))
	}
	if code, err := c.Ack(ctx20(t), group, res.Messages[0]); err != nil || code != remoting.Success {
		t.Fatalf("ack: %d %v", code, err)
	}
	// One revived to the pop-retry topic and, not acknowledged there,
	// moved to the DLQ; the other revived once.
	for _, m := range res.Messages[1:] {
		if code, _, err := c.ChangeInvisibleTime(ctx20(t), group, m, 0); err != nil || code != remoting.Success {
			t.Fatalf("change invisible time: %d %v", code, err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); b.popSvc.ReviveStats().Retried < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not revived: %+v", b.popSvc.ReviveStats())
		}
	}
	retry := mustPop(t, c, popclient.PopRequest{Group: group, Topic: "PopOffT", QueueID: -1, MaxMsgNums: 1,
		InvisibleTime: 100 * time.Millisecond, PollTime: 2 * time.Second})
	if len(retry.Messages) != 1 {
		t.Fatalf("pop of the pop-retry topic: %d messages", len(retry.Messages))
	}
	for deadline := time.Now().Add(10 * time.Second); b.popSvc.ReviveStats().DLQ < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not moved to the DLQ: %+v", b.popSvc.ReviveStats())
		}
	}
	text := scrapeMetrics(t, b)
	if strings.Contains(text, "rocketmq_pop_") {
		t.Errorf("enablePopMetrics=false, yet the scrape has POP metrics")
	}
	if v := metricValue(t, text, "rocketmq_send_to_dlq_messages_total", `consumer_group="`+group+`"`); v != 1 {
		t.Errorf("rocketmq_send_to_dlq_messages_total = %v, want 1", v)
	}
	if v := metricValue(t, text, "rocketmq_messages_out_total", `consumer_group="`+group+`"`, `topic="PopOffT"`, `is_retry="false"`); v != 3 {
		t.Errorf("rocketmq_messages_out_total of the first pop = %v, want 3", v)
	}
	r := call(t, rc, remoting.UpdateBrokerConfig, nil, []byte("enablePopMetrics=true"))
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "enablePopMetrics cannot change while the broker runs") {
		t.Errorf("UPDATE_BROKER_CONFIG enablePopMetrics=true: %d %q, want it refused until a restart", r.Code, r.Remark)
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// rocketmq_half_messages counts the transactions open by the topic their
// message is sent to: a half sent counts one, its commit or rollback
// takes it away, and a topic with none open has no series.
func TestHalfMessagesGaugeFollowsTheTransactions(t *testing.T) {
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0",
	}, func(b *Broker) { b.lagTTL = 0 }) // each scrape computes the gauges
	c := b.client(nil)
	born := time.Now().UnixMilli()
	h1 := sendHalf(t, c, "TxHalfA", 0, "UNIQ-HALF-1", "one", "", born)
	h2 := sendHalf(t, c, "TxHalfA", 0, "UNIQ-HALF-2", "two", "", born)
	sendHalf(t, c, "TxHalfB", 0, "UNIQ-HALF-3", "three", "", born)
	b.caughtUp()
	half := func(topic string) float64 {
		t.Helper()
		return metricValue(t, scrapeMetrics(t, b), "rocketmq_half_messages", `topic="`+topic+`"`)
	}
	if a, bb := half("TxHalfA"), half("TxHalfB"); a != 2 || bb != 1 {
		t.Fatalf("half messages A %v B %v, want 2 and 1", a, bb)
	}
	if r := endTxn(t, c, h1, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	if a := half("TxHalfA"); a != 1 {
		t.Fatalf("half messages of A after a commit: %v, want 1", a)
	}
	if r := endTxn(t, c, h2, "pg", 12, false); r.Code != remoting.Success {
		t.Fatalf("rollback: %d %s", r.Code, r.Remark)
	}
	text := scrapeMetrics(t, b)
	if bb := metricValue(t, text, "rocketmq_half_messages", `topic="TxHalfB"`); bb != 1 {
		t.Fatalf("half messages of B after A's rollback: %v, want 1", bb)
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "rocketmq_half_messages{") && strings.Contains(line, `topic="TxHalfA"`) {
			t.Fatalf("a series for a topic with no transaction open: %s", line)
		}
	}
}
