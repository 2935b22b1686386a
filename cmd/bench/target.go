package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/rocketkv/rocketkv/broker"
	"github.com/rocketkv/rocketkv/configs"
)

// targetOptions say which broker a benchmark drives.
type targetOptions struct {
	// addr is an already running broker; empty starts one.
	addr string
	// inProcess starts a broker.Broker inside the benchmark process
	// instead of the broker binary.
	inProcess bool
	// brokerBin is the broker binary to start (default: "broker" beside
	// this binary, else bin/broker).
	brokerBin string
	// dir is where temporary stores are created (default: the system's
	// temp directory).
	dir string
	// sets are extra broker configuration keys, key=value.
	sets []string
}

// register adds the target flags to fs.
func (o *targetOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.addr, "broker", "", "address of a running broker (host:port); empty starts one on a temporary store")
	fs.BoolVar(&o.inProcess, "inprocess", false, "start the broker inside the benchmark process instead of running the broker binary")
	fs.StringVar(&o.brokerBin, "broker-bin", "", "broker binary to start (default: broker beside this binary, else bin/broker)")
	fs.StringVar(&o.dir, "dir", "", "parent directory of temporary stores (default: the system temp directory)")
	fs.StringArrayVar(&o.sets, "broker-set", nil, "broker configuration override key=value for a started broker (repeatable)")
}

// parseSets turns key=value flags into a map.
func parseSets(sets []string) (map[string]string, error) {
	out := make(map[string]string, len(sets))
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--broker-set %q: want key=value", s)
		}
		out[k] = v
	}
	return out, nil
}

// target is a broker under test and how to stop it.
type target struct {
	// Addr is the broker's client address.
	Addr string
	// Kind says how it runs: "external", "process" or "in-process".
	Kind string
	// PID is the broker's process when the benchmark started the binary
	// (0 otherwise), for CPU accounting.
	PID   int
	stop  func() error
	once  sync.Once
	err   error
	store string // temporary store removed by Close ("" for external)
}

// Close stops a broker the benchmark started and removes its store.
func (t *target) Close() error {
	t.once.Do(func() {
		if t.stop != nil {
			t.err = t.stop()
		}
		if t.store != "" {
			if err := os.RemoveAll(t.store); err != nil && t.err == nil {
				t.err = fmt.Errorf("remove store %s: %w", t.store, err)
			}
		}
	})
	return t.err
}

// startTarget returns the broker the options describe, started on a fresh
// store unless an address was given.
func startTarget(ctx context.Context, o targetOptions) (*target, error) {
	if o.addr != "" {
		return &target{Addr: o.addr, Kind: "external"}, nil
	}
	sets, err := parseSets(o.sets)
	if err != nil {
		return nil, err
	}
	store, err := os.MkdirTemp(o.dir, "rocketkv-bench-store-")
	if err != nil {
		return nil, fmt.Errorf("create temporary store: %w", err)
	}
	conf := map[string]string{
		"storePathRootDir": store,
		"brokerIP1":        "127.0.0.1",
		"flushDiskType":    "ASYNC_FLUSH",
		"logLevel":         "warn",
		"namesrvAddr":      "",
	}
	for k, v := range sets {
		conf[k] = v
	}
	var t *target
	if o.inProcess {
		t, err = startInProcess(ctx, conf)
	} else {
		t, err = startProcess(ctx, o.brokerBin, store, conf)
	}
	if err != nil {
		_ = os.RemoveAll(store)
		return nil, err
	}
	t.store = store
	if len(o.sets) > 0 {
		// The output names the overrides, so that a figure says what it
		// measured.
		t.Kind += ", with " + strings.Join(o.sets, " ")
	}
	return t, nil
}

func startInProcess(ctx context.Context, conf map[string]string) (*target, error) {
	conf["listenPort"] = "0"
	loaded, err := configs.LoadBroker("", conf)
	if err != nil {
		return nil, fmt.Errorf("broker configuration: %w", err)
	}
	b, err := broker.New(loaded.Broker, zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Timestamp().Logger())
	if err != nil {
		return nil, fmt.Errorf("create broker: %w", err)
	}
	if err := b.Start(ctx); err != nil {
		return nil, fmt.Errorf("start broker: %w", err)
	}
	stop := func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Shutdown(sctx); err != nil {
			return fmt.Errorf("stop in-process broker: %w", err)
		}
		return nil
	}
	return &target{Addr: b.Addr(), Kind: "in-process", stop: stop}, nil
}

// brokerBinary finds the broker binary: the flag, then "broker" beside the
// running executable, then bin/broker.
func brokerBinary(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	var tried []string
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "broker")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
		tried = append(tried, p)
	}
	if st, err := os.Stat(filepath.Join("bin", "broker")); err == nil && !st.IsDir() {
		return filepath.Join("bin", "broker"), nil
	}
	tried = append(tried, "bin/broker")
	return "", fmt.Errorf("no broker binary (tried %s): run make build, or pass --broker-bin or --inprocess", strings.Join(tried, ", "))
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// brokerPort is a free port P whose neighbours P-2 and P+1 (the broker's
// fast channel and HA port by default) are free too. The broker's own
// keys for them are not passed: an older build given as --broker-bin
// refuses overrides it does not know.
func brokerPort() (int, error) {
	for range 50 {
		p, err := freePort()
		if err != nil {
			return 0, err
		}
		if p < 3 || p > 65534 {
			continue
		}
		free := true
		for _, q := range []int{p - 2, p + 1} {
			l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(q)))
			if err != nil {
				free = false
				break
			}
			_ = l.Close()
		}
		if free {
			return p, nil
		}
	}
	return 0, fmt.Errorf("find a free port whose neighbours -2 and +1 are free: none in 50 tries")
}

// startProcess runs the broker binary on store with conf as --set
// overrides (listenPort is chosen here unless conf sets it: see
// brokerPort), followed by extraArgs (e.g. --pprof), and returns once it
// listens.
func startProcess(ctx context.Context, bin, store string, conf map[string]string, extraArgs ...string) (*target, error) {
	path, err := brokerBinary(bin)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(conf["listenPort"])
	if err != nil {
		if port, err = brokerPort(); err != nil {
			return nil, err
		}
		conf["listenPort"] = strconv.Itoa(port)
	}
	args := []string{"--store", store}
	for k, v := range conf {
		if k == "storePathRootDir" {
			continue
		}
		args = append(args, "--set", k+"="+v)
	}
	args = append(args, extraArgs...)
	logPath := filepath.Join(filepath.Dir(store), filepath.Base(store)+".log")
	// A benchmark killed outright does not leave its broker running
	// (startChild's Pdeathsig).
	c, err := startChild("broker", path, args, logPath)
	if err != nil {
		_ = os.Remove(logPath)
		return nil, err
	}
	cmd, exited := c.cmd, c.exited
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cleanup := func() {
		_ = c.logFile.Close()
		_ = os.Remove(logPath)
	}
	if err := waitListening(ctx, addr, exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		tail := logTail(logPath, 2048)
		cleanup()
		return nil, fmt.Errorf("broker %s did not come up: %w; log tail:\n%s", path, err, tail)
	}
	stop := func() error {
		defer cleanup()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			if c.waitErr != nil {
				return fmt.Errorf("broker exited: %w; log tail:\n%s", c.waitErr, logTail(logPath, 2048))
			}
			return nil
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			return errors.New("broker did not stop within 60 s of SIGTERM; killed")
		}
	}
	return &target{Addr: addr, Kind: fmt.Sprintf("process %s (pid %d)", path, cmd.Process.Pid), PID: cmd.Process.Pid, stop: stop}, nil
}

// waitListening dials addr until it accepts, the process exits or 60 s
// pass.
func waitListening(ctx context.Context, addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s after 60 s: %w", addr, err)
		}
		select {
		case <-exited:
			return errors.New("exited before listening")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logTail returns up to n bytes of the end of a file.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}
