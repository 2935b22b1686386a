package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rs/zerolog"
)

// scrape serves m on a loopback port and returns one scrape.
func scrape(t *testing.T, m Served) string {
	t.Helper()
	e, err := Serve("127.0.0.1:0", m, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	return testutil.Scrape(t, e.Addr().String())
}

// The scrape shows every metric under RocketMQ's name and labels: by
// default the names of RocketMQ 5.1.4 and later, a declared unit
// appended; with Bare those of 5.0 to 5.1.3.
func TestMetricsUnderRocketMQNames(t *testing.T) {
	for _, names := range []Naming{UnitSuffixed, Bare} {
		t.Run(namingName(names), func(t *testing.T) { testMetricsUnderRocketMQNames(t, names) })
	}
}

// namingName names a Naming in a subtest.
func namingName(n Naming) string {
	if n == Bare {
		return "bare"
	}
	return "unit-suffixed"
}

func testMetricsUnderRocketMQNames(t *testing.T, names Naming) {
	m := New(map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "broker-a"}, Sources{
		BrokerPermission:     func() int { return 4 },
		TopicCount:           func() int { return 12 },
		ConsumerGroupCount:   func() int { return 3 },
		DispatchBehindBytes:  func() int64 { return 1024 },
		FlushBehindBytes:     func() int64 { return 2048 },
		StorageSize:          func() (int64, bool) { return 5e9, true },
		MessageReserveMillis: func() (int64, bool) { return 86400, true },
		Producers:            func() []Connection { return []Connection{{Language: "go", Version: "479", Count: 2}} },
		Consumers: func() []Connection {
			return []Connection{{Group: "g1", Language: "java", Version: "479", ConsumeMode: "push", Count: 1}}
		},
		Lags: func(context.Context) []Lag {
			return []Lag{{Group: "g1", Topic: "%RETRY%g1", Retry: true, Messages: 7, LatencyMillis: 1500,
				Inflight: 3, Ready: 4, QueueingMillis: 900}}
		},
	}, names)
	m.In("Orders", TypeNormal, false, 3, 3000)
	m.In("Orders", TypeNormal, false, 2, 2000)
	m.In("Orders", TypeDelay, false, 1, 900)
	m.In("Orders", TypeNormal, false, 0, 100) // nothing stored: not counted
	m.Out("Orders", "g1", false, 4, 4000)
	m.TransactionEnded("Orders", true, 3*time.Second)
	m.TransactionEnded("Orders", true, 90*time.Second)
	m.TransactionEnded("Orders", false, time.Hour) // a rollback has no finish latency
	m.TopicCreated(false, true, 15*time.Millisecond)
	m.TopicCreated(true, false, 2*time.Millisecond)
	m.GroupCreated(true, 4*time.Millisecond)
	var off *Broker
	off.In("Orders", TypeNormal, false, 1, 1) // the exporter is off: no panic
	off.Out("Orders", "g1", false, 1, 1)
	off.TransactionEnded("Orders", true, time.Second)
	off.ToDLQ("g1", "Orders", false)
	off.TopicCreated(false, true, time.Millisecond)
	off.GroupCreated(true, time.Millisecond)

	text := scrape(t, m)
	const c = `cluster="c1",`
	// Each line is name, then the unit suffix RocketMQ 5.1.4+ appends
	// ("" when it appends none), then the rest of the series.
	for _, want := range []struct{ name, unit, rest string }{
		{"rocketmq_messages_in_total", "", `{` + c + `is_system="false",message_type="normal",node_id="broker-a",node_type="broker",topic="Orders"} 5`},
		{"rocketmq_throughput_in_total", "", `{` + c + `is_system="false",message_type="normal",node_id="broker-a",node_type="broker",topic="Orders"} 5000`},
		{"rocketmq_messages_in_total", "", `{` + c + `is_system="false",message_type="delay",node_id="broker-a",node_type="broker",topic="Orders"} 1`},
		{"rocketmq_messages_out_total", "", `{` + c + `consumer_group="g1",is_system="false",node_id="broker-a",node_type="broker",topic="Orders"} 4`},
		{"rocketmq_throughput_out_total", "", `{` + c + `consumer_group="g1",is_system="false",node_id="broker-a",node_type="broker",topic="Orders"} 4000`},
		{"rocketmq_commit_messages_total", "", `{` + c + `node_id="broker-a",node_type="broker",topic="Orders"} 2`},
		{"rocketmq_rollback_messages_total", "", `{` + c + `node_id="broker-a",node_type="broker",topic="Orders"} 1`},
		{"rocketmq_broker_permission", "", `{` + c + `node_id="broker-a",node_type="broker"} 4`},
		{"rocketmq_topic_number", "", `{` + c + `node_id="broker-a",node_type="broker"} 12`},
		{"rocketmq_consumer_group_number", "", `{` + c + `node_id="broker-a",node_type="broker"} 3`},
		{"rocketmq_storage_dispatch_behind_bytes", "", `{` + c + `node_id="broker-a",node_type="broker",storage_medium="disk",storage_type="local"} 1024`},
		{"rocketmq_storage_flush_behind_bytes", "", `{` + c + `node_id="broker-a",node_type="broker",storage_medium="disk",storage_type="local"} 2048`},
		{"rocketmq_storage_size", "_bytes", `{` + c + `node_id="broker-a",node_type="broker",storage_medium="disk",storage_type="local"} 5e+09`},
		{"rocketmq_storage_message_reserve_time", "_milliseconds", `{` + c + `node_id="broker-a",node_type="broker",storage_medium="disk",storage_type="local"} 86400`},
		{"rocketmq_producer_connections", "", `{` + c + `language="go",node_id="broker-a",node_type="broker",protocol_type="remoting",version="479"} 2`},
		{"rocketmq_consumer_lag_messages", "", `{` + c + `consumer_group="g1",is_retry="true",is_system="false",node_id="broker-a",node_type="broker",topic="%RETRY%g1"} 7`},
		{"rocketmq_consumer_lag_latency", "_milliseconds", `{` + c + `consumer_group="g1",is_retry="true",is_system="false",node_id="broker-a",node_type="broker",topic="%RETRY%g1"} 1500`},
		{"rocketmq_consumer_inflight_messages", "", `{` + c + `consumer_group="g1",is_retry="true",is_system="false",node_id="broker-a",node_type="broker",topic="%RETRY%g1"} 3`},
		{"rocketmq_consumer_ready_messages", "", `{` + c + `consumer_group="g1",is_retry="true",is_system="false",node_id="broker-a",node_type="broker",topic="%RETRY%g1"} 4`},
		{"rocketmq_consumer_queueing_latency", "_milliseconds", `{` + c + `consumer_group="g1",is_retry="true",is_system="false",node_id="broker-a",node_type="broker",topic="%RETRY%g1"} 900`},
		{"rocketmq_consumer_connections", "", `{` + c + `consume_mode="push",consumer_group="g1",is_system="false",language="java",node_id="broker-a",node_type="broker",protocol_type="remoting",version="479"} 1`},
		// Sizes: means of 1000, 1000 and 900 bytes, all in the 1 KiB bucket.
		{"rocketmq_message_size", "", `_bucket{` + c + `is_system="false",message_type="normal",node_id="broker-a",node_type="broker",topic="Orders",le="1024"} 2`},
		{"rocketmq_message_size", "", `_count{` + c + `is_system="false",message_type="delay",node_id="broker-a",node_type="broker",topic="Orders"} 1`},
		// Commits after 3 s and 90 s: one in the 5 s bucket, both by 600 s.
		{"rocketmq_finish_message_latency", "_milliseconds", `_bucket{` + c + `node_id="broker-a",node_type="broker",topic="Orders",le="5"} 1`},
		{"rocketmq_finish_message_latency", "_milliseconds", `_bucket{` + c + `node_id="broker-a",node_type="broker",topic="Orders",le="600"} 2`},
		{"rocketmq_finish_message_latency", "_milliseconds", `_sum{` + c + `node_id="broker-a",node_type="broker",topic="Orders"} 93`},
		{"rocketmq_topic_create_execution_time", "_milliseconds", `_bucket{` + c + `invocation_status="success",is_system="false",node_id="broker-a",node_type="broker",le="100"} 1`},
		{"rocketmq_topic_create_execution_time", "_milliseconds", `_count{` + c + `invocation_status="failure",is_system="true",node_id="broker-a",node_type="broker"} 1`},
		{"rocketmq_consumer_group_create_execution_time", "_milliseconds", `_bucket{` + c + `invocation_status="success",node_id="broker-a",node_type="broker",le="10"} 1`},
	} {
		line := want.name + want.rest
		if names == UnitSuffixed {
			line = want.name + want.unit + want.rest
		}
		if !strings.Contains(text, "\n"+line+"\n") {
			t.Errorf("scrape lacks\n%s", line)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

func TestServeRefusesABusyAddress(t *testing.T) {
	m := New(nil, Sources{}, UnitSuffixed)
	e, err := Serve("127.0.0.1:0", m, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if _, err := Serve(e.Addr().String(), m, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "metrics exporter: listen on") {
		t.Fatalf("second exporter on %s: %v", e.Addr(), err)
	}
}

func TestValidConstLabel(t *testing.T) {
	for name, want := range map[string]bool{
		"region": true, "zone_a": true,
		"topic": false, "consumer_group": false, "node_id": false, "a-b": false, "": false, "__name__": false, "1x": false,
	} {
		if got := ValidConstLabel(name); got != want {
			t.Errorf("ValidConstLabel(%q) = %v, want %v", name, got, want)
		}
	}
	// Every name it accepts builds the metrics (a clash would panic).
	for _, names := range []Naming{UnitSuffixed, Bare} {
		New(map[string]string{"region": "eu"}, Sources{Lags: func(context.Context) []Lag { return nil }, Producers: func() []Connection { return nil }}, names)
	}
}

// A store gauge without a value (an empty CommitLog has no oldest
// message) is left out, as RocketMQ leaves it out.
func TestStoreGaugeWithoutAValueIsLeftOut(t *testing.T) {
	known := false
	m := New(nil, Sources{MessageReserveMillis: func() (int64, bool) { return 1234, known }}, UnitSuffixed)
	if text := scrape(t, m); strings.Contains(text, StorageReserveTime) {
		t.Fatalf("scrape has %s without a value:\n%s", StorageReserveTime, text)
	}
	known = true
	want := `rocketmq_storage_message_reserve_time_milliseconds{storage_medium="disk",storage_type="local"} 1234` + "\n"
	if text := scrape(t, m); !strings.Contains(text, want) {
		t.Fatalf("scrape lacks %s:\n%s", want, text)
	}
}

// The timer gauges of a census: the store's labels, the enqueue gauges
// unlabelled, a series of rocketmq_timing_messages per topic; no series
// at all when the census is not to be had.
func TestTimerGauges(t *testing.T) {
	have := true
	m := New(map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "b"}, Sources{
		Timers: func() (TimerCensus, bool) {
			return TimerCensus{EnqueueLag: 3, EnqueueLatencyMillis: 1500, Waiting: 9,
				Timing: []TopicMessages{{"A", 7}, {"B", 2}}, Within: make([]int64, len(TimerBounds))}, have
		},
	}, UnitSuffixed)
	text := scrape(t, m)
	const store = `storage_medium="disk",storage_type="local"`
	for _, want := range []string{
		`rocketmq_timer_enqueue_lag{cluster="c1",node_id="b",node_type="broker",` + store + `} 3`,
		`rocketmq_timer_enqueue_latency_milliseconds{cluster="c1",node_id="b",node_type="broker",` + store + `} 1500`,
		`rocketmq_timer_dequeue_lag{cluster="c1",node_id="b",node_type="broker",` + store + `} 9`,
		`rocketmq_timing_messages{cluster="c1",node_id="b",node_type="broker",` + store + `,topic="A"} 7`,
		`rocketmq_timing_messages{cluster="c1",node_id="b",node_type="broker",` + store + `,topic="B"} 2`,
	} {
		if !strings.Contains(text, "\n"+want+"\n") {
			t.Errorf("scrape lacks\n%s", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
	have = false
	if text := scrape(t, m); strings.Contains(text, "rocketmq_timer") || strings.Contains(text, "rocketmq_timing") {
		t.Errorf("timer series without a census:\n%s", text)
	}
}

// A label value that is not valid UTF-8 (a topic or group name a client
// wrote as raw bytes in a ROCKETMQ binary header) neither panics the
// request that records it nor breaks the scrape: each run of invalid bytes
// becomes U+FFFD. Two names that differ only in their invalid bytes share
// one series of a gauge (the first row is kept), or the registry would
// refuse the whole scrape for a series collected twice.
func TestLabelValuesThatAreNotUTF8AreRepaired(t *testing.T) {
	m := New(map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "b"}, Sources{
		Lags: func(context.Context) []Lag {
			return []Lag{{Group: "g\xff", Topic: "T", Messages: 3}, {Group: "g\xfe", Topic: "T", Messages: 9}}
		},
		Consumers: func() []Connection {
			return []Connection{{Group: "g\xff", Language: "go", Version: "v\xc3", ConsumeMode: "push", Count: 1},
				{Group: "g\xfe", Language: "go", Version: "v\xc3", ConsumeMode: "push", Count: 2}}
		},
		Producers: func() []Connection { return []Connection{{Language: "j\xffava", Version: "v5", Count: 4}} },
		Timers: func() (TimerCensus, bool) {
			return TimerCensus{Timing: []TopicMessages{{"T\xff", 5}, {"T\xfe", 2}}}, true
		},
	}, UnitSuffixed)
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("a label value that is not UTF-8 panicked: %v", r)
			}
		}()
		m.In("T\xff", TypeNormal, false, 1, 10)
		m.Out("T", "g\xff\xfe", false, 1, 10)
		m.Out("T", "g\xfe", false, 1, 10)
		m.ToDLQ("g\xff", "T\xff", false)
		m.TransactionEnded("T\xff", true, time.Second)
		m.TransactionEnded("T\xff", false, 0)
		m.TimerEnqueued("T\xff", time.Minute)
		m.TimerDequeued("T\xff")
	}()
	text := scrape(t, m)
	for _, want := range []string{
		`rocketmq_messages_in_total{cluster="c1",is_system="false",message_type="normal",node_id="b",node_type="broker",topic="T\uFFFD"} 1`,
		// Both groups' deliveries, under the one repaired name.
		`rocketmq_messages_out_total{cluster="c1",consumer_group="g\uFFFD",is_system="false",node_id="b",node_type="broker",topic="T"} 2`,
		`rocketmq_send_to_dlq_messages_total{cluster="c1",consumer_group="g\uFFFD",is_system="false",node_id="b",node_type="broker",topic="T\uFFFD"} 1`,
		`rocketmq_consumer_lag_messages{cluster="c1",consumer_group="g\uFFFD",is_retry="false",is_system="false",node_id="b",node_type="broker",topic="T"} 3`,
		`rocketmq_consumer_connections{cluster="c1",consume_mode="push",consumer_group="g\uFFFD",is_system="false",language="go",node_id="b",node_type="broker",protocol_type="remoting",version="v\uFFFD"} 1`,
		`rocketmq_producer_connections{cluster="c1",language="j\uFFFDava",node_id="b",node_type="broker",protocol_type="remoting",version="v5"} 4`,
		`rocketmq_timing_messages{cluster="c1",node_id="b",node_type="broker",storage_medium="disk",storage_type="local",topic="T\uFFFD"} 5`,
	} {
		want = strings.ReplaceAll(want, `\uFFFD`, "\uFFFD")
		if !strings.Contains(text, "\n"+want+"\n") {
			t.Errorf("scrape lacks\n%s", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// A pop's series of rocketmq_messages_out_total and
// rocketmq_throughput_out_total carry is_retry, a pull's do not, as
// RocketMQ's PopMessageProcessor and DefaultPullMessageResultHandler label
// them; both kinds are one family of the scrape.
func TestPopSeriesCarryIsRetry(t *testing.T) {
	m := New(map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "b"}, Sources{}, UnitSuffixed)
	m.Out("T", "g-pull", false, 2, 200)
	m.PopOut("T", "g-pop", false, false, 3, 300)
	m.PopOut("T", "g-pop", false, true, 1, 120)
	m.PopOut("T", "g-pop", false, true, 0, 0) // nothing popped: not counted
	var off *Broker
	off.PopOut("T", "g-pop", false, true, 1, 1) // the exporter is off: no panic
	text := scrape(t, m)
	for _, want := range []string{
		`rocketmq_messages_out_total{cluster="c1",consumer_group="g-pull",is_system="false",node_id="b",node_type="broker",topic="T"} 2`,
		`rocketmq_messages_out_total{cluster="c1",consumer_group="g-pop",is_retry="false",is_system="false",node_id="b",node_type="broker",topic="T"} 3`,
		`rocketmq_messages_out_total{cluster="c1",consumer_group="g-pop",is_retry="true",is_system="false",node_id="b",node_type="broker",topic="T"} 1`,
		`rocketmq_throughput_out_total{cluster="c1",consumer_group="g-pop",is_retry="true",is_system="false",node_id="b",node_type="broker",topic="T"} 120`,
	} {
		if !strings.Contains(text, "\n"+want+"\n") {
			t.Errorf("scrape lacks\n%s", want)
		}
	}
	for _, name := range []string{"rocketmq_messages_out_total", "rocketmq_throughput_out_total"} {
		if n := strings.Count(text, "# TYPE "+name+" counter\n"); n != 1 {
			t.Errorf("%s is %d families, want 1", name, n)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// The POP counters and gauges under RocketMQ's names and labels; a
// topic's and a group's deletion drop their counter series.
func TestPopReviveMetrics(t *testing.T) {
	backlog := ReviveBacklog{Due: 7, BehindMillis: 1500}
	m := New(map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "b"},
		Sources{PopRevive: func() ReviveBacklog { return backlog }}, UnitSuffixed)
	m.PopRevivePut("g", "T", ReviveCK, PutOK)
	m.PopRevivePut("g", "T", ReviveCK, PutOK)
	m.PopRevivePut("g", "T", ReviveACK, "UNKNOWN_ERROR")
	m.PopReviveGot("g", "%RETRY%g_T", 0, ReviveCK)
	m.PopRetried("g", "T", PutOK, 3)
	m.PopRetried("g", "T", PutOK, 0) // nothing put: not counted
	m.PopRevivePut("g2", "T2", ReviveCK, PutOK)
	var off *Broker
	off.PopRevivePut("g", "T", ReviveCK, PutOK) // the exporter is off: no panic
	off.PopReviveGot("g", "T", 0, ReviveCK)
	off.PopRetried("g", "T", PutOK, 1)
	text := scrape(t, m)
	for _, want := range []string{
		`rocketmq_pop_revive_in_message_total{cluster="c1",consumer_group="g",node_id="b",node_type="broker",put_status="PUT_OK",revive_message_type="CK",topic="T"} 2`,
		`rocketmq_pop_revive_in_message_total{cluster="c1",consumer_group="g",node_id="b",node_type="broker",put_status="UNKNOWN_ERROR",revive_message_type="ACK",topic="T"} 1`,
		`rocketmq_pop_revive_out_message_total{cluster="c1",consumer_group="g",node_id="b",node_type="broker",queue_id="0",revive_message_type="CK",topic="%RETRY%g_T"} 1`,
		`rocketmq_pop_revive_retry_messages_total{cluster="c1",consumer_group="g",node_id="b",node_type="broker",put_status="PUT_OK",topic="T"} 3`,
		`rocketmq_pop_revive_lag_milliseconds{cluster="c1",node_id="b",node_type="broker",queue_id="0"} 7`,
		`rocketmq_pop_revive_latency_milliseconds{cluster="c1",node_id="b",node_type="broker",queue_id="0"} 1500`,
		`rocketmq_pop_revive_in_message_total{cluster="c1",consumer_group="g2",node_id="b",node_type="broker",put_status="PUT_OK",revive_message_type="CK",topic="T2"} 1`,
	} {
		if !strings.Contains(text, "\n"+want+"\n") {
			t.Errorf("scrape lacks\n%s", want)
		}
	}
	m.TopicDeleted("T")
	m.GroupDeleted("g")
	text = scrape(t, m)
	if strings.Contains(text, `consumer_group="g",`) {
		t.Error("series of the deleted topic and group remain")
	}
	if !strings.Contains(text, `consumer_group="g2"`) {
		t.Error("the series of another group and topic went with them")
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// enablePopMetrics=false (Families.Pop) serves none of the POP counters
// and gauges, and the counters count nothing meanwhile: RocketMQ's
// PopMetricsManager then has no-op counters and no gauge callbacks.
// The other families are served as before.
func TestPopFamilyOff(t *testing.T) {
	read := 0
	m := New(map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "b"},
		Sources{PopRevive: func() ReviveBacklog { read++; return ReviveBacklog{Due: 7, BehindMillis: 1500} }, Off: Families{Pop: true}},
		UnitSuffixed)
	m.PopRevivePut("g", "T", ReviveCK, PutOK)
	m.PopReviveGot("g", "T", 0, ReviveCK)
	m.PopRetried("g", "T", PutOK, 3)
	m.ToDLQ("g", "T", false)
	text := scrape(t, m)
	if strings.Contains(text, "rocketmq_pop_") {
		t.Errorf("the POP family is off, yet the scrape has its metrics:\n%s", text)
	}
	if read != 0 {
		t.Errorf("the revive backlog was read %d times with the POP family off", read)
	}
	if !strings.Contains(text, "\nrocketmq_send_to_dlq_messages_total{") {
		t.Errorf("rocketmq_send_to_dlq_messages_total went with the POP family:\n%s", text)
	}
	for _, c := range []*capped{m.popReviveIn, m.popReviveOut, m.popRetry} {
		if n := c.size(); n != 0 {
			t.Errorf("%s holds %d series with the POP family off", c.names[0], n)
		}
	}
}

// rocketmq_half_messages, as RocketMQ's BrokerMetricsManager serves it: a
// gauge with the broker's labels and topic, one series per topic; gone
// with enableTransactionMetrics=false, as RocketMQ registers it with the
// commit and rollback counters.
func TestHalfMessagesGauge(t *testing.T) {
	src := Sources{HalfMessages: func() []TopicMessages { return []TopicMessages{{"A", 3}, {"B", 1}} }}
	m := New(map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "b"}, src, UnitSuffixed)
	text := scrape(t, m)
	for _, want := range []string{
		`rocketmq_half_messages{cluster="c1",node_id="b",node_type="broker",topic="A"} 3`,
		`rocketmq_half_messages{cluster="c1",node_id="b",node_type="broker",topic="B"} 1`,
	} {
		if !strings.Contains(text, "\n"+want+"\n") {
			t.Errorf("scrape lacks\n%s\nin:\n%s", want, text)
		}
	}
	src.Off.Transaction = true
	m = New(map[string]string{"cluster": "c1", "node_type": "broker", "node_id": "b"}, src, UnitSuffixed)
	if text := scrape(t, m); strings.Contains(text, HalfMessages) {
		t.Errorf("rocketmq_half_messages served with the transaction metrics off:\n%s", text)
	}
}
