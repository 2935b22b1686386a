package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each binary's log file rolls at the size and keeps the count of rolled
// files RocketMQ 5.3's logback gives its main log, gzipped, and stays on
// stderr (no logDir) unless told.
func TestLogFileDefaultsAreRocketMQs(t *testing.T) {
	b, n, c, p := DefaultBroker(), DefaultNamesrv(), DefaultControllerFile(), DefaultProxy()
	for name, got := range map[string]struct{ got, want LogFile }{
		"broker":     {b.Log, LogFile{MaxSizeMiB: 128, MaxRolledFiles: 20, Compress: true}},
		"namesrv":    {n.Log, LogFile{MaxSizeMiB: 100, MaxRolledFiles: 5, Compress: true}},
		"controller": {c.Log, LogFile{MaxSizeMiB: 100, MaxRolledFiles: 5, Compress: true}},
		"proxy":      {p.Log, LogFile{MaxSizeMiB: 128, MaxRolledFiles: 10, Compress: true}},
	} {
		if got.got != got.want {
			t.Errorf("%s: %+v, want %+v", name, got.got, got.want)
		}
	}
	if b.IsolateLogEnable || b.LogFile() != b.Log {
		t.Errorf("isolateLogEnable on by default: %+v", b.LogFile())
	}
}

// The keys load from a broker.conf, isolateLogEnable putting the file in
// <brokerName>_<brokerId> under logDir; bad values name the key.
func TestLogFileKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broker.conf")
	conf := "brokerName=broker-b\nbrokerId=1\nlogDir=/var/log/rocketmqlogs\nlogMaxSizeMiB=64\nlogMaxRolledFiles=0\nlogCompress=false\nisolateLogEnable=true\n"
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadBroker(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.UnknownKeys) != 0 || len(loaded.InertKeys) != 0 {
		t.Fatalf("unknown %v, inert %v", loaded.UnknownKeys, loaded.InertKeys)
	}
	want := LogFile{Dir: "/var/log/rocketmqlogs/broker-b_1", MaxSizeMiB: 64, Compress: false}
	if got := loaded.Broker.LogFile(); got != want {
		t.Fatalf("log file %+v, want %+v", got, want)
	}
	if got := loaded.Broker.Settings()["logDir"]; got != "/var/log/rocketmqlogs" {
		t.Fatalf("logDir reported as %q", got)
	}
	loaded, err = LoadBroker(path, map[string]string{"logDir": ""})
	if err != nil {
		t.Fatal(err)
	}
	if got := loaded.Broker.LogFile().Dir; got != "" {
		t.Fatalf("isolateLogEnable without logDir: %q, want stderr", got)
	}
	for key, value := range map[string]string{"logMaxSizeMiB": "0", "logMaxRolledFiles": "-1", "logCompress": "yes"} {
		if _, err := LoadBroker(path, map[string]string{key: value}); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s=%s: %v", key, value, err)
		}
	}
	if _, err := LoadNamesrv("", map[string]string{"logMaxSizeMiB": "0"}); err == nil || !strings.Contains(err.Error(), "logMaxSizeMiB") {
		t.Errorf("name server's logMaxSizeMiB=0: %v", err)
	}
}
