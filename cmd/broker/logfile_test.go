package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/clustertest"
	"github.com/rocketkv/rocketkv/internal/logging"
	"github.com/rocketkv/rocketkv/internal/testutil"
)

// With logDir the broker writes broker.log there (in broker-a_0 under it
// with isolateLogEnable), from its first line to its last, and closes it
// at the stop: the file's lock is free again.
func TestLogDirWritesBrokerLog(t *testing.T) {
	// No collection while it runs: a finalizer closing the lost file
	// would free its lock too, whether the stop closed it or not. GOGC
	// set keeps the broker's start from turning the collector on again.
	t.Setenv("GOGC", "off")
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	dir := t.TempDir()
	o := options{shutdownWait: 10 * time.Second, namesrv: clustertest.StartNamesrv(t), store: t.TempDir(),
		sets: []string{"listenPort=0", "brokerIP1=127.0.0.1", "mappedFileSizeCommitLog=4194304",
			"fastListenPort=0", "haListenPort=0", "logDir=" + dir, "isolateLogEnable=true"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, o) }()
	path := filepath.Join(dir, "broker-a_0", "broker.log")
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, _ := os.ReadFile(path)
		if strings.Contains(string(raw), `"message":"broker started"`) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("run ended: %v\n%s", err, raw)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no start line in broker.log:\n%s", raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the broker did not stop")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"logMaxSizeMiB":128`, `"logMaxRolledFiles":20`, `"logCompress":true`, "garbage collector settings", `"message":"broker stopped"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("broker.log lacks %s:\n%s", want, raw)
		}
	}
	out, err := logging.OpenOutput("broker", configs.LogFile{Dir: filepath.Dir(path), MaxSizeMiB: 1}, io.Discard)
	if err != nil {
		t.Fatalf("broker.log still held after the stop: %v", err)
	}
	_ = out.Close()
}

// A log directory that cannot be made stops the start with an error
// naming logDir, before the store is opened.
func TestUnusableLogDirStopsTheBroker(t *testing.T) {
	file := testutil.WriteFile(t, "not-a-dir", "")
	store := filepath.Join(t.TempDir(), "store")
	cmd := newCommand()
	cmd.SetArgs([]string{"--store", store, "--set", "listenPort=0", "--set", "logDir=" + file + "/logs"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "logDir "+file+"/logs") {
		t.Fatalf("start with an unusable logDir: %v", err)
	}
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Fatalf("the store was made: %v", err)
	}
}
