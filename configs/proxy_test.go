package configs

import (
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// Every default parses, is reported as written, and the report of the
// defaults parses back to them.
func TestProxyDefaultsRoundTrip(t *testing.T) {
	checkDefaultsRoundTrip(t, proxyFields, DefaultProxy())
}

// The defaults are RocketMQ proxy's (ProxyConfig), with name servers at
// 127.0.0.1:9876 and rocketkv's logging keys.
func TestProxyDefaultsAreRocketMQs(t *testing.T) {
	want := Proxy{
		ProxyMode:                 "cluster",
		GrpcServerPort:            8081,
		BindAddress:               "0.0.0.0",
		NamesrvAddr:               "127.0.0.1:9876",
		MaxMessageSize:            4194304,
		MaxUserPropertySize:       16 << 10,
		UserPropertyMaxNum:        128,
		MaxMessageGroupSize:       64,
		MaxDelayTime:              24 * time.Hour,
		MinInvisibleTimeForRecv:   10 * time.Second,
		MaxInvisibleTime:          12 * time.Hour,
		DefaultInvisibleTime:      60 * time.Second,
		MinLongPollingTimeout:     5 * time.Second,
		MaxLongPollingTimeout:     20 * time.Second,
		LongPollingBatchSize:      32,
		ProducerMaxAttempts:       3,
		ProducerBackoffInitial:    10 * time.Millisecond,
		ProducerBackoffMax:        1000 * time.Millisecond,
		ProducerBackoffMultiplier: 2,
		EnableProxyAutoRenew:      true,
		RenewAheadTime:            10 * time.Second,
		RenewMaxTime:              3 * time.Hour,
		RenewSchedulePeriod:       5 * time.Second,
		MaxRenewRetryTimes:        3,
		ClientIdleTime:            120 * time.Second,
		TopicRouteCacheRefresh:    20 * time.Second,
		TopicRouteCacheExpired:    300 * time.Second,
		TopicRouteCacheMaxNum:     20000,
		GrpcMaxInboundMessageSize: 130 << 20,
		AuthCacheRefresh:          20 * time.Second,
		UserCacheRefresh:          20 * time.Second,
		GroupConfigCacheRefresh:   20 * time.Second,
		GroupConfigCacheMaxNum:    20000,
		UserCacheMaxNum:           20000,
		AclCacheMaxNum:            20000,
		TLS: TLS{Mode: "permissive", TestModeEnable: true, ConfigFile: "/etc/rocketmq/tls.properties",
			NeedClientAuth: "none"},
		TLSTestModeEnable:           true,
		TLSCertWatchInterval:        time.Hour, // RocketMQ 5.3.4's
		GrpcShutdownTime:            30 * time.Second,
		EnableMessageBodyEmptyCheck: true,
		MaxTransactionRecovery:      time.Hour,
		EnableTopicMessageTypeCheck: true,
		MetricCollectorMode:         "off",
		InvisibleTimeWhenClear:      time.Second,
		ProxyProtocol:               ProxyProtocol{Enable: true},
		LogLevel:                    "info",
		LogFormat:                   "auto",
		// rmq.proxy.logback.xml's proxy.log: 128MB, maxIndex 10.
		Log: LogFile{MaxSizeMiB: 128, MaxRolledFiles: 10, Compress: true},
	}
	if got := DefaultProxy(); !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults\n%+v\nwant RocketMQ proxy's\n%+v", got, want)
	}
}

// The documented YAML names every key and loads to the defaults.
func TestProxyYAMLDocumentsEveryKey(t *testing.T) {
	checkDocumented(t, "proxy.yaml", ProxyKeys(), DefaultProxy(), func(path string) (any, []string, error) {
		got, err := LoadProxy(path, nil)
		return got.Proxy, got.UnknownKeys, err
	})
}

// proxy.yaml lists every inert key in a comment, and no inert key is also
// a field (TestYAMLListsInertKeys's check for the proxy).
func TestProxyYAMLListsInertKeys(t *testing.T) {
	raw, err := os.ReadFile("proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range proxySchema.inertKeys() {
		if !regexp.MustCompile(`(?m)^#.*\b` + regexp.QuoteMeta(k) + `\b`).Match(raw) {
			t.Errorf("proxy.yaml does not list inert key %s", k)
		}
		if _, ok := proxySchema.lookup(k); ok {
			t.Errorf("%s is both a key and an inert key", k)
		}
	}
}

// A RocketMQ rmq-proxy.json loads: its keys set (numbers of a million and
// more included, which a float64 reading would spell 1.048576e+06), its
// thread pool and cluster name keys reported inert with their reasons, a
// key nobody knows reported unknown; overrides win over the file.
func TestProxyRMQProxyJSON(t *testing.T) {
	p := testutil.WriteFile(t, "rmq-proxy.json", `{
  "rocketMQClusterName": "DefaultCluster",
  "namesrvAddr": "10.0.0.1:9876;10.0.0.2:9876",
  "grpcServerPort": 18081,
  "proxyMode": "cluster",
  "grpcThreadPoolNums": 32,
  "maxMessageSize": 1048576,
  "renewMaxTimeMillis": 7200000,
  "enableProxyAutoRenew": false,
  "someUnknownKey": 1
}`)
	got, err := LoadProxy(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := got.Proxy
	if x.GrpcServerPort != 18081 || x.ProxyMode != "cluster" || x.MaxMessageSize != 1048576 ||
		x.RenewMaxTime != 2*time.Hour || x.EnableProxyAutoRenew || x.NamesrvAddr != "10.0.0.1:9876;10.0.0.2:9876" {
		t.Fatalf("loaded %+v", x)
	}
	if want := []string{"10.0.0.1:9876", "10.0.0.2:9876"}; !slices.Equal(x.NamesrvAddrs(), want) {
		t.Errorf("name servers %q, want %q", x.NamesrvAddrs(), want)
	}
	if x.ListenAddr() != ":18081" {
		t.Errorf("listen address %q, want every interface on 18081", x.ListenAddr())
	}
	if want := []string{"someunknownkey"}; !slices.Equal(lower(got.UnknownKeys), want) {
		t.Errorf("unknown keys %v, want %v", got.UnknownKeys, want)
	}
	var inert []string
	for _, k := range got.InertKeys {
		if k.Reason == "" || k.Override {
			t.Errorf("inert key %s: reason %q, override %v", k.Key, k.Reason, k.Override)
		}
		inert = append(inert, k.Key)
	}
	slices.Sort(inert)
	if want := []string{"grpcThreadPoolNums", "rocketMQClusterName"}; !slices.Equal(inert, want) {
		t.Errorf("inert keys %v, want %v", inert, want)
	}

	got, err = LoadProxy(p, map[string]string{"grpcServerPort": "28081", "maxMessageSize": "2097152", "logLevel": "debug"})
	if err != nil {
		t.Fatal(err)
	}
	if x := got.Proxy; x.GrpcServerPort != 28081 || x.MaxMessageSize != 2097152 || x.LogLevel != "debug" || x.RenewMaxTime != 2*time.Hour {
		t.Errorf("with overrides: %+v", x)
	}
}

// The rmq-proxy.json RocketMQ ships, its cluster name alone, loads to the
// defaults with nothing unknown.
func TestProxyShippedRMQProxyJSON(t *testing.T) {
	got, err := LoadProxy(testutil.WriteFile(t, "rmq-proxy.json", `{"rocketMQClusterName": "DefaultCluster"}`+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.UnknownKeys) != 0 || len(got.InertKeys) != 1 || !reflect.DeepEqual(got.Proxy, DefaultProxy()) {
		t.Errorf("unknown %v, inert %v, loaded %+v", got.UnknownKeys, got.InertKeys, got.Proxy)
	}
}

// The same keys load from a properties file, and an inert key given as an
// override is reported as one.
func TestProxyPropertiesFile(t *testing.T) {
	p := testutil.WriteFile(t, "proxy.properties", "grpcServerPort=18082\nmaxMessageSize = 2097152\ngrpcWorkerLoopNum=8\n")
	got, err := LoadProxy(p, map[string]string{"remotingListenPort": "8080"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Proxy.GrpcServerPort != 18082 || got.Proxy.MaxMessageSize != 2097152 {
		t.Errorf("loaded %+v", got.Proxy)
	}
	overridden := map[string]bool{}
	for _, k := range got.InertKeys {
		overridden[k.Key] = k.Override
	}
	if want := map[string]bool{"grpcWorkerLoopNum": false, "remotingListenPort": true}; !reflect.DeepEqual(overridden, want) {
		t.Errorf("inert keys (key: override) %v, want %v", overridden, want)
	}
}

// A configuration the proxy cannot run with is an error naming the key,
// whether it comes from the file or from an override.
func TestProxyBadValuesNameTheKey(t *testing.T) {
	for _, c := range []struct {
		name      string
		json      string // rmq-proxy.json content; empty for none
		overrides map[string]string
		key       string
	}{
		{"local mode", `{"proxyMode": "local"}`, nil, "proxyMode"},
		{"local mode override", "", map[string]string{"proxyMode": "LOCAL"}, "proxyMode"},
		{"port not a number", `{"grpcServerPort": "eighty"}`, nil, "grpcServerPort"},
		{"fractional size", `{"maxMessageSize": 1.5}`, nil, "maxMessageSize"},
		{"port out of range", "", map[string]string{"grpcServerPort": "70000"}, "grpcServerPort"},
		{"inert key not a number", `{"grpcThreadPoolNums": "many"}`, nil, "grpcThreadPoolNums"},
		{"flag not a boolean", `{"enableProxyAutoRenew": "sometimes"}`, nil, "enableProxyAutoRenew"},
		{"long polling max below min", `{"grpcClientConsumerMinLongPollingTimeoutMillis": 5000, "grpcClientConsumerMaxLongPollingTimeoutMillis": 4999}`, nil, "grpcClientConsumerMaxLongPollingTimeoutMillis"},
		{"long polling max below default min", "", map[string]string{"grpcClientConsumerMaxLongPollingTimeoutMillis": "1000"}, "grpcClientConsumerMaxLongPollingTimeoutMillis"},
		{"invisible max below min", `{"maxInvisibleTimeMills": 9999}`, nil, "maxInvisibleTimeMills"},
		{"unknown override", "", map[string]string{"brokerName": "a"}, "brokerName"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := ""
			if c.json != "" {
				path = testutil.WriteFile(t, "rmq-proxy.json", c.json)
			}
			if _, err := LoadProxy(path, c.overrides); err == nil || !strings.Contains(err.Error(), c.key) {
				t.Errorf("error %v does not name %s", err, c.key)
			}
		})
	}
}

// A file that is not one JSON object is an error naming the file.
func TestProxyMalformedJSON(t *testing.T) {
	for _, content := range []string{``, `{"grpcServerPort": 18081`, `{"grpcServerPort": 1} {"grpcServerPort": 2}`, `[1, 2]`} {
		p := testutil.WriteFile(t, "rmq-proxy.json", content)
		if _, err := LoadProxy(p, nil); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: error %v does not name the file", content, err)
		}
	}
}

// namesrvAddr splits at ';' and ',' into trimmed addresses, blanks dropped.
func TestProxyNamesrvAddrs(t *testing.T) {
	for in, want := range map[string][]string{
		"127.0.0.1:9876":                {"127.0.0.1:9876"},
		"10.0.0.1:9876; 10.0.0.2:9876 ": {"10.0.0.1:9876", "10.0.0.2:9876"},
		"a:1,b:2;;c:3;":                 {"a:1", "b:2", "c:3"},
		" ; ":                           nil,
		"":                              nil,
	} {
		p := Proxy{NamesrvAddr: in}
		if got := p.NamesrvAddrs(); !slices.Equal(got, want) {
			t.Errorf("NamesrvAddrs(%q) = %q, want %q", in, got, want)
		}
	}
}

// The proxy's namesrvAddr is checked as the broker's: every address,
// split as the proxy splits the list, must be host:port with a port in
// [1, 65535], and a bad one is an error naming the key, from a file or an
// override. It used to be taken as written.
func TestProxyNamesrvAddrRefusesAnAddressThatIsNotHostPort(t *testing.T) {
	for _, bad := range []string{"10.0.0.1", "10.0.0.1:9876;10.0.0.2", "10.0.0.1:9876,10.0.0.2", "10.0.0.1:ninety",
		"10.0.0.1:0", "10.0.0.1:98760", "10.0.0.1:9876 10.0.0.2:9876"} {
		if _, err := LoadProxy("", map[string]string{"namesrvAddr": bad}); err == nil || !strings.Contains(err.Error(), "namesrvAddr") {
			t.Errorf("override %q: error %v, want one naming namesrvAddr", bad, err)
		}
		file := testutil.WriteFile(t, "proxy.properties", "namesrvAddr="+bad+"\n")
		if _, err := LoadProxy(file, nil); err == nil || !strings.Contains(err.Error(), "namesrvAddr") {
			t.Errorf("file %q: error %v, want one naming namesrvAddr", bad, err)
		}
	}
	for _, good := range []string{"", " ; ", "10.0.0.1:9876", "a:1,b:2;;c:3;", "[::1]:9876; ns.example:9876 "} {
		if _, err := LoadProxy("", map[string]string{"namesrvAddr": good}); err != nil {
			t.Errorf("%q refused: %v", good, err)
		}
	}
}

// Settings reports every key, and loading the report gives back the
// configuration it came from.
func TestProxySettingsLoadBack(t *testing.T) {
	loaded, err := LoadProxy("", map[string]string{"grpcServerPort": "18081", "namesrvAddr": "a:1;b:2", "renewAheadTimeMillis": "2500", "enableProxyAutoRenew": "false"})
	if err != nil {
		t.Fatal(err)
	}
	settings := loaded.Proxy.Settings()
	if keys := slices.Sorted(maps.Keys(settings)); !slices.Equal(keys, slices.Sorted(slices.Values(ProxyKeys()))) {
		t.Errorf("settings report keys %v, want %v", keys, ProxyKeys())
	}
	again, err := LoadProxy("", settings)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Proxy, loaded.Proxy) {
		t.Errorf("settings load to %+v, want %+v", again.Proxy, loaded.Proxy)
	}
}
