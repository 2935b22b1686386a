package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// staticCleanInterval is how often the clean of static topics' expired
// mapping items wakes (RocketMQ's TopicQueueMappingCleanService waits
// 5 minutes between runs).
const staticCleanInterval = 5 * time.Minute

// staticCleanLoop drops, every staticCleanInterval while the hour is one
// of deleteWhen's (RocketMQ's UtilAll.isItTimeToDo), the oldest item of
// the logic queues this group leads once that item's physical queue holds
// nothing any more (cleanExpiredMappingItems), and the logic queues whose
// leader moved on past the group this one thinks leads them
// (cleanMovedLogicQueues). A slave skips it: its
// mappings are its master's copies.
func (b *Broker) staticCleanLoop(ctx context.Context) {
	b.runStaticClean(ctx, staticCleanInterval, time.Now)
}

// runStaticClean runs staticCleanRound every interval at the hour of now
// until ctx ends.
func (b *Broker) runStaticClean(ctx context.Context, every time.Duration, now func() time.Time) {
	periodic.Run(ctx, every, func(ctx context.Context) { b.staticCleanRound(ctx, now().Hour()) })
}

// staticCleanRound runs both cleans when hour is one of deleteWhen's and
// the broker is a master, and reports whether it did.
func (b *Broker) staticCleanRound(ctx context.Context, hour int) bool {
	if b.isSlave() || !slices.Contains(b.live.cur.Load().cfg.DeleteWhen, hour) {
		return false
	}
	if _, err := b.cleanExpiredMappingItems(ctx); err != nil {
		b.log.Error().Err(err).Msg("static topic mapping clean failed")
	}
	if _, err := b.cleanMovedLogicQueues(ctx); err != nil {
		b.log.Error().Err(err).Msg("static topic clean of moved logic queues failed")
	}
	return true
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
	details, err := b.ownMappings(ctx)
	if err != nil {
		return 0, err
	}
	dropped := 0
	for _, d := range details {
		if ctx.Err() != nil {
			return dropped, ctx.Err()
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
	return b.editMapping(topic, epoch, true, func(next *meta.TopicQueueMappingDetail) int {
		n := 0
		for id, first := range expired {
			items := next.HostedQueues[id]
			if len(items) <= 1 || items[0] != first {
				continue
			}
			next.HostedQueues[id] = slices.Clone(items[1:])
			n++
		}
		return n
	})
}

// editMapping changes topic's mapping under mappingMu when it still has
// epoch: edit changes a copy and returns how many logic queues it
// changed; a copy that changed is stored (checked as an update of the
// mapping, MergeTopicQueueMapping, when merge is set) and moves the
// topics' data version on. It returns edit's count.
func (b *Broker) editMapping(topic string, epoch int64, merge bool, edit func(next *meta.TopicQueueMappingDetail) int) (int, error) {
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
	n := edit(&next)
	if n == 0 {
		return 0, nil
	}
	if merge {
		if next, err = meta.MergeTopicQueueMapping(&cur, next, false); err != nil {
			return 0, fmt.Errorf("clean the static topic mapping of %s: %w", topic, err)
		}
	}
	if err := b.mappings.Put(next); err != nil {
		return 0, fmt.Errorf("store the static topic mapping of %s: %w", topic, err)
	}
	if err := b.topics.table.Touch(); err != nil {
		return n, fmt.Errorf("move the topics' data version on after cleaning %s: %w", topic, err)
	}
	return n, nil
}

// realLeaders returns, per logic queue id of route's static topic
// mapping of scope, the broker group leading it: the one of the highest
// epoch whose currIdMap holds it (as RocketMQ's clients read the route);
// a queue two groups claim at that epoch is left out.
func realLeaders(route namesrv.TopicRouteData, scope string) map[int32]string {
	type claim struct {
		bname     string
		epoch     int64
		ambiguous bool
	}
	claims := map[int32]claim{}
	for _, bname := range slices.Sorted(maps.Keys(route.TopicQueueMappingByBroker)) {
		info := route.TopicQueueMappingByBroker[bname]
		if cmp.Or(info.Scope, meta.MetadataScopeGlobal) != scope {
			continue
		}
		for id := range info.CurrIDMap {
			c, ok := claims[id]
			switch {
			case !ok || info.Epoch > c.epoch:
				claims[id] = claim{bname: bname, epoch: info.Epoch}
			case info.Epoch == c.epoch && bname != c.bname:
				c.ambiguous = true
				claims[id] = c
			}
		}
	}
	out := map[int32]string{}
	for id, c := range claims {
		if !c.ambiguous {
			out[id] = c.bname
		}
	}
	return out
}

// cleanMovedLogicQueues is RocketMQ's cleanItemListMoreThanSecondGen: a
// logic queue this group holds items of but does not lead, whose leader
// in the topic's route is no longer the group its items end with (the
// queue moved on again), is dropped from the group's mapping once the
// real leader's own mapping (GET_TOPIC_CONFIG, lo=true) has the same
// epoch and queue count and ends the queue's items with itself. It
// returns how many logic queues were dropped.
func (b *Broker) cleanMovedLogicQueues(ctx context.Context) (int, error) {
	details, err := b.ownMappings(ctx)
	if err != nil {
		return 0, err
	}
	dropped := 0
	for _, d := range details {
		if ctx.Err() != nil {
			return dropped, ctx.Err()
		}
		thought := map[int32]string{}
		for id, items := range d.HostedQueues {
			if len(items) > 0 && items[len(items)-1].Bname != d.Bname {
				thought[id] = items[len(items)-1].Bname
			}
		}
		if len(thought) == 0 {
			continue
		}
		route, err := b.fetchRoute(ctx, d.Topic)
		if err != nil {
			b.log.Warn().Err(err).Str("topic", d.Topic).Msg("static topic clean: no route, moved logic queues kept")
			continue
		}
		real := realLeaders(route, d.Scope)
		remote := map[string]*meta.TopicQueueMappingDetail{}
		var gone []int32
		for _, id := range slices.Sorted(maps.Keys(thought)) {
			leader, ok := real[id]
			if !ok || leader == thought[id] || leader == d.Bname {
				continue
			}
			rd, asked := remote[leader]
			if !asked {
				rd = b.askMapping(ctx, d.Topic, leader)
				remote[leader] = rd
			}
			if rd == nil || rd.TotalQueues != d.TotalQueues || rd.Epoch != d.Epoch {
				continue
			}
			if items := rd.HostedQueues[id]; len(items) == 0 || items[len(items)-1].Bname != leader {
				continue
			}
			gone = append(gone, id)
		}
		if len(gone) == 0 {
			continue
		}
		n, err := b.dropLogicQueues(d.Topic, d.Epoch, gone)
		dropped += n
		if err != nil {
			return dropped, err
		}
	}
	return dropped, nil
}

// askMapping returns broker group bname's mapping of topic, nil when it
// cannot be had (logged).
func (b *Broker) askMapping(ctx context.Context, topic, bname string) *meta.TopicQueueMappingDetail {
	req := remoting.NewRequest(remoting.GetTopicConfig, map[string]string{"topic": topic, "lo": "true", "bname": bname}, nil)
	resp, err := b.sendToGroupMaster(ctx, topic, bname, req)
	if err == nil && resp.Code != remoting.Success {
		err = fmt.Errorf("answered %d %s", resp.Code, resp.Remark)
	}
	var v struct {
		MappingDetail json.RawMessage `json:"mappingDetail"`
	}
	if err == nil {
		// A Java broker writes fastjson's bare integer keys.
		err = adminbody.UnmarshalFastjson(resp.Body, &v)
	}
	if err == nil && (len(v.MappingDetail) == 0 || string(v.MappingDetail) == "null") {
		err = errors.New("no mapping in its answer")
	}
	var d meta.TopicQueueMappingDetail
	if err == nil {
		d, err = meta.DecodeTopicQueueMappingDetail(v.MappingDetail)
	}
	if err == nil && d.Bname != bname {
		err = fmt.Errorf("its mapping is of broker %s", d.Bname)
	}
	if err != nil {
		b.log.Warn().Err(err).Str("topic", topic).Str("broker", bname).Msg("static topic clean: the leader's mapping is unknown")
		return nil
	}
	return &d
}

// dropLogicQueues removes logic queues ids from topic's mapping, under
// mappingMu, when the mapping still has epoch and does not lead them.
func (b *Broker) dropLogicQueues(topic string, epoch int64, ids []int32) (int, error) {
	return b.editMapping(topic, epoch, false, func(next *meta.TopicQueueMappingDetail) int {
		n := 0
		for _, id := range ids {
			items := next.HostedQueues[id]
			if len(items) == 0 || items[len(items)-1].Bname == next.Bname {
				continue
			}
			delete(next.HostedQueues, id)
			n++
			b.log.Info().Str("topic", topic).Int32("logicQueue", id).Int("items", len(items)).Msg("static topic logic queue moved on, its items removed here")
		}
		return n
	})
}

// ownMappings lists the static topic mappings of this broker group, the
// ones the cleans may change; a mapping of another group held here is
// logged and left out.
func (b *Broker) ownMappings(ctx context.Context) ([]meta.TopicQueueMappingDetail, error) {
	if b.mappings == nil {
		return nil, nil
	}
	all, err := b.mappings.All(ctx)
	if err != nil {
		return nil, fmt.Errorf("list static topic mappings: %w", err)
	}
	own := all[:0]
	for _, d := range all {
		if d.Bname != b.cfg.BrokerName {
			b.log.Warn().Str("topic", d.Topic).Str("bname", d.Bname).Msg("a static topic mapping of another broker is held here")
			continue
		}
		own = append(own, d)
	}
	return own, nil
}
