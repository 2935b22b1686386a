package testutil

import (
	"bufio"
	"bytes"
	"context"
	"errors"
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
	// A pipe of our own, not cmd.StdoutPipe: Wait (KillChild) closes
	// that one at once, losing the lines the child wrote before it was
	// killed and the reader had not read yet, where a crash test reads
	// what the child reported done. This one is read to its end.
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	err = cmd.Start()
	_ = w.Close() // the child holds its own copy
	if err != nil {
		_ = out.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = out.Close() })
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

// RunChildToExit runs the test binary again with args and env
// ("NAME=value" each) added, waits for it to end, and returns its stdout
// and stderr. It fails the test when the child runs longer than timeout
// (it is killed then) or ends with an exit status other than want.
func RunChildToExit(t testing.TB, timeout time.Duration, want int, args []string, env ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the child did not end within %s (hung):\nstdout:\n%s\nstderr:\n%s", timeout, out.String(), errOut.String())
	}
	got := 0
	if err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("run the child: %v", err)
		}
		got = exit.ExitCode()
	}
	if got != want {
		t.Fatalf("child ended with exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", got, want, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}
