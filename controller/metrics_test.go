package controller

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/metrics"
	"github.com/rocketkv/rocketkv/remoting"
)

// startMetricsHost starts a controller host on a free port with its
// metrics served on another.
func startMetricsHost(t *testing.T, mo *MetricsOptions) *Host {
	t.Helper()
	cfg := testConfig(t.TempDir())
	cfg.Peers = "n0-127.0.0.1:0"
	cfg.NotifyBrokerRoleChanged = false
	h := startTestHost(t, Options{Config: cfg, Log: zerolog.Nop(), Metrics: mo}, remoting.ServerConfig{})
	waitFor(t, "the controller to lead", h.Controller.IsLeader)
	return h
}

// scrapeHost returns one scrape of the host's exporter.
func scrapeHost(t *testing.T, h *Host) string {
	t.Helper()
	return testutil.Scrape(t, h.MetricsAddr().String())
}

// series returns the values of the series of metric whose labels include
// every pair given (`k="v"`).
func series(text, metric string, pairs ...string) []float64 {
	var out []float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, metric+"{"), "} ")
		if !ok {
			continue
		}
		all := true
		for _, p := range pairs {
			all = all && (strings.HasPrefix(labels, p+",") || strings.Contains(labels, ","+p+",") ||
				strings.HasSuffix(labels, ","+p) || labels == p)
		}
		if v, err := strconv.ParseFloat(value, 64); all && err == nil {
			out = append(out, v)
		}
	}
	return out
}

// value is the value of the one series of metric with the pairs.
func value(t *testing.T, text, metric string, pairs ...string) float64 {
	t.Helper()
	vs := series(text, metric, pairs...)
	if len(vs) != 1 {
		t.Fatalf("%d series of %s with %v, want 1; scrape:\n%s", len(vs), metric, pairs, text)
	}
	return vs[0]
}

// TestMetricsAfterRemotingRequests drives a controller with brokers'
// Remoting requests and scrapes its exporter: every metric RocketMQ's
// controller serves, under its name (RocketMQ 5.1.4 and later: units
// appended), with its labels, moving as RocketMQ's would.
func TestMetricsAfterRemotingRequests(t *testing.T) {
	h := startMetricsHost(t, &MetricsOptions{Addr: "127.0.0.1:0", Labels: map[string]string{"instance_id": "i1"}, Naming: metrics.UnitSuffixed})
	self := `address="` + h.Addr() + `"`
	constant := []string{self, `group="group1"`, `peer_id="n0"`, `instance_id="i1"`}

	text := scrapeHost(t, h)
	// A leader serves role 1 (RocketMQ's LEADER 3 less FOLLOWER's 2,
	// see ControllerSources.Role).
	if v := value(t, text, "role", constant...); v != 1 {
		t.Errorf("role of the leader %v, want 1", v)
	}
	// The leader's barrier is its first append.
	if v := value(t, text, "dledger_op_total", append([]string{`dledger_operation="append"`, `dLedger_operation_status="success"`}, constant...)...); v < 1 {
		t.Errorf("dledger_op_total after taking the lead %v, want >= 1", v)
	}
	if v := value(t, text, "dledger_disk_usage_bytes", constant...); v <= 0 {
		t.Errorf("dledger_disk_usage_bytes %v, want the raft store's size", v)
	}
	for _, absent := range []string{"request_total", "election_total", "active_broker_num", "request_latency_microseconds_count"} {
		if vs := series(text, absent); len(vs) != 0 {
			t.Errorf("%s before any request: %v", absent, vs)
		}
	}
	appendsBefore := value(t, text, "dledger_op_total", `dLedger_operation_status="success"`)

	b1 := &broker{t: t, cl: dial(t, h.Addr()), addr: "127.0.0.1:1"}
	b2 := &broker{t: t, cl: dial(t, h.Addr()), addr: "127.0.0.1:2"}
	b1.applyID()
	b2.applyID()
	wantCode(t, "register 1", b1.register(), remoting.Success)
	wantCode(t, "register 2", b2.register(), remoting.Success)
	// b1's heartbeats last 2 s: time for the checks below while it is
	// alive, then the controller's own election.
	b1.heartbeat(2000, 0, 10)
	b2.heartbeat(60000, 0, 10)
	wantCode(t, "first election", b1.elect(), remoting.Success)
	wantCode(t, "election with a live master", b2.elect(), remoting.ControllerMasterStillExist)
	// A header RocketMQ cannot decode makes its handler throw: failed.
	wantCode(t, "elect without a header", invoke(t, b1.cl, remoting.ControllerElectMaster, nil, nil), remoting.SystemError)
	wantCode(t, "alter", alter(t, b1.cl, 1, 1, []int64{1, 2}, 1), remoting.Success)

	text = scrapeHost(t, h)
	for _, want := range []struct {
		typ, status string
		n           float64
	}{
		{"CONTROLLER_GET_NEXT_BROKER_ID", "success", 2},
		{"CONTROLLER_APPLY_BROKER_ID", "success", 2},
		{"CONTROLLER_REGISTER_BROKER", "success", 2},
		{"CONTROLLER_BROKER_HEARTBEAT", "success", 2},
		{"CONTROLLER_ELECT_MASTER", "success", 2},
		{"CONTROLLER_ELECT_MASTER", "failed", 1},
		{"CONTROLLER_ALTER_SYNC_STATE_SET", "success", 1},
	} {
		if v := value(t, text, "request_total", append([]string{`request_type="` + want.typ + `"`, `request_handle_status="` + want.status + `"`}, constant...)...); v != want.n {
			t.Errorf("request_total %s %s = %v, want %v", want.typ, want.status, v, want.n)
		}
	}
	// The latency counts answered requests only, in microseconds with
	// RocketMQ's buckets (1 µs to 10 s).
	elect := `request_type="CONTROLLER_ELECT_MASTER"`
	if v := value(t, text, "request_latency_microseconds_count", elect); v != 2 {
		t.Errorf("request_latency count of elections %v, want 2 (the failed one not timed)", v)
	}
	if v := value(t, text, "request_latency_microseconds_bucket", elect, `le="1e+07"`); v != 2 {
		t.Errorf("elections within 10 s %v, want 2", v)
	}
	if v := value(t, text, "request_latency_microseconds_bucket", elect, `le="1"`); v != 0 {
		t.Errorf("elections within 1 µs %v (an election replicates its event)", v)
	}
	if n := len(series(text, "request_latency_microseconds_bucket", elect)); n != 23 {
		t.Errorf("%d buckets, want RocketMQ's 22 and +Inf", n)
	}
	newMaster := []string{`cluster="c1"`, `broker_set="broker-a"`, `election_result="new_master_elected"`}
	if v := value(t, text, "election_total", append(newMaster, constant...)...); v != 1 {
		t.Errorf("new_master_elected %v, want 1", v)
	}
	if v := value(t, text, "election_total", `cluster="c1"`, `election_result="keep_current_master"`); v != 1 {
		t.Errorf("keep_current_master %v, want 1", v)
	}
	if v := value(t, text, "active_broker_num", append([]string{`cluster="c1"`, `broker_set="broker-a"`}, constant...)...); v != 2 {
		t.Errorf("active_broker_num %v, want 2", v)
	}
	// The two applied broker ids, the election and the alter replicated
	// events, each an append with its latency; registering an address
	// the controller has changes nothing and appends nothing.
	appends := value(t, text, "dledger_op_total", `dLedger_operation_status="success"`)
	if appends-appendsBefore != 4 {
		t.Errorf("dledger_op_total grew by %v, want 4", appends-appendsBefore)
	}
	if v := value(t, text, "dledger_op_latency_microseconds_count", `dledger_operation="append"`, `dLedger_operation_status="success"`); v != appends {
		t.Errorf("dledger_op_latency count %v, want %v (one per committed append)", v, appends)
	}

	// b1's heartbeats stop: the controller elects b2 itself, a request
	// without a cluster name, and counts one broker alive.
	waitFor(t, "the controller's election", func() bool {
		return len(series(scrapeHost(t, h), "election_total", `cluster=""`, `election_result="new_master_elected"`)) == 1
	})
	text = scrapeHost(t, h)
	if v := value(t, text, "election_total", `cluster=""`, `broker_set="broker-a"`, `election_result="new_master_elected"`); v != 1 {
		t.Errorf("controller-started new_master_elected %v, want 1", v)
	}
	if v := value(t, text, "active_broker_num", `broker_set="broker-a"`); v != 1 {
		t.Errorf("active_broker_num after b1 expired %v, want 1", v)
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// TestMetricsBareNamesAndReadEvents: with metricsNameUnitSuffix=false the
// names are RocketMQ 5.1.3's (request_latency); with isProcessReadEvent a
// read confirms leadership through raft, counted as the append RocketMQ
// makes there; metricsInDelta labels every series aggregation="delta".
func TestMetricsBareNamesAndReadEvents(t *testing.T) {
	h := startMetricsHost(t, &MetricsOptions{Addr: "127.0.0.1:0", Labels: map[string]string{"aggregation": "delta"}, Naming: metrics.Bare})
	h.Controller.cfgMu.Lock()
	h.Controller.cfg.ProcessReadEvent = true
	h.Controller.cfgMu.Unlock()
	before := value(t, scrapeHost(t, h), "dledger_op_total", `dLedger_operation_status="success"`)
	cl := dial(t, h.Addr())
	wantCode(t, "get next broker id", invoke(t, cl, remoting.ControllerGetNextBrokerID, map[string]string{"clusterName": "c1", "brokerName": "broker-a"}, nil), remoting.Success)
	text := scrapeHost(t, h)
	if v := value(t, text, "dledger_op_total", `dLedger_operation_status="success"`, `aggregation="delta"`); v != before+1 {
		t.Errorf("dledger_op_total %v after a read, want %v", v, before+1)
	}
	if v := value(t, text, "request_latency_count", `request_type="CONTROLLER_GET_NEXT_BROKER_ID"`); v != 1 {
		t.Errorf("request_latency_count %v, want 1", v)
	}
	if len(series(text, "dledger_disk_usage")) != 1 || len(series(text, "request_latency_microseconds_count")) != 0 {
		t.Errorf("bare names expected:\n%s", text)
	}
}

// TestMetricsFrom reads the metrics keys: off unless PROM, metricsLabel's
// pairs (a bad one dropped and logged), metricsInDelta's label, the
// exporter's address and naming.
func TestMetricsFrom(t *testing.T) {
	if mo := MetricsFrom(configs.DefaultControllerFile().Controller, zerolog.Nop()); mo != nil {
		t.Fatalf("metrics on by default: %+v", mo)
	}
	loaded, err := configs.LoadControllerFrom("", []configs.Source{{Name: "test", Values: map[string]string{
		"metricsExporterType": "PROM", "metricsPromExporterPort": "15557",
		"metricsLabel": "instance_id:i1,bad,request_type:x,region:r", "metricsInDelta": "true", "metricsNameUnitSuffix": "false",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	mo := MetricsFrom(loaded.Controller.Controller, zerolog.New(logs))
	if mo == nil || mo.Addr != ":15557" || mo.Naming != metrics.Bare ||
		len(mo.Labels) != 3 || mo.Labels["instance_id"] != "i1" || mo.Labels["region"] != "r" || mo.Labels["aggregation"] != "delta" {
		t.Fatalf("metrics options %+v", mo)
	}
	if n := strings.Count(logs.String(), "metricsLabel pair"); n != 2 {
		t.Errorf("%d warnings for the 2 bad pairs: %s", n, logs.String())
	}
}
