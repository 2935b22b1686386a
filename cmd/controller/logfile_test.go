package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// A log directory that cannot be made stops the controller's start with
// an error naming logDir.
func TestUnusableLogDirStopsTheController(t *testing.T) {
	file := testutil.WriteFile(t, "not-a-dir", "")
	_, err := execute(t, "--set", "controllerDLegerPeers=n0-127.0.0.1:"+strconv.Itoa(testutil.FreePort(t)),
		"--self-id", "n0", "--store", t.TempDir(), "--set", "logDir="+file+"/logs")
	if err == nil || !strings.Contains(err.Error(), "logDir "+file+"/logs") {
		t.Fatalf("start with an unusable logDir: %v", err)
	}
}
