package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// A topic the master deleted leaves the master's topic table; a slave
// learns of it at its next copy of the table and then drops the topic's
// queues, with their consumers' state, as the master did. Apache
// RocketMQ's slave drops only the config and keeps the queues: promoted,
// and the topic created on it again, it numbers the new messages after
// the deleted ones, which a consumer reading from the first offset gets.
//
// What the slave drops is bounded twice, so that it never drops what its
// master still serves:
//
//   - only queues whose last entry names a record below the slave's
//     CommitLog end when it asked for the table
//     (kvindex.Dispatcher.DeleteReplicaTopic): a topic created again
//     since then may have records indexed already;
//   - only queues the master says are empty (GET_MAX_OFFSET 0): a master
//     may hold queues of a topic its table does not list (a store whose
//     topics.json lost the topic, or a topic created on an earlier master
//     that died before this one, its slave then, copied the config), and
//     serves them once the topic is created again.
//
// The consumer state (offsets, pop positions, checkpoints, orderly
// batches) of the queues dropped goes with them, of the whole topic in
// one pass when every queue went, as on the master; a queue kept keeps
// its own.

// stepMasterDeletedTopicDropped is reported (Broker.recoveryStep, crash
// tests) once a slave dropped what it drops of a topic its master
// deleted, before it takes the master's table.
const stepMasterDeletedTopicDropped = "master deleted topic dropped"

// masterSeen is what a sync step saw of the master when it asked for a
// table.
type masterSeen struct {
	// logEnd is this broker's CommitLog end before it asked.
	logEnd int64
	// maxOffset asks the master for a queue's max offset; nil when there
	// is no master to ask (nothing is dropped then).
	maxOffset func(topic string, queueID int32) (int64, error)
}

// dropMasterDeletedTopics drops, on a slave, the queues, with their
// consumer state, of the topics the table holds that topics, the
// master's table, no longer lists, within the bounds above. System topics
// and light message queues are left alone.
func (b *Broker) dropMasterDeletedTopics(topics []meta.TopicConfig, seen masterSeen) error {
	if !b.isSlave() || seen.maxOffset == nil || seen.logEnd <= 0 {
		return nil
	}
	theirs := make(map[string]bool, len(topics))
	for _, tc := range topics {
		theirs[tc.TopicName] = true
	}
	var gone []meta.TopicConfig
	if err := b.topics.table.EachExcept(theirs, func(tc meta.TopicConfig) bool {
		if !b.isSystemTopic(tc.TopicName) && !meta.IsLMQ(tc.TopicName) {
			gone = append(gone, tc)
		}
		return true
	}); err != nil {
		return fmt.Errorf("list the topics the master deleted: %w", err)
	}
	for _, tc := range gone {
		if err := b.dropMasterDeletedTopic(tc, seen); err != nil {
			return err
		}
	}
	return nil
}

// dropMasterDeletedTopic is dropMasterDeletedTopics for one topic, whose
// config this broker holds. A master that does not answer for one of the
// topic's queues leaves the topic as it is.
func (b *Broker) dropMasterDeletedTopic(tc meta.TopicConfig, seen masterSeen) error {
	topic := tc.TopicName
	queues := max(tc.ReadQueueNums, tc.WriteQueueNums)
	empty, err := masterEmptyQueues(topic, queues, seen.maxOffset)
	if err != nil {
		// Not a reason to keep the master's table from the slave: the
		// queues stay, as Apache RocketMQ's slave keeps them.
		b.log.Warn().Err(err).Str("topic", topic).
			Msg("slave: the master deleted the topic, but did not say whether its queues are empty; the topic's queues are kept")
		return nil
	}
	dropped, err := b.disp.DeleteReplicaTopic(topic, seen.logEnd, empty)
	if err != nil {
		return err
	}
	if err := b.dropDeletedTopicConsumerState(topic, dropped, len(dropped) == queues); err != nil {
		return err
	}
	b.deletionStep(stepMasterDeletedTopicDropped)
	b.log.Info().Str("topic", topic).Ints32("dropped", dropped).Int("masterEmpty", len(empty)).Int64("below", seen.logEnd).
		Msg("slave: the master deleted the topic; its queues dropped here go with their consumers' offsets and pop state")
	return nil
}

// maxOffsetAsksInFlight bounds the GET_MAX_OFFSET requests a slave has
// in flight to its master for one deleted topic: a topic of a thousand
// queues costs a few dozen round trips, not a thousand.
const maxOffsetAsksInFlight = 32

// masterEmptyQueues asks the master for the max offset of each of the
// topic's queues, several at a time, and returns the ids of those it
// says are empty, in order. The first error ends it: no more asks are
// sent and the error is returned.
func masterEmptyQueues(topic string, queues int, maxOffset func(string, int32) (int64, error)) ([]int32, error) {
	ends := make([]int64, queues)
	var asks errgroup.Group
	asks.SetLimit(maxOffsetAsksInFlight)
	var failed atomic.Bool
	for qid := range int32(queues) {
		asks.Go(func() error {
			if failed.Load() {
				return nil
			}
			n, err := maxOffset(topic, qid)
			if err != nil {
				failed.Store(true)
				return fmt.Errorf("the master's max offset of %s/%d: %w", topic, qid, err)
			}
			ends[qid] = n
			return nil
		})
	}
	if err := asks.Wait(); err != nil {
		return nil, err
	}
	var empty []int32
	for qid, n := range ends {
		if n == 0 {
			empty = append(empty, int32(qid))
		}
	}
	return empty, nil
}

// dropDeletedTopicConsumerState drops what consumers left of the queues
// of topic a deletion dropped: of the whole topic when every queue was
// dropped (whole), as the master's deletion did, in one pass.
// A slave holds no offset resets to forget: it refuses them.
func (b *Broker) dropDeletedTopicConsumerState(topic string, dropped []int32, whole bool) error {
	if whole {
		return b.dropTopicConsumerState(topic)
	}
	for _, qid := range dropped {
		if err := b.dropQueueConsumerState(topic, qid); err != nil {
			return err
		}
	}
	return nil
}

// askMasterMaxOffset asks the master for a queue's max offset
// (GET_MAX_OFFSET).
func askMasterMaxOffset(ctx context.Context, c masterClient, topic string, queueID int32) (int64, error) {
	resp, err := invokeMaster(ctx, c, remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": strconv.Itoa(int(queueID))})
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(resp.ExtFields["offset"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the master's max offset of %s/%d: %w", topic, queueID, err)
	}
	return n, nil
}
