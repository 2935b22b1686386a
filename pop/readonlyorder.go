package pop

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
)

// slaveOrders is what a slave's orderly pops, acks and changes of
// invisible time keep, in memory only, per group and queue (see
// PopReadOnly): the batch the last orderly pop handed out, as a master
// stores it in the 0x53 keyspace (its messages, acknowledgements, moved
// deadlines and consumption counts), and the slave's own committed
// offset, which its orderly pops set to the batch's start and its
// orderly acks move past what they acknowledge.
//
// Apache RocketMQ's slave (the baseline's PopMessageProcessor,
// AckMessageProcessor.ackOrderly and ChangeInvisibleTimeProcessor, which
// check no broker role) keeps the same in its ConsumerOrderInfoManager
// and ConsumerOffsetManager, both in memory: the batch locks the queue
// for the group's other orderly consumers, an orderly ack commits the
// next offset there, and a change of invisible time moves a message's
// deadline. Without them a slave gave two orderly consumers the same
// batch, and a lone consumer its acknowledged batch again.
//
// The slave writes none of it: its committed offsets are its master's,
// copied by the slave sync, which would put the master's over anything
// the slave wrote. Instead, as with what its non-orderly pops handed out
// (handedOut), the copied committed offset and the slave's own are
// combined: a slave's orderly request goes by whichever is further, and
// the own one is forgotten once the copied one reaches it. (RocketMQ's
// sync puts the master's offsets over its slave's own commits whatever
// they are; while the master is down there is no sync, and the two
// agree.) A batch unused for a day is forgotten, as RocketMQ's autoClean
// drops an OrderInfo, and so is everything of a queue that ends before
// the slave's own committed offset (deleted and created again, or cut
// where the slave parted from its master). A restarted slave starts from
// the copied offsets again.
//
// Concurrency: mu guards the map; the requests that read and then change
// a queue's entry hold the queue's stripe lock (Service.lock) between
// the two, so that they change it one at a time.
type slaveOrders struct {
	mu        sync.Mutex
	queues    map[queueKey]*slaveOrder
	nextSweep int64
}

// slaveOrder is one group's queue in slaveOrders.
type slaveOrder struct {
	// batch is the last batch handed out (hasBatch).
	batch    kvindex.OrderState
	hasBatch bool
	// committed is the slave's own committed offset (hasCommitted).
	committed    int64
	hasCommitted bool
}

// slaveOrderSweepEvery is how often the entries of slaveOrders left
// with nothing that counts are dropped.
const slaveOrderSweepEvery = time.Minute

func newSlaveOrders() *slaveOrders {
	return &slaveOrders{queues: map[queueKey]*slaveOrder{}}
}

// get returns a copy of k's entry (empty when there is none) that the
// caller may change and put back.
func (o *slaveOrders) get(k queueKey) slaveOrder {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := o.queues[k]
	if q == nil {
		return slaveOrder{}
	}
	c := *q
	c.batch.Messages = slices.Clone(q.batch.Messages)
	c.batch.Carried = slices.Clone(q.batch.Carried)
	return c
}

// put makes q k's entry at now (ms), dropping it when it keeps nothing;
// once a minute it drops what every other entry no longer needs.
func (o *slaveOrders) put(k queueKey, q slaveOrder, now int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if q.hasBatch || q.hasCommitted {
		o.queues[k] = &q
	} else {
		delete(o.queues, k)
	}
	if now < o.nextSweep {
		return
	}
	o.nextSweep = now + slaveOrderSweepEvery.Milliseconds()
	for k, q := range o.queues {
		if q.hasBatch && now-q.batch.PopTime > orderIdleSpan {
			q.batch, q.hasBatch = kvindex.OrderState{}, false
		}
		if !q.hasBatch && !q.hasCommitted {
			delete(o.queues, k)
		}
	}
}

// forgetReached drops the own committed offsets that reached reports
// the copied committed offset reached (reached is called without mu
// held), with the entries left with nothing.
func (o *slaveOrders) forgetReached(reached func(k queueKey, own int64) (bool, error)) error {
	type own struct {
		k   queueKey
		off int64
	}
	o.mu.Lock()
	var owns []own
	for k, q := range o.queues {
		if q.hasCommitted {
			owns = append(owns, own{k, q.committed})
		}
	}
	o.mu.Unlock()
	for _, w := range owns {
		ok, err := reached(w.k, w.off)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		o.mu.Lock()
		// Unless a request moved it meanwhile.
		if q := o.queues[w.k]; q != nil && q.hasCommitted && q.committed == w.off {
			q.hasCommitted = false
			if !q.hasBatch {
				delete(o.queues, w.k)
			}
		}
		o.mu.Unlock()
	}
	return nil
}

// slaveOrderOf returns what a slave keeps of k's orderly consumption at
// now (a copy, without a batch unused for a day, and without an own
// committed offset the copied one reached) and the committed offset its
// orderly requests go by: its own or the one copied from the master,
// whichever is further; known is false when there is neither.
func (s *Service) slaveOrderOf(k queueKey, now int64) (q slaveOrder, committed int64, known bool, err error) {
	copied, hasCopied, err := s.cfg.Offsets.Get(k.group, k.topic, k.queueID)
	if err != nil {
		return q, 0, false, fmt.Errorf("committed offset of %s on %s/%d: %w", k.group, k.topic, k.queueID, err)
	}
	q = s.slaveOrd.get(k)
	if q.hasBatch && now-q.batch.PopTime > orderIdleSpan {
		q.batch, q.hasBatch = kvindex.OrderState{}, false
	}
	if q.hasCommitted && hasCopied && copied >= q.committed {
		q.hasCommitted = false
	}
	switch {
	case q.hasCommitted:
		return q, q.committed, true, nil
	case hasCopied:
		return q, copied, true, nil
	}
	return q, 0, false, nil
}

// readOnlyOrderQueue pops one queue for an orderly consumer on a slave,
// up to remain messages (none when the pop is full: the queue is only
// counted as left behind, and the group's start on it remembered, as
// RocketMQ's pop commits the start of every queue it locks). It returns
// what it read, for finishPop; the batch is kept in memory.
func (s *Service) readOnlyOrderQueue(req PopRequest, src source, remain int, res *PopResult, info *InfoBuilder) (readResult, error) {
	k := queueKey{req.Group, src.topic, src.queueID}
	unlock := s.lock(k.group, k.topic, k.queueID)
	defer unlock()
	q, pos, known, err := s.slaveOrderOf(k, res.PopTime)
	if err != nil {
		return readResult{}, fmt.Errorf("read-only orderly pop of %s/%d: %w", src.topic, src.queueID, err)
	}
	if q.hasCommitted {
		maxOff, err := s.cfg.CQ.MaxOffset(src.topic, src.queueID)
		if err != nil {
			return readResult{}, fmt.Errorf("read-only orderly pop of %s/%d: %w", src.topic, src.queueID, err)
		}
		if q.committed > maxOff {
			// The queue ends before the slave's own committed offset:
			// deleted and created again, or cut, since. What the slave
			// kept of it is of another queue.
			s.slaveOrd.put(k, slaveOrder{}, res.PopTime)
			if q, pos, known, err = s.slaveOrderOf(k, res.PopTime); err != nil {
				return readResult{}, fmt.Errorf("read-only orderly pop of %s/%d: %w", src.topic, src.queueID, err)
			}
		}
	}
	if q.hasBatch && blocked(&q.batch, req.AttemptID, req.InvisibleTime, res.PopTime) {
		// Locked by another consumer's batch: what it holds back is not
		// left behind (see popOrderLocked).
		return readResult{}, nil
	}
	if !known {
		if pos, err = s.initOffset(src.topic, src.queueID, req.InitMode); err != nil {
			return readResult{}, fmt.Errorf("read-only orderly pop of %s/%d: %w", src.topic, src.queueID, err)
		}
	}
	if remain <= 0 {
		if !known {
			q.committed, q.hasCommitted = pos, true
			s.slaveOrd.put(k, q, res.PopTime)
		}
		return readResult{}, s.addRestFrom(src, pos, res)
	}
	r, err := s.readQueue(src.topic, src.queueID, pos, min(remain, kvindex.MaxOrderBatch), s.cfg.MaxTransferBytes, src.filter, true)
	if err != nil {
		return readResult{}, err
	}
	res.RestNum += max(r.max-r.next, 0)
	res.noteRead(r.lastPhy)
	if len(r.offsets) == 0 {
		if !known || r.next != pos {
			// Nothing matched: the consumer is done up to next.
			q.committed, q.hasCommitted = r.next, true
			s.slaveOrd.put(k, q, res.PopTime)
		}
		return r, nil
	}
	st := kvindex.OrderState{
		Group: req.Group, Topic: src.topic, QueueID: src.queueID,
		PopTime: res.PopTime, InvisibleTime: req.InvisibleTime, AttemptID: req.AttemptID,
	}
	var prev *kvindex.OrderState
	if q.hasBatch {
		prev = &q.batch
	}
	st.Messages, st.Carried = mergeOrderCounts(prev, req.AttemptID, r.offsets)
	addOrderCounts(info, src, &st)
	q.batch, q.hasBatch = st, true
	q.committed, q.hasCommitted = r.from, true
	s.slaveOrd.put(k, q, res.PopTime)
	s.orderWakes.set(&st, res.PopTime)
	return r, nil
}

// readOnlyOrderStart returns where a slave's orderly pop of k would
// start now, for a NOTIFICATION or the readiness of a held pop; free is
// false while the batch a pop on the slave handed out locks the queue
// for attemptID (judged without an invisible time of the asker's, as
// orderBlocked).
func (s *Service) readOnlyOrderStart(k queueKey, attemptID string) (pos int64, free bool, err error) {
	now := s.now()
	q, pos, known, err := s.slaveOrderOf(k, now)
	if err != nil {
		return 0, false, err
	}
	if q.hasBatch && blocked(&q.batch, attemptID, 0, now) {
		return 0, false, nil
	}
	if !known {
		if pos, err = s.initOffset(k.topic, k.queueID, InitMin); err != nil {
			return 0, false, err
		}
	}
	return pos, true, nil
}

// ackReadOnlyOrder is ackOrder on a slave: it acknowledges offsets of
// the batch its orderly pop of the queue handed out and moves its own
// committed offset to the first unacknowledged one, in memory (see
// slaveOrders), as RocketMQ's slave's ackOrderly commits it in its
// offset table. What is below the committed offset, or of an earlier
// batch, changes nothing; a queue without a batch has the offset after
// the acknowledged one committed (RocketMQ's commitAndNext without an
// OrderInfo), so that the acks of a batch popped from the master move
// the slave past it; an offset outside the batch returns
// ErrIllegalOffset once the others are acknowledged.
func (s *Service) ackReadOnlyOrder(group, topic string, queueID int32, offsets []int64, popTime int64) (AckResult, error) {
	var res AckResult
	var stray []int64
	k := queueKey{group, topic, queueID}
	unlock := s.lock(group, topic, queueID)
	moved, err := func() (bool, error) {
		defer unlock()
		now := s.now()
		q, committed, _, err := s.slaveOrderOf(k, now)
		if err != nil {
			return false, err
		}
		next := int64(-1)
		for _, off := range offsets {
			switch i := orderAckIndex(&q.batch, q.hasBatch, off, committed, popTime); {
			case i == ackNoBatch:
				next = max(next, off+1)
			case i == ackStray:
				stray = append(stray, off)
			case i >= 0:
				q.batch.Acked |= 1 << i
				res.Deleted++
				next = nextOrderOffset(&q.batch)
			}
		}
		if next < 0 {
			return false, nil
		}
		q.committed, q.hasCommitted = next, true
		s.slaveOrd.put(k, q, now)
		switch {
		case q.hasBatch && q.batch.Acked == 1<<len(q.batch.Messages)-1:
			s.orderWakes.clear(group, topic, queueID)
		case q.hasBatch && res.Deleted > 0:
			s.orderWakes.set(&q.batch, now)
		}
		return true, nil
	}()
	if err != nil {
		return res, fmt.Errorf("read-only orderly ack %s on %s/%d: %w", group, topic, queueID, err)
	}
	if moved {
		s.cfg.OnQueueReady(topic, queueID)
	}
	if len(stray) > 0 {
		s.log.Warn().Str("group", group).Str("topic", topic).Int32("queue", queueID).Int64("popTime", popTime).
			Ints64("offsets", stray).Msg("orderly ack on a slave of offsets outside the queue's batch")
		return res, fmt.Errorf("read-only orderly ack %s on %s/%d: %w: %v", group, topic, queueID, ErrIllegalOffset, stray)
	}
	return res, nil
}

// AckReadOnly is Ack on a slave, which writes nothing: an orderly ack
// moves what the slave keeps in memory of the group's queue
// (ackReadOnlyOrder); any other changes nothing (the master's in-flight
// state, copied to the slave, is the one that counts).
func (s *Service) AckReadOnly(group, topic string, queueID int32, offset int64, h Handle) (AckResult, error) {
	if !h.Orderly() {
		return AckResult{}, nil
	}
	return s.ackReadOnlyOrder(group, topic, queueID, []int64{offset}, h.PopTime)
}

// AckBatchReadOnly is AckBatch on a slave: its orderly entries are
// acknowledged as AckReadOnly's, the others change nothing. An entry
// with offsets outside its batch does not stop the others; the error
// returned then wraps ErrIllegalOffset.
func (s *Service) AckBatchReadOnly(entries []AckEntry) ([]AckResult, error) {
	results := make([]AckResult, 0, len(entries))
	var illegal []error
	for _, e := range entries {
		var r AckResult
		if e.Orderly {
			var err error
			r, err = s.ackReadOnlyOrder(e.Group, e.Topic, e.QueueID, e.Offsets, e.PopTime)
			if errors.Is(err, ErrIllegalOffset) {
				illegal = append(illegal, err)
			} else if err != nil {
				return results, err
			}
		}
		results = append(results, r)
	}
	return results, errors.Join(illegal...)
}

// ChangeInvisibleTimeReadOnly is ChangeInvisibleTime of an orderly
// message on a slave: the message's deadline in the batch the slave's
// orderly pop handed out moves to now + invisibleTime, in memory, and
// the answer is changeOrder's (zero for an offset below the committed
// offset the slave goes by). A message popped without order cannot have
// its invisible time changed on a slave (the broker refuses it first, as
// RocketMQ's slave fails to put its new checkpoint).
func (s *Service) ChangeInvisibleTimeReadOnly(group, topic string, queueID int32, offset int64, h Handle, invisibleTime int64) (ChangeResult, error) {
	if !h.Orderly() {
		return ChangeResult{}, fmt.Errorf("change invisible time of %s on %s/%d@%d on a slave: the message was not popped orderly", group, topic, queueID, offset)
	}
	k := queueKey{group, topic, queueID}
	unlock := s.lock(group, topic, queueID)
	defer unlock()
	now := s.now()
	q, committed, _, err := s.slaveOrderOf(k, now)
	if err != nil {
		return ChangeResult{}, fmt.Errorf("change invisible time of orderly %s on %s/%d@%d on a slave: %w", group, topic, queueID, offset, err)
	}
	if offset < committed {
		return ChangeResult{}, nil
	}
	deadline := now + invisibleTime
	res := ChangeResult{PopTime: h.PopTime, InvisibleTime: deadline - h.PopTime, ReviveQID: h.ReviveQID}
	if !q.hasBatch || q.batch.PopTime != h.PopTime {
		return res, nil
	}
	for i := range q.batch.Messages {
		if q.batch.Messages[i].QueueOffset == offset {
			q.batch.Messages[i].NextVisibleAt = deadline
			res.Changed = true
		}
	}
	if res.Changed {
		s.slaveOrd.put(k, q, now)
		s.orderWakes.set(&q.batch, now)
	}
	return res, nil
}
