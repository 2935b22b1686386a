package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// scaleOptions are the flags of `bench scale`.
type scaleOptions struct {
	stores      []string
	sizes       []scaleSize
	messages    int64
	body        int
	producers   int
	inflight    int
	consumers   int
	window      int
	batch       int
	dist        string
	zipfS       float64
	runs        int
	createBatch int
	brokerBin   string
	dir         string
	sets        []string
	budget      time.Duration
	minFree     int64
	namesrv     bool
	pprof       bool
	compact     bool
	seed        uint64
	// fileMaxQueues skips the file layout at larger sizes (0: none).
	fileMaxQueues int
	// idle is how long the restarted broker is left without requests
	// while its CPU time is counted (0: not measured).
	idle time.Duration
}

// scaleSize is one configuration: topics x queues per topic.
type scaleSize struct {
	topics, perTopic int
}

func (s scaleSize) queues() int { return s.topics * s.perTopic }

func (s scaleSize) String() string {
	return fmt.Sprintf("%s (%sx%s)", fmtCount(s.queues()), fmtCount(s.topics), fmtCount(s.perTopic))
}

// parseScaleSizes reads "10x100,1000x100" (topics x queues per topic; k
// and M suffixes allowed).
func parseScaleSizes(s string) ([]scaleSize, error) {
	var out []scaleSize
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		ts, qs, ok := strings.Cut(part, "x")
		if !ok {
			return nil, fmt.Errorf("--sizes: %q is not TOPICSxQUEUES", part)
		}
		t, err := parseQueueCounts(ts)
		if err != nil || len(t) != 1 {
			return nil, fmt.Errorf("--sizes: %q: bad topic count", part)
		}
		q, err := parseQueueCounts(qs)
		if err != nil || len(q) != 1 {
			return nil, fmt.Errorf("--sizes: %q: bad queue count", part)
		}
		out = append(out, scaleSize{topics: t[0], perTopic: q[0]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--sizes: no size in %q", s)
	}
	return out, nil
}

func newScaleCommand() *cobra.Command {
	var o scaleOptions
	var sizes string
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Many queues end to end, KV and file ConsumeQueue side by side: bulk topic creation, produce, consume, RSS, disk, descriptors, mappings, restart after SIGKILL and after a clean stop",
		Long: `scale runs one scenario against the broker binary (bin/broker) for each
ConsumeQueue layout (--stores kv,file, one after the other, --set
storeType=kv|file) and each size (--sizes TOPICSxQUEUES, e.g.
10x100,1000x100,10000x100 for 1k, 100k and 1M queues), each time on a fresh
store:

 1. start the broker, create every topic in bulk (UPDATE_AND_CREATE_TOPIC_LIST,
    --create-batch topics per request);
 2. produce --messages messages of --body bytes from --producers pipelined
    connections (--inflight requests each) to queues drawn uniformly from all
    queues (--dist uniform) or Zipf-skewed (--dist zipf, exponent --zipf-s,
    hot queues scattered over the topics);
 3. wait until the dispatcher has indexed everything (dispatchBehindBytes 0 in
    GET_BROKER_RUNTIME_INFO): "indexed msg/s" counts from the first send to
    that moment;
 4. consume every acknowledged message back: --consumers connections pull
    each touched queue from offset 0 to the end its acknowledgements showed,
    --window pulls in flight per connection, --batch messages per pull, and
    check that every message is in its queue at the expected offset;
 5. read the broker's RSS, open descriptors and mappings from /proc/<pid>
    (sampled every 250 ms for peaks) and the store's disk usage (allocated
    blocks, as du; commitlog, kvindex and consumequeue apart);
 6. SIGKILL the broker and start it again, then stop it cleanly (SIGTERM) and
    start it again; a restart is timed from the start of the process until it
    answers with dispatchBehindBytes 0;
 6a. with --idle D, leave the restarted broker without a request for D and
    count its CPU time (and the name server's with --namesrv): what its
    background work costs with every queue loaded and nothing to do;
 7. stop it, open its index in this process and estimate each keyspace's table
    bytes as the broker left it and (--compact) after a full compaction.

With --namesrv a name server (the namesrv binary beside the broker) runs too:
the broker registers its topic table with it, and the time until the last
created topic has a route, the latency of route lookups and the name
server's RSS and CPU time are reported.

Every phase stops after --budget, and any phase stops when free space under
--dir drops below --min-free; the figures measured up to there are reported
with the reason. The table gives medians over --runs and the ratios kv/file
at each size and kv against kv at the smallest size.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ss, err := parseScaleSizes(sizes)
			if err != nil {
				return err
			}
			o.sizes = ss
			return runScale(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.stores, "stores", []string{storeKV, storeFile}, "ConsumeQueue layouts, run in this order: kv, file")
	f.StringVar(&sizes, "sizes", "10x100", "configurations TOPICSxQUEUES (queues per topic), comma separated; k and M suffixes allowed")
	f.Int64Var(&o.messages, "messages", 200_000, "messages produced and consumed per configuration")
	f.IntVar(&o.body, "body", 100, "message body size in bytes")
	f.IntVarP(&o.producers, "producers", "n", 4, "producer connections")
	f.IntVarP(&o.inflight, "inflight", "k", 64, "send requests in flight per producer")
	f.IntVarP(&o.consumers, "consumers", "c", 4, "consumer connections")
	f.IntVar(&o.window, "window", 256, "pull requests in flight per consumer connection")
	f.IntVar(&o.batch, "batch", 32, "messages per pull (maxMsgNums)")
	f.StringVar(&o.dist, "dist", "uniform", "queue choice per message: uniform or zipf")
	f.Float64Var(&o.zipfS, "zipf-s", 1.1, "Zipf exponent (> 1) of --dist zipf")
	f.IntVar(&o.runs, "runs", 3, "runs of every configuration; the tables give medians")
	f.IntVar(&o.createBatch, "create-batch", 2000, "topics per UPDATE_AND_CREATE_TOPIC_LIST request")
	f.StringVar(&o.brokerBin, "broker-bin", "", "broker binary (default: broker beside this binary, else bin/broker)")
	f.StringVar(&o.dir, "dir", "", "parent directory of the stores (default: the system temp directory)")
	f.StringArrayVar(&o.sets, "broker-set", nil, "broker configuration override key=value (repeatable)")
	f.DurationVar(&o.budget, "budget", 20*time.Minute, "time budget of each phase (produce, indexing, consume, each restart)")
	f.Int64Var(&o.minFree, "min-free", 8<<30, "stop a phase when free disk space under --dir falls below this many bytes")
	f.BoolVar(&o.namesrv, "namesrv", false, "also run a name server and measure registration and route lookups")
	f.BoolVar(&o.pprof, "broker-pprof", false, "start the broker with --pprof on a free port (printed) to profile it while the benchmark runs")
	f.BoolVar(&o.compact, "compact", true, "after the run, also measure the index after a full compaction")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the queue choice")
	f.DurationVar(&o.idle, "idle", 0, "after the clean restart, leave the broker idle this long and report its CPU use (0: skip)")
	f.IntVar(&o.fileMaxQueues, "file-max-queues", 0, "run the file layout only at sizes of at most this many queues (0: at every size); measure larger ones separately with --runs 1")
	return cmd
}

func (o scaleOptions) validate() error {
	for _, s := range o.stores {
		if s != storeKV && s != storeFile {
			return fmt.Errorf("--stores: %q is not kv or file", s)
		}
	}
	switch {
	case len(o.stores) == 0:
		return errors.New("--stores: none")
	case o.messages < 1 || o.body < 1 || o.producers < 1 || o.inflight < 1 || o.consumers < 1 || o.window < 1 || o.batch < 1 || o.runs < 1 || o.createBatch < 1:
		return errors.New("--messages, --body, --producers, --inflight, --consumers, --window, --batch, --runs and --create-batch must be positive")
	case o.dist != "uniform" && o.dist != "zipf":
		return fmt.Errorf("--dist %q: want uniform or zipf", o.dist)
	case o.dist == "zipf" && o.zipfS <= 1:
		return fmt.Errorf("--zipf-s %g: want > 1", o.zipfS)
	case o.budget <= 0:
		return errors.New("--budget must be positive")
	case o.idle < 0 || o.idle >= o.budget:
		return fmt.Errorf("--idle %s: want 0 (skip) or a duration under --budget (%s)", o.idle, o.budget)
	}
	return nil
}

// scaleResult is what one configuration measured in one run.
type scaleResult struct {
	Store string
	Size  scaleSize
	// Stopped says why the run did not complete ("" when it did).
	Stopped string

	FirstStart time.Duration // broker start on the empty store
	Create     time.Duration // bulk creation of every topic

	Produce     loadResult
	Touched     int           // queues that got a message
	Indexed     time.Duration // first send until dispatchBehindBytes 0
	IndexedRate float64
	// ProduceCPU is the broker's CPU time from the first send until
	// everything was indexed, ConsumeCPU while draining: per message they
	// are robust against other load on the machine, unlike the rates.
	ProduceCPU time.Duration
	ConsumeCPU time.Duration
	// ProduceWrites is what the broker wrote to storage over the same
	// window as ProduceCPU (CommitLog, index, ConsumeQueue files).
	ProduceWrites int64
	Consumed      int64
	ConsumeTime   time.Duration
	ConsumeRate   float64
	Pulls         int64
	PullLat       Latency

	AfterProduce procSample
	AfterConsume procSample
	Peak         procSample // largest values seen by the sampler
	Runtime      map[string]string
	Disk         storeUsage

	KillRestart  time.Duration
	CleanStop    time.Duration
	CleanRestart time.Duration
	RestartNote  string
	// IdleCPU is the broker's CPU time over Idle after the clean restart
	// (--idle), IdleNamesrvCPU the name server's.
	Idle           time.Duration
	IdleCPU        time.Duration
	IdleNamesrvCPU time.Duration

	IndexLeft      indexUsage
	IndexCompacted indexUsage
	CompactTime    time.Duration

	Namesrv namesrvResult
}

// complete reports whether every phase ran.
func (r scaleResult) complete() bool { return r.Stopped == "" }

// procWriteBytes reads write_bytes of /proc/<pid>/io: the bytes the process
// caused to be written to storage, counted when it dirties page-cache
// pages (so writes still in the cache count, and a page dirtied again
// before writeback counts again).
func procWriteBytes(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0, fmt.Errorf("read io of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("io of %d: write_bytes %q: %w", pid, v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("io of %d: no write_bytes", pid)
}

// storeUsage is a store's disk usage by part.
type storeUsage struct {
	CommitLog    DiskUsage
	Index        DiskUsage // kvindex/ (Pebble)
	ConsumeQueue DiskUsage // consumequeue/ (file layout)
	Other        DiskUsage
}

// Total is the whole store's allocated bytes.
func (u storeUsage) Total() int64 {
	return u.CommitLog.Allocated + u.Index.Allocated + u.ConsumeQueue.Allocated + u.Other.Allocated
}

func addUsage(a *DiskUsage, b DiskUsage) {
	a.Apparent += b.Apparent
	a.Allocated += b.Allocated
	a.Files += b.Files
	a.Dirs += b.Dirs
	a.Tables += b.Tables
	a.WAL += b.WAL
}

// storeDiskUsage measures a store root by its top-level entries.
func storeDiskUsage(root string) (storeUsage, error) {
	var u storeUsage
	ents, err := os.ReadDir(root)
	if err != nil {
		return u, fmt.Errorf("list store %s: %w", root, err)
	}
	for _, e := range ents {
		d, err := diskUsage(filepath.Join(root, e.Name()))
		if err != nil {
			return u, err
		}
		switch e.Name() {
		case "commitlog":
			addUsage(&u.CommitLog, d)
		case kvindex.DirName:
			addUsage(&u.Index, d)
		case "consumequeue":
			addUsage(&u.ConsumeQueue, d)
		default:
			addUsage(&u.Other, d)
		}
	}
	return u, nil
}

// indexUsage is the Pebble index's table bytes by keyspace group.
type indexUsage struct {
	Measured bool
	CQ       uint64 // 0x10-0x12: entries, minima, journal
	Keys     uint64 // 0x20-0x21: key index and its buckets
	Rest     uint64 // every other keyspace
	Tables   int64  // allocated bytes of *.sst
	WAL      int64  // allocated bytes of the write-ahead logs
}

// freeBytes returns the space available to unprivileged users under path.
func freeBytes(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// errDiskLow stops a run whose store leaves too little free disk.
var errDiskLow = errors.New("free disk space below --min-free")

// monitor samples a broker process every 250 ms for peaks and cancels the
// run when free disk space under dir falls below minFree. Stop ends its
// goroutine and returns the peaks.
type monitor struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak procSample
}

func startMonitor(pid int, dir string, minFree int64, cancel context.CancelCauseFunc) *monitor {
	m := &monitor{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			if s, err := readProc(pid); err == nil {
				m.mu.Lock()
				m.peak.maxWith(s)
				m.mu.Unlock()
			}
			if free, err := freeBytes(dir); err == nil && free < minFree {
				cancel(fmt.Errorf("%w (%s free)", errDiskLow, fmtBytes(free)))
			}
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

// Stop ends the sampling and returns the peaks.
func (m *monitor) Stop() procSample {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

// scaleBroker is the broker process of one configuration, restartable on
// its store.
type scaleBroker struct {
	o       scaleOptions
	store   string
	conf    map[string]string
	t       *target
	mon     *monitor
	peak    procSample
	cancel  context.CancelCauseFunc
	pprofAt string
}

// start runs the broker on its store and waits until it answers with
// nothing left to dispatch. It returns the time that took.
func (b *scaleBroker) start(ctx context.Context) (time.Duration, error) {
	began := time.Now()
	var extra []string
	conf := make(map[string]string, len(b.conf))
	for k, v := range b.conf {
		conf[k] = v
	}
	if b.o.pprof {
		// The broker's ports first, then a profiling port apart from
		// them: a port the system handed out twice would have the broker
		// serve its profiles where it then fails to listen for clients.
		listen, err := brokerPort()
		if err != nil {
			return 0, err
		}
		conf["listenPort"] = strconv.Itoa(listen)
		port, err := freePort()
		for err == nil && port >= listen-2 && port <= listen+1 {
			port, err = freePort()
		}
		if err != nil {
			return 0, err
		}
		b.pprofAt = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		extra = append(extra, "--pprof", b.pprofAt)
	}
	t, err := startProcess(ctx, b.o.brokerBin, b.store, conf, extra...)
	if err != nil {
		return 0, err
	}
	b.t = t
	b.mon = startMonitor(t.PID, b.store, b.o.minFree, b.cancel)
	if err := waitIndexed(ctx, t.Addr); err != nil {
		return 0, err
	}
	return time.Since(began), nil
}

// halt stops the broker, with SIGKILL when kill is set, and returns how
// long it took to exit.
func (b *scaleBroker) halt(kill bool) (time.Duration, error) {
	if b.t == nil {
		return 0, nil
	}
	began := time.Now()
	var err error
	if kill {
		if kerr := syscall.Kill(b.t.PID, syscall.SIGKILL); kerr != nil {
			err = fmt.Errorf("kill broker %d: %w", b.t.PID, kerr)
		}
		_ = b.t.Close() // reports the kill as an exit error
	} else {
		err = b.t.Close()
	}
	took := time.Since(began)
	b.peak.maxWith(b.mon.Stop())
	b.t, b.mon = nil, nil
	return took, err
}

// pid returns the running broker's process id.
func (b *scaleBroker) pid() int { return b.t.PID }

// runtimeInfo asks a broker for GET_BROKER_RUNTIME_INFO.
func runtimeInfo(ctx context.Context, c *remoting.AddrClient) (map[string]string, error) {
	resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.GetBrokerRuntimeInfo, nil, nil))
	if err != nil {
		return nil, fmt.Errorf("runtime info: %w", err)
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("runtime info: code %d %s", resp.Code, resp.Remark)
	}
	table, err := adminbody.DecodeKVTable(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("decode runtime info: %w", err)
	}
	return table, nil
}

// brokerInfo dials the broker and reads its runtime info once.
func brokerInfo(ctx context.Context, addr string) (map[string]string, error) {
	c, err := remoting.DialAddr(ctx, addr, remoting.ClientOptions{})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return runtimeInfo(ctx, c)
}

// waitIndexed polls the broker until its dispatcher has nothing left to
// index (dispatchBehindBytes 0).
func waitIndexed(ctx context.Context, addr string) error {
	c, err := remoting.DialAddr(ctx, addr, remoting.ClientOptions{})
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		info, err := runtimeInfo(ctx, c)
		if err != nil {
			return err
		}
		if info["dispatchBehindBytes"] == "0" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the dispatcher (%s bytes behind): %w", info["dispatchBehindBytes"], context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// createTopicList creates topics of queues queues each in bulk, batch
// topics per UPDATE_AND_CREATE_TOPIC_LIST request.
func createTopicList(ctx context.Context, addr string, topics []string, queues, batch int) error {
	c, err := remoting.DialAddr(ctx, addr, remoting.ClientOptions{})
	if err != nil {
		return err
	}
	defer c.Close()
	for i := 0; i < len(topics); i += batch {
		var body struct {
			TopicConfigList []meta.TopicConfig `json:"topicConfigList"`
		}
		for _, t := range topics[i:min(i+batch, len(topics))] {
			body.TopicConfigList = append(body.TopicConfigList, meta.NewTopicConfig(t, queues))
		}
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode topic list: %w", err)
		}
		resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.UpdateAndCreateTopicList, nil, raw))
		if err != nil {
			return fmt.Errorf("create topics %d..%d: %w", i, i+len(body.TopicConfigList)-1, err)
		}
		if resp.Code != remoting.Success {
			return fmt.Errorf("create topics %d..%d: code %d %s", i, i+len(body.TopicConfigList)-1, resp.Code, resp.Remark)
		}
	}
	return nil
}

// queueSet names every queue of a configuration by a global index
// g = topic index x perTopic + queue id, and tracks the end (max acknowledged
// offset + 1) of each.
type queueSet struct {
	topics   []string
	index    map[string]int
	perTopic int
	ends     []atomic.Int64
}

func newQueueSet(size scaleSize) *queueSet {
	s := &queueSet{perTopic: size.perTopic, index: make(map[string]int, size.topics), ends: make([]atomic.Int64, size.queues())}
	for i := range size.topics {
		t := "Scale" + strconv.Itoa(i)
		s.topics = append(s.topics, t)
		s.index[t] = i
	}
	return s
}

// queue returns the topic and queue id of global index g.
func (s *queueSet) queue(g int) (string, int) { return s.topics[g/s.perTopic], g % s.perTopic }

// acked records an acknowledged send: the queue's end is at least its
// offset + 1.
func (s *queueSet) acked(topic string, q int, resp *remoting.Command) {
	off, err := remoting.Header(resp.ExtFields).Int64("queueOffset")
	if err != nil {
		return
	}
	e := &s.ends[s.index[topic]*s.perTopic+q]
	for {
		cur := e.Load()
		if off+1 <= cur || e.CompareAndSwap(cur, off+1) {
			return
		}
	}
}

// touched counts queues with at least one acknowledged message.
func (s *queueSet) touched() int {
	n := 0
	for i := range s.ends {
		if s.ends[i].Load() > 0 {
			n++
		}
	}
	return n
}

// picker returns the queue choice of the producers: per producer its own
// generator, uniform over all queues or Zipf-distributed over a fixed random
// permutation of them (so the hot queues are spread over the topics).
func picker(o scaleOptions, s *queueSet) func(idx, n int) (string, int) {
	total := len(s.ends)
	if o.dist == "zipf" {
		perm := mrand.New(mrand.NewSource(int64(o.seed))).Perm(total)
		gens := make([]*mrand.Zipf, o.producers)
		for i := range gens {
			r := mrand.New(mrand.NewSource(int64(o.seed) + int64(i) + 1))
			gens[i] = mrand.NewZipf(r, o.zipfS, 1, uint64(total-1))
		}
		return func(idx, _ int) (string, int) { return s.queue(perm[gens[idx].Uint64()]) }
	}
	gens := make([]*rand.Rand, o.producers)
	for i := range gens {
		gens[i] = rand.New(rand.NewPCG(o.seed, uint64(i)+1))
	}
	return func(idx, _ int) (string, int) { return s.queue(gens[idx].IntN(total)) }
}

// drainResult is what draining every queue measured.
type drainResult struct {
	consumed int64
	pulls    int64
	elapsed  time.Duration
	lat      Latency
}

// drainQueues reads every queue of s from offset 0 to its end with pipelined
// pulls and checks each message's place. Unlike consumerSet (which keeps
// one pull in flight on every queue and polls empty queues until it is
// closed), it bounds the pulls in flight per connection and leaves a queue
// once it is read to its end: at a million queues the other way is a
// million outstanding requests and endless empty re-polls.
func drainQueues(ctx context.Context, addr string, s *queueSet, consumers, window, batch int) (drainResult, error) {
	type pos struct {
		g   int32
		off int64
	}
	start := time.Now()
	lat := NewRecorder()
	var consumed, pulls atomic.Int64
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for ci := range consumers {
		var owned []pos
		for g := ci; g < len(s.ends); g += consumers {
			if s.ends[g].Load() > 0 {
				owned = append(owned, pos{g: int32(g)})
			}
		}
		if len(owned) == 0 {
			continue
		}
		c, err := remoting.DialAddr(ctx, addr, remoting.ClientOptions{})
		if err != nil {
			cancel(err)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			todo := make(chan pos, len(owned)) // one entry per queue at most: never full
			for _, p := range owned {
				todo <- p
			}
			remaining := atomic.Int64{}
			remaining.Store(int64(len(owned)))
			finished := make(chan struct{})
			slots := make(chan struct{}, window)
			for {
				var p pos
				select {
				case <-ctx.Done():
					return
				case <-finished:
					return
				case p = <-todo:
				}
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				topic, q := s.queue(int(p.g))
				end := s.ends[p.g].Load()
				sent := time.Now()
				req := pullRequest(topic, q, p.off, batch, false, 0)
				err := c.InvokeAsync(req, func(resp *remoting.Command, err error) {
					lat.Record(time.Since(sent))
					pulls.Add(1)
					defer func() { <-slots }()
					if err != nil {
						cancel(fmt.Errorf("pull %s/%d@%d: %w", topic, q, p.off, err))
						return
					}
					r, err := decodePull(resp)
					if err != nil {
						cancel(fmt.Errorf("pull %s/%d@%d: %w", topic, q, p.off, err))
						return
					}
					if r.code != remoting.Success {
						cancel(fmt.Errorf("pull %s/%d@%d: code %d (next %d) below the acknowledged end %d", topic, q, p.off, r.code, r.nextBegin, end))
						return
					}
					for i, m := range r.msgs {
						if m.Topic != topic || int(m.QueueID) != q || m.QueueOffset != p.off+int64(i) {
							cancel(fmt.Errorf("pull %s/%d@%d: message %d is %s/%d@%d", topic, q, p.off, i, m.Topic, m.QueueID, m.QueueOffset))
							return
						}
					}
					consumed.Add(int64(len(r.msgs)))
					if r.nextBegin < end {
						todo <- pos{p.g, r.nextBegin}
						return
					}
					if remaining.Add(-1) == 0 {
						close(finished)
					}
				})
				if err != nil {
					<-slots
					cancel(fmt.Errorf("pull %s/%d: %w", topic, q, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	res := drainResult{consumed: consumed.Load(), pulls: pulls.Load(), elapsed: time.Since(start), lat: lat.Summary()}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return res, err
	}
	return res, ctx.Err()
}

// namesrvResult is what the name server measured.
type namesrvResult struct {
	On       bool
	Register time.Duration // topics created until the last one has a route
	Route    Latency       // GET_ROUTEINFO_BY_TOPIC
	RSS      int64
	HWM      int64
	CPU      time.Duration
}

// namesrvProc is a name server process.
type namesrvProc struct {
	addr   string
	pid    int
	cmd    *exec.Cmd
	exited chan struct{}
}

// startNamesrv runs the namesrv binary beside the broker binary on a free
// port.
func startNamesrv(ctx context.Context, brokerBin string) (*namesrvProc, error) {
	bb, err := brokerBinary(brokerBin)
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(filepath.Dir(bb), "namesrv")
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(bin, "--listen", addr, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &namesrvProc{addr: addr, pid: cmd.Process.Pid, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	if err := waitListening(ctx, addr, p.exited); err != nil {
		p.stop()
		return nil, fmt.Errorf("name server %s: %w", bin, err)
	}
	return p, nil
}

func (p *namesrvProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// waitRoute polls the name server until topic has a route.
func waitRoute(ctx context.Context, c *remoting.AddrClient, topic string) error {
	for {
		resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil))
		if err != nil {
			return fmt.Errorf("route of %s: %w", topic, err)
		}
		if resp.Code == remoting.Success {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("route of %s: %w", topic, context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// routeLatency times n route lookups of random topics, one at a time.
func routeLatency(ctx context.Context, c *remoting.AddrClient, topics []string, n int) (Latency, error) {
	rec := NewRecorder()
	rng := rand.New(rand.NewPCG(7, 7))
	for range n {
		t := topics[rng.IntN(len(topics))]
		began := time.Now()
		resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": t}, nil))
		if err != nil {
			return rec.Summary(), fmt.Errorf("route of %s: %w", t, err)
		}
		if resp.Code != remoting.Success {
			return rec.Summary(), fmt.Errorf("route of %s: code %d %s", t, resp.Code, resp.Remark)
		}
		rec.Record(time.Since(began))
	}
	return rec.Summary(), nil
}

func runScale(ctx context.Context, w io.Writer, o scaleOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	bin, err := brokerBinary(o.brokerBin)
	if err != nil {
		return err
	}
	o.brokerBin = bin
	if _, err := parseSets(o.sets); err != nil {
		return err
	}
	fmt.Fprintf(w, "scale: %d messages of %d B, %s queues, %d producers x %d in flight, %d consumers x %d pulls of %d, %d runs, budget %s per phase\n",
		o.messages, o.body, o.dist, o.producers, o.inflight, o.consumers, o.window, o.batch, o.runs, o.budget)
	fmt.Fprintf(w, "broker: %s, stores %s, sets %v\n", bin, strings.Join(o.stores, ","), o.sets)
	fmt.Fprintf(w, "machine: %s\n", machineLine())
	type config struct {
		store string
		size  scaleSize
		runs  []scaleResult
	}
	var configs []*config
	for _, s := range o.sizes {
		for _, st := range o.stores {
			if st == storeFile && o.fileMaxQueues > 0 && s.queues() > o.fileMaxQueues {
				continue
			}
			configs = append(configs, &config{store: st, size: s})
		}
	}
	for run := range o.runs {
		for _, c := range configs {
			r, err := scaleOnce(ctx, w, o, c.store, c.size)
			if err != nil {
				return fmt.Errorf("%s at %s, run %d: %w", c.store, c.size, run+1, err)
			}
			c.runs = append(c.runs, r)
			fmt.Fprintf(w, "run %d %s %s: %s\n", run+1, c.store, c.size, scaleLine(r))
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	find := func(store string, s scaleSize) *config {
		for _, c := range configs {
			if c.store == store && c.size == s {
				return c
			}
		}
		return nil
	}
	med := func(c *config, f func(scaleResult) float64) float64 {
		if c == nil {
			return 0
		}
		return medianOf(c.runs, f)
	}
	rateOf := func(r scaleResult) float64 { return r.Produce.Rate }
	indexedOf := func(r scaleResult) float64 { return r.IndexedRate }
	consumeOf := func(r scaleResult) float64 { return r.ConsumeRate }
	base := find(storeKV, o.sizes[0])
	baseName := "vs kv " + fmtCount(o.sizes[0].queues())
	ratioCell := func(a, b float64) string {
		if a == 0 || b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	fmt.Fprintln(w, "\nthroughput (medians; CPU/msg is the broker's CPU time per message from the first send until indexed (in) and while")
	fmt.Fprintln(w, "draining (out); written B/msg is the broker's write_bytes (/proc/<pid>/io) over the same window per message;")
	fmt.Fprintln(w, "kv/file compares the layouts at the same size):")
	var t table
	t.add("store", "queues", "touched", "create", "produce msg/s", "p99 send", baseName, "indexed msg/s", "CPU/msg in", "written B/msg", "consume msg/s", "p99 pull",
		"CPU/msg out", "kv/file produce", "kv/file indexed", "kv/file consume", "complete")
	for _, c := range configs {
		kvc, filec := find(storeKV, c.size), find(storeFile, c.size)
		vsBase, kvFile := "-", [3]string{"-", "-", "-"}
		if c.store == storeKV {
			vsBase = ratioCell(med(c, rateOf), med(base, rateOf))
			if filec != nil {
				kvFile = [3]string{ratioCell(med(kvc, rateOf), med(filec, rateOf)), ratioCell(med(kvc, indexedOf), med(filec, indexedOf)),
					ratioCell(med(kvc, consumeOf), med(filec, consumeOf))}
			}
		}
		t.add(c.store, fmtCount(c.size.queues()), groupThousands(int64(med(c, func(r scaleResult) float64 { return float64(r.Touched) }))),
			time.Duration(med(c, func(r scaleResult) float64 { return float64(r.Create) })),
			med(c, rateOf), time.Duration(med(c, func(r scaleResult) float64 { return float64(r.Produce.Latency.P99) })), vsBase,
			med(c, indexedOf),
			time.Duration(med(c, func(r scaleResult) float64 { return float64(perMsg(r.ProduceCPU, r.Produce.TotalAcked)) })),
			sig3(med(c, func(r scaleResult) float64 { return ratio(float64(r.ProduceWrites), float64(r.Produce.TotalAcked)) })),
			med(c, consumeOf), time.Duration(med(c, func(r scaleResult) float64 { return float64(r.PullLat.P99) })),
			time.Duration(med(c, func(r scaleResult) float64 { return float64(perMsg(r.ConsumeCPU, r.Consumed)) })),
			kvFile[0], kvFile[1], kvFile[2], completeCell(c.runs))
	}
	if err := t.write(w); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nresources (medians; anon = RssAnon (heap), RSS = VmRSS incl. the mapped CommitLog; anon after consuming, peaks over the whole run;")
	fmt.Fprintln(w, "disk allocated after consuming; B/msg per message produced: cq is the ConsumeQueue (kv: its keyspaces after a full compaction,")
	fmt.Fprintln(w, "file: consumequeue/), kvindex the Pebble tables incl. key index and configs, as the broker left them and compacted):")
	var r table
	r.add("store", "queues", "anon", "peak anon", "peak RSS", "peak fds", "peak maps", "commitlog", "kvindex tables", "kvindex WAL", "consumequeue", "cq apparent",
		"cq B/msg", "kvindex B/msg", "compacted", "kill restart", "clean stop", "clean restart", "idle CPU")
	for _, c := range configs {
		m := func(f func(scaleResult) float64) float64 { return med(c, f) }
		msgs := func(x scaleResult) float64 { return float64(x.Produce.TotalAcked) }
		perMsg := func(f func(scaleResult) float64) string {
			return sig3(m(func(x scaleResult) float64 { return ratio(f(x), msgs(x)) }))
		}
		cq := perMsg(func(x scaleResult) float64 {
			if c.store == storeFile {
				return float64(x.Disk.ConsumeQueue.Allocated)
			}
			if x.IndexCompacted.Measured {
				return float64(x.IndexCompacted.CQ)
			}
			return float64(x.IndexLeft.CQ)
		})
		bytesCell := func(f func(scaleResult) int64) string {
			return fmtBytes(int64(m(func(x scaleResult) float64 { return float64(f(x)) })))
		}
		r.add(c.store, fmtCount(c.size.queues()),
			bytesCell(func(x scaleResult) int64 { return x.AfterConsume.Anon }),
			bytesCell(func(x scaleResult) int64 { return x.Peak.Anon }),
			bytesCell(func(x scaleResult) int64 { return x.Peak.HWM }),
			groupThousands(int64(m(func(x scaleResult) float64 { return float64(x.Peak.FDs) }))),
			groupThousands(int64(m(func(x scaleResult) float64 { return float64(x.Peak.Maps) }))),
			bytesCell(func(x scaleResult) int64 { return x.Disk.CommitLog.Allocated }),
			bytesCell(func(x scaleResult) int64 { return x.Disk.Index.Tables }),
			bytesCell(func(x scaleResult) int64 { return x.Disk.Index.WAL }),
			bytesCell(func(x scaleResult) int64 { return x.Disk.ConsumeQueue.Allocated }),
			bytesCell(func(x scaleResult) int64 { return x.Disk.ConsumeQueue.Apparent }),
			cq,
			perMsg(func(x scaleResult) float64 { return float64(x.IndexLeft.Tables) }),
			perMsg(func(x scaleResult) float64 { return float64(x.IndexCompacted.Tables) }),
			restartCell(c.runs, func(x scaleResult) time.Duration { return x.KillRestart }),
			restartCell(c.runs, func(x scaleResult) time.Duration { return x.CleanStop }),
			restartCell(c.runs, func(x scaleResult) time.Duration { return x.CleanRestart }),
			idleCell(c.runs, func(x scaleResult) time.Duration { return x.IdleCPU }))
	}
	if err := r.write(w); err != nil {
		return err
	}
	if o.namesrv {
		fmt.Fprintln(w, "\nname server (medians):")
		var n table
		n.add("store", "queues", "topics", "registered after", "route p50", "route p99", "namesrv RSS", "namesrv peak RSS", "namesrv CPU")
		for _, c := range configs {
			m := func(f func(scaleResult) float64) float64 { return med(c, f) }
			n.add(c.store, fmtCount(c.size.queues()), groupThousands(int64(c.size.topics)),
				time.Duration(m(func(x scaleResult) float64 { return float64(x.Namesrv.Register) })),
				time.Duration(m(func(x scaleResult) float64 { return float64(x.Namesrv.Route.P50) })),
				time.Duration(m(func(x scaleResult) float64 { return float64(x.Namesrv.Route.P99) })),
				fmtBytes(int64(m(func(x scaleResult) float64 { return float64(x.Namesrv.RSS) }))),
				fmtBytes(int64(m(func(x scaleResult) float64 { return float64(x.Namesrv.HWM) }))),
				time.Duration(m(func(x scaleResult) float64 { return float64(x.Namesrv.CPU) })))
		}
		if err := n.write(w); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "limits: vm.max_map_count %d, open files %d\n", readIntFile("/proc/sys/vm/max_map_count"), noFileLimit())
	return nil
}

// perMsg divides a CPU time by a message count (0 for none).
func perMsg(d time.Duration, n int64) time.Duration {
	if n <= 0 {
		return 0
	}
	return d / time.Duration(n)
}

// completeCell says how many runs completed every phase.
func completeCell(runs []scaleResult) string {
	n := 0
	for _, r := range runs {
		if r.complete() {
			n++
		}
	}
	if n == len(runs) {
		return "yes"
	}
	return fmt.Sprintf("%d of %d runs", n, len(runs))
}

// restartCell gives the median of a restart measurement over the runs that
// made it; "failed" when none did.
func restartCell(runs []scaleResult, f func(scaleResult) time.Duration) string {
	var ok []scaleResult
	for _, r := range runs {
		if f(r) > 0 {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return "-"
	}
	cell := fmtDur(time.Duration(medianOf(ok, func(r scaleResult) float64 { return float64(f(r)) })))
	if len(ok) < len(runs) {
		cell += fmt.Sprintf(" (%d of %d)", len(ok), len(runs))
	}
	return cell
}

// idleCell gives the median share of a core used while idle over the runs
// that measured it (--idle); "-" when none did.
func idleCell(runs []scaleResult, f func(scaleResult) time.Duration) string {
	var ok []scaleResult
	for _, r := range runs {
		if r.Idle > 0 {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return "-"
	}
	share := medianOf(ok, func(r scaleResult) float64 { return float64(f(r)) / float64(r.Idle) })
	return fmt.Sprintf("%.2f%%", 100*share)
}

// coreShare formats cpu over wall as a percentage of one core.
func coreShare(cpu, wall time.Duration) string {
	if wall <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(cpu)/float64(wall))
}

// scaleLine summarises one run.
func scaleLine(r scaleResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "start %s, create %s; produced %s (%s msg/s, send %s, failed %d) over %s queues",
		fmtDur(r.FirstStart), fmtDur(r.Create), groupThousands(r.Produce.TotalAcked), fmtNum(r.Produce.Rate),
		r.Produce.Latency, r.Produce.Failed, groupThousands(int64(r.Touched)))
	if r.Indexed > 0 {
		fmt.Fprintf(&b, "; indexed after %s (%s msg/s, broker CPU %s/msg, wrote %s = %s B/msg)", fmtDur(r.Indexed), fmtNum(r.IndexedRate),
			fmtDur(perMsg(r.ProduceCPU, r.Produce.TotalAcked)), fmtBytes(r.ProduceWrites), sig3(ratio(float64(r.ProduceWrites), float64(r.Produce.TotalAcked))))
	}
	if r.Consumed > 0 {
		fmt.Fprintf(&b, "; consumed %s in %s (%s msg/s, broker CPU %s/msg, %s pulls, pull %s)", groupThousands(r.Consumed), fmtDur(r.ConsumeTime),
			fmtNum(r.ConsumeRate), fmtDur(perMsg(r.ConsumeCPU, r.Consumed)), groupThousands(r.Pulls), r.PullLat)
	}
	fmt.Fprintf(&b, "; RSS anon/file %s/%s after producing, %s/%s after consuming, peak anon %s, peak RSS %s; peak fds %d, maps %d",
		fmtBytes(r.AfterProduce.Anon), fmtBytes(r.AfterProduce.File), fmtBytes(r.AfterConsume.Anon), fmtBytes(r.AfterConsume.File),
		fmtBytes(r.Peak.Anon), fmtBytes(r.Peak.HWM), r.Peak.FDs, r.Peak.Maps)
	for _, k := range []string{"queueOffsetsInMemory", "goHeapInuse", "indexDiskUsage", "consumeQueueOpenFiles", "consumeQueueMappings"} {
		if v, ok := r.Runtime[k]; ok {
			fmt.Fprintf(&b, ", %s %s", k, v)
		}
	}
	d := r.Disk
	fmt.Fprintf(&b, "; disk %s: commitlog %s, kvindex %s (tables %s, WAL %s), consumequeue %s allocated / %s apparent in %d files and %d dirs, other %s",
		fmtBytes(d.Total()), fmtBytes(d.CommitLog.Allocated), fmtBytes(d.Index.Allocated), fmtBytes(d.Index.Tables), fmtBytes(d.Index.WAL),
		fmtBytes(d.ConsumeQueue.Allocated), fmtBytes(d.ConsumeQueue.Apparent), d.ConsumeQueue.Files, d.ConsumeQueue.Dirs, fmtBytes(d.Other.Allocated))
	fmt.Fprintf(&b, "; restart after SIGKILL %s, clean stop %s, clean restart %s", fmtDur(r.KillRestart), fmtDur(r.CleanStop), fmtDur(r.CleanRestart))
	if r.RestartNote != "" {
		fmt.Fprintf(&b, " (%s)", r.RestartNote)
	}
	if r.Idle > 0 {
		fmt.Fprintf(&b, "; idle %s: broker CPU %s (%s of a core)", fmtDur(r.Idle), fmtDur(r.IdleCPU), coreShare(r.IdleCPU, r.Idle))
		if r.Namesrv.On {
			fmt.Fprintf(&b, ", name server %s (%s)", fmtDur(r.IdleNamesrvCPU), coreShare(r.IdleNamesrvCPU, r.Idle))
		}
	}
	for _, iu := range []struct {
		name string
		u    indexUsage
	}{{"index as left", r.IndexLeft}, {"index compacted", r.IndexCompacted}} {
		if iu.u.Measured {
			fmt.Fprintf(&b, "; %s: tables %s (cq %s, key index %s, other %s), WAL %s", iu.name, fmtBytes(iu.u.Tables),
				fmtBytes(int64(iu.u.CQ)), fmtBytes(int64(iu.u.Keys)), fmtBytes(int64(iu.u.Rest)), fmtBytes(iu.u.WAL))
		}
	}
	if r.CompactTime > 0 {
		fmt.Fprintf(&b, " (compaction %s)", fmtDur(r.CompactTime))
	}
	if r.Namesrv.On {
		fmt.Fprintf(&b, "; namesrv: route after %s, lookups %s, RSS %s peak %s, CPU %s", fmtDur(r.Namesrv.Register), r.Namesrv.Route,
			fmtBytes(r.Namesrv.RSS), fmtBytes(r.Namesrv.HWM), fmtDur(r.Namesrv.CPU))
	}
	if r.Stopped != "" {
		fmt.Fprintf(&b, "; STOPPED: %s", r.Stopped)
	}
	return b.String()
}

// scaleOnce runs the scenario once for one layout and size on a fresh
// store, which it removes afterwards. Failures of the layout under test
// (budget, disk, a broker that does not come back) end up in Stopped;
// errors of the benchmark itself are returned.
func scaleOnce(ctx context.Context, w io.Writer, o scaleOptions, store string, size scaleSize) (res scaleResult, err error) {
	res = scaleResult{Store: store, Size: size}
	sets, err := parseSets(o.sets)
	if err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp(o.dir, "rocketkv-scale-"+store+"-")
	if err != nil {
		return res, fmt.Errorf("create store: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = fmt.Errorf("remove store %s: %w", dir, rerr)
		}
	}()
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	b := &scaleBroker{o: o, store: dir, cancel: cancelRun, conf: map[string]string{
		"storePathRootDir": dir,
		"brokerIP1":        "127.0.0.1",
		"flushDiskType":    "ASYNC_FLUSH",
		"logLevel":         "warn",
		"namesrvAddr":      "",
		"storeType":        store,
	}}
	for k, v := range sets {
		b.conf[k] = v
	}
	var ns *namesrvProc
	if o.namesrv {
		if ns, err = startNamesrv(ctx, o.brokerBin); err != nil {
			return res, err
		}
		defer ns.stop()
		b.conf["namesrvAddr"] = ns.addr
		res.Namesrv.On = true
	}
	defer func() {
		if _, herr := b.halt(false); herr != nil && res.Stopped == "" {
			res.Stopped = "final stop: " + herr.Error()
		}
	}()
	// phase runs one step within the budget; a failure of the broker
	// under test stops the run and is recorded.
	phase := func(name string, fn func(ctx context.Context) error) bool {
		if res.Stopped != "" {
			return false
		}
		pctx, cancel := context.WithTimeoutCause(runCtx, o.budget, fmt.Errorf("budget %s exceeded", o.budget))
		defer cancel()
		if err := fn(pctx); err != nil {
			if cause := context.Cause(pctx); cause != nil {
				err = fmt.Errorf("%w (%v)", err, cause)
			}
			res.Stopped = name + ": " + err.Error()
			return false
		}
		return true
	}
	qs := newQueueSet(size)

	phase("start", func(ctx context.Context) error {
		d, err := b.start(ctx)
		res.FirstStart = d
		if err == nil && o.pprof {
			fmt.Fprintf(w, "broker pprof: http://%s/debug/pprof/ (pid %d)\n", b.pprofAt, b.pid())
		}
		return err
	})
	phase("create topics", func(ctx context.Context) error {
		began := time.Now()
		err := createTopicList(ctx, b.t.Addr, qs.topics, size.perTopic, o.createBatch)
		res.Create = time.Since(began)
		return err
	})
	if ns != nil {
		phase("name server registration", func(ctx context.Context) error {
			return measureNamesrv(ctx, ns, qs.topics, res.Create, &res.Namesrv)
		})
	}
	var produceStart time.Time
	var cpu0 time.Duration
	brokerCPU := func() time.Duration {
		d, err := procCPU(strconv.Itoa(b.pid()))
		if err != nil {
			return 0
		}
		return d
	}
	var io0 int64
	phase("produce", func(ctx context.Context) error {
		produceStart = time.Now()
		cpu0 = brokerCPU()
		io0, _ = procWriteBytes(b.pid())
		lr, err := runLoad(ctx, b.t.Addr, loadConfig{
			topic: qs.topics[0], queues: size.queues(), producers: o.producers, inflight: o.inflight,
			bodySize: o.body, count: o.messages, pick: picker(o, qs), onAck: qs.acked,
		})
		res.Produce = lr
		res.Touched = qs.touched()
		if err == nil && lr.Failed > 0 {
			err = fmt.Errorf("%d sends failed, first: %s", lr.Failed, lr.FirstError)
		}
		return err
	})
	if b.t != nil {
		if s, err := readProc(b.pid()); err == nil {
			res.AfterProduce = s
		}
	}
	phase("index", func(ctx context.Context) error {
		if err := waitIndexed(ctx, b.t.Addr); err != nil {
			return err
		}
		res.Indexed = time.Since(produceStart)
		res.IndexedRate = float64(res.Produce.TotalAcked) / res.Indexed.Seconds()
		res.ProduceCPU = brokerCPU() - cpu0
		if io1, err := procWriteBytes(b.pid()); err == nil {
			res.ProduceWrites = io1 - io0
		}
		info, err := brokerInfo(ctx, b.t.Addr)
		res.Runtime = info
		return err
	})
	phase("consume", func(ctx context.Context) error {
		c0 := brokerCPU()
		dr, err := drainQueues(ctx, b.t.Addr, qs, o.consumers, o.window, o.batch)
		res.ConsumeCPU = brokerCPU() - c0
		res.Consumed, res.Pulls, res.ConsumeTime, res.PullLat = dr.consumed, dr.pulls, dr.elapsed, dr.lat
		res.ConsumeRate = float64(dr.consumed) / dr.elapsed.Seconds()
		if err == nil && dr.consumed < res.Produce.TotalAcked {
			err = fmt.Errorf("consumed %d of %d acknowledged messages", dr.consumed, res.Produce.TotalAcked)
		}
		return err
	})
	if b.t != nil {
		if s, err := readProc(b.pid()); err == nil {
			res.AfterConsume = s
		}
		if u, err := storeDiskUsage(dir); err == nil {
			res.Disk = u
		} else {
			return res, err
		}
	}
	if ns != nil && b.t != nil {
		if s, err := readProc(ns.pid); err == nil {
			res.Namesrv.RSS, res.Namesrv.HWM = s.RSS, s.HWM
		}
		if cpu, err := procCPU(strconv.Itoa(ns.pid)); err == nil {
			res.Namesrv.CPU = cpu
		}
	}
	phase("restart after SIGKILL", func(ctx context.Context) error {
		if _, err := b.halt(true); err != nil {
			return err
		}
		d, err := b.start(ctx)
		res.KillRestart = d
		return err
	})
	phase("clean stop", func(ctx context.Context) error {
		// A stop that fails (the broker is killed after 60 s) is noted;
		// the restart after it is then a crash recovery again.
		d, err := b.halt(false)
		res.CleanStop = d
		if err != nil {
			res.RestartNote = "clean stop: " + err.Error()
		}
		return nil
	})
	phase("restart after a clean stop", func(ctx context.Context) error {
		d, err := b.start(ctx)
		res.CleanRestart = d
		return err
	})
	if o.idle > 0 {
		phase("idle", func(ctx context.Context) error {
			nsCPU := func() time.Duration {
				if ns == nil {
					return 0
				}
				d, _ := procCPU(strconv.Itoa(ns.pid))
				return d
			}
			c0, n0 := brokerCPU(), nsCPU()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(o.idle):
			}
			res.Idle, res.IdleCPU, res.IdleNamesrvCPU = o.idle, brokerCPU()-c0, nsCPU()-n0
			return nil
		})
	}
	if _, err := b.halt(false); err != nil && res.Stopped == "" {
		res.Stopped = "final stop: " + err.Error()
	}
	res.Peak = b.peak
	res.Peak.maxWith(res.AfterProduce)
	res.Peak.maxWith(res.AfterConsume)
	if res.Stopped == "" || res.Produce.TotalAcked > 0 {
		if err := measureIndex(ctx, dir, o.compact, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// measureNamesrv waits until the name server routes the last created
// topic, then times route lookups.
func measureNamesrv(ctx context.Context, ns *namesrvProc, topics []string, created time.Duration, out *namesrvResult) error {
	c, err := remoting.DialAddr(ctx, ns.addr, remoting.ClientOptions{})
	if err != nil {
		return err
	}
	defer c.Close()
	began := time.Now()
	if err := waitRoute(ctx, c, topics[len(topics)-1]); err != nil {
		return err
	}
	out.Register = created + time.Since(began)
	out.Route, err = routeLatency(ctx, c, topics, 2000)
	return err
}

// measureIndex measures the stopped store's index: its table and WAL
// bytes as the broker left them, then, opened in this process (which
// replays and flushes the WAL), each keyspace's table bytes; with compact,
// again after a full compaction, and the files once it is closed.
func measureIndex(ctx context.Context, store string, compact bool, res *scaleResult) error {
	dir := filepath.Join(store, kvindex.DirName)
	left, err := diskUsage(dir)
	if err != nil {
		return err
	}
	db, err := kvindex.Open(kvindex.Options{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		return fmt.Errorf("open index for measuring: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = db.Close()
		}
	}()
	keyspaces := func(u *indexUsage) error {
		u.Measured = true
		for i := 0; i < 256; i++ {
			p := byte(i)
			n, err := db.KeyspaceDiskUsage(p)
			if err != nil {
				return err
			}
			switch {
			case p >= kvindex.PrefixCQ && p <= kvindex.PrefixCQJournal:
				u.CQ += n
			case p == kvindex.PrefixKeyIndex || p == kvindex.PrefixKeyBucket:
				u.Keys += n
			default:
				u.Rest += n
			}
		}
		return nil
	}
	res.IndexLeft.Tables, res.IndexLeft.WAL = left.Tables, left.WAL
	if err := keyspaces(&res.IndexLeft); err != nil {
		return err
	}
	if !compact {
		return nil
	}
	began := time.Now()
	if err := db.Compact(ctx); err != nil {
		return err
	}
	res.CompactTime = time.Since(began)
	if err := keyspaces(&res.IndexCompacted); err != nil {
		return err
	}
	closed = true
	if err := db.Close(); err != nil {
		return fmt.Errorf("close index after measuring: %w", err)
	}
	after, err := diskUsage(dir)
	if err != nil {
		return err
	}
	res.IndexCompacted.Tables, res.IndexCompacted.WAL = after.Tables, after.WAL
	return nil
}
