package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// popOptions are the flags of `bench pop`.
type popOptions struct {
	target    targetOptions
	messages  int64
	queues    int
	producers int
	inflight  int
	consumers int
	batch     int
	acks      int
	body      int
	runs      int
	hold      int64
	invisible time.Duration
	timeout   time.Duration
	// stream*: with the held messages in flight, another group pops a
	// stream of messages at a steady rate without acking them.
	streamRate      float64
	streamFor       time.Duration
	streamInvisible time.Duration
	// drainAfter, when positive, holds the drain of the revived messages
	// back until that long after the held messages' last deadline.
	drainAfter time.Duration
	// settle is a pause between the pre-fill and the drains, so that the
	// index's flushes and compactions of the pre-fill do not land on
	// whichever drain runs first.
	settle time.Duration
}

func newPopCommand() *cobra.Command {
	var o popOptions
	cmd := &cobra.Command{
		Use:   "pop",
		Short: "POP consumption: pop+ack rate against the same broker's pull rate, RSS with many messages in flight, revive lateness",
		Long: `pop starts a broker on a temporary store (or drives --broker) and, per run:

 1. pre-fills a topic of M queues with --messages messages, drains it with C
    long-polling pull consumers (the baseline), then drains the same messages
    again with C POP consumers of another group that pop --batch messages
    (queueId -1) and batch-ack every response, with up to --ack-inflight acks
    of a consumer in flight while it pops on (as the Java push consumer acks
    asynchronously); the ratio is pop+ack msg/s over pull msg/s, counting a
    message when its ack is answered;
 2. with --hold N > 0: pre-fills N more messages, pops all of them without
    acking (invisible for --invisible), reports the broker's RSS before and
    after (when the benchmark started the broker binary), waits for revive to
    re-deliver them and reports revive lateness: when each re-delivered
    message became poppable minus its deadline (1ST_POP_TIME + invisible
    time). That is the store time of revive's copy or, for a copy revive
    staged ahead of the deadline (the broker's popReviveStageAhead), the
    later of its store time and its RKV_VISIBLE_AT property. The run line
    says how many of the revived messages were staged; the run fails when
    the broker handed a staged copy out before its RKV_VISIBLE_AT.
    With --stream-rate R it does not wait for the held messages: while they
    stay in flight (give them a long --invisible), another group pops R
    messages a second of a second topic for --stream-for without acking them
    (invisible for --stream-invisible), and the revive lateness reported is
    that of this steady stream of expiries, with N messages in flight.
    With --drain-after D the revived messages are popped only D after the
    held ones' last deadline, so revive does not share the machine's CPUs
    with the benchmark's consumers (whose CPU a real deployment spends on
    other machines); the lateness is read from the copies either way.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPopBench(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	o.target.register(f)
	f.Int64Var(&o.messages, "messages", 200_000, "messages pre-filled and consumed by each mode per run")
	f.IntVarP(&o.queues, "queues", "m", 8, "queues of the topic")
	f.IntVarP(&o.producers, "producers", "n", 4, "pre-fill producer connections")
	f.IntVarP(&o.inflight, "inflight", "k", 32, "pre-fill requests in flight per producer")
	f.IntVarP(&o.consumers, "consumers", "c", 8, "consumer connections (pull and pop)")
	f.IntVar(&o.batch, "batch", 32, "messages per pull or pop (at most 32 for pop)")
	f.IntVar(&o.acks, "ack-inflight", 4, "batch acks a POP consumer keeps in flight while it pops on (0: wait for each ack before the next pop)")
	f.IntVar(&o.body, "body", 1024, "message body size in bytes")
	f.IntVar(&o.runs, "runs", 3, "runs (each on a fresh broker); the summary gives medians")
	f.Int64Var(&o.hold, "hold", 0, "messages added, then popped with the --messages ones and left in flight to measure RSS and revive lateness (0: skip)")
	f.DurationVar(&o.invisible, "invisible", 20*time.Second, "invisible time of the held messages (longer than popping them all takes, or revived ones are popped with them)")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "longest time one drain may take")
	f.Float64Var(&o.streamRate, "stream-rate", 0, "with --hold: messages a second a second group pops (unacked) while the held ones stay in flight; lateness is then measured on these (0: measure the held ones)")
	f.DurationVar(&o.streamFor, "stream-for", 20*time.Second, "how long the --stream-rate pops last")
	f.DurationVar(&o.streamInvisible, "stream-invisible", 5*time.Second, "invisible time of the streamed pops")
	f.DurationVar(&o.settle, "settle", 0, "pause between the pre-fill and the drains, so the index's background work on the pre-fill is not counted in either drain (0: none)")
	f.DurationVar(&o.drainAfter, "drain-after", 0, "with --hold: pop the revived messages only this long after the held ones' last deadline, not while revive runs (0: while it runs)")
	return cmd
}

// popRun is one run of `bench pop`.
type popRun struct {
	pullRate, popRate float64
	// pullCPU and popCPU are the CPU time per message of the pull and the
	// pop+ack phases: the broker's when the benchmark started its process,
	// else (in process, or --broker) this process's.
	pullCPU, popCPU time.Duration
	// pullGenCPU and popGenCPU are this process's (the load generator's)
	// CPU time per message of the two phases, when the broker is a
	// process of its own (0 otherwise): the two share the machine.
	pullGenCPU, popGenCPU time.Duration
	rssBefore             int64
	rssAfter              int64
	lateP50, lateP99      int64
	lateMax               int64
	revived               int64
	staged                int64   // of the revived, copies staged ahead of their deadline (RKV_VISIBLE_AT)
	drainRate             float64 // first re-deliveries popped a second, from the first to the last
	receivedP99           int64   // ms from the deadline to the pop of a first re-delivery, 99th percentile
	inFlight              int64
	streamed              float64 // pops/s the stream achieved (with --stream-rate)
}

func runPopBench(ctx context.Context, w io.Writer, o popOptions) error {
	if o.streamRate < 0 || (o.streamRate > 0 && (o.hold <= 0 || o.streamFor <= 0 || o.streamInvisible <= 0)) {
		return errors.New("--stream-rate needs --hold, and positive --stream-for and --stream-invisible")
	}
	if o.drainAfter < 0 || (o.drainAfter > 0 && (o.hold <= 0 || o.streamRate > 0)) {
		return errors.New("--drain-after needs --hold, is not negative and does not go with --stream-rate")
	}
	if o.runs < 1 || o.messages < 1 || o.batch < 1 || o.batch > pop.MaxPopMessages || o.acks < 0 {
		return fmt.Errorf("--runs %d, --messages %d, --batch %d, --ack-inflight %d: want runs, messages >= 1, batch in 1..32 and ack-inflight >= 0",
			o.runs, o.messages, o.batch, o.acks)
	}
	fmt.Fprintf(w, "pop: %d messages of %d B over %d queues, %d consumers, %d per pull/pop, %d acks in flight per consumer, hold %d, %d runs\n",
		o.messages, o.body, o.queues, o.consumers, o.batch, o.acks, o.hold, o.runs)
	fmt.Fprintf(w, "machine: %s\n", machineLine())
	var runs []popRun
	for i := range o.runs {
		t, err := startTarget(ctx, o.target)
		if err != nil {
			return err
		}
		if i == 0 {
			fmt.Fprintf(w, "broker: %s at %s\n", t.Kind, t.Addr)
		}
		r, err := popOnce(ctx, t, o, i)
		if cerr := t.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "run %d: pull %s msg/s; pop+ack %s msg/s; ratio %.2f; %s per message: pull %s, pop+ack %s",
			i+1, fmtNum(r.pullRate), fmtNum(r.popRate), ratio(r.popRate, r.pullRate), cpuWhose(t), fmtDur(r.pullCPU), fmtDur(r.popCPU))
		if t.PID > 0 {
			fmt.Fprintf(w, "; load generator CPU per message: pull %s, pop+ack %s", fmtDur(r.pullGenCPU), fmtDur(r.popGenCPU))
		}
		if o.hold > 0 {
			what := "revived"
			if o.streamRate > 0 {
				what = fmt.Sprintf("a stream of %s pops/s expiring (asked %s), first re-deliveries measured", fmtNum(r.streamed), fmtNum(o.streamRate))
			}
			fmt.Fprintf(w, "; %d in flight: RSS %s -> %s (+%s); %s %d, lateness p50 %d ms p99 %d ms max %d ms (%d of them staged), popped at %.0f msg/s, popped by p99 %d ms after the deadline",
				r.inFlight, fmtBytes(r.rssBefore), fmtBytes(r.rssAfter), fmtBytes(r.rssAfter-r.rssBefore), what, r.revived, r.lateP50, r.lateP99, r.lateMax, r.staged, r.drainRate, r.receivedP99)
		}
		fmt.Fprintln(w)
		runs = append(runs, r)
	}
	var t table
	t.add("median of", "pull msg/s", "pop+ack msg/s", "pop/pull", "CPU/msg pull", "CPU/msg pop+ack", "RSS growth", "revive p99 ms")
	t.add(fmt.Sprintf("%d runs", len(runs)),
		medianOf(runs, func(r popRun) float64 { return r.pullRate }),
		medianOf(runs, func(r popRun) float64 { return r.popRate }),
		fmt.Sprintf("%.2f", medianOf(runs, func(r popRun) float64 { return ratio(r.popRate, r.pullRate) })),
		fmtDur(time.Duration(medianOf(runs, func(r popRun) float64 { return float64(r.pullCPU) }))),
		fmtDur(time.Duration(medianOf(runs, func(r popRun) float64 { return float64(r.popCPU) }))),
		fmtBytes(int64(medianOf(runs, func(r popRun) float64 { return float64(r.rssAfter - r.rssBefore) }))),
		medianOf(runs, func(r popRun) float64 { return float64(r.lateP99) }))
	return t.write(w)
}

func popOnce(ctx context.Context, t *target, o popOptions, run int) (popRun, error) {
	var r popRun
	addr := t.Addr
	topic := fmt.Sprintf("BenchPop_%d_%d", time.Now().Unix(), run)
	if err := setupTopic(ctx, addr, topic, o.queues); err != nil {
		return r, err
	}
	fill, err := prefill(ctx, addr, loadConfig{topic: topic, queues: o.queues, producers: o.producers, inflight: o.inflight,
		bodySize: o.body, count: o.messages})
	if err != nil {
		return r, err
	}
	total := fill.TotalAcked
	if o.settle > 0 {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(o.settle):
		}
	}
	// The phases' goroutines (and their connections' readers and
	// writers, started by them) carry a profiler label: --cpuprofile's
	// samples of one phase are then -tagfocus phase=pull (or pop).
	defer pprof.SetGoroutineLabels(ctx)
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("phase", "pull")))
	// Baseline: long-polling pulls of the same messages.
	meter := &cpuMeter{pid: t.PID}
	meter.mark(true)
	start := time.Now()
	cs, err := startConsumers(ctx, addr, consumerConfig{topic: topic, queues: o.queues, consumers: o.consumers, batch: o.batch,
		suspend: true, suspendFor: 15 * time.Second, idleBackoff: 5 * time.Millisecond})
	if err != nil {
		return r, err
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	err = cs.WaitFor(wctx, total)
	cancel()
	r.pullRate = float64(cs.Consumed()) / time.Since(start).Seconds()
	meter.mark(false)
	r.pullCPU = meter.use.perMessageOf(cs.Consumed())
	if meter.use.brokerKnown {
		r.pullGenCPU, _ = meter.use.perMessage(cs.Consumed())
	}
	if cerr := cs.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return r, fmt.Errorf("pull drain: %w", err)
	}
	// POP consumers of a new group: pop, then batch-ack each response.
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("phase", "pop")))
	meter.mark(true)
	start = time.Now()
	n, end, err := popDrain(ctx, addr, topic, "BenchPopGroup", o, total, true, nil)
	if err != nil {
		return r, err
	}
	r.popRate = float64(n) / end.Sub(start).Seconds()
	meter.mark(false)
	r.popCPU = meter.use.perMessageOf(n)
	if meter.use.brokerKnown {
		r.popGenCPU, _ = meter.use.perMessage(n)
	}
	if meter.err != nil {
		return r, fmt.Errorf("measure CPU: %w", meter.err)
	}
	if o.hold <= 0 {
		return r, nil
	}
	return holdAndRevive(ctx, t, o, topic, r)
}

// drainCounter counts the messages of a drain and remembers when the count
// reached its goal: the drain's end. Consumers still long-polling for
// messages that no longer come must not extend it (they did, by up to
// their 1 s poll time, which cost short runs a third of their pop+ack
// rate), as the pull baseline ends at its last counted message.
type drainCounter struct {
	n       atomic.Int64
	want    int64
	reached atomic.Int64 // UnixNano when n reached want, 0 before
}

// Add counts k messages.
func (c *drainCounter) Add(k int64) {
	if c.n.Add(k) >= c.want {
		c.reached.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// Load returns the count.
func (c *drainCounter) Load() int64 { return c.n.Load() }

// end returns when the count reached want, or now when it did not.
func (c *drainCounter) end() time.Time {
	if ns := c.reached.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Now()
}

// popDrain pops until want messages arrived, acking them when ack is set
// (up to o.acks batch acks of a consumer in flight while it pops on; a
// message counts once its ack is answered); seen, when set, sees every
// popped message. It returns the count and when it reached want.
func popDrain(ctx context.Context, addr, topic, group string, o popOptions, want int64, ack bool, seen func(popclient.Message, int64)) (int64, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var popped atomic.Int64
	got := &drainCounter{want: want}
	var wg sync.WaitGroup
	var errOnce sync.Once
	var firstErr error
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		cancel()
	}
	inv := time.Minute
	if !ack {
		inv = o.invisible
	}
	for c := 0; c < o.consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc, err := remoting.DialAddr(ctx, addr, remoting.ClientOptions{})
			if err != nil {
				fail(err)
				return
			}
			defer rc.Close()
			pc := popclient.New(rc, "")
			acker := newAcker(ctx, pc, group, topic, o.acks, got, fail)
			defer acker.wait()
			for popped.Load() < want && ctx.Err() == nil {
				res, err := pc.Pop(ctx, popclient.PopRequest{Group: group, Topic: topic, QueueID: -1, MaxMsgNums: o.batch,
					InvisibleTime: inv, PollTime: time.Second})
				if err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					return
				}
				if res.Code != remoting.Success {
					continue
				}
				popped.Add(int64(len(res.Messages)))
				if seen != nil {
					for _, m := range res.Messages {
						seen(m, res.PopTime)
					}
				}
				if ack {
					acker.ack(res.Messages)
				} else {
					got.Add(int64(len(res.Messages)))
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return got.Load(), got.end(), firstErr
	}
	if got.Load() < want {
		return got.Load(), got.end(), fmt.Errorf("pop drain: %d of %d messages before the timeout", got.Load(), want)
	}
	return got.Load(), got.end(), nil
}

// acker batch-acks one consumer's pops, keeping up to a limit of acks in
// flight (none: each ack is answered before ack returns); acked messages
// are added to a counter, a failed ack ends the drain.
type acker struct {
	ctx          context.Context
	pc           *popclient.Client
	group, topic string
	slots        chan struct{}
	wg           sync.WaitGroup
	acked        *drainCounter
	fail         func(error)
}

func newAcker(ctx context.Context, pc *popclient.Client, group, topic string, inflight int, acked *drainCounter, fail func(error)) *acker {
	return &acker{ctx: ctx, pc: pc, group: group, topic: topic, slots: make(chan struct{}, inflight), acked: acked, fail: fail}
}

// ack acks msgs, waiting for a free slot (or for the ack itself when the
// limit is 0).
func (a *acker) ack(msgs []popclient.Message) {
	if cap(a.slots) == 0 {
		a.send(msgs)
		return
	}
	select {
	case a.slots <- struct{}{}:
	case <-a.ctx.Done():
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer func() { <-a.slots }()
		a.send(msgs)
	}()
}

func (a *acker) send(msgs []popclient.Message) {
	code, err := a.pc.BatchAck(a.ctx, a.group, a.topic, msgs)
	if err != nil || code != remoting.Success {
		a.fail(fmt.Errorf("batch ack: code %d, %v", code, err))
		return
	}
	a.acked.Add(int64(len(msgs)))
}

// wait waits for the acks in flight.
func (a *acker) wait() { a.wg.Wait() }

// holdAndRevive pops o.hold fresh messages without acking them, measures
// the broker's RSS, then waits for their re-delivery through the pop-retry
// topic and measures revive lateness.
func holdAndRevive(ctx context.Context, t *target, o popOptions, topic string, r popRun) (popRun, error) {
	rss := func() int64 {
		if t.PID == 0 {
			return 0
		}
		p, err := readProc(t.PID)
		if err != nil {
			return 0
		}
		return p.RSS
	}
	fill, err := prefill(ctx, t.Addr, loadConfig{topic: topic, queues: o.queues, producers: o.producers, inflight: o.inflight,
		bodySize: o.body, count: o.hold})
	if err != nil {
		return r, err
	}
	// A new group pops everything in the topic (the drained messages and
	// the new ones) and acks nothing.
	group := "BenchPopHold"
	r.inFlight = fill.TotalAcked + o.messages
	r.rssBefore = rss()
	if _, _, err := popDrain(ctx, t.Addr, topic, group, o, r.inFlight, false, nil); err != nil {
		return r, err
	}
	r.rssAfter = rss()
	if o.streamRate > 0 {
		return streamRevive(ctx, t, o, topic+"Stream", r)
	}
	if o.drainAfter > 0 {
		// The last pop of the hold ended now: its deadline is invisible
		// from now.
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(o.invisible + o.drainAfter):
		}
	}
	tally, err := drainRevived(ctx, t.Addr, topic, group, o, o.invisible, r.inFlight)
	if err != nil {
		return r, err
	}
	r.setLateness(tally)
	return r, nil
}

// setLateness records the revive lateness samples (ms) of a run and how
// many of the revived messages were staged.
func (r *popRun) setLateness(t *reviveTally) {
	late := t.late
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	r.revived = int64(len(late))
	r.staged = t.staged
	if span := t.lastPop - t.firstPop; span > 0 {
		r.drainRate = float64(len(late)) / (float64(span) / 1000)
	}
	if got := t.received; len(got) > 0 {
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		r.receivedP99 = percentile(got, 99)
	}
	if len(late) > 0 {
		r.lateP50, r.lateP99, r.lateMax = percentile(late, 50), percentile(late, 99), late[len(late)-1]
	}
}

// propVisibleAt is the property a staged revive puts on its copy: the
// time (decimal ms since the epoch, the broker's clock) before which the
// broker must not hand the copy out. Revive may re-put a copy before its
// deadline with this property set; the copy becomes poppable at the later
// of its store time and this time.
const propVisibleAt = pop.PropertyVisibleAt

// reviveTally reads the re-delivered messages of a drain: the lateness of
// each first re-delivery, how many of those were staged, and any copy the
// broker handed out before the time its RKV_VISIBLE_AT names.
type reviveTally struct {
	// invisible is the invisible time of the pops that held the messages.
	invisible time.Duration
	// late is the lateness (ms) of each first re-delivery: when the copy
	// became poppable, the later of its store time and its
	// RKV_VISIBLE_AT, minus its deadline, 1ST_POP_TIME plus invisible.
	late []int64
	// staged counts the first re-deliveries that carried RKV_VISIBLE_AT.
	staged int64
	// early counts the copies popped before their RKV_VISIBLE_AT (a pop
	// time below it; both times are the broker's clock), and earliest is
	// the largest such gap in ms.
	early, earliest int64
	// malformed counts RKV_VISIBLE_AT values that are not decimal ms, and
	// badValue is the first of them.
	malformed int64
	badValue  string
	// firstPop and lastPop are the pop times of the first and last first
	// re-delivery popped: how long consuming them took.
	firstPop, lastPop int64
	// received is, for each first re-delivery, its pop time minus its
	// deadline: when the consumers got it, their own pace included.
	received []int64
}

// add reads m, popped by a pop whose response carried popTime.
func (t *reviveTally) add(m popclient.Message, popTime int64) {
	poppable, staged := m.StoreTimestamp, false
	if v, ok := commitlog.LookupProperty(m.Properties, propVisibleAt); ok {
		at, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			if t.malformed == 0 {
				t.badValue = v
			}
			t.malformed++
			return
		}
		// Every delivery of a staged copy is checked, a second
		// re-delivery's too: none may come before its time.
		if popTime < at {
			t.early++
			t.earliest = max(t.earliest, at-popTime)
		}
		poppable, staged = max(poppable, at), true
	}
	first, ok := commitlog.LookupProperty(m.Properties, pop.PropertyFirstPopTime)
	if !ok || m.ReconsumeTimes != 1 {
		return
	}
	pt, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return
	}
	t.late = append(t.late, poppable-(pt+t.invisible.Milliseconds()))
	t.received = append(t.received, popTime-(pt+t.invisible.Milliseconds()))
	if t.firstPop == 0 || popTime < t.firstPop {
		t.firstPop = popTime
	}
	t.lastPop = max(t.lastPop, popTime)
	if staged {
		t.staged++
	}
}

// err reports the broker's faults the tally saw: a staged copy handed out
// before its RKV_VISIBLE_AT, or an RKV_VISIBLE_AT that is not a time.
func (t *reviveTally) err() error {
	var errs []error
	if t.early > 0 {
		errs = append(errs, fmt.Errorf("%d staged revive copies popped before their %s, the worst %d ms before it",
			t.early, propVisibleAt, t.earliest))
	}
	if t.malformed > 0 {
		errs = append(errs, fmt.Errorf("%d revive copies carry an %s that is not ms since the epoch (the first: %q)",
			t.malformed, propVisibleAt, t.badValue))
	}
	return errors.Join(errs...)
}

// drainRevived pops and acks want re-delivered messages of group and
// tallies them (reviveTally): each first re-delivery's revive lateness,
// how many were staged, and fails when the broker handed a staged copy out
// before its time.
func drainRevived(ctx context.Context, addr, topic, group string, o popOptions, invisible time.Duration, want int64) (*reviveTally, error) {
	var mu sync.Mutex
	tally := &reviveTally{invisible: invisible}
	seen := func(m popclient.Message, popTime int64) {
		mu.Lock()
		tally.add(m, popTime)
		mu.Unlock()
	}
	ackOpts := o
	ackOpts.timeout = o.timeout + invisible
	if _, _, err := popDrain(ctx, addr, topic, group, ackOpts, want, true, seen); err != nil {
		return nil, err
	}
	if err := tally.err(); err != nil {
		return nil, fmt.Errorf("revive: %w", err)
	}
	return tally, nil
}

// streamRevive measures revive lateness under a steady stream of expiries
// while the held messages stay in flight: it fills a second topic with
// --stream-rate x --stream-for messages, pops them at that rate with a
// group that acks nothing, then drains their re-deliveries.
func streamRevive(ctx context.Context, t *target, o popOptions, topic string, r popRun) (popRun, error) {
	want := int64(o.streamRate * o.streamFor.Seconds())
	if want < 1 {
		return r, errors.New("--stream-rate x --stream-for is less than one message")
	}
	if err := setupTopic(ctx, t.Addr, topic, o.queues); err != nil {
		return r, err
	}
	fill, err := runLoad(ctx, t.Addr, loadConfig{topic: topic, queues: o.queues, producers: o.producers, inflight: o.inflight,
		bodySize: o.body, count: want})
	if err != nil {
		return r, err
	}
	if fill.TotalAcked == 0 {
		return r, fmt.Errorf("stream: none of %d messages stored", want)
	}
	// A send that failed (a timeout on a loaded machine) is not popped.
	want = fill.TotalAcked
	const group = "BenchPopStream"
	rc, err := remoting.DialAddr(ctx, t.Addr, remoting.ClientOptions{})
	if err != nil {
		return r, err
	}
	defer rc.Close()
	pc := popclient.New(rc, "")
	// One pop of up to --batch messages every batch/rate seconds.
	tick := time.NewTicker(time.Duration(float64(o.batch) / o.streamRate * float64(time.Second)))
	defer tick.Stop()
	popped := int64(0)
	began := time.Now()
	deadline := began.Add(o.streamFor + o.timeout)
	for popped < want {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("stream: popped %d of %d messages before the timeout", popped, want)
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-tick.C:
		}
		res, err := pc.Pop(ctx, popclient.PopRequest{Group: group, Topic: topic, QueueID: -1,
			MaxMsgNums: int(min(int64(o.batch), want-popped)), InvisibleTime: o.streamInvisible, PollTime: time.Second})
		if err != nil {
			return r, fmt.Errorf("stream pop: %w", err)
		}
		if res.Code == remoting.Success {
			popped += int64(len(res.Messages))
		}
	}
	r.streamed = float64(popped) / time.Since(began).Seconds()
	// Pops of the group also return its re-deliveries once the first
	// deadlines pass (as a client's would): those expire a second time.
	// Lateness is measured on the first re-deliveries only.
	tally, err := drainRevived(ctx, t.Addr, topic, group, o, o.streamInvisible, want)
	if err != nil {
		return r, err
	}
	r.setLateness(tally)
	return r, nil
}
