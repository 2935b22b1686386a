package pop

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
)

// slaveOrders is what a slave's pops, acks and changes of invisible
// time keep per group and queue (see PopReadOnly), in memory and in the
// slave's store (keyspace 0x59, kvindex.SlaveOwn), from which a slave's
// POP service loads it at start (LoadSlaveState): the batch the last
// orderly pop handed out, as a master stores it in the 0x53 keyspace
// (its messages, acknowledgements, moved deadlines and consumption
// counts), and the slave's own entry of its offset table, which its
// orderly pops set to the batch's start, its orderly acks move past what
// they acknowledge, and any pop sets to where a group without a
// committed offset starts (InitMode). Orderly and non-orderly pops go
// by that one entry, as RocketMQ's slave's have one offset table.
//
// Apache RocketMQ's slave (the baseline's PopMessageProcessor,
// AckMessageProcessor.ackOrderly and ChangeInvisibleTimeProcessor, which
// check no broker role) keeps the same in its ConsumerOrderInfoManager
// and ConsumerOffsetManager: the batch locks the queue for the group's
// other orderly consumers, an orderly ack commits the next offset there,
// a change of invisible time moves a message's deadline, and a pop of a
// group without an offset commits its start. Without them a slave gave
// two orderly consumers the same batch, and a lone consumer its
// acknowledged batch again. It persists both (consumerOffset.json every
// flushConsumerOffsetInterval, consumerOrderInfo.json every 10 s, and
// both at shutdown) and loads them at start, so a restarted slave goes
// on from where its consumers were; rocketkv's writes each change before
// the request is answered.
//
// The slave's committed offsets in 0x30 are its master's, copied by the
// slave sync (and those its clients commit on it, UPDATE_CONSUMER_OFFSET);
// its 0x53 batches are its master's too. The own entry, when there is
// one, is what the slave's pops go by; the copied offset counts where
// there is none. As RocketMQ's sync puts the master's table over the
// slave's (putAll: per group and topic, the master's queues replace the
// slave's, whether they are ahead or behind; there is no rule keeping
// the larger), a sync drops the own entries of every pair the master's
// table has (an offset reset backward on the master reaches the slave's
// consumers at the next sync; acknowledged messages past the master's
// offset are delivered again), and so does a client's commit of the
// queue's offset on the slave (CommitOffset, in the write of the
// commit). While the master is
// down there is no sync, and the slave's entries hold, across restarts
// of the slave too. The batches are left to the slave's own requests, as
// RocketMQ's sync leaves its ConsumerOrderInfoManager alone. A batch
// unused for a day is forgotten, as RocketMQ's autoClean drops an
// OrderInfo, and so is an own entry past the end of its queue (deleted
// and created again, or cut where the slave parted from its master).
//
// Concurrency: mu guards the map and orders the writes of its entries
// to the store (each committed under mu, unsynced, and synced after mu is
// released, so that the store takes the changes in the order the map
// does); the requests that read and then change a queue's entry hold the
// queue's stripe lock (Service.lock) between the two, so that they change
// it one at a time; so does dropSlaveOwn.
type slaveOrders struct {
	// store holds the entries (keyspace 0x59).
	store     *kvindex.PopStore
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

// stored is q as the store keeps it for k.
func (q *slaveOrder) stored(k queueKey) *kvindex.SlaveOwn {
	o := &kvindex.SlaveOwn{Group: k.group, Topic: k.topic, QueueID: k.queueID, Committed: -1}
	if q.hasCommitted {
		o.Committed = q.committed
	}
	if q.hasBatch {
		b := q.batch
		b.Group, b.Topic, b.QueueID = k.group, k.topic, k.queueID
		o.Batch = &b
	}
	return o
}

// slaveOrderSweepEvery is how often the entries of slaveOrders left
// with nothing that counts are dropped.
const slaveOrderSweepEvery = time.Minute

func newSlaveOrders(store *kvindex.PopStore) *slaveOrders {
	return &slaveOrders{store: store, queues: map[queueKey]*slaveOrder{}}
}

// load reads the entries the store holds into the map (which it
// replaces) at now (ms), dropping the batches unused for a day and the
// entries left with nothing, from the store too; it returns how many
// entries it kept. It is for a slave's start, before any request.
func (o *slaveOrders) load(now int64) (int, error) {
	queues := map[queueKey]*slaveOrder{}
	var stale []*kvindex.SlaveOwn
	err := o.store.EachSlaveOwn(func(e kvindex.SlaveOwn) bool {
		k := queueKey{e.Group, e.Topic, e.QueueID}
		q := &slaveOrder{committed: max(e.Committed, 0), hasCommitted: e.Committed >= 0}
		if e.Batch != nil {
			q.batch, q.hasBatch = *e.Batch, true
		}
		if q.hasBatch && now-q.batch.PopTime > orderIdleSpan {
			q.batch, q.hasBatch = kvindex.OrderState{}, false
			stale = append(stale, q.stored(k))
		}
		if q.hasBatch || q.hasCommitted {
			queues[k] = q
		}
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("load a slave's own pop state: %w", err)
	}
	if len(stale) > 0 {
		b := o.store.NewBatch()
		defer b.Close()
		for _, e := range stale {
			if err := b.SetSlaveOwn(e); err != nil {
				return 0, err
			}
		}
		if err := b.Commit(true); err != nil {
			return 0, fmt.Errorf("drop a slave's own orderly batches unused for a day: %w", err)
		}
	}
	o.mu.Lock()
	o.queues = queues
	o.mu.Unlock()
	return len(queues), nil
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
// once a minute it drops what every other entry no longer needs. It
// returns once the change is in the store, durably; when the store
// refuses the write, the map is left as it was (a failed sync of the
// store's log stops the process: kvindex's walfailstop.go).
func (o *slaveOrders) put(k queueKey, q slaveOrder, now int64) error {
	wait, err := o.putLocked(k, q, now, nil)
	if err != nil {
		return err
	}
	if err := wait(); err != nil {
		return fmt.Errorf("a slave's own pop state of %s on %s/%d: %w", k.group, k.topic, k.queueID, err)
	}
	return nil
}

// putLocked is put but for the wait for the store's sync, which it
// returns; with, when not nil, adds its writes to the same batch (a
// client's commit of the queue's offset, CommitOffset).
func (o *slaveOrders) putLocked(k queueKey, q slaveOrder, now int64, with func(*kvindex.PopBatch) error) (func() error, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.store.NewBatch()
	defer b.Close()
	if err := b.SetSlaveOwn(q.stored(k)); err != nil {
		return nil, err
	}
	if with != nil {
		if err := with(b); err != nil {
			return nil, err
		}
	}
	// The sweep, when it is due, goes in the same write.
	type swept struct {
		k    queueKey
		drop bool
	}
	var sweep []swept
	if now >= o.nextSweep {
		for sk, sq := range o.queues {
			if sk == k {
				continue
			}
			if !sq.hasBatch || now-sq.batch.PopTime <= orderIdleSpan {
				continue // the map keeps no entry with nothing
			}
			left := *sq
			left.batch, left.hasBatch = kvindex.OrderState{}, false
			if err := b.SetSlaveOwn(left.stored(sk)); err != nil {
				return nil, err
			}
			sweep = append(sweep, swept{sk, !left.hasCommitted})
		}
	}
	wait, err := b.CommitDurable()
	if err != nil {
		return nil, fmt.Errorf("a slave's own pop state of %s on %s/%d: %w", k.group, k.topic, k.queueID, err)
	}
	if q.hasBatch || q.hasCommitted {
		o.queues[k] = &q
	} else {
		delete(o.queues, k)
	}
	if now >= o.nextSweep {
		o.nextSweep = now + slaveOrderSweepEvery.Milliseconds()
		for _, sw := range sweep {
			if sw.drop {
				delete(o.queues, sw.k)
				continue
			}
			sq := o.queues[sw.k]
			sq.batch, sq.hasBatch = kvindex.OrderState{}, false
		}
	}
	return wait, nil
}

// setOwn makes off k's own offset entry at now, keeping its batch.
func (o *slaveOrders) setOwn(k queueKey, off int64, now int64) error {
	q := o.get(k)
	q.committed, q.hasCommitted = off, true
	return o.put(k, q, now)
}

// ownKeys returns the queues with an own offset entry that match.
func (o *slaveOrders) ownKeys(match func(queueKey) bool) []queueKey {
	o.mu.Lock()
	defer o.mu.Unlock()
	var keys []queueKey
	for k, q := range o.queues {
		if q.hasCommitted && match(k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// keys returns the queues with an entry that match.
func (o *slaveOrders) keys(match func(queueKey) bool) []queueKey {
	o.mu.Lock()
	defer o.mu.Unlock()
	var keys []queueKey
	for k := range o.queues {
		if match(k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// clearOwn drops k's own offset entry at now, and k's entry with it when
// it has no batch.
func (o *slaveOrders) clearOwn(k queueKey, now int64) error {
	q := o.get(k)
	if !q.hasCommitted {
		return nil
	}
	q.committed, q.hasCommitted = 0, false
	return o.put(k, q, now)
}

// dropSlaveOwn drops the slave's own offset entries of the queues that
// match, each under its queue's stripe lock, so that no request that
// read the entry before puts it back afterwards. The errors of the
// entries the store did not let go are joined.
func (s *Service) dropSlaveOwn(match func(queueKey) bool) error {
	var errs []error
	for _, k := range s.slaveOrd.ownKeys(match) {
		unlock := s.lock(k.group, k.topic, k.queueID)
		err := s.slaveOrd.clearOwn(k, s.now())
		unlock()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LoadSlaveState loads what this slave's own pops, orderly acks and
// changes of invisible time kept before it last stopped (keyspace 0x59,
// see slaveOrders) and returns how many queues it holds: a restarted
// slave goes on from its own offsets and keeps its orderly queues locked,
// as RocketMQ's slave loads its consumerOffset.json and
// consumerOrderInfo.json. The broker calls it on a slave before it takes
// requests.
func (s *Service) LoadSlaveState() (int, error) {
	return s.slaveOrd.load(s.now())
}

// slaveOwnOffset returns the slave's own offset entry of k, dropping it
// when it is past the end of the queue (deleted and created again, or
// cut, since): what the slave kept of it is of another queue. Called
// without k's stripe lock (a NOTIFICATION's look), the drop may be undone
// by a request that holds it and puts its copy back: the next look drops
// it again.
func (s *Service) slaveOwnOffset(k queueKey, now int64) (int64, bool, error) {
	q := s.slaveOrd.get(k)
	if !q.hasCommitted {
		return 0, false, nil
	}
	maxOff, err := s.cfg.CQ.MaxOffset(k.topic, k.queueID)
	if err != nil {
		return 0, false, fmt.Errorf("max offset of %s/%d: %w", k.topic, k.queueID, err)
	}
	if q.committed > maxOff {
		if err := s.slaveOrd.put(k, slaveOrder{}, now); err != nil {
			return 0, false, err
		}
		return 0, false, nil
	}
	return q.committed, true, nil
}

// slaveOrderOf returns what a slave keeps of k's orderly consumption at
// now (a copy, without a batch unused for a day) and the committed
// offset its orderly requests go by: its own entry, else the one copied
// from the master; known is false when there is neither.
func (s *Service) slaveOrderOf(k queueKey, now int64) (q slaveOrder, committed int64, known bool, err error) {
	q = s.slaveOrd.get(k)
	if q.hasBatch && now-q.batch.PopTime > orderIdleSpan {
		q.batch, q.hasBatch = kvindex.OrderState{}, false
	}
	if q.hasCommitted {
		return q, q.committed, true, nil
	}
	copied, hasCopied, err := s.cfg.Offsets.Get(k.group, k.topic, k.queueID)
	if err != nil {
		return q, 0, false, fmt.Errorf("committed offset of %s on %s/%d: %w", k.group, k.topic, k.queueID, err)
	}
	return q, copied, hasCopied, nil
}

// readOnlyOrderQueue pops one queue for an orderly consumer on a slave,
// up to remain messages (none when the pop is full: the queue is only
// counted as left behind, and the group's start on it remembered, as
// RocketMQ's pop commits the start of every queue it locks). It returns
// what it read, for finishPop; the batch is kept in memory.
//
// The in-flight threshold counts orderly pops on a slave as RocketMQ's
// PopMessageProcessor counts them in its PopInflightMessageCounter (see
// slaveInFlight): a queue over the threshold gives the pop nothing,
// checked before the batch's lock; a pop the lock does not block first
// takes the whole queue out of the count (RocketMQ's
// clearInFlightMessageNum at each orderly pop of a queue, a full pop's
// included), then counts the batch it hands out. A batch nobody
// acknowledges leaves the count when its invisible time is over, so it
// cannot keep the queue stopped.
//
// The pop starts at the group's offset on the slave, not past what the
// group's non-orderly pops handed out there and is still invisible
// (handedOut), where RocketMQ's getPopOffset takes the larger of the two:
// the batch's start becomes the group's own offset, and a slave, which
// revives nothing, delivers a non-orderly message again only from that
// offset, so the ones below it that nobody acknowledges would never come
// again while the master is down, nor from the slave once promoted
// (TakeOverSlaveState). The orderly consumer gets them again instead.
func (s *Service) readOnlyOrderQueue(req PopRequest, src source, remain int, res *PopResult, info *InfoBuilder) (readResult, error) {
	k := queueKey{req.Group, src.topic, src.queueID}
	unlock := s.lock(k.group, k.topic, k.queueID)
	defer unlock()
	// An own entry past the queue's end goes first, with the batch.
	if _, _, err := s.slaveOwnOffset(k, res.PopTime); err != nil {
		return readResult{}, fmt.Errorf("read-only orderly pop of %s/%d: %w", src.topic, src.queueID, err)
	}
	if s.readOnlyStopped(k) {
		return readResult{}, nil // as readOnlyRead: nothing, and nothing to RestNum
	}
	q, pos, known, err := s.slaveOrderOf(k, res.PopTime)
	if err != nil {
		return readResult{}, fmt.Errorf("read-only orderly pop of %s/%d: %w", src.topic, src.queueID, err)
	}
	if q.hasBatch && blocked(&q.batch, req.AttemptID, req.InvisibleTime, res.PopTime) {
		// Locked by another consumer's batch: what it holds back is not
		// left behind (see popOrderLocked).
		return readResult{}, nil
	}
	s.slaveFlight.clear(k)
	if !known {
		if pos, err = s.initOffset(src.topic, src.queueID, req.InitMode); err != nil {
			return readResult{}, fmt.Errorf("read-only orderly pop of %s/%d: %w", src.topic, src.queueID, err)
		}
	}
	if remain <= 0 {
		if !known {
			q.committed, q.hasCommitted = pos, true
			if err := s.slaveOrd.put(k, q, res.PopTime); err != nil {
				return readResult{}, fmt.Errorf("read-only orderly pop of %s/%d: %w", src.topic, src.queueID, err)
			}
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
			if err := s.slaveOrd.put(k, q, res.PopTime); err != nil {
				return readResult{}, fmt.Errorf("read-only orderly pop of %s/%d: %w", src.topic, src.queueID, err)
			}
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
	if err := s.slaveOrd.put(k, q, res.PopTime); err != nil {
		return readResult{}, fmt.Errorf("read-only orderly pop of %s/%d: %w", src.topic, src.queueID, err)
	}
	s.orderWakes.set(&st, res.PopTime)
	s.slaveFlight.add(k, heldOn{req.Topic, src.queueID}, res.PopTime, res.PopTime+req.InvisibleTime, r.offsets, s.now())
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
		if err := s.slaveOrd.put(k, q, now); err != nil {
			return false, err
		}
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
		s.cfg.OnQueueReady(topic, group, queueID)
	}
	if len(stray) > 0 {
		s.log.Warn().Str("group", group).Str("topic", topic).Int32("queue", queueID).Int64("popTime", popTime).
			Ints64("offsets", stray).Msg("orderly ack on a slave of offsets outside the queue's batch")
		return res, fmt.Errorf("read-only orderly ack %s on %s/%d: %w: %v", group, topic, queueID, ErrIllegalOffset, stray)
	}
	return res, nil
}

// AckReadOnly is Ack on a slave, which writes nothing of its master's
// state but while it revives it as an acting master: an orderly ack
// moves what the slave keeps in memory of the group's queue
// (ackReadOnlyOrder); any other changes the slave's count for the
// in-flight threshold, and removes the message from the checkpoint
// copied from the master while an acting master's revive runs
// (ackCopied). Either takes the message out of that count when
// the slave's pop handed it out (slaveInFlight, as RocketMQ's orderly
// and other acks decrement its PopInflightMessageCounter; the master's
// in-flight state, copied to the slave, is the one a promoted slave
// revives).
func (s *Service) AckReadOnly(group, topic string, queueID int32, offset int64, h Handle) (AckResult, error) {
	if !h.Orderly() {
		s.ackedReadOnly(group, topic, queueID, h.PopTime, []int64{offset})
		return s.ackCopied(group, topic, queueID, h.CKOffset, []int64{offset}, h.PopTime, h.InvisibleTime)
	}
	res, err := s.ackReadOnlyOrder(group, topic, queueID, []int64{offset}, h.PopTime)
	s.ackedReadOnly(group, topic, queueID, h.PopTime, []int64{offset})
	return res, err
}

// AckBatchReadOnly is AckBatch on a slave: its entries are acknowledged
// as AckReadOnly's (each in the slave's in-flight count, the orderly
// ones in its memory of the queue too, the others in the checkpoints
// copied from the master while an acting master's revive runs). An entry
// with offsets outside its batch does not stop the others; the error
// returned then wraps ErrIllegalOffset.
func (s *Service) AckBatchReadOnly(entries []AckEntry) ([]AckResult, error) {
	results := make([]AckResult, 0, len(entries))
	var illegal []error
	for _, e := range entries {
		var r AckResult
		if !e.Orderly {
			s.ackedReadOnly(e.Group, e.Topic, e.QueueID, e.PopTime, e.Offsets)
			var err error
			if r, err = s.ackCopied(e.Group, e.Topic, e.QueueID, e.CKOffset, e.Offsets, e.PopTime, e.InvisibleTime); err != nil {
				return results, err
			}
		}
		if e.Orderly {
			var err error
			r, err = s.ackReadOnlyOrder(e.Group, e.Topic, e.QueueID, e.Offsets, e.PopTime)
			s.ackedReadOnly(e.Group, e.Topic, e.QueueID, e.PopTime, e.Offsets)
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
		if err := s.slaveOrd.put(k, q, now); err != nil {
			return ChangeResult{}, fmt.Errorf("change invisible time of orderly %s on %s/%d@%d on a slave: %w", group, topic, queueID, offset, err)
		}
		s.orderWakes.set(&q.batch, now)
	}
	return res, nil
}

// TakeOverSlaveState makes what this broker's own pops kept while it was
// a slave (keyspace 0x59, see slaveOrders) the state its pops go by as a
// master, and returns how many queues it took: a slave restarted as its
// group's master (RocketMQ's manual failover) goes on from where the
// consumers that came to it while the old master was down were, as
// RocketMQ's promoted slave goes by its own offset and order info
// tables, which hold them. Per queue, in one synced write with the
// deletion of the slave's entries: its own committed offset replaces the
// one copied from the old master (a later copy of the pair would have
// dropped the entry: the entry is the newer) and moves the group's pop
// position up to it when the copied one is behind, unless it is past the
// queue's end; its orderly batch, unless a day old, replaces the copied
// batch of the queue unless that one was popped later. The broker calls
// it on a master before it takes requests.
func (s *Service) TakeOverSlaveState() (int, error) {
	var entries []kvindex.SlaveOwn
	if err := s.store.EachSlaveOwn(func(e kvindex.SlaveOwn) bool { entries = append(entries, e); return true }); err != nil {
		return 0, fmt.Errorf("take over a slave's own pop state: %w", err)
	}
	if len(entries) == 0 {
		return 0, nil
	}
	now := s.now()
	b := s.store.NewBatch()
	defer b.Close()
	for _, e := range entries {
		if err := s.takeOverQueue(b, &e, now); err != nil {
			return 0, fmt.Errorf("take over a slave's own pop state of %s on %s/%d: %w", e.Group, e.Topic, e.QueueID, err)
		}
		if err := b.DeleteSlaveOwn(e.Group, e.Topic, e.QueueID); err != nil {
			return 0, err
		}
	}
	if err := b.Commit(true); err != nil {
		return 0, fmt.Errorf("take over a slave's own pop state: %w", err)
	}
	return len(entries), nil
}

// takeOverQueue adds to b what TakeOverSlaveState makes of one entry.
func (s *Service) takeOverQueue(b *kvindex.PopBatch, e *kvindex.SlaveOwn, now int64) error {
	if e.Committed >= 0 {
		maxOff, err := s.cfg.CQ.MaxOffset(e.Topic, e.QueueID)
		if err != nil {
			return err
		}
		if e.Committed <= maxOff {
			if err := b.SetCommitted(e.Group, e.Topic, e.QueueID, e.Committed); err != nil {
				return err
			}
			pos, ok, err := s.store.Position(e.Group, e.Topic, e.QueueID)
			if err != nil {
				return err
			}
			if ok && pos < e.Committed {
				if err := b.SetPosition(e.Group, e.Topic, e.QueueID, e.Committed); err != nil {
					return err
				}
			}
		}
	}
	if e.Batch == nil || now-e.Batch.PopTime > orderIdleSpan {
		return nil
	}
	cur, ok, err := s.store.Order(e.Group, e.Topic, e.QueueID)
	if err != nil {
		return err
	}
	if ok && cur.PopTime > e.Batch.PopTime {
		return nil
	}
	return b.SetOrder(e.Batch)
}
