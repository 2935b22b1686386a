package timer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/kvindex"
)

// Store is what the service needs of the broker's message store.
type Store interface {
	// Put stores a message in its topic and queue.
	Put(ctx context.Context, m *commitlog.Message) (commitlog.AppendResult, error)
	// Read returns the record at a CommitLog offset; ok is false when
	// there is none there.
	Read(phy int64) (m commitlog.Message, ok bool, err error)
}

// tick is how often the service looks for due messages.
const tick = 100 * time.Millisecond

// deliverBatch bounds the entries one scan hands to delivery.
const deliverBatch = 256

// Service indexes parked timer messages (Hook) and delivers them when due
// (Run).
type Service struct {
	timers *kvindex.Timers
	store  Store
	log    zerolog.Logger
	now    func() time.Time

	// progress reads the timer progress of the Apache RocketMQ store the
	// index was opened on, once, for the first parked message dispatched.
	progress     func() (int64, bool, error)
	progressOnce sync.Once
	deliveredTo  int64 // RocketMQ delivered what was due before this
}

// New returns a timer service over the index's timer keyspace. progress
// returns the timer progress of an Apache RocketMQ store the index was
// migrated from (kvindex.DB.RocketMQTimerProgress); it may be nil.
func New(timers *kvindex.Timers, store Store, progress func() (int64, bool, error), log zerolog.Logger) *Service {
	return &Service{timers: timers, store: store, progress: progress, now: time.Now,
		log: log.With().Str("component", "timer").Logger()}
}

// Hook is the dispatcher hook of rmq_sys_wheel_timer: it indexes each
// parked message at its TIMER_OUT_MS (a record without a valid one is due
// at once). In a store migrated from Apache RocketMQ 5, a message due
// before RocketMQ's timer progress was delivered there and is left out.
func (s *Service) Hook() kvindex.Hook {
	return kvindex.HookFunc(func(w *pebble.Batch, m *commitlog.Message) error {
		s.progressOnce.Do(func() {
			if s.progress == nil {
				return
			}
			ms, ok, err := s.progress()
			if err != nil {
				s.log.Warn().Err(err).Msg("read RocketMQ's timer progress; every parked message counts as waiting")
			} else if ok {
				s.deliveredTo = ms
			}
		})
		due := m.StoreTimestamp
		if v, ok := commitlog.LookupProperty(m.Properties, PropOutMs); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
				due = n
			}
		}
		if due < s.deliveredTo {
			return nil
		}
		return s.timers.Add(w, kvindex.TimerEntry{DeliverMs: due, PhyOffset: m.PhyOffset, Size: m.StoreSize})
	})
}

// Run delivers due messages every 100 ms until ctx ends; a failed round
// is logged and retried at the next tick.
func (s *Service) Run(ctx context.Context) {
	periodic.Run(ctx, tick, func(ctx context.Context) {
		if _, err := s.DeliverDue(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("deliver timer messages")
		}
	})
}

// DeliverDue stores every message due by now in its real topic and queue
// and returns how many it delivered. A due message carrying
// TIMER_DEL_UNIQKEY (REAL_TOPIC+"+"+UNIQ_KEY of a timer message due at
// the same time) cancels that message and is not delivered itself, as in
// RocketMQ. An entry whose record left the CommitLog, or lost its
// destination, is dropped with a log line.
func (s *Service) DeliverDue(ctx context.Context) (int, error) {
	delivered := 0
	for ctx.Err() == nil {
		now := s.now()
		due, err := s.timers.Due(now.UnixMilli(), deliverBatch)
		if err != nil || len(due) == 0 {
			return delivered, err
		}
		full := len(due) == deliverBatch
		if full {
			due = wholeTimes(due)
		}
		n, err := s.deliverBatch(ctx, due, now)
		delivered += n
		if err != nil || !full {
			return delivered, err
		}
	}
	return delivered, ctx.Err()
}

// deliverBatch delivers due entries in order and deletes the entries it
// handled; on a failed put it stops there, and the rest wait for the next
// round.
func (s *Service) deliverBatch(ctx context.Context, due []kvindex.TimerEntry, now time.Time) (int, error) {
	parked := make([]*commitlog.Message, len(due))
	cancelled := map[string]bool{}
	rolled := map[string]bool{} // cancel keys of messages RocketMQ rolled
	for i, e := range due {
		m, ok, err := s.store.Read(e.PhyOffset)
		if err != nil {
			return 0, fmt.Errorf("read timer message at %d: %w", e.PhyOffset, err)
		}
		if !ok {
			s.log.Warn().Int64("phyOffset", e.PhyOffset).Msg("timer message gone from the CommitLog before its time; dropped")
			continue
		}
		if key, ok := commitlog.LookupProperty(m.Properties, PropDeleteKey); ok {
			cancelled[key] = true
			continue
		}
		if _, ok := commitlog.LookupProperty(m.Properties, PropRollTimes); ok {
			rolled[cancelKey(&m)] = true
		}
		parked[i] = &m
	}
	// Apache RocketMQ parks a message due further ahead than its timing
	// wheel again when the wheel comes round (TIMER_ROLL_TIMES), so a store
	// migrated from it can hold a message twice, at one delivery time:
	// only the first is delivered.
	delivering := map[string]bool{}
	var putErr error
	done, delivered := 0, 0
	for i, e := range due {
		m := parked[i]
		if m != nil && rolled[cancelKey(m)] {
			if k := cancelKey(m); delivering[k] {
				m = nil // a roll of a message this round delivers
			} else {
				delivering[k] = true
			}
		}
		if m != nil && !cancelled[cancelKey(m)] {
			out, err := deliveredMessage(m, now)
			if errors.Is(err, errDropped) {
				s.log.Warn().Err(err).Int64("phyOffset", e.PhyOffset).Msg("timer message without a destination; dropped")
			} else if _, err := s.store.Put(ctx, out); permanent(err) {
				s.log.Error().Err(err).Int64("phyOffset", e.PhyOffset).Str("topic", out.Topic).
					Msg("timer message can never be stored in its topic; dropped")
			} else if err != nil {
				putErr = fmt.Errorf("deliver timer message at %d to %s/%d: %w", e.PhyOffset, out.Topic, out.QueueID, err)
				break
			} else {
				delivered++
			}
		}
		done++
	}
	if err := s.timers.Delete(due[:done]); err != nil {
		return delivered, err
	}
	return delivered, putErr
}

// wholeTimes drops from a full batch the entries of its last delivery
// time, which may go on past the batch: a cancel and the message it names
// share their delivery time, and must be in one batch. A batch of one
// delivery time is kept whole.
func wholeTimes(due []kvindex.TimerEntry) []kvindex.TimerEntry {
	last := due[len(due)-1].DeliverMs
	i := len(due)
	for i > 0 && due[i-1].DeliverMs == last {
		i--
	}
	if i == 0 {
		return due
	}
	return due[:i]
}

// permanent reports whether a put failed for the message itself (it can
// never be stored), rather than for the store (disk full, shutting
// down), which a later round retries.
func permanent(err error) bool {
	return errors.Is(err, commitlog.ErrMessageTooLarge) || errors.Is(err, commitlog.ErrPropertiesTooLarge) ||
		errors.Is(err, commitlog.ErrTopicTooLong)
}

// cancelKey is what a TIMER_DEL_UNIQKEY names a parked message by.
func cancelKey(parked *commitlog.Message) string {
	topic, _ := commitlog.LookupProperty(parked.Properties, PropRealTopic)
	uniq, _ := commitlog.LookupProperty(parked.Properties, commitlog.PropertyUniqID)
	return topic + "+" + uniq
}

// errDropped marks a parked message that cannot be delivered.
var errDropped = errors.New("dropped")

// deliveredMessage is the message a parked timer message becomes when due: its
// real topic and queue, without REAL_TOPIC and REAL_QID, with
// TIMER_ENQUEUE_MS (when it was parked) and TIMER_DEQUEUE_MS (now).
func deliveredMessage(parked *commitlog.Message, now time.Time) (*commitlog.Message, error) {
	topic, _ := commitlog.LookupProperty(parked.Properties, PropRealTopic)
	qs, _ := commitlog.LookupProperty(parked.Properties, PropRealQueueID)
	qid, err := strconv.ParseInt(qs, 10, 32)
	if topic == "" || err != nil || qid < 0 {
		return nil, fmt.Errorf("%w: REAL_TOPIC %q REAL_QID %q", errDropped, topic, qs)
	}
	return &commitlog.Message{
		Topic:                     topic,
		QueueID:                   int32(qid),
		Flag:                      parked.Flag,
		SysFlag:                   parked.SysFlag,
		BornTimestamp:             parked.BornTimestamp,
		BornHost:                  parked.BornHost,
		ReconsumeTimes:            parked.ReconsumeTimes,
		PreparedTransactionOffset: parked.PreparedTransactionOffset,
		Body:                      parked.Body,
		Properties: commitlog.RewriteProperties(parked.Properties, []string{PropRealTopic, PropRealQueueID},
			[2]string{PropEnqueueMs, strconv.FormatInt(parked.StoreTimestamp, 10)},
			[2]string{PropDequeueMs, strconv.FormatInt(now.UnixMilli(), 10)}),
	}, nil
}
