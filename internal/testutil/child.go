package testutil

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StartChild runs the test binary again as a child process, with env
// ("NAME=value") added to its environment and no tests selected; the
// child's TestMain is expected to see env, start its work and print
// "ready" (or "ready ADDR" for a server) as its first line. StartChild
// returns the running command and ADDR (empty without one), and drains
// the rest of the child's output. The child's stderr is the test's. Stop
// it with KillChild (SIGKILL, for crash tests).
func StartChild(t testing.TB, env string) (*exec.Cmd, string) {
	t.Helper()
	cmd, addr, sc := startChild(t, env)
	go func() {
		for sc.Scan() {
		}
	}()
	return cmd, addr
}

// StartChildLines is StartChild for a child that reports its work on its
// later output lines: they arrive on the returned channel, which is closed
// when the child's output ends (after KillChild, for example). The child
// blocks on its output once 1<<16 lines are unread.
func StartChildLines(t testing.TB, env string) (*exec.Cmd, string, <-chan string) {
	t.Helper()
	cmd, addr, sc := startChild(t, env)
	lines := make(chan string, 1<<16)
	go func() {
		defer close(lines)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, addr, lines
}

func startChild(t testing.TB, env string) (*exec.Cmd, string, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	// A test binary that dies before it kills its child takes the child
	// with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	ready := sc.Scan()
	line := sc.Text()
	if !ready || (line != "ready" && !strings.HasPrefix(line, "ready ")) {
		KillChild(cmd)
		t.Fatalf("child did not start: %q %v", line, sc.Err())
	}
	return cmd, strings.TrimPrefix(strings.TrimPrefix(line, "ready"), " "), sc
}

// KillChild SIGKILLs a child started by StartChild and waits for it.
func KillChild(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// KillWindow measures how long a child started with env takes from its
// "ready" line to the line done, kills it, and returns one and a half
// times that: a crash test that kills later children at random moments
// inside the window hits every stage of their work, and some after it.
func KillWindow(t testing.TB, env, done string) time.Duration {
	t.Helper()
	cmd, _, lines := StartChildLines(t, env)
	start := time.Now()
	for l := range lines {
		if l == done {
			break
		}
	}
	window := time.Since(start) * 3 / 2
	KillChild(cmd)
	return window
}
