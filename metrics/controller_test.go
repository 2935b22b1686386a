package metrics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/remoting"
)

// metricsLabel may not name a label a controller metric sets per series;
// it may replace address, group and peer_id, as in RocketMQ.
func TestValidControllerConstLabel(t *testing.T) {
	for name, want := range map[string]bool{
		"instance_id": true, "address": true, "group": true, "peer_id": true, "topic": true,
		"request_type": false, "request_handle_status": false, "cluster": false, "broker_set": false,
		"election_result": false, "dledger_operation": false, "dLedger_operation_status": false,
		"__name__": false, "bad-name": false, "": false,
	} {
		if got := ValidControllerConstLabel(name); got != want {
			t.Errorf("ValidControllerConstLabel(%q) = %v, want %v", name, got, want)
		}
	}
}

// The controller's series appear at their first measurement, the role
// and the store size from the sources; a nil *Controller ignores calls.
func TestControllerSeries(t *testing.T) {
	var none *Controller
	none.Request(remoting.BrokerHeartbeat, OpSuccess, time.Millisecond)
	none.RaftAppend(OpFailed, 0)
	none.Election("c", "b", ElectionNoMaster)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "raft.db"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "snapshots", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "snapshots", "1", "state.bin"), make([]byte, 24), 0o644); err != nil {
		t.Fatal(err)
	}
	role := RoleFollower
	m := NewController(map[string]string{"address": "127.0.0.1:9878", "group": "g", "peer_id": "n0"}, ControllerSources{
		Role:          func() RaftRole { return role },
		ActiveBrokers: func() []ActiveBrokers { return []ActiveBrokers{{Cluster: "c1", BrokerSet: "broker-a", Count: 2}} },
		StorePath:     dir,
		Log:           zerolog.Nop(),
	}, UnitSuffixed)
	text := scrape(t, m)
	for _, want := range []string{
		`role{address="127.0.0.1:9878",group="g",peer_id="n0"} 0`,
		`dledger_disk_usage_bytes{address="127.0.0.1:9878",group="g",peer_id="n0"} 1024`,
		`active_broker_num{address="127.0.0.1:9878",broker_set="broker-a",cluster="c1",group="g",peer_id="n0"} 2`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("scrape lacks %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, "request_total") || strings.Contains(text, "dledger_op") || strings.Contains(text, "election_total") {
		t.Errorf("series before any measurement:\n%s", text)
	}

	role = RoleCandidate
	m.Request(remoting.ControllerRegisterBroker, OpSuccess, 1500*time.Microsecond)
	m.Request(remoting.ControllerRegisterBroker, OpTimeout, 5*time.Second)
	m.Request(remoting.GetTopicStatsInfo, OpSuccess, time.Millisecond) // not a controller request: not recorded
	m.RaftAppend(OpSuccess, 40*time.Microsecond)
	m.RaftAppend(OpFailed, time.Millisecond)
	m.Election("", "broker-a", ElectionNoMaster)
	text = scrape(t, m)
	for _, want := range []string{
		`role{address="127.0.0.1:9878",group="g",peer_id="n0"} -1`,
		`request_total{address="127.0.0.1:9878",group="g",peer_id="n0",request_handle_status="success",request_type="CONTROLLER_REGISTER_BROKER"} 1`,
		`request_total{address="127.0.0.1:9878",group="g",peer_id="n0",request_handle_status="timeout",request_type="CONTROLLER_REGISTER_BROKER"} 1`,
		`request_latency_microseconds_bucket{address="127.0.0.1:9878",group="g",peer_id="n0",request_type="CONTROLLER_REGISTER_BROKER",le="1000"} 0`,
		`request_latency_microseconds_bucket{address="127.0.0.1:9878",group="g",peer_id="n0",request_type="CONTROLLER_REGISTER_BROKER",le="3000"} 1`,
		`request_latency_microseconds_sum{address="127.0.0.1:9878",group="g",peer_id="n0",request_type="CONTROLLER_REGISTER_BROKER"} 1500`,
		`dledger_op_total{address="127.0.0.1:9878",dLedger_operation_status="failed",dledger_operation="append",group="g",peer_id="n0"} 1`,
		`dledger_op_latency_microseconds_sum{address="127.0.0.1:9878",dLedger_operation_status="success",dledger_operation="append",group="g",peer_id="n0"} 40`,
		`election_total{address="127.0.0.1:9878",broker_set="broker-a",cluster="",election_result="no_master_elected",group="g",peer_id="n0"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("scrape lacks %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, "GET_TOPIC_STATS") || strings.Count(text, "request_latency_microseconds_count{") != 1 {
		t.Errorf("only the answered controller request is timed:\n%s", text)
	}

	role = RoleUnknown
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	text = scrape(t, m)
	if strings.Contains(text, "role{") || strings.Contains(text, "dledger_disk_usage") {
		t.Errorf("role unknown and store gone still served:\n%s", text)
	}
}
