package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

func TestParseSwitchesReadsTheSupervisorsLines(t *testing.T) {
	log := strings.Join([]string{
		`{"level":"info","component":"broker","startup":16.5,"time":"2026-12-06T10:30:23Z","message":"broker started"}`,
		`{"level":"info","component":"controller-mode","master":true,"brokerId":1,"masterEpoch":1,"cutAt":0,"took":16.637763,"message":"broker running as SYNC_MASTER"}`,
		`not json, but it says broker running as SLAVE`,
		`{"level":"info","component":"controller-mode","master":false,"brokerId":1,"masterEpoch":2,"took":40.5,"message":"broker running as SLAVE"}`,
		`{"level":"info","message":"broker running as SLAVE"}`, // no took: not a switch record
		`{"level":"info","component":"controller-mode","master":true,"brokerId":1,"masterEpoch":3,"took":1250,"message":"broker running as SYNC_MASTER"}`,
		`{"level":"info","component":"controller-mode","master":false,"brokerId":1,"masterEpoch":4,"took":7,"message":"broker running as SLAVE"}`,
	}, "\n")
	sw, err := parseSwitches(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	want := []switchRecord{
		{master: true, epoch: 1, took: 16637763 * time.Nanosecond, start: 16500 * time.Microsecond},
		{master: false, epoch: 2, took: 40500 * time.Microsecond},
		{master: true, epoch: 3, took: 1250 * time.Millisecond},
		{master: false, epoch: 4, took: 7 * time.Millisecond},
	}
	if len(sw) != len(want) {
		t.Fatalf("got %+v, want %+v", sw, want)
	}
	for i := range want {
		if sw[i] != want[i] {
			t.Fatalf("record %d: got %+v, want %+v", i, sw[i], want[i])
		}
	}
	if last, ok := lastMasterSwitch(sw); !ok || last.took != 1250*time.Millisecond {
		t.Errorf("last start as master took %v (%v), want 1.25s", last.took, ok)
	}
	if _, ok := lastMasterSwitch(sw[1:2]); ok {
		t.Error("a log with no start as master gave one")
	}
}

func TestGapOfCountsTheSendsAroundTheSignal(t *testing.T) {
	kill := time.Unix(1000, 0)
	at := func(ms int) time.Time { return kill.Add(time.Duration(ms) * time.Millisecond) }
	events := []sendEvent{
		{at: at(-20), addr: "old", ok: true},
		{at: at(-10), addr: "old", ok: false}, // before the signal: not in the gap
		{at: at(0), addr: "old", ok: true},    // answered at the signal: before it
		{at: at(5), addr: "old", ok: true},    // the old master's answer after the signal: no failover
		{at: at(10), addr: "old", ok: false},
		{at: at(15), addr: "b", ok: false},
		{at: at(20), addr: "c", ok: false},
		{at: at(40), addr: "b", ok: true},
		{at: at(45), addr: "b", ok: false}, // after the first accepted send: not counted
	}
	g := gapOf(events, kill, "old")
	if g.before != 2 || g.failed != 3 || !g.firstOK.Equal(at(40)) {
		t.Fatalf("gap %+v, want 2 before, 3 failed, first accepted at +40ms", g)
	}
	if g := gapOf(events[:5], kill, "old"); !g.firstOK.IsZero() || g.failed != 1 {
		t.Fatalf("no accepted send after the signal: gap %+v", g)
	}
}

func TestParseReplicaReadsMasterEpochAndSyncStateSet(t *testing.T) {
	resp := &remoting.Command{Code: remoting.Success, ExtFields: map[string]string{
		"masterBrokerId": "2", "masterAddress": "127.0.0.1:10911", "masterEpoch": "3", "syncStateSetEpoch": "5",
	}, Body: []byte(`{"syncStateSet":[1,2],"syncStateSetEpoch":5}`)}
	r, err := parseReplica(resp)
	if err != nil {
		t.Fatal(err)
	}
	if r.masterAddr != "127.0.0.1:10911" || r.epoch != 3 || len(r.syncSet) != 2 {
		t.Fatalf("got %+v", r)
	}
	// No master: the address the controller may still carry is not one.
	noMaster := &remoting.Command{ExtFields: map[string]string{"masterAddress": "127.0.0.1:10911", "masterEpoch": "4"}}
	if r, err := parseReplica(noMaster); err != nil || r.masterAddr != "" || r.epoch != 4 {
		t.Fatalf("no master: %+v, %v", r, err)
	}
	if _, err := parseReplica(&remoting.Command{Body: []byte("{")}); err == nil {
		t.Fatal("a bad body was accepted")
	}
}

func TestFailoverOptionsValidate(t *testing.T) {
	ok := failoverOptions{runs: 1, brokers: 2, signal: "kill", rate: 10, body: 1, sendTimeout: time.Second, timeout: time.Minute,
		heartbeatTimeout: time.Second, heartbeatInterval: time.Second, scanInterval: time.Second}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*failoverOptions){
		"one broker":    func(o *failoverOptions) { o.brokers = 1 },
		"four brokers":  func(o *failoverOptions) { o.brokers = 4 },
		"signal":        func(o *failoverOptions) { o.signal = "term" },
		"rate":          func(o *failoverOptions) { o.rate = 0 },
		"runs":          func(o *failoverOptions) { o.runs = 0 },
		"scan interval": func(o *failoverOptions) { o.scanInterval = 0 },
		"broker set":    func(o *failoverOptions) { o.brokerSets = []string{"novalue"} },
		"controller":    func(o *failoverOptions) { o.controllerSets = []string{"=x"} },
		"timeout key":   func(o *failoverOptions) { o.brokerSets = []string{"controllerHeartBeatTimeoutMills=3000"} },
		"scan key":      func(o *failoverOptions) { o.controllerSets = []string{"scanNotActiveBrokerInterval=1000"} },
		"queues":        func(o *failoverOptions) { o.queues = "100" },
		"two sizes":     func(o *failoverOptions) { o.queues = "10x10,20x10" },
		"preload alone": func(o *failoverOptions) { o.preload = 10 },
		"preload < 0":   func(o *failoverOptions) { o.queues, o.preload = "10x10", -1 },
	} {
		o := ok
		mod(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	sized := ok
	sized.queues, sized.preload = "1kx100", 1000
	if err := sized.validate(); err != nil {
		t.Errorf("--queues 1kx100 --preload 1000: %v", err)
	}
	if stop := (failoverOptions{signal: "stop"}); stop.sig().String() != "stopped (signal)" {
		t.Errorf("stop's signal is %v", stop.sig())
	}
}

// TestFailoverSmoke runs `bench failover` end to end once, against the
// real broker and controller binaries (built here), with both signals,
// so that the subcommand cannot rot. It checks that every phase
// completes, the table prints and nothing is left behind, never a
// figure.
func TestFailoverSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a controller and brokers")
	}
	bin := t.TempDir()
	for _, c := range []string{"broker", "controller"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(bin, c), "github.com/rocketkv/rocketkv/cmd/"+c).CombinedOutput()
		if err != nil {
			t.Fatalf("build %s: %v\n%s", c, err, out)
		}
	}
	dir := t.TempDir()
	out := runBench(t, "failover", "--broker-bin", filepath.Join(bin, "broker"), "--dir", dir, "--runs", "1", "--brokers", "2",
		"--settle", "200ms", "--rate", "50", "--queues", "10x10", "--preload", "100")
	for _, want := range []string{"SIGKILL -> new master elected", "epoch 1 -> 2", "failover/cold", "1 runs", "heartbeat connection's close",
		"store: 100 (10x10) queues", "store preloaded and replicated in"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	out = runBench(t, "failover", "--broker-bin", filepath.Join(bin, "broker"), "--dir", dir, "--runs", "1", "--brokers", "2",
		"--settle", "200ms", "--rate", "50", "--signal", "stop", "--heartbeat-timeout", "1s", "--heartbeat-interval", "200ms",
		"--scan-interval", "200ms", "--controller-set", "electMasterMaxRetryCount=3")
	for _, want := range []string{"SIGSTOP -> new master elected", "controllerHeartBeatTimeoutMills 1000", "controller with electMasterMaxRetryCount=3", "elected-timeout"} {
		if !strings.Contains(out, want) {
			t.Fatalf("--signal stop: output lacks %q:\n%s", want, out)
		}
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("stores left behind: %v", left)
	}
}
