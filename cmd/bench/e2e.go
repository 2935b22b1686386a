package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
)

// e2eOptions are the flags of `bench e2e-latency`.
type e2eOptions struct {
	target   targetOptions
	rate     float64
	fraction float64
	probe    time.Duration
	// probeConsumers makes the probe's maximum the rate long-polling
	// consumers take the probe topic at while producers send flat out.
	probeConsumers bool
	producers      int
	inflight       int
	queues         int
	consumers      int
	body           int
	duration       time.Duration
	warmup         time.Duration
	runs           int
}

func newE2ELatencyCommand() *cobra.Command {
	var o e2eOptions
	cmd := &cobra.Command{
		Use:   "e2e-latency",
		Short: "Producers at a fixed rate and long-polling consumers; report produce-to-consume latency percentiles",
		Long: `e2e-latency starts a broker on a temporary store (or drives --broker). Unless
--rate is given it first measures the maximum async produce rate on a probe
topic for --probe, and sends at --fraction of it (half by default); with
--probe-consumers the maximum is instead the rate at which long-polling
consumers take the probe topic while the producers send flat out (the most
the machine produces and consumes at once, at most the produce rate). Producers
pace their sends to the rate; each body carries its send time (UnixNano, the
first 8 bytes). Long-polling consumers (suspend flag, one pull in flight per
queue) take the latency of every message as the time its pull response was
decoded minus its send time, on the same machine clock. Messages sent in the
--warmup are not counted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runE2E(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	o.target.register(f)
	f.Float64Var(&o.rate, "rate", 0, "send rate in msg/s (0: --fraction of the rate measured by a probe in the same run)")
	f.Float64Var(&o.fraction, "fraction", 0.5, "fraction of the probed maximum rate to send at")
	f.DurationVar(&o.probe, "probe", 5*time.Second, "duration of the maximum-rate probe")
	f.BoolVar(&o.probeConsumers, "probe-consumers", false, "probe the maximum with consumers on the probe topic: the rate they consume at while producers send flat out")
	f.IntVarP(&o.producers, "producers", "n", 4, "producer connections")
	f.IntVarP(&o.inflight, "inflight", "k", 32, "requests in flight per producer (the probe's pipelining and the paced producers' bound)")
	f.IntVarP(&o.queues, "queues", "m", 8, "queues of the topic")
	f.IntVarP(&o.consumers, "consumers", "c", 4, "consumer connections")
	f.IntVar(&o.body, "body", 1024, "message body size in bytes")
	f.DurationVar(&o.duration, "duration", 20*time.Second, "measured time per run")
	f.DurationVar(&o.warmup, "warmup", 3*time.Second, "unmeasured time before each run")
	f.IntVar(&o.runs, "runs", 3, "runs (each on a fresh broker); the summary gives medians")
	return cmd
}

// e2eRun is one run of `bench e2e-latency`.
type e2eRun struct {
	maxRate float64 // probed (0 when --rate was given)
	// probeProduced is the probe's produce rate when consumers took part
	// (maxRate is then what they consumed).
	probeProduced float64
	target        float64
	achieved      float64
	e2e           Latency
	send          Latency
	// cpu is the CPU used in the paced window; acked the sends answered
	// in it.
	cpu   cpuUse
	acked int64
}

func runE2E(ctx context.Context, w io.Writer, o e2eOptions) error {
	if o.runs < 1 {
		return fmt.Errorf("--runs %d: want at least 1", o.runs)
	}
	if o.rate < 0 || (o.rate == 0 && (o.fraction <= 0 || o.fraction > 1)) {
		return fmt.Errorf("--rate %g, --fraction %g: want a rate > 0 or a fraction in (0, 1]", o.rate, o.fraction)
	}
	fmt.Fprintf(w, "e2e-latency: %d producers, %d queues, %d consumers (long polling), %d B bodies, %s measured after %s warmup, %d runs\n",
		o.producers, o.queues, o.consumers, o.body, o.duration, o.warmup, o.runs)
	fmt.Fprintf(w, "machine: %s\n", machineLine())
	var runs []e2eRun
	for i := range o.runs {
		t, err := startTarget(ctx, o.target)
		if err != nil {
			return err
		}
		if i == 0 {
			fmt.Fprintf(w, "broker: %s at %s\n", t.Kind, t.Addr)
		}
		r, err := e2eOnce(ctx, t.Addr, t.PID, o, i)
		if cerr := t.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "run %d: ", i+1)
		if r.probeProduced > 0 {
			fmt.Fprintf(w, "probed max %s msg/s consumed while %s msg/s were produced, ", fmtNum(r.maxRate), fmtNum(r.probeProduced))
		} else if r.maxRate > 0 {
			fmt.Fprintf(w, "probed max %s msg/s, ", fmtNum(r.maxRate))
		}
		fmt.Fprintf(w, "target %s msg/s, achieved %s msg/s; produce-to-consume %s; send %s",
			fmtNum(r.target), fmtNum(r.achieved), r.e2e, r.send)
		self, brk := r.cpu.perMessage(r.acked)
		if r.cpu.brokerKnown {
			fmt.Fprintf(w, "; CPU per message: load generator %s, broker %s", fmtDur(self), fmtDur(brk))
		} else {
			fmt.Fprintf(w, "; CPU per message (load generator and broker): %s", fmtDur(self))
		}
		fmt.Fprintln(w)
		runs = append(runs, r)
	}
	var t table
	t.add("median of", "max msg/s", "rate msg/s", "e2e p50", "e2e p90", "e2e p99", "e2e p99.9", "e2e max", "send p99", "CPU/msg gen", "CPU/msg broker")
	med := func(f func(e2eRun) time.Duration) time.Duration {
		return time.Duration(medianOf(runs, func(r e2eRun) float64 { return float64(f(r)) }))
	}
	brokerCell := "(in gen)"
	if len(runs) > 0 && runs[0].cpu.brokerKnown {
		brokerCell = fmtDur(med(func(r e2eRun) time.Duration { _, b := r.cpu.perMessage(r.acked); return b }))
	}
	maxCell := "-"
	if o.rate == 0 {
		maxCell = fmtNum(medianOf(runs, func(r e2eRun) float64 { return r.maxRate }))
	}
	t.add(fmt.Sprintf("%d runs", len(runs)), maxCell, medianOf(runs, func(r e2eRun) float64 { return r.achieved }),
		med(func(r e2eRun) time.Duration { return r.e2e.P50 }), med(func(r e2eRun) time.Duration { return r.e2e.P90 }),
		med(func(r e2eRun) time.Duration { return r.e2e.P99 }), med(func(r e2eRun) time.Duration { return r.e2e.P999 }),
		med(func(r e2eRun) time.Duration { return r.e2e.Max }), med(func(r e2eRun) time.Duration { return r.send.P99 }),
		fmtDur(med(func(r e2eRun) time.Duration { s, _ := r.cpu.perMessage(r.acked); return s })), brokerCell)
	return t.write(w)
}

// e2eOnce runs one measurement against the broker at addr, whose process
// is pid when the benchmark started it (0: unknown; its CPU is then not
// reported).
func e2eOnce(ctx context.Context, addr string, pid int, o e2eOptions, run int) (e2eRun, error) {
	var r e2eRun
	r.target = o.rate
	stamp := time.Now().Unix()
	if o.rate == 0 {
		probe := fmt.Sprintf("BenchProbe_%d_%d", stamp, run)
		if err := setupTopic(ctx, addr, probe, o.queues); err != nil {
			return r, err
		}
		var err error
		if r.maxRate, r.probeProduced, err = probeMaxRate(ctx, addr, probe, o); err != nil {
			return r, err
		}
		r.target = r.maxRate * o.fraction
	}
	topic := fmt.Sprintf("BenchE2E_%d_%d", stamp, run)
	if err := setupTopic(ctx, addr, topic, o.queues); err != nil {
		return r, err
	}
	lat := NewRecorder()
	var from, to atomic.Int64 // measured send-time window, UnixNano
	from.Store(time.Now().Add(time.Hour).UnixNano())
	to.Store(1<<63 - 1)
	cs, err := startConsumers(ctx, addr, consumerConfig{
		topic: topic, queues: o.queues, consumers: o.consumers, batch: 32,
		suspend: true, suspendFor: 15 * time.Second,
		onMessages: func(msgs []commitlog.Message, at time.Time) {
			lo, hi := from.Load(), to.Load()
			for i := range msgs {
				if len(msgs[i].Body) < 8 {
					continue
				}
				sent := int64(binary.BigEndian.Uint64(msgs[i].Body))
				if sent >= lo && sent <= hi {
					lat.Record(at.Sub(time.Unix(0, sent)))
				}
			}
		},
	})
	if err != nil {
		return r, err
	}
	defer cs.Close()
	// The load measures its own window after the warm-up; the consumers
	// count messages sent in the same window.
	start := time.Now()
	from.Store(start.Add(o.warmup).UnixNano())
	to.Store(start.Add(o.warmup + o.duration).UnixNano())
	meter := &cpuMeter{pid: pid}
	res, err := runLoad(ctx, addr, loadConfig{
		topic: topic, queues: o.queues, producers: o.producers, inflight: o.inflight,
		bodySize: o.body, rate: r.target, warmup: o.warmup, duration: o.duration, stampBody: true,
		onWindow: meter.mark,
	})
	if err == nil {
		err = meter.err
	}
	if err != nil {
		return r, err
	}
	r.cpu, r.acked = meter.use, res.Acked
	if res.Failed > 0 {
		return r, fmt.Errorf("paced produce: %d sends failed, first: %s", res.Failed, res.FirstError)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := cs.WaitFor(wctx, res.TotalAcked); err != nil {
		return r, fmt.Errorf("consume what was sent: %w", err)
	}
	r.achieved = res.Rate
	r.e2e = lat.Summary()
	r.send = res.Latency
	return r, nil
}

// probeMaxRate measures the maximum rate on the topic probe: the produce
// rate of flat-out producers, or with --probe-consumers the rate
// long-polling consumers took the topic at meanwhile (at most the produce
// rate, which is then returned as produced; the consumers are stopped
// before it returns).
func probeMaxRate(ctx context.Context, addr, probe string, o e2eOptions) (maxRate, produced float64, err error) {
	var consumed *probeConsumption
	var window func(bool)
	if o.probeConsumers {
		consumed = &probeConsumption{}
		cs, err := startConsumers(ctx, addr, consumerConfig{
			topic: probe, queues: o.queues, consumers: o.consumers, batch: 32,
			suspend: true, suspendFor: 15 * time.Second, onMessages: consumed.count,
		})
		if err != nil {
			return 0, 0, fmt.Errorf("probe consumers: %w", err)
		}
		defer cs.Close()
		window = consumed.mark
	}
	res, err := runLoad(ctx, addr, loadConfig{
		topic: probe, queues: o.queues, producers: o.producers, inflight: o.inflight,
		bodySize: o.body, warmup: time.Second, duration: o.probe, onWindow: window,
	})
	if err != nil {
		return 0, 0, fmt.Errorf("probe: %w", err)
	}
	if consumed == nil {
		return res.Rate, 0, nil
	}
	return min(res.Rate, consumed.rate()), res.Rate, nil
}

// probeConsumption counts the messages consumers take inside the probe's
// measured window (loadConfig.onWindow marks it).
type probeConsumption struct {
	start, end atomic.Int64 // UnixNano; end 0 while the window is open
	messages   atomic.Int64
}

// mark is the probe's onWindow.
func (p *probeConsumption) mark(start bool) {
	if start {
		p.start.Store(time.Now().UnixNano())
	} else {
		p.end.Store(time.Now().UnixNano())
	}
}

// count is the consumers' onMessages.
func (p *probeConsumption) count(msgs []commitlog.Message, at time.Time) {
	t, from, to := at.UnixNano(), p.start.Load(), p.end.Load()
	if from != 0 && t >= from && (to == 0 || t <= to) {
		p.messages.Add(int64(len(msgs)))
	}
}

// rate is the messages consumed in the window per second.
func (p *probeConsumption) rate() float64 {
	from, to := p.start.Load(), p.end.Load()
	if from == 0 || to <= from {
		return 0
	}
	return float64(p.messages.Load()) / time.Duration(to-from).Seconds()
}
