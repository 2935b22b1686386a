package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// staticCleanInterval is how often the clean of static topics' expired
// mapping items wakes (RocketMQ's TopicQueueMappingCleanService waits
// 5 minutes between runs).
const staticCleanInterval = 5 * time.Minute

// staticCleanLoop drops, every staticCleanInterval while the hour is one
// of deleteWhen's (RocketMQ's UtilAll.isItTimeToDo), the oldest item of
// the logic queues this group leads once that item's physical queue holds
// nothing any more (cleanExpiredMappingItems). A slave skips it: its
// mappings are its master's copies.
func (b *Broker) staticCleanLoop(ctx context.Context) {
	t := time.NewTicker(staticCleanInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if b.isSlave() || !slices.Contains(b.live.cur.Load().cfg.DeleteWhen, time.Now().Hour()) {
			continue
		}
		if _, err := b.cleanExpiredMappingItems(ctx); err != nil {
			b.log.Error().Err(err).Msg("static topic mapping clean failed")
		}
	}
}

// itemQueueRange returns the min and max offsets of physical queue queueID of
// topic on broker group bname: this group's read here, another's asked of
// its master (GET_MIN_OFFSET and GET_MAX_OFFSET with lo=false; RocketMQ
// asks GET_TOPIC_STATS_INFO, which answers the same per queue).
func (b *Broker) itemQueueRange(ctx context.Context, topic, bname string, queueID int32) (minOff, maxOff int64, err error) {
	if bname == b.cfg.BrokerName {
		if minOff, err = b.minOffset(topic, queueID); err != nil {
			return 0, 0, err
		}
		if maxOff, err = b.cqs.MaxOffset(topic, queueID); err != nil {
			return 0, 0, err
		}
		return max(minOff, 0), max(maxOff, 0), nil
	}
	item := meta.LogicQueueMappingItem{Bname: bname, QueueID: queueID}
	ask := func(code int32) (int64, error) {
		req := remoting.NewRequest(code, map[string]string{"topic": topic}, nil)
		resp, err := b.forward(ctx, req, topic, item, nil)
		if err != nil {
			return 0, err
		}
		if resp.Code != remoting.Success {
			return 0, fmt.Errorf("broker %s answered %d %s", bname, resp.Code, resp.Remark)
		}
		return remoting.Header(resp.ExtFields).Int64("offset")
	}
	if minOff, err = ask(remoting.GetMinOffset); err != nil {
		return 0, 0, err
	}
	if maxOff, err = ask(remoting.GetMaxOffset); err != nil {
		return 0, 0, err
	}
	return max(minOff, 0), max(maxOff, 0), nil
}

// cleanExpiredMappingItems is RocketMQ's cleanItemExpired: for every
// static topic mapping of this group and every logic queue it leads with
// more than one item, the oldest item is dropped when its physical queue
// is empty (its max offset equals its min, every message it held gone,
// or is 0). An item whose group cannot be asked is kept. The mapping is
// stored with its epoch (an update of the same epoch and leader, as
// RocketMQ's) and the topics' data version moves on so that slaves copy
// it. It returns how many items were dropped.
func (b *Broker) cleanExpiredMappingItems(ctx context.Context) (int, error) {
	if b.mappings == nil {
		return 0, nil
	}
	details, err := b.mappings.All(ctx)
	if err != nil {
		return 0, fmt.Errorf("list static topic mappings: %w", err)
	}
	dropped := 0
	for _, d := range details {
		if ctx.Err() != nil {
			return dropped, ctx.Err()
		}
		if d.Bname != b.cfg.BrokerName {
			b.log.Warn().Str("topic", d.Topic).Str("bname", d.Bname).Msg("a static topic mapping of another broker is held here")
			continue
		}
		expired := map[int32]meta.LogicQueueMappingItem{}
		for _, id := range slices.Sorted(maps.Keys(d.HostedQueues)) {
			items := d.HostedQueues[id]
			if len(items) <= 1 || items[len(items)-1].Bname != d.Bname {
				continue
			}
			first := items[0]
			minOff, maxOff, err := b.itemQueueRange(ctx, d.Topic, first.Bname, first.QueueID)
			if err != nil {
				b.log.Warn().Err(err).Str("topic", d.Topic).Int32("logicQueue", id).Str("broker", first.Bname).
					Msg("static topic clean: the oldest item's queue offsets are unknown, kept")
				continue
			}
			if maxOff == minOff || maxOff == 0 {
				expired[id] = first
				b.log.Info().Str("topic", d.Topic).Int32("logicQueue", id).Str("broker", first.Bname).Int32("queueId", first.QueueID).
					Int32("gen", first.Gen).Int64("minOffset", minOff).Int64("maxOffset", maxOff).Msg("static topic mapping item expired, removed")
			}
		}
		if len(expired) == 0 {
			continue
		}
		n, err := b.dropMappingItems(d.Topic, d.Epoch, expired)
		dropped += n
		if err != nil {
			return dropped, err
		}
	}
	return dropped, nil
}

// dropMappingItems removes from topic's mapping, under mappingMu, the
// first items of the logic queues of expired, when the mapping still has
// epoch and those queues still begin with them (an update in between
// wins).
func (b *Broker) dropMappingItems(topic string, epoch int64, expired map[int32]meta.LogicQueueMappingItem) (int, error) {
	b.mappingMu.Lock()
	defer b.mappingMu.Unlock()
	cur, ok, err := b.mappings.Get(topic)
	if err != nil {
		return 0, fmt.Errorf("read the static topic mapping of %s: %w", topic, err)
	}
	if !ok || cur.Epoch != epoch {
		return 0, nil
	}
	next := cur.Clone()
	n := 0
	for id, first := range expired {
		items := next.HostedQueues[id]
		if len(items) <= 1 || items[0] != first {
			continue
		}
		next.HostedQueues[id] = slices.Clone(items[1:])
		n++
	}
	if n == 0 {
		return 0, nil
	}
	merged, err := meta.MergeTopicQueueMapping(&cur, next, false)
	if err != nil {
		return 0, fmt.Errorf("clean the static topic mapping of %s: %w", topic, err)
	}
	if err := b.mappings.Put(merged); err != nil {
		return 0, fmt.Errorf("store the static topic mapping of %s: %w", topic, err)
	}
	if err := b.topics.table.Touch(); err != nil {
		return n, fmt.Errorf("move the topics' data version on after cleaning %s: %w", topic, err)
	}
	return n, nil
}
