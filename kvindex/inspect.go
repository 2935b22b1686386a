package kvindex

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
)

// This file decodes every keyspace of doc.go into typed records for
// inspection tools (kvdump). It reads what keys.go writes and shares its
// decoders, so the schema stays in one place.

// Keyspace prefixes, the first byte of every key; see doc.go for the layout
// of each.
const (
	PrefixMeta           = prefixMeta
	PrefixCQ             = prefixCQ
	PrefixCQMin          = prefixCQMin
	PrefixCQJournal      = prefixCQJournal
	PrefixKeyIndex       = prefixKeyIndex
	PrefixKeyBucket      = prefixKeyBucket
	PrefixConsumerOffset = prefixConsumerOf
	PrefixTopicConfig    = prefixTopic
	PrefixGroupConfig    = prefixGroup
	PrefixAuthUser       = prefixAuthUser
	PrefixAuthACL        = prefixAuthACL
	PrefixGroupForbidden = prefixForbidden
	PrefixQueueMapping   = prefixMapping
)

// ErrUnknownKeyspace is returned by DecodeKey for a key whose prefix byte
// names no keyspace of doc.go (a keyspace added by a later version, or a
// foreign key).
var ErrUnknownKeyspace = errors.New("kvindex: unknown keyspace")

// Keyspace describes one keyspace of doc.go.
type Keyspace struct {
	// Prefix is the first byte of every key of the keyspace.
	Prefix byte `json:"prefix"`
	// Name is a short stable name ("cq", "consumer-offset", ...).
	Name string `json:"name"`
	// Derivable is true when the keyspace can be rebuilt by re-dispatching
	// the CommitLog.
	Derivable bool `json:"derivable"`
}

// Keyspaces returns every keyspace of doc.go in prefix order.
func Keyspaces() []Keyspace {
	return append([]Keyspace{
		{PrefixMeta, "meta", false},
		{PrefixCQ, "cq", true},
		{PrefixCQMin, "cq-min", true},
		{PrefixCQJournal, "cq-journal", true},
		{PrefixKeyIndex, "key-index", true},
		{PrefixKeyBucket, "key-bucket", true},
		{PrefixConsumerOffset, "consumer-offset", false},
		{PrefixTopicConfig, "topic-config", false},
		{PrefixGroupConfig, "group-config", false},
		{PrefixAuthUser, "auth-user", false},
		{PrefixAuthACL, "auth-acl", false},
		{PrefixGroupForbidden, "group-forbidden", false},
		{PrefixQueueMapping, "topic-queue-mapping", false},
	}, slices.Concat(popKeyspaces(), txnKeyspaces(), timerKeyspaces(), compactionKeyspaces())...)
}

// KeyspaceOf returns the keyspace of a prefix byte; ok is false when doc.go
// defines none.
func KeyspaceOf(prefix byte) (ks Keyspace, ok bool) {
	for _, k := range Keyspaces() {
		if k.Prefix == prefix {
			return k, true
		}
	}
	return Keyspace{Prefix: prefix, Name: fmt.Sprintf("unknown-%02x", prefix)}, false
}

// Record is one decoded key and value. The concrete types are the *Record
// types of this file, one per keyspace (three for meta).
type Record interface {
	// Keyspace returns the keyspace the record belongs to.
	Keyspace() Keyspace
	// String returns the decoded fields as space-separated name=value
	// pairs, for tables and logs.
	String() string
}

// FormatMillis formats a timestamp in milliseconds since the epoch as UTC
// with millisecond precision, as inspection output shows store times.
func FormatMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// SchemaRecord is meta "schema": the layout version of the database.
type SchemaRecord struct {
	Version uint32 `json:"version"`
}

// DispatchedRecord is meta "dispatched": every CommitLog record before
// Offset is indexed.
type DispatchedRecord struct {
	Offset int64 `json:"offset"`
}

// CQWrittenRecord is meta "cqWritten.<layout>": the ConsumeQueue layout
// ("kv" or "file") holds the entry of every CommitLog record before
// Offset.
type CQWrittenRecord struct {
	Layout string `json:"layout"`
	Offset int64  `json:"offset"`
}

// RebuildStartRecord is meta "rebuildStart.<layout>.<queueId>.<topic>":
// where a queue stood in a layout whose rebuild began and has not
// completed.
type RebuildStartRecord struct {
	Layout  string `json:"layout"`
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	Offset  int64  `json:"offset"`
}

// DataVersionRecord is the meta key holding the DataVersion of a config
// table ("topicsVer", "groupsVer", "authUsersVer", "authAclsVer",
// "groupForbiddenVer").
type DataVersionRecord struct {
	// Table is "topics", "groups", "users", "acls" or "groupForbidden".
	Table     string `json:"table"`
	Counter   int64  `json:"counter"`
	Timestamp int64  `json:"timestamp"`
}

// MetaRecord is a meta key this version does not know by name.
type MetaRecord struct {
	Name  string `json:"name"`
	Value []byte `json:"value"`
}

// CQEntryRecord is one ConsumeQueue unit (keyspace 0x10).
type CQEntryRecord struct {
	Topic          string `json:"topic"`
	QueueID        int32  `json:"queueId"`
	QueueOffset    int64  `json:"queueOffset"`
	PhyOffset      int64  `json:"phyOffset"`
	Size           int32  `json:"size"`
	TagsCode       int64  `json:"tagsCode"`
	StoreTimestamp int64  `json:"storeTimestamp"`
}

// CQMinRecord is a queue's minimum offset after retention (keyspace 0x11).
type CQMinRecord struct {
	Topic     string `json:"topic"`
	QueueID   int32  `json:"queueId"`
	MinOffset int64  `json:"minOffset"`
}

// JournalQueue is one queue named by a cq journal record.
type JournalQueue struct {
	Topic            string `json:"topic"`
	QueueID          int32  `json:"queueId"`
	FirstQueueOffset int64  `json:"firstQueueOffset"`
}

// CQJournalRecord is the record of one dispatch batch (keyspace 0x12).
type CQJournalRecord struct {
	FirstPhyOffset int64          `json:"firstPhyOffset"`
	EndPhyOffset   int64          `json:"endPhyOffset"`
	Queues         []JournalQueue `json:"queues"`
}

// KeyIndexRecord is one message-key index entry (keyspace 0x20).
type KeyIndexRecord struct {
	Bucket int64  `json:"bucket"`
	Topic  string `json:"topic"`
	// Kind is KindKey or KindUniqKey.
	Kind      byte   `json:"kind"`
	Key       string `json:"key"`
	PhyOffset int64  `json:"phyOffset"`
	// StoreTimestamp is present only in entries written before the index
	// stopped repeating the record's store time.
	StoreTimestamp int64 `json:"storeTimestamp,omitempty"`
}

// KeyBucketRecord is the store-time range of a key-index bucket (keyspace
// 0x21).
type KeyBucketRecord struct {
	Bucket            int64 `json:"bucket"`
	MinStoreTimestamp int64 `json:"minStoreTimestamp"`
	MaxStoreTimestamp int64 `json:"maxStoreTimestamp"`
}

// ConsumerOffsetRecord is one committed consumer offset (keyspace 0x30).
type ConsumerOffsetRecord struct {
	Group   string `json:"group"`
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	Offset  int64  `json:"offset"`
}

// TopicConfigRecord is one topic config (keyspace 0x40). Name comes from
// the key.
type TopicConfigRecord struct {
	Name   string           `json:"name"`
	Config meta.TopicConfig `json:"config"`
}

// GroupConfigRecord is one subscription group config (keyspace 0x41). Name
// comes from the key.
type GroupConfigRecord struct {
	Name   string                       `json:"name"`
	Config meta.SubscriptionGroupConfig `json:"config"`
}

// GroupForbiddenRecord is what one group is forbidden on topics (keyspace
// 0x44). Name comes from the key.
type GroupForbiddenRecord struct {
	Name      string              `json:"name"`
	Forbidden meta.GroupForbidden `json:"forbidden"`
}

// QueueMappingRecord is one static topic's queue mapping (keyspace 0x45).
// Name comes from the key.
type QueueMappingRecord struct {
	Name    string                       `json:"name"`
	Mapping meta.TopicQueueMappingDetail `json:"mapping"`
}

func mustKeyspace(p byte) Keyspace { k, _ := KeyspaceOf(p); return k }

// Keyspace implements Record.
func (SchemaRecord) Keyspace() Keyspace { return mustKeyspace(PrefixMeta) }

// Keyspace implements Record.
func (DispatchedRecord) Keyspace() Keyspace { return mustKeyspace(PrefixMeta) }

// Keyspace implements Record.
func (CQWrittenRecord) Keyspace() Keyspace { return mustKeyspace(PrefixMeta) }

// Keyspace implements Record.
func (RebuildStartRecord) Keyspace() Keyspace { return mustKeyspace(PrefixMeta) }

// Keyspace implements Record.
func (DataVersionRecord) Keyspace() Keyspace { return mustKeyspace(PrefixMeta) }

// Keyspace implements Record.
func (MetaRecord) Keyspace() Keyspace { return mustKeyspace(PrefixMeta) }

// Keyspace implements Record.
func (CQEntryRecord) Keyspace() Keyspace { return mustKeyspace(PrefixCQ) }

// Keyspace implements Record.
func (CQMinRecord) Keyspace() Keyspace { return mustKeyspace(PrefixCQMin) }

// Keyspace implements Record.
func (CQJournalRecord) Keyspace() Keyspace { return mustKeyspace(PrefixCQJournal) }

// Keyspace implements Record.
func (KeyIndexRecord) Keyspace() Keyspace { return mustKeyspace(PrefixKeyIndex) }

// Keyspace implements Record.
func (KeyBucketRecord) Keyspace() Keyspace { return mustKeyspace(PrefixKeyBucket) }

// Keyspace implements Record.
func (ConsumerOffsetRecord) Keyspace() Keyspace { return mustKeyspace(PrefixConsumerOffset) }

// Keyspace implements Record.
func (TopicConfigRecord) Keyspace() Keyspace { return mustKeyspace(PrefixTopicConfig) }

// Keyspace implements Record.
func (GroupConfigRecord) Keyspace() Keyspace { return mustKeyspace(PrefixGroupConfig) }

// Keyspace implements Record.
func (GroupForbiddenRecord) Keyspace() Keyspace { return mustKeyspace(PrefixGroupForbidden) }

// Keyspace implements Record.
func (QueueMappingRecord) Keyspace() Keyspace { return mustKeyspace(PrefixQueueMapping) }

// String implements Record.
func (r QueueMappingRecord) String() string {
	return fmt.Sprintf("topic=%s bname=%s epoch=%d totalQueues=%d hostedQueues=%d", r.Name, r.Mapping.Bname,
		r.Mapping.Epoch, r.Mapping.TotalQueues, len(r.Mapping.HostedQueues))
}

// String implements Record.
func (r SchemaRecord) String() string { return fmt.Sprintf("schema=%d", r.Version) }

// String implements Record.
func (r DispatchedRecord) String() string { return fmt.Sprintf("dispatched=%d", r.Offset) }

// String implements Record.
func (r CQWrittenRecord) String() string {
	return fmt.Sprintf("cqWritten layout=%s offset=%d", r.Layout, r.Offset)
}

// String implements Record.
func (r RebuildStartRecord) String() string {
	return fmt.Sprintf("rebuildStart layout=%s topic=%s queue=%d offset=%d", r.Layout, r.Topic, r.QueueID, r.Offset)
}

// String implements Record.
func (r DataVersionRecord) String() string {
	return fmt.Sprintf("table=%s counter=%d timestamp=%s", r.Table, r.Counter, FormatMillis(r.Timestamp))
}

// String implements Record.
func (r MetaRecord) String() string {
	return fmt.Sprintf("name=%q value=%s", r.Name, hex.EncodeToString(r.Value))
}

// String implements Record.
func (r CQEntryRecord) String() string {
	return fmt.Sprintf("topic=%q queue=%d offset=%d phy=%d size=%d tagsCode=%d storeTime=%s",
		r.Topic, r.QueueID, r.QueueOffset, r.PhyOffset, r.Size, r.TagsCode, FormatMillis(r.StoreTimestamp))
}

// String implements Record.
func (r CQMinRecord) String() string {
	return fmt.Sprintf("topic=%q queue=%d min=%d", r.Topic, r.QueueID, r.MinOffset)
}

// String implements Record.
func (r CQJournalRecord) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "phy=[%d,%d) queues=[", r.FirstPhyOffset, r.EndPhyOffset)
	for i, q := range r.Queues {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%q/%d@%d", q.Topic, q.QueueID, q.FirstQueueOffset)
	}
	b.WriteByte(']')
	return b.String()
}

// KindName returns "key" for KindKey, "uniq" for KindUniqKey and the number
// otherwise.
func KindName(kind byte) string {
	switch kind {
	case KindKey:
		return "key"
	case KindUniqKey:
		return "uniq"
	}
	return strconv.Itoa(int(kind))
}

// String implements Record.
func (r KeyIndexRecord) String() string {
	s := fmt.Sprintf("bucket=%d topic=%q kind=%s key=%q phy=%d",
		r.Bucket, r.Topic, KindName(r.Kind), r.Key, r.PhyOffset)
	if r.StoreTimestamp != 0 {
		s += " storeTime=" + FormatMillis(r.StoreTimestamp)
	}
	return s
}

// String implements Record.
func (r KeyBucketRecord) String() string {
	return fmt.Sprintf("bucket=%d minStoreTime=%s maxStoreTime=%s",
		r.Bucket, FormatMillis(r.MinStoreTimestamp), FormatMillis(r.MaxStoreTimestamp))
}

// String implements Record.
func (r ConsumerOffsetRecord) String() string {
	return fmt.Sprintf("group=%q topic=%q queue=%d offset=%d", r.Group, r.Topic, r.QueueID, r.Offset)
}

// String implements Record.
func (r TopicConfigRecord) String() string {
	c := r.Config
	return fmt.Sprintf("topic=%q read=%d write=%d perm=%d order=%t", r.Name, c.ReadQueueNums, c.WriteQueueNums, c.Perm, c.Order)
}

// String implements Record.
func (r GroupConfigRecord) String() string {
	c := r.Config
	return fmt.Sprintf("group=%q consume=%t broadcast=%t orderly=%t retryMaxTimes=%d",
		r.Name, c.ConsumeEnable, c.ConsumeBroadcastEnable, c.ConsumeMessageOrderly, c.RetryMaxTimes)
}

// String implements Record: the group and each topic's bits, in topic
// order.
func (r GroupForbiddenRecord) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "group=%q", r.Name)
	for _, t := range slices.Sorted(maps.Keys(r.Forbidden.Topics)) {
		fmt.Fprintf(&b, " %q=%d", t, r.Forbidden.Topics[t])
	}
	return b.String()
}

// DecodeKey decodes one key and its value following doc.go. It returns an
// error wrapping ErrUnknownKeyspace when the prefix byte is not one of
// doc.go's, and one wrapping ErrBadKey when the key or value does not
// follow the layout of its keyspace. It never panics, whatever the bytes.
func DecodeKey(key, value []byte) (Record, error) {
	if len(key) == 0 {
		return nil, fmt.Errorf("empty key: %w", ErrBadKey)
	}
	bad := func() error {
		return fmt.Errorf("%s key %x (value %d bytes): %w", mustKeyspace(key[0]).Name, key, len(value), ErrBadKey)
	}
	switch key[0] {
	case PrefixMeta:
		return decodeMeta(key, value)
	case PrefixCQ:
		topic, qid, off, err := decodeCQKey(key)
		if err != nil {
			return nil, bad()
		}
		phy, size, tags, ts, err := decodeCQValue(value)
		if err != nil {
			return nil, bad()
		}
		return CQEntryRecord{Topic: topic, QueueID: qid, QueueOffset: off, PhyOffset: phy, Size: size, TagsCode: tags, StoreTimestamp: ts}, nil
	case PrefixCQMin:
		topic, qid, err := decodeQueueKey(key)
		if err != nil {
			return nil, bad()
		}
		m, err := getInt64(value)
		if err != nil {
			return nil, bad()
		}
		return CQMinRecord{Topic: topic, QueueID: qid, MinOffset: m}, nil
	case PrefixCQJournal:
		if len(key) != 9 {
			return nil, bad()
		}
		end, queues, err := decodeJournalValue(value)
		if err != nil {
			return nil, bad()
		}
		r := CQJournalRecord{FirstPhyOffset: int64(binary.BigEndian.Uint64(key[1:])), EndPhyOffset: end}
		for _, q := range queues {
			r.Queues = append(r.Queues, JournalQueue{Topic: q.topic, QueueID: q.queueID, FirstQueueOffset: q.firstQueueOffset})
		}
		return r, nil
	case PrefixKeyIndex:
		e, err := decodeKeyIndex(key, value)
		if err != nil {
			return nil, bad()
		}
		return KeyIndexRecord{Bucket: int64(binary.BigEndian.Uint64(key[1:])), Topic: e.Topic, Kind: e.Kind, Key: e.Key,
			PhyOffset: e.PhyOffset, StoreTimestamp: e.StoreTimestamp}, nil
	case PrefixKeyBucket:
		if len(key) != 9 || len(value) != 16 {
			return nil, bad()
		}
		return KeyBucketRecord{
			Bucket:            int64(binary.BigEndian.Uint64(key[1:])),
			MinStoreTimestamp: int64(binary.BigEndian.Uint64(value)),
			MaxStoreTimestamp: int64(binary.BigEndian.Uint64(value[8:])),
		}, nil
	case PrefixConsumerOffset:
		g, t, q, err := decodeConsumerOffsetKey(key)
		if err != nil {
			return nil, bad()
		}
		off, err := getInt64(value)
		if err != nil {
			return nil, bad()
		}
		return ConsumerOffsetRecord{Group: g, Topic: t, QueueID: q, Offset: off}, nil
	case PrefixTopicConfig:
		var c meta.TopicConfig
		if err := json.Unmarshal(value, &c); err != nil {
			return nil, fmt.Errorf("topic config %q: %w: %w", key[1:], ErrBadKey, err)
		}
		return TopicConfigRecord{Name: string(key[1:]), Config: c}, nil
	case PrefixGroupConfig:
		var c meta.SubscriptionGroupConfig
		if err := json.Unmarshal(value, &c); err != nil {
			return nil, fmt.Errorf("group config %q: %w: %w", key[1:], ErrBadKey, err)
		}
		return GroupConfigRecord{Name: string(key[1:]), Config: c}, nil
	case PrefixAuthUser, PrefixAuthACL:
		return decodeAuthKey(key, value)
	case PrefixGroupForbidden:
		var f meta.GroupForbidden
		if err := json.Unmarshal(value, &f); err != nil {
			return nil, fmt.Errorf("group forbidden %q: %w: %w", key[1:], ErrBadKey, err)
		}
		return GroupForbiddenRecord{Name: string(key[1:]), Forbidden: f}, nil
	case PrefixQueueMapping:
		var m meta.TopicQueueMappingDetail
		if err := json.Unmarshal(value, &m); err != nil {
			return nil, fmt.Errorf("topic queue mapping %q: %w: %w", key[1:], ErrBadKey, err)
		}
		return QueueMappingRecord{Name: string(key[1:]), Mapping: m}, nil
	}
	if r, ok, err := decodePopKey(key, value); ok {
		return r, err
	}
	if r, ok, err := decodeTxnKey(key, value); ok {
		return r, err
	}
	if r, ok, err := decodeTimerKey(key, value); ok {
		return r, err
	}
	if r, ok, err := decodeCompactionKey(key, value); ok {
		return r, err
	}
	return nil, fmt.Errorf("key %x: prefix %#02x: %w", key, key[0], ErrUnknownKeyspace)
}

func decodeMeta(key, value []byte) (Record, error) {
	name := string(key[1:])
	bad := func() error {
		return fmt.Errorf("meta %q value %x: %w", name, value, ErrBadKey)
	}
	switch name {
	case metaSchema:
		if len(value) != 4 {
			return nil, bad()
		}
		return SchemaRecord{Version: binary.BigEndian.Uint32(value)}, nil
	case metaDispatched:
		off, err := getInt64(value)
		if err != nil {
			return nil, bad()
		}
		return DispatchedRecord{Offset: off}, nil
	case metaCQWritten + LayoutKV, metaCQWritten + LayoutFile:
		off, err := getInt64(value)
		if err != nil {
			return nil, bad()
		}
		return CQWrittenRecord{Layout: strings.TrimPrefix(name, metaCQWritten), Offset: off}, nil
	case metaTopicsVer, metaGroupsVer, metaUsersVer, metaACLsVer, metaForbidVer, metaMappingVer:
		if len(value) != 16 {
			return nil, bad()
		}
		table := map[string]string{metaTopicsVer: "topics", metaGroupsVer: "groups",
			metaUsersVer: "users", metaACLsVer: "acls", metaForbidVer: "groupForbidden", metaMappingVer: "topicQueueMapping"}[name]
		return DataVersionRecord{Table: table, Counter: int64(binary.BigEndian.Uint64(value)),
			Timestamp: int64(binary.BigEndian.Uint64(value[8:]))}, nil
	}
	if rest, ok := strings.CutPrefix(name, metaRebuildStart); ok {
		st, layout, err := parseRebuildStart(rest, value)
		if err != nil {
			return nil, fmt.Errorf("meta %q: %w", name, err)
		}
		return RebuildStartRecord{Layout: layout, Topic: st.Topic, QueueID: st.QueueID, Offset: st.Offset}, nil
	}
	return MetaRecord{Name: name, Value: append([]byte(nil), value...)}, nil
}

// propertyDelay is RocketMQ's DELAY property: the delay level of a message
// parked in SCHEDULE_TOPIC_XXXX.
const propertyDelay = "DELAY"

// TagsCodeOf returns the ConsumeQueue tag code the dispatcher stores for a
// record: for a delay-level message parked in SCHEDULE_TOPIC_XXXX its
// delivery time (store time plus the level's delay from levels), otherwise
// the Java hash of its TAGS property.
func TagsCodeOf(m *commitlog.Message, levels []time.Duration) int64 {
	if m.Topic == meta.ScheduleTopic {
		if lv, ok := commitlog.LookupProperty(m.Properties, propertyDelay); ok {
			level, err := strconv.Atoi(lv)
			if err != nil {
				level = 0
			}
			return m.StoreTimestamp + meta.DelayMillis(levels, level)
		}
	}
	tags, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyTags)
	return commitlog.TagsCode(tags)
}

// KeyspaceStat sums the keys of one keyspace.
type KeyspaceStat struct {
	Keyspace
	// Known is false for a prefix doc.go does not define.
	Known bool `json:"known"`
	// Keys is the number of keys.
	Keys int64 `json:"keys"`
	// KeyBytes and ValueBytes are the logical sizes of the keys and values
	// (before Pebble's prefix and block compression).
	KeyBytes   int64 `json:"keyBytes"`
	ValueBytes int64 `json:"valueBytes"`
}

// KeyspaceStats counts the keys and bytes of every keyspace in one pass
// over the database: every keyspace of doc.go (with zeros when empty), then
// any other prefix found, in prefix order.
func (d *DB) KeyspaceStats() ([]KeyspaceStat, error) {
	var per [256]KeyspaceStat
	it, err := d.pdb.NewIter(nil)
	if err != nil {
		return nil, fmt.Errorf("keyspace stats: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) == 0 {
			continue
		}
		s := &per[k[0]]
		s.Keys++
		s.KeyBytes += int64(len(k))
		lv := it.LazyValue()
		s.ValueBytes += int64(lv.Len())
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("keyspace stats: %w", err)
	}
	var out []KeyspaceStat
	for p := range per {
		s := per[p]
		ks, known := KeyspaceOf(byte(p))
		if !known && s.Keys == 0 {
			continue
		}
		s.Keyspace, s.Known = ks, known
		out = append(out, s)
	}
	return out, nil
}

// QueueRange is the readable range [MinOffset, MaxOffset) of one queue.
type QueueRange struct {
	Topic     string `json:"topic"`
	QueueID   int32  `json:"queueId"`
	MinOffset int64  `json:"minOffset"`
	MaxOffset int64  `json:"maxOffset"`
	// MinKey is the value of the queue's cq min key (keyspace 0x11), -1
	// when it has none. MinOffset is the larger of it and the first
	// entry's offset, so a MinKey below MinOffset means entries are
	// missing at the start of the queue.
	MinKey int64 `json:"minKey"`
}

// QueueRanges calls fn with the range of every queue of topic (of every
// topic when topic is empty), in key order, until fn returns false. A
// queue counts when it has entries or a min key, as for CQ.Queues; the
// range is the one CQ.MinOffset and CQ.MaxOffset report.
func (d *DB) QueueRanges(topic string, fn func(QueueRange) bool) error {
	c := d.ConsumeQueue(1)
	var ferr error
	each := func(t string, qid int32) bool {
		b, err := c.readBounds(qkey{t, qid})
		if err != nil {
			ferr = err
			return false
		}
		r := QueueRange{Topic: t, QueueID: qid, MinOffset: b.min, MaxOffset: b.max, MinKey: -1}
		v, err := d.get(cqMinKey(t, qid))
		if err == nil && v != nil {
			r.MinKey, err = getInt64(v)
		}
		if err != nil {
			ferr = fmt.Errorf("min key of cq %s/%d: %w", t, qid, err)
			return false
		}
		return fn(r)
	}
	var err error
	if topic == "" {
		err = c.Queues(each)
	} else {
		err = d.topicQueues(topic, each)
	}
	if err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("queue ranges: %w", err)
	}
	return nil
}

// topicQueues calls fn for every queue id of topic that has cq entries or
// a cq min key, in increasing key order of the queue id.
func (d *DB) topicQueues(topic string, fn func(topic string, qid int32) bool) error {
	next := func(it *pebble.Iterator, prefix byte) (int32, bool, error) {
		if !it.Valid() {
			return 0, false, it.Error()
		}
		k := it.Key()
		base := len(topicPrefix(prefix, topic))
		if len(k) < base+4 {
			return 0, false, fmt.Errorf("key %x: %w", k, ErrBadKey)
		}
		return int32(binary.BigEndian.Uint32(k[base:])), true, nil
	}
	open := func(prefix byte) (*pebble.Iterator, error) {
		p := topicPrefix(prefix, topic)
		it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return nil, err
		}
		it.First()
		return it, nil
	}
	entries, err := open(prefixCQ)
	if err != nil {
		return err
	}
	defer entries.Close()
	mins, err := open(prefixCQMin)
	if err != nil {
		return err
	}
	defer mins.Close()
	for {
		eq, eok, err := next(entries, prefixCQ)
		if err != nil {
			return err
		}
		mq, mok, err := next(mins, prefixCQMin)
		if err != nil {
			return err
		}
		if !eok && !mok {
			return nil
		}
		// Queue ids sort as unsigned big-endian in keys.
		q := eq
		if !eok || (mok && uint32(mq) < uint32(eq)) {
			q = mq
		}
		if !fn(topic, q) {
			return nil
		}
		if eok {
			entries.SeekGE(prefixEnd(queuePrefix(prefixCQ, topic, q)))
		}
		if mok {
			mins.SeekGE(prefixEnd(queuePrefix(prefixCQMin, topic, q)))
		}
	}
}

// ScanQueue calls fn for every stored cq entry of one queue whose queue
// offset is at least from, in offset order, until fn returns false. Unlike
// CQ.Get it neither stops at gaps nor hides entries below the queue's min
// key: it shows what is stored. An entry whose key or value is malformed is
// passed with err wrapping ErrBadKey and the fields that could be read
// (QueueOffset is -1 when the key itself is malformed), so a checker can
// report it and go on.
func (d *DB) ScanQueue(topic string, queueID int32, from int64, fn func(e CQEntryRecord, err error) bool) error {
	p := queuePrefix(prefixCQ, topic, queueID)
	lower := p
	if from > 0 {
		lower = cqKey(topic, queueID, from)
	}
	it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(p)})
	if err != nil {
		return fmt.Errorf("scan cq %s/%d: %w", topic, queueID, err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		e := CQEntryRecord{Topic: topic, QueueID: queueID, QueueOffset: -1}
		var derr error
		k := it.Key()
		if _, _, off, err := decodeCQKey(k); err != nil {
			derr = fmt.Errorf("cq %s/%d: key %x: %w", topic, queueID, k, err)
		} else {
			e.QueueOffset = off
			v, err := it.ValueAndErr()
			if err != nil {
				_ = it.Close()
				return fmt.Errorf("scan cq %s/%d: %w", topic, queueID, err)
			}
			if phy, size, tags, ts, err := decodeCQValue(v); err != nil {
				derr = fmt.Errorf("cq %s/%d@%d: value of %d bytes: %w", topic, queueID, off, len(v), err)
			} else {
				e.PhyOffset, e.Size, e.TagsCode, e.StoreTimestamp = phy, size, tags, ts
			}
		}
		if !fn(e, derr) {
			break
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("scan cq %s/%d: %w", topic, queueID, err)
	}
	return nil
}
