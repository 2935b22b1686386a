package configs

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

func TestDefaultsParse(t *testing.T) {
	for _, f := range brokerFields {
		var b Broker
		if err := f.set(&b, f.def); err != nil {
			t.Errorf("default of %s (%q) does not parse: %v", f.key, f.def, err)
		}
	}
}

// Every key's reported text is its default's text and parses back, through
// the key's setter, to the same value: a broker built from DefaultBroker's
// report is DefaultBroker.
func TestDefaultsRoundTrip(t *testing.T) {
	checkDefaultsRoundTrip(t, brokerFields, DefaultBroker())
}

// checkDefaultsRoundTrip checks that every field reports its default as
// written and that the report parses back to the defaults want.
func checkDefaultsRoundTrip[T any](t *testing.T, fields []field[T], want T) {
	t.Helper()
	var got T
	for _, f := range fields {
		text := f.get(&want)
		if text != f.def {
			t.Errorf("%s reported as %q, default written %q", f.key, text, f.def)
		}
		if err := f.set(&got, text); err != nil {
			t.Errorf("%s: reported %q does not parse: %v", f.key, text, err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("report of the defaults parses to\n%+v\nwant\n%+v", got, want)
	}
}

func TestDefaultsAreRocketMQs(t *testing.T) {
	b := DefaultBroker()
	if b.MappedFileSizeCommitLog != 1<<30 || b.FlushDiskType != AsyncFlush ||
		b.FlushIntervalCommitLog != 500*time.Millisecond || b.FlushCommitLogLeastPages != 4 ||
		b.SyncFlushTimeout != 5*time.Second || b.MaxMessageSize != 4<<20 ||
		b.FileReservedTime != 72*time.Hour || !reflect.DeepEqual(b.DeleteWhen, []int{4}) ||
		b.DiskMaxUsedSpaceRatio != 75 || b.ListenPort != 10911 || b.StoreType != StoreTypeKV {
		t.Fatalf("defaults differ from RocketMQ's: %+v", b)
	}
	// BrokerConfig's, and BrokerStartup's (MixAll.WS_DOMAIN_NAME,
	// WS_DOMAIN_SUBGROUP) for the address server.
	if b.FetchNamesrvAddrByAddressServer || b.FetchNamesrvAddrInterval != 10*time.Second ||
		b.RmqAddressServerDomain != "jmenv.tbsite.net" || b.RmqAddressServerSubGroup != "nsaddr" ||
		b.FetchNameSrvAddrByDnsLookup || b.UpdateNameServerAddrPeriod != 2*time.Minute {
		t.Errorf("name server lookup defaults differ from RocketMQ's: %+v", b)
	}
}

// The periods of the name server lookups take any integer, as RocketMQ's
// setters do: the broker refuses one that is not positive only when it
// uses it.
func TestNameServerLookupKeys(t *testing.T) {
	got, err := LoadBroker(testutil.WriteFile(t, "b.conf", "fetchNamesrvAddrByAddressServer=true\nfetchNamesrvAddrInterval=-5\n"+
		"rmqAddressServerDomain=addr.example:80\nrmqAddressServerSubGroup=nsaddr-a\nfetchNameSrvAddrByDnsLookup=TRUE\nupdateNameServerAddrPeriod=0\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := got.Broker
	if !b.FetchNamesrvAddrByAddressServer || b.FetchNamesrvAddrInterval != -5*time.Millisecond ||
		b.RmqAddressServerDomain != "addr.example:80" || b.RmqAddressServerSubGroup != "nsaddr-a" ||
		!b.FetchNameSrvAddrByDnsLookup || b.UpdateNameServerAddrPeriod != 0 || len(got.UnknownKeys) != 0 || len(got.InertKeys) != 0 {
		t.Errorf("loaded %+v, unknown %v, inert %v", b, got.UnknownKeys, got.InertKeys)
	}
}

// The documented YAML must name every key and load to the defaults.
func TestBrokerYAMLDocumentsEveryKey(t *testing.T) {
	checkDocumented(t, "broker.yaml", Keys(), DefaultBroker(), func(path string) (any, []string, error) {
		got, err := LoadBroker(path, nil)
		return got.Broker, got.UnknownKeys, err
	})
}

// A value the documented YAML files write out is the default the key
// reports (what -p prints): loading the file to the defaults does not
// show it for keys without state, whose report is fixed.
func TestYAMLValuesAreTheReportedDefaults(t *testing.T) {
	checkWrittenDefaults(t, "broker.yaml", brokerFields)
	checkWrittenDefaults(t, "namesrv.yaml", namesrvFields)
	checkWrittenDefaults(t, "proxy.yaml", proxyFields)
}

// checkWrittenDefaults checks that every top-level scalar of the YAML file
// that is a key of fields is written as that key's default text.
func checkWrittenDefaults[T any](t *testing.T, file string, fields []field[T]) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		t.Fatalf("%s is not one mapping", file)
	}
	written := map[string]string{}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if v := m.Content[i+1]; v.Kind == yaml.ScalarNode {
			written[m.Content[i].Value] = v.Value
		}
	}
	checked := 0
	for _, f := range fields {
		v, ok := written[f.key]
		if !ok {
			continue
		}
		checked++
		if v != f.def {
			t.Errorf("%s writes %s: %q, but its default is reported as %q", file, f.key, v, f.def)
		}
	}
	if checked == 0 {
		t.Errorf("%s: no key of the schema checked", file)
	}
}

// checkDocumented checks that the YAML file names every key (commented
// out or not) and loads, through load, to the defaults want with no
// unknown key.
func checkDocumented(t *testing.T, file string, keys []string, want any, load func(path string) (any, []string, error)) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		re := regexp.MustCompile(`(?m)^(# )?` + regexp.QuoteMeta(k) + `:`)
		if !re.Match(raw) {
			t.Errorf("%s does not document %s", file, k)
		}
	}
	got, unknown, err := load(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown) != 0 {
		t.Errorf("%s has unknown keys %v", file, unknown)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s loads to\n%+v\nwant defaults\n%+v", file, got, want)
	}
}

func TestBrokerConfProperties(t *testing.T) {
	p := testutil.WriteFile(t, "broker.conf", `# a RocketMQ broker.conf
brokerClusterName = ClusterX
brokerName=broker-b
brokerId=0
deleteWhen=04;16
fileReservedTime=48
brokerRole=ASYNC_MASTER
flushDiskType=SYNC_FLUSH
mapedFileSizeCommitLog=65536
storePathRootDir=/tmp/rmq-store
namesrvAddr=127.0.0.1:9876;127.0.0.2:9876
haListenPort=10912
sendMessageThreadPoolNums=16
someVendorKey=1
`)
	got, err := LoadBroker(p, map[string]string{"listenPort": "20911"})
	if err != nil {
		t.Fatal(err)
	}
	b := got.Broker
	if b.BrokerClusterName != "ClusterX" || b.BrokerName != "broker-b" || b.FlushDiskType != SyncFlush ||
		b.MappedFileSizeCommitLog != 65536 || b.FileReservedTime != 48*time.Hour ||
		!reflect.DeepEqual(b.DeleteWhen, []int{4, 16}) || b.StorePathRootDir != "/tmp/rmq-store" ||
		b.NamesrvAddr != "127.0.0.1:9876;127.0.0.2:9876" || b.ListenPort != 20911 || b.HAListenPort != 10912 {
		t.Fatalf("unexpected config %+v", b)
	}
	if want := []string{"someVendorKey"}; !reflect.DeepEqual(lower(got.UnknownKeys), lower(want)) {
		t.Errorf("unknown keys %v, want %v", got.UnknownKeys, want)
	}
	// Settings (GET_BROKER_CONFIG) name every key once, canonically, with
	// the file's, the override's or the default value.
	settings := b.Settings()
	for k, v := range map[string]string{"mappedFileSizeCommitLog": "65536", "brokerName": "broker-b",
		"listenPort": "20911", "deleteWhen": "04;16", "traceOn": "true"} {
		if settings[k] != v {
			t.Errorf("setting %s=%q, want %q", k, settings[k], v)
		}
	}
	if len(settings) != len(Keys()) {
		t.Errorf("%d settings for %d keys", len(settings), len(Keys()))
	}
}

// POP's in-flight threshold (enablePopMessageThreshold,
// popInflightMessageThreshold) is a real setting: RocketMQ's defaults,
// loaded from a broker.conf and reported by Settings.
func TestPopInFlightThresholdLoads(t *testing.T) {
	d := DefaultBroker()
	if d.EnablePopMessageThreshold || d.PopInflightMessageThreshold != 10000 {
		t.Fatalf("defaults %v %d, want RocketMQ's false 10000", d.EnablePopMessageThreshold, d.PopInflightMessageThreshold)
	}
	if s := d.Settings(); s["enablePopMessageThreshold"] != "false" || s["popInflightMessageThreshold"] != "10000" {
		t.Fatalf("default settings %q %q", s["enablePopMessageThreshold"], s["popInflightMessageThreshold"])
	}
	p := testutil.WriteFile(t, "broker.conf", "enablePopMessageThreshold=true\npopInflightMessageThreshold=3\n")
	got, err := LoadBroker(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := got.Broker; !b.EnablePopMessageThreshold || b.PopInflightMessageThreshold != 3 {
		t.Fatalf("loaded %v %d", b.EnablePopMessageThreshold, b.PopInflightMessageThreshold)
	}
	if len(got.UnknownKeys) != 0 || len(got.InertKeys) != 0 {
		t.Fatalf("unknown %v, inert %v", got.UnknownKeys, got.InertKeys)
	}
	if s := got.Broker.Settings(); s["enablePopMessageThreshold"] != "true" || s["popInflightMessageThreshold"] != "3" {
		t.Fatalf("settings %q %q", s["enablePopMessageThreshold"], s["popInflightMessageThreshold"])
	}
}

// Settings reports the configuration in force: a value changed in code
// after loading, in the text its key's setter reads, and never a copy's.
func TestSettingsFollowChangesInCode(t *testing.T) {
	got, err := LoadBroker(testutil.WriteFile(t, "b.conf", "listenPort=20911\ndeleteWhen=04;16\nflushDiskType=sync_flush\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := got.Broker
	if s := b.Settings(); s["flushDiskType"] != SyncFlush {
		t.Errorf("flushDiskType=%q, want the canonical %q", s["flushDiskType"], SyncFlush)
	}
	c := b
	c.ListenPort = 30911
	c.DeleteWhen = []int{1, 23}
	c.TimerMaxDelay = 2 * time.Hour
	c.SyncFlushTimeout = 1500 * time.Millisecond
	c.FileReservedTime = 24 * time.Hour
	c.TraceOn = false
	c.MaxDispatchLagBytes = 1 << 33
	c.BrokerName = "broker-c"
	want := map[string]string{"listenPort": "30911", "deleteWhen": "01;23", "timerMaxDelaySec": "7200",
		"syncFlushTimeout": "1500", "fileReservedTime": "24", "traceOn": "false",
		"maxDispatchLagBytes": "8589934592", "brokerName": "broker-c"}
	settings := c.Settings()
	var back Broker
	for _, f := range brokerFields {
		if err := f.set(&back, settings[f.key]); err != nil {
			t.Errorf("%s: reported %q does not parse: %v", f.key, settings[f.key], err)
		}
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("report of the changed config parses to\n%+v\nwant\n%+v", back, c)
	}
	for k, v := range want {
		if settings[k] != v {
			t.Errorf("changed %s reported as %q, want %q", k, settings[k], v)
		}
	}
	if s := b.Settings(); s["listenPort"] != "20911" || s["deleteWhen"] != "04;16" || s["brokerName"] != "broker-a" {
		t.Errorf("the original reports its copy's changes: %v", s)
	}
}

func lower(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = strings.ToLower(v)
	}
	return out
}

func TestBothSpellingsOfMappedFileSize(t *testing.T) {
	for _, key := range []string{"mapedFileSizeCommitLog", "mappedFileSizeCommitLog"} {
		got, err := LoadBroker(testutil.WriteFile(t, "b.conf", key+"=1048576\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Broker.MappedFileSizeCommitLog != 1<<20 {
			t.Errorf("%s not applied: %d", key, got.Broker.MappedFileSizeCommitLog)
		}
	}
}

func TestBadValuesNameTheKey(t *testing.T) {
	cases := []struct{ name, content, key string }{
		{"b.conf", "listenPort=abc\n", "listenPort"},
		{"b.conf", "flushDiskType=SOMETIMES\n", "flushDiskType"},
		// 99 runs as 95, as in RocketMQ (the broker bounds it); past 100
		// is no percentage.
		{"b.conf", "diskMaxUsedSpaceRatio=101\n", "diskMaxUsedSpaceRatio"},
		{"b.conf", "deleteWhen=25\n", "deleteWhen"},
		{"b.conf", "autoCreateTopicEnable=perhaps\n", "autoCreateTopicEnable"},
		{"b.yaml", "syncFlushTimeout: soon\n", "syncFlushTimeout"},
		{"b.yaml", "storeType: rocksdb\n", "storeType"},
		{"b.conf", "indexWalSyncIntervalMillis=0\n", "indexWalSyncIntervalMillis"},
		{"b.conf", "popInflightMessageThreshold=-1\n", "popInflightMessageThreshold"},
		{"b.conf", "enablePopMessageThreshold=sometimes\n", "enablePopMessageThreshold"},
		{"b.conf", "enableControllerMode=maybe\n", "enableControllerMode"},
		{"b.conf", "syncBrokerMetadataPeriod=0\n", "syncBrokerMetadataPeriod"},
		{"b.conf", "enableDLegerCommitLog=true\n", "enableDLegerCommitLog"},
		{"b.conf", "fetchNamesrvAddrByAddressServer=yes\n", "fetchNamesrvAddrByAddressServer"},
		{"b.conf", "fetchNameSrvAddrByDnsLookup=1\n", "fetchNameSrvAddrByDnsLookup"},
		{"b.conf", "fetchNamesrvAddrInterval=10s\n", "fetchNamesrvAddrInterval"},
		{"b.conf", "updateNameServerAddrPeriod=2m\n", "updateNameServerAddrPeriod"},
		{"b.conf", "storePathCommitLog=/a,/b\n", "storePathCommitLog"},
		{"b.conf", "messageDelayLevel=1s 5x\n", "messageDelayLevel"},
		{"b.conf", "maxTransferCountOnMessageInMemory=0\n", "maxTransferCountOnMessageInMemory"},
		{"b.conf", "haTransferBatchSize=4194304\n", "haTransferBatchSize"},
		{"b.conf", "proxyProtocolTrustedNetworks=10.0.0.0/33\n", "proxyProtocolTrustedNetworks"},
		{"b.conf", "proxyProtocolTrustedNetworks=lb.example\n", "proxyProtocolTrustedNetworks"},
		{"b.conf", "proxyProtocolEnable=maybe\n", "proxyProtocolEnable"},
		// RocketMQ's BrokerStartup refuses an address that is not
		// host:port; rocketkv also one it could not dial.
		{"b.conf", "namesrvAddr=10.0.0.1\n", "namesrvAddr"},
		{"b.conf", "namesrvAddr=10.0.0.1:9876;10.0.0.2\n", "namesrvAddr"},
		{"b.conf", "namesrvAddr=10.0.0.1:ninety\n", "namesrvAddr"},
		{"b.conf", "namesrvAddr=10.0.0.1:98760\n", "namesrvAddr"},
		{"b.conf", "namesrvAddr=10.0.0.1:0\n", "namesrvAddr"},
		{"b.conf", "namesrvAddr=10.0.0.1:9876,10.0.0.2:9876\n", "namesrvAddr"},
		// Empty names and store root: refused here rather than met as
		// "put topic: empty name" or "storePathRootDir is empty" later.
		{"b.conf", "brokerName=\n", "brokerName"},
		{"b.conf", "brokerClusterName = \n", "brokerClusterName"},
		{"b.conf", "storePathRootDir=\n", "storePathRootDir"},
		{"b.yaml", "brokerName: \"\"\n", "brokerName"},
	}
	for _, c := range cases {
		_, err := LoadBroker(testutil.WriteFile(t, c.name, c.content), nil)
		if err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%q: error %v does not name %s", c.content, err, c.key)
		}
	}
	for _, list := range []string{"", "10.0.0.1:9876", " 10.0.0.1:9876 ; ns-2.example:9876;", "[::1]:9876;:9876"} {
		got, err := LoadBroker("", map[string]string{"namesrvAddr": list})
		if err != nil {
			t.Errorf("namesrvAddr %q refused: %v", list, err)
		} else if got.Broker.NamesrvAddr != strings.TrimSpace(list) {
			t.Errorf("namesrvAddr %q read as %q", list, got.Broker.NamesrvAddr)
		}
	}
	if _, err := LoadBroker(testutil.WriteFile(t, "b.conf", "enableControllerMode=false\nenableDLegerCommitLog=false\n"), nil); err != nil {
		t.Errorf("the replication modes turned off: %v", err)
	}
	if _, err := LoadBroker("", map[string]string{"noSuchKey": "1"}); err == nil {
		t.Error("override of an unknown key accepted")
	}
	if _, err := LoadBroker(filepath.Join(t.TempDir(), "missing.conf"), nil); err == nil {
		t.Error("missing file accepted")
	}
}

func TestYAMLTypedValues(t *testing.T) {
	got, err := LoadBroker(testutil.WriteFile(t, "b.yaml", "listenPort: 30911\nautoCreateTopicEnable: false\ndeleteWhen: \"02;03\"\nstoreType: FILE\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := got.Broker
	if b.ListenPort != 30911 || b.AutoCreateTopicEnable || !reflect.DeepEqual(b.DeleteWhen, []int{2, 3}) || b.StoreType != StoreTypeFile {
		t.Fatalf("unexpected %+v", b)
	}
}

// FuzzLoadBroker feeds arbitrary file contents through both formats: the
// loader returns a config or an error, never panics, and a configuration
// that loads reloads from its own settings (as GET_BROKER_CONFIG reports
// them and UPDATE_BROKER_CONFIG takes them back) to the same
// configuration, but for the secrets, which the settings mask.
func FuzzLoadBroker(f *testing.F) {
	if tuned, err := os.ReadFile("testdata/rocketmq-tuned-broker.conf"); err == nil {
		f.Add(tuned, false)
	}
	f.Add([]byte("brokerName=a\nlistenPort=1\n"), false)
	f.Add([]byte("listenPort: 1\ndeleteWhen: \"04\"\n"), true)
	f.Add([]byte("a=\\\n b\n!c\n#d"), false)
	f.Add([]byte("proxyProtocolTrustedNetworks=10.0.0.0/8, ::ffff:192.0.2.0/120,192.0.2.7\nstoreType=defaultRocksDB\n"+
		"serverChannelMaxIdleTimeSeconds=0\nserverSocketRcvBufSize=65536\nsendThreadPoolQueueCapacity=1\n"), false)
	secrets := map[string]bool{}
	for _, fl := range brokerSchema.fields {
		secrets[fl.key] = fl.value != nil
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content []byte, yaml bool) {
		loaded, err := LoadBroker(writeFuzzConfig(t, dir, content, yaml), nil)
		if err != nil {
			return
		}
		again, err := LoadBroker("", loaded.Broker.Settings())
		if err != nil {
			t.Fatalf("%q: settings %v do not load: %v", content, loaded.Broker.Settings(), err)
		}
		for _, k := range loaded.Broker.ChangedKeys(&again.Broker) {
			if !secrets[k] {
				t.Fatalf("%q: %s=%q reloads from the settings as %q", content, k, loaded.Broker.Settings()[k], again.Broker.Settings()[k])
			}
		}
	})
}

// writeFuzzConfig writes a fuzzed configuration file into dir, YAML or
// properties by its name, and returns its path. dir is the fuzz target's
// own (f.TempDir): a fuzzing process runs its inputs one at a time, and
// a directory made and removed for each input would cost more than the
// load it tests.
func writeFuzzConfig(t *testing.T, dir string, content []byte, yaml bool) string {
	t.Helper()
	name := "b.conf"
	if yaml {
		name = "b.yaml"
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The index's WAL sync follows flushDiskType unless indexWalSync names a
// mode: the index's writes are then as durable as the messages.
func TestIndexWALSyncFollowsFlushDiskType(t *testing.T) {
	cases := []struct{ content, want string }{
		{"", IndexWALSyncInterval},
		{"flushDiskType=ASYNC_FLUSH\n", IndexWALSyncInterval},
		{"flushDiskType=SYNC_FLUSH\n", IndexWALSyncAlways},
		{"flushDiskType=SYNC_FLUSH\nindexWalSync=auto\n", IndexWALSyncAlways},
		{"flushDiskType=ASYNC_FLUSH\nindexWalSync=always\n", IndexWALSyncAlways},
		{"flushDiskType=SYNC_FLUSH\nindexWalSync=interval\n", IndexWALSyncInterval},
	}
	for _, c := range cases {
		got, err := LoadBroker(testutil.WriteFile(t, "b.conf", c.content), nil)
		if err != nil {
			t.Fatal(err)
		}
		if mode := got.Broker.IndexWALSyncMode(); mode != c.want {
			t.Errorf("%q: mode %s, want %s", c.content, mode, c.want)
		}
	}
}

// storeType takes RocketMQ's values, in any case, as the layouts they
// name.
func TestStoreTypeTakesRocketMQsValues(t *testing.T) {
	for raw, want := range map[string]string{"kv": StoreTypeKV, "FILE": StoreTypeFile, "default": StoreTypeFile,
		"defaultRocksDB": StoreTypeKV, "DefaultRocksDb": StoreTypeKV} {
		got, err := LoadBroker("", map[string]string{"storeType": raw})
		if err != nil || got.Broker.StoreType != want {
			t.Errorf("storeType=%s: %q %v, want %q", raw, got.Broker.StoreType, err, want)
		}
	}
	_, err := LoadBroker("", map[string]string{"storeType": "rocksdb"})
	if err == nil || !strings.Contains(err.Error(), "storeType") || !strings.Contains(err.Error(), "defaultRocksDB") {
		t.Errorf("storeType=rocksdb: %v", err)
	}
}

// The unknown keys of a YAML or JSON file are reported as the file spells
// them (viper lower-cases every key it reads), a nested one as a dotted
// path, while its known keys are read in any case as before.
func TestUnknownKeysOfYAMLAndJSONKeepTheirSpelling(t *testing.T) {
	for _, c := range []struct {
		name, content string
	}{
		{"b.yaml", "listenPort: 30911\nBrokerName: bx\nsomeVendorKey: 1\nvendor:\n  subSection:\n    maxThing: 2\n  OtherKey: x\n" +
			"tls.server.certPathTypo: y\n"},
		{"b.yml", "listenPort: 30911\nBrokerName: bx\nsomeVendorKey: 1\nvendor: {subSection: {maxThing: 2}, OtherKey: x}\n" +
			"\"tls.server.certPathTypo\": y\n"},
		{"b.json", `{"listenPort": 30911, "BrokerName": "bx", "someVendorKey": 1, "vendor": {"subSection": {"maxThing": 2}, "OtherKey": "x"},` +
			` "tls.server.certPathTypo": "y"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := LoadBroker(testutil.WriteFile(t, c.name, c.content), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.Broker.ListenPort != 30911 || got.Broker.BrokerName != "bx" {
				t.Errorf("known keys: listenPort %d brokerName %q, want 30911 and bx", got.Broker.ListenPort, got.Broker.BrokerName)
			}
			want := []string{"someVendorKey", "tls.server.certPathTypo", "vendor.OtherKey", "vendor.subSection.maxThing"}
			if !slices.Equal(sorted(got.UnknownKeys), want) {
				t.Errorf("unknown keys %q, want %q", got.UnknownKeys, want)
			}
		})
	}
	// One unknown key in two cases: both spellings are named.
	got, err := LoadBroker(testutil.WriteFile(t, "b.yaml", "fooBar: 1\nFOOBAR: 2\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"FOOBAR", "fooBar"}; !slices.Equal(sorted(got.UnknownKeys), want) {
		t.Errorf("unknown keys %q, want %q", got.UnknownKeys, want)
	}
	// The name server's and the proxy's files too.
	ns, err := LoadNamesrv(testutil.WriteFile(t, "n.yaml", "listenPort: 9877\nnoSuchNamesrvKey: 1\n"), nil)
	if err != nil || !slices.Equal(ns.UnknownKeys, []string{"noSuchNamesrvKey"}) {
		t.Errorf("name server: %v, unknown keys %q, want [noSuchNamesrvKey]", err, ns.UnknownKeys)
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// brokerIP2 names a host and haMasterAddress a host:port: a value that
// cannot be one is refused naming the key, rather than given to slaves
// or dialled in vain ("10.0.0.1:10912" as brokerIP2 made the HA address
// "[10.0.0.1:10912]:10912"), while RocketMQ's accepted forms load.
func TestHostKeysAreChecked(t *testing.T) {
	for _, c := range []struct {
		key, value string
		ok         bool
	}{
		{"brokerIP2", "10.0.0.1", true},
		{"brokerIP2", "fe80::1", true},
		{"brokerIP2", "repl-net.example_1.internal", true},
		{"brokerIP2", "", true},
		{"brokerIP2", "10.0.0.1:10912", false},
		{"brokerIP2", "host name", false},
		{"brokerIP2", "http://10.0.0.1", false},
		{"haMasterAddress", "10.0.0.1:10912", true},
		{"haMasterAddress", "[fe80::1]:10912", true},
		{"haMasterAddress", "master-ha:10912", true},
		{"haMasterAddress", "", true},
		{"haMasterAddress", "10.0.0.1", false},
		{"haMasterAddress", "10.0.0.1:0", false},
		{"haMasterAddress", ":10912", false},
		{"haMasterAddress", "10.0.0.1:10912;10.0.0.2:10912", false},
	} {
		_, err := LoadBroker(testutil.WriteFile(t, "broker.conf", c.key+"="+c.value+"\n"), nil)
		if c.ok && err != nil {
			t.Errorf("%s=%q: %v", c.key, c.value, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "key "+c.key)) {
			t.Errorf("%s=%q: error %v, want one naming the key", c.key, c.value, err)
		}
	}
}

// A YAML or JSON file that gives a known key in two cases is refused
// naming both spellings: viper reads keys in any case and keeps one of
// the values, which one depending on map order, where a properties file
// reads the spelling RocketMQ reads.
func TestYAMLKeyInTwoCasesIsRefused(t *testing.T) {
	for name, content := range map[string]string{
		"b.yaml": "listenPort: 10911\nListenPort: 20911\n",
		"b.json": `{"listenPort": 10911, "LISTENPORT": 20911}`,
		"c.yaml": "tls:\n  server:\n    certPath: a.pem\ntls.server.CertPath: b.pem\n",
	} {
		_, err := LoadBroker(testutil.WriteFile(t, name, content), nil)
		if err == nil || !strings.Contains(err.Error(), "is given 2 times") {
			t.Errorf("%s %q: error %v, want one naming the key given twice", name, content, err)
		}
	}
	// One spelling, in whatever case, still loads.
	got, err := LoadBroker(testutil.WriteFile(t, "d.yaml", "ListenPort: 20911\n"), nil)
	if err != nil || got.Broker.ListenPort != 20911 {
		t.Errorf("ListenPort alone: %v, listenPort %d", err, got.Broker.ListenPort)
	}
}

// transactionCheckMax 0 loads, as RocketMQ takes it (its checker then asks
// about a half once and gives it up in the same pass), and so does a
// negative value, which RocketMQ takes too.
func TestTransactionCheckMaxOfZeroLoads(t *testing.T) {
	for _, v := range []string{"0", "-3"} {
		p := testutil.WriteFile(t, "broker.conf", "transactionCheckMax="+v+"\n")
		got, err := LoadBroker(p, nil)
		if err != nil {
			t.Fatalf("transactionCheckMax=%s: %v", v, err)
		}
		if s := got.Broker.Settings()["transactionCheckMax"]; s != v {
			t.Fatalf("transactionCheckMax=%s loaded as %q", v, s)
		}
	}
}
