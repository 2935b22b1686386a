package configs

import (
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// The store and POP keys RocketMQ's develop branch added after 5.3.3 (up
// to the baseline) load as inert keys with their reasons, none unknown;
// the values that ask for what rocketkv does otherwise are warned about,
// in the light of storeType and rocksdbCQDoubleWriteEnable.
func TestDevelopStoreKeys(t *testing.T) {
	defaults := "combineCQLoadingCQTypes=default;defaultRocksDB\ncombineCQPreferCQType=default\ncombineAssignOffsetCQType=default\n" +
		"combineCQEnableCheckSelf=false\ncombineCQMaxExtraSearchCommitLogFiles=3\nenableAcceleratedRecovery=false\n" +
		"enableRunningFlagsInFlush=false\nwriteWithoutMmap=false\npopPollingMapExpireTimeSeconds=600\n"
	for _, base := range []string{"", "storeType=default\nrocksdbCQDoubleWriteEnable=true\n"} {
		got, err := LoadBroker(testutil.WriteFile(t, "broker.conf", base+defaults), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.UnknownKeys) != 0 || len(got.InertKeys) != 9 {
			t.Fatalf("%q: unknown %v, inert %+v; want none unknown and 9 inert", base, got.UnknownKeys, got.InertKeys)
		}
		for _, k := range got.InertKeys {
			if k.Reason == "" || k.Warning != "" {
				t.Errorf("%q: %s: reason %q, warning %q", base, k.Key, k.Reason, k.Warning)
			}
		}
	}

	warned := func(content string) string {
		t.Helper()
		got, err := LoadBroker(testutil.WriteFile(t, "broker.conf", content), nil)
		if err != nil {
			t.Fatalf("%q: %v", content, err)
		}
		var w []string
		for _, k := range got.InertKeys {
			if k.Warning != "" {
				w = append(w, k.Warning)
			}
		}
		return strings.Join(w, "\n")
	}
	for _, c := range []struct {
		content, want string
	}{
		// Reads: RocketMQ would serve them from the KV layout.
		{"storeType=default\nrocksdbCQDoubleWriteEnable=true\ncombineCQPreferCQType=defaultRocksDB\n", "combineCQPreferCQType=defaultRocksDB is not followed"},
		{"storeType=default\nrocksdbCQDoubleWriteEnable=true\ncombineCQPreferCQType=bogus\n", "combineCQPreferCQType=bogus is not followed"},
		// Read only with storeType=default and double-write.
		{"storeType=default\ncombineCQPreferCQType=defaultRocksDB\n", ""},
		{"storeType=defaultRocksDB\nrocksdbCQDoubleWriteEnable=true\ncombineCQPreferCQType=defaultRocksDB\n", ""},
		{"storeType=default\nrocksdbCQDoubleWriteEnable=true\ncombineCQPreferCQType= DEFAULT \n", ""},
		// One layout loaded: rocketkv writes both.
		{"rocksdbCQDoubleWriteEnable=true\ncombineCQLoadingCQTypes=defaultRocksDB\n", "combineCQLoadingCQTypes=defaultRocksDB is not followed"},
		{"rocksdbCQDoubleWriteEnable=true\ncombineCQLoadingCQTypes=defaultrocksdb ; Default\n", ""},
		{"combineCQLoadingCQTypes=default\n", ""},
		{"writeWithoutMmap=true\n", "writeWithoutMmap=true is not followed"},
	} {
		got := warned(c.content)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%q: warnings %q, want %q", c.content, got, c.want)
		}
	}

	for _, content := range []string{"writeWithoutMmap=maybe\n", "enableAcceleratedRecovery=1x\n", "popPollingMapExpireTimeSeconds=ten\n"} {
		key, _, _ := strings.Cut(content, "=")
		if _, err := LoadBroker(testutil.WriteFile(t, "b.conf", content), nil); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: error %v does not name %s", content, err, key)
		}
	}
}
