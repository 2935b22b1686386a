package pop

import (
	"fmt"
	"slices"

	"github.com/rocketkv/rocketkv/kvindex"
)

// PopReadOnly answers a pop on a slave, whose store only its master
// writes: the messages a pop would return, with the same header fields,
// and none of the master's state written: no checkpoint, no position, no
// committed offset, no orderly batch (what a slave keeps of its own pops
// is in memory, and its own offsets and orderly batches in the slave's
// keyspace 0x59 too: slaveOrders).
//
// It is what a client sees of Apache RocketMQ 5.3.3's slave (brokerRole
// SLAVE, with or without slaveReadEnable, which only pulls look at):
// PopMessageProcessor reads the slave's queues and answers SUCCESS with
// the messages, and the checkpoint it writes goes through EscapeBridge,
// which on a broker that is not broker 0 (without slave acting master)
// puts nothing and says SERVICE_NOT_AVAILABLE, which the pop only logs.
// Nothing is in flight afterwards in the store: the slave revives
// nothing, and non-orderly acks change nothing there but the slave's own
// count of what its pops handed out, which the in-flight threshold stops
// a queue by on a slave (readOnlyStopped).
//
// A non-orderly pop starts, as RocketMQ's slave's, from the group's
// offset on the slave: the slave's own entry (what its orderly pops and
// acks committed, or where a pop of a group without an offset started:
// slaveOrders, which a restart of the slave keeps) until a sync of the master's offsets or a
// client's commit on the slave replaces it, else the committed offset as
// last copied from the master (the master's pop position, past what it
// has in flight, is not used: while the master is down, what it had in
// flight and cannot revive is delivered again from the slave; but while
// an acting master's revive runs, which delivers it, the pop starts past
// that position too: acting.go), else
// where InitMode places the group; or past what earlier pops on this
// slave handed out that is still invisible, when that is further: the
// slave keeps that in memory (handedOut), as RocketMQ's keeps it in its
// PopBufferMergeService, so that consecutive pops get the next messages
// and not the same ones. A message handed out by the slave and not
// acknowledged on the master (a non-orderly ack on the slave changes
// nothing) is popped again once its invisible time is over (and that of
// every message handed out after it); the pops held on its queue are
// woken then (Config.OnQueueReady). An orderly pop ignores whatever
// orderly batch of the master's was copied (RocketMQ's slave has none of
// its master's orderly state) and keeps its own, as RocketMQ's slave
// keeps it in its ConsumerOrderInfoManager and offset table
// (slaveOrders): the batch locks the queue for the group's other
// orderly consumers until each of its messages is acknowledged on the
// slave (AckReadOnly) or past its deadline (which
// ChangeInvisibleTimeReadOnly moves), and the next batch starts at the
// group's offset on the slave, which the slave's orderly acks move past
// what they acknowledged. A batch delivered again counts one more
// consumption of its messages, as on a master.
func (s *Service) PopReadOnly(req PopRequest) (PopResult, error) {
	res, err := s.popReadOnly(req)
	res.finish()
	return res, err
}

func (s *Service) popReadOnly(req PopRequest) (PopResult, error) {
	res := PopResult{PopTime: s.now(), InvisibleTime: req.InvisibleTime, Body: req.Body[:0], LowestPhy: -1}
	if req.Order {
		res.ReviveQID = OrderReviveQueue
	}
	sources, err := s.popSources(req)
	if err != nil || sources == nil {
		return res, err
	}
	var info InfoBuilder
	for _, src := range sources {
		remain := req.MaxMsgNums - res.count()
		if res.count() > 0 && len(res.Body) >= maxPopBody {
			remain = 0
		}
		if req.Order {
			r, err := s.readOnlyOrderQueue(req, src, remain, &res, &info)
			if err != nil {
				return res, err
			}
			if len(r.offsets) > 0 {
				if err := s.finishPop(req, src, r, &res, &info); err != nil {
					return res, err
				}
			}
			continue
		}
		if remain <= 0 {
			pos, err := s.readOnlyPin(req, src)
			if err != nil {
				return res, err
			}
			if err := s.addRestFrom(src, pos, &res); err != nil {
				return res, err
			}
			continue
		}
		r, err := s.readOnlyRead(req, src, remain, res.PopTime)
		if err != nil {
			return res, err
		}
		res.RestNum += max(r.max-r.next, 0)
		res.noteRead(r.lastPhy)
		if len(r.offsets) == 0 {
			continue
		}
		if err := s.finishPop(req, src, r, &res, &info); err != nil {
			return res, err
		}
	}
	res.StartOffsetInfo = info.StartOffsetInfo()
	res.MsgOffsetInfo = info.MsgOffsetInfo()
	res.OrderCountInfo = info.OrderCountInfo()
	return res, nil
}

// readOnlyRead reads up to remain messages of one queue for a
// non-orderly read-only pop at popTime from readOnlyStart, under the
// queue's lock, noting what it handed out before the lock is released;
// a queue the in-flight threshold stops (readOnlyStopped) gives nothing.
func (s *Service) readOnlyRead(req PopRequest, src source, remain int, popTime int64) (readResult, error) {
	unlock := s.lock(req.Group, src.topic, src.queueID)
	defer unlock()
	k := queueKey{req.Group, src.topic, src.queueID}
	if s.readOnlyStopped(k) {
		return readResult{lastPhy: -1}, nil // as popLocked: nothing, and nothing to RestNum
	}
	pos, err := s.readOnlyStart(k, req.InitMode, true)
	if err != nil {
		return readResult{}, err
	}
	retry := src.flag != FlagNormal
	r, err := s.readQueue(src.topic, src.queueID, pos, remain, s.cfg.MaxTransferBytes, src.filter, !retry)
	if err != nil {
		return readResult{}, err
	}
	if retry {
		// A staged copy is handed out from its time on, here too, and
		// only while the copy of the master's state holds its message.
		if at := cutAtGate(&r, popTime); at > 0 {
			s.gates.arm(k, at, s.now(), true)
		}
		if err := s.dropSettledCopies(req.Group, &r, false); err != nil {
			return readResult{}, err
		}
	}
	on := heldOn{req.Topic, src.queueID}
	if src.topic != req.Topic {
		on.queueID = -1 // a pop-retry topic: read by the pops of every queue
	}
	now := s.now()
	s.handed.handOut(k, on, pos, r.from, r.next, popTime+req.InvisibleTime, now)
	s.slaveFlight.add(k, on, popTime, popTime+req.InvisibleTime, r.offsets, now)
	return r, nil
}

// readOnlyPin returns where a non-orderly read-only pop that is full
// before it reads a queue would have started on it, remembering the
// start of a group without a committed offset there (as RocketMQ's
// slave commits the start of every queue its pop locks).
func (s *Service) readOnlyPin(req PopRequest, src source) (int64, error) {
	unlock := s.lock(req.Group, src.topic, src.queueID)
	defer unlock()
	return s.readOnlyStart(queueKey{req.Group, src.topic, src.queueID}, req.InitMode, true)
}

// readOnlyStart returns where a non-orderly read-only pop of k starts
// (see handedOut): past what the slave's pops handed out that is still
// invisible, or at the group's offset on the slave, which is the slave's
// own entry (slaveOrders), else the committed offset copied from the
// master, else where InitMode places the group; while an acting master's
// revive runs, past the master's copied pop position too (pastRevived);
// with pin that start is made the slave's own entry (as RocketMQ's slave
// commits the start of every queue its pop locks). The caller holds the
// queue's lock when pin is set.
func (s *Service) readOnlyStart(k queueKey, initMode int32, pin bool) (int64, error) {
	now := s.now()
	own, hasOwn, err := s.slaveOwnOffset(k, now)
	if err != nil {
		return 0, fmt.Errorf("read-only pop of %s/%d: %w", k.topic, k.queueID, err)
	}
	if hasOwn {
		if own, err = s.pastRevived(k, own); err != nil {
			return 0, fmt.Errorf("read-only pop of %s/%d: pop position of %s: %w", k.topic, k.queueID, k.group, err)
		}
		return s.handed.from(k, own, true, now), nil
	}
	base, committed, err := s.cfg.Offsets.Get(k.group, k.topic, k.queueID)
	if err != nil {
		return 0, fmt.Errorf("read-only pop of %s/%d: committed offset of %s: %w", k.topic, k.queueID, k.group, err)
	}
	if !committed {
		if base, err = s.initOffset(k.topic, k.queueID, initMode); err != nil {
			return 0, fmt.Errorf("read-only pop of %s/%d: %w", k.topic, k.queueID, err)
		}
	}
	if base, err = s.pastRevived(k, base); err != nil {
		return 0, fmt.Errorf("read-only pop of %s/%d: pop position of %s: %w", k.topic, k.queueID, k.group, err)
	}
	if !committed && pin {
		if err := s.slaveOrd.setOwn(k, base, now); err != nil {
			return 0, fmt.Errorf("read-only pop of %s/%d: %w", k.topic, k.queueID, err)
		}
	}
	return s.handed.from(k, base, committed, now), nil
}

// OffsetsCopied tells the service of a slave that its master's committed
// offsets were copied, replaced reporting the group and topic pairs the
// master's table had: as RocketMQ's slave sync puts the master's table
// over its own (putAll, a pair's queues replaced whole), the slave's own
// entries of those pairs (what its orderly pops and acks committed, and
// the starts of its pops) are dropped, whether the master's offsets are
// ahead of them or behind (reset backward on the master), and its pops
// go by the copied offsets from then on. Pairs the master does not have
// keep the slave's entries. The entries go from the slave's store too;
// the error joins those of the entries it did not let go, which hold
// until the next copy.
func (s *Service) OffsetsCopied(replaced func(group, topic string) bool) error {
	return s.dropSlaveOwn(func(k queueKey) bool { return replaced(k.group, k.topic) })
}

// CommitOffset commits a client's offset of the group's queue on a slave
// (UPDATE_CONSUMER_OFFSET): the committed offset (keyspace 0x30) and the
// drop of the slave's own entry of the queue (0x59), as the commit
// overwrites the one entry of RocketMQ's slave's offset table, go to the
// store in one synced write, so that a crash keeps both or neither (two
// writes left the own entry over the client's commit when the process
// stopped between them). The orderly batch the entry may hold stays.
// It returns once the write is durable; when the store refuses it,
// neither changed.
func (s *Service) CommitOffset(group, topic string, queueID int32, offset int64) error {
	k := queueKey{group, topic, queueID}
	unlock := s.lock(group, topic, queueID)
	defer unlock()
	q := s.slaveOrd.get(k)
	q.committed, q.hasCommitted = 0, false
	wait, err := s.slaveOrd.putLocked(k, q, s.now(), func(b *kvindex.PopBatch) error {
		return b.SetCommitted(group, topic, queueID, offset)
	})
	if err != nil {
		return fmt.Errorf("commit the offset of %s on %s/%d on a slave: %w", group, topic, queueID, err)
	}
	if err := wait(); err != nil {
		return fmt.Errorf("commit the offset of %s on %s/%d on a slave: %w", group, topic, queueID, err)
	}
	return nil
}

// SlaveOffset returns the slave's own offset entry of the group's queue
// (what its orderly pops and acks committed, or where a pop of a group
// without an offset started): ok is false when there is none, or when
// it is past the end of the queue (a pop drops such an entry). The
// slave's pops go by it rather than by the offset copied from the
// master, and so do its answers of a group's offset, as RocketMQ's slave
// answers from its one offset table. It writes nothing.
func (s *Service) SlaveOffset(group, topic string, queueID int32) (int64, bool, error) {
	q := s.slaveOrd.get(queueKey{group, topic, queueID})
	if !q.hasCommitted {
		return 0, false, nil
	}
	maxOff, err := s.cfg.CQ.MaxOffset(topic, queueID)
	if err != nil {
		return 0, false, fmt.Errorf("max offset of %s/%d: %w", topic, queueID, err)
	}
	if q.committed > maxOff {
		return 0, false, nil
	}
	return q.committed, true, nil
}

// SlaveOffsetTopics returns the topics on which the group has an own
// offset entry of the slave's (SlaveOffset), sorted.
func (s *Service) SlaveOffsetTopics(group string) []string {
	var topics []string
	for _, k := range s.slaveOrd.ownKeys(func(k queueKey) bool { return k.group == group }) {
		topics = append(topics, k.topic)
	}
	slices.Sort(topics)
	return slices.Compact(topics)
}
