package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
)

// timerOptions are the flags of `bench timer`: those it shares with
// `bench txn`, and its consumers'.
type timerOptions struct {
	featureOptions
	consumers int
	batch     int
}

func newTimerCommand() *cobra.Command {
	var o timerOptions
	cmd := &cobra.Command{
		Use:   "timer",
		Short: "Park N timer messages due at one instant and pull them; report the delivery rate and lateness against the same run's plain produce-to-consume rate",
		Long: `timer starts a broker on a temporary store (or drives --broker). Each run has
two phases on topics of its own, with the same --messages, producers and
pull consumers (C connections, each owning every C-th queue, one
PULL_MESSAGE of --batch messages in flight per queue, an empty pull retried
after 5 ms, as bench consume --mode pull):

  plain  consumers start, then --messages plain messages are sent; the
         baseline rate is messages / (first send to last message pulled).
  timer  --messages messages are sent with TIMER_DELIVER_MS set to one
         instant on a whole second (a burst), far enough ahead for all of
         them to be parked first; consumers start once they are. The
         delivery rate is messages / (due instant to last message pulled);
         lateness is each message's pull time minus the due instant
         (p50, p99, max).

ratio is delivery rate / plain rate. The broker's CPU (or this process's,
in process) per message is measured over the plain phase and over the
delivery (due instant to last pull).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTimerBench(cmd.Context(), cmd.OutOrStdout(), o) },
	}
	o.register(cmd, 200_000)
	f := cmd.Flags()
	f.IntVarP(&o.consumers, "consumers", "c", 4, "pull consumer connections")
	f.IntVar(&o.batch, "batch", 32, "messages per pull (maxMsgNums)")
	return cmd
}

// timerRun is one run of `bench timer`.
type timerRun struct {
	produceRate float64       // plain sends acknowledged per second
	plainRate   float64       // plain messages per second, first send to last pull
	parkRate    float64       // timer sends acknowledged per second
	rate        float64       // timer messages per second, due instant to last pull
	first       time.Duration // first timer message pulled, after the due instant
	late        Latency       // pull time minus due instant, each timer message
	// plainCPU and deliverCPU are CPU time per message of the plain
	// phase and of the delivery (cpuWhose says whose).
	plainCPU, deliverCPU time.Duration
}

func runTimerBench(ctx context.Context, w io.Writer, o timerOptions) error {
	if err := o.validate("timer"); err != nil {
		return err
	}
	if o.consumers < 1 || o.batch < 1 {
		return errors.New("timer: --consumers and --batch must be positive")
	}
	fmt.Fprintf(w, "timer: %d messages of %d B per phase, %d producers x %d in flight, %d queues, %d pull consumers x %d per pull, %d runs\n",
		o.messages, o.body, o.producers, o.inflight, o.queues, o.consumers, o.batch, o.runs)
	fmt.Fprintf(w, "machine: %s\n", machineLine())
	var runs []timerRun
	whose := ""
	for i := range o.runs {
		plain, parked := fmt.Sprintf("BenchPlain%d", i), fmt.Sprintf("BenchTimer%d", i)
		t, c, err := featureSetup(ctx, o.featureOptions, plain, parked)
		if err != nil {
			return err
		}
		_ = c.Close()
		whose = cpuWhose(t)
		r, err := timerOnce(ctx, t, o, plain, parked)
		if cerr := t.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		fmt.Fprintf(w, "run %d (%s): plain produce %s msg/s, produce->consume %s msg/s; timer parked at %s msg/s, delivered %s msg/s (x%.2f of plain); lateness p50 %s p99 %s max %s, first %s; %s per message: plain %s, delivery %s\n",
			i+1, t.Kind, fmtNum(r.produceRate), fmtNum(r.plainRate), fmtNum(r.parkRate), fmtNum(r.rate), ratio(r.rate, r.plainRate),
			fmtDur(r.late.P50), fmtDur(r.late.P99), fmtDur(r.late.Max), fmtDur(r.first), whose, fmtDur(r.plainCPU), fmtDur(r.deliverCPU))
		runs = append(runs, r)
	}
	dur := func(f func(timerRun) time.Duration) string {
		return fmtDur(time.Duration(medianOf(runs, func(r timerRun) float64 { return float64(f(r)) })))
	}
	var t table
	t.add("median of", "plain produce->consume msg/s", "timer delivery msg/s", "delivery/plain", "lateness p50", "p99", "max",
		"CPU/msg plain", "CPU/msg delivery")
	t.add(fmt.Sprintf("%d runs", len(runs)),
		medianOf(runs, func(r timerRun) float64 { return r.plainRate }),
		medianOf(runs, func(r timerRun) float64 { return r.rate }),
		fmt.Sprintf("%.2f", medianOf(runs, func(r timerRun) float64 { return ratio(r.rate, r.plainRate) })),
		dur(func(r timerRun) time.Duration { return r.late.P50 }),
		dur(func(r timerRun) time.Duration { return r.late.P99 }),
		dur(func(r timerRun) time.Duration { return r.late.Max }),
		dur(func(r timerRun) time.Duration { return r.plainCPU }),
		dur(func(r timerRun) time.Duration { return r.deliverCPU }))
	if err := t.write(w); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "(CPU/msg: %s; plain produce acknowledged %s msg/s, median)\n",
		whose, fmtNum(medianOf(runs, func(r timerRun) float64 { return r.produceRate })))
	return err
}

// pullClock follows a drain: the time of its last pulled message, and
// how late each message was pulled after an instant (for the timer phase).
type pullClock struct {
	due         time.Time    // zero: lateness is not recorded
	first, last atomic.Int64 // UnixNano of the first and last pull that brought messages
	early       atomic.Int64 // messages pulled before due
	late        *Recorder
}

// seen is a consumerConfig.onMessages.
func (p *pullClock) seen(msgs []commitlog.Message, at time.Time) {
	ns := at.UnixNano()
	for old := p.last.Load(); ns > old && !p.last.CompareAndSwap(old, ns); old = p.last.Load() {
	}
	for old := p.first.Load(); (old == 0 || ns < old) && !p.first.CompareAndSwap(old, ns); old = p.first.Load() {
	}
	if p.due.IsZero() {
		return
	}
	d := at.Sub(p.due)
	if d < 0 {
		p.early.Add(int64(len(msgs)))
		return
	}
	for range msgs {
		p.late.Record(d)
	}
}

// drainConfig is the pull consumers of one phase.
func (o timerOptions) drainConfig(topic string, p *pullClock) consumerConfig {
	return consumerConfig{topic: topic, queues: o.queues, consumers: o.consumers, batch: o.batch,
		idleBackoff: 5 * time.Millisecond, onMessages: p.seen}
}

// burstDue returns the instant a burst sent from now is due: lead ahead,
// rounded up to a whole second, so that Park's rounding to the timer's
// 1 s precision moves it nowhere and a message may be delivered at it.
func burstDue(now time.Time, lead time.Duration) time.Time {
	ms := now.Add(lead).UnixMilli()
	if r := ms % 1000; r != 0 {
		ms += 1000 - r
	}
	return time.UnixMilli(ms)
}

// timerOnce runs the plain phase, then the timer phase, on a started
// broker whose topics exist.
func timerOnce(ctx context.Context, t *target, o timerOptions, plain, parked string) (timerRun, error) {
	var r timerRun
	meter := &cpuMeter{pid: t.PID}

	// Plain: produce and consume at once.
	pc := &pullClock{}
	cs, err := startConsumers(ctx, t.Addr, o.drainConfig(plain, pc))
	if err != nil {
		return r, fmt.Errorf("plain phase: %w", err)
	}
	defer cs.Close()
	meter.mark(true)
	start := time.Now()
	res, err := runLoad(ctx, t.Addr, o.load(plain))
	if err != nil {
		return r, fmt.Errorf("plain phase: %w", err)
	}
	if res.Failed > 0 {
		return r, fmt.Errorf("plain: %d sends failed: %s", res.Failed, res.FirstError)
	}
	if err := waitDrain(ctx, cs, o.messages, o.timeout); err != nil {
		return r, fmt.Errorf("plain drain: %w", err)
	}
	meter.mark(false)
	_ = cs.Close()
	r.produceRate = res.Rate
	r.plainRate = float64(o.messages) / time.Unix(0, pc.last.Load()).Sub(start).Seconds()
	r.plainCPU = meter.use.perMessageOf(o.messages)

	// Timer: park a burst due once every message can be parked at the
	// measured rate, with room to spare.
	lead := time.Duration(float64(o.messages)/r.produceRate*2*float64(time.Second)) + 2*time.Second
	due := burstDue(time.Now(), lead)
	cfg := o.load(parked)
	deliverAt := "TIMER_DELIVER_MS\x01" + strconv.FormatInt(due.UnixMilli(), 10) + "\x02"
	cfg.props = func(time.Time) string { return deliverAt }
	res, err = runLoad(ctx, t.Addr, cfg)
	if err != nil {
		return r, fmt.Errorf("parking: %w", err)
	}
	if res.Failed > 0 {
		return r, fmt.Errorf("parking: %d sends failed: %s", res.Failed, res.FirstError)
	}
	r.parkRate = res.Rate
	if !time.Now().Before(due) {
		return r, errors.New("parking took longer than the lead: lower --messages")
	}
	tc := &pullClock{due: due, late: NewRecorder()}
	cs, err = startConsumers(ctx, t.Addr, o.drainConfig(parked, tc))
	if err != nil {
		return r, fmt.Errorf("timer phase: %w", err)
	}
	defer cs.Close()
	select {
	case <-time.After(time.Until(due)):
	case <-ctx.Done():
		return r, ctx.Err()
	}
	meter.mark(true)
	if err := waitDrain(ctx, cs, o.messages, o.timeout); err != nil {
		return r, fmt.Errorf("timer drain: %w", err)
	}
	meter.mark(false)
	if meter.err != nil {
		return r, fmt.Errorf("measure CPU: %w", meter.err)
	}
	if n := tc.early.Load(); n > 0 {
		return r, fmt.Errorf("%d timer messages were pulled before they were due", n)
	}
	r.late = tc.late.Summary()
	r.first = time.Unix(0, tc.first.Load()).Sub(due)
	r.rate = float64(o.messages) / time.Unix(0, tc.last.Load()).Sub(due).Seconds()
	r.deliverCPU = meter.use.perMessageOf(o.messages)
	return r, nil
}

// waitDrain waits at most timeout for consumers to pull n messages.
func waitDrain(ctx context.Context, cs *consumerSet, n int64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return cs.WaitFor(ctx, n)
}
