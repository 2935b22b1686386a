package testutil

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// blockedForGood is what the hanging child waits in: its name must be in
// the stacks the guard prints.
func blockedForGood(ch chan struct{}) { <-ch }

// TestHangGuardChild hangs under a short guard when run as the child of
// TestHangGuardDumpsTheStacks; on its own it does nothing.
func TestHangGuardChild(t *testing.T) {
	if os.Getenv("TESTUTIL_HANG_CHILD") != "1" {
		t.Skip("run by TestHangGuardDumpsTheStacks")
	}
	HangGuard(t, 100*time.Millisecond)
	blockedForGood(make(chan struct{}))
}

// A test still running past its guard ends the binary with every
// goroutine's stack, on stderr and in the file it names, the blocked
// one's included.
func TestHangGuardDumpsTheStacks(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHangGuardChild$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), "TESTUTIL_HANG_CHILD=1")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		defer close(done)
		out, err = cmd.CombinedOutput()
	}()
	select {
	case <-done:
	case <-time.After(4 * time.Minute): // a hang guard of the guard
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the child ran past its hang guard: %s", out)
	}
	if err == nil {
		t.Fatalf("the hanging child passed: %s", out)
	}
	s := string(out)
	if !strings.Contains(s, "HANG: TestHangGuardChild still running") || !strings.Contains(s, "testutil.blockedForGood") {
		t.Fatalf("the child's output lacks the guard's report or the blocked goroutine's stack:\n%s", s)
	}
	m := regexp.MustCompile(`\(file ([^)]*)\)`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no stacks file named:\n%s", s)
	}
	stacks, rerr := os.ReadFile(m[1])
	_ = os.Remove(m[1])
	if rerr != nil || !strings.Contains(string(stacks), "testutil.blockedForGood") {
		t.Fatalf("the stacks file %s: %v, without the blocked goroutine", m[1], rerr)
	}
}

// A test that ends within its guard ends normally.
func TestHangGuardLetsAFinishedTestBe(t *testing.T) {
	t.Run("quick", func(t *testing.T) { HangGuard(t, 50*time.Millisecond) })
	time.Sleep(200 * time.Millisecond) // past the guard's deadline: it must not fire
}
