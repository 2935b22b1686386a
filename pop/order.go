package pop

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

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

// orderIdleSpan is how long after its pop an orderly batch is forgotten,
// as RocketMQ's ConsumerOrderInfoManager.autoClean drops an OrderInfo 24 h
// after its last pop: the next pop of the queue starts a batch afresh,
// its messages counted from 0 (their reconsume times, a gRPC client's
// delivery attempts).
const orderIdleSpan = 24 * 60 * 60 * 1000

// liveOrder is store.Order without a batch forgotten for idleness at now.
func (s *Service) liveOrder(group, topic string, queueID int32, now int64) (kvindex.OrderState, bool, error) {
	st, ok, err := s.store.Order(group, topic, queueID)
	if err != nil || !ok || now-st.PopTime > orderIdleSpan {
		return kvindex.OrderState{}, false, err
	}
	return st, true, nil
}

// orderBlocked reports whether a group's orderly batch locks a queue now,
// for a NOTIFICATION, which has no invisible time (RocketMQ asks with 0).
func (s *Service) orderBlocked(group, topic string, queueID int32, attemptID string) (bool, error) {
	now := s.now()
	st, ok, err := s.liveOrder(group, topic, queueID, now)
	if err != nil || !ok {
		return false, err
	}
	return blocked(&st, attemptID, 0, now), nil
}

// popOrderQueue pops the next batch of one queue for an orderly consumer,
// noting in dur what its commit still needs to be durable.
func (s *Service) popOrderQueue(req PopRequest, src source, remain int, wait bool, res *PopResult, info *InfoBuilder, dur *durability) (skipped bool, err error) {
	if remain <= 0 {
		// The pop is full: what the queue holds counts as left behind,
		// unless a batch locks it (see popOrderLocked).
		st, ok, err := s.liveOrder(req.Group, src.topic, src.queueID, res.PopTime)
		if err != nil || (ok && blocked(&st, req.AttemptID, req.InvisibleTime, res.PopTime)) {
			return false, err
		}
		pos, err := s.pinStart(req, src, dur)
		if err != nil {
			return false, err
		}
		return false, s.addRestFrom(src, pos, res)
	}
	unlock, ok := s.queueLock(req.Group, src, wait)
	if !ok {
		return true, nil
	}
	defer unlock()
	// As popHeld: no deletion of the topic between the reads and the
	// writes, and no write once it was deleted.
	release, live, err := s.holdLive(req, src.topic)
	defer release()
	if err != nil || !live {
		return false, err
	}
	return false, s.popOrderLocked(req, src, remain, res, info, dur)
}

// popOrderLocked pops one queue for an orderly consumer; the caller holds
// the queue's lock.
func (s *Service) popOrderLocked(req PopRequest, src source, remain int, res *PopResult, info *InfoBuilder, dur *durability) error {
	prev, hasPrev, err := s.liveOrder(req.Group, src.topic, src.queueID, res.PopTime)
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
	s.noteCutQueue(req.Group, src, pos, known, &r)
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
	var prevp *kvindex.OrderState
	if hasPrev {
		prevp = &prev
	}
	st.Messages, st.Carried = mergeOrderCounts(prevp, req.AttemptID, r.offsets)
	addOrderCounts(info, src, &st)
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
		res.add(src.topic, rec)
	}
	return nil
}

// mergeOrderCounts gives the messages of a new batch of offsets replacing
// prev (nil when the queue had none) their consumption counts, and
// returns the counts carried for offsets outside it, as RocketMQ's
// OrderInfo.mergeOffsetConsumedCount does. A pop repeating prev's
// attemptId keeps prev's count table as it is: each message gets the
// count the table has for it (none for one prev did not hold), and the
// table's counts of offsets the new batch lacks are carried, so that a
// later retry delivering them again finds them. Any other pop counts one
// more for each message prev held and forgets the rest.
func mergeOrderCounts(prev *kvindex.OrderState, attemptID string, offsets []int64) ([]kvindex.OrderMessage, []kvindex.OrderCount) {
	msgs := make([]kvindex.OrderMessage, len(offsets))
	for i, off := range offsets {
		msgs[i].QueueOffset = off
	}
	if prev == nil {
		return msgs, nil
	}
	if prev.AttemptID == "" || prev.AttemptID != attemptID {
		held := make(map[int64]int32, len(prev.Messages))
		for _, m := range prev.Messages {
			held[m.QueueOffset] = m.Consumed
		}
		for i := range msgs {
			if c, ok := held[msgs[i].QueueOffset]; ok {
				msgs[i].Consumed = c + 1
			}
		}
		return msgs, nil
	}
	table := make(map[int64]int32, len(prev.Messages)+len(prev.Carried))
	for _, m := range prev.Messages {
		if m.Consumed > 0 {
			table[m.QueueOffset] = m.Consumed
		}
	}
	for _, c := range prev.Carried {
		table[c.QueueOffset] = c.Consumed
	}
	for i := range msgs {
		if c, ok := table[msgs[i].QueueOffset]; ok {
			msgs[i].Consumed = c
			delete(table, msgs[i].QueueOffset)
		}
	}
	carried := make([]kvindex.OrderCount, 0, len(table))
	for off, c := range table {
		carried = append(carried, kvindex.OrderCount{QueueOffset: off, Consumed: c})
	}
	slices.SortFunc(carried, func(a, b kvindex.OrderCount) int { return cmp.Compare(a.QueueOffset, b.QueueOffset) })
	// The table never outgrows the batch it was built for (at most
	// MaxOrderBatch); should a stored one have, the highest offsets,
	// the next to be delivered again, are kept.
	if n := len(carried); n > kvindex.MaxOrderBatch {
		carried = carried[n-kvindex.MaxOrderBatch:]
	}
	if len(carried) == 0 {
		carried = nil
	}
	return msgs, carried
}

// addOrderCounts appends the orderCountInfo entries of a batch, as
// RocketMQ's ConsumerOrderInfoManager.update writes them: one per offset
// of its count table (the messages counted before and the carried
// counts), then the queue's entry for older clients: the smallest count of
// the table, or 0 when the table and the batch differ in size (RocketMQ's
// test for messages never delivered before; a carried count can make the
// sizes agree while a message has none, and RocketMQ then reports the
// smallest count all the same).
func addOrderCounts(info *InfoBuilder, src source, st *kvindex.OrderState) {
	minCount := int32(math.MaxInt32)
	counted := 0
	note := func(off int64, c int32) {
		info.AddOrderOffset(src.flag, src.queueID, off, c)
		minCount = min(minCount, c)
		counted++
	}
	for _, m := range st.Messages {
		if m.Consumed > 0 {
			note(m.QueueOffset, m.Consumed)
		}
	}
	for _, c := range st.Carried {
		note(c.QueueOffset, c.Consumed)
	}
	if counted != len(st.Messages) {
		minCount = 0
	}
	info.AddOrderQueue(src.flag, src.queueID, minCount)
}

// ackOrder acknowledges messages of a queue's orderly batch and moves the
// committed offset to the first unacknowledged one (RocketMQ's
// commitAndNext, once per offset). An offset below the committed offset
// or a popTime of an earlier batch changes nothing. An offset that is not
// in the batch changes nothing either, and the ack returns ErrIllegalOffset
// once the other offsets are acknowledged: RocketMQ's AckMessageProcessor
// marks the response MESSAGE_ILLEGAL and goes on with the next offset.
// Only a queue that never had an orderly batch commits the offset after
// the acknowledged one: a batch stays recorded, all acknowledged, until
// the next orderly pop of the queue replaces it (as RocketMQ keeps its
// OrderInfo), so a late ack of an expired batch cannot move the offset
// past messages a later batch has not had acknowledged.
func (s *Service) ackOrder(group, topic string, queueID int32, offsets []int64, popTime int64) (AckResult, error) {
	var dur durability
	defer dur.release()
	res, err := s.ackOrderUnsynced(group, topic, queueID, offsets, popTime, true, &dur)
	if err != nil && !errors.Is(err, ErrIllegalOffset) {
		return res, err
	}
	if ferr := dur.finish(s); ferr != nil {
		return res, ferr
	}
	s.cfg.OnQueueReady(topic, group, queueID)
	return res, err
}

// ackOrderUnsynced is ackOrder leaving what its commit needs to be
// durable to dur (durable when last is set) and the wake-up of the
// queue's pops to the caller, after dur's finish. An error wrapping
// ErrIllegalOffset comes with the other offsets acknowledged; any other
// error, with nothing changed.
func (s *Service) ackOrderUnsynced(group, topic string, queueID int32, offsets []int64, popTime int64, last bool, dur *durability) (AckResult, error) {
	var res AckResult
	var stray []int64
	unlock := s.lock(group, topic, queueID)
	err := func() error {
		defer unlock()
		hold := s.store.HoldTopic(topic)
		defer hold.Release()
		committed, _, err := s.cfg.Offsets.Get(group, topic, queueID)
		if err != nil {
			return err
		}
		st, ok, err := s.store.Order(group, topic, queueID)
		if err != nil {
			return err
		}
		if !ok {
			// No batch to ack, maybe because the topic was deleted since
			// the broker checked it: the offset is committed only for a
			// topic that exists.
			if gone, err := s.topicGone(topic); err != nil || gone {
				return err
			}
		}
		next := int64(-1)
		for _, off := range offsets {
			switch i := orderAckIndex(&st, ok, off, committed, popTime); {
			case i == ackNoBatch:
				// No batch known: RocketMQ commits the offset after it.
				next = max(next, off+1)
			case i == ackStray:
				stray = append(stray, off)
			case i >= 0:
				st.Acked |= 1 << i
				res.Deleted++
				next = nextOrderOffset(&st)
			}
		}
		if next < 0 {
			return nil
		}
		s.readState()
		return s.commitOrderAck(group, topic, queueID, &st, ok, res.Deleted > 0, next, last, dur)
	}()
	if err != nil {
		return res, fmt.Errorf("orderly ack %s on %s/%d: %w", group, topic, queueID, err)
	}
	if len(stray) > 0 {
		s.log.Warn().Str("group", group).Str("topic", topic).Int32("queue", queueID).Int64("popTime", popTime).
			Ints64("offsets", stray).Msg("orderly ack of offsets outside the queue's batch")
		return res, fmt.Errorf("orderly ack %s on %s/%d: %w: %v", group, topic, queueID, ErrIllegalOffset, stray)
	}
	return res, nil
}

// What orderAckIndex answers for an offset that acknowledges nothing.
const (
	ackSkip    = -1 // below the committed offset, or of another batch
	ackNoBatch = -2 // the queue has no batch: commit the offset after it
	ackStray   = -3 // not in the batch (RocketMQ: MESSAGE_ILLEGAL)
)

// orderAckIndex is the index in st (ok: the queue has a batch) of the
// message an orderly ack of off with popTime acknowledges, or one of
// ackSkip, ackNoBatch and ackStray.
func orderAckIndex(st *kvindex.OrderState, ok bool, off, committed, popTime int64) int {
	switch {
	case off < committed:
		return ackSkip
	case !ok:
		return ackNoBatch
	case popTime != st.PopTime:
		return ackSkip
	}
	for i, m := range st.Messages {
		if m.QueueOffset == off {
			return i
		}
	}
	return ackStray
}

// commitOrderAck writes what an orderly ack of a queue changed: its batch
// st (ok: the queue has one; changed: the ack set bits of it) and the
// committed offset next; then moves or clears the queue's lock timer.
func (s *Service) commitOrderAck(group, topic string, queueID int32, st *kvindex.OrderState, ok, changed bool, next int64, last bool, dur *durability) error {
	b := s.store.NewBatch()
	defer b.Close()
	if ok && changed {
		if err := b.SetOrder(st); err != nil {
			return err
		}
	}
	if err := b.SetCommitted(group, topic, queueID, next); err != nil {
		return err
	}
	if err := dur.commit(b, last); err != nil {
		return err
	}
	switch {
	case ok && st.Acked == 1<<len(st.Messages)-1:
		s.orderWakes.clear(group, topic, queueID)
	case ok && changed:
		s.orderWakes.set(st, s.now())
	}
	return nil
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
// popTime, as RocketMQ's ChangeInvisibleTimeProcessor answers. It answers
// so too when the batch does not hold the message (another batch's
// handle, an offset outside it, no batch): RocketMQ's
// updateNextVisibleTime then changes nothing, and the answer does not
// depend on it. An offset below the committed one changes nothing and is
// answered with zero fields: RocketMQ's processor returns its response
// without setting them, and its header's fields are primitives, written
// as 0.
func (s *Service) changeOrder(group, topic string, queueID int32, offset int64, h Handle, invisibleTime int64) (ChangeResult, error) {
	var res ChangeResult
	var dur durability
	defer dur.release()
	unlock := s.lock(group, topic, queueID)
	err := func() error {
		defer unlock()
		hold := s.store.HoldTopic(topic)
		defer hold.Release()
		committed, _, err := s.cfg.Offsets.Get(group, topic, queueID)
		if err != nil || offset < committed {
			return err
		}
		deadline := s.now() + invisibleTime
		st, ok, err := s.store.Order(group, topic, queueID)
		if err != nil {
			return err
		}
		res = ChangeResult{PopTime: h.PopTime, InvisibleTime: deadline - h.PopTime, ReviveQID: h.ReviveQID}
		if !ok || st.PopTime != h.PopTime {
			return nil
		}
		for i := range st.Messages {
			if st.Messages[i].QueueOffset == offset {
				st.Messages[i].NextVisibleAt = deadline
				res.Changed = true
			}
		}
		if !res.Changed {
			return nil
		}
		s.readState()
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
