package pop

import (
	"context"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
)

// An acting master's revive (RunActingRevive). A slave acting for its
// master that is down (enableSlaveActingMaster) holds a copy of its
// master's POP state: the checkpoints, their deadlines, the pop
// positions and the revive batches, as of the slave's last sync from the
// master. With enableRemoteEscape its broker runs the revive loop on that
// copy, as RocketMQ's acting master runs its PopReviveService on the CK
// and ACK messages its CommitLog copied, and puts what it revives
// through the escape bridge to another broker group's master (RocketMQ's
// EscapeBridge.putMessageToSpecificQueue), one message at a time. While
// it runs:
//
//   - the revive works as a master's on the copy (same rounds, retry
//     topic or DLQ, reconsumeTimes + 1, 1ST_POP_TIME): a checkpoint
//     becomes a revive batch in the slave's own index before the puts,
//     and a put that fails gives the messages it did not store back to
//     their checkpoint, due again after the backoff (reviveBackoff). The
//     bridge says which messages it stored, one by one; a message whose
//     put timed out after the other master stored it is put again.
//     RocketMQ's acting master tries a failed put again never while it
//     acts: it re-puts the checkpoint into its own store, which a slave
//     refuses, and commits its revive offset all the same; the message
//     comes back only when the master returns and revives it.
//   - the property naming a revive's delivery (kvindex.PropertyRevivedFrom)
//     is not sent: it names a queue of this broker group, and the other
//     master would take it for one of its own revives.
//   - the topics revive puts to are not created here: the other master
//     must have the pop-retry topic (or DLQ) in its route, as RocketMQ's
//     bridge finds it only there (RocketMQ's revive creates it in the
//     acting master's own table, where no put ever reaches it).
//   - a non-orderly read-only pop starts past the master's copied pop
//     position as well as the group's committed offset (readOnlyStart):
//     what the master had in flight is revived, not popped again from the
//     slave's queue, as RocketMQ's acting master pops from the offset its
//     master committed past what it popped. Without a revive that
//     delivers them (escape off), the slave's pops start at the committed
//     offset instead and deliver them again themselves.
//   - a non-orderly ack on the slave of a message the master popped
//     removes it from the copied checkpoint (ackCopied), so that it is not
//     revived. RocketMQ's acting master sends its ACK message through
//     the bridge to a revive queue of another group's master, which the
//     checkpoint (revived from the acting master's copy, or sent by its
//     timer to a queue the route turns to) seldom reaches: the message
//     is mostly revived all the same. A change of its invisible time
//     moves it to a checkpoint of its own under the new deadline
//     (ChangeInvisibleTimeCopied), as on a master; RocketMQ's sends the
//     new checkpoint and the ack of the old one through the bridge, the
//     old one then mostly revived all the same too.
//
// What the master did after the slave's last copy is not in it: messages
// it popped since are popped again from the slave's queues, and those
// acknowledged on it since are revived again. When the master returns
// the slave stops (its broker cancels the run) and the next sync replaces
// the copy: the master's revive, from its own state, delivers again what
// the acting master revived, as RocketMQ's master does from its own
// revive offset.

// RemotePut puts one revived message on another broker group's master
// (an acting master's escape bridge): nil once that master stored it.
type RemotePut func(ctx context.Context, m *commitlog.Message) error

// actingRevive is the state of a running RunActingRevive.
type actingRevive struct{ put RemotePut }

// RunActingRevive runs the revive loop on the POP state copied from the
// master, with put in place of the broker's own Put (see above), until
// ctx ends. It is for a slave acting as its group's master, whose
// service was not started (Start); it returns at once, with an error
// logged, when the revive already runs.
func (s *Service) RunActingRevive(ctx context.Context, put RemotePut) {
	if s.cancel != nil || !s.acting.CompareAndSwap(nil, &actingRevive{put: put}) {
		s.log.Error().Msg("acting master revive not started: the revive already runs")
		return
	}
	defer s.acting.Store(nil)
	s.reviving.Store(true)
	defer s.reviving.Store(false)
	// The copy replaced the state wholesale since a run before: its
	// deadlines may be anywhere below the cursor of that run.
	s.cursor = 0
	s.log.Info().Msg("acting master: revive of the master's in-flight POP messages started, through the escape bridge")
	s.reviveLoop(ctx)
	s.log.Info().Msg("acting master: revive of the master's in-flight POP messages stopped")
}

// ActingRevive reports whether an acting master's revive runs.
func (s *Service) ActingRevive() bool { return s.acting.Load() != nil }

// putRemote puts the revived messages of k one by one through put, the
// pop-retry ones first, and returns those stored before the first that
// failed, and whether all were. The property naming the revive's
// delivery is left out of what is sent.
func (s *Service) putRemote(ctx context.Context, k queueKey, put RemotePut, retry, dlq []*commitlog.Message) ([]*commitlog.Message, bool) {
	var stored []*commitlog.Message
	for i, msgs := range [][]*commitlog.Message{retry, dlq} {
		for _, m := range msgs {
			out := *m
			out.Properties = commitlog.RewriteProperties(m.Properties, []string{kvindex.PropertyRevivedFrom})
			err := put(ctx, &out)
			if i == 0 {
				s.noteRetried(k.group, k.topic, 1, commitlog.PutOK, err)
			}
			if err != nil {
				s.log.Warn().Err(err).Str("topic", m.Topic).Str("group", k.group).
					Msg("acting master revive: put to another broker group failed; retrying later")
				return stored, false
			}
			stored = append(stored, m)
		}
	}
	return stored, true
}

// pastRevived returns base, or the group's copied pop position of k when
// that is further and an acting master's revive runs: the messages below
// it the master had in flight are revived, those it did not were
// acknowledged.
func (s *Service) pastRevived(k queueKey, base int64) (int64, error) {
	if s.acting.Load() == nil {
		return base, nil
	}
	pos, ok, err := s.store.Position(k.group, k.topic, k.queueID)
	if err != nil {
		return 0, err
	}
	if ok && pos > base {
		return pos, nil
	}
	return base, nil
}

// ackCopied acknowledges, while an acting master's revive runs, messages
// of a non-orderly pop in the checkpoint copied from the master that
// their handle names, so that the revive does not deliver them again
// (as Ack on a master: the committed offset moves past them too). A
// handle of the slave's own pops names no checkpoint and changes
// nothing; without the revive nothing changes either.
func (s *Service) ackCopied(group, topic string, queueID int32, ckOffset int64, offsets []int64, popTime, invisibleTime int64) (AckResult, error) {
	if s.acting.Load() == nil {
		return AckResult{}, nil
	}
	return s.ackQueue(group, topic, queueID, ckOffset, offsets, popTime, invisibleTime)
}

// ChangeInvisibleTimeCopied is ChangeInvisibleTime, while an acting
// master's revive runs, of a message of a non-orderly pop in a
// checkpoint copied from the master: the message moves to a checkpoint
// of its own under the new deadline, which the revive keeps to, and the
// new handle names it. The result's Changed is false, and nothing
// changed, when no acting master's revive runs or the handle names no
// copied checkpoint that holds the message (one of the slave's own
// pops, or acknowledged, or revived already).
func (s *Service) ChangeInvisibleTimeCopied(group, topic string, queueID int32, offset int64, h Handle, invisibleTime int64) (ChangeResult, error) {
	if s.acting.Load() == nil || h.Orderly() {
		return ChangeResult{}, nil
	}
	return s.ChangeInvisibleTime(group, topic, queueID, offset, h, invisibleTime)
}
