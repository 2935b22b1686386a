package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -p prints the configuration that would run: the file's keys with the
// flags winning, every other key at its default; an unknown key is
// refused as it would be at start.
func TestPrintConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(file, []byte("brokerName=broker-x\nlistenPort=10921\nsomeRocketMQKey=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"-c", file, "-p", "-n", "10.0.0.9:9876", "--set", "flushDiskType=SYNC_FLUSH"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"brokerName=broker-x\n", "listenPort=10921\n", "namesrvAddr=10.0.0.9:9876\n",
		"flushDiskType=SYNC_FLUSH\n", "brokerClusterName=DefaultCluster\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed configuration lacks %q:\n%s", want, out.String())
		}
	}
	cmd = newCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{"-p", "--set", "noSuchKey=1"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "noSuchKey") {
		t.Fatalf("unknown --set key: %v", err)
	}
}
