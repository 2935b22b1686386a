package testutil

import (
	"context"
	"os"
	"os/exec"
	"testing"
)

// MainProcess is the test binary run again as its command's main (see
// StartMain): its output and its end.
type MainProcess struct {
	// Cmd is the running command: signal it through Cmd.Process.
	Cmd *exec.Cmd
	// Stdout and Stderr collect what the process writes.
	Stdout, Stderr *SyncBuffer

	done chan struct{}
	err  error
}

// StartMain runs the test binary again with args and with env
// ("NAME=value") added to its environment, the sign on which the
// package's TestMain runs the command's main instead of the tests; its
// output is collected in Stdout and Stderr. A process still running at
// the test's end is killed and waited for.
func StartMain(t testing.TB, env string, args ...string) *MainProcess {
	t.Helper()
	p := &MainProcess{Stdout: &SyncBuffer{}, Stderr: &SyncBuffer{}, done: make(chan struct{})}
	p.Cmd = exec.Command(os.Args[0], args...)
	p.Cmd.Env = append(os.Environ(), env)
	p.Cmd.Stdout, p.Cmd.Stderr = p.Stdout, p.Stderr
	// No Pdeathsig: Linux sends it when the thread that forked ends, and
	// the Go runtime may end that thread while the test still runs; the
	// cleanup below kills the process.
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s as main: %v", env, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.Cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Done is closed when the process has ended; Err then says how.
func (p *MainProcess) Done() <-chan struct{} { return p.done }

// Err is the process's exit error (nil for exit status 0), once Done is
// closed.
func (p *MainProcess) Err() error {
	<-p.done
	return p.err
}

// Stop sends sig to the process and waits, until ctx ends, for it to
// exit with status 0; an error sending, another exit or no exit fails
// the test, with the process's stderr.
func (p *MainProcess) Stop(ctx context.Context, t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("exit after %v: %v\n%s", sig, p.err, p.Stderr)
		}
	case <-ctx.Done():
		t.Fatalf("no exit after %v\n%s", sig, p.Stderr)
	}
}
