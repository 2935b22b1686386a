package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/remoting"
)

// failoverOptions are the flags of `bench failover`.
type failoverOptions struct {
	runs    int
	brokers int
	// signal stops the master: "kill" (SIGKILL: the process is gone and
	// the kernel closes its connections) or "stop" (SIGSTOP: the process
	// hangs with its connections open, as a frozen or cut-off host).
	signal string
	// rate is the producer's sends per second; body its message size.
	rate        float64
	body        int
	sendTimeout time.Duration
	// heartbeatTimeout, heartbeatInterval (the brokers') and scanInterval
	// (the controller's) are the settings liveness depends on.
	heartbeatTimeout  time.Duration
	heartbeatInterval time.Duration
	scanInterval      time.Duration
	// settle is how long the producer sends to the master before the
	// kill; timeout bounds every wait of a run.
	settle  time.Duration
	timeout time.Duration
	// brokerBin is the broker binary; the controller binary is the one
	// beside it.
	brokerBin      string
	dir            string
	brokerSets     []string
	controllerSets []string
	// queues (TOPICSxQUEUES, "" for none) are created on the first master
	// once the slaves joined, and preload messages sent to them round
	// robin; the run waits until every slave holds them, so that the new
	// master switches on a store of that size.
	queues  string
	preload int64
	// keep leaves each run's stores and logs under dir.
	keep bool
}

// failoverGroup is the broker group the benchmark runs.
const (
	failoverCluster = "BenchCluster"
	failoverGroup   = "bench-failover"
	failoverTopic   = "BenchFailover"
)

func newFailoverCommand() *cobra.Command {
	var o failoverOptions
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "Kill a controller-mode master under a steady producer; report the time to a new master, to its first accepted send, and the failed sends, against the same broker's cold start",
		Long: `failover runs, for each run, a controller (bin/controller, one raft peer) and
--brokers controller-mode brokers of one group (the broker binary, child
processes on loopback, each on a fresh store), all from scratch:

  cold start  once the controller leads, the first broker is started
              alone; the time from its exec to its first accepted send
              (registration with the controller, id, election of itself,
              the Broker's start) is the baseline.
  settle      the other brokers start as slaves; once the controller's sync
              state set holds every broker, a producer sends --rate
              messages per second (one at a time, SEND_MESSAGE_V2 with the
              Remoting client, --send-timeout each; a send that times out
              closes its connection, as RocketMQ's client does, and is
              counted) for --settle (with --signal stop, plus a random
              part of --scan-interval, so that the signal falls anywhere
              in the controller's scan period).
  failover    the master gets --signal (kill: SIGKILL, the kernel closes its
              connections and the controller sees the heartbeat connection
              close; stop: SIGSTOP, the connections stay open and only the
              heartbeat timeout tells). Measured from the signal: the
              controller naming a new master (GET_REPLICA_INFO polled every
              2 ms); the new master accepting a send (sent to the elected
              address every 2 ms once it is named); the new master's own
              record of its switch (the Supervisor's "broker running as
              SYNC_MASTER" log line, from the decision to switch, its slave
              Broker's stop included, to the master Broker's start); and the
              producer, which goes on at --rate and moves to the next
              broker's address after a failed send: its first accepted send
              and the sends that failed before it.

failover/cold is (new master accepts a send) / (cold start), both exec or
signal to an accepted send on the same binary in the same run. The
liveness settings are passed explicitly (--heartbeat-timeout is the brokers'
controllerHeartBeatTimeoutMills, --heartbeat-interval their
brokerHeartbeatInterval, --scan-interval the controller's
scanNotActiveBrokerInterval and scanInactiveMasterInterval); with --signal
stop the part of the gap beyond the heartbeat timeout is reported.

With --queues TOPICSxQUEUES (e.g. 1000x100 for 100k queues, 10000x100 for
1M) the master creates that many queues once the slaves joined
(UPDATE_AND_CREATE_TOPIC_LIST, 2,000 topics a request) and takes --preload
messages of --body bytes spread round robin over them (4 pipelined
producers, 64 in flight each; --preload equal to the queue count touches
every queue once); the settle starts once every slave has copied the
topics and replicated and indexed every message, so the new master's
switch runs on a store that large. Raise --timeout for large sizes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFailover(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.runs, "runs", 5, "runs (each from fresh stores and a fresh controller)")
	f.IntVar(&o.brokers, "brokers", 3, "brokers in the group (2 or 3)")
	f.StringVar(&o.signal, "signal", "kill", "how the master is stopped: kill (SIGKILL) or stop (SIGSTOP, the process hangs)")
	f.Float64Var(&o.rate, "rate", 200, "producer sends per second")
	f.IntVar(&o.body, "body", 256, "message body size in bytes")
	f.DurationVar(&o.sendTimeout, "send-timeout", time.Second, "timeout of one send")
	f.DurationVar(&o.heartbeatTimeout, "heartbeat-timeout", 10*time.Second, "brokers' controllerHeartBeatTimeoutMills")
	f.DurationVar(&o.heartbeatInterval, "heartbeat-interval", time.Second, "brokers' brokerHeartbeatInterval")
	f.DurationVar(&o.scanInterval, "scan-interval", 5*time.Second, "controller's scanNotActiveBrokerInterval and scanInactiveMasterInterval")
	f.DurationVar(&o.settle, "settle", 2*time.Second, "steady sends to the master before the signal")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "bound of every wait of a run")
	f.StringVar(&o.brokerBin, "broker-bin", "", "broker binary (default: broker beside this binary, else bin/broker); the controller binary is the one beside it")
	f.StringVar(&o.dir, "dir", "", "parent directory of the temporary stores (default: the system temp directory)")
	f.StringArrayVar(&o.brokerSets, "broker-set", nil, "broker configuration override key=value (repeatable)")
	f.StringArrayVar(&o.controllerSets, "controller-set", nil, "controller configuration override key=value (repeatable)")
	f.StringVar(&o.queues, "queues", "", "TOPICSxQUEUES created on the master before the settle (k and M suffixes; empty: none)")
	f.Int64Var(&o.preload, "preload", 0, "messages sent round robin to the --queues before the settle")
	f.BoolVar(&o.keep, "keep", false, "leave each run's stores and logs (printed) instead of removing them")
	return cmd
}

func (o failoverOptions) validate() error {
	switch {
	case o.runs < 1:
		return fmt.Errorf("failover: --runs %d: want at least 1", o.runs)
	case o.brokers < 2 || o.brokers > 3:
		return fmt.Errorf("failover: --brokers %d: want 2 or 3", o.brokers)
	case o.signal != "kill" && o.signal != "stop":
		return fmt.Errorf("failover: --signal %q: want kill or stop", o.signal)
	case o.rate <= 0:
		return fmt.Errorf("failover: --rate %g: want > 0", o.rate)
	case o.body < 1:
		return fmt.Errorf("failover: --body %d: want at least 1", o.body)
	case o.sendTimeout <= 0 || o.timeout <= 0 || o.settle < 0:
		return errors.New("failover: --send-timeout and --timeout must be positive, --settle not negative")
	case o.heartbeatTimeout < time.Millisecond || o.heartbeatInterval < time.Millisecond || o.scanInterval < time.Millisecond:
		return errors.New("failover: --heartbeat-timeout, --heartbeat-interval and --scan-interval must be at least 1ms")
	case o.preload < 0:
		return fmt.Errorf("failover: --preload %d: want >= 0", o.preload)
	case o.preload > 0 && o.queues == "":
		return errors.New("failover: --preload needs --queues")
	}
	if o.queues != "" {
		if _, err := o.queueSize(); err != nil {
			return fmt.Errorf("failover: %w", err)
		}
	}
	bs, err := parseSets(o.brokerSets)
	if err != nil {
		return err
	}
	cs, err := parseSets(o.controllerSets)
	if err != nil {
		return err
	}
	// The liveness keys have flags, so that the output names the values
	// the runs had.
	for key, flag := range map[string]string{"controllerHeartBeatTimeoutMills": "--heartbeat-timeout", "brokerHeartbeatInterval": "--heartbeat-interval"} {
		if _, ok := bs[key]; ok {
			return fmt.Errorf("failover: set %s with %s, not --broker-set", key, flag)
		}
	}
	for _, key := range []string{"scanNotActiveBrokerInterval", "scanInactiveMasterInterval"} {
		if _, ok := cs[key]; ok {
			return fmt.Errorf("failover: set %s with --scan-interval, not --controller-set", key)
		}
	}
	return nil
}

// queueSize is --queues, one size.
func (o failoverOptions) queueSize() (scaleSize, error) {
	sizes, err := parseScaleSizes(o.queues)
	if err != nil {
		return scaleSize{}, err
	}
	if len(sizes) != 1 {
		return scaleSize{}, fmt.Errorf("--queues %q: want one size", o.queues)
	}
	return sizes[0], nil
}

// sig returns the signal that stops the master.
func (o failoverOptions) sig() syscall.Signal {
	if o.signal == "stop" {
		return syscall.SIGSTOP
	}
	return syscall.SIGKILL
}

// failoverRun is what one run measured.
type failoverRun struct {
	// cold is the first broker's exec to its first accepted send;
	// coldSwitch its own record of its first start (Switch.Took).
	cold, coldSwitch time.Duration
	// elected is the signal to the controller naming another master;
	// accepted the signal to the new master accepting a send (probed
	// every 2 ms once elected); firstSend the signal to the producer's
	// first send a broker accepted; newSwitch the new master's record of
	// its switch.
	elected, accepted, firstSend, newSwitch time.Duration
	// newStart is the new master Broker's own start within newSwitch
	// (its "broker started" startup): newSwitch less newStart is mostly
	// the slave Broker's stop.
	newStart time.Duration
	// failed counts the sends that failed between the signal and
	// firstSend.
	failed int
	// jitter is the random delay added to the settle (SIGSTOP only).
	jitter time.Duration
	// timeouts counts the sends (the producer's and the new master's
	// probe) that timed out after the signal, each closing its
	// connection.
	timeouts int
	// oldEpoch and newEpoch are the master epochs before and after.
	oldEpoch, newEpoch int32
	// root holds the run's stores and logs.
	root string
	// preloaded is how long the --queues and --preload took, until every
	// slave held them (0 without).
	preloaded time.Duration
}

func runFailover(ctx context.Context, w io.Writer, o failoverOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	bin, err := brokerBinary(o.brokerBin)
	if err != nil {
		return err
	}
	ctlBin := filepath.Join(filepath.Dir(bin), "controller")
	if st, err := os.Stat(ctlBin); err != nil || st.IsDir() {
		return fmt.Errorf("failover: no controller binary beside %s: run make build", bin)
	}
	fmt.Fprintf(w, "failover: %d brokers of one group (%s, child processes), 1 controller (%s, one raft peer), master stopped with SIG%s, producer %s sends/s of %d B (send timeout %s), %d runs\n",
		o.brokers, bin, ctlBin, strings.ToUpper(o.signal), fmtNum(o.rate), o.body, fmtDur(o.sendTimeout), o.runs)
	fmt.Fprintf(w, "liveness: controllerHeartBeatTimeoutMills %d, brokerHeartbeatInterval %d, scanNotActiveBrokerInterval %d, scanInactiveMasterInterval %d",
		o.heartbeatTimeout.Milliseconds(), o.heartbeatInterval.Milliseconds(), o.scanInterval.Milliseconds(), o.scanInterval.Milliseconds())
	if len(o.brokerSets) > 0 {
		fmt.Fprintf(w, "; brokers with %s", strings.Join(o.brokerSets, " "))
	}
	if len(o.controllerSets) > 0 {
		fmt.Fprintf(w, "; controller with %s", strings.Join(o.controllerSets, " "))
	}
	fmt.Fprintln(w)
	if o.queues != "" {
		size, _ := o.queueSize() // validated
		fmt.Fprintf(w, "store: %s queues created on the master, %s messages of %d B sent to them round robin, every slave caught up before the settle\n",
			size, fmtCount(int(o.preload)), o.body)
	}
	fmt.Fprintf(w, "machine: %s\n", machineLine())
	var runs []failoverRun
	for i := range o.runs {
		r, err := failoverOnce(ctx, o, bin, ctlBin)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		if o.keep {
			fmt.Fprintf(w, "run %d: stores and logs kept in %s\n", i+1, r.root)
		}
		if r.preloaded > 0 {
			fmt.Fprintf(w, "run %d: store preloaded and replicated in %s\n", i+1, fmtDur(r.preloaded))
		}
		fmt.Fprintf(w, "run %d: cold start %s (its switch %s); SIG%s -> new master elected %s, its switch %s (Broker start %s), it accepts a send %s (x%.3f of cold start), producer's first accepted send %s after %d failed (%d sends timed out); epoch %d -> %d;%s load %s\n",
			i+1, fmtDur(r.cold), fmtDur(r.coldSwitch), strings.ToUpper(o.signal), fmtDur(r.elected), fmtDur(r.newSwitch), fmtDur(r.newStart), fmtDur(r.accepted),
			ratio(float64(r.accepted), float64(r.cold)), fmtDur(r.firstSend), r.failed, r.timeouts, r.oldEpoch, r.newEpoch, jitterNote(r.jitter), loadAverage())
		runs = append(runs, r)
	}
	med := func(f func(failoverRun) time.Duration) time.Duration {
		return time.Duration(medianOf(runs, func(r failoverRun) float64 { return float64(f(r)) }))
	}
	var t table
	t.add("median of", "cold start", "elected", "new master's switch", "its Broker start", "new master accepts", "failover/cold", "producer's first send", "failed sends", "elected-timeout", "accepts-timeout")
	beyond := func(d time.Duration) string {
		if o.signal == "kill" {
			return "n/a"
		}
		return fmtSigned(d - o.heartbeatTimeout)
	}
	el, acc := med(func(r failoverRun) time.Duration { return r.elected }), med(func(r failoverRun) time.Duration { return r.accepted })
	t.add(fmt.Sprintf("%d runs", len(runs)),
		med(func(r failoverRun) time.Duration { return r.cold }), el,
		med(func(r failoverRun) time.Duration { return r.newSwitch }), med(func(r failoverRun) time.Duration { return r.newStart }), acc,
		fmt.Sprintf("%.3f", medianOf(runs, func(r failoverRun) float64 { return ratio(float64(r.accepted), float64(r.cold)) })),
		med(func(r failoverRun) time.Duration { return r.firstSend }),
		fmtNum(medianOf(runs, func(r failoverRun) float64 { return float64(r.failed) })),
		beyond(el), beyond(acc))
	if err := t.write(w); err != nil {
		return err
	}
	if o.signal == "kill" {
		_, err = fmt.Fprintln(w, "(SIGKILL: the controller learns of the master's death from its heartbeat connection's close, not from the heartbeat timeout)")
	} else {
		_, err = fmt.Fprintf(w, "(SIGSTOP: the controller expires the master's heartbeats %s after the last one (sent up to %s before the signal), checked every %s: elected-timeout, the part of the gap beyond the timeout, falls between -%s and +%s)\n",
			fmtDur(o.heartbeatTimeout), fmtDur(o.heartbeatInterval), fmtDur(o.scanInterval), fmtDur(o.heartbeatInterval), fmtDur(o.scanInterval))
	}
	return err
}

// jitterNote names the settle's random part, when there is one.
func jitterNote(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return " signal " + fmtDur(d) + " into the scan interval;"
}

// loadAverage is the 1-minute load average, "?" when unknown.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// fmtSigned is fmtDur with a sign.
func fmtSigned(d time.Duration) string {
	if d < 0 {
		return "-" + fmtDur(-d)
	}
	return "+" + fmtDur(d)
}

// child is a process the benchmark started: its log file and exit.
type child struct {
	name    string
	cmd     *exec.Cmd
	log     string
	logFile *os.File
	exited  chan struct{}
	waitErr error
	mu      sync.Mutex
	stopped bool // signalled to stop (SIGSTOP): resumed before a stop
}

// startChild runs bin with args, its output to logPath.
func startChild(name, bin string, args []string, logPath string) (*child, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = lf.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	c := &child{name: name, cmd: cmd, log: logPath, logFile: lf, exited: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// signal sends sig to the process.
func (c *child) signal(sig syscall.Signal) error {
	if err := c.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %s: %w", c.name, err)
	}
	if sig == syscall.SIGSTOP {
		c.mu.Lock()
		c.stopped = true
		c.mu.Unlock()
	}
	return nil
}

// stop ends the process (SIGTERM, SIGKILL after 30 s; SIGKILL at once
// for one that was stopped with SIGSTOP) and closes its log.
func (c *child) stop() {
	c.mu.Lock()
	frozen := c.stopped
	c.mu.Unlock()
	select {
	case <-c.exited:
	default:
		if frozen {
			_ = c.cmd.Process.Kill()
		} else {
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-c.exited:
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	}
	_ = c.logFile.Close()
}

// portWithNext returns a free loopback port whose next port is free too
// (the controller's raft port).
func portWithNext() (int, error) {
	for range 50 {
		p, err := freePort()
		if err != nil {
			return 0, err
		}
		if p >= 65535 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+1)))
		if err != nil {
			continue
		}
		_ = l.Close()
		return p, nil
	}
	return 0, errors.New("find a free port whose next port is free: none in 50 tries")
}

// setArgs turns a configuration into --set arguments, sorted.
func setArgs(conf map[string]string) []string {
	keys := make([]string, 0, len(conf))
	for k := range conf {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	args := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, "--set", k+"="+conf[k])
	}
	return args
}

// failoverEnv is one run's processes and clients.
type failoverEnv struct {
	o       failoverOptions
	root    string
	ctlAddr string
	ctl     *child
	brokers []*child
	addrs   []string
	pool    *remoting.ClientPool
	// timeouts counts the sends that timed out (send).
	timeouts atomic.Int64
}

func (e *failoverEnv) close() error {
	var wg sync.WaitGroup
	for _, b := range e.brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.stop()
		}()
	}
	wg.Wait()
	if e.ctl != nil {
		e.ctl.stop()
	}
	if e.pool != nil {
		_ = e.pool.Close()
	}
	if e.o.keep {
		return nil
	}
	if err := os.RemoveAll(e.root); err != nil {
		return fmt.Errorf("remove %s: %w", e.root, err)
	}
	return nil
}

// startBroker runs broker i of the group on a fresh store.
func (e *failoverEnv) startBroker(i int, bin string) (*child, string, error) {
	port, err := brokerPort()
	if err != nil {
		return nil, "", err
	}
	store := filepath.Join(e.root, fmt.Sprintf("broker-%d", i))
	if err := os.MkdirAll(store, 0o755); err != nil {
		return nil, "", fmt.Errorf("create store: %w", err)
	}
	conf := map[string]string{
		"brokerIP1":                       "127.0.0.1",
		"listenPort":                      strconv.Itoa(port),
		"brokerClusterName":               failoverCluster,
		"brokerName":                      failoverGroup,
		"enableControllerMode":            "true",
		"controllerAddr":                  e.ctlAddr,
		"namesrvAddr":                     "",
		"flushDiskType":                   "ASYNC_FLUSH",
		"logLevel":                        "info",
		"logFormat":                       "json",
		"mappedFileSizeCommitLog":         "8388608",
		"controllerHeartBeatTimeoutMills": strconv.FormatInt(e.o.heartbeatTimeout.Milliseconds(), 10),
		"brokerHeartbeatInterval":         strconv.FormatInt(e.o.heartbeatInterval.Milliseconds(), 10),
	}
	sets, _ := parseSets(e.o.brokerSets) // validated
	for k, v := range sets {
		conf[k] = v
	}
	args := append([]string{"--store", store}, setArgs(conf)...)
	c, err := startChild(fmt.Sprintf("broker %d", i), bin, args, filepath.Join(e.root, fmt.Sprintf("broker-%d.log", i)))
	if err != nil {
		return nil, "", err
	}
	return c, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// controllerLeads asks the controller whether it leads and serves
// (CONTROLLER_GET_METADATA_INFO's isLeader).
func (e *failoverEnv) controllerLeads(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := e.pool.Invoke(ctx, e.ctlAddr, remoting.NewRequest(remoting.ControllerGetMetadataInfo, nil, nil))
	if err != nil {
		return false, fmt.Errorf("get controller metadata: %w", err)
	}
	if resp.Code != remoting.Success {
		return false, fmt.Errorf("get controller metadata: code %d %s", resp.Code, resp.Remark)
	}
	return remoting.Header(resp.ExtFields).OptString("isLeader", "") == "true", nil
}

// replica is the controller's view of the group (GET_REPLICA_INFO).
type replica struct {
	masterAddr string
	epoch      int32
	syncSet    []int64
}

// replicaInfo asks the controller for the group's master and sync state
// set.
func (e *failoverEnv) replicaInfo(ctx context.Context) (replica, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := e.pool.Invoke(ctx, e.ctlAddr, remoting.NewRequest(remoting.ControllerGetReplicaInfo, map[string]string{"brokerName": failoverGroup}, nil))
	if err != nil {
		return replica{}, fmt.Errorf("get replica info: %w", err)
	}
	if resp.Code != remoting.Success {
		return replica{}, fmt.Errorf("get replica info: code %d %s", resp.Code, resp.Remark)
	}
	return parseReplica(resp)
}

// parseReplica reads a GET_REPLICA_INFO answer: the master's address (""
// for none) and epoch from the header, the sync state set from the body.
func parseReplica(resp *remoting.Command) (replica, error) {
	h := remoting.Header(resp.ExtFields)
	r := replica{masterAddr: h.OptString("masterAddress", "")}
	if _, err := h.Int64("masterBrokerId"); err != nil {
		r.masterAddr = ""
	}
	if v, err := h.Int32("masterEpoch"); err == nil {
		r.epoch = v
	}
	if len(resp.Body) > 0 {
		var body struct {
			SyncStateSet []int64 `json:"syncStateSet"`
		}
		if err := json.Unmarshal(resp.Body, &body); err != nil {
			return r, fmt.Errorf("get replica info: sync state set: %w", err)
		}
		r.syncSet = body.SyncStateSet
	}
	return r, nil
}

// sendOnNewConn sends one message to addr on a connection of its own,
// to tell a broker's refusal from a stale connection when a run fails.
func (e *failoverEnv) sendOnNewConn(addr string, body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), e.o.sendTimeout)
	defer cancel()
	c, err := remoting.DialAddr(ctx, addr, remoting.ClientOptions{Log: zerolog.Nop()})
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.Invoke(ctx, sendRequest(failoverTopic, 0, body, "failover-check", time.Now()))
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		return fmt.Errorf("code %d %s", resp.Code, resp.Remark)
	}
	return nil
}

// send sends one message to addr and reports whether the broker
// accepted it.
// A send that times out closes its connection, as RocketMQ's client
// closes a channel on a timeout (clientCloseSocketIfTimeout), and is
// counted: on loopback a timeout means a connection nobody serves.
func (e *failoverEnv) send(ctx context.Context, addr string, body []byte, n int) error {
	sctx, cancel := context.WithTimeout(ctx, e.o.sendTimeout)
	defer cancel()
	resp, err := e.pool.Invoke(sctx, addr, sendRequest(failoverTopic, 0, body, "failover-"+strconv.Itoa(n), time.Now()))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			e.timeouts.Add(1)
			e.pool.CloseAddr(addr)
		}
		return err
	}
	if resp.Code != remoting.Success {
		return fmt.Errorf("code %d %s", resp.Code, resp.Remark)
	}
	return nil
}

// failoverOnce runs one cold start and one failover from scratch.
func failoverOnce(ctx context.Context, o failoverOptions, bin, ctlBin string) (r failoverRun, err error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	root, err := os.MkdirTemp(o.dir, "rocketkv-bench-failover-")
	if err != nil {
		return r, fmt.Errorf("create temporary directory: %w", err)
	}
	r.root = root
	e := &failoverEnv{o: o, root: root, pool: remoting.NewClientPool(remoting.ClientOptions{Log: zerolog.Nop()})}
	defer func() {
		if cerr := e.close(); err == nil {
			err = cerr
		}
	}()
	port, err := portWithNext()
	if err != nil {
		return r, err
	}
	e.ctlAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	scan := strconv.FormatInt(o.scanInterval.Milliseconds(), 10)
	ctlConf := map[string]string{"scanNotActiveBrokerInterval": scan, "scanInactiveMasterInterval": scan}
	sets, _ := parseSets(o.controllerSets) // validated
	for k, v := range sets {
		ctlConf[k] = v
	}
	args := append([]string{"--peers", "n0-" + e.ctlAddr, "--self-id", "n0", "--store", filepath.Join(root, "controller"), "--log-level", "info"}, setArgs(ctlConf)...)
	if e.ctl, err = startChild("controller", ctlBin, args, filepath.Join(root, "controller.log")); err != nil {
		return r, err
	}
	if err := waitListening(ctx, e.ctlAddr, e.ctl.exited); err != nil {
		return r, fmt.Errorf("controller: %w; log tail:\n%s", err, logTail(e.ctl.log, 2048))
	}
	// The broker's cold start is measured against a controller that
	// leads: a fresh one-peer raft elects itself only after raft's
	// heartbeat timeout, which is the controller's start, not the
	// broker's.
	for {
		lead, err := e.controllerLeads(ctx)
		if err == nil && lead {
			break
		}
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("the controller did not become leader (%v): %w; log tail:\n%s", err, ctx.Err(), logTail(e.ctl.log, 2048))
		case <-time.After(5 * time.Millisecond):
		}
	}

	// Cold start: the first broker alone, exec to first accepted send.
	body := bytes.Repeat([]byte{'f'}, o.body)
	began := time.Now()
	b0, addr0, err := e.startBroker(0, bin)
	if err != nil {
		return r, err
	}
	e.brokers, e.addrs = append(e.brokers, b0), append(e.addrs, addr0)
	for n := 0; ; n++ {
		if err := e.send(ctx, addr0, body, -1-n); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("cold start: no accepted send: %w; log tail:\n%s", ctx.Err(), logTail(b0.log, 2048))
		case <-b0.exited:
			return r, fmt.Errorf("cold start: broker exited; log tail:\n%s", logTail(b0.log, 2048))
		case <-time.After(2 * time.Millisecond):
		}
	}
	r.cold = time.Since(began)

	// The slaves, until the sync state set holds every broker.
	for i := 1; i < o.brokers; i++ {
		b, addr, err := e.startBroker(i, bin)
		if err != nil {
			return r, err
		}
		e.brokers, e.addrs = append(e.brokers, b), append(e.addrs, addr)
	}
	var before replica
	for {
		before, err = e.replicaInfo(ctx)
		if err == nil && before.masterAddr == addr0 && len(before.syncSet) == o.brokers {
			break
		}
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("the slaves did not join the sync state set (last %+v, %v): %w; slave log tail:\n%s",
				before, err, ctx.Err(), logTail(e.brokers[1].log, 2048))
		case <-time.After(20 * time.Millisecond):
		}
	}
	r.oldEpoch = before.epoch
	sw0, err := readSwitches(b0.log)
	if err != nil || len(sw0) == 0 {
		return r, fmt.Errorf("cold start: the broker's switch not found in its log (%v)", err)
	}
	r.coldSwitch = sw0[0].took
	if o.queues != "" {
		began := time.Now()
		if err := e.preloadStore(ctx, addr0); err != nil {
			return r, err
		}
		r.preloaded = time.Since(began)
	}

	// Steady sends, then the signal. With SIGSTOP the election waits for
	// the controller's next scan after the timeout: a random part of a
	// scan interval added to the settle spreads the signal over the
	// scans' phase, which the run's fixed steps would otherwise fix.
	p := startFailoverProducer(ctx, e, body)
	settle := o.settle
	if o.signal == "stop" {
		r.jitter = rand.N(o.scanInterval)
		settle += r.jitter
	}
	select {
	case <-time.After(settle):
	case <-ctx.Done():
		p.halt()
		return r, ctx.Err()
	}
	killed := time.Now()
	timeoutsBefore := e.timeouts.Load()
	if err := b0.signal(o.sig()); err != nil {
		p.halt()
		return r, err
	}
	var after replica
	for {
		after, err = e.replicaInfo(ctx)
		if err == nil && after.masterAddr != "" && after.masterAddr != addr0 && after.epoch > before.epoch {
			break
		}
		select {
		case <-ctx.Done():
			p.halt()
			return r, fmt.Errorf("no new master elected (last %+v, %v): %w; controller log tail:\n%s", after, err, ctx.Err(), logTail(e.ctl.log, 2048))
		case <-time.After(2 * time.Millisecond):
		}
	}
	r.elected = time.Since(killed)
	r.newEpoch = after.epoch
	// The new master's readiness, apart from the producer's policy (which
	// may be waiting out a send to the old master): a send to the
	// elected address every 2 ms until one is accepted.
	for n := 0; ; n++ {
		serr := e.send(ctx, after.masterAddr, body, -1_000_000-n)
		if serr == nil {
			break
		}
		select {
		case <-ctx.Done():
			p.halt()
			return r, fmt.Errorf("the new master %s accepted no send (the last: %v; on a new connection: %v): %w; its log tail:\n%s",
				after.masterAddr, serr, e.sendOnNewConn(after.masterAddr, body), ctx.Err(), logTail(e.brokerLog(after.masterAddr), 2048))
		case <-time.After(2 * time.Millisecond):
		}
	}
	r.accepted = time.Since(killed)
	first, waitErr := p.waitAcceptedAfter(ctx, killed, addr0)
	events := p.halt()
	if waitErr != nil {
		return r, fmt.Errorf("no send accepted after the signal: %w; new master log tail:\n%s", waitErr, logTail(e.brokerLog(after.masterAddr), 2048))
	}
	r.firstSend = first.Sub(killed)
	r.timeouts = int(e.timeouts.Load() - timeoutsBefore)
	gap := gapOf(events, killed, addr0)
	r.failed = gap.failed
	last, err := e.awaitMasterSwitch(ctx, after.masterAddr)
	if err != nil {
		return r, err
	}
	r.newSwitch, r.newStart = last.took, last.start
	return r, nil
}

// preloadStore creates --queues on the master at addr, sends --preload
// messages round robin over them, and waits until every slave has copied
// the topics (topicCount) and replicated and indexed every message
// (commitLogMaxOffset, dispatchBehindBytes), as GET_BROKER_RUNTIME_INFO
// reports them.
func (e *failoverEnv) preloadStore(ctx context.Context, master string) error {
	size, err := e.o.queueSize()
	if err != nil {
		return err
	}
	qs := newQueueSet(size)
	if err := createTopicList(ctx, master, qs.topics, size.perTopic, 2000); err != nil {
		return fmt.Errorf("preload: %w", err)
	}
	if e.o.preload > 0 {
		const producers = 4
		total := size.queues()
		lr, err := runLoad(ctx, master, loadConfig{
			topic: qs.topics[0], queues: total, producers: producers, inflight: 64, bodySize: e.o.body, count: e.o.preload,
			pick: func(idx, n int) (string, int) { return qs.queue((idx + n*producers) % total) },
		})
		if err == nil && lr.Failed > 0 {
			err = fmt.Errorf("%d sends failed, first: %s", lr.Failed, lr.FirstError)
		}
		if err != nil {
			return fmt.Errorf("preload: %w", err)
		}
	}
	var last string
	for {
		caught, why, err := e.slavesCaughtUp(ctx, master)
		if err == nil && caught {
			return nil
		}
		if err != nil {
			why = err.Error()
		}
		last = why
		select {
		case <-ctx.Done():
			return fmt.Errorf("preload: the slaves did not catch up (%s): %w", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// slavesCaughtUp reports whether every broker but the master at master
// holds the master's topics and CommitLog, indexed; why says what is
// missing when not.
func (e *failoverEnv) slavesCaughtUp(ctx context.Context, master string) (bool, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := brokerInfo(ctx, master)
	if err != nil {
		return false, "", err
	}
	for _, addr := range e.addrs {
		if addr == master {
			continue
		}
		s, err := brokerInfo(ctx, addr)
		if err != nil {
			return false, "", err
		}
		mt, _ := strconv.Atoi(m["topicCount"])
		st, _ := strconv.Atoi(s["topicCount"])
		switch {
		case s["commitLogMaxOffset"] != m["commitLogMaxOffset"]:
			return false, fmt.Sprintf("slave %s at offset %s of %s", addr, s["commitLogMaxOffset"], m["commitLogMaxOffset"]), nil
		case s["dispatchBehindBytes"] != "0":
			return false, fmt.Sprintf("slave %s indexing, %s bytes behind", addr, s["dispatchBehindBytes"]), nil
		case st < mt:
			return false, fmt.Sprintf("slave %s has %d of %d topics", addr, st, mt), nil
		}
	}
	return true, "", nil
}

// switchLogWait bounds the wait for a new master's record of its switch:
// the Supervisor logs it once the master Broker's start returned, a
// little after the Broker took its first send (the process's port stays
// open through the switch, so that send can come first).
const switchLogWait = 10 * time.Second

// awaitMasterSwitch reads the log of the broker at addr until it holds a
// start as SYNC_MASTER, and returns that start's record.
func (e *failoverEnv) awaitMasterSwitch(ctx context.Context, addr string) (switchRecord, error) {
	deadline := time.Now().Add(switchLogWait)
	for {
		sw, err := readSwitches(e.brokerLog(addr))
		if err != nil {
			return switchRecord{}, err
		}
		if last, ok := lastMasterSwitch(sw); ok {
			return last, nil
		}
		if time.Now().After(deadline) {
			return switchRecord{}, fmt.Errorf("the new master %s logged no start as SYNC_MASTER within %v", addr, switchLogWait)
		}
		select {
		case <-ctx.Done():
			return switchRecord{}, fmt.Errorf("the new master %s logged no start as SYNC_MASTER: %w", addr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// brokerLog returns the log path of the broker at addr.
func (e *failoverEnv) brokerLog(addr string) string {
	for i, a := range e.addrs {
		if a == addr {
			return e.brokers[i].log
		}
	}
	return ""
}

// sendEvent is one send of the failover producer: when its answer came,
// where it went, and whether it was accepted.
type sendEvent struct {
	at   time.Time
	addr string
	ok   bool
}

// failoverProducer sends at a steady rate, one send at a time, to the
// broker that last accepted one; a failed send moves it to the next
// broker's address.
type failoverProducer struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	events []sendEvent
	wake   chan struct{} // a send was accepted
}

func startFailoverProducer(ctx context.Context, e *failoverEnv, body []byte) *failoverProducer {
	ctx, cancel := context.WithCancel(ctx)
	p := &failoverProducer{cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	go func() {
		defer close(p.done)
		period := time.Duration(float64(time.Second) / e.o.rate)
		tick := time.NewTicker(period)
		defer tick.Stop()
		at := 0
		for n := 0; ; n++ {
			addr := e.addrs[at]
			err := e.send(ctx, addr, body, n)
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			p.events = append(p.events, sendEvent{at: time.Now(), addr: addr, ok: err == nil})
			p.mu.Unlock()
			if err == nil {
				select {
				case p.wake <- struct{}{}:
				default:
				}
			} else {
				at = (at + 1) % len(e.addrs)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// waitAcceptedAfter waits for a send accepted after since by a broker
// other than old and returns when it was answered.
func (p *failoverProducer) waitAcceptedAfter(ctx context.Context, since time.Time, old string) (time.Time, error) {
	for {
		p.mu.Lock()
		for _, ev := range p.events {
			if ev.ok && ev.at.After(since) && ev.addr != old {
				p.mu.Unlock()
				return ev.at, nil
			}
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-p.done:
			return time.Time{}, errors.New("the producer stopped")
		case <-p.wake:
		}
	}
}

// halt stops the producer and returns its sends.
func (p *failoverProducer) halt() []sendEvent {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

// gap is what the producer saw around the signal.
type gap struct {
	before int // sends accepted before the signal
	failed int // sends that failed after the signal, before the first accepted by another broker
	// firstOK is when that first accepted send was answered (zero: none).
	firstOK time.Time
}

// gapOf reads the producer's sends around a signal at killed to the
// master at old.
func gapOf(events []sendEvent, killed time.Time, old string) gap {
	var g gap
	for _, ev := range events {
		switch {
		case !ev.at.After(killed):
			if ev.ok {
				g.before++
			}
		case ev.ok && ev.addr != old:
			g.firstOK = ev.at
			return g
		case !ev.ok:
			g.failed++
		}
	}
	return g
}

// switchRecord is one "broker running as ..." line of a controller-mode
// broker's JSON log: the Supervisor's record of a start in a role.
type switchRecord struct {
	master bool
	epoch  int32
	took   time.Duration
	// start is the startup of the Broker's "broker started" line just
	// before (0: none): the new Broker's own start within took.
	start time.Duration
}

// readSwitches reads the switch records of a broker's log file.
func readSwitches(path string) ([]switchRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read broker log: %w", err)
	}
	defer f.Close()
	return parseSwitches(f)
}

// parseSwitches reads the switch records of a JSON log: lines whose
// message is "broker running as <role>", with the Supervisor's took
// (zerolog's milliseconds) and masterEpoch. Other lines, and lines that
// are not JSON, are skipped.
func parseSwitches(r io.Reader) ([]switchRecord, error) {
	var out []switchRecord
	var start time.Duration // of the last "broker started" line not yet taken
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.Contains(line, []byte(`"broker started"`)) {
			var ev struct {
				Startup *float64 `json:"startup"`
			}
			if err := json.Unmarshal(line, &ev); err == nil && ev.Startup != nil {
				start = time.Duration(*ev.Startup * float64(time.Millisecond))
			}
			continue
		}
		if !bytes.Contains(line, []byte("broker running as ")) {
			continue
		}
		var ev struct {
			Message     string   `json:"message"`
			Master      *bool    `json:"master"`
			MasterEpoch int32    `json:"masterEpoch"`
			Took        *float64 `json:"took"`
		}
		if err := json.Unmarshal(line, &ev); err != nil || ev.Took == nil || ev.Master == nil ||
			!strings.HasPrefix(ev.Message, "broker running as ") {
			continue
		}
		out = append(out, switchRecord{master: *ev.Master, epoch: ev.MasterEpoch,
			took: time.Duration(*ev.Took * float64(time.Millisecond)), start: start})
		start = 0
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read broker log: %w", err)
	}
	return out, nil
}

// lastMasterSwitch returns the record of the last start as master.
func lastMasterSwitch(sw []switchRecord) (switchRecord, bool) {
	for i := len(sw) - 1; i >= 0; i-- {
		if sw[i].master {
			return sw[i], true
		}
	}
	return switchRecord{}, false
}
