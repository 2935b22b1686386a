package pop

import (
	"fmt"

	"github.com/rocketkv/rocketkv/kvindex"
)

// PopReadOnly answers a pop on a slave, whose store only its master
// writes: the messages a pop would return, read from the group's
// positions, with the same header fields, and nothing recorded: no
// checkpoint, no position, no committed offset, no orderly lock.
//
// It is what a client sees of Apache RocketMQ 5.3.3's slave (brokerRole
// SLAVE, with or without slaveReadEnable, which only pulls look at):
// PopMessageProcessor reads the slave's queues and answers SUCCESS with
// the messages, and the checkpoint it writes goes through EscapeBridge,
// which on a broker that is not broker 0 (without slave acting master)
// puts nothing and says SERVICE_NOT_AVAILABLE, which the pop only logs.
// Nothing is in flight afterwards: the slave revives nothing and acks
// change nothing there.
//
// Every pop starts, as RocketMQ's slave's, from the group's committed
// offset as last copied from the master (the master's pop position, past
// what it has in flight, is not used: while the master is down, what it
// had in flight and cannot revive is delivered again from the slave), or
// where InitMode places a group without one. RocketMQ's slave then moves
// the group on in memory (its PopBufferMergeService offsets), which it
// forgets every 5 s; rocketkv's keeps no such memory, so pops between two
// syncs return the same messages. An orderly pop ignores whatever
// orderly batch of the master's was copied and counts no earlier
// delivery (RocketMQ's slave has none of its master's orderly state).
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
		pos, _, err := s.startOffset(req.Group, src.topic, src.queueID, req.InitMode, false)
		if err != nil {
			return res, fmt.Errorf("read-only pop of %s/%d: %w", src.topic, src.queueID, err)
		}
		remain := req.MaxMsgNums - res.count()
		if res.count() > 0 && len(res.Body) >= maxPopBody {
			remain = 0
		}
		if remain <= 0 {
			if err := s.addRestFrom(src, pos, &res); err != nil {
				return res, err
			}
			continue
		}
		if req.Order {
			remain = min(remain, kvindex.MaxOrderBatch)
		}
		r, err := s.readQueue(src.topic, src.queueID, pos, remain, s.cfg.MaxTransferBytes, src.filter, true)
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
		if req.Order {
			// The count of a batch no delivery was counted for, as
			// RocketMQ's slave, which has no orderly state, reports it.
			info.AddOrderQueue(src.flag, src.queueID, 0)
		}
	}
	res.StartOffsetInfo = info.StartOffsetInfo()
	res.MsgOffsetInfo = info.MsgOffsetInfo()
	res.OrderCountInfo = info.OrderCountInfo()
	return res, nil
}
