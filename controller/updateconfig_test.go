package controller

import (
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/remotingtest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// fileController is a controller started from a controller.properties
// file as bin/controller starts one, its heartbeat clock in the test's
// hands.
type fileController struct {
	*Controller
	addr string
	file string
	logs *testutil.SyncBuffer
	// now is the heartbeats' clock, in nanoseconds since the epoch.
	now *atomic.Int64
}

func startFileController(t *testing.T, text string) *fileController {
	t.Helper()
	file := testutil.WriteFile(t, "controller.properties", text)
	loaded, err := configs.LoadControllerFrom(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := loaded.Controller
	cfg := ConfigFrom(set.Controller, set.ScanNotActiveBrokerInterval, set.ConfigBlackList)
	cfg.StorePath = "" // in memory
	cfg.RaftTimeout = 200 * time.Millisecond
	now := &atomic.Int64{}
	now.Store(time.Now().UnixNano())
	logs := &testutil.SyncBuffer{}
	c, err := New(Options{
		Config: cfg, Settings: configs.StandaloneControllerSettings(set), Log: zerolog.New(logs),
		Now:     func() time.Time { return time.Unix(0, now.Load()) },
		Persist: func(m map[string]string) error { return configs.PersistControllerSettings(file, m) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close controller: %v", err)
		}
	})
	srv := remotingtest.StartServer(t, c.Handler())
	waitFor(t, "the controller to lead", c.IsLeader)
	return &fileController{Controller: c, addr: srv.Addr().String(), file: file, logs: logs, now: now}
}

func (fc *fileController) advance(d time.Duration) { fc.now.Add(int64(d)) }

func (fc *fileController) fileText(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(fc.file)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

const slowScans = `controllerDLegerGroup=group1
controllerDLegerPeers=n0-127.0.0.1:19878
controllerDLegerSelfId=n0
# An hour: nothing is scanned unless an update shortens them.
scanNotActiveBrokerInterval=3600000
scanInactiveMasterInterval=3600000
configBlackList=configBlackList;configStorePath;metricsLabel
`

// TestUpdateScanPeriodsInForce: UPDATE_CONTROLLER_CONFIG's new scan
// periods rule the scans at once (RocketMQ reads scanInactiveMasterInterval
// at each leadership gain and scanNotActiveBrokerInterval at start; here
// both are in force when the update answers), and are written back.
func TestUpdateScanPeriodsInForce(t *testing.T) {
	fc := startFileController(t, slowScans)
	admin := dial(t, fc.addr)
	b1 := &broker{t: t, cl: dial(t, fc.addr), addr: "127.0.0.1:1"}
	b2 := &broker{t: t, cl: dial(t, fc.addr), addr: "127.0.0.1:2"}
	b1.applyID()
	b2.applyID()
	b1.heartbeat(1000, 0, 10)
	b2.heartbeat(600000, 0, 10)
	wantCode(t, "elect", b1.elect(), remoting.Success)
	wantCode(t, "alter", alter(t, b1.cl, 1, 1, []int64{1, 2}, 1), remoting.Success)
	// Broker 1, the master, stops: its heartbeats are 2 s old.
	fc.advance(2 * time.Second)
	time.Sleep(100 * time.Millisecond)
	if ss := fc.State().SyncStates["broker-a"]; ss.MasterID != 1 {
		t.Fatalf("re-elected before any scan: %+v", ss)
	}

	resp := invoke(t, admin, remoting.UpdateControllerConfig, nil, []byte("scanInactiveMasterInterval=20\n"))
	wantCode(t, "update scanInactiveMasterInterval", resp, remoting.Success)
	if resp.Remark != "" {
		t.Errorf("a run-time key written back: remark %q", resp.Remark)
	}
	waitFor(t, "the master scan to elect broker 2", func() bool {
		ss := fc.State().SyncStates["broker-a"]
		return ss.HasMaster && ss.MasterID == 2
	})
	if _, ok := fc.LiveInfo("c1", "broker-a", 1); !ok {
		t.Fatal("broker 1's heartbeats expired with scanNotActiveBrokerInterval at an hour")
	}

	resp = invoke(t, admin, remoting.UpdateControllerConfig, nil, []byte("scanNotActiveBrokerInterval=20\n"))
	wantCode(t, "update scanNotActiveBrokerInterval", resp, remoting.Success)
	waitFor(t, "broker 1's heartbeats to expire", func() bool {
		_, ok := fc.LiveInfo("c1", "broker-a", 1)
		return !ok
	})
	if _, ok := fc.LiveInfo("c1", "broker-a", 2); !ok {
		t.Fatal("broker 2, alive, expired")
	}
	text := fc.fileText(t)
	for _, want := range []string{"scanNotActiveBrokerInterval=20\n", "scanInactiveMasterInterval=20\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("the file lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(fc.logs.String(), "controller scans follow the new periods") {
		t.Error("the new scan periods are not logged")
	}
}

// TestUpdateStartKeysStored: a key read only at start is taken, reported
// by GET_CONTROLLER_CONFIG and written back, with a remark and a log line
// saying it waits for the next start, while the controller runs on with
// the old value; an inert key is kept and written back too.
func TestUpdateStartKeysStored(t *testing.T) {
	fc := startFileController(t, slowScans)
	admin := dial(t, fc.addr)
	resp := invoke(t, admin, remoting.UpdateControllerConfig, nil,
		[]byte("controllerDLegerGroup=group2\nmetricsExporterType=PROM\ncontrollerThreadPoolNums=32\nenableElectUncleanMaster=true\n"))
	wantCode(t, "update", resp, remoting.Success)
	for _, want := range []string{"in force from the next start: controllerDLegerGroup, metricsExporterType", "controllerThreadPoolNums has no effect"} {
		if !strings.Contains(resp.Remark, want) {
			t.Errorf("remark %q lacks %q", resp.Remark, want)
		}
	}
	if !fc.config().EnableElectUncleanMaster {
		t.Error("enableElectUncleanMaster, a run-time key, is not in force")
	}
	if fc.config().Group != "group1" {
		t.Errorf("controllerDLegerGroup in force changed to %q", fc.config().Group)
	}
	meta := invoke(t, admin, remoting.ControllerGetMetadataInfo, nil, nil)
	if meta.ExtFields["group"] != "group1" {
		t.Errorf("metadata group %q, want the one in force, group1", meta.ExtFields["group"])
	}
	get := invoke(t, admin, remoting.GetControllerConfig, nil, nil)
	for _, want := range []string{"controllerDLegerGroup=group2\n", "metricsExporterType=PROM\n", "enableElectUncleanMaster=true\n"} {
		if !strings.Contains(string(get.Body), want) {
			t.Errorf("GET_CONTROLLER_CONFIG lacks %q:\n%s", want, get.Body)
		}
	}
	text := fc.fileText(t)
	for _, want := range []string{"controllerDLegerGroup=group2\n", "metricsExporterType=PROM\n", "controllerThreadPoolNums=32\n", "enableElectUncleanMaster=true\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("the file lacks %q:\n%s", want, text)
		}
	}
	// The file as written back starts a controller with the new values.
	loaded, err := configs.LoadControllerFrom(fc.file, nil)
	if err != nil || loaded.Controller.Controller.Group != "group2" || loaded.Controller.Controller.MetricsExporterType != configs.MetricsPROM {
		t.Fatalf("the written file loads as %+v (%v)", loaded.Controller.Controller, err)
	}
	logs := fc.logs.String()
	if !strings.Contains(logs, "takes effect at the next start") || !strings.Contains(logs, `"controllerDLegerGroup"`) {
		t.Errorf("no log line says controllerDLegerGroup waits for the next start:\n%s", logs)
	}
}

// TestUpdateRefusals: the black list answers NO_PERMISSION "Can not update
// config in black list." as RocketMQ does (its three fixed keys and those
// configBlackList names, any spelling the update reads); a value that
// does not parse, an unknown key or peers the next start would refuse
// answer INVALID_PARAMETER; none of them changes anything.
func TestUpdateRefusals(t *testing.T) {
	fc := startFileController(t, slowScans)
	admin := dial(t, fc.addr)
	before := fc.fileText(t)
	for _, tc := range []struct {
		body string
		code int32
		want string
	}{
		{"configStorePath=/tmp/x\n", remoting.NoPermission, "Can not update config in black list."},
		{"rocketmqHome=/opt/rmq\n", remoting.NoPermission, "Can not update config in black list."},
		{"configBlackList=\n", remoting.NoPermission, "Can not update config in black list."},
		{"enableElectUncleanMaster=true\nmetricsLabel=a:b\n", remoting.NoPermission, "Can not update config in black list."},
		{"enableElectUncleanMaster=true\nelectMasterMaxRetryCount=0\n", remoting.InvalidParameter, "electMasterMaxRetryCount"},
		{"enableElectUncleanMaster=true\nscanNotActiveBrokerInterval=soon\n", remoting.InvalidParameter, "scanNotActiveBrokerInterval"},
		{"enableElectUncleanMaster=true\nnoSuchKey=1\n", remoting.InvalidParameter, "noSuchKey"},
		{"controllerDLegerSelfId=n1\n", remoting.InvalidParameter, "controllerDLegerSelfId"},
		{"controllerDLegerPeers=n0-nohost\n", remoting.InvalidParameter, "controllerDLegerPeers"},
		{"controllerType=jRaft\n", remoting.InvalidParameter, "controllerType"},
	} {
		resp := invoke(t, admin, remoting.UpdateControllerConfig, nil, []byte(tc.body))
		if resp.Code != tc.code || !strings.Contains(resp.Remark, tc.want) {
			t.Errorf("%q: answered %d %q, want %d with %q", tc.body, resp.Code, resp.Remark, tc.code, tc.want)
		}
	}
	if fc.config().EnableElectUncleanMaster {
		t.Error("a refused update changed enableElectUncleanMaster")
	}
	if after := fc.fileText(t); after != before {
		t.Errorf("a refused update changed the file:\n%s", after)
	}
	get := invoke(t, admin, remoting.GetControllerConfig, nil, nil)
	if !strings.Contains(string(get.Body), "controllerDLegerSelfId=n0\n") {
		t.Errorf("a refused update shows in GET_CONTROLLER_CONFIG:\n%s", get.Body)
	}
}
