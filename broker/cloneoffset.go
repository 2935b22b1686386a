package broker

import (
	"context"
	"fmt"
	"strings"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// processCloneGroupOffset answers CLONE_GROUP_OFFSET (mqadmin
// cloneGroupOffset): the committed offsets of srcGroup on a topic become
// destGroup's, queue by queue, replacing the ones destGroup had on those
// queues. As in RocketMQ, a topic this broker has no config for is
// skipped, and so, unless the request says offline, is a topic the source
// group's online consumers do not subscribe to (its offsets there are left
// from an earlier subscription).
//
// A queue the source has no offset on keeps the destination's, where
// RocketMQ replaces the destination's whole queue map and so drops it: a
// position the destination group reached there is a better restart point
// than none, and the clone stays one batch of writes.
//
// A blank topic means every topic the source group has committed offsets
// on. RocketMQ lists those topics but then clones the blank topic's
// offsets for each, which copies nothing; this broker clones each topic it
// listed. Its %RETRY% topics are left out of that list: a retry topic
// belongs to the group that consumes it, and the destination group would
// only carry offsets on the source's retry topic that nothing reads.
//
// The offsets of every topic are written in one durable batch, through the
// committed-offset table (its cache, and the slaves that copy the table
// from GET_ALL_CONSUMER_OFFSET, see them as any commit). A reset of a
// cloned destination queue still waiting for that group's next pull is
// dropped, where RocketMQ keeps it: the older reset would otherwise move
// the group's next pull away from the cloned offset. Live consumers of the
// destination group still commit the offsets they hold over the clone, as
// in RocketMQ; the tool is meant for a group that is not running.
//
// A destination queue the destination group pops moves as a reset
// (INVOKE_BROKER_TO_RESET_OFFSET) moves it: its pop position becomes the
// cloned offset and an orderly batch in flight stops blocking it. In
// RocketMQ a pop starts from the committed offset, so a clone moves the
// group's pops there; rocketkv keeps a pop position beside the committed
// offset, which would otherwise go on from where the group was.
//
// A clone of a group onto itself changes nothing, as RocketMQ's (it puts
// a copy of the group's own table back): treated as a reset, it would move
// the group's pops back to its committed offset and deliver its messages
// in flight again.
//
// The answer is SUCCESS whatever was skipped, as RocketMQ's.
func (b *Broker) processCloneGroupOffset(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	groups, bad := requiredFields(req, "srcGroup", "destGroup")
	if bad != nil {
		return bad
	}
	src, dest := groups[0], groups[1]
	if src == dest {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	h := remoting.Header(req.ExtFields)
	// The topic as the access check read it: trimmed, "Secret " would be
	// Secret after a check of "Secret ". A blank one is every topic.
	topic := h.OptString("topic", "")
	if strings.TrimSpace(topic) == "" {
		topic = ""
	}
	offline := h.OptBool("offline", false)

	deletions := b.db.Pop().TopicDeletions() // before the topic checks: see cloneOffsets
	byTopic, err := b.groupOffsetsByTopic(src)
	if err != nil {
		b.log.Error().Err(err).Str("srcGroup", src).Msg("clone group offset failed")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	topics := []string{topic}
	if topic == "" {
		topics = topics[:0]
		for t := range byTopic {
			if !meta.IsRetryTopic(t) {
				topics = append(topics, t)
			}
		}
	}
	subscribed, live := b.clients.subscribedTopics(src)
	var updates []kvindex.OffsetUpdate
	for _, t := range topics {
		if _, ok, err := b.topicConfig(t); err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		} else if !ok {
			b.log.Warn().Str("srcGroup", src).Str("destGroup", dest).Str("topic", t).Msg("clone group offset: no such topic on this broker, skipped")
			continue
		}
		if !offline && live && !subscribed[t] {
			b.log.Warn().Str("srcGroup", src).Str("destGroup", dest).Str("topic", t).
				Msg("clone group offset: topic not in the online source group's subscription, skipped")
			continue
		}
		for _, u := range byTopic[t] {
			u.Group = dest
			updates = append(updates, u)
		}
	}
	if err := b.cloneOffsets(updates, deletions); err != nil {
		b.log.Error().Err(err).Str("srcGroup", src).Str("destGroup", dest).Str("topic", topic).Msg("clone group offset failed")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	b.log.Info().Str("srcGroup", src).Str("destGroup", dest).Str("topic", topic).Bool("offline", offline).
		Int("queues", len(updates)).Stringer("by", conn.RemoteAddr()).Msg("consumer group offsets cloned")
	return remoting.NewResponse(req, remoting.Success, "")
}

// groupOffsetsByTopic returns a group's committed offsets grouped by
// topic.
func (b *Broker) groupOffsetsByTopic(group string) (map[string][]kvindex.OffsetUpdate, error) {
	out := make(map[string][]kvindex.OffsetUpdate)
	err := b.offsets.Each(group, func(u kvindex.OffsetUpdate) bool {
		out[u.Topic] = append(out[u.Topic], u)
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("read offsets of group %s: %w", group, err)
	}
	return out, nil
}

// cloneOffsets commits the cloned offsets in one durable batch, after
// dropping the resets of those queues that wait for a pull (they are put
// back if the batch fails), then moves the pop state of the queues the
// destination group pops. The batch is written under holds of its topics
// (holdOffsetTopics): deletions is the store's TopicDeletions read before
// the caller found them, and the offsets of a topic deleted since are
// left out, as its deletion deleted the source's.
func (b *Broker) cloneOffsets(updates []kvindex.OffsetUpdate, deletions uint64) error {
	updates, gone, release, err := b.holdOffsetTopics(updates, deletions)
	if err != nil {
		return err
	}
	for _, topic := range gone {
		b.log.Warn().Str("topic", topic).Msg("clone group offset: topic deleted during the clone, skipped")
	}
	if len(updates) == 0 {
		release()
		return nil
	}
	dropped := make(map[int]int64)
	for i, u := range updates {
		if off, ok := b.resets.take(u.Group, u.Topic, u.QueueID); ok {
			dropped[i] = off
		}
	}
	err = b.offsets.SetMany(updates, true)
	// Released before the pops move: they hold their topic themselves,
	// and a second hold would wait for a deletion waiting for the first.
	release()
	if err != nil {
		for i, off := range dropped {
			b.resets.restore(updates[i].Group, updates[i].Topic, updates[i].QueueID, off)
		}
		return fmt.Errorf("commit %d cloned offsets of %s: %w", len(updates), updates[0].Group, err)
	}
	byTopic := make(map[string]map[int32]int64)
	for _, u := range updates {
		if byTopic[u.Topic] == nil {
			byTopic[u.Topic] = make(map[int32]int64)
		}
		byTopic[u.Topic][u.QueueID] = u.Offset
	}
	group := updates[0].Group
	for topic, targets := range byTopic {
		if _, err := b.popSvc.ResetOffsets(group, topic, targets); err != nil {
			return fmt.Errorf("move pops of %s on %s to the cloned offsets: %w", group, topic, err)
		}
	}
	return nil
}
