package configs

import (
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

// A RocketMQ controller.properties loads: its keys set, the thread pool,
// metrics and jRaft keys inert, jRaft refused.
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
		!c.EnableElectUncleanMaster || !c.ProcessReadEvent || got.Controller.ScanNotActiveBrokerInterval != 2*time.Second {
		t.Fatalf("loaded %+v", got.Controller)
	}
	if len(got.UnknownKeys) != 1 || got.UnknownKeys[0] != "someVendorKey" {
		t.Errorf("unknown keys %v", got.UnknownKeys)
	}
	inert := map[string]bool{}
	for _, k := range got.InertKeys {
		inert[k.Key] = true
	}
	for _, k := range []string{"controllerThreadPoolNums", "metricsExporterType", "jRaftGroupId", "listenPort"} {
		if !inert[k] {
			t.Errorf("%s not reported inert: %v", k, got.InertKeys)
		}
	}
	if _, err := LoadControllerFrom(testutil.WriteFile(t, "c.properties", "controllerType=jRaft\n"), nil); err == nil || !strings.Contains(err.Error(), "controllerType") {
		t.Errorf("jRaft: %v", err)
	}
}
