package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/kvindex"
)

// lagOptions are the flags of `bench dispatch-lag`.
type lagOptions struct {
	writers  int
	queues   int
	perTopic int
	body     int
	duration time.Duration
	warmup   time.Duration
	runs     int
	dir      string
	baseline bool
	sample   int
	segSize  int64
	rate     float64
	metrics  bool
	keyIndex bool
	maxLag   int64
	admitFor time.Duration
}

func newDispatchLagCommand() *cobra.Command {
	var o lagOptions
	cmd := &cobra.Command{
		Use:   "dispatch-lag",
		Short: "Append to the CommitLog at full rate with the KV dispatcher running; report dispatch lag (ms and bytes) against the append rate without it",
		Long: `dispatch-lag wires a CommitLog, the Pebble index, the KV ConsumeQueue,
queue offsets and the dispatcher as the broker does, on a temporary store.
--writers goroutines append messages of --body bytes as fast as they can,
round robin over --queues queues, assigning queue offsets as the broker's
send path does. Every --sample-th append notes its end offset and time; the
time until Dispatched() passes that end is its dispatch lag. Dispatcher.Lag()
(bytes appended, not yet indexed) is sampled every 10 ms. Figures after
--warmup are the steady state. The baseline is the same appends on a
CommitLog alone (no index, no dispatcher) measured in the same run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDispatchLag(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.writers, "writers", "w", 4, "appending goroutines")
	f.IntVarP(&o.queues, "queues", "m", 1000, "queues (topics of --queues-per-topic queues)")
	f.IntVar(&o.perTopic, "queues-per-topic", 8, "queues per topic")
	f.IntVar(&o.body, "body", 1024, "message body size in bytes")
	f.DurationVar(&o.duration, "duration", 15*time.Second, "measured time per run")
	f.DurationVar(&o.warmup, "warmup", 3*time.Second, "unmeasured time before each run")
	f.IntVar(&o.runs, "runs", 3, "runs; the summary gives medians")
	f.StringVar(&o.dir, "dir", "", "parent directory of the temporary stores (default: the system temp directory)")
	f.BoolVar(&o.baseline, "baseline", true, "measure the append rate without the index in each run")
	f.IntVar(&o.sample, "sample", 64, "track the dispatch time of every n-th append")
	f.Int64Var(&o.segSize, "segment", 0, "CommitLog segment size in bytes (0: the default 1 GiB)")
	f.Float64Var(&o.rate, "rate", 0, "total appends per second (0: as fast as the writers can)")
	f.BoolVar(&o.keyIndex, "key-index", true, "index KEYS and UNIQ_KEY as the broker does by default (false: messageIndexEnable=false)")
	f.Int64Var(&o.maxLag, "max-lag-bytes", configs.DefaultMaxDispatchLagBytes, "writers wait while dispatch is more than this many bytes behind, as the broker's send path does (maxDispatchLagBytes; 0: never)")
	f.DurationVar(&o.admitFor, "admit-wait", 200*time.Millisecond, "longest such wait before an append counts as refused (the broker answers SYSTEM_BUSY)")
	f.BoolVar(&o.metrics, "pebble-metrics", false, "print Pebble's metrics (write stalls, compactions, levels) after each run")
	return cmd
}

// lagRun is one run of `bench dispatch-lag`.
type lagRun struct {
	appendRate   float64 // with the dispatcher
	baseRate     float64 // CommitLog alone (0 when off)
	dispatchRate float64 // records indexed per second in the window
	lag          Latency // append to dispatched
	lagBytesP50  int64
	lagBytesP99  int64
	lagBytesMax  int64
	refused      int64         // appends refused after waiting --admit-wait for dispatch
	stalls       int64         // Pebble write stalls during the run
	stalled      time.Duration // their total length
	drain        time.Duration // after the appends stopped, until lag 0
	catchUp      float64       // records indexed per second while draining (0 when nothing was left)
}

func runDispatchLag(ctx context.Context, w io.Writer, o lagOptions) error {
	if o.writers < 1 || o.queues < 1 || o.perTopic < 1 || o.body < 1 || o.runs < 1 || o.sample < 1 || o.duration <= 0 || o.rate < 0 {
		return errors.New("dispatch-lag: --writers, --queues, --queues-per-topic, --body, --runs, --sample and --duration must be positive, --rate not negative")
	}
	pace := "full rate"
	if o.rate > 0 {
		pace = fmtNum(o.rate) + " appends/s"
	}
	index := "key index on"
	if !o.keyIndex {
		index = "key index off"
	}
	bound := "no lag bound"
	if o.maxLag > 0 {
		bound = "lag bound " + fmtBytes(o.maxLag)
	}
	fmt.Fprintf(w, "dispatch-lag: %d writers at %s, %d queues (%d per topic), %d B bodies, %s, %s, %s measured after %s warmup, %d runs\n",
		o.writers, pace, o.queues, o.perTopic, o.body, index, bound, o.duration, o.warmup, o.runs)
	fmt.Fprintf(w, "machine: %s\n", machineLine())
	var runs []lagRun
	for i := range o.runs {
		var r lagRun
		if o.baseline {
			base, err := clogAppendRate(ctx, o.dir, o.segSize, o.writers, o.body, o.queues, o.duration)
			if err != nil {
				return err
			}
			r.baseRate = base.Rate
		}
		if err := lagOnce(ctx, w, o, &r); err != nil {
			return err
		}
		fmt.Fprintf(w, "run %d: appends %s/s with dispatch", i+1, fmtNum(r.appendRate))
		if o.baseline {
			fmt.Fprintf(w, " (%s/s CommitLog alone, ratio %.2f)", fmtNum(r.baseRate), ratio(r.appendRate, r.baseRate))
		}
		fmt.Fprintf(w, ", dispatched %s records/s; lag %s; lag bytes p50 %s p99 %s max %s; %d appends refused; %d Pebble write stalls (%s); drained %s after the appends stopped",
			fmtNum(r.dispatchRate), r.lag, fmtBytes(r.lagBytesP50), fmtBytes(r.lagBytesP99), fmtBytes(r.lagBytesMax), r.refused, r.stalls, fmtDur(r.stalled), fmtDur(r.drain))
		if r.catchUp > 0 {
			fmt.Fprintf(w, " (%s records/s with no appends)", fmtNum(r.catchUp))
		}
		fmt.Fprintln(w)
		runs = append(runs, r)
	}
	var t table
	t.add("median of", "appends/s", "alone/s", "ratio", "dispatched/s", "lag p50", "lag p99", "lag p99.9", "lag max", "lag bytes p99")
	med := func(f func(lagRun) float64) float64 { return medianOf(runs, f) }
	dur := func(f func(lagRun) time.Duration) time.Duration {
		return time.Duration(med(func(r lagRun) float64 { return float64(f(r)) }))
	}
	t.add(fmt.Sprintf("%d runs", len(runs)), med(func(r lagRun) float64 { return r.appendRate }),
		med(func(r lagRun) float64 { return r.baseRate }),
		fmt.Sprintf("%.2f", med(func(r lagRun) float64 { return ratio(r.appendRate, r.baseRate) })),
		med(func(r lagRun) float64 { return r.dispatchRate }),
		dur(func(r lagRun) time.Duration { return r.lag.P50 }), dur(func(r lagRun) time.Duration { return r.lag.P99 }),
		dur(func(r lagRun) time.Duration { return r.lag.P999 }), dur(func(r lagRun) time.Duration { return r.lag.Max }),
		fmtBytes(int64(med(func(r lagRun) float64 { return float64(r.lagBytesP99) }))))
	return t.write(w)
}

// lagStack is a CommitLog with the index and dispatcher wired as the
// broker wires them.
type lagStack struct {
	log     *commitlog.Log
	db      *kvindex.DB
	offsets *kvindex.QueueOffsets
	disp    *kvindex.Dispatcher
}

func openLagStack(root string, segSize int64, keyIndex bool, maxLag int64) (*lagStack, error) {
	db, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(root, kvindex.DirName), Logger: zerolog.Nop()})
	if err != nil {
		return nil, err
	}
	cfg := commitlog.DefaultConfig(root)
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	if segSize > 0 {
		cfg.SegmentSize = segSize
	}
	l, err := commitlog.Open(cfg)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open commitlog: %w", err)
	}
	s := &lagStack{log: l, db: db}
	store := db.ConsumeQueue(0)
	s.offsets = kvindex.NewQueueOffsets(store, 0, zerolog.Nop())
	s.disp, err = kvindex.NewDispatcher(kvindex.DispatcherOptions{
		Log: l, DB: db, Store: store, Offsets: s.offsets, Notifier: kvindex.NewNotifier(), Logger: zerolog.Nop(),
		SkipKeyIndex: !keyIndex, MaxLagBytes: maxLag,
	})
	if err == nil {
		_, err = s.disp.Recover()
	}
	if err != nil {
		_ = l.Close()
		_ = db.Close()
		return nil, err
	}
	s.disp.Start()
	return s, nil
}

func (s *lagStack) close() error {
	return errors.Join(s.disp.Close(), s.log.Close(), s.db.Close())
}

// lagSample is one tracked append.
type lagSample struct {
	end int64
	at  time.Time
}

func lagOnce(ctx context.Context, w io.Writer, o lagOptions, r *lagRun) error {
	root, err := os.MkdirTemp(o.dir, "rocketkv-bench-lag-")
	if err != nil {
		return fmt.Errorf("dispatch-lag: %w", err)
	}
	defer os.RemoveAll(root)
	s, err := openLagStack(root, o.segSize, o.keyIndex, o.maxLag)
	if err != nil {
		return fmt.Errorf("dispatch-lag: %w", err)
	}
	defer s.close()
	g := newEntryGen(o.queues, o.perTopic)
	body := make([]byte, o.body)
	born := netip.MustParseAddrPort("127.0.0.1:50000")
	unix.Sync()

	var (
		measuring atomic.Bool
		appended  atomic.Int64
		refused   atomic.Int64
		stop      = make(chan struct{})
		samples   = make(chan lagSample, 1<<16)
		lat       = NewRecorder()
		lagBytes  []int64 // Lag() every 10 ms while measuring
		recBytes  atomic.Int64
		wg        sync.WaitGroup
		errMu     sync.Mutex
		firstErr  error
	)
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}
	var interval time.Duration
	if o.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(o.writers) / o.rate)
	}
	start := time.Now()
	for wi := range o.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := start.Add(interval * time.Duration(wi) / time.Duration(o.writers))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if interval > 0 {
					if d := time.Until(next); d > 0 {
						t := time.NewTimer(d)
						select {
						case <-stop:
							t.Stop()
							return
						case <-t.C:
						}
					}
					next = next.Add(interval)
				}
				if err := s.disp.Admit(ctx, o.admitFor); errors.Is(err, kvindex.ErrDispatchBehind) {
					if measuring.Load() {
						refused.Add(1)
					}
					continue // a client would retry
				} else if err != nil {
					fail(err)
					return
				}
				q := (wi + n*o.writers) % o.queues
				topic, qid := g.queue(q)
				m := &commitlog.Message{
					Topic: topic, QueueID: qid, BornTimestamp: time.Now().UnixMilli(), BornHost: born, Body: body,
					Properties: "TAGS\x01" + benchTag + "\x02UNIQ_KEY\x01BENCH" + strconv.Itoa(wi) + "-" + strconv.Itoa(n) +
						"\x02CLUSTER\x01DefaultCluster\x02",
				}
				if err := s.offsets.Acquire(topic, qid); err != nil {
					fail(err)
					return
				}
				res, err := s.log.Append(ctx, commitlog.AppendRequest{Message: m, Assigner: s.offsets})
				s.offsets.Release(topic, qid)
				if err != nil {
					fail(fmt.Errorf("append: %w", err))
					return
				}
				if measuring.Load() {
					appended.Add(1)
				}
				recBytes.Store(res.WroteBytes)
				if n%o.sample == 0 {
					select {
					case samples <- lagSample{end: res.PhyOffset + res.WroteBytes, at: time.Now()}:
					default: // the tracker is behind: skip this sample
					}
				}
			}
		}()
	}
	// The tracker waits for each sample's end to be dispatched.
	tracked := make(chan struct{})
	go func() {
		defer close(tracked)
		for smp := range samples {
			if err := s.disp.WaitFor(ctx, smp.end); err != nil {
				fail(fmt.Errorf("wait for dispatch: %w", err))
				for range samples { // drain so writers never block
				}
				return
			}
			if measuring.Load() {
				lat.Record(time.Since(smp.at))
			}
		}
	}()
	// The sampler reads the lag in bytes every 10 ms.
	sampled := make(chan struct{})
	samplerStop := make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-samplerStop:
				return
			case <-tk.C:
				if measuring.Load() {
					lagBytes = append(lagBytes, s.disp.Lag())
				}
			}
		}
	}()

	sleep(ctx, o.warmup)
	d0, t0 := s.disp.Dispatched(), time.Now()
	measuring.Store(true)
	sleep(ctx, o.duration)
	measuring.Store(false)
	elapsed := time.Since(t0)
	d1 := s.disp.Dispatched()
	close(stop)
	wg.Wait()
	stopped := time.Now()
	left := s.disp.Lag()
	close(samples)
	<-tracked
	close(samplerStop)
	<-sampled
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.disp.CatchUp(cctx); err != nil {
		return fmt.Errorf("dispatch-lag: catch up: %w", err)
	}
	r.drain = time.Since(stopped)
	r.stalls, r.stalled = s.db.WriteStalls()
	if o.metrics {
		fmt.Fprintf(w, "pebble metrics after the run:\n%s\n", s.db.Metrics())
	}
	if left > 0 && recBytes.Load() > 0 {
		r.catchUp = float64(left) / float64(recBytes.Load()) / r.drain.Seconds()
	}
	if firstErr != nil {
		return fmt.Errorf("dispatch-lag: %w", firstErr)
	}
	r.appendRate = float64(appended.Load()) / elapsed.Seconds()
	r.refused = refused.Load()
	// Records are all about the same size: the dispatched bytes over the
	// size of one record give the records indexed.
	r.dispatchRate = ratio(float64(d1-d0), float64(recBytes.Load())) / elapsed.Seconds()
	r.lag = lat.Summary()
	slices.Sort(lagBytes)
	r.lagBytesP50, r.lagBytesP99, r.lagBytesMax = percentile(lagBytes, 50), percentile(lagBytes, 99), percentile(lagBytes, 100)
	return ctx.Err()
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
