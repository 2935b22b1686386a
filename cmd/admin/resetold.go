package main

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/remoting"
)

// rollback is one queue of a reset the admin commits itself (mqadmin's
// RollbackStats): the queue's end, the group's offset before, the offset
// found for the time, and the offset the queue was left at.
type rollback struct {
	queue                                         adminbody.MessageQueue
	brokerOffset, consumerOffset, timestampOffset int64
	resetOffset                                   int64
}

// resetOffsetOld is mqadmin's resetOffsetByTimestampOld on one broker,
// which mqadmin resetOffsetByTime and skipAccumulatedMessage fall back to
// when a broker answers CONSUMER_NOT_ONLINE (it resets through the
// group's clients, useServerSideResetOffset=false, and none is online):
// for each queue of the topic in the group's consume stats there (or, when
// the group has none of the topic, each queue of the topic's stats, the
// group's offset taken as the queue's minimum), the offset at ts (the end
// of the queue for -1) is committed with UPDATE_CONSUMER_OFFSET when force
// is set or it is not past the group's offset; otherwise the queue keeps
// its offset. Queues are returned in order.
func (g *globals) resetOffsetOld(ctx context.Context, addr, group, topic string, ts int64, force bool) ([]rollback, error) {
	resp, err := g.invoke(ctx, addr, remoting.GetConsumeStats, remoting.Header{"consumerGroup": group}, nil)
	if err != nil {
		return nil, err
	}
	stats, _, err := adminbody.DecodeConsumeStats(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("consume stats of %s on %s: %w", group, addr, err)
	}
	queues := make(map[adminbody.MessageQueue]adminbody.OffsetWrapper)
	for q, w := range stats {
		if q.Topic == topic {
			queues[q] = w
		}
	}
	if len(queues) == 0 {
		resp, err := g.invoke(ctx, addr, remoting.GetTopicStatsInfo, remoting.Header{"topic": topic}, nil)
		if err != nil {
			return nil, err
		}
		ranges, _, err := adminbody.DecodeTopicStats(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("stats of topic %s on %s: %w", topic, addr, err)
		}
		for q, r := range ranges {
			queues[q] = adminbody.OffsetWrapper{BrokerOffset: r.MaxOffset, ConsumerOffset: r.MinOffset}
		}
	}
	order := make([]adminbody.MessageQueue, 0, len(queues))
	for q := range queues {
		order = append(order, q)
	}
	sort.Slice(order, func(i, j int) bool { return order[i].Less(order[j]) })
	out := make([]rollback, 0, len(order))
	for _, q := range order {
		w := queues[q]
		at := ts
		if ts == -1 {
			at = math.MaxInt64 // queueOffsetAt's end of the queue
		}
		off, err := g.queueOffsetAt(ctx, addr, topic, int(q.QueueID), at)
		if err != nil {
			return out, err
		}
		rb := rollback{queue: q, brokerOffset: w.BrokerOffset, consumerOffset: w.ConsumerOffset, timestampOffset: off, resetOffset: w.ConsumerOffset}
		if force || off <= w.ConsumerOffset {
			h := remoting.Header{"consumerGroup": group, "topic": topic}
			h.SetInt32("queueId", q.QueueID)
			h.SetInt64("commitOffset", off)
			if _, err := g.invoke(ctx, addr, remoting.UpdateConsumerOffset, h, nil); err != nil {
				return out, fmt.Errorf("commit offset %d of %s/%d for %s: %w", off, topic, q.QueueID, group, err)
			}
			rb.resetOffset = off
		}
		out = append(out, rb)
	}
	return out, nil
}
