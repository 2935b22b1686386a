package txn

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/internal/repeatlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// An acting master (RocketMQ 5's slave acting master) cannot check its
// copy of the master's open transactions: it cannot store their ends. As
// RocketMQ's TransactionalMessageServiceImpl.check does on an acting
// master, it hands each open half, not yet ended by an op, to another
// broker group as a half of its own there (EscapeHalves), whose checker
// then asks the producer; the half is forgotten here once sent.

// EscapePut sends a message to another broker group (the broker's escape
// bridge): nil once that group stored it.
type EscapePut func(ctx context.Context, m *commitlog.Message) error

// RunEscape is the acting master's checker: until ctx ends, every
// transactionCheckInterval (at most every second, as Run), it escapes the
// open halves with put (EscapeHalves). A failed pass is retried by the
// next one, and logged the first time, then at most every
// repeatlog.DefaultInterval while passes keep failing (a half of a topic
// no other broker group has fails every pass), and once when a pass
// succeeds again.
func (s *Service) RunEscape(ctx context.Context, put EscapePut) {
	fails := repeatlog.New(s.log, repeatlog.DefaultInterval, s.now)
	periodic.Run(ctx, min(s.limits().CheckInterval, maxScanInterval), func(ctx context.Context) {
		s.escapeRound(ctx, put, fails)
	})
}

// escapeRound is one pass of RunEscape, its failure logged through fails.
func (s *Service) escapeRound(ctx context.Context, put EscapePut, fails *repeatlog.Limiter) {
	if _, err := s.EscapeHalves(ctx, put); err != nil {
		if ctx.Err() == nil {
			fails.Failed().Err(err).Msg("escape of open transactions")
		}
		return
	}
	fails.Recovered().Msg("escape of open transactions: succeeding again")
}

// escapeBatch bounds the open halves one escape pass lists: the next
// pass lists the following ones, those sent being forgotten.
const escapeBatch = 4096

// EscapeHalves sends the open halves of the index (the first
// escapeBatch), in CommitLog order,
// through put as the prepared message of its real topic (RocketMQ's
// buildTransactionalMessageFromHalfMessage: the half's properties with
// TRAN_MSG=true, without REAL_QID nor TRAN_PREPARED_QUEUE_OFFSET, the
// transaction type PREPARED), and forgets each sent from this index (not
// synced before the pass's end: a crash sends it again). A half ended by
// an op or gone from the CommitLog is forgotten without a send. A half
// put fails stays, for the next pass (RocketMQ's gives up a half here
// after ten failed sends in a row); it returns how many it sent.
func (s *Service) EscapeHalves(ctx context.Context, put EscapePut) (int, error) {
	var open []kvindex.TxnHalf
	if err := s.state.OpenHalvesFrom(0, func(h kvindex.TxnHalf) bool {
		open = append(open, h)
		return ctx.Err() == nil && len(open) < escapeBatch
	}); err != nil {
		return 0, fmt.Errorf("list open halves: %w", err)
	}
	sent, failed := 0, 0
	var first error
	for _, h := range open {
		if ctx.Err() != nil {
			break
		}
		ok, err := s.escapeHalf(ctx, h, put)
		if err != nil {
			failed++
			first = cmp.Or(first, err)
			continue
		}
		if ok {
			sent++
		}
	}
	var err error
	if failed > 0 {
		err = fmt.Errorf("%d open halves not escaped (the next pass tries again), the first: %w", failed, first)
	}
	if len(open) > 0 {
		err = errors.Join(err, s.state.Sync())
	}
	return sent, err
}

// escapeHalf escapes one open half under its lock; ok reports a send.
func (s *Service) escapeHalf(ctx context.Context, h kvindex.TxnHalf, put EscapePut) (bool, error) {
	unlock := s.lock(h.PhyOffset)
	defer unlock()
	if _, ended, err := s.state.Ended(h.PhyOffset); err != nil {
		return false, err
	} else if ended {
		return false, s.state.ForgetHalf(h.PhyOffset)
	}
	if _, open, err := s.state.Half(h.PhyOffset); err != nil || !open {
		return false, err
	}
	half, ok, err := s.store.Read(h.PhyOffset)
	if commitlog.NoRecordAt(err) {
		ok, err = false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read half at %d: %w", h.PhyOffset, err)
	}
	if !ok || half.Topic != meta.TransHalfTopic {
		return false, s.state.ForgetHalf(h.PhyOffset)
	}
	if byOp, err := s.endedByOp(&half); err != nil {
		return false, err
	} else if byOp {
		return false, s.state.ForgetHalf(h.PhyOffset)
	}
	m, err := escapedHalf(&half)
	if err != nil {
		s.log.Error().Err(err).Int64("half", h.PhyOffset).Msg("open half without a real topic: not escaped, forgotten")
		return false, s.state.ForgetHalf(h.PhyOffset)
	}
	if err := put(ctx, m); err != nil {
		return false, fmt.Errorf("escape the half at %d: %w", h.PhyOffset, err)
	}
	uniq, _ := commitlog.LookupProperty(half.Properties, propUniqKey)
	s.log.Info().Int64("half", h.PhyOffset).Str("msgId", uniq).Str("topic", m.Topic).
		Msg("open transaction escaped to another broker group")
	return true, s.state.ForgetHalf(h.PhyOffset)
}

// escapedHalf is the prepared message of a half's real topic that an
// acting master sends to another group, as RocketMQ's
// TransactionalMessageUtil.buildTransactionalMessageFromHalfMessage
// builds it.
func escapedHalf(half *commitlog.Message) (*commitlog.Message, error) {
	topic, qid, ok := commitlog.RealDestination(half.Properties)
	if !ok {
		return nil, errors.New("no valid REAL_TOPIC/REAL_QID")
	}
	return &commitlog.Message{Topic: topic, QueueID: qid, Body: half.Body, Flag: half.Flag,
		BornTimestamp: half.BornTimestamp, BornHost: half.BornHost,
		SysFlag: half.SysFlag&^(commitlog.TransactionPrepared|commitlog.TransactionCommit|commitlog.TransactionRollback) | commitlog.TransactionPrepared,
		Properties: commitlog.RewriteProperties(half.Properties,
			[]string{commitlog.PropertyRealQueueID, PropPreparedQueueOffset},
			[2]string{PropTransactionPrepared, "true"})}, nil
}
