package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// runTree lays out what scripts/run.sh (make run) needs in a directory of
// its own: the script, configs/run.conf and bin/ pointing at the binaries
// under test. The script works from the directory above its own, so its
// ./data store is the tree's and not the repository's.
func runTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"scripts", "configs", "bin"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"scripts/run.sh", "configs/run.conf"} {
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"namesrv", "broker", "proxy"} {
		bin, err := filepath.Abs(filepath.Join(binDir, c))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("make run needs bin/%s: %v (run make build, or set ROCKETKV_BIN)", c, err)
		}
		if err := os.Symlink(bin, filepath.Join(root, "bin", c)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// freeBrokerPort returns a listen port whose fast channel (port-2) and HA
// port (port+1), which make run derives from BROKER_PORT, are free too.
func freeBrokerPort(t *testing.T) int {
	t.Helper()
	for range 100 {
		p := freePort(t)
		free := true
		for _, q := range []int{p - 2, p + 1} {
			if !handedOut.claim(q) {
				free = false
				break
			}
			l, err := net.Listen("tcp", fmt.Sprintf(":%d", q))
			if err != nil {
				free = false
				break
			}
			_ = l.Close()
		}
		if free {
			return p
		}
	}
	t.Fatal("no free broker port with its fast channel and HA port")
	return 0
}

// TestRunEndsWhenAServerCannotStart: make run with one of its ports taken
// by another process (another broker's name server, a RocketMQ proxy)
// ends with an error, as README's Quick start has the operator move the
// ports then. Before, only a broker that ended stopped the run: a name
// server that could not bind left the broker registered with whatever
// held the name server's port, and a proxy that could not bind left the
// run serving no gRPC clients, both while the script said rocketkv was
// starting.
func TestRunEndsWhenAServerCannotStart(t *testing.T) {
	for _, taken := range []string{"NAMESRV_PORT", "BROKER_PORT", "PROXY_PORT"} {
		t.Run(taken, func(t *testing.T) {
			t.Parallel()
			root := runTree(t)
			ports := map[string]int{
				"NAMESRV_PORT": freePort(t),
				"BROKER_PORT":  freeBrokerPort(t),
				"PROXY_PORT":   freePort(t),
			}
			// The servers listen on every interface (":port"), so the
			// port is taken the same way.
			l, err := net.Listen("tcp", fmt.Sprintf(":%d", ports[taken]))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()

			logPath := filepath.Join(t.TempDir(), "run.log")
			logFile, err := os.Create(logPath)
			if err != nil {
				t.Fatal(err)
			}
			defer logFile.Close()
			cmd := exec.Command("bash", filepath.Join(root, "scripts", "run.sh"))
			cmd.Env = os.Environ()
			for k, v := range ports {
				cmd.Env = append(cmd.Env, k+"="+strconv.Itoa(v))
			}
			cmd.Stdout, cmd.Stderr = logFile, logFile
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			showLog := func() {
				if b, err := os.ReadFile(logPath); err == nil {
					t.Logf("make run's output:\n%s", b)
				}
			}

			// The bound is a guard against a run that never ends, not a
			// measure: the run ends as soon as the server's bind fails.
			select {
			case err := <-done:
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() == 0 {
					showLog()
					t.Fatalf("make run with %s taken ended with %v, want a non-zero exit status", taken, err)
				}
			case <-time.After(90 * time.Second):
				// SIGTERM makes the script stop the servers it started.
				_ = cmd.Process.Signal(syscall.SIGTERM)
				<-done
				showLog()
				t.Fatalf("make run with %s taken was still running after 90 s", taken)
			}
		})
	}
}
