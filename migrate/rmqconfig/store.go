package rmqconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqpop"
)

// TransCheckGroup is the consumer group under which RocketMQ's
// transaction checker keeps its progress in the half and op topics.
const TransCheckGroup = "CID_RMQ_SYS_TRANS"

// QueueEnds gives the bounds and entries of a queue: a cq.Store, or the
// KV ConsumeQueue of a stopped store.
type QueueEnds interface {
	MaxOffset(topic string, queueID int32) (int64, error)
	MinOffset(topic string, queueID int32) (int64, error)
	Get(topic string, queueID int32, from int64, max int) ([]cq.Entry, error)
}

// FromStore reads the config of a rocketkv store as RocketMQ's config
// files hold it (the timer's progress left out): topics, groups (with
// what they are forbidden),
// consumer offsets (StoreOffsets), delay offsets (StoreDelayOffsets) and
// request modes (StoreRequestModes), orderly batches (StoreOrderInfos)
// and static topics' queue mappings and, on a slave's store, what its
// own pops kept over what it copied
// from its master (mergeSlaveOwn). kvdump export-rocketmq writes it with
// Write.
func FromStore(ctx context.Context, db *kvindex.DB, ends QueueEnds, firstOpen int64) (Config, error) {
	var c Config
	var err error
	if c.Topics, err = allConfigs(ctx, db.Topics); err != nil {
		return c, err
	}
	if c.Groups, err = allConfigs(ctx, db.Groups); err != nil {
		return c, err
	}
	if c.Forbidden, err = allConfigs(ctx, db.GroupForbiddens); err != nil {
		return c, err
	}
	if c.Offsets, err = StoreOffsets(ctx, db, ends, firstOpen); err != nil {
		return c, err
	}
	if err = popOffsetsAtPositions(ctx, db, c.Offsets); err != nil {
		return c, err
	}
	if c.DelayOffsets, err = StoreDelayOffsets(ctx, db); err != nil {
		return c, err
	}
	if c.RequestModes, err = StoreRequestModes(ctx, db); err != nil {
		return c, err
	}
	if c.OrderInfos, err = StoreOrderInfos(ctx, db); err != nil {
		return c, err
	}
	if c.QueueMappings, err = allConfigs(ctx, db.TopicQueueMappings); err != nil {
		return c, err
	}
	if err = mergeSlaveOwn(ctx, db, ends, &c); err != nil {
		return c, err
	}
	return c, ctx.Err()
}

// mergeSlaveOwn puts what a slave's own pops kept (keyspace 0x59,
// kvindex.SlaveOwn) over the offsets and orderly batches it copied from
// its master, as the slave serves them until its master's next sync:
// its own committed offset of a queue replaces the copied one (left out
// when it is past the end of the queue, which the slave's pops drop),
// and its own orderly batch replaces the copied batch of the queue.
// RocketMQ's slave keeps both in the one offset table and order info it
// persists (consumerOffset.json, consumerOrderInfo.json). A master's
// store has no such entries.
func mergeSlaveOwn(ctx context.Context, db *kvindex.DB, ends QueueEnds, c *Config) error {
	var own []kvindex.SlaveOwn
	if err := db.Pop().EachSlaveOwn(func(o kvindex.SlaveOwn) bool {
		own = append(own, o)
		return ctx.Err() == nil
	}); err != nil {
		return fmt.Errorf("read the slave's own pop state: %w", err)
	}
	if len(own) == 0 {
		return ctx.Err()
	}
	type queue struct {
		group, topic string
		id           int32
	}
	offsetAt := map[queue]int{}
	for i, o := range c.Offsets {
		offsetAt[queue{o.Group, o.Topic, o.QueueID}] = i
	}
	orderAt := map[queue]int{}
	for i, o := range c.OrderInfos {
		orderAt[queue{o.Group, o.Topic, o.QueueID}] = i
	}
	for _, o := range own {
		k := queue{o.Group, o.Topic, o.QueueID}
		if o.Committed >= 0 {
			maxOff, err := ends.MaxOffset(o.Topic, o.QueueID)
			if err != nil {
				return fmt.Errorf("read the end of %s/%d: %w", o.Topic, o.QueueID, err)
			}
			if o.Committed <= maxOff {
				if i, ok := offsetAt[k]; ok {
					c.Offsets[i].Offset = o.Committed
				} else {
					offsetAt[k] = len(c.Offsets)
					c.Offsets = append(c.Offsets, Offset{Group: o.Group, Topic: o.Topic, QueueID: o.QueueID, Offset: o.Committed})
				}
			}
		}
		if o.Batch == nil || len(o.Batch.Messages) == 0 {
			continue
		}
		info := orderInfoOf(o.Batch)
		if i, ok := orderAt[k]; ok {
			c.OrderInfos[i] = info
		} else {
			orderAt[k] = len(c.OrderInfos)
			c.OrderInfos = append(c.OrderInfos, info)
		}
	}
	sortByQueue(c.OrderInfos, func(o *OrderInfo) (string, string, int32) { return o.Group, o.Topic, o.QueueID })
	return ctx.Err()
}

// allConfigs reads every config of the table open opens, in name order.
func allConfigs[T any](ctx context.Context, open func(cacheSize int) (*kvindex.ConfigTable[T], error)) ([]T, error) {
	table, err := open(1)
	if err != nil {
		return nil, err
	}
	return table.All(ctx)
}

// popOffsetsAtPositions moves, for the way back, the offset of each queue a
// group pops to its pop position where the last POP_ROLLBACK wrote every
// message of it still in flight to the revive topic as a check-point:
// RocketMQ's POP offset is the pop position (what lies below it is acked
// or held by a check-point), while rocketkv's committed offset stays at
// the smallest offset in flight, from which RocketMQ would pop again the
// messages acked since and those its revive re-delivers. A queue with a
// message popped after the rollback began keeps its committed offset (its
// messages come again rather than never; the export refuses such a store
// without --force), and so does every queue while a revive a crash cut
// short is pending (its messages are in no check-point).
func popOffsetsAtPositions(ctx context.Context, db *kvindex.DB, offsets []Offset) error {
	r, rolledBack, err := db.LastPopRollback()
	if err != nil || !rolledBack {
		return err
	}
	if n, err := db.Pop().CountReviveIntents(); err != nil || n > 0 {
		return err
	}
	type queue struct {
		group, topic string
		id           int32
	}
	after := map[queue]bool{} // queues with a message popped since the rollback began
	if err := db.Pop().DueCheckpoints(0, math.MaxInt64, 0, func(c kvindex.Checkpoint) bool {
		if c.PopTime >= r.At {
			after[queue{c.Group, c.Topic, c.QueueID}] = true
		}
		return ctx.Err() == nil
	}); err != nil {
		return fmt.Errorf("read the POP messages in flight: %w", err)
	}
	for i := range offsets {
		o := &offsets[i]
		if after[queue{o.Group, o.Topic, o.QueueID}] {
			continue
		}
		pos, ok, err := db.Pop().Position(o.Group, o.Topic, o.QueueID)
		if err != nil {
			return fmt.Errorf("read the pop position of %s on %s/%d: %w", o.Group, o.Topic, o.QueueID, err)
		}
		if ok && pos > o.Offset {
			o.Offset = pos
		}
	}
	return ctx.Err()
}

// StoreOffsets returns the committed consumer offsets of a rocketkv store
// as RocketMQ's ConsumerOffsetManager holds them. The scheduler's
// progress (meta.ScheduleOffsetGroup) is left out: RocketMQ keeps it in
// delayOffset.json (StoreDelayOffsets). The transaction checker's
// progress (TransCheckGroup on the half and op topics) is set past every
// ended transaction: at firstOpen, the half-topic offset of the first
// open transaction (OpenTransactions), and the first op message stored
// after it, when one is open (firstOpen >= 0), else at the end of each
// topic (transCheckFrom); ends gives the queues. The POP revive's
// progress (rmqpop.ProgressGroup) is set at the last message of every
// queue of every revive topic: the check-points there were taken over when the
// store was first opened by rocketkv (which keeps POP state in its index
// and writes none), and RocketMQ reading them again would re-deliver
// messages rocketkv revived or saw acknowledged since. The exception is
// where the last POP_ROLLBACK wrote the check-points in flight
// (kvindex.PopRollback): RocketMQ's revive starts with them.
func StoreOffsets(ctx context.Context, db *kvindex.DB, ends QueueEnds, firstOpen int64) ([]Offset, error) {
	var offsets []Offset
	if err := db.ConsumerOffsets().Each("", func(u kvindex.OffsetUpdate) bool {
		switch u.Group {
		case meta.ScheduleOffsetGroup, TransCheckGroup, rmqpop.ProgressGroup: // delayOffset.json; set below
		default:
			offsets = append(offsets, Offset{Group: u.Group, Topic: u.Topic, QueueID: u.QueueID, Offset: u.Offset})
		}
		return ctx.Err() == nil
	}); err != nil {
		return nil, fmt.Errorf("read the consumer offsets: %w", err)
	}
	halfFrom, opFrom, err := transCheckFrom(ends, firstOpen)
	if err != nil {
		return nil, err
	}
	for _, o := range []Offset{{Topic: meta.TransHalfTopic, Offset: halfFrom}, {Topic: meta.TransOpHalfTopic, Offset: opFrom}} {
		if o.Offset > 0 {
			o.Group = TransCheckGroup
			offsets = append(offsets, o)
		}
	}
	revive, err := reviveProgress(db, ends)
	if err != nil {
		return nil, err
	}
	return append(offsets, revive...), ctx.Err()
}

// transCheckFrom returns where RocketMQ's transaction checker is to read
// the half topic and the op topic (queue 0 of each): with no transaction
// open (firstOpen < 0), their ends; else the first open half, and the
// first op message stored after it. Every op that ends a half from the
// first open one on was stored after that half, so RocketMQ reads all of
// them and asks no producer about a transaction rocketkv ended; the ops
// before it end halves RocketMQ does not read.
func transCheckFrom(q QueueEnds, firstOpen int64) (halfFrom, opFrom int64, err error) {
	opEnd, err := q.MaxOffset(meta.TransOpHalfTopic, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("read the end of %s: %w", meta.TransOpHalfTopic, err)
	}
	if firstOpen < 0 {
		halfEnd, err := q.MaxOffset(meta.TransHalfTopic, 0)
		if err != nil {
			return 0, 0, fmt.Errorf("read the end of %s: %w", meta.TransHalfTopic, err)
		}
		return halfEnd, opEnd, nil
	}
	half, err := q.Get(meta.TransHalfTopic, 0, firstOpen, 1)
	if err != nil {
		return 0, 0, fmt.Errorf("read the first open half (%s offset %d): %w", meta.TransHalfTopic, firstOpen, err)
	}
	if len(half) == 0 {
		return 0, 0, fmt.Errorf("the first open half (%s offset %d) has no ConsumeQueue entry", meta.TransHalfTopic, firstOpen)
	}
	opMin, err := q.MinOffset(meta.TransOpHalfTopic, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("read the start of %s: %w", meta.TransOpHalfTopic, err)
	}
	var searchErr error
	n := sort.Search(int(opEnd-opMin), func(i int) bool {
		op, err := q.Get(meta.TransOpHalfTopic, 0, opMin+int64(i), 1)
		if err != nil || len(op) == 0 {
			searchErr = errors.Join(err, fmt.Errorf("no entry at %d", opMin+int64(i)))
			return true
		}
		return op[0].PhyOffset > half[0].PhyOffset
	})
	if searchErr != nil {
		return 0, 0, fmt.Errorf("find the first op after the open half at %d: %w", half[0].PhyOffset, searchErr)
	}
	return firstOpen, opMin + int64(n), nil
}

// reviveProgress is rmqpop.ProgressGroup's offset at the last message of
// each queue of each revive topic (rmqpop.TopicPrefix) that holds
// messages, or just before the check-points the last POP_ROLLBACK wrote,
// so that RocketMQ's revive starts with them.
func reviveProgress(db *kvindex.DB, ends QueueEnds) ([]Offset, error) {
	topics, err := db.Topics(1)
	if err != nil {
		return nil, err
	}
	rollback, rolledBack, err := db.LastPopRollback()
	if err != nil {
		return nil, err
	}
	var revive []meta.TopicConfig
	if err := topics.Each(func(tc meta.TopicConfig) bool {
		if strings.HasPrefix(tc.TopicName, rmqpop.TopicPrefix) {
			revive = append(revive, tc)
		}
		return true
	}); err != nil {
		return nil, fmt.Errorf("read the topics: %w", err)
	}
	var offsets []Offset
	for _, tc := range revive {
		for q := range int32(tc.QueueCount()) {
			end, err := ends.MaxOffset(tc.TopicName, q)
			if err != nil {
				return nil, fmt.Errorf("read the end of %s/%d: %w", tc.TopicName, q, err)
			}
			if rolledBack && rollback.Topic == tc.TopicName && q == 0 {
				end = min(end, rollback.From)
			}
			// Unlike a consumer's, the revive's offset is the last one
			// it handled: it reads on from the next. Without one it reads
			// from 0.
			if end > 0 {
				offsets = append(offsets, Offset{Group: rmqpop.ProgressGroup, Topic: tc.TopicName, QueueID: q, Offset: end - 1})
			}
		}
	}
	return offsets, nil
}

// StoreDelayOffsets returns the scheduler's progress of a rocketkv store
// as delayOffset.json holds it: per delay level (1-based), the next
// SCHEDULE_TOPIC_XXXX offset of its queue (level-1) to deliver.
func StoreDelayOffsets(ctx context.Context, db *kvindex.DB) (map[int]int64, error) {
	levels := map[int]int64{}
	if err := db.ConsumerOffsets().Each(meta.ScheduleOffsetGroup, func(u kvindex.OffsetUpdate) bool {
		if u.Topic == meta.ScheduleTopic {
			levels[int(u.QueueID)+1] = u.Offset
		}
		return ctx.Err() == nil
	}); err != nil {
		return nil, fmt.Errorf("read the delay offsets: %w", err)
	}
	return levels, ctx.Err()
}

// StoreRequestModes returns the message request modes of a rocketkv
// store in topic and group order; a stored body that is not JSON is left
// out.
func StoreRequestModes(ctx context.Context, db *kvindex.DB) ([]RequestMode, error) {
	var modes []RequestMode
	if err := db.Pop().EachRequestMode(func(m kvindex.RequestMode) bool {
		var rm RequestMode
		if json.Unmarshal(m.JSON, &rm) == nil {
			rm.Topic, rm.ConsumerGroup = m.Topic, m.Group
			modes = append(modes, rm)
		}
		return ctx.Err() == nil
	}); err != nil {
		return nil, fmt.Errorf("read the request modes: %w", err)
	}
	return modes, ctx.Err()
}

// StoreOrderInfos returns the orderly POP batches in flight in a rocketkv
// store as RocketMQ's ConsumerOrderInfoManager holds them, the counts a
// batch carries for offsets outside it (kvindex.OrderState.Carried) in
// Consumed with its messages' own, as RocketMQ's offsetConsumedCount
// keeps them. rocketkv does not keep when a group last popped or acked a
// queue; the batch's pop time stands for it (RocketMQ drops a batch idle
// for 24 h).
func StoreOrderInfos(ctx context.Context, db *kvindex.DB) ([]OrderInfo, error) {
	var infos []OrderInfo
	if err := db.Pop().EachOrder(func(st kvindex.OrderState) bool {
		if len(st.Messages) == 0 {
			return true // an offset reset's mark: RocketMQ keeps it in its offset table, not here
		}
		infos = append(infos, orderInfoOf(&st))
		return ctx.Err() == nil
	}); err != nil {
		return nil, fmt.Errorf("read the orderly POP batches: %w", err)
	}
	return infos, ctx.Err()
}

// orderInfoOf is an orderly batch as RocketMQ's ConsumerOrderInfoManager
// holds it (see StoreOrderInfos).
func orderInfoOf(st *kvindex.OrderState) OrderInfo {
	info := OrderInfo{Topic: st.Topic, Group: st.Group, QueueID: st.QueueID, PopTime: st.PopTime,
		InvisibleTime: st.InvisibleTime, LastConsume: st.PopTime, Acked: st.Acked, AttemptID: st.AttemptID}
	count := func(off int64, n int32) {
		if n > 0 {
			if info.Consumed == nil {
				info.Consumed = map[int64]int32{}
			}
			info.Consumed[off] = n
		}
	}
	for _, m := range st.Messages {
		info.Offsets = append(info.Offsets, m.QueueOffset)
		count(m.QueueOffset, m.Consumed)
		if m.NextVisibleAt != 0 {
			if info.NextVisible == nil {
				info.NextVisible = map[int64]int64{}
			}
			info.NextVisible[m.QueueOffset] = m.NextVisibleAt
		}
	}
	for _, c := range st.Carried {
		count(c.QueueOffset, c.Consumed)
	}
	return info
}

// OpenTransactions counts the open transactions of a rocketkv store and
// returns the half-topic queue offset of the first one (-1 when none is
// open).
func OpenTransactions(db *kvindex.DB) (open int, firstOpen int64, err error) {
	firstOpen = -1
	if err := db.Transactions().OpenHalves(func(h kvindex.TxnHalf) bool {
		if firstOpen < 0 || h.QueueOffset < firstOpen {
			firstOpen = h.QueueOffset
		}
		open++
		return true
	}); err != nil {
		return 0, -1, fmt.Errorf("read the open transactions: %w", err)
	}
	return open, firstOpen, nil
}
