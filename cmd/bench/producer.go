package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// loadConfig describes a produce load.
type loadConfig struct {
	topic     string
	queues    int
	producers int
	// inflight bounds the requests one producer has in flight (1 is a
	// synchronous producer).
	inflight int
	bodySize int
	// rate is the total send rate in messages per second; 0 sends as fast
	// as the in-flight bound allows.
	rate float64
	// warmup runs before measuring; duration is the measured window. Both
	// are ignored when count is set.
	warmup, duration time.Duration
	// count, when > 0, sends exactly this many messages and measures all.
	count int64
	// onWindow, when set, is called as the measured window starts (true)
	// and ends (false), e.g. to read CPU counters.
	onWindow func(start bool)
	// stampBody writes the send time (UnixNano, big-endian) into the first
	// 8 bytes of every body, for end-to-end latency.
	stampBody bool
	// pick, when set, chooses the topic and queue of producer idx's n-th
	// message instead of round robin over topic's queues. It is called
	// only from that producer's goroutine.
	pick func(idx, n int) (topic string, queue int)
	// props, when set, returns properties (key\x01value\x02 pairs) added to
	// a message's, given the send time (timer and transaction loads).
	props func(now time.Time) string
	// onAck, when set, sees every successful send (any phase) with the
	// topic and queue it went to. It runs on a connection's reader
	// goroutine.
	onAck func(topic string, queue int, resp *remoting.Command)
	// batch, when above 1, sends that many messages per request as one
	// SEND_BATCH_MESSAGE (a Java producer's send(Collection)) instead of
	// one SEND_MESSAGE_V2 each; every message of an answered batch counts
	// and the latency recorded is the batch's. Measured windows only (no
	// count).
	batch int
}

func (c loadConfig) validate() error {
	switch {
	case c.topic == "":
		return errors.New("empty topic")
	case c.queues < 1:
		return fmt.Errorf("queues %d: want at least 1", c.queues)
	case c.producers < 1:
		return fmt.Errorf("producers %d: want at least 1", c.producers)
	case c.inflight < 1:
		return fmt.Errorf("inflight %d: want at least 1", c.inflight)
	case c.bodySize < 8 && c.stampBody:
		return fmt.Errorf("body size %d: the send time needs 8 bytes", c.bodySize)
	case c.bodySize < 1:
		return fmt.Errorf("body size %d: want at least 1", c.bodySize)
	case c.rate < 0:
		return fmt.Errorf("rate %g: want >= 0", c.rate)
	case c.count == 0 && c.duration <= 0:
		return errors.New("want a duration or a count")
	case c.batch > 1 && c.count > 0:
		return fmt.Errorf("batch %d: batch sends measure a duration, not a count", c.batch)
	}
	return nil
}

// loadResult is what a produce load measured.
type loadResult struct {
	// Acked counts successful sends completed in the measured window.
	Acked int64 `json:"acked"`
	// TotalAcked counts every successful send, warm-up and drain included.
	TotalAcked int64 `json:"total_acked"`
	// Failed counts sends answered with an error code or not answered.
	Failed int64 `json:"failed"`
	// FirstError describes the first failure.
	FirstError string `json:"first_error,omitempty"`
	// Busy counts the failed sends answered SYSTEM_BUSY (flow control),
	// which a client retries.
	Busy int64 `json:"busy"`
	// Window is the measured time.
	Window time.Duration `json:"window_ns"`
	// Rate is Acked per second of Window; MBps the body bytes.
	Rate float64 `json:"msgs_per_s"`
	MBps float64 `json:"mb_per_s"`
	// Latency is send to answer.
	Latency Latency `json:"latency"`
}

// phases of a load.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseDone
)

// loadRun is the shared state of one produce load.
type loadRun struct {
	cfg     loadConfig
	phase   atomic.Int32
	acked   atomic.Int64
	all     atomic.Int64 // successful sends in any phase
	failed  atomic.Int64
	busy    atomic.Int64 // failures answered SYSTEM_BUSY
	sent    atomic.Int64 // messages handed out (count mode)
	errOnce sync.Once
	firstEr string
	lat     *Recorder
}

func (r *loadRun) fail(msg string) {
	r.failed.Add(1)
	r.errOnce.Do(func() { r.firstEr = msg })
}

// prefillRounds bounds how many times prefill sends again what the broker
// refused as busy.
const prefillRounds = 10

// prefill stores cfg.count messages for a benchmark to consume: a
// runLoad whose sends answered SYSTEM_BUSY (the broker's flow control
// while its index catches up) are sent again, as a RocketMQ client
// retries them, up to prefillRounds times. Any other failure is an
// error. The result counts every stored message in TotalAcked; its Rate
// and MBps are the first round's, the send rate while the broker took
// or refused every message once.
func prefill(ctx context.Context, addr string, cfg loadConfig) (loadResult, error) {
	var total loadResult
	for round := 0; ; round++ {
		res, err := runLoad(ctx, addr, cfg)
		if err != nil {
			return total, err
		}
		if round == 0 {
			total.Rate, total.MBps = res.Rate, res.MBps
		}
		total.TotalAcked += res.TotalAcked
		total.Busy += res.Busy
		if res.Failed > res.Busy {
			return total, fmt.Errorf("pre-fill: %d sends failed, first: %s", res.Failed, res.FirstError)
		}
		if res.Busy == 0 {
			return total, nil
		}
		if round+1 == prefillRounds {
			return total, fmt.Errorf("pre-fill: %d sends still refused as busy after %d rounds, first: %s", res.Busy, prefillRounds, res.FirstError)
		}
		cfg.count = res.Busy
	}
}

// runLoad drives producers against the broker at addr and returns what
// they measured. It stops early when ctx ends.
func runLoad(ctx context.Context, addr string, cfg loadConfig) (loadResult, error) {
	if err := cfg.validate(); err != nil {
		return loadResult{}, fmt.Errorf("produce load: %w", err)
	}
	run := &loadRun{cfg: cfg, lat: NewRecorder()}
	clients := make([]*remoting.AddrClient, cfg.producers)
	defer func() {
		for _, c := range clients {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	for i := range clients {
		c, err := remoting.DialAddr(ctx, addr, remoting.ClientOptions{})
		if err != nil {
			return loadResult{}, fmt.Errorf("producer %d: %w", i, err)
		}
		clients[i] = c
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if cfg.count > 0 {
		run.phase.Store(phaseMeasure)
	}
	start := time.Now()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.produce(i, c, stop, start)
		}()
	}
	var window time.Duration
	if cfg.count > 0 {
		finished := make(chan struct{})
		go func() {
			wg.Wait()
			close(finished)
		}()
		select {
		case <-finished:
		case <-ctx.Done():
			close(stop)
			<-finished
		}
		window = time.Since(start)
	} else {
		timer := time.NewTimer(cfg.warmup)
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
		run.acked.Store(0)
		run.failed.Store(0)
		run.lat.Reset()
		if cfg.onWindow != nil {
			cfg.onWindow(true)
		}
		mStart := time.Now()
		run.phase.Store(phaseMeasure)
		timer.Reset(cfg.duration)
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
		run.phase.Store(phaseDone)
		window = time.Since(mStart)
		if cfg.onWindow != nil {
			cfg.onWindow(false)
		}
		close(stop)
		wg.Wait()
	}
	res := loadResult{
		Acked:      run.acked.Load(),
		TotalAcked: run.all.Load(),
		Failed:     run.failed.Load(),
		Busy:       run.busy.Load(),
		FirstError: run.firstEr,
		Window:     window,
		Latency:    run.lat.Summary(),
	}
	res.Rate = float64(res.Acked) / window.Seconds()
	res.MBps = res.Rate * float64(cfg.bodySize) / 1e6
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

// produce is one producer: it keeps up to inflight requests in flight on
// its connection until stop closes (or its share of count is sent), then
// waits for the answers still due.
func (r *loadRun) produce(idx int, c *remoting.AddrClient, stop <-chan struct{}, start time.Time) {
	cfg := r.cfg
	slots := make(chan struct{}, cfg.inflight)
	var shared []byte
	if !cfg.stampBody {
		shared = make([]byte, cfg.bodySize)
		for i := range shared {
			shared[i] = byte('a' + i%26)
		}
	}
	var interval time.Duration
	if cfg.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(cfg.producers) / cfg.rate)
	}
	// Producers start staggered within one interval so paced sends spread.
	next := start.Add(interval * time.Duration(idx) / time.Duration(cfg.producers))
	uniqPrefix := fmt.Sprintf("BENCH%02X%08X", idx, start.UnixNano()&0xffffffff)
loop:
	for n := 0; ; n++ {
		if cfg.count > 0 {
			if r.sent.Add(1) > cfg.count {
				break loop
			}
		}
		select {
		case <-stop:
			break loop
		default:
		}
		if interval > 0 {
			if d := time.Until(next); d > 0 {
				select {
				case <-stop:
					break loop
				case <-time.After(d):
				}
			}
			next = next.Add(interval)
		}
		select {
		case slots <- struct{}{}:
		case <-stop:
			break loop
		}
		body := shared
		now := time.Now()
		if cfg.stampBody {
			body = make([]byte, cfg.bodySize)
			binary.BigEndian.PutUint64(body, uint64(now.UnixNano()))
		}
		topic, q := cfg.topic, (idx+n*cfg.producers)%cfg.queues
		if cfg.pick != nil {
			topic, q = cfg.pick(idx, n)
		}
		var req *remoting.Command
		msgs := int64(1)
		if cfg.batch > 1 {
			var err error
			if req, err = r.batchRequest(topic, q, body, uniqPrefix+strconv.FormatInt(int64(n), 16)+"-", now); err != nil {
				<-slots
				r.fail(err.Error())
				break loop
			}
			msgs = int64(cfg.batch)
		} else {
			req = sendRequest(topic, q, body, uniqPrefix+strconv.FormatInt(int64(n), 16), now)
			if cfg.props != nil {
				req.ExtFields["i"] += cfg.props(now)
			}
		}
		err := c.InvokeAsync(req, func(resp *remoting.Command, err error) {
			lat := time.Since(now)
			// The slot is released last: the producer's final wait for
			// its slots must not return before this answer is counted.
			defer func() { <-slots }()
			if err == nil && resp.Code == remoting.Success {
				r.all.Add(msgs)
				if cfg.onAck != nil {
					cfg.onAck(topic, q, resp)
				}
			}
			if r.phase.Load() != phaseMeasure {
				return
			}
			switch {
			case err != nil:
				r.fail(err.Error())
			case resp.Code != remoting.Success:
				if resp.Code == remoting.SystemBusy {
					r.busy.Add(1)
				}
				r.fail(fmt.Sprintf("send: code %d %s", resp.Code, resp.Remark))
			default:
				r.acked.Add(msgs)
				r.lat.Record(lat)
			}
		})
		if err != nil {
			// No connection to the broker could be made (its connection
			// failed and the dial again did too) or the send could not be
			// queued: the producer stops rather than spin on the failure.
			<-slots
			r.fail(err.Error())
			break loop
		}
	}
	// Wait for every answer still due (they time out after the client's
	// AsyncTimeout at the latest).
	for range cfg.inflight {
		slots <- struct{}{}
	}
}

// batchRequest builds one SEND_BATCH_MESSAGE of cfg.batch messages, each
// with the given body, messageProps with its own UNIQ_KEY (uniqPrefix and
// its index), and the load's extra properties.
func (r *loadRun) batchRequest(topic string, queue int, body []byte, uniqPrefix string, now time.Time) (*remoting.Command, error) {
	cfg := r.cfg
	extra := ""
	if cfg.props != nil {
		extra = cfg.props(now)
	}
	items := make([]byte, 0, cfg.batch*(len(body)+96))
	for i := range cfg.batch {
		props := messageProps(uniqPrefix+strconv.Itoa(i)) + extra
		var err error
		if items, err = commitlog.AppendBatchItem(items, 0, body, props); err != nil {
			return nil, fmt.Errorf("batch item %d: %w", i, err)
		}
	}
	req := sendRequest(topic, queue, nil, uniqPrefix, now)
	req.Code = remoting.SendBatchMessage
	req.ExtFields["i"] = "WAIT\x01true\x02"
	req.ExtFields["m"] = "true"
	req.Body = items
	return req, nil
}
