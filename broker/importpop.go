package broker

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqpop"
	"github.com/rocketkv/rocketkv/pop"
)

// parkedPage is how many timer entries the POP import reads at a time.
const parkedPage = 1 << 16

// importRocketMQPop turns the POP in-flight state of an Apache RocketMQ
// store into pop checkpoints, once, before the pop service starts. RocketMQ
// 5's KV POP keeps it as one RocksDB record per message in kvStore/
// (importKVPop). Its classic POP keeps it as check-point and ack messages in the
// cluster's revive topic, most of them still parked in the timer topic
// until their pop's invisible time is nearly over. Without the import a
// message popped and not acked when the store moved would never be
// revived. The check-points past RocketMQ's revive progress (the consumer
// offset of CID_RMQ_SYS_REVIVE_GROUP on each revive queue) and those
// parked in the timer are merged with their acks; what is left unacked
// becomes a checkpoint the pop service acks (with the clients' receipt
// handles) and revives like its own. The parked ones are taken out of the
// timer: nothing reads the revive topic here. The checkpoints of both,
// the pop positions importKVPop moves, the timer
// deletions and the mark that the import is done are one synced batch: a
// crash before it imports again from scratch, and none after it can keep
// the checkpoints without their acks' removal (a second import would then
// miss acks and put acked messages back in flight).
func (b *Broker) importRocketMQPop() error {
	kvPop := b.kvPop
	b.kvPop = kvPopState{}
	if done, err := b.db.RocketMQPopImported(); err != nil || done {
		return err
	}
	batch := b.db.Pop().NewBatch()
	defer batch.Close()
	// The revive topic is named by the RocketMQ broker's cluster, which
	// need not be this broker's (a store moved under another
	// brokerClusterName): every revive topic the store has is imported.
	var revive []meta.TopicConfig
	if err := b.topics.table.Each(func(tc meta.TopicConfig) bool {
		if strings.HasPrefix(tc.TopicName, rmqpop.TopicPrefix) {
			revive = append(revive, tc)
		}
		return true
	}); err != nil {
		return fmt.Errorf("import the POP state of the RocketMQ store: %w", err)
	}
	log := b.component("import")
	imported := map[popMessage]bool{}
	for _, tc := range revive {
		if tc.TopicName != rmqpop.TopicPrefix+b.cfg.BrokerClusterName {
			log.Info().Str("topic", tc.TopicName).Str("brokerClusterName", b.cfg.BrokerClusterName).
				Msg("importing the POP state of a revive topic named by another cluster")
		}
		if err := b.importReviveTopic(batch, tc.TopicName, tc.QueueCount(), imported); err != nil {
			return fmt.Errorf("import the POP state of the RocketMQ store: %w", err)
		}
	}
	if err := b.importKVPop(batch, imported, kvPop); err != nil {
		return fmt.Errorf("import the POP state of the RocketMQ store: %w", err)
	}
	if err := batch.MarkRocketMQPopImported(time.Now().UnixMilli()); err != nil {
		return err
	}
	return batch.Commit(true)
}

// importReviveTopic imports the check-points of one revive topic into
// batch and notes each message it puts in flight in imported.
func (b *Broker) importReviveTopic(batch *kvindex.PopBatch, reviveTopic string, queues int, imported map[popMessage]bool) error {
	log := b.component("import")
	m := rmqpop.NewMerger()
	bad := 0
	add := func(msg commitlog.Message) {
		tag, _ := commitlog.LookupProperty(msg.Properties, commitlog.PropertyTags)
		if err := m.Add(tag, msg.Body); err != nil {
			bad++
			log.Warn().Err(err).Int64("phyOffset", msg.PhyOffset).Msg("revive-topic message skipped")
		}
	}
	read := 0
	for q := int32(0); q < int32(queues); q++ {
		from, err := b.cqs.MinOffset(reviveTopic, q)
		if err != nil {
			return err
		}
		if done, ok, err := b.offsets.Get(rmqpop.ProgressGroup, reviveTopic, q); err != nil {
			return err
		} else if ok {
			from = max(from, done+1)
		}
		for {
			entries, err := b.cqs.Get(reviveTopic, q, from, 256)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if _, msg, ok, err := b.readRecord(e.PhyOffset); err != nil {
					return err
				} else if ok {
					add(msg)
					read++
				}
				from = e.QueueOffset + 1
			}
			if len(entries) < 256 {
				break
			}
		}
	}
	// Every parked entry, a page at a time; only the revive topic's are
	// kept.
	var taken []kvindex.TimerEntry
	var fromMs, fromPhy int64
	for {
		page, err := b.db.Timers().DueFrom(fromMs, fromPhy, math.MaxInt64, parkedPage)
		if err != nil {
			return err
		}
		for _, e := range page {
			_, msg, ok, err := b.readRecord(e.PhyOffset)
			if err != nil {
				return err
			}
			if real, _ := commitlog.LookupProperty(msg.Properties, commitlog.PropertyRealTopic); ok && real == reviveTopic {
				add(msg)
				taken = append(taken, e)
			}
		}
		if len(page) < parkedPage {
			break
		}
		last := page[len(page)-1]
		fromMs, fromPhy = last.DeliverMs, last.PhyOffset+1
	}
	cks, skipped := 0, 0
	for _, c := range m.InFlight() {
		ck := kvindex.Checkpoint{Group: c.Group, Topic: c.Topic, QueueID: c.QueueID, CKOffset: c.StartOffset,
			PopTime: c.PopTime, InvisibleTime: c.InvisibleTime, VisibleAt: c.PopTime + c.InvisibleTime,
			RetryFlag: pop.RetryFlagOf(c.Topic)[0] - '0', Attempts: c.RePuts, Offsets: c.Offsets}
		if err := batch.PutCheckpoint(&ck); err != nil {
			if !errors.Is(err, kvindex.ErrBadCheckpoint) {
				return err
			}
			skipped++
			log.Warn().Err(err).Str("group", c.Group).Str("topic", c.Topic).Int32("queue", c.QueueID).
				Int64("startOffset", c.StartOffset).Msg("RocketMQ check-point not importable; skipped")
			continue
		}
		cks++
		for _, off := range c.Offsets {
			imported[popMessage{c.Group, c.Topic, c.QueueID, off}] = true
		}
	}
	if err := batch.ForgetTimers(taken); err != nil {
		return err
	}
	log.Info().Int("reviveMessages", read).Int("parked", len(taken)).Int("checkpoints", cks).
		Int("skipped", skipped+bad).Msg("imported the POP messages in flight of the RocketMQ store")
	return nil
}
