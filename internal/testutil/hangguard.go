package testutil

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// HangGuard ends the test binary with every goroutine's stack when t,
// its cleanups included (call HangGuard first, so its own cleanup runs
// last), has not ended within d: a test that hangs under load otherwise
// runs to go test's -timeout, whose dump a CI log may not keep. The
// stacks go to stderr and to a file in the temporary directory, whose
// path is printed. d is a hang guard, generous: not a measure of speed.
func HangGuard(t testing.TB, d time.Duration) {
	t.Helper()
	name := t.Name()
	done := make(chan struct{})
	timer := time.AfterFunc(d, func() {
		select {
		case <-done:
			return
		default:
		}
		var stacks bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&stacks, 2)
		file := filepath.Join(os.TempDir(), fmt.Sprintf("hang-%s-%d.txt",
			strings.NewReplacer("/", "_", " ", "_").Replace(name), os.Getpid()))
		where := file
		if err := os.WriteFile(file, stacks.Bytes(), 0o644); err != nil {
			where = fmt.Sprintf("not written: %v", err)
		}
		fmt.Fprintf(os.Stderr, "HANG: %s still running after %s; every goroutine's stack (file %s):\n%s\n",
			name, d, where, stacks.Bytes())
		panic(fmt.Sprintf("%s still running after %s (testutil.HangGuard)", name, d))
	})
	t.Cleanup(func() {
		close(done)
		timer.Stop()
	})
}
