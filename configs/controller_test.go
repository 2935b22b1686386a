package configs

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// The documented YAML names every key and loads to the defaults.
func TestControllerYAMLDocumentsEveryKey(t *testing.T) {
	checkDocumented(t, "controller.yaml", ControllerKeys(), DefaultControllerFile(), func(path string) (any, []string, error) {
		got, err := LoadControllerFrom(path, nil)
		return got.Controller, got.UnknownKeys, err
	})
}

// RocketMQ's ControllerConfig defaults.
func TestControllerDefaultsAreRocketMQs(t *testing.T) {
	d := DefaultControllerFile()
	c := d.Controller
	if d.ScanNotActiveBrokerInterval != 5*time.Second || c.ScanInactiveMasterInterval != 5*time.Second || c.ElectMasterMaxRetryCount != 3 ||
		c.EnableElectUncleanMaster || !c.NotifyBrokerRoleChanged || c.ProcessReadEvent || d.ConfigBlackList != "configBlackList;configStorePath" {
		t.Fatalf("defaults %+v", d)
	}
}

// A RocketMQ controller.properties loads: its keys set (the PROM
// exporter's among them), the thread pool, OTLP and jRaft keys inert,
// jRaft refused.
func TestControllerPropertiesFile(t *testing.T) {
	p := testutil.WriteFile(t, "controller.properties", `controllerDLegerGroup = group1
controllerDLegerPeers = n0-127.0.0.1:9878;n1-127.0.0.1:9868
controllerDLegerSelfId = n1
controllerStorePath = /tmp/ctl
enableElectUncleanMaster = true
isProcessReadEvent = true
scanNotActiveBrokerInterval = 2000
controllerThreadPoolNums = 16
metricsExporterType = PROM
metricsPromExporterHost = 127.0.0.1
metricsPromExporterPort = 15557
metricsLabel = instance_id:i1
metricsInDelta = true
metricsGrpcExporterTarget = collector:4317
jRaftGroupId = g
listenPort = 19876
someVendorKey = 1
`)
	got, err := LoadControllerFrom(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := got.Controller.Controller
	if c.Group != "group1" || c.Peers != "n0-127.0.0.1:9878;n1-127.0.0.1:9868" || c.SelfID != "n1" || c.StorePath != "/tmp/ctl" ||
		!c.EnableElectUncleanMaster || !c.ProcessReadEvent || got.Controller.ScanNotActiveBrokerInterval != 2*time.Second ||
		c.MetricsExporterType != MetricsPROM || c.MetricsPromExporterHost != "127.0.0.1" || c.MetricsPromExporterPort != 15557 ||
		c.MetricsLabel != "instance_id:i1" || !c.MetricsInDelta || !c.MetricsNameUnitSuffix {
		t.Fatalf("loaded %+v", got.Controller)
	}
	if len(got.UnknownKeys) != 1 || got.UnknownKeys[0] != "someVendorKey" {
		t.Errorf("unknown keys %v", got.UnknownKeys)
	}
	inert := map[string]bool{}
	for _, k := range got.InertKeys {
		inert[k.Key] = true
	}
	for _, k := range []string{"controllerThreadPoolNums", "metricsGrpcExporterTarget", "jRaftGroupId", "listenPort"} {
		if !inert[k] {
			t.Errorf("%s not reported inert: %v", k, got.InertKeys)
		}
	}
	for _, k := range []string{"metricsExporterType", "metricsPromExporterHost", "metricsPromExporterPort", "metricsLabel", "metricsInDelta"} {
		if inert[k] {
			t.Errorf("%s reported inert", k)
		}
	}
	if _, err := LoadControllerFrom(testutil.WriteFile(t, "c.properties", "controllerType=jRaft\n"), nil); err == nil || !strings.Contains(err.Error(), "controllerType") {
		t.Errorf("jRaft: %v", err)
	}
}

// A name server that hosts no controller takes the controller's keys
// without reading them, whatever their values, and says so, as RocketMQ's
// NamesrvStartup reads its ControllerConfig only with
// enableControllerInNamesrv: a file left with controllerType=jRaft or an
// exporter rocketkv refuses still starts the name server; with the
// controller on, the same values are refused.
func TestNamesrvWithoutControllerIgnoresItsKeys(t *testing.T) {
	file := "listenPort=9877\ncontrollerType=jRaft\nmetricsExporterType=OTLP_GRPC\njRaftElectionTimeoutMs=soon\ncontrollerDLegerPeers=n0-127.0.0.1:9878\n"
	got, err := LoadNamesrv(testutil.WriteFile(t, "n.properties", file), nil)
	if err != nil {
		t.Fatalf("a name server without a controller refused its controller keys: %v", err)
	}
	if got.Namesrv.ListenPort != 9877 {
		t.Errorf("listenPort %d, want the file's 9877", got.Namesrv.ListenPort)
	}
	if got.Namesrv.Controller.Peers != "" {
		t.Errorf("controllerDLegerPeers read (%q) with no controller", got.Namesrv.Controller.Peers)
	}
	reported := map[string]string{}
	for _, k := range got.InertKeys {
		reported[k.Key] = k.Reason
	}
	for _, k := range []string{"controllerType", "metricsExporterType", "jRaftElectionTimeoutMs", "controllerDLegerPeers"} {
		if !strings.Contains(reported[k], "enableControllerInNamesrv") {
			t.Errorf("%s reported %q, want the reason naming enableControllerInNamesrv", k, reported[k])
		}
	}
	if _, err := LoadNamesrv(testutil.WriteFile(t, "n.properties", "enableControllerInNamesrv=true\n"+file), nil); err == nil {
		t.Error("a name server hosting the controller took controllerType=jRaft")
	}
	// Turned on by an override, the controller's keys of the file are read.
	if _, err := LoadNamesrv(testutil.WriteFile(t, "n.properties", file), map[string]string{"enableControllerInNamesrv": "true"}); err == nil {
		t.Error("a name server whose override turns the controller on took controllerType=jRaft")
	}
}

// The controller's metrics exporter: off by default (RocketMQ's DISABLE,
// port 5557, unit-suffixed names); RocketMQ's OTLP_GRPC and LOG exporters
// are refused as the broker refuses them, and so does the name server
// that hosts the controller, whose file carries the controller's keys.
func TestControllerMetricsKeys(t *testing.T) {
	c := DefaultControllerFile().Controller
	if c.MetricsExporterType != MetricsDisabled || c.MetricsPromExporterHost != "" || c.MetricsPromExporterPort != 5557 ||
		c.MetricsLabel != "" || c.MetricsInDelta || !c.MetricsNameUnitSuffix {
		t.Fatalf("metrics defaults %+v", c)
	}
	for _, typ := range []string{"OTLP_GRPC", "LOG", "prometheus"} {
		if _, err := LoadControllerFrom(testutil.WriteFile(t, "c.properties", "metricsExporterType="+typ+"\n"), nil); err == nil ||
			!strings.Contains(err.Error(), "metricsExporterType") {
			t.Errorf("controller metricsExporterType=%s: %v", typ, err)
		}
		if _, err := LoadNamesrv(testutil.WriteFile(t, "n.properties", "enableControllerInNamesrv=true\nmetricsExporterType="+typ+"\n"), nil); err == nil ||
			!strings.Contains(err.Error(), "metricsExporterType") {
			t.Errorf("name server hosting the controller, metricsExporterType=%s: %v", typ, err)
		}
	}
	got, err := LoadControllerFrom(testutil.WriteFile(t, "c.properties", "metricsExporterType=prom\nmetricsNameUnitSuffix=false\n"), nil)
	if err != nil || got.Controller.Controller.MetricsExporterType != MetricsPROM || got.Controller.Controller.MetricsNameUnitSuffix {
		t.Errorf("prom, bare names: %+v %v", got.Controller.Controller, err)
	}
	ns, err := LoadNamesrv(testutil.WriteFile(t, "n.properties", "enableControllerInNamesrv=true\nmetricsExporterType=PROM\nmetricsPromExporterPort=15558\n"), nil)
	if err != nil || ns.Namesrv.Controller.MetricsExporterType != MetricsPROM || ns.Namesrv.Controller.MetricsPromExporterPort != 15558 {
		t.Errorf("name server's controller metrics: %+v %v", ns.Namesrv.Controller, err)
	}
	if _, err := LoadControllerFrom(testutil.WriteFile(t, "c.properties", "metricsPromExporterPort=70000\n"), nil); err == nil {
		t.Error("metricsPromExporterPort=70000 accepted")
	}
}

// The name server's embedded controller takes the controller's keys (its
// inert ones and scanNotActiveBrokerInterval too) and refuses the name
// server's own, which UPDATE_NAMESRV_CONFIG changes.
func TestNamesrvControllerSettingsUpdate(t *testing.T) {
	s := NamesrvControllerSettings(DefaultNamesrv())
	next, changed, inert, err := s.Update(map[string]string{"electMasterMaxRetryCount": "5", "scanNotActiveBrokerInterval": "100", "controllerThreadPoolNums": "8"})
	if err != nil || strings.Join(changed, ",") != "scanNotActiveBrokerInterval,electMasterMaxRetryCount" || len(inert) != 1 || inert[0].Key != "controllerThreadPoolNums" {
		t.Fatalf("update: %v %v %v", changed, inert, err)
	}
	if c, scan, _ := next.Controller(); c.ElectMasterMaxRetryCount != 5 || scan != 100*time.Millisecond {
		t.Fatalf("after the update: %+v %v", c, scan)
	}
	if c, _, _ := s.Controller(); c.ElectMasterMaxRetryCount != 3 {
		t.Fatal("Update changed the settings it was called on")
	}
	for _, key := range []string{"listenPort", "orderMessageEnable", "serverSocketBacklog"} {
		if _, _, _, err := s.Update(map[string]string{key: "1"}); err == nil || !strings.Contains(err.Error(), "UPDATE_NAMESRV_CONFIG") {
			t.Errorf("%s: %v", key, err)
		}
	}
	if black := s.BlackListed(map[string]string{"kvConfigPath": "x", "rocketmqHome": "y", "ConfigStorePath": "z", "notifyBrokerRoleChanged": "false"}); strings.Join(black, ",") != "ConfigStorePath,kvConfigPath,rocketmqHome" {
		t.Fatalf("black-listed: %v", black)
	}
}

// An inert key written back replaces its line instead of adding another.
func TestPersistControllerInertKeyInPlace(t *testing.T) {
	p := testutil.WriteFile(t, "controller.properties", "controllerThreadPoolNums = 16\ncontrollerDLegerSelfId = n0\n")
	if err := PersistControllerSettings(p, map[string]string{"controllerThreadPoolNums": "32"}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != "controllerThreadPoolNums=32\ncontrollerDLegerSelfId = n0\n" {
		t.Fatalf("file (%v):\n%s", err, got)
	}
}
