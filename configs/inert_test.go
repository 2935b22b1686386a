package configs

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// An inert key is accepted and reported with its reason, a really unknown
// key stays unknown, and neither changes the configuration.
func TestInertKeysAreReportedNotUnknown(t *testing.T) {
	p := testutil.WriteFile(t, "broker.conf", "sendMessageThreadPoolNums=16\nuseReentrantLockWhenPutMessage=true\nnoSuchKey=1\n")
	got, err := LoadBroker(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"nosuchkey"}; !reflect.DeepEqual(lower(got.UnknownKeys), want) {
		t.Errorf("unknown keys %v, want %v", got.UnknownKeys, want)
	}
	var keys []string
	for _, k := range got.InertKeys {
		keys = append(keys, k.Key)
		if k.Reason == "" || k.Warning != "" {
			t.Errorf("%s: reason %q, warning %q", k.Key, k.Reason, k.Warning)
		}
	}
	if want := []string{"sendMessageThreadPoolNums", "useReentrantLockWhenPutMessage"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("inert keys %v, want %v", keys, want)
	}
	if !reflect.DeepEqual(got.Broker, DefaultBroker()) {
		t.Errorf("inert keys changed the configuration: %+v", got.Broker)
	}
}

// An inert key's value is still checked for its type, from a file and
// from an update.
func TestInertKeysAreTypeChecked(t *testing.T) {
	for _, content := range []string{"sendMessageThreadPoolNums=many\n", "transientStorePoolEnable=perhaps\n"} {
		_, err := LoadBroker(testutil.WriteFile(t, "b.conf", content), nil)
		key, _, _ := strings.Cut(content, "=")
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: error %v does not name %s", content, err, key)
		}
	}
	b := DefaultBroker()
	if set, err := b.Apply(map[string]string{"pullMessageThreadPoolNums": "32"}); err != nil || len(set) != 0 {
		t.Errorf("update of an inert key: set %v, %v", set, err)
	}
	if _, err := b.Apply(map[string]string{"pullMessageThreadPoolNums": "x"}); err == nil {
		t.Error("update of an inert key with a bad value accepted")
	}
}

// The store paths RocketMQ derives from storePathRootDir are accepted; one
// that names another path is warned about, judged against the root in
// force after the overrides.
func TestRootDerivedPathsWarnWhenElsewhere(t *testing.T) {
	p := testutil.WriteFile(t, "broker.conf", `storePathRootDir=/data/store
storeCheckpoint=/data/store/checkpoint
abortFile=/data/store//abort
storePathConsumeQueue=/other/consumequeue
storePathIndex=/data/store/index
`)
	got, err := LoadBroker(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	warned := map[string]bool{}
	for _, k := range got.InertKeys {
		warned[k.Key] = k.Warning != ""
	}
	if want := map[string]bool{"storeCheckpoint": false, "abortFile": false, "storePathConsumeQueue": true, "storePathIndex": false}; !reflect.DeepEqual(warned, want) {
		t.Errorf("warned %v, want %v", warned, want)
	}
	got, err = LoadBroker(p, map[string]string{"storePathRootDir": "/elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range got.InertKeys {
		if k.Warning == "" || !strings.Contains(k.Warning, "/elsewhere") {
			t.Errorf("%s under another root: warning %q", k.Key, k.Warning)
		}
	}
}

// broker.yaml and namesrv.yaml list every inert key, and no inert key is
// also a field.
func TestYAMLListsInertKeys(t *testing.T) {
	for _, c := range []struct {
		file  string
		keys  []string
		field func(string) bool
	}{
		{"broker.yaml", brokerSchema.inertKeys(), func(k string) bool { _, ok := brokerSchema.lookup(k); return ok }},
		{"namesrv.yaml", namesrvSchema.inertKeys(), func(k string) bool { _, ok := namesrvSchema.lookup(k); return ok }},
	} {
		raw, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range c.keys {
			if !regexp.MustCompile(`(?m)^#.*\b` + regexp.QuoteMeta(k) + `\b`).Match(raw) {
				t.Errorf("%s does not list inert key %s", c.file, k)
			}
			if c.field(k) {
				t.Errorf("%s: %s is both a key and an inert key", c.file, k)
			}
		}
	}
}

// A broker.conf with RocketMQ's common tuning keys written out loads with
// no unknown key, and the keys rocketkv honours take their values.
func TestTunedRocketMQBrokerConf(t *testing.T) {
	got, err := LoadBroker("testdata/rocketmq-tuned-broker.conf", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.UnknownKeys) != 0 {
		t.Errorf("unknown keys: %v", got.UnknownKeys)
	}
	b := got.Broker
	if b.StoreType != StoreTypeFile || b.MaxMsgsNumBatch != 64 || b.Listener.MaxIdle != 120*time.Second ||
		b.Listener.SendBuffer != 65535 || b.Listener.RecvBuffer != 65535 || b.FileReservedTime != 48*time.Hour {
		t.Errorf("loaded %+v", b)
	}
	if got.Broker.Listener.IdleTimeout() != 120*time.Second {
		t.Errorf("idle timeout %v", got.Broker.Listener.IdleTimeout())
	}
	never := Listener{}
	if never.IdleTimeout() >= 0 {
		t.Errorf("serverChannelMaxIdleTimeSeconds=0 gives idle timeout %v, want never (negative)", never.IdleTimeout())
	}
}

// The RocketMQ 5.3 keys of mechanisms rocketkv does without load quietly
// with their reasons, typed (a double included); the switches of
// behaviour it does not have stop the load when set, naming the key; and
// autoMessageVersionOnTopicLen=false is warned about.
func TestRocketMQ53Keys(t *testing.T) {
	// scanAvailableNameSrv is NettyClientConfig's key as its setter names
	// it (the field is isScanAvailableNameSrv).
	quiet := "reviveQueueNum=8\nenablePopBatchAck=true\ntimerFlushIntervalMs=1000\nlogicalDiskSpaceCleanForciblyThreshold=0.8\n" +
		"metricsGrpcExporterTarget=http://otel:4317\nautoMessageVersionOnTopicLen=true\nduplicationEnable=false\nmessageStorePlugIn=\n" +
		"useServerSideResetOffset=true\nsocksProxyConfig={}\nscanAvailableNameSrv=false\n"
	got, err := LoadBroker(testutil.WriteFile(t, "broker.conf", quiet), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.UnknownKeys) != 0 || len(got.InertKeys) != 7 {
		t.Errorf("unknown %v, inert %+v; want none unknown and 7 inert", got.UnknownKeys, got.InertKeys)
	}
	if ns, err := LoadNamesrv(testutil.WriteFile(t, "namesrv.conf", "scanAvailableNameSrv=false\n"), nil); err != nil || len(ns.UnknownKeys) != 0 || len(ns.InertKeys) != 1 {
		t.Errorf("name server's scanAvailableNameSrv: %v, unknown %v, inert %+v; want it inert", err, ns.UnknownKeys, ns.InertKeys)
	}
	for _, k := range got.InertKeys {
		if k.Reason == "" || k.Warning != "" {
			t.Errorf("%s: reason %q, warning %q", k.Key, k.Reason, k.Warning)
		}
	}
	for _, content := range []string{"logicalDiskSpaceCleanForciblyThreshold=most\n", "duplicationEnable=true\n",
		"messageStorePlugIn=org.example.TieredStore\n",
		`socksProxyConfig={"10.0.0.1:9876":{"addr":"proxy:1080"}}` + "\n"} {
		_, err := LoadBroker(testutil.WriteFile(t, "b.conf", content), nil)
		key, _, _ := strings.Cut(content, "=")
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: error %v does not name %s", content, err, key)
		}
	}
	// useServerSideResetOffset is a key of its own: false (RocketMQ 4's
	// reset through the clients) loads, true is the default.
	if !got.Broker.UseServerSideResetOffset {
		t.Errorf("useServerSideResetOffset=true loaded as %v", got.Broker.UseServerSideResetOffset)
	}
	got, err = LoadBroker(testutil.WriteFile(t, "b.conf", "useServerSideResetOffset=false\n"), nil)
	if err != nil || got.Broker.UseServerSideResetOffset || len(got.InertKeys) != 0 || len(got.UnknownKeys) != 0 {
		t.Errorf("useServerSideResetOffset=false: %v, value %v, inert %+v, unknown %v", err, got.Broker.UseServerSideResetOffset, got.InertKeys, got.UnknownKeys)
	}
	got, err = LoadBroker(testutil.WriteFile(t, "b.conf", "autoMessageVersionOnTopicLen=false\n"), nil)
	if err != nil || len(got.InertKeys) != 1 || !strings.Contains(got.InertKeys[0].Warning, "V2") {
		t.Errorf("autoMessageVersionOnTopicLen=false: %+v, %v; want a warning", got.InertKeys, err)
	}
}

// The keys RocketMQ 5.3.4 (develop 8fc57f1468) added to BrokerConfig and
// MessageStoreConfig since 5.3.3, or gave another default, are known to
// the broker's schema, as keys that act or inert ones: a broker.conf of
// 5.3.4 loads without an unknown key.
func TestRocketMQ534BrokerKeys(t *testing.T) {
	keys := map[string]string{
		"popPollingMapExpireTimeSeconds": "600", "transactionMetricFlushInterval": "10000",
		"enableRemotingMetrics": "true", "enableMessageStoreMetrics": "true", "enablePopMetrics": "true",
		"enableConnectionMetrics": "true", "enableTransactionMetrics": "true", "enableStatsMetrics": "true",
		"enableRequestMetrics": "true", "enableLagAndDlqMetrics": "true",
		"enableSplitMetadata": "true", "splitMetadataSize": "2000",
		"enableLogConsumeQueueRepeatedlyBuildWhenRecover": "false", "rocketmqHome": "/opt/rocketmq",
	}
	var conf strings.Builder
	for k, v := range keys {
		conf.WriteString(k + "=" + v + "\n")
		_, field := brokerSchema.lookup(k)
		_, inert := brokerSchema.lookupInert(k)
		if field == inert {
			t.Errorf("%s: a key %v, inert %v; want exactly one", k, field, inert)
		}
	}
	got, err := LoadBroker(testutil.WriteFile(t, "broker.conf", conf.String()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.UnknownKeys) != 0 {
		t.Errorf("unknown keys %v", got.UnknownKeys)
	}
	for _, k := range got.InertKeys {
		if k.Reason == "" || k.Warning != "" {
			t.Errorf("%s: reason %q, warning %q", k.Key, k.Reason, k.Warning)
		}
	}
	if !reflect.DeepEqual(got.Broker, DefaultBroker()) {
		t.Errorf("RocketMQ 5.3.4's defaults changed the configuration: %+v", got.Broker)
	}
}
