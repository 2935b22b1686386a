package pop

import (
	"fmt"
	"math"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
)

// ReviveRecord is the kind of record of RocketMQ's revive topic a POP
// event of rocketkv stands for, which RocketMQ's POP metrics label
// revive_message_type.
type ReviveRecord uint8

const (
	// ReviveCheckpoint stands for a checkpoint (RocketMQ's CK message).
	ReviveCheckpoint ReviveRecord = iota
	// ReviveAck stands for an ack (RocketMQ's ACK or BATCH_ACK message).
	ReviveAck
)

// Observer is told of the POP events that RocketMQ's PopMetricsManager
// counts, in rocketkv's terms: RocketMQ puts checkpoints and acks to its
// revive topic and scans them back, rocketkv writes and reads the
// checkpoints in the index and applies an ack to its checkpoint at once.
// The broker's metrics implement it. Its methods are called on the pop,
// ack and revive paths, some under a queue's lock: they must be cheap and
// must not block.
type Observer interface {
	// Put: a non-orderly pop of a queue or a change of invisible time
	// wrote a checkpoint of group's messages of topic (the topic read: a
	// pop-retry topic for retried messages), r ReviveCheckpoint; or an
	// ack, an entry of a batch ack or a change of invisible time was
	// applied to one, r ReviveAck (a stale handle too: RocketMQ puts its
	// ACK all the same). err is the write's, nil when it was stored.
	Put(group, topic string, r ReviveRecord, err error)
	// Got: revive read a checkpoint of group's messages of topic whose
	// deadline passed with messages not acknowledged (r is
	// ReviveCheckpoint: revive never reads an ack).
	Got(group, topic string, r ReviveRecord)
	// Retried: revive put n messages of group, popped from topic, to the
	// group's pop-retry topic; status is the put's when err is nil.
	Retried(group, topic string, n int, status commitlog.AppendStatus, err error)
}

// notePut tells the Observer, if any, of a checkpoint or an ack written.
func (s *Service) notePut(group, topic string, r ReviveRecord, err error) {
	if s.obs != nil {
		s.obs.Put(group, topic, r, err)
	}
}

// noteGot tells the Observer, if any, of a checkpoint revive read.
func (s *Service) noteGot(group, topic string) {
	if s.obs != nil {
		s.obs.Got(group, topic, ReviveCheckpoint)
	}
}

// noteRetried tells the Observer, if any, of a revive's put to a
// pop-retry topic.
func (s *Service) noteRetried(group, topic string, n int, status commitlog.AppendStatus, err error) {
	if s.obs != nil {
		s.obs.Retried(group, topic, n, status, err)
	}
}

// ReviveBacklog is how far revive is behind: the checkpoints whose
// deadline passed that it has not handled yet, and the deadline of the
// earliest of them.
type ReviveBacklog struct {
	// Due counts the checkpoints due and not revived, at most the limit
	// given to ReviveBacklog.
	Due int64
	// Earliest is the earliest deadline among them, Unix ms; 0 when
	// none is due.
	Earliest int64
}

// ReviveBacklog counts the checkpoints due at now (Unix ms) that revive
// has not handled, up to limit (<= 0: no limit), by one scan of the
// deadline index from where the next revive round starts. While the
// revive loop does not run (a slave, before Start, after Close) it is
// empty: nothing is behind a revive that is not meant to run, as
// RocketMQ's revive services report 0 until they run.
func (s *Service) ReviveBacklog(now int64, limit int) (ReviveBacklog, error) {
	var r ReviveBacklog
	if !s.reviving.Load() {
		return r, nil
	}
	from := min(s.scanFrom.Load(), s.lowDeadline.Load())
	if from == math.MaxInt64 {
		from = 0
	}
	err := s.store.DueEntries(from, now, 0, func(d kvindex.DueEntry) bool {
		if r.Due == 0 {
			r.Earliest = d.VisibleAt
		}
		r.Due++
		return limit <= 0 || r.Due < int64(limit)
	})
	if err != nil {
		return ReviveBacklog{}, fmt.Errorf("revive backlog: %w", err)
	}
	return r, nil
}
