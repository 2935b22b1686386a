package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// A store whose CommitLog is in another directory (storePathCommitLog) is
// read with --commitlog; without it kvdump says where it looked.
func TestCommitLogElsewhere(t *testing.T) {
	root := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	openTestStore(t, root, 0).close(t) // build the index, as the broker does on first start
	clogDir := filepath.Join(t.TempDir(), "commitlog-disk")
	if err := os.Rename(filepath.Join(root, "commitlog"), clogDir); err != nil {
		t.Fatal(err)
	}

	sum := jsonLines(t, mustKvdump(t, "--store", root, "--commitlog", clogDir, "--json", "summary"))
	last := sum[len(sum)-1]
	if fmt.Sprint(last["logMaxOffset"]) != "53272" || fmt.Sprint(last["lag"]) != "0" {
		t.Errorf("summary with --commitlog: %v", last)
	}
	if out := mustKvdump(t, "--store", root, "--commitlog", clogDir, "verify"); strings.Contains(strings.ToLower(out), "mismatch") {
		t.Errorf("verify with --commitlog:\n%s", out)
	}

	out, _, _ := runKvdump(t, "--store", root, "summary")
	if !strings.Contains(out, "--commitlog") {
		t.Errorf("summary without --commitlog does not point at it:\n%s", out)
	}
}
