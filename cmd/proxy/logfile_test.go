package main

import (
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// A log directory that cannot be made stops the proxy's start with an
// error naming logDir.
func TestUnusableLogDirStopsTheProxy(t *testing.T) {
	file := testutil.WriteFile(t, "not-a-dir", "")
	_, err := execute(t, "--listen", "127.0.0.1:0", "--set", "logDir="+file+"/logs")
	if err == nil || !strings.Contains(err.Error(), "logDir "+file+"/logs") {
		t.Fatalf("start with an unusable logDir: %v", err)
	}
}
