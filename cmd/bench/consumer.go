package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// consumerConfig describes a set of consumers reading every queue of a
// topic.
type consumerConfig struct {
	topic     string
	queues    int
	consumers int
	// batch is maxMsgNums of each pull.
	batch int
	// suspend asks the broker to hold a pull that finds nothing for up to
	// suspendFor (long polling, as push consumers pull). Without it an
	// empty pull is retried after idleBackoff.
	suspend     bool
	suspendFor  time.Duration
	idleBackoff time.Duration
	// onMessages, when set, sees every pulled batch with the time its
	// response was decoded. It runs on a connection's reader goroutine.
	onMessages func(msgs []commitlog.Message, at time.Time)
}

func (c consumerConfig) validate() error {
	switch {
	case c.topic == "":
		return errors.New("empty topic")
	case c.queues < 1:
		return fmt.Errorf("queues %d: want at least 1", c.queues)
	case c.consumers < 1:
		return fmt.Errorf("consumers %d: want at least 1", c.consumers)
	case c.batch < 1:
		return fmt.Errorf("batch %d: want at least 1", c.batch)
	case c.suspend && c.suspendFor <= 0:
		return fmt.Errorf("suspend time %s: want > 0", c.suspendFor)
	}
	return nil
}

// consumerSet is a running set of consumers. Each consumer is one
// connection owning the queues q with q % consumers == its index, with one
// pull in flight per queue; a goroutine per consumer issues the next pull
// of a queue when the previous one answered.
type consumerSet struct {
	cfg      consumerConfig
	clients  []*remoting.AddrClient
	consumed atomic.Int64
	bytes    atomic.Int64
	empty    atomic.Int64 // pulls that found nothing
	stop     chan struct{}
	stopped  atomic.Bool
	wg       sync.WaitGroup
	errMu    sync.Mutex
	err      error
	changed  chan struct{} // signalled (non-blocking) on progress
}

// queuePos is the next pull of one queue.
type queuePos struct {
	queue  int
	offset int64
}

// startConsumers connects the consumers to addr and starts pulling from
// offset 0 of every queue.
func startConsumers(ctx context.Context, addr string, cfg consumerConfig) (*consumerSet, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("consumers: %w", err)
	}
	s := &consumerSet{cfg: cfg, stop: make(chan struct{}), changed: make(chan struct{}, 1)}
	for i := range cfg.consumers {
		c, err := remoting.DialAddr(ctx, addr, remoting.ClientOptions{})
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("consumer %d: %w", i, err)
		}
		s.clients = append(s.clients, c)
	}
	for i, c := range s.clients {
		var owned []int
		for q := i; q < cfg.queues; q += cfg.consumers {
			owned = append(owned, q)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.consume(c, owned)
		}()
	}
	return s, nil
}

// Consumed returns the messages pulled so far.
func (s *consumerSet) Consumed() int64 { return s.consumed.Load() }

// Bytes returns the body bytes pulled so far.
func (s *consumerSet) Bytes() int64 { return s.bytes.Load() }

// EmptyPulls returns how many pulls found nothing.
func (s *consumerSet) EmptyPulls() int64 { return s.empty.Load() }

// WaitFor blocks until n messages were consumed, a consumer failed or ctx
// ends.
func (s *consumerSet) WaitFor(ctx context.Context, n int64) error {
	for s.consumed.Load() < n {
		if err := s.Err(); err != nil {
			return err
		}
		select {
		case <-s.changed:
		case <-ctx.Done():
			return fmt.Errorf("consumed %d of %d messages: %w", s.consumed.Load(), n, ctx.Err())
		}
	}
	return nil
}

// Err returns the first consumer failure.
func (s *consumerSet) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

func (s *consumerSet) failed(err error) {
	if s.stopped.Load() {
		return
	}
	s.errMu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.errMu.Unlock()
	s.signal()
}

func (s *consumerSet) signal() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Close stops the consumers, closes their connections (held pulls are
// abandoned) and waits for their goroutines.
func (s *consumerSet) Close() error {
	if !s.stopped.Swap(true) {
		close(s.stop)
	}
	s.wg.Wait()
	for _, c := range s.clients {
		_ = c.Close()
	}
	return nil
}

// consume issues pulls for the owned queues until stop.
func (s *consumerSet) consume(c *remoting.AddrClient, owned []int) {
	next := make(chan queuePos, len(owned)) // one pull in flight per queue: never full
	for _, q := range owned {
		next <- queuePos{queue: q}
	}
	cfg := s.cfg
	for {
		select {
		case <-s.stop:
			return
		case p := <-next:
			req := pullRequest(cfg.topic, p.queue, p.offset, cfg.batch, cfg.suspend, cfg.suspendFor)
			err := c.InvokeAsync(req, func(resp *remoting.Command, err error) {
				s.answer(p, resp, err, next)
			})
			if err != nil {
				s.failed(fmt.Errorf("pull %s/%d: %w", cfg.topic, p.queue, err))
				return
			}
		}
	}
}

// answer handles one pull response and schedules the queue's next pull.
func (s *consumerSet) answer(p queuePos, resp *remoting.Command, err error, next chan<- queuePos) {
	if s.stopped.Load() {
		return
	}
	if err != nil {
		s.failed(fmt.Errorf("pull %s/%d@%d: %w", s.cfg.topic, p.queue, p.offset, err))
		return
	}
	r, err := decodePull(resp)
	if err != nil {
		s.failed(fmt.Errorf("pull %s/%d@%d: %w", s.cfg.topic, p.queue, p.offset, err))
		return
	}
	at := time.Now()
	if n := len(r.msgs); n > 0 {
		var b int64
		for i := range r.msgs {
			b += int64(len(r.msgs[i].Body))
		}
		if s.cfg.onMessages != nil {
			s.cfg.onMessages(r.msgs, at)
		}
		s.bytes.Add(b)
		s.consumed.Add(int64(n))
		s.signal()
	}
	following := queuePos{queue: p.queue, offset: r.nextBegin}
	if r.code == remoting.PullNotFound && !s.cfg.suspend {
		s.empty.Add(1)
		time.AfterFunc(s.cfg.idleBackoff, func() { next <- following })
		return
	}
	if r.code == remoting.PullNotFound {
		s.empty.Add(1)
	}
	next <- following
}
