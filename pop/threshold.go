package pop

import (
	"errors"
	"sync"
	"sync/atomic"
)

// The in-flight threshold (RocketMQ's enablePopMessageThreshold and
// popInflightMessageThreshold): while Config.InFlightLimit is on, a
// non-orderly pop skips a queue of which the group has more than the
// limit of messages in flight, checked under the queue's lock before the
// queue is read, so a pop may take the count up to the limit plus its
// batch, as RocketMQ's does. The count is the offsets of the queue's
// checkpoints (kvindex.PopStore.InFlightCount), not a counter: it is the
// same after a restart, and a message stays counted until it is
// acknowledged or revived, through offset resets too (unless one moved
// the committed offset more than kvindex.MaxCheckpointSpan past it).
//
// A skipped queue adds nothing to the pop's RestNum and HasMessage says
// it has nothing, so that a pop held for it sleeps instead of waking
// itself at once. The queues skipped are remembered (stoppedQueues); an
// ack that brings one back to the limit, or a change of the setting,
// wakes the pops held on it (Config.OnQueueReady), as does each revive
// of its messages.

// stoppedQueues are the queues the threshold made a pop skip and that no
// pop or ack has found back under it since (one per group and queue
// over the threshold; a deleted topic's or group's stay until a pop or
// an ack of the queue, or a change of the setting). Its mutex is taken
// by no other lock's holder than a queue's stripe (never the other way).
type stoppedQueues struct {
	// n is len(queues), read without mu: an ack of a queue when none is
	// stopped takes no lock.
	n      atomic.Int64
	mu     sync.Mutex
	queues map[queueKey]struct{}
}

// add remembers k; it reports whether k was not remembered yet.
func (q *stoppedQueues) add(k queueKey) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.queues[k]; ok {
		return false
	}
	if q.queues == nil {
		q.queues = map[queueKey]struct{}{}
	}
	q.queues[k] = struct{}{}
	q.n.Store(int64(len(q.queues)))
	return true
}

// remove forgets k; it reports whether k was remembered.
func (q *stoppedQueues) remove(k queueKey) bool {
	if q.n.Load() == 0 {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.queues[k]; !ok {
		return false
	}
	delete(q.queues, k)
	q.n.Store(int64(len(q.queues)))
	return true
}

// has reports whether k is remembered.
func (q *stoppedQueues) has(k queueKey) bool {
	if q.n.Load() == 0 {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.queues[k]
	return ok
}

// drain forgets every queue and returns them.
func (q *stoppedQueues) drain() []queueKey {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]queueKey, 0, len(q.queues))
	for k := range q.queues {
		out = append(out, k)
	}
	q.queues = nil
	q.n.Store(0)
	return out
}

// inFlightLimit returns the threshold and whether it is on.
func (s *Service) inFlightLimit() (int64, bool) {
	if s.cfg.InFlightLimit == nil {
		return 0, false
	}
	return s.cfg.InFlightLimit()
}

// overLimit reports whether a group has more than limit messages of a
// queue in flight. Exact when the caller holds the queue's lock.
func (s *Service) overLimit(group, topic string, queueID int32, limit int64) (bool, error) {
	from, has, err := s.cfg.Offsets.Get(group, topic, queueID)
	if err != nil {
		return false, err
	}
	if !has {
		from = 0
	}
	n, err := s.store.InFlightCount(group, topic, queueID, from, limit)
	if err != nil {
		return false, err
	}
	return n > limit, nil
}

// popStopped reports whether a non-orderly pop must skip the queue for
// the threshold, remembering the queues it stops and forgetting those it
// no longer does. The caller holds the queue's lock.
func (s *Service) popStopped(group, topic string, queueID int32) (bool, error) {
	limit, on := s.inFlightLimit()
	if !on {
		return false, nil
	}
	over, err := s.overLimit(group, topic, queueID, limit)
	if err != nil {
		return false, err
	}
	k := queueKey{group, topic, queueID}
	if !over {
		s.stopped.remove(k)
		return false, nil
	}
	if s.stopped.add(k) {
		s.log.Info().Str("group", group).Str("topic", topic).Int32("queue", queueID).Int64("threshold", limit).
			Msg("pop stops serving the queue: more messages in flight than popInflightMessageThreshold")
	}
	return true, nil
}

// wakeReleased wakes the pops held on a queue the threshold stopped once
// it is no longer over it (an ack took messages out of flight), or when
// the threshold is off. Not under the queue's lock: the count may be
// one a later commit changed, which only moves a wake-up.
func (s *Service) wakeReleased(group, topic string, queueID int32) {
	k := queueKey{group, topic, queueID}
	if !s.stopped.has(k) {
		return
	}
	if limit, on := s.inFlightLimit(); on {
		over, err := s.overLimit(group, topic, queueID, limit)
		if err != nil {
			s.log.Warn().Err(err).Str("group", group).Str("topic", topic).Int32("queue", queueID).
				Msg("count of messages in flight after an ack failed; held pops of the queue wake at their poll time")
			return
		}
		if over {
			return
		}
	}
	if s.stopped.remove(k) {
		s.cfg.OnQueueReady(topic, group, queueID)
	}
}

// readOnlyStopped is popStopped on a slave, for its orderly pops too
// (RocketMQ checks them against the threshold as well): the count is of
// the messages the slave's own pops handed out and that are in flight
// there (slaveInFlight), as RocketMQ's slave counts its own pops; the
// master's checkpoints, which the slave copies, are the master's. A
// queue it stops is woken when an ack on the slave or the end of an
// in-flight time brings it back to the limit. The caller holds the
// queue's lock.
func (s *Service) readOnlyStopped(k queueKey) bool {
	limit, on := s.inFlightLimit()
	if !on {
		return false
	}
	now := s.now()
	if n, _ := s.slaveFlight.count(k, now); n <= limit {
		s.stopped.remove(k)
		return false
	}
	if s.stopped.add(k) {
		s.log.Info().Str("group", k.group).Str("topic", k.topic).Int32("queue", k.queueID).Int64("threshold", limit).
			Msg("pop on the slave stops serving the queue: more messages it handed out in flight than popInflightMessageThreshold")
	}
	s.slaveFlight.armWake(k, now)
	return true
}

// wakeReleasedReadOnly is wakeReleased on a slave: it wakes the pops
// held on a queue the threshold stopped once the slave's count of it is
// back to the limit (or the threshold is off), and otherwise waits for
// the next end of an in-flight time.
func (s *Service) wakeReleasedReadOnly(k queueKey) {
	if !s.stopped.has(k) {
		return
	}
	now := s.now()
	n, on := s.slaveFlight.count(k, now)
	if limit, ok := s.inFlightLimit(); ok && n > limit {
		s.slaveFlight.armWake(k, now)
		return
	}
	if s.stopped.remove(k) {
		s.cfg.OnQueueReady(on.topic, k.group, on.queueID)
	}
}

// ackedReadOnly takes the offsets a non-orderly ack on a slave
// acknowledges out of its count, waking the pops held on the queue when
// that releases it.
func (s *Service) ackedReadOnly(group, topic string, queueID int32, popTime int64, offsets []int64) {
	k := queueKey{group, topic, queueID}
	if s.slaveFlight.ack(k, popTime, offsets, s.now()) {
		s.wakeReleasedReadOnly(k)
	}
}

// InFlightLimitChanged wakes the pops held on the queues the threshold
// stopped, to be called when the setting changes: turned off or raised,
// it may release them. Those still over it are stopped again by the
// pops woken.
func (s *Service) InFlightLimitChanged() {
	for _, k := range s.stopped.drain() {
		s.cfg.OnQueueReady(k.topic, k.group, k.queueID)
	}
}

// SlaveTopicDeleted forgets what this slave's own pops keep of a deleted
// topic's queues: their in-flight count (as RocketMQ's deleteTopic
// clears its PopInflightMessageCounter of the topic), their own offsets
// and orderly batches (keyspace 0x59, which the topic's deletion in the
// store removed: see kvindex.PopStore.DeleteTopic; dropped here from
// memory, and from the store once more should a request have written one
// back meanwhile), and what its pops handed out of them. The pops held on
// a queue the threshold stopped are woken. The broker calls it once the
// topic's consumer state is deleted; on a master it finds nothing.
func (s *Service) SlaveTopicDeleted(topic string) error {
	s.handed.forget(func(k queueKey) bool { return k.topic == topic })
	return s.forgetSlaveQueues(func(k queueKey) bool { return k.topic == topic })
}

// SlaveQueueRestarted is SlaveTopicDeleted for one queue of topic, which
// a slave's replicated CommitLog started anew (its master deleted the
// topic and created it again; kvindex.PopStore.DeleteQueueState removed
// its state from the store).
func (s *Service) SlaveQueueRestarted(topic string, queueID int32) error {
	match := func(k queueKey) bool { return k.topic == topic && k.queueID == queueID }
	s.handed.forget(match)
	return s.forgetSlaveQueues(match)
}

// SlaveGroupOffsetsDeleted is SlaveTopicDeleted for a group deleted with
// its offsets (DELETE_SUBSCRIPTIONGROUP with cleanOffset, RocketMQ's
// removeOffset and clearInFlightMessageNumByGroupName): the group's
// in-flight count, own offsets and orderly batches on every topic go
// (kvindex.PopStore.DeleteGroupPositions removed the latter from the
// store). What its pops handed out and is still invisible is kept: the
// consumers hold those messages, and a pop of the group hands them out
// again once their invisible time is over.
func (s *Service) SlaveGroupOffsetsDeleted(group string) error {
	return s.forgetSlaveQueues(func(k queueKey) bool { return k.group == group })
}

// forgetSlaveQueues drops the in-flight count and the own entries
// (slaveOrders) of the queues that match, each entry under its queue's
// stripe lock, so that no request that read it before puts it back
// afterwards, and wakes the pops held on a queue the threshold stopped.
func (s *Service) forgetSlaveQueues(match func(queueKey) bool) error {
	for _, k := range s.slaveFlight.forget(match) {
		s.wakeReleasedReadOnly(k)
	}
	var errs []error
	for _, k := range s.slaveOrd.keys(match) {
		unlock := s.lock(k.group, k.topic, k.queueID)
		err := s.slaveOrd.put(k, slaveOrder{}, s.now())
		unlock()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
