package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/remoting"
)

// produceOptions are the flags of `bench produce`.
type produceOptions struct {
	target     targetOptions
	mode       string
	producers  int
	inflight   int
	queues     int
	body       int
	duration   time.Duration
	warmup     time.Duration
	runs       int
	topic      string
	baseline   bool
	baseDur    time.Duration
	clogWriter int
	segSize    int64
	batch      int
}

// inflightFor returns the in-flight bound of a mode: 1 for sync, the flag
// for async.
func (o produceOptions) inflightFor() (int, error) {
	switch o.mode {
	case "sync":
		return 1, nil
	case "async":
		if o.inflight < 1 {
			return 0, fmt.Errorf("--inflight %d: want at least 1", o.inflight)
		}
		return o.inflight, nil
	}
	return 0, fmt.Errorf("--mode %q: want sync or async", o.mode)
}

func newProduceCommand() *cobra.Command {
	var o produceOptions
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Send messages with N pipelining producers over M queues; report msg/s, MB/s and latency percentiles against the CommitLog's own append rate",
		Long: `produce starts a broker on a temporary store (the broker binary unless
--inprocess; or drives --broker), creates a topic with M queues and runs N
producer connections, each keeping up to K SEND_MESSAGE_V2 requests in flight
(--mode sync is K=1). Queues are used round robin. After --warmup it counts
acknowledged sends for --duration and reports msg/s, MB/s of bodies and the
send-to-answer latency percentiles.

In the same run it measures the CommitLog's own append rate (commitlog.Open
and Append from --clog-writers goroutines, same body size, async flush, a
temporary directory on the same disk) before and after the broker run; the
faster of the two is the baseline of the ratio.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runProduce(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	o.target.register(f)
	f.StringVar(&o.mode, "mode", "async", "sync (one request in flight per producer) or async (--inflight per producer)")
	f.IntVarP(&o.producers, "producers", "n", 4, "producer connections")
	f.IntVarP(&o.inflight, "inflight", "k", 32, "requests in flight per producer in async mode")
	f.IntVarP(&o.queues, "queues", "m", 8, "queues of the topic, used round robin")
	f.IntVar(&o.body, "body", 1024, "message body size in bytes")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per run")
	f.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured time before each run")
	f.IntVar(&o.runs, "runs", 3, "runs (each on a fresh broker); the summary gives medians")
	f.StringVar(&o.topic, "topic", "", "topic name (default: a fresh name per run)")
	f.BoolVar(&o.baseline, "baseline", true, "measure the CommitLog append baseline in each run")
	f.DurationVar(&o.baseDur, "baseline-duration", 5*time.Second, "time of each CommitLog baseline measurement")
	f.IntVar(&o.clogWriter, "clog-writers", 0, "goroutines of the CommitLog baseline (default: --producers)")
	f.IntVar(&o.batch, "batch", 1, "messages per send request: above 1, one SEND_BATCH_MESSAGE of that many (a Java producer's send(Collection)); latency is then per batch")
	f.Int64Var(&o.segSize, "clog-segment", 0, "CommitLog segment size of the baseline in bytes (0: the default 1 GiB, as the broker)")
	return cmd
}

// produceRun is one run of `bench produce`.
type produceRun struct {
	load     loadResult
	clogRate float64 // the faster baseline, appends/s (0 when off)
	cpu      cpuUse
}

// cpuUse is the CPU time used in a measured window: by this process (the
// load generator, and the broker too when it runs in-process) and by a
// broker process.
type cpuUse struct {
	self, broker time.Duration
	brokerKnown  bool
}

// perMessage returns the CPU time per acknowledged message of each side
// (broker 0 when unknown).
func (c cpuUse) perMessage(msgs int64) (self, broker time.Duration) {
	if msgs <= 0 {
		return 0, 0
	}
	return c.self / time.Duration(msgs), c.broker / time.Duration(msgs)
}

// perMessageOf returns the CPU time per message of the broker when its
// process is known, else of this process.
func (c cpuUse) perMessageOf(msgs int64) time.Duration {
	self, broker := c.perMessage(msgs)
	if c.brokerKnown {
		return broker
	}
	return self
}

// cpuWhose names whose CPU perMessageOf reports for a target.
func cpuWhose(t *target) string {
	if t.PID > 0 {
		return "broker CPU"
	}
	return "CPU of this process"
}

// cpuMeter reads the CPU counters at the start and end of a window.
type cpuMeter struct {
	pid    int
	s0, b0 time.Duration
	use    cpuUse
	err    error
}

func (m *cpuMeter) mark(start bool) {
	self, err := procCPU("self")
	if err != nil {
		m.err = err
		return
	}
	var broker time.Duration
	if m.pid > 0 {
		if broker, err = procCPU(strconv.Itoa(m.pid)); err != nil {
			m.err = err
			return
		}
	}
	if start {
		m.s0, m.b0 = self, broker
		return
	}
	m.use = cpuUse{self: self - m.s0, broker: broker - m.b0, brokerKnown: m.pid > 0}
}

func runProduce(ctx context.Context, w io.Writer, o produceOptions) error {
	inflight, err := o.inflightFor()
	if err != nil {
		return err
	}
	if o.runs < 1 {
		return fmt.Errorf("--runs %d: want at least 1", o.runs)
	}
	writers := o.clogWriter
	if writers <= 0 {
		writers = o.producers
	}
	batchNote := ""
	if o.batch > 1 {
		batchNote = fmt.Sprintf(" in batches of %d", o.batch)
	}
	fmt.Fprintf(w, "produce: mode %s, %d producers x %d in flight, %d queues, %d B bodies%s, %s measured after %s warmup, %d runs\n",
		o.mode, o.producers, inflight, o.queues, o.body, batchNote, o.duration, o.warmup, o.runs)
	fmt.Fprintf(w, "machine: %s\n", machineLine())
	var runs []produceRun
	for i := range o.runs {
		var r produceRun
		var before, after clogResult
		if o.baseline {
			if before, err = clogAppendRate(ctx, o.target.dir, o.segSize, writers, o.body, o.queues, o.baseDur); err != nil {
				return err
			}
		}
		t, err := startTarget(ctx, o.target)
		if err != nil {
			return err
		}
		if i == 0 {
			fmt.Fprintf(w, "broker: %s at %s\n", t.Kind, t.Addr)
		}
		meter := &cpuMeter{pid: t.PID}
		r.load, err = produceOnce(ctx, t.Addr, o, inflight, i, meter.mark)
		if err == nil {
			err = meter.err
		}
		r.cpu = meter.use
		if cerr := t.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if o.baseline {
			if after, err = clogAppendRate(ctx, o.target.dir, o.segSize, writers, o.body, o.queues, o.baseDur); err != nil {
				return err
			}
			r.clogRate = max(before.Rate, after.Rate)
		}
		fmt.Fprintf(w, "run %d: %s msg/s, %s MB/s, failed %d; latency %s", i+1, fmtNum(r.load.Rate), sig3(r.load.MBps), r.load.Failed, r.load.Latency)
		if o.baseline {
			fmt.Fprintf(w, "; CommitLog %s appends/s (before %s, after %s, %d writers), ratio %.2f",
				fmtNum(r.clogRate), fmtNum(before.Rate), fmtNum(after.Rate), writers, ratio(r.load.Rate, r.clogRate))
		}
		self, brk := r.cpu.perMessage(r.load.Acked)
		if r.cpu.brokerKnown {
			fmt.Fprintf(w, "; CPU per message: load generator %s, broker %s", fmtDur(self), fmtDur(brk))
		} else {
			fmt.Fprintf(w, "; CPU per message (load generator and broker): %s", fmtDur(self))
		}
		fmt.Fprintln(w)
		if r.load.FirstError != "" {
			fmt.Fprintf(w, "  first error: %s\n", r.load.FirstError)
		}
		runs = append(runs, r)
	}
	var t table
	t.add("median of", "msg/s", "MB/s", "p50", "p90", "p99", "p99.9", "CommitLog appends/s", "ratio", "CPU/msg gen", "CPU/msg broker")
	rate := medianOf(runs, func(r produceRun) float64 { return r.load.Rate })
	clog := medianOf(runs, func(r produceRun) float64 { return r.clogRate })
	lat := func(f func(Latency) time.Duration) time.Duration {
		return time.Duration(medianOf(runs, func(r produceRun) float64 { return float64(f(r.load.Latency)) }))
	}
	ratioCell := "-"
	clogCell := "-"
	if o.baseline {
		ratioCell = fmt.Sprintf("%.2f", medianOf(runs, func(r produceRun) float64 { return ratio(r.load.Rate, r.clogRate) }))
		clogCell = fmtNum(clog)
	}
	cpuSelf := time.Duration(medianOf(runs, func(r produceRun) float64 {
		s, _ := r.cpu.perMessage(r.load.Acked)
		return float64(s)
	}))
	cpuBroker := time.Duration(medianOf(runs, func(r produceRun) float64 {
		_, b := r.cpu.perMessage(r.load.Acked)
		return float64(b)
	}))
	brokerCell := "(in gen)"
	if len(runs) > 0 && runs[0].cpu.brokerKnown {
		brokerCell = fmtDur(cpuBroker)
	}
	t.add(fmt.Sprintf("%d runs", len(runs)), rate, medianOf(runs, func(r produceRun) float64 { return r.load.MBps }),
		lat(func(l Latency) time.Duration { return l.P50 }), lat(func(l Latency) time.Duration { return l.P90 }),
		lat(func(l Latency) time.Duration { return l.P99 }), lat(func(l Latency) time.Duration { return l.P999 }),
		clogCell, ratioCell, fmtDur(cpuSelf), brokerCell)
	if err := t.write(w); err != nil {
		return err
	}
	if per := cpuSelf + cpuBroker; per > 0 {
		fmt.Fprintf(w, "CPU-bound ceiling: %s msg/s per busy core (load generator and broker together), %s msg/s on %d idle cores\n",
			fmtNum(float64(time.Second)/float64(per)), fmtNum(float64(runtime.NumCPU())*float64(time.Second)/float64(per)), runtime.NumCPU())
	}
	return nil
}

// produceOnce creates a fresh topic and runs the load once.
func produceOnce(ctx context.Context, addr string, o produceOptions, inflight, run int, onWindow func(bool)) (loadResult, error) {
	topic := o.topic
	if topic == "" {
		topic = fmt.Sprintf("BenchProduce_%d_%d", time.Now().Unix(), run)
	}
	if err := setupTopic(ctx, addr, topic, o.queues); err != nil {
		return loadResult{}, err
	}
	return runLoad(ctx, addr, loadConfig{
		topic: topic, queues: o.queues, producers: o.producers, inflight: inflight,
		bodySize: o.body, warmup: o.warmup, duration: o.duration, onWindow: onWindow, batch: o.batch,
	})
}

// setupTopic creates topic with queues queues on the broker at addr.
func setupTopic(ctx context.Context, addr, topic string, queues int) error {
	c, err := remoting.DialAddr(ctx, addr, remoting.ClientOptions{})
	if err != nil {
		return err
	}
	defer c.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return createTopic(cctx, c, topic, queues)
}
