package broker

import (
	"context"
	"fmt"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// processCleanUnusedTopic answers CLEAN_UNUSED_TOPIC (mqadmin
// cleanUnusedTopic): the ConsumeQueue of every topic the broker has no
// config for is dropped from every layout, system and LMQ topics
// excepted, as RocketMQ's cleanUnusedTopic. Such queues are left by a
// RocketMQ store whose CommitLog holds records of topics its topics.json
// no longer names (the first open indexes every record). Consumer offsets
// are kept, as in RocketMQ. The answer is SUCCESS; the log names the
// topics dropped. While a promoted slave still takes the topics its master
// never gave it a copy of (uncopiedtopics.go), it answers SYSTEM_ERROR:
// their queues are uncovered only until the take ends.
func (b *Broker) processCleanUnusedTopic(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if b.takingUncopied.Load() {
		b.log.Warn().Stringer("by", conn.RemoteAddr()).Msg("clean unused topics refused: the topics the master died before giving are still being taken")
		return remoting.NewResponse(req, remoting.SystemError,
			"this broker, promoted from slave, is still taking the topics its master died before giving it a copy of; clean unused topics again in a moment")
	}
	unused, err := b.unusedTopics(ctx)
	if err != nil {
		b.log.Error().Err(err).Msg("clean unused topics failed")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	for _, topic := range unused {
		if err := b.dropTopicQueues(topic); err != nil {
			b.log.Error().Err(err).Str("topic", topic).Msg("clean unused topics failed")
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
	}
	b.log.Warn().Strs("topics", unused).Stringer("by", conn.RemoteAddr()).Msg("dropped the ConsumeQueues of topics without a config")
	return remoting.NewResponse(req, remoting.Success, "")
}

// unusedTopics lists, in name order, the topics some ConsumeQueue layout
// holds queues of while the topic table has no config for them, system
// and LMQ topics left out.
func (b *Broker) unusedTopics(ctx context.Context) ([]string, error) {
	uncovered, err := b.uncoveredQueues(ctx, b.cqs, b.cqMirror)
	if err != nil {
		return nil, err
	}
	var unused []string
	for _, u := range uncovered {
		if !u.hasConfig && !b.isSystemTopic(u.topic) {
			unused = append(unused, u.topic)
		}
	}
	return unused, nil
}

// dropTopicQueues drops every queue of topic from the ConsumeQueue
// layouts written now, and records the drop for a layout that catches up
// later and for dispatch, which leaves out of the index the topic's
// records appended before the drop that it reaches only after it, as a
// topic deletion does; the topic's cached queue offsets and pending
// resets go too.
func (b *Broker) dropTopicQueues(topic string) error {
	err := b.disp.DeleteTopic(topic, func() error {
		for _, s := range []cq.Store{b.cqs, b.cqMirror} {
			if s == nil {
				continue
			}
			if err := s.DeleteTopic(topic); err != nil {
				return err
			}
		}
		return b.dropCompactedTopic(topic)
	})
	if err != nil {
		return fmt.Errorf("drop the ConsumeQueue of %s: %w", topic, err)
	}
	b.qoffsets.Forget(topic, kvindex.AnyQueue)
	b.resets.forgetTopic(topic)
	return nil
}

// processCleanExpiredConsumeQueue answers CLEAN_EXPIRED_CONSUMEQUEUE
// (mqadmin cleanExpiredCQ): the CommitLog's minimum is applied to every
// ConsumeQueue layout again, so entries of records retention deleted go
// (the file layout's expired files with them). Retention does this each
// time it deletes segments, so there is seldom anything left to do.
// RocketMQ also destroys a queue whose every entry expired, which restarts
// its numbering at 0 below the offsets its consumers committed; here such
// a queue stays, empty, with its numbering.
func (b *Broker) processCleanExpiredConsumeQueue(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	minOff := b.clog.MinOffset()
	if err := b.disp.ReapplyLogMin(minOff); err != nil {
		b.log.Error().Err(err).Int64("min", minOff).Msg("clean expired ConsumeQueues failed")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	b.log.Info().Int64("commitLogMin", minOff).Stringer("by", conn.RemoteAddr()).Msg("expired ConsumeQueue entries cleaned")
	return remoting.NewResponse(req, remoting.Success, "")
}
