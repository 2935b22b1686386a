package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// makeRun is scripts/run.sh (make run) started in a tree of runTree.
type makeRun struct {
	cmd  *exec.Cmd
	done chan error
	log  string
}

// startRun starts scripts/run.sh of root with ports as its NAMESRV_PORT,
// BROKER_PORT and PROXY_PORT; its output goes to a file of the test's.
// A run still going at the end of the test gets SIGTERM, which makes it
// stop the servers it started.
func startRun(t *testing.T, root string, ports map[string]int) *makeRun {
	t.Helper()
	r := &makeRun{done: make(chan error, 1), log: filepath.Join(t.TempDir(), "run.log")}
	logFile, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command("bash", filepath.Join(root, "scripts", "run.sh"))
	r.cmd.Env = os.Environ()
	for k, v := range ports {
		r.cmd.Env = append(r.cmd.Env, k+"="+strconv.Itoa(v))
	}
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.done <- r.cmd.Wait()
		_ = logFile.Close()
	}()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
			<-r.done
		}
	})
	return r
}

// wait waits for the run to end, failing the test after a bound that
// guards against a run that never ends (it is not a measure), and
// returns its exit status.
func (r *makeRun) wait(t *testing.T, what string) int {
	t.Helper()
	select {
	case err := <-r.done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%s: %v", what, err)
		}
		return r.cmd.ProcessState.ExitCode()
	case <-time.After(90 * time.Second):
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		<-r.done
		r.showLog(t)
		t.Fatalf("%s: make run was still running after 90 s", what)
		return 0
	}
}

// showLog logs the run's output.
func (r *makeRun) showLog(t *testing.T) {
	t.Helper()
	if b, err := os.ReadFile(r.log); err == nil {
		t.Logf("make run's output:\n%s", b)
	}
}

// runPorts returns free ports for make run's three servers.
func runPorts(t *testing.T) map[string]int {
	t.Helper()
	return map[string]int{
		"NAMESRV_PORT": freePort(t),
		"BROKER_PORT":  freeBrokerPort(t),
		"PROXY_PORT":   freePort(t),
	}
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
			// The servers listen on every interface (":port"), so the
			// port is taken the same way. A port found free may be taken
			// by another test's server before this listens on it: then
			// other ports are picked.
			var ports map[string]int
			var l net.Listener
			for attempt := 0; l == nil; attempt++ {
				ports = runPorts(t)
				var err error
				if l, err = net.Listen("tcp", fmt.Sprintf(":%d", ports[taken])); err != nil && attempt == 9 {
					t.Fatal(err)
				}
			}
			defer l.Close()
			r := startRun(t, root, ports)
			if code := r.wait(t, "make run with "+taken+" taken"); code == 0 {
				r.showLog(t)
				t.Fatalf("make run with %s taken ended with exit status 0", taken)
			}
		})
	}
}

// TestRunStopsCleanlyAndServesTheSameStore is README's Quick start: SIGTERM
// to make run (as Ctrl-C) stops the three servers, the broker before the
// name server (it unregisters from a name server that still answers), the
// run ending with status 0 and the ports free again; the next make run
// serves the same store, the messages acknowledged before included.
func TestRunStopsCleanlyAndServesTheSameStore(t *testing.T) {
	t.Parallel()
	root := runTree(t)
	ports := runPorts(t)
	ns := fmt.Sprintf("127.0.0.1:%d", ports["NAMESRV_PORT"])
	broker := fmt.Sprintf("127.0.0.1:%d", ports["BROKER_PORT"])
	const topic, queues, n = "RunTopic", 4, 10

	r := startRun(t, root, ports)
	waitListening(t, ns)
	waitListening(t, broker)
	waitListening(t, fmt.Sprintf("127.0.0.1:%d", ports["PROXY_PORT"]))
	createTopic(t, broker, topic, queues)
	waitRoute(t, ns, topic, "broker-a") // configs/run.conf's brokerName
	p := newProducer(t, ns, "RunProducer")
	sendN(t, p, topic, "run-", n)
	if err := p.Shutdown(); err != nil {
		t.Fatal(err)
	}
	waitDispatched(t, broker, topic, queues, n)
	// A configuration update is written back to the file the broker runs
	// from: the store's copy, not configs/run.conf.
	rawMustSucceed(t, broker, codeUpdateBrokerConfig, nil, []byte("fileReservedTime=48"))

	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(t, "make run after SIGTERM"); code != 0 {
		r.showLog(t)
		t.Fatalf("make run ended with exit status %d after SIGTERM, want 0", code)
	}
	out, err := os.ReadFile(r.log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"message":"broker unregistered"`) {
		r.showLog(t)
		t.Fatal("the broker did not unregister from the name server as make run stopped")
	}
	for name, port := range ports {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			r.showLog(t)
			t.Fatalf("%s %d still taken after make run ended: %v", name, port, err)
		}
		_ = l.Close()
	}

	runConf, err := os.ReadFile(filepath.Join(root, "configs", "run.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if want, err := os.ReadFile(filepath.Join("..", "configs", "run.conf")); err != nil || !bytes.Equal(runConf, want) {
		t.Fatalf("make run changed configs/run.conf (%v):\n%s", err, runConf)
	}
	if stored, err := os.ReadFile(filepath.Join(root, "data", "broker.conf")); err != nil || !strings.Contains(string(stored), "fileReservedTime=48") {
		t.Fatalf("the configuration update is not in data/broker.conf (%v):\n%s", err, stored)
	}

	r = startRun(t, root, ports)
	waitListening(t, broker)
	if got := topicTotal(t, broker, topic, queues); got != n {
		r.showLog(t)
		t.Fatalf("the next make run serves %d messages of %s, want the %d acknowledged before", got, topic, n)
	}
	resp, err := rawInvoke(broker, codeGetBrokerConfig, nil, nil)
	if err != nil || resp.Code != respSuccess || !strings.Contains(string(resp.Body), "fileReservedTime=48") {
		t.Fatalf("the next make run does not run with the update made before (%v): %+v", err, resp)
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(t, "the second make run after SIGTERM"); code != 0 {
		r.showLog(t)
		t.Fatalf("the second make run ended with exit status %d after SIGTERM, want 0", code)
	}
}
