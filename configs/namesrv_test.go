package configs

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// Every default parses, is reported as written, and the report of the
// defaults parses back to them.
func TestNamesrvDefaultsRoundTrip(t *testing.T) {
	checkDefaultsRoundTrip(t, namesrvFields, DefaultNamesrv())
}

func TestNamesrvDefaultsAreRocketMQs(t *testing.T) {
	n := DefaultNamesrv()
	if n.ListenPort != 9876 || n.BindAddress != "0.0.0.0" || n.OrderMessageEnable ||
		!n.ReturnOrderTopicConfigToBroker || !n.EnableAllTopicList || !n.EnableTopicList ||
		n.DeleteTopicWithBrokerRegistration || n.ScanNotActiveBrokerInterval != 5*time.Second ||
		n.ConfigBlackList != "configBlackList;configStorePath;kvConfigPath" {
		t.Fatalf("defaults differ from RocketMQ's: %+v", n)
	}
	if home, err := os.UserHomeDir(); err == nil && !strings.HasPrefix(n.KVConfigPath, home) {
		t.Errorf("kvConfigPath %q is not under the home directory %q", n.KVConfigPath, home)
	}
}

// The documented YAML names every key and loads to the defaults.
func TestNamesrvYAMLDocumentsEveryKey(t *testing.T) {
	checkDocumented(t, "namesrv.yaml", NamesrvKeys(), DefaultNamesrv(), func(path string) (any, []string, error) {
		got, err := LoadNamesrv(path, nil)
		return got.Namesrv, got.UnknownKeys, err
	})
}

// A RocketMQ namesrv.properties loads: its keys set, RocketMQ's tuning
// keys reported inert with their reasons, a key nobody knows reported
// unknown, the overrides winning.
func TestNamesrvPropertiesFile(t *testing.T) {
	p := testutil.WriteFile(t, "namesrv.properties", `# a RocketMQ namesrv.properties
listenPort=19876
orderMessageEnable = true
kvConfigPath=/var/lib/namesrv/kv.json
scanNotActiveBrokerInterval=2000
serverWorkerThreads=16
clientRequestThreadPoolNums=4
noSuchNamesrvKey=1
`)
	got, err := LoadNamesrv(p, map[string]string{"logLevel": "debug"})
	if err != nil {
		t.Fatal(err)
	}
	n := got.Namesrv
	if n.ListenPort != 19876 || !n.OrderMessageEnable || n.KVConfigPath != "/var/lib/namesrv/kv.json" ||
		n.ScanNotActiveBrokerInterval != 2*time.Second || n.LogLevel != "debug" {
		t.Fatalf("loaded %+v", n)
	}
	if want := []string{"noSuchNamesrvKey"}; !slices.Equal(got.UnknownKeys, want) {
		t.Errorf("unknown keys %v, want %v", got.UnknownKeys, want)
	}
	var inert []string
	for _, k := range got.InertKeys {
		if k.Reason == "" {
			t.Errorf("inert key %s without a reason", k.Key)
		}
		inert = append(inert, k.Key)
	}
	slices.Sort(inert)
	if want := []string{"clientRequestThreadPoolNums", "serverWorkerThreads"}; !slices.Equal(inert, want) {
		t.Errorf("inert keys %v, want %v", inert, want)
	}
	if _, err := LoadNamesrv(testutil.WriteFile(t, "bad.properties", "serverWorkerThreads=many\n"), nil); err == nil ||
		!strings.Contains(err.Error(), "serverWorkerThreads") {
		t.Errorf("serverWorkerThreads=many: %v, want an error naming the key", err)
	}
	if n.ListenAddr() != ":19876" {
		t.Errorf("listen address %q, want every interface on 19876", n.ListenAddr())
	}
	n.BindAddress = "127.0.0.1"
	if n.ListenAddr() != "127.0.0.1:19876" {
		t.Errorf("listen address %q", n.ListenAddr())
	}
}

func TestNamesrvBadValuesNameTheKey(t *testing.T) {
	for content, key := range map[string]string{
		"listenPort=70000\n":                  "listenPort",
		"enableAllTopicList=sometimes\n":      "enableAllTopicList",
		"scanNotActiveBrokerInterval=0\n":     "scanNotActiveBrokerInterval",
		"logLevel=loud\n":                     "logLevel",
		"deleteTopicWithBrokerRegistration=2": "deleteTopicWithBrokerRegistration",
		"proxyProtocolTrustedNetworks=10.1/8": "proxyProtocolTrustedNetworks",
	} {
		_, err := LoadNamesrv(testutil.WriteFile(t, "n.properties", content), nil)
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: error %v does not name %s", content, err, key)
		}
	}
	if _, err := LoadNamesrv("", map[string]string{"brokerName": "a"}); err == nil {
		t.Error("override of a broker key accepted by the name server")
	}
}

func TestNamesrvBlackList(t *testing.T) {
	n := DefaultNamesrv()
	n.ConfigBlackList = "configBlackList; orderMessageEnable"
	for props, want := range map[string][]string{
		"kvConfigPath":       {"kvConfigPath"},
		"KVCONFIGPATH":       {"KVCONFIGPATH"},
		"configStorePath":    {"configStorePath"},
		"rocketmqHome":       {"rocketmqHome"},
		"orderMessageEnable": {"orderMessageEnable"},
		"enableTopicList":    nil,
	} {
		if got := n.BlackListed(map[string]string{props: "x"}); !slices.Equal(got, want) {
			t.Errorf("BlackListed(%s) = %v, want %v", props, got, want)
		}
	}
}

func TestPersistNamesrvSettings(t *testing.T) {
	p := testutil.WriteFile(t, "namesrv.properties", "# ours\nlistenPort=9876\nEnableTopicList=true\nserverWorkerThreads=8\n")
	if err := PersistNamesrvSettings(p, map[string]string{"enableTopicList": "false", "orderMessageEnable": "true"}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := "# ours\nlistenPort=9876\nEnableTopicList=false\nserverWorkerThreads=8\norderMessageEnable=true\n"
	if string(got) != want {
		t.Fatalf("file after persist:\n%s\nwant\n%s", got, want)
	}
}

// A namesrv.properties with every key of RocketMQ 5.3's NamesrvConfig,
// NettyServerConfig and NettyClientConfig written out loads with no
// unknown key.
func TestRocketMQNamesrvPropertiesLoad(t *testing.T) {
	got, err := LoadNamesrv("testdata/rocketmq-namesrv.properties", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.UnknownKeys) != 0 {
		t.Errorf("unknown keys: %v", got.UnknownKeys)
	}
	if got.Namesrv.ListenPort != 9876 || got.Namesrv.Listener.MaxIdle != 120*time.Second {
		t.Errorf("loaded %+v", got.Namesrv)
	}
	ctl, err := LoadNamesrv("", map[string]string{"enableControllerInNamesrv": "true", "controllerDLegerPeers": "n0-127.0.0.1:9878", "controllerDLegerSelfId": "n0"})
	if err != nil || !ctl.Namesrv.EnableControllerInNamesrv || ctl.Namesrv.Controller.Peers != "n0-127.0.0.1:9878" || ctl.Namesrv.Controller.SelfID != "n0" {
		t.Errorf("enableControllerInNamesrv=true: %+v %v", ctl.Namesrv, err)
	}
}

// FuzzLoadNamesrv: a namesrv.properties or YAML file either fails to load
// with an error or loads to settings that load again to the same
// configuration.
func FuzzLoadNamesrv(f *testing.F) {
	seed, err := os.ReadFile("testdata/rocketmq-namesrv.properties")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, false)
	f.Add([]byte("listenPort: 1\nproxyProtocolTrustedNetworks: 10.0.0.0/8\n"), true)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content []byte, yaml bool) {
		loaded, err := LoadNamesrv(writeFuzzConfig(t, dir, content, yaml), nil)
		if err != nil {
			return
		}
		again, err := LoadNamesrv("", loaded.Namesrv.Settings())
		if err != nil {
			t.Fatalf("settings %v do not load: %v", loaded.Namesrv.Settings(), err)
		}
		if !reflect.DeepEqual(again.Namesrv, loaded.Namesrv) {
			t.Fatalf("settings load to %+v, want %+v", again.Namesrv, loaded.Namesrv)
		}
	})
}
