package e2e

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// binDir holds the namesrv, broker, proxy and admin binaries the tests start: $ROCKETKV_BIN
// (make test-e2e sets it) or binaries built by TestMain.
var binDir string

// defaultParallel is how many tests run at once unless -parallel says
// otherwise: they spend most of their time waiting (long polls, delay
// levels, lock expiry), so more than the 2 cores' worth overlap well.
const defaultParallel = "6"

func TestMain(m *testing.M) {
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", defaultParallel)
	}
	rlog.SetLogLevel("error")
	binDir = os.Getenv("ROCKETKV_BIN")
	if binDir == "" {
		dir, err := os.MkdirTemp("", "rocketkv-e2e-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, c := range []string{"broker", "namesrv", "proxy", "admin", "controller"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, c), "./cmd/"+c)
			cmd.Dir = ".."
			cmd.Stderr = os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "build", c, err)
				os.Exit(2)
			}
		}
		binDir = dir
		code := m.Run()
		_ = os.RemoveAll(dir)
		goV5.remove()
		os.Exit(code)
	}
	code := m.Run()
	goV5.remove()
	os.Exit(code)
}

// freePort returns a TCP port nothing uses right now, below the kernel's
// ephemeral range: a broker restarted on its port after a kill must not
// find it taken as the local port of some client's outgoing connection
// (CI saw "bind: address already in use" that way).
// portClaims remembers the ports freePort handed out in this process:
// parallel tests choose ports at random, and a port checked free by one
// test is not bound until its process starts, so a second test could be
// given it meanwhile (a broker once failed to bind its fast channel so).
type portClaims struct {
	mu    sync.Mutex
	ports map[int]bool
}

// claim reports whether port was not handed out before, and claims it.
func (c *portClaims) claim(port int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ports[port] {
		return false
	}
	if c.ports == nil {
		c.ports = map[int]bool{}
	}
	c.ports[port] = true
	return true
}

// handedOut is the test binary's one record of the ports it gave out.
var handedOut portClaims

func freePort(t testing.TB) int {
	t.Helper()
	lo := 32768 // Linux's default start of ip_local_port_range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 11000 {
				lo = v
			}
		}
	}
	for range 1000 {
		port := 10000 + rand.IntN(lo-10000)
		if !handedOut.claim(port) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port
	}
	t.Fatal("no free port below the ephemeral range")
	return 0
}

// proc is a started binary whose output goes to a log file kept in the
// test's directory (printed when the test fails).
type proc struct {
	name string
	args []string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, args: args, log: filepath.Join(t.TempDir(), name+".log")}
	p.start(t)
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			if b, err := os.ReadFile(p.log); err == nil {
				lines := strings.Split(string(b), "\n")
				if len(lines) > 60 {
					lines = lines[len(lines)-60:]
				}
				t.Logf("--- last lines of %s log:\n%s", p.name, strings.Join(lines, "\n"))
			}
		}
	})
	return p
}

func (p *proc) start(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(filepath.Join(binDir, p.name), p.args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	// A test binary that dies (a panic skips the cleanups) takes its
	// brokers and name servers with it instead of leaving them running,
	// holding ports and CPU, under the next run. Nothing in this binary
	// locks goroutines to threads, so the forking thread lives as long
	// as the process.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	p.done = make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t testing.TB) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop within 30 s", p.name)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("%s exited with %d after SIGTERM", p.name, code)
	}
}

// kill sends SIGKILL and waits.
func (p *proc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// waitLog waits until the process log contains s.
func (p *proc) waitLog(t testing.TB, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(p.log); err == nil && strings.Contains(string(b), s) {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited while waiting for %q", p.name, s)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not log %q within %v", p.name, s, timeout)
}

// countLog counts the lines of the process log containing s.
func (p *proc) countLog(s string) int {
	f, err := os.Open(p.log)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			n++
		}
	}
	return n
}

// namesrv is a started name server.
type namesrv struct {
	*proc
	addr string
}

func startNamesrv(t testing.TB) *namesrv {
	t.Helper()
	return startNamesrvWith(t)
}

// startNamesrvWith starts a name server with configuration overrides
// (key=value, given as --set).
func startNamesrvWith(t testing.TB, sets ...string) *namesrv {
	t.Helper()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"--listen", addr, "--log-format", "json", "--log-level", "debug"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	p := startProc(t, "namesrv", args...)
	waitListening(t, addr)
	return &namesrv{proc: p, addr: addr}
}

// brokerProc is a started broker.
type brokerProc struct {
	*proc
	addr  string
	store string
	name  string
	// haAddr is the broker's HA port (where its slaves replicate from).
	haAddr string
}

// brokerOpts tune startBroker.
type brokerOpts struct {
	name    string
	cluster string
	store   string
	sets    []string
	// conf is a configuration file given with -c; sets win over it.
	conf string
	// args are more command-line arguments.
	args []string
}

func startBroker(t testing.TB, ns *namesrv, o brokerOpts) *brokerProc {
	t.Helper()
	if o.name == "" {
		o.name = "broker-a"
	}
	if o.cluster == "" {
		o.cluster = "DefaultCluster"
	}
	if o.store == "" {
		o.store = filepath.Join(t.TempDir(), "store-"+o.name)
	}
	port := freePort(t)
	var args []string
	if o.conf != "" {
		args = append(args, "-c", o.conf)
	}
	args = append(args, "-n", ns.addr, "--store", o.store,
		"--set", "brokerName="+o.name, "--set", "brokerClusterName="+o.cluster,
		"--set", fmt.Sprintf("listenPort=%d", port), "--set", "brokerIP1=127.0.0.1",
		"--set", "mappedFileSizeCommitLog=67108864", "--set", "logFormat=json",
		"--set", "registerNameServerPeriod=2000", "--set", "logLevel=debug")
	// The HA port defaults to listenPort+1, which may be another test's
	// port: every broker gets one of its own.
	haPort := 0
	for _, s := range o.sets {
		args = append(args, "--set", s)
		if v, ok := strings.CutPrefix(s, "haListenPort="); ok {
			haPort, _ = strconv.Atoi(v)
		}
	}
	if haPort == 0 {
		haPort = freePort(t)
		args = append(args, "--set", fmt.Sprintf("haListenPort=%d", haPort))
	}
	// So does the fast channel (listenPort-2 by default).
	if !slices.ContainsFunc(o.sets, func(s string) bool { return strings.HasPrefix(s, "fastListenPort=") }) {
		args = append(args, "--set", fmt.Sprintf("fastListenPort=%d", freePort(t)))
	}
	args = append(args, o.args...)
	p := startProc(t, "broker", args...)
	b := &brokerProc{proc: p, addr: fmt.Sprintf("127.0.0.1:%d", port), store: o.store, name: o.name,
		haAddr: fmt.Sprintf("127.0.0.1:%d", haPort)}
	b.waitStarted(t)
	return b
}

// startWithTopic starts a name server and a broker with the default
// options, creates topic with queues on the broker and waits until the
// name server routes it: the setup of most tests.
func startWithTopic(t testing.TB, topic string, queues int) (*namesrv, *brokerProc) {
	t.Helper()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{})
	createTopic(t, b.addr, topic, queues)
	waitRoute(t, ns.addr, topic, b.name)
	return ns, b
}

// waitStarted waits until the broker serves and has registered with the
// name server (clients find its routes).
func (b *brokerProc) waitStarted(t testing.TB) {
	t.Helper()
	b.waitLog(t, "registered with name servers", 30*time.Second)
}

// restart starts the broker again on the same store and port, after it was
// stopped or killed, and waits until it registered again.
func (b *brokerProc) restart(t testing.TB) {
	t.Helper()
	before := b.countLog("registered with name servers")
	b.start(t)
	deadline := time.Now().Add(30 * time.Second)
	for b.countLog("registered with name servers") == before {
		if time.Now().After(deadline) {
			t.Fatal("restarted broker did not register within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitListening waits until addr accepts TCP connections.
func waitListening(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s after 20 s", addr)
}

// collector gathers consumed messages from callbacks.
type collector struct {
	mu   sync.Mutex
	msgs map[string]int // body -> deliveries
	n    int
	ch   chan struct{}
}

func newCollector() *collector {
	return &collector{msgs: map[string]int{}, ch: make(chan struct{}, 1)}
}

func (c *collector) add(body string) {
	c.mu.Lock()
	c.msgs[body]++
	c.n++
	c.mu.Unlock()
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

// waitDistinct waits until n distinct bodies arrived.
func (c *collector) waitDistinct(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		got := len(c.msgs)
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-c.ch:
		case <-deadline:
			t.Fatalf("received %d distinct messages, want %d", got, n)
		}
	}
}

// missingAfter waits up to timeout for every body of want to arrive and
// returns those that did not. Counting distinct bodies is not enough when
// some that were stored but not acknowledged (a send cut by a kill) may
// arrive too: they would make up the count while an acknowledged one is
// still on its way.
func (c *collector) missingAfter(want []string, timeout time.Duration) []string {
	deadline := time.After(timeout)
	for {
		var missing []string
		c.mu.Lock()
		for _, b := range want {
			if c.msgs[b] == 0 {
				missing = append(missing, b)
			}
		}
		c.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-c.ch:
		case <-deadline:
			return missing
		}
	}
}

func (c *collector) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.msgs))
	for k, v := range c.msgs {
		out[k] = v
	}
	return out
}

var instanceSeq atomic.Int64

// uniqueInstance returns a client instance name no other client of this
// process (nor of an earlier run) uses. Broadcasting consumers keep their
// offsets in files under $HOME/.rocketmq_client_go/<group>/<ip>@<instance>;
// they are removed when the test ends (after the consumer's shutdown,
// registered later, wrote them), with the folders above when they are left
// empty.
func uniqueInstance(t testing.TB) string {
	name := fmt.Sprintf("e2e-%d-%d-%d", os.Getpid(), time.Now().UnixNano(), instanceSeq.Add(1))
	t.Cleanup(func() {
		home := os.Getenv("HOME")
		if home == "" {
			return
		}
		dirs, _ := filepath.Glob(filepath.Join(home, ".rocketmq_client_go", "*", "*@"+name))
		for _, d := range dirs {
			_ = os.RemoveAll(d)
			_ = os.Remove(filepath.Dir(d)) // only if empty
			_ = os.Remove(filepath.Dir(filepath.Dir(d)))
		}
	})
	return name
}

// quietConsumer is the part of the Go client's push and pull consumers
// that stopConsumer uses.
type quietConsumer interface {
	Unsubscribe(topic string) error
	Shutdown() error
}

// stopConsumer shuts a Go client consumer down without tripping a race in
// the client: its shutdown closes each process queue's message channel
// while a pull that has just returned messages may still be sending on it
// (process_queue.go's putMessage selects between the closed stop channel
// and the send, and picks the send half the time: "send on closed
// channel" panics the whole test binary). Unsubscribing every topic the
// consumer reads (its own and the group's retry topic) and rebalancing
// first drops those queues from the table shutdown walks; a pull in flight
// on a dropped queue sees it dropped and puts nothing. The second
// rebalance catches a queue a rebalance already running in the client's
// background re-created. A consumer with a namespace keeps its retry
// topic's queues (%RETRY%ns%group: its Unsubscribe puts the namespace in
// front of any name), so it is exposed as before on those. Offsets are persisted before: the client's
// removal of a queue persists that queue's offset and forgets every other
// queue's (offset_store.go's persist keeps only the queues it is given),
// so shutdown would have none left to persist.
func stopConsumer(c quietConsumer, group string, topics ...string) error {
	if p, ok := c.(interface{ PersistConsumerOffset() error }); ok {
		_ = p.PersistConsumerOffset()
	}
	for _, topic := range append([]string{"%RETRY%" + group}, topics...) {
		_ = c.Unsubscribe(topic)
	}
	if r, ok := c.(interface{ Rebalance() }); ok {
		r.Rebalance()
		time.Sleep(200 * time.Millisecond)
		r.Rebalance()
	}
	return c.Shutdown()
}

// subscriptions remembers the topics a consumer subscribed, for
// stopConsumer.
type subscriptions struct {
	group string

	mu     sync.Mutex
	topics []string
}

func (s *subscriptions) add(topic string) {
	s.mu.Lock()
	s.topics = append(s.topics, topic)
	s.mu.Unlock()
}

func (s *subscriptions) stop(c quietConsumer) error {
	s.mu.Lock()
	topics := append([]string(nil), s.topics...)
	s.mu.Unlock()
	return stopConsumer(c, s.group, topics...)
}

// safePushConsumer is a push consumer whose Shutdown is stopConsumer.
type safePushConsumer struct {
	rocketmq.PushConsumer
	subs subscriptions
}

// Subscribe subscribes and remembers the topic for Shutdown.
func (c *safePushConsumer) Subscribe(topic string, sel consumer.MessageSelector,
	f func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)) error {
	c.subs.add(topic)
	return c.PushConsumer.Subscribe(topic, sel, f)
}

// Shutdown stops the consumer with stopConsumer, an orderly one with the
// client's Shutdown: its queues put nothing on the channel shutdown
// closes, and its shutdown unlocks only the queues still in its table, so
// stopConsumer would leave the broker's locks to expire (60 s in which
// another consumer of the group locks nothing and send-backs of the group
// go to the DLQ).
func (c *safePushConsumer) Shutdown() error {
	if consumesOrderly(c.PushConsumer) {
		return c.PushConsumer.Shutdown()
	}
	return c.subs.stop(c.PushConsumer)
}

// consumesOrderly reports whether a Go client push consumer consumes
// orderly, read from the client's unexported
// defaultConsumer.consumeOrderly (false if the client changes shape).
func consumesOrderly(c rocketmq.PushConsumer) bool {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return false
	}
	dc := v.Elem().FieldByName("defaultConsumer")
	if !dc.IsValid() || dc.Kind() != reflect.Pointer || dc.IsNil() {
		return false
	}
	f := dc.Elem().FieldByName("consumeOrderly")
	return f.IsValid() && f.Kind() == reflect.Bool && f.Bool()
}

// safePullConsumer is a pull consumer whose Shutdown is stopConsumer.
type safePullConsumer struct {
	rocketmq.PullConsumer
	subs subscriptions
}

// Subscribe subscribes and remembers the topic for Shutdown.
func (c *safePullConsumer) Subscribe(topic string, sel consumer.MessageSelector) error {
	c.subs.add(topic)
	return c.PullConsumer.Subscribe(topic, sel)
}

// Shutdown stops the consumer with stopConsumer.
func (c *safePullConsumer) Shutdown() error { return c.subs.stop(c.PullConsumer) }
