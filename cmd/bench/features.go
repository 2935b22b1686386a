package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// featureOptions are the flags of `bench timer` and `bench txn`.
type featureOptions struct {
	target    targetOptions
	messages  int64
	producers int
	inflight  int
	queues    int
	body      int
	runs      int
	timeout   time.Duration
}

// register adds the flags to cmd; messages is the default of --messages.
func (o *featureOptions) register(cmd *cobra.Command, messages int64) {
	f := cmd.Flags()
	o.target.register(f)
	f.Int64Var(&o.messages, "messages", messages, "messages per phase")
	f.IntVarP(&o.producers, "producers", "n", 4, "producer connections")
	f.IntVarP(&o.inflight, "inflight", "k", 32, "requests in flight per producer")
	f.IntVarP(&o.queues, "queues", "m", 8, "queues of the topics")
	f.IntVar(&o.body, "body", 1024, "message body size in bytes")
	f.IntVar(&o.runs, "runs", 3, "runs (each on a fresh broker); the summary gives medians")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "longest wait for a phase's messages to arrive in their topic")
}

func (o featureOptions) validate(name string) error {
	if o.messages < 1 || o.producers < 1 || o.inflight < 1 || o.queues < 1 || o.body < 1 || o.runs < 1 || o.timeout <= 0 {
		return fmt.Errorf("%s: --messages, --producers, --inflight, --queues, --body, --runs and --timeout must be positive", name)
	}
	return nil
}

func (o featureOptions) load(topic string) loadConfig {
	return loadConfig{topic: topic, queues: o.queues, producers: o.producers, inflight: o.inflight,
		bodySize: o.body, count: o.messages}
}

func newTxnCommand() *cobra.Command {
	var o featureOptions
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "Send N transactional messages (half, then END_TRANSACTION commit) against N plain sends; report the committed rate and its ratio",
		Long: `txn starts a broker on a temporary store (or drives --broker) and, in each
run, first sends --messages plain messages (the baseline), then --messages
transactions as a transaction producer does: each half message (TRAN_MSG)
and, once it is acknowledged, a oneway END_TRANSACTION committing it. The
transaction rate counts from the first half sent until every committed
message is in its topic.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTxnBench(cmd.Context(), cmd.OutOrStdout(), o) },
	}
	o.register(cmd, 100000)
	return cmd
}

// featureRun is one run of `bench txn`.
type featureRun struct {
	produceRate float64 // plain sends acknowledged per second
	rate        float64 // committed transactions per second
}

// topicTotal returns the messages a topic's queues hold.
func topicTotal(ctx context.Context, c *remoting.AddrClient, topic string, queues int) (int64, error) {
	var total int64
	for q := 0; q < queues; q++ {
		resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.GetMaxOffset,
			map[string]string{"topic": topic, "queueId": strconv.Itoa(q)}, nil))
		if err != nil {
			return 0, err
		}
		n, err := strconv.ParseInt(resp.ExtFields["offset"], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("max offset of %s/%d: %w", topic, q, err)
		}
		total += n
	}
	return total, nil
}

// waitTotal polls a topic until it holds want messages and returns when
// it held its first one and all of them.
func waitTotal(ctx context.Context, c *remoting.AddrClient, topic string, queues int, want int64, timeout time.Duration) (first, all time.Time, err error) {
	deadline := time.Now().Add(timeout)
	for {
		n, err := topicTotal(ctx, c, topic, queues)
		if err != nil {
			return first, all, err
		}
		now := time.Now()
		if n > 0 && first.IsZero() {
			first = now
		}
		if n >= want {
			return first, now, nil
		}
		if now.After(deadline) {
			return first, all, fmt.Errorf("%s holds %d of %d messages after %v", topic, n, want, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// featureSetup starts the target and creates the run's topics.
func featureSetup(ctx context.Context, o featureOptions, topics ...string) (*target, *remoting.AddrClient, error) {
	t, err := startTarget(ctx, o.target)
	if err != nil {
		return nil, nil, err
	}
	c, err := remoting.DialAddr(ctx, t.Addr, remoting.ClientOptions{})
	if err != nil {
		_ = t.Close()
		return nil, nil, err
	}
	for _, topic := range topics {
		if err := createTopic(ctx, c, topic, o.queues); err != nil {
			_ = c.Close()
			_ = t.Close()
			return nil, nil, err
		}
	}
	return t, c, nil
}

// baseline measures the plain produce rate of a run.
func baseline(ctx context.Context, addr string, o featureOptions, topic string) (float64, error) {
	res, err := runLoad(ctx, addr, o.load(topic))
	if err != nil {
		return 0, err
	}
	if res.Failed > 0 {
		return 0, fmt.Errorf("baseline: %d sends failed: %s", res.Failed, res.FirstError)
	}
	return res.Rate, nil
}

func runTxnBench(ctx context.Context, w io.Writer, o featureOptions) error {
	if err := o.validate("txn"); err != nil {
		return err
	}
	fmt.Fprintf(w, "txn: %d messages of %d B per phase, %d producers x %d in flight, %d queues, %d runs\n",
		o.messages, o.body, o.producers, o.inflight, o.queues, o.runs)
	fmt.Fprintf(w, "machine: %s\n", machineLine())
	var runs []featureRun
	for i := 0; i < o.runs; i++ {
		plain, txTopic := fmt.Sprintf("BenchPlain%d", i), fmt.Sprintf("BenchTxn%d", i)
		t, c, err := featureSetup(ctx, o, plain, txTopic)
		if err != nil {
			return err
		}
		r, err := txnRun(ctx, t.Addr, c, o, plain, txTopic)
		_ = c.Close()
		if cerr := t.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		fmt.Fprintf(w, "run %d (%s): produce %s msg/s; transactions %s/s committed (x%.2f of produce)\n",
			i+1, t.Kind, fmtNum(r.produceRate), fmtNum(r.rate), r.rate/r.produceRate)
		runs = append(runs, r)
	}
	fmt.Fprintf(w, "median of %d: produce %s msg/s, transactions %s/s, transactions/produce %.2f\n",
		len(runs), fmtNum(medianOf(runs, func(r featureRun) float64 { return r.produceRate })),
		fmtNum(medianOf(runs, func(r featureRun) float64 { return r.rate })),
		medianOf(runs, func(r featureRun) float64 { return r.rate / r.produceRate }))
	return nil
}

func txnRun(ctx context.Context, addr string, c *remoting.AddrClient, o featureOptions, plain, txTopic string) (featureRun, error) {
	var r featureRun
	var err error
	if r.produceRate, err = baseline(ctx, addr, o, plain); err != nil {
		return r, err
	}
	ender, err := remoting.DialAddr(ctx, addr, remoting.ClientOptions{})
	if err != nil {
		return r, err
	}
	defer ender.Close()
	cfg := o.load(txTopic)
	cfg.props = func(time.Time) string { return "TRAN_MSG\x01true\x02PGROUP\x01" + producerGroup + "\x02" }
	var mu sync.Mutex
	var endErr error
	cfg.onAck = func(_ string, _ int, resp *remoting.Command) { // on the producers' reader goroutines
		_, phy, err := commitlog.ParseMessageID(resp.ExtFields["msgId"])
		if err == nil {
			err = ender.InvokeOneway(ctx, remoting.NewRequest(remoting.EndTransaction, map[string]string{
				"producerGroup": producerGroup, "tranStateTableOffset": resp.ExtFields["queueOffset"],
				"commitLogOffset": strconv.FormatInt(phy, 10), "commitOrRollback": "8",
				"msgId": resp.ExtFields["transactionId"], "fromTransactionCheck": "false"}, nil))
		}
		if err != nil {
			mu.Lock()
			endErr = cmp.Or(endErr, err)
			mu.Unlock()
		}
	}
	start := time.Now()
	res, err := runLoad(ctx, addr, cfg)
	if err != nil {
		return r, err
	}
	mu.Lock()
	defer mu.Unlock()
	if res.Failed > 0 || endErr != nil {
		return r, fmt.Errorf("transactions: %d half sends failed (%s), end: %v", res.Failed, res.FirstError, endErr)
	}
	_, all, err := waitTotal(ctx, c, txTopic, o.queues, o.messages, o.timeout)
	if err != nil {
		return r, err
	}
	r.rate = float64(o.messages) / all.Sub(start).Seconds()
	return r, nil
}
