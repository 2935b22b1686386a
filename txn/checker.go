package txn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// maxScanInterval bounds the time between two checker passes, so a half
// is first checked close to its deadline even under a long
// transactionCheckInterval.
const maxScanInterval = time.Second

// Run is the checker: until ctx ends, it passes over the open halves every
// second (or every transactionCheckInterval when shorter, as configured at
// the start) and checks those due. A failed pass is logged and the next
// one tries again.
func (s *Service) Run(ctx context.Context) {
	periodic.Run(ctx, min(s.cfg.CheckInterval, maxScanInterval), func(ctx context.Context) {
		if _, err := s.CheckDue(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("transaction check pass")
		}
	})
}

// PassStats counts what one checker pass did.
type PassStats struct {
	// Checked halves were asked about (a producer of the group was
	// connected).
	Checked int
	// Unasked halves were due but no producer of their group was
	// connected; the check counts all the same, as in RocketMQ.
	Unasked int
	// Discarded halves were given up after transactionCheckMax checks:
	// in the pass of the last one (counted in Checked or Unasked too),
	// or, checked enough before, without a check.
	Discarded int
	// Expired halves were born longer than fileReservedTime ago: given up
	// without a check, as discarded ones are (RocketMQ's needSkip).
	Expired int
	// Ended halves were found ended (a crash or a race left their open
	// record) and forgotten.
	Ended int
	// Gone halves had left the CommitLog.
	Gone int
	// Immune halves were due but, at the pass, still within their check
	// immunity (counted from their born time): put off to its end.
	Immune int
	// Unflushed halves were committed, their message stored but not yet
	// confirmed durable: not asked about, they end once it is.
	Unflushed int
}

// CheckDue makes one pass over the open halves: each whose next check
// time has passed is asked about (its check count and next check time
// rewritten), and given up once that count reaches transactionCheckMax.
func (s *Service) CheckDue(ctx context.Context) (PassStats, error) {
	var st PassStats
	now := s.now().UnixMilli()
	// Halves are indexed in CommitLog order, so every half before the
	// committed offset read now is visible to a listing that follows, and
	// none can appear before the first open one it finds.
	next := int64(math.MaxInt64)
	if s.cfg.Dispatched != nil {
		next = s.cfg.Dispatched()
	}
	if s.listed && now < min(s.nextDue, s.addedDue.Load()) {
		// Nothing listed before can be due, and nothing indexed since:
		// listing would walk every open half, and the deletion marks of
		// every half ended after the oldest open one, for nothing (a
		// million of them cost a fifth of a second a pass).
		s.forgetUnlisted(next, false)
		return st, s.sweepUnsettled()
	}
	// Before the listing: a half indexed while it runs, or indexed before
	// but in a batch not yet committed, is listed by it or counted for
	// the next pass.
	s.forgetUnlisted(next, true)
	s.listed = false
	s.listings++
	if s.cfg.Dispatched == nil {
		next = s.scanFrom
	}
	first := true
	var due []kvindex.TxnHalf
	nextDue := int64(math.MaxInt64)
	err := s.state.OpenHalvesFrom(s.scanFrom, func(h kvindex.TxnHalf) bool {
		if first {
			next, first = min(next, h.PhyOffset), false
		}
		if h.NextCheckAt <= now {
			due = append(due, h)
		} else {
			nextDue = min(nextDue, h.NextCheckAt)
		}
		return ctx.Err() == nil
	})
	if err != nil {
		return st, fmt.Errorf("list open halves: %w", err)
	}
	if ctx.Err() == nil {
		s.scanFrom = next
	}
	var errs []error
	putOff := int64(math.MaxInt64)
	for _, h := range due {
		if ctx.Err() != nil {
			break
		}
		if err := s.checkHalf(ctx, h, &st, &putOff); err != nil {
			errs = append(errs, err)
		}
	}
	if len(due) > 0 {
		// One sync for the pass's check counts: transactionCheckMax then
		// holds across a crash, but for the checks of the pass it ends.
		errs = append(errs, s.state.Sync())
		// A checked half is due again a check interval from now at the
		// earliest; an unflushed commit's half stays due.
		nextDue = min(nextDue, now+s.limits().CheckInterval.Milliseconds(), putOff)
		if st.Unflushed > 0 {
			nextDue = now
		}
	}
	// A pass cut short or failed part way lists again.
	s.nextDue, s.listed = nextDue, ctx.Err() == nil && errors.Join(errs...) == nil
	errs = append(errs, s.sweepUnsettled())
	return st, errors.Join(errs...)
}

// halfDue is a half HalfHook recorded and its first check time.
type halfDue struct{ phy, due int64 }

// minUnlistedPrune is the fewest halves HalfHook records before it drops
// those below the dispatch progress itself (Service.pruneAt).
const minUnlistedPrune = 4096

// dropDispatched drops the halves recorded below dispatched, whose
// batches are committed. The caller holds addedMu.
func (s *Service) dropDispatched(dispatched int64) {
	s.unlisted = slices.DeleteFunc(s.unlisted, func(h halfDue) bool { return h.phy < dispatched })
}

// forgetUnlisted drops the halves HalfHook recorded below dispatched, the
// dispatch progress: their batches are committed, so a listing begun now
// sees them. With listing set (a listing begins), addedDue becomes the
// earliest due time of those left, which the listing cannot see; without
// it addedDue stays, as the halves dropped are not listed yet.
func (s *Service) forgetUnlisted(dispatched int64, listing bool) {
	s.addedMu.Lock()
	defer s.addedMu.Unlock()
	s.dropDispatched(dispatched)
	if !listing {
		return
	}
	due := int64(math.MaxInt64)
	for _, h := range s.unlisted {
		due = min(due, h.due)
	}
	s.addedDue.Store(due)
}

// checkHalf checks one due half under its lock. A half it puts off
// lowers putOff to its next check time.
func (s *Service) checkHalf(ctx context.Context, h kvindex.TxnHalf, st *PassStats, putOff *int64) error {
	unlock := s.lock(h.PhyOffset)
	defer unlock()
	if _, ended, err := s.state.Ended(h.PhyOffset); err != nil {
		return err
	} else if ended {
		st.Ended++
		s.forgetUnsettled(h.PhyOffset)
		return s.state.ForgetHalf(h.PhyOffset)
	}
	if cur, open, err := s.state.Half(h.PhyOffset); err != nil {
		return err
	} else if !open {
		return nil // ended while the pass listed it
	} else {
		h = cur
	}
	half, ok, err := s.store.Read(h.PhyOffset)
	if commitlog.NoRecordAt(err) {
		s.log.Error().Err(err).Int64("half", h.PhyOffset).Msg("open half damaged in the CommitLog; its transaction is forgotten")
		ok, err = false, nil
	}
	if err != nil {
		return fmt.Errorf("read half at %d: %w", h.PhyOffset, err)
	}
	if !ok || half.Topic != meta.TransHalfTopic {
		st.Gone++
		s.forgetUnsettled(h.PhyOffset)
		return s.state.ForgetHalf(h.PhyOffset)
	}
	if sc, ok := s.unsettledCommit(h.PhyOffset); ok {
		// Committed, its message stored: asking the producer would
		// store it again. The transaction ends once it is durable and
		// indexed.
		if err := s.settle(ctx, sc); err != nil {
			st.Unflushed++
			return nil
		}
		group, _ := commitlog.LookupProperty(half.Properties, PropProducerGroup)
		uniq, _ := commitlog.LookupProperty(half.Properties, propUniqKey)
		st.Ended++
		return s.recordEnd(ctx, &half, EndRequest{ProducerGroup: group, TranStateTableOffset: h.QueueOffset,
			CommitLogOffset: h.PhyOffset, State: kvindex.TxnCommit, MsgID: uniq}, sc.phy)
	}
	if byOp, err := s.endedByOp(&half); err != nil {
		return err
	} else if byOp {
		st.Ended++
		return s.state.ForgetHalf(h.PhyOffset)
	}
	now, lim := s.now().UnixMilli(), s.limits()
	if carriesCount(&half, h) && int(h.Checks) >= lim.CheckMax {
		// Checked enough before this pass (a maximum lowered since, a
		// give-up that failed, a RocketMQ re-put copy in a migrated
		// store, a half resumed with a count of 0 under a maximum of 0):
		// given up without a check, as RocketMQ's needDiscard does.
		return s.discard(ctx, &half, h, h.Checks, false, st)
	}
	if s.expired(&half, now) {
		// RocketMQ's checker counts the check (needDiscard) before it
		// finds the half too old (needSkip), and gives up the half with
		// that count, one more than the checks asked.
		return s.discard(ctx, &half, h, h.Checks+1, true, st)
	}
	if until, immune := s.immuneUntil(&half, now); immune {
		// Due by an earlier rule (a half born in the future, checked
		// at once until its born time came, an index written before
		// first checks counted from the born time, or a
		// transactionTimeOut raised since): not asked before its
		// immunity ends.
		st.Immune++
		h.NextCheckAt = until
		*putOff = min(*putOff, until)
		return s.state.UpdateHalf(h)
	}
	h.Checks++
	h.NextCheckAt = s.now().Add(lim.CheckInterval).UnixMilli()
	if err := s.state.UpdateHalf(h); err != nil {
		return err
	}
	group, _ := commitlog.LookupProperty(half.Properties, PropProducerGroup)
	body, err := checkBody(&half, h.Checks)
	if err != nil {
		return err
	}
	uniq, _ := commitlog.LookupProperty(half.Properties, propUniqKey)
	c := Check{ProducerGroup: group, TranStateTableOffset: h.QueueOffset, CommitLogOffset: h.PhyOffset,
		MsgID: uniq, TransactionID: uniq, Topic: meta.TransHalfTopic, Body: body}
	if s.ask(c) {
		st.Checked++
	} else {
		st.Unasked++
		s.log.Warn().Str("group", group).Str("msgId", uniq).Int64("half", h.PhyOffset).Int32("checks", h.Checks).
			Msg("transaction check not sent: no producer of the group is connected")
	}
	if int(h.Checks) >= lim.CheckMax {
		// The last check: RocketMQ's pass goes on to the copy it just
		// stored again with this count and gives that up (needDiscard)
		// in the same pass. The producer's answer to this check still
		// commits (End: a late commit of a half given up).
		return s.discard(ctx, &half, h, h.Checks, false, st)
	}
	return nil
}

// carriesCount reports whether RocketMQ's copy of an open half would carry
// TRANSACTION_CHECK_TIMES now: once checked, or when stored with it. Its
// needDiscard compares only a count carried with transactionCheckMax, so
// under a maximum of 0 a half stored without one is asked once, where one
// stored with a count (a RESUME_CHECK_HALF_MESSAGE copy's 0) is given up
// without a check.
func carriesCount(half *commitlog.Message, h kvindex.TxnHalf) bool {
	if h.Checks != 0 {
		return true
	}
	_, ok := checksCarried(half.Properties)
	return ok
}

// discard stores a half given up, after transactionCheckMax checks or
// (expired) for being born longer than fileReservedTime ago, in
// TRANS_CHECK_MAX_TIME_TOPIC with checks as its TRANSACTION_CHECK_TIMES,
// and ends its transaction (its end naming the copy, whose count a late
// commit answering a check carries), once: a copy stored but not yet flushed
// (ErrNotDurable) counts as stored, as RocketMQ's checker moves past a
// half it gave up whatever its put answered.
func (s *Service) discard(ctx context.Context, half *commitlog.Message, h kvindex.TxnHalf, checks int32, expired bool, st *PassStats) error {
	res, err := s.store.Put(ctx, discardedMessage(half, checks))
	copyAt := res.PhyOffset // where the copy is, for a late commit's count (End)
	if commitlog.Unstorable(err) {
		copyAt = 0
		// No retry stores this copy: the transaction is given up all
		// the same, its half left where it is, rather than retried at
		// every pass.
		s.log.Error().Err(err).Int64("half", h.PhyOffset).
			Msg("the copy of a transaction given up cannot be stored in " + meta.TransCheckMaxTopic + "; given up without it")
	} else if errors.Is(err, ErrNotDurable) {
		// The copy is in the log, its flush still running: storing it
		// again at the next pass would give the transaction up twice,
		// each copy one an operator may resume (and its producer then
		// commit) on its own.
		s.log.Warn().Err(err).Int64("half", h.PhyOffset).
			Msg("the copy of a transaction given up is stored in " + meta.TransCheckMaxTopic + ", its flush still pending")
	} else if err != nil {
		return fmt.Errorf("discard half at %d: %w", h.PhyOffset, err)
	}
	if copyAt <= half.PhyOffset {
		copyAt = 0 // not a record stored after the half: none known
	}
	if err := s.state.End(h.PhyOffset, kvindex.TxnEnd{State: kvindex.TxnDiscarded, At: s.now().UnixMilli(), By: copyAt}); err != nil {
		return err
	}
	s.putOp(ctx, half)
	uniq, _ := commitlog.LookupProperty(half.Properties, propUniqKey)
	if expired {
		st.Expired++
		s.log.Warn().Int64("half", h.PhyOffset).Str("msgId", uniq).Int32("checks", h.Checks).
			Time("born", time.UnixMilli(half.BornTimestamp)).
			Msg("transaction given up without a check: its half was born longer than fileReservedTime ago; the half is in " + meta.TransCheckMaxTopic)
		return nil
	}
	st.Discarded++
	s.log.Warn().Int64("half", h.PhyOffset).Str("msgId", uniq).Int32("checks", h.Checks).
		Msg("transaction given up after transactionCheckMax checks; the half is in " + meta.TransCheckMaxTopic)
	return nil
}

// LogMinOffsetChanged forgets the transactions of halves retention
// deleted, and the op keys of the halves before the half queue's minimum;
// register it with the CommitLog's OnMinOffsetChange.
func (s *Service) LogMinOffsetChanged(newMin int64) {
	if err := s.state.DropBelow(newMin); err != nil {
		s.log.Warn().Err(err).Int64("minOffset", newMin).Msg("drop transactions below the CommitLog minimum")
	}
	if s.cfg.HalfQueueMin == nil {
		return
	}
	halfMin, err := s.cfg.HalfQueueMin()
	if err == nil {
		err = s.state.DropOpsBelow(halfMin)
	}
	if err != nil {
		s.log.Warn().Err(err).Int64("minOffset", newMin).Msg("drop transaction ops below the half queue's minimum")
	}
}
