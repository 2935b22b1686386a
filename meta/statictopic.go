package meta

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/rocketkv/rocketkv/internal/adminbody"
)

// Static topics (RocketMQ 5's RIP-21, "logic queues"): a topic whose
// queues clients see, its logic (global) queues, each live on one broker
// group's physical queue at a time and may move to another group; the
// queue's offsets go on from where they were, so every move starts a new
// item whose logicOffset is where the old one ended.
//
// A broker keeps, per static topic, a TopicQueueMappingDetail: the topic's
// logic queue count, an epoch fencing older mappings, and for each logic
// queue whose items touch the broker, the list of its items, oldest first
// (the last is the leader: where the queue is written now).
//
//	{"bname":"broker-a","currIdMap":{},"dirty":false,"epoch":1700000000000,
//	 "hostedQueues":{"0":[{"bname":"broker-a","endOffset":-1,"gen":0,
//	   "logicOffset":0,"queueId":0,"startOffset":0,"timeOfEnd":-1,"timeOfStart":-1}]},
//	 "scope":"__global__","topic":"static-topic","totalQueues":1}
//
// Fields are declared in fastjson's alphabetical order so that the JSON
// written is the one a RocketMQ broker writes (map keys are quoted, which
// fastjson also reads; it writes integer keys bare, which
// DecodeTopicQueueMappingDetail reads).

// MetadataScopeGlobal is a static topic mapping's default scope (Java
// MixAll.METADATA_SCOPE_GLOBAL).
const MetadataScopeGlobal = "__global__"

// LogicQueueMappingItem is one stretch of a logic queue's life on one
// physical queue (Java LogicQueueMappingItem): the logic offsets from
// LogicOffset on are the physical offsets from StartOffset on of queue
// QueueID of broker group Bname, up to EndOffset (excluded; -1 while the
// item is the one written).
type LogicQueueMappingItem struct {
	// Bname is the broker group holding the physical queue.
	Bname string `json:"bname"`
	// EndOffset is the physical offset the item ends at (excluded), -1
	// while undecided.
	EndOffset int64 `json:"endOffset"`
	// Gen numbers the items of a logic queue, increasing.
	Gen int32 `json:"gen"`
	// LogicOffset is the logic offset of the item's first message; -1
	// while a move has not decided it.
	LogicOffset int64 `json:"logicOffset"`
	// QueueID is the physical queue.
	QueueID int32 `json:"queueId"`
	// StartOffset is the physical offset of the item's first message.
	StartOffset int64 `json:"startOffset"`
	// TimeOfEnd is reserved by RocketMQ (-1).
	TimeOfEnd int64 `json:"timeOfEnd"`
	// TimeOfStart is reserved by RocketMQ (-1).
	TimeOfStart int64 `json:"timeOfStart"`
}

// NewLogicQueueMappingItem returns an item with RocketMQ's defaults for
// what a body leaves out (endOffset, timeOfStart and timeOfEnd -1).
func NewLogicQueueMappingItem() LogicQueueMappingItem {
	return LogicQueueMappingItem{EndOffset: -1, TimeOfStart: -1, TimeOfEnd: -1}
}

// UnmarshalJSON reads an item over RocketMQ's defaults.
func (it *LogicQueueMappingItem) UnmarshalJSON(b []byte) error {
	type plain LogicQueueMappingItem
	v := plain(NewLogicQueueMappingItem())
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*it = LogicQueueMappingItem(v)
	return nil
}

// StaticOffsetLoosely turns a physical offset of the item's queue into a
// logic offset, clamped to the item (Java
// computeStaticQueueOffsetLoosely, for sends and minimum offsets): -1 when
// the item's logic offset is undecided.
func (it LogicQueueMappingItem) StaticOffsetLoosely(physical int64) int64 {
	if it.LogicOffset < 0 {
		return -1
	}
	if physical < it.StartOffset {
		return it.LogicOffset
	}
	if it.EndOffset >= it.StartOffset && it.EndOffset < physical {
		return it.LogicOffset + it.EndOffset - it.StartOffset
	}
	return it.LogicOffset + physical - it.StartOffset
}

// StaticOffsetStrictly turns a physical offset into a logic offset,
// unclamped at the end (Java computeStaticQueueOffsetStrictly).
func (it LogicQueueMappingItem) StaticOffsetStrictly(physical int64) int64 {
	if physical < it.StartOffset {
		return it.LogicOffset
	}
	return it.LogicOffset + physical - it.StartOffset
}

// PhysicalOffset turns a logic offset into the item's physical offset
// (Java computePhysicalQueueOffset).
func (it LogicQueueMappingItem) PhysicalOffset(logic int64) int64 {
	return logic - it.LogicOffset + it.StartOffset
}

// MaxStaticOffset is the largest logic offset the item covers as far as
// its end is known (Java computeMaxStaticQueueOffset).
func (it LogicQueueMappingItem) MaxStaticOffset() int64 {
	if it.EndOffset >= it.StartOffset {
		return it.LogicOffset + it.EndOffset - it.StartOffset
	}
	return it.LogicOffset
}

// EndDecided reports whether the item's end is fixed (Java
// checkIfEndOffsetDecided).
func (it LogicQueueMappingItem) EndDecided() bool { return it.EndOffset > it.StartOffset }

// LogicOffsetDecided reports whether the item's logic offset is known.
func (it LogicQueueMappingItem) LogicOffsetDecided() bool { return it.LogicOffset >= 0 }

// OffsetDelta is what a consumer adds to the physical queue offsets of
// the messages a pull of the item returns (Java computeOffsetDelta; the
// pull answer's offsetDelta).
func (it LogicQueueMappingItem) OffsetDelta() int64 { return it.LogicOffset - it.StartOffset }

// TopicQueueMappingDetail is a static topic's mapping as one broker group
// holds it (Java TopicQueueMappingDetail, with the fields of its parent
// TopicQueueMappingInfo).
type TopicQueueMappingDetail struct {
	// Bname is the broker group the detail is of.
	Bname string `json:"bname"`
	// CurrIDMap maps logic queue ids to physical ones; a broker's stored
	// detail leaves it empty and fills it only for registration.
	CurrIDMap map[int32]int32 `json:"currIdMap"`
	// Dirty marks a mapping being changed.
	Dirty bool `json:"dirty"`
	// Epoch orders mappings: an update with a smaller one is refused.
	Epoch int64 `json:"epoch"`
	// HostedQueues holds, per logic queue id, the items of that queue
	// that concern this group, oldest first; the last is the leader.
	HostedQueues map[int32][]LogicQueueMappingItem `json:"hostedQueues"`
	// Scope is the mapping's scope, MetadataScopeGlobal by default.
	Scope string `json:"scope"`
	// Topic is the static topic.
	Topic string `json:"topic"`
	// TotalQueues is the topic's number of logic queues.
	TotalQueues int32 `json:"totalQueues"`
}

// NewTopicQueueMappingDetail returns an empty detail with RocketMQ's
// defaults (global scope, empty maps).
func NewTopicQueueMappingDetail(topic string, totalQueues int32, bname string, epoch int64) TopicQueueMappingDetail {
	return TopicQueueMappingDetail{Topic: topic, TotalQueues: totalQueues, Bname: bname, Epoch: epoch,
		Scope: MetadataScopeGlobal, CurrIDMap: map[int32]int32{}, HostedQueues: map[int32][]LogicQueueMappingItem{}}
}

// ErrBadMapping is returned by DecodeTopicQueueMappingDetail for a body
// that is not a mapping detail, and wrapped by the checks of a mapping's
// items (CheckItemOffsets, MergeTopicQueueMapping) for one RocketMQ
// refuses.
var ErrBadMapping = errors.New("bad static topic mapping")

// DecodeTopicQueueMappingDetail reads a TopicQueueMappingDetail as
// fastjson writes it (integer map keys bare or quoted), with RocketMQ's
// defaults for what it leaves out.
func DecodeTopicQueueMappingDetail(body []byte) (TopicQueueMappingDetail, error) {
	d := NewTopicQueueMappingDetail("", 0, "", 0)
	if err := adminbody.UnmarshalFastjson(body, &d); err != nil {
		return TopicQueueMappingDetail{}, fmt.Errorf("%w: %w", ErrBadMapping, err)
	}
	d.normalize()
	return d, nil
}

// normalize puts RocketMQ's defaults back where a body wrote null.
func (d *TopicQueueMappingDetail) normalize() {
	if d.Scope == "" {
		d.Scope = MetadataScopeGlobal
	}
	if d.CurrIDMap == nil {
		d.CurrIDMap = map[int32]int32{}
	}
	if d.HostedQueues == nil {
		d.HostedQueues = map[int32][]LogicQueueMappingItem{}
	}
	for id, items := range d.HostedQueues {
		if items == nil {
			delete(d.HostedQueues, id)
		}
	}
}

// Clone returns a deep copy.
func (d TopicQueueMappingDetail) Clone() TopicQueueMappingDetail {
	c := d
	c.CurrIDMap = maps.Clone(d.CurrIDMap)
	c.HostedQueues = make(map[int32][]LogicQueueMappingItem, len(d.HostedQueues))
	for id, items := range d.HostedQueues {
		c.HostedQueues[id] = slices.Clone(items)
	}
	return c
}

// Leader returns the leader item of logic queue id (the last of its
// items); ok is false when the detail holds none.
func (d TopicQueueMappingDetail) Leader(id int32) (LogicQueueMappingItem, bool) {
	items := d.HostedQueues[id]
	if len(items) == 0 {
		return LogicQueueMappingItem{}, false
	}
	return items[len(items)-1], true
}

// LeaderIDMap returns, for every logic queue whose leader item is on
// this detail's broker group, its physical queue id (Java buildIdMap at
// level 0): what the group registers with the name servers.
func (d TopicQueueMappingDetail) LeaderIDMap() map[int32]int32 {
	m := map[int32]int32{}
	for id, items := range d.HostedQueues {
		if len(items) > 0 && items[len(items)-1].Bname == d.Bname {
			m[id] = items[len(items)-1].QueueID
		}
	}
	return m
}

// MaxOffsetFromMapping returns the largest logic offset the leader item
// of logic queue id is known to cover, -1 when there is none (Java
// computeMaxOffsetFromMapping).
func (d TopicQueueMappingDetail) MaxOffsetFromMapping(id int32) int64 {
	leader, ok := d.Leader(id)
	if !ok {
		return -1
	}
	return leader.MaxStaticOffset()
}

// MappingInfoJSON returns the TopicQueueMappingInfo a broker group
// registers for the topic (Java cloneAsMappingInfo): the detail without
// its hosted queues, and with currIdMap the leaders on the group.
func (d TopicQueueMappingDetail) MappingInfoJSON() ([]byte, error) {
	info := struct {
		Bname       string          `json:"bname"`
		CurrIDMap   map[int32]int32 `json:"currIdMap"`
		Dirty       bool            `json:"dirty"`
		Epoch       int64           `json:"epoch"`
		Scope       string          `json:"scope"`
		Topic       string          `json:"topic"`
		TotalQueues int32           `json:"totalQueues"`
	}{d.Bname, d.LeaderIDMap(), false, d.Epoch, d.Scope, d.Topic, d.TotalQueues}
	b, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("encode mapping info of %s: %w", d.Topic, err)
	}
	return b, nil
}

// FindLogicQueueMappingItem returns the item of items holding logic
// offset logic: the newest whose logic offset is at or below it, else the
// oldest (an offset before the queue's start); items with an undecided
// logic offset are skipped when ignoreNegative. ok is false when there is
// none (Java TopicQueueMappingUtils.findLogicQueueMappingItem).
func FindLogicQueueMappingItem(items []LogicQueueMappingItem, logic int64, ignoreNegative bool) (LogicQueueMappingItem, bool) {
	for i := len(items) - 1; i >= 0; i-- {
		if ignoreNegative && items[i].LogicOffset < 0 {
			continue
		}
		if logic >= items[i].LogicOffset {
			return items[i], true
		}
	}
	for _, it := range items {
		if ignoreNegative && it.LogicOffset < 0 {
			continue
		}
		return it, true
	}
	return LogicQueueMappingItem{}, false
}

// FindNextItem returns the item after the one of generation gen; ok is
// false when there is none or, with ignoreNegative, when its logic offset
// is undecided (Java TopicQueueMappingUtils.findNext).
func FindNextItem(items []LogicQueueMappingItem, gen int32, ignoreNegative bool) (LogicQueueMappingItem, bool) {
	for i, it := range items {
		if ignoreNegative && it.LogicOffset < 0 {
			continue
		}
		if it.Gen != gen {
			continue
		}
		if i == len(items)-1 {
			return LogicQueueMappingItem{}, false
		}
		next := items[i+1]
		if ignoreNegative && next.LogicOffset < 0 {
			return LogicQueueMappingItem{}, false
		}
		return next, true
	}
	return LogicQueueMappingItem{}, false
}

// CheckItemOffsets checks one logic queue's items as RocketMQ's
// checkLogicQueueMappingItemOffset does: no negative start offset, gen or
// queue id; a logic offset decided on every item but the last; gens and
// logic offsets increasing, each item ending before the next begins; no
// end before its start.
func CheckItemOffsets(items []LogicQueueMappingItem) error {
	lastGen, lastOffset := int32(-1), int64(-1)
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		switch {
		case it.StartOffset < 0 || it.Gen < 0 || it.QueueID < 0:
			return fmt.Errorf("%w: the field is illegal, should not be negative", ErrBadMapping)
		case i <= len(items)-2 && it.LogicOffset < 0:
			return fmt.Errorf("%w: the non-latest item has negative logic offset", ErrBadMapping)
		case lastGen != -1 && it.Gen >= lastGen:
			return fmt.Errorf("%w: the gen does not increase monotonically", ErrBadMapping)
		case it.EndOffset != -1 && it.EndOffset < it.StartOffset:
			return fmt.Errorf("%w: the endOffset is smaller than the start offset", ErrBadMapping)
		}
		if lastOffset != -1 && it.LogicOffset != -1 {
			if it.LogicOffset >= lastOffset {
				return fmt.Errorf("%w: the base logic offset does not increase monotonically", ErrBadMapping)
			}
			if it.MaxStaticOffset() >= lastOffset {
				return fmt.Errorf("%w: the max logic offset does not increase monotonically", ErrBadMapping)
			}
		}
		lastGen, lastOffset = it.Gen, it.LogicOffset
	}
	return nil
}

// checkItemsImmutable checks that newItems keep what oldItems fixed
// (Java makeSureLogicQueueMappingItemImmutable): items of the same gen
// keep their broker, queue, start offset and a decided logic offset; with
// equal epochs, the leader stays the same.
func checkItemsImmutable(oldItems, newItems []LogicQueueMappingItem, epochEqual bool) error {
	if len(oldItems) == 0 {
		return nil
	}
	if len(newItems) == 0 {
		return fmt.Errorf("%w: the new item list is null or empty", ErrBadMapping)
	}
	for io, in := 0, 0; io < len(oldItems) && in < len(newItems); {
		o, n := oldItems[io], newItems[in]
		switch {
		case n.Gen < o.Gen:
			in++
		case o.Gen < n.Gen:
			io++
		default:
			// Java asserts these (off unless the JVM runs with -ea); a
			// mapping that breaks them would send offsets astray.
			if o.Bname != n.Bname || o.QueueID != n.QueueID || o.StartOffset != n.StartOffset ||
				o.LogicOffset != -1 && o.LogicOffset != n.LogicOffset {
				return fmt.Errorf("%w: item gen %d changed its broker, queue, start or logic offset", ErrBadMapping, o.Gen)
			}
			io++
			in++
		}
	}
	if epochEqual {
		o, n := oldItems[len(oldItems)-1], newItems[len(newItems)-1]
		if n.Gen != o.Gen || n.Bname != o.Bname || n.QueueID != o.QueueID || n.StartOffset != o.StartOffset {
			return fmt.Errorf("%w: the new leader is different but epoch equal", ErrBadMapping)
		}
	}
	return nil
}

// MergeTopicQueueMapping returns the detail a broker holds after an
// update of its old one (nil: none) with next, as RocketMQ's
// TopicQueueMappingManager.updateTopicQueueMapping decides it: every
// logic queue's items are checked (CheckItemOffsets); with force, the old
// detail's queues that next leaves out are kept and nothing else is
// checked; otherwise next's epoch may not be smaller than the old one's
// nor its scope differ, queues it leaves out are kept (refused at an
// equal epoch), and the items both hold must agree
// (makeSureLogicQueueMappingItemImmutable).
func MergeTopicQueueMapping(old *TopicQueueMappingDetail, next TopicQueueMappingDetail, force bool) (TopicQueueMappingDetail, error) {
	next = next.Clone()
	next.normalize()
	for id, items := range next.HostedQueues {
		if err := CheckItemOffsets(items); err != nil {
			return TopicQueueMappingDetail{}, fmt.Errorf("logic queue %d: %w", id, err)
		}
	}
	if old == nil {
		return next, nil
	}
	if force {
		for id, items := range old.HostedQueues {
			if _, ok := next.HostedQueues[id]; !ok {
				next.HostedQueues[id] = slices.Clone(items)
			}
		}
		return next, nil
	}
	if next.Epoch < old.Epoch {
		return TopicQueueMappingDetail{}, fmt.Errorf("%w: can't accept data with small epoch %d < %d", ErrBadMapping, next.Epoch, old.Epoch)
	}
	if next.Scope != old.Scope {
		return TopicQueueMappingDetail{}, fmt.Errorf("%w: can't accept data with unmatched scope %s != %s", ErrBadMapping, next.Scope, old.Scope)
	}
	epochEqual := next.Epoch == old.Epoch
	for id, oldItems := range old.HostedQueues {
		newItems, ok := next.HostedQueues[id]
		if !ok {
			if epochEqual {
				return TopicQueueMappingDetail{}, fmt.Errorf("%w: cannot accept equal epoch with null data", ErrBadMapping)
			}
			next.HostedQueues[id] = slices.Clone(oldItems)
			continue
		}
		if err := checkItemsImmutable(oldItems, newItems, epochEqual); err != nil {
			return TopicQueueMappingDetail{}, fmt.Errorf("logic queue %d: %w", id, err)
		}
	}
	return next, nil
}
