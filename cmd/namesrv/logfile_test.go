package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// With logDir the name server's lines go to namesrv.log there, closed at
// the stop; stderr (what nohup redirects) keeps only the line naming the
// file. Without it they stay on stderr (TestServesAndStopsOnSignal).
func TestLogDirWritesNamesrvLog(t *testing.T) {
	addr := freeAddr(t)
	dir := filepath.Join(t.TempDir(), "logs", "rocketmqlogs")
	p := testutil.StartMain(t, "NAMESRV_TEST_AS_MAIN=1", "--listen", addr, "--log-format", "json", "--set", "logDir="+dir)
	stderr := p.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		c, err := remoting.Dial(ctx, addr, remoting.ClientOptions{})
		if err == nil {
			_ = c.Close()
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("name server never listened: %v\n%s", err, stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Stop(ctx, t, syscall.SIGTERM)
	path := filepath.Join(dir, "namesrv.log")
	if want := "namesrv: logging to " + path + "\n"; stderr.String() != want {
		t.Fatalf("stderr %q, want %q", stderr.String(), want)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"message":"logging to a file rolled by size"`, `"logMaxSizeMiB":100`, `"logMaxRolledFiles":5`, "remoting server stopped"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("namesrv.log lacks %s:\n%s", want, raw)
		}
	}
}

// A log directory that cannot be made stops the start with an error
// naming logDir, before the name server listens.
func TestUnusableLogDirStopsTheStart(t *testing.T) {
	file := testutil.WriteFile(t, "not-a-dir", "")
	addr := freeAddr(t)
	_, err := execute(t, "--listen", addr, "--set", "logDir="+file+"/logs")
	if err == nil || !strings.Contains(err.Error(), "logDir "+file+"/logs") {
		t.Fatalf("start with an unusable logDir: %v", err)
	}
}
