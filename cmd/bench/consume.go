package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

// consumeOptions are the flags of `bench consume`.
type consumeOptions struct {
	target    targetOptions
	mode      string
	messages  int64
	queues    int
	producers int
	inflight  int
	consumers int
	batch     int
	body      int
	runs      int
	timeout   time.Duration
}

// consumeModeSuspends reports whether a consume mode long-polls.
func consumeModeSuspends(mode string) (bool, error) {
	switch mode {
	case "push":
		return true, nil
	case "pull":
		return false, nil
	}
	return false, fmt.Errorf("--mode %q: want push (long polling) or pull", mode)
}

func newConsumeCommand() *cobra.Command {
	var o consumeOptions
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Pre-fill a topic, then drain it with C consumers over every queue; report msg/s against the pre-fill's produce rate",
		Long: `consume starts a broker on a temporary store (or drives --broker), creates a
topic with M queues and pre-fills it with --messages messages from pipelining
producers. Then C consumer connections drain it, each owning every C-th queue
with one PULL_MESSAGE of --batch messages in flight per queue: --mode push
sets the suspend flag (long polling, as a push consumer), --mode pull does
not (an empty pull is retried after 5 ms). The rate is messages pulled and
decoded per second from the first pull to the last message; the ratio is
against the pre-fill's produce rate in the same run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runConsume(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	o.target.register(f)
	f.StringVar(&o.mode, "mode", "push", "push (long polling pulls) or pull (plain pulls)")
	f.Int64Var(&o.messages, "messages", 500_000, "messages pre-filled and then consumed per run")
	f.IntVarP(&o.queues, "queues", "m", 8, "queues of the topic")
	f.IntVarP(&o.producers, "producers", "n", 4, "pre-fill producer connections")
	f.IntVarP(&o.inflight, "inflight", "k", 32, "pre-fill requests in flight per producer")
	f.IntVarP(&o.consumers, "consumers", "c", 4, "consumer connections")
	f.IntVar(&o.batch, "batch", 32, "messages per pull (maxMsgNums)")
	f.IntVar(&o.body, "body", 1024, "message body size in bytes")
	f.IntVar(&o.runs, "runs", 3, "runs (each on a fresh broker); the summary gives medians")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "longest time one run's drain may take")
	return cmd
}

// consumeRun is one run of `bench consume`.
type consumeRun struct {
	produceRate float64
	consumeRate float64
	mbps        float64
}

func runConsume(ctx context.Context, w io.Writer, o consumeOptions) error {
	suspend, err := consumeModeSuspends(o.mode)
	if err != nil {
		return err
	}
	if o.runs < 1 || o.messages < 1 {
		return fmt.Errorf("--runs %d, --messages %d: want at least 1 each", o.runs, o.messages)
	}
	fmt.Fprintf(w, "consume: mode %s, %d messages of %d B over %d queues, %d consumers, %d per pull, %d runs\n",
		o.mode, o.messages, o.body, o.queues, o.consumers, o.batch, o.runs)
	fmt.Fprintf(w, "machine: %s\n", machineLine())
	var runs []consumeRun
	for i := range o.runs {
		t, err := startTarget(ctx, o.target)
		if err != nil {
			return err
		}
		if i == 0 {
			fmt.Fprintf(w, "broker: %s at %s\n", t.Kind, t.Addr)
		}
		r, err := consumeOnce(ctx, t.Addr, o, suspend, i)
		if cerr := t.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "run %d: pre-fill %s msg/s; consume %s msg/s, %s MB/s; ratio %.2f\n",
			i+1, fmtNum(r.produceRate), fmtNum(r.consumeRate), sig3(r.mbps), ratio(r.consumeRate, r.produceRate))
		runs = append(runs, r)
	}
	var t table
	t.add("median of", "consume msg/s", "MB/s", "pre-fill produce msg/s", "consume/produce")
	t.add(fmt.Sprintf("%d runs", len(runs)),
		medianOf(runs, func(r consumeRun) float64 { return r.consumeRate }),
		medianOf(runs, func(r consumeRun) float64 { return r.mbps }),
		medianOf(runs, func(r consumeRun) float64 { return r.produceRate }),
		fmt.Sprintf("%.2f", medianOf(runs, func(r consumeRun) float64 { return ratio(r.consumeRate, r.produceRate) })))
	return t.write(w)
}

// consumeOnce pre-fills a fresh topic and drains it.
func consumeOnce(ctx context.Context, addr string, o consumeOptions, suspend bool, run int) (consumeRun, error) {
	topic := fmt.Sprintf("BenchConsume_%d_%d", time.Now().Unix(), run)
	if err := setupTopic(ctx, addr, topic, o.queues); err != nil {
		return consumeRun{}, err
	}
	fill, err := prefill(ctx, addr, loadConfig{
		topic: topic, queues: o.queues, producers: o.producers, inflight: o.inflight,
		bodySize: o.body, count: o.messages,
	})
	if err != nil {
		return consumeRun{}, err
	}
	start := time.Now()
	cs, err := startConsumers(ctx, addr, consumerConfig{
		topic: topic, queues: o.queues, consumers: o.consumers, batch: o.batch,
		suspend: suspend, suspendFor: 15 * time.Second, idleBackoff: 5 * time.Millisecond,
	})
	if err != nil {
		return consumeRun{}, err
	}
	defer cs.Close()
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := cs.WaitFor(wctx, fill.TotalAcked); err != nil {
		return consumeRun{}, fmt.Errorf("drain: %w", err)
	}
	elapsed := time.Since(start)
	rate := float64(cs.Consumed()) / elapsed.Seconds()
	return consumeRun{
		produceRate: fill.Rate,
		consumeRate: rate,
		mbps:        float64(cs.Bytes()) / elapsed.Seconds() / 1e6,
	}, nil
}
