package pop

import (
	"fmt"
	"math"

	"github.com/rocketkv/rocketkv/kvindex"
)

// Orderly pops (RocketMQ's ConsumerOrderInfoManager on the KV path): a
// queue delivers one batch at a time per group. The batch is kept in the
// 0x53 keyspace; until each of its messages is acknowledged or past its
// deadline the queue is locked (pops of it return nothing, unless they
// repeat the batch's attemptId). An acknowledged batch stays until the
// next pop replaces it, so that late acks of older batches commit nothing. An expired batch is read again from the
// committed offset, and messages delivered before count one more
// consumption. No checkpoints are written and nothing is revived:
// an orderly consumer handles its own retries.

// blocked reports whether st locks its queue at now for a pop with
// attemptID and invisible time invisible (ms). A batch without an
// invisible time of its own (one imported from a RocketMQ version that
// did not record it) is judged with the pop's, as RocketMQ's
// OrderInfo.needBlock does.
func blocked(st *kvindex.OrderState, attemptID string, invisible, now int64) bool {
	if len(st.Messages) == 0 || (st.AttemptID != "" && st.AttemptID == attemptID) {
		return false
	}
	if st.InvisibleTime > 0 {
		invisible = st.InvisibleTime
	}
	for i, m := range st.Messages {
		if st.Acked&(1<<i) != 0 {
			continue
		}
		deadline := st.PopTime + invisible
		if m.NextVisibleAt != 0 {
			deadline = m.NextVisibleAt
		}
		if now < deadline {
			return true
		}
	}
	return false
}

// orderBlocked reports whether a group's orderly batch locks a queue now,
// for a NOTIFICATION, which has no invisible time (RocketMQ asks with 0).
func (s *Service) orderBlocked(group, topic string, queueID int32, attemptID string) (bool, error) {
	st, ok, err := s.store.Order(group, topic, queueID)
	if err != nil || !ok {
		return false, err
	}
	return blocked(&st, attemptID, 0, s.now()), nil
}

// popOrderQueue pops the next batch of one queue for an orderly consumer,
// noting in dur what its commit still needs to be durable.
func (s *Service) popOrderQueue(req PopRequest, src source, remain int, wait bool, res *PopResult, info *InfoBuilder, dur *durability) (skipped bool, err error) {
	if remain <= 0 {
		// The pop is full: what the queue holds counts as left behind,
		// unless a batch locks it (see popOrderLocked).
		st, ok, err := s.store.Order(req.Group, src.topic, src.queueID)
		if err != nil || (ok && blocked(&st, req.AttemptID, req.InvisibleTime, res.PopTime)) {
			return false, err
		}
		return false, s.addRest(req, src, res)
	}
	unlock, ok := s.queueLock(req.Group, src, wait)
	if !ok {
		return true, nil
	}
	defer unlock()
	return false, s.popOrderLocked(req, src, remain, res, info, dur)
}

// popOrderLocked pops one queue for an orderly consumer; the caller holds
// the queue's lock.
func (s *Service) popOrderLocked(req PopRequest, src source, remain int, res *PopResult, info *InfoBuilder, dur *durability) error {
	prev, hasPrev, err := s.store.Order(req.Group, src.topic, src.queueID)
	if err != nil {
		return err
	}
	if hasPrev && blocked(&prev, req.AttemptID, req.InvisibleTime, res.PopTime) {
		// Locked by another batch: what it holds back is not counted as
		// left behind (RocketMQ since 5.3.1: no pop of the group can get
		// it, so it is no reason to wake held pops).
		return nil
	}
	pos, known, err := s.startOffset(req.Group, src.topic, src.queueID, req.InitMode, false)
	if err != nil {
		return err
	}
	r, err := s.readQueue(src.topic, src.queueID, pos, min(remain, kvindex.MaxOrderBatch), s.cfg.MaxTransferBytes, src.filter, false)
	if err != nil {
		return err
	}
	res.RestNum += max(r.max-r.next, 0)
	res.noteRead(r.lastPhy)
	b := s.store.NewBatch()
	defer b.Close()
	if len(r.offsets) == 0 {
		if known && r.next == pos {
			return nil
		}
		// Nothing matched: the consumer is done up to next.
		if err := b.SetCommitted(req.Group, src.topic, src.queueID, r.next); err != nil {
			return err
		}
		return dur.commit(b, false)
	}
	st := kvindex.OrderState{
		Group: req.Group, Topic: src.topic, QueueID: src.queueID,
		PopTime: res.PopTime, InvisibleTime: req.InvisibleTime, AttemptID: req.AttemptID,
	}
	prevCount := map[int64]int32{}
	if hasPrev {
		for _, m := range prev.Messages {
			prevCount[m.QueueOffset] = m.Consumed
		}
	}
	sameAttempt := hasPrev && prev.AttemptID != "" && prev.AttemptID == req.AttemptID
	minCount := int32(math.MaxInt32)
	counted := 0
	for _, off := range r.offsets {
		m := kvindex.OrderMessage{QueueOffset: off}
		if c, seen := prevCount[off]; seen {
			m.Consumed = c
			if !sameAttempt {
				m.Consumed = c + 1
			}
		}
		if m.Consumed > 0 {
			info.AddOrderOffset(src.flag, src.queueID, off, m.Consumed)
			minCount = min(minCount, m.Consumed)
			counted++
		}
		st.Messages = append(st.Messages, m)
	}
	if counted != len(st.Messages) {
		minCount = 0
	}
	info.AddOrderQueue(src.flag, src.queueID, minCount)
	if err := b.SetOrder(&st); err != nil {
		return err
	}
	if err := b.SetCommitted(req.Group, src.topic, src.queueID, r.from); err != nil {
		return err
	}
	// A batch that fills the pop is its last write.
	if err := dur.commit(b, len(r.offsets) >= remain); err != nil {
		return err
	}
	s.orderWakes.set(&st, res.PopTime)
	info.AddQueue(src.flag, src.queueID, r.from, r.offsets)
	for _, rec := range r.records {
		res.add(rec)
	}
	return nil
}

// ackOrder acknowledges messages of a queue's orderly batch and moves the
// committed offset to the first unacknowledged one (RocketMQ's
// commitAndNext). An offset below the committed offset or a popTime of an
// earlier batch changes nothing; an offset that is not in the batch is
// ErrIllegalOffset. Only a queue that never had an orderly batch commits
// the offset after the acknowledged one: a batch stays recorded, all
// acknowledged, until the next orderly pop of the queue replaces it (as
// RocketMQ keeps its OrderInfo), so a late ack of an expired batch cannot
// move the offset past messages a later batch has not had acknowledged.
func (s *Service) ackOrder(group, topic string, queueID int32, offsets []int64, popTime int64) (AckResult, error) {
	var dur durability
	defer dur.release()
	res, err := s.ackOrderUnsynced(group, topic, queueID, offsets, popTime, true, &dur)
	if err != nil {
		return res, err
	}
	if err := dur.finish(s); err != nil {
		return res, err
	}
	if !s.cfg.QuietOrderLockRelease {
		s.cfg.OnQueueReady(topic, queueID)
	}
	return res, nil
}

// ackOrderUnsynced is ackOrder leaving what its commit needs to be
// durable to dur (durable when last is set) and the wake-up of the
// queue's pops to the caller, after dur's finish.
func (s *Service) ackOrderUnsynced(group, topic string, queueID int32, offsets []int64, popTime int64, last bool, dur *durability) (AckResult, error) {
	var res AckResult
	unlock := s.lock(group, topic, queueID)
	err := func() error {
		defer unlock()
		committed, _, err := s.cfg.Offsets.Get(group, topic, queueID)
		if err != nil {
			return err
		}
		st, ok, err := s.store.Order(group, topic, queueID)
		if err != nil {
			return err
		}
		b := s.store.NewBatch()
		defer b.Close()
		next := int64(-1)
		for _, off := range offsets {
			if off < committed {
				continue
			}
			if !ok {
				// No batch known: RocketMQ commits the offset after it.
				next = max(next, off+1)
				continue
			}
			if popTime != st.PopTime {
				continue
			}
			i := -1
			for j, m := range st.Messages {
				if m.QueueOffset == off {
					i = j
				}
			}
			if i < 0 {
				return fmt.Errorf("%w: %d (batch %v)", ErrIllegalOffset, off, st.Messages)
			}
			st.Acked |= 1 << i
			res.Deleted++
			next = nextOrderOffset(&st)
		}
		if next < 0 {
			return nil
		}
		done := st.Acked == 1<<len(st.Messages)-1
		if ok && res.Deleted > 0 {
			if err := b.SetOrder(&st); err != nil {
				return err
			}
		}
		if err := b.SetCommitted(group, topic, queueID, next); err != nil {
			return err
		}
		if err := dur.commit(b, last); err != nil {
			return err
		}
		if ok && done {
			s.orderWakes.clear(group, topic, queueID)
		} else if ok && res.Deleted > 0 {
			s.orderWakes.set(&st, s.now())
		}
		return nil
	}()
	if err != nil {
		return res, fmt.Errorf("orderly ack %s on %s/%d: %w", group, topic, queueID, err)
	}
	return res, nil
}

// nextOrderOffset is the first unacknowledged offset of a batch, or the
// offset after its last message when all are acknowledged.
func nextOrderOffset(st *kvindex.OrderState) int64 {
	for i, m := range st.Messages {
		if st.Acked&(1<<i) == 0 {
			return m.QueueOffset
		}
	}
	return st.Messages[len(st.Messages)-1].QueueOffset + 1
}

// changeOrder moves one message's deadline within an orderly batch; the
// handle keeps its popTime and gets invisibleTime = new deadline -
// popTime, as RocketMQ answers.
func (s *Service) changeOrder(group, topic string, queueID int32, offset int64, h Handle, invisibleTime int64) (ChangeResult, error) {
	res := ChangeResult{PopTime: h.PopTime, InvisibleTime: h.InvisibleTime, ReviveQID: h.ReviveQID}
	var dur durability
	defer dur.release()
	unlock := s.lock(group, topic, queueID)
	err := func() error {
		defer unlock()
		committed, _, err := s.cfg.Offsets.Get(group, topic, queueID)
		if err != nil || offset < committed {
			return err
		}
		st, ok, err := s.store.Order(group, topic, queueID)
		if err != nil || !ok || st.PopTime != h.PopTime {
			return err
		}
		deadline := s.now() + invisibleTime
		for i := range st.Messages {
			if st.Messages[i].QueueOffset == offset {
				st.Messages[i].NextVisibleAt = deadline
				res.Changed = true
			}
		}
		if !res.Changed {
			return nil
		}
		res.InvisibleTime = deadline - h.PopTime
		b := s.store.NewBatch()
		defer b.Close()
		if err := b.SetOrder(&st); err != nil {
			return err
		}
		if err := dur.commit(b, true); err != nil {
			return err
		}
		s.orderWakes.set(&st, s.now())
		return nil
	}()
	if err != nil {
		return res, fmt.Errorf("change invisible time of orderly %s on %s/%d@%d: %w", group, topic, queueID, offset, err)
	}
	return res, dur.finish(s)
}
