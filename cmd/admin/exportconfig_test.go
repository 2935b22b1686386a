package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
)

func TestRocksDBConfigToJSON(t *testing.T) {
	store := t.TempDir()
	ns, b := startClusterWith(t, map[string]string{"storePathRootDir": store})
	dir := filepath.Join(store, "config")
	if _, err := run(t, "updateTopic", "-b", b.Addr(), "-t", "JT", "-r", "1", "-w", "1"); err != nil {
		t.Fatal(err)
	}
	// -b wins over the local mode's -p, as mqadmin's.
	out, err := run(t, "rocksDBConfigToJson", "-b", b.Addr(), "-t", "topics", "-p", filepath.Join(store, "missing"))
	if err != nil || out != b.Addr()+": export done.\n" {
		t.Fatalf("rocksDBConfigToJson -t topics: %q %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(dir, rmqconfig.GroupsFile)); err == nil {
		t.Error("subscriptionGroup.json written although only the topics were asked for")
	}
	if _, err := run(t, "updateSubGroup", "-b", b.Addr(), "-g", "JG"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, ns, "JT")
	if out, err := run(t, "rocksDBConfigToJson", "-n", ns, "-c", "DefaultCluster"); err != nil || out != b.Addr()+": export done.\n" {
		t.Fatalf("rocksDBConfigToJson -c: %q %v", out, err)
	}
	c, err := rmqconfig.Read(store)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Files) != 3 || len(c.Topics) == 0 || len(c.Groups) == 0 {
		t.Errorf("export of the cluster: read back files %v, %d topics, %d groups", c.Files, len(c.Topics), len(c.Groups))
	}
	if _, err := run(t, "rocksDBConfigToJson", "-b", b.Addr(), "-t", "offsets"); err == nil || !strings.Contains(err.Error(), "offsets") {
		t.Errorf("unknown config type: %v, want an error naming it", err)
	}
}
