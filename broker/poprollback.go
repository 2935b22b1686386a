package broker

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqpop"
	"github.com/rocketkv/rocketkv/remoting"
	"github.com/rocketkv/rocketkv/timer"
)

// The way back to Apache RocketMQ for POP messages in flight. RocketMQ
// keeps them as check-point messages in its revive topic; rocketkv keeps
// them in its index, which RocketMQ does not read. POP_ROLLBACK (what
// mqadmin exportPopRecord sends; RocketMQ answers it by moving its KV POP
// records to the revive topic) writes every checkpoint in flight to the
// revive topic's queue 0 as a RocketMQ check-point and records from which
// offset (kvindex.PopRollback). kvdump export-rocketmq then starts
// RocketMQ's revive there, so that it re-delivers what stays unacked.
// rocketkv keeps its own checkpoints and goes on reviving them itself if
// it keeps serving the store. Acks after the rollback do not reach
// RocketMQ, which may then deliver those messages once more (at least
// once); stop the POP consumers first.
//
// Staged checkpoints (popReviveStageAhead, kvindex.Checkpoint.Staged) are
// left out on purpose: their messages' copies already sit in the group's
// pop-retry topic, which RocketMQ serves at once (it knows nothing of the
// copy's RKV_VISIBLE_AT), so a check-point as well would have RocketMQ
// deliver each message twice, the copy and then the revive. Left out,
// each arrives once, possibly before its invisible time ends (and a copy
// of a message acknowledged since its staging arrives too). The rollback
// lists the checkpoints by their deadline entries (a staged one's is its
// backstop) and leaves the staged ones out, counting them for the log and
// the answer's remark. A checkpoint the staged revive stages after the
// listing has both a check-point and a copy: delivered twice, still at
// least once.

// reviveQueueNum is RocketMQ's default count of revive queues, the
// queues of a revive topic rocketkv creates.
const reviveQueueNum = 8

// rollbackBatch is how many check-points go into one CommitLog append.
const rollbackBatch = 64

// processPopRollback answers POP_ROLLBACK.
func (b *Broker) processPopRollback(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	n, r, err := b.rollbackPop(ctx)
	if err != nil {
		b.log.Error().Err(err).Msg("POP rollback: the check-points in flight were not all written to the revive topic")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	b.log.Info().Int("checkpoints", n.written).Int64("stagedLeftOut", n.staged).Int64("stagedMessages", n.stagedMessages).
		Int64("from", r.From).Int64("at", r.At).
		Msg("POP rollback: the check-points in flight are in the revive topic for Apache RocketMQ; staged ones left out, their copies are in the pop-retry topics")
	remark := fmt.Sprintf("%d check-points written to %s/0 from offset %d; %d staged checkpoints (%d messages) left out, their copies are in the pop-retry topics",
		n.written, r.Topic, r.From, n.staged, n.stagedMessages)
	return remoting.NewResponse(req, remoting.Success, remark)
}

// rollbackCounts is what a POP rollback wrote and left out.
type rollbackCounts struct {
	// written is the check-points written to the revive topic.
	written int
	// staged and stagedMessages are the staged checkpoints left out and
	// the messages they hold, counted after the listing.
	staged, stagedMessages int64
}

// rollbackPop writes the checkpoints in flight, staged ones left out, to
// queue 0 of the cluster's revive topic and records the rollback; it
// returns how many it wrote and left out.
func (b *Broker) rollbackPop(ctx context.Context) (rollbackCounts, kvindex.PopRollback, error) {
	var n rollbackCounts
	topic := rmqpop.TopicPrefix + b.cfg.BrokerClusterName
	if _, err := b.topics.ensureSystemTopic(topic, reviveQueueNum, meta.PermRead|meta.PermWrite); err != nil {
		return n, kvindex.PopRollback{}, fmt.Errorf("create the revive topic %s: %w", topic, err)
	}
	r := kvindex.PopRollback{Topic: topic, From: -1, At: time.Now().UnixMilli()}
	var cks []kvindex.Checkpoint
	// The deadline entries name every checkpoint; the staged ones stay
	// out (see above).
	if err := b.db.Pop().DueCheckpoints(0, math.MaxInt64, 0, func(c kvindex.Checkpoint) bool {
		if len(c.Offsets) > 0 && !c.Staged {
			cks = append(cks, c)
		}
		return ctx.Err() == nil
	}); err != nil {
		return n, r, fmt.Errorf("read the checkpoints in flight: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return n, r, err
	}
	counts, err := b.db.Pop().CountCheckpoints()
	if err != nil {
		return n, r, fmt.Errorf("count the staged checkpoints: %w", err)
	}
	n.staged, n.stagedMessages = counts.Staged, counts.StagedMessages
	written := len(cks)
	for len(cks) > 0 {
		batch := cks[:min(rollbackBatch, len(cks))]
		cks = cks[len(batch):]
		msgs := make([]*commitlog.Message, 0, len(batch))
		for i := range batch {
			m, err := b.checkpointMessage(topic, &batch[i])
			if err != nil {
				return n, r, err
			}
			msgs = append(msgs, m)
		}
		res, err := b.putMessages(ctx, msgs, true)
		if err != nil {
			return n, r, fmt.Errorf("write check-points to %s: %w", topic, err)
		}
		if r.From < 0 {
			r.From = res.QueueOffset
		}
	}
	if r.From < 0 {
		// Nothing in flight: RocketMQ's revive starts at the end.
		end, err := b.qoffsets.Next(topic, 0)
		if err != nil {
			return n, r, err
		}
		r.From = end
	}
	if err := b.db.SetPopRollback(r); err != nil {
		return n, r, err
	}
	n.written = written
	return n, r, nil
}

// ackTimeInterval is RocketMQ's PopAckConstants.ackTimeInterval: a
// check-point is delivered to the revive topic this long before its
// revive time.
const ackTimeInterval = 1000

// checkpointMessage is the revive-topic message RocketMQ's broker writes
// for a pop (buildCkMsg): tag "ck", the PopCheckPoint body and its unique
// key, in queue 0, the revive queue of rocketkv's receipt handles, with
// TIMER_DELIVER_MS at its revive time less ackTimeInterval (1 s). It is
// stored at once rather than through the timer (RocketMQ's revive waits
// for a check-point's time either way), but the property must be there:
// RocketMQ's revive reads the end of what it may revive from it, and
// stops at the first check-point of a queue whose messages carry none.
func (b *Broker) checkpointMessage(topic string, c *kvindex.Checkpoint) (*commitlog.Message, error) {
	ck := rmqpop.Checkpoint{Group: c.Group, Topic: c.Topic, QueueID: c.QueueID, StartOffset: c.CKOffset, PopTime: c.PopTime,
		InvisibleTime: c.VisibleAt - c.PopTime, BrokerName: b.cfg.BrokerName, RePuts: c.Attempts, Offsets: c.Offsets}
	body, err := rmqpop.EncodeCheckpoint(ck)
	if err != nil {
		return nil, err
	}
	host := b.hostAddr()
	return &commitlog.Message{
		Topic: topic, QueueID: 0, BornTimestamp: time.Now().UnixMilli(), BornHost: host, StoreHost: host, Body: body,
		Properties: commitlog.FormatProperties(map[string]string{commitlog.PropertyTags: rmqpop.TagCheckpoint,
			"UNIQ_KEY": rmqpop.CheckpointUniqKey(ck), timer.PropDeliverMs: strconv.FormatInt(c.VisibleAt-ackTimeInterval, 10)}),
	}, nil
}
