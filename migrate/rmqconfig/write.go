package rmqconfig

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rocketkv/rocketkv/internal/atomicfile"
	"github.com/rocketkv/rocketkv/meta"
)

// The files Write writes.
const (
	TopicsFile       = "topics.json"
	GroupsFile       = "subscriptionGroup.json"
	OffsetsFile      = "consumerOffset.json"
	DelayOffsetsFile = "delayOffset.json"
	RequestModesFile = "messageRequestMode.json"
	OrderInfosFile   = "consumerOrderInfo.json"
	// LmqOffsetsFile is where a RocketMQ broker with enableLmq keeps every
	// consumer offset (and reads none from OffsetsFile).
	LmqOffsetsFile = "lmqConsumerOffset.json"
	// QueueMappingsFile holds the static topics' queue mappings
	// (RocketMQ's TopicQueueMappingManager).
	QueueMappingsFile = "topicQueueMapping.json"
)

// configFiles are the files Write writes, in order.
var configFiles = []string{TopicsFile, GroupsFile, OffsetsFile, LmqOffsetsFile, DelayOffsetsFile, RequestModesFile, OrderInfosFile, QueueMappingsFile}

// Write writes c into dir (a store's <storePathRootDir>/config) as the
// files Read reads, in the layout RocketMQ's ConfigManager writes them:
// topics.json, subscriptionGroup.json, consumerOffset.json,
// lmqConsumerOffset.json (the same offsets, for a RocketMQ broker with
// enableLmq), delayOffset.json, messageRequestMode.json,
// consumerOrderInfo.json and topicQueueMapping.json,
// integer map keys unquoted
// as fastjson writes them. As RocketMQ's persist does, a file's previous
// content is kept as <file>.bak; each file is replaced atomically. The
// timer checkpoint is WriteTimerCheckpoint's. version stamps the files
// that carry a dataVersion.
func Write(dir string, c Config, version meta.DataVersion) error {
	for _, name := range configFiles {
		if err := WriteFile(dir, name, c, version); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes one of Write's files, name (TopicsFile, ...), from the
// table of c it holds, as Write does.
func WriteFile(dir, name string, c Config, version meta.DataVersion) error {
	var body []byte
	var err error
	switch name {
	case TopicsFile:
		topics := make(map[string]meta.TopicConfig, len(c.Topics))
		for _, t := range c.Topics {
			topics[t.TopicName] = t
		}
		body, err = json.MarshalIndent(struct {
			DataVersion      meta.DataVersion            `json:"dataVersion"`
			TopicConfigTable map[string]meta.TopicConfig `json:"topicConfigTable"`
		}{version, topics}, "", "\t")
	case GroupsFile:
		groups := make(map[string]meta.SubscriptionGroupConfig, len(c.Groups))
		for _, g := range c.Groups {
			groups[g.GroupName] = g
		}
		forbidden := make(map[string]map[string]int, len(c.Forbidden))
		for _, f := range c.Forbidden {
			if len(f.Topics) > 0 {
				forbidden[f.Group] = f.Topics
			}
		}
		body, err = json.MarshalIndent(struct {
			DataVersion            meta.DataVersion                        `json:"dataVersion"`
			ForbiddenTable         map[string]map[string]int               `json:"forbiddenTable"`
			SubscriptionGroupTable map[string]meta.SubscriptionGroupConfig `json:"subscriptionGroupTable"`
		}{version, forbidden, groups}, "", "\t")
	case OffsetsFile:
		body, err = EncodeOffsets(c.Offsets, version)
	case LmqOffsetsFile:
		body, err = EncodeLmqOffsets(c.Offsets, version)
	case DelayOffsetsFile:
		body, err = EncodeDelayOffsets(c.DelayOffsets, version)
	case RequestModesFile:
		modes := map[string]map[string]RequestMode{}
		for _, m := range c.RequestModes {
			if modes[m.Topic] == nil {
				modes[m.Topic] = map[string]RequestMode{}
			}
			modes[m.Topic][m.ConsumerGroup] = m
		}
		body, err = json.MarshalIndent(struct {
			Map map[string]map[string]RequestMode `json:"messageRequestModeMap"`
		}{modes}, "", "\t")
	case OrderInfosFile:
		body, err = EncodeOrderInfos(c.OrderInfos)
	case QueueMappingsFile:
		body, err = EncodeQueueMappings(c.QueueMappings, version)
	default:
		return fmt.Errorf("write config file %s: not one of %s", name, strings.Join(configFiles, ", "))
	}
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create config directory %s: %w", dir, err)
	}
	return atomicfile.ReplaceKeepingBackup(filepath.Join(dir, name), body, 0o644)
}

// EncodeQueueMappings writes topicQueueMapping.json as RocketMQ's
// TopicQueueMappingManager encodes it:
// {"topicQueueMappingInfoMap":{"<topic>":{TopicQueueMappingDetail}},"dataVersion":{...}},
// topics in order, each detail's fields in fastjson's (alphabetical)
// order and its logic queue ids (currIdMap, hostedQueues) unquoted, as
// fastjson writes Integer keys.
func EncodeQueueMappings(mappings []meta.TopicQueueMappingDetail, version meta.DataVersion) ([]byte, error) {
	byTopic := make(map[string]meta.TopicQueueMappingDetail, len(mappings))
	for _, d := range mappings {
		byTopic[d.Topic] = d
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	if err := appendKeyedTable(&b, "topicQueueMappingInfoMap", byTopic, func(topic string) error {
		return appendMappingDetail(&b, byTopic[topic])
	}); err != nil {
		return nil, err
	}
	b.WriteString(",\n")
	if err := appendVersion(&b, version); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// appendMappingDetail writes one TopicQueueMappingDetail as fastjson
// does (see EncodeQueueMappings).
func appendMappingDetail(b *bytes.Buffer, d meta.TopicQueueMappingDetail) error {
	str := func(v any) error {
		raw, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("static topic %s: %w", d.Topic, err)
		}
		b.Write(raw)
		return nil
	}
	b.WriteString(`{"bname":`)
	if err := str(d.Bname); err != nil {
		return err
	}
	b.WriteString(`,"currIdMap":{`)
	for i, id := range slices.Sorted(maps.Keys(d.CurrIDMap)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(id)) + ":" + strconv.Itoa(int(d.CurrIDMap[id])))
	}
	b.WriteString(`},"dirty":` + strconv.FormatBool(d.Dirty) + `,"epoch":` + strconv.FormatInt(d.Epoch, 10) + `,"hostedQueues":{`)
	for i, id := range slices.Sorted(maps.Keys(d.HostedQueues)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(id)) + ":")
		if err := str(d.HostedQueues[id]); err != nil {
			return err
		}
	}
	b.WriteString(`},"scope":`)
	if err := str(d.Scope); err != nil {
		return err
	}
	b.WriteString(`,"topic":`)
	if err := str(d.Topic); err != nil {
		return err
	}
	b.WriteString(`,"totalQueues":` + strconv.Itoa(int(d.TotalQueues)) + "}")
	return nil
}

// TimerCheckpointSize is the size of RocketMQ 5's config/timercheck (a
// page).
const TimerCheckpointSize = 4096

// WriteTimerCheckpoint writes dir/timercheck as RocketMQ 5's
// TimerCheckpoint lays it out, big-endian:
//
//	0  lastReadTimeMs        8  lastTimerLogFlushPos   16 lastTimerQueueOffset
//	24 masterTimerQueueOffset 32 stateVersion  40 timestamp  48 counter
//
// with the timer log flushed to 0 and both queue offsets at queueOffset:
// RocketMQ's timer takes in rmq_sys_wheel_timer from there (its timerlog
// and timerwheel must be gone, or it revises the offset from them), and
// reads its wheel from readMs.
func WriteTimerCheckpoint(dir string, readMs, queueOffset int64, version meta.DataVersion) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create config directory %s: %w", dir, err)
	}
	b := make([]byte, TimerCheckpointSize)
	copy(b, EncodeTimerCheckpoint(readMs, queueOffset, version))
	return atomicfile.ReplaceKeepingBackup(filepath.Join(dir, "timercheck"), b, 0o644)
}

// EncodeTimerCheckpoint is RocketMQ 5's TimerCheckpoint.encode, the 56
// bytes laid out as WriteTimerCheckpoint's file starts: readMs, a timer
// log flushed to 0, both queue offsets at queueOffset, the version. It is
// also the body of GET_TIMER_CHECK_POINT, which a RocketMQ slave asks its
// master for.
func EncodeTimerCheckpoint(readMs, queueOffset int64, version meta.DataVersion) []byte {
	return TimerCheckpoint{ReadMs: readMs, QueueOffset: queueOffset, MasterQueueOffset: queueOffset, Version: version}.Encode()
}

// EncodeOffsets writes consumerOffset.json as RocketMQ's
// ConsumerOffsetManager encodes it:
// {"offsetTable":{"<topic>@<group>":{<queueId>:<offset>,...}},"dataVersion":{...}},
// keys in order, queue ids unquoted as fastjson writes Integer keys. It is
// also the body RocketMQ answers GET_ALL_CONSUMER_OFFSET with, which a
// slave parses with fastjson (ConsumerOffsetSerializeWrapper).
func EncodeOffsets(offsets []Offset, version meta.DataVersion) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("{\n")
	if err := appendOffsetTable(&b, offsets); err != nil {
		return nil, err
	}
	b.WriteString(",\n")
	if err := appendVersion(&b, version); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// EncodeLmqOffsets writes lmqConsumerOffset.json as RocketMQ's
// LmqConsumerOffsetManager encodes it: the offsets of groups that are not
// a light message queue's in offsetTable, as EncodeOffsets writes them,
// and those of light message queues' groups (meta.IsLMQ) in
// lmqOffsetTable, one offset per "<topic>@<group>" (their one queue's):
// {"offsetTable":{...},"lmqOffsetTable":{"<topic>@<group>":<offset>},"dataVersion":{...}}.
func EncodeLmqOffsets(offsets []Offset, version meta.DataVersion) ([]byte, error) {
	var others []Offset
	lmq := map[string]int64{}
	for _, o := range offsets {
		if meta.IsLMQ(o.Group) {
			lmq[o.Topic+"@"+o.Group] = o.Offset
		} else {
			others = append(others, o)
		}
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	if err := appendOffsetTable(&b, others); err != nil {
		return nil, err
	}
	b.WriteString(",\n")
	if err := appendKeyedTable(&b, "lmqOffsetTable", lmq, func(k string) error {
		b.WriteString(strconv.FormatInt(lmq[k], 10))
		return nil
	}); err != nil {
		return nil, err
	}
	b.WriteString(",\n")
	if err := appendVersion(&b, version); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// EncodeDelayOffsets writes delayOffset.json as RocketMQ's
// ScheduleMessageService encodes it:
// {"offsetTable":{<level>:<offset>,...},"dataVersion":{...}}, levels
// unquoted. It is also the body of GET_ALL_DELAY_OFFSET, which a RocketMQ
// slave writes to its delayOffset.json as it comes.
func EncodeDelayOffsets(levels map[int]int64, version meta.DataVersion) ([]byte, error) {
	table := make(map[int64]int64, len(levels))
	for l, off := range levels {
		table[int64(l)] = off
	}
	var b bytes.Buffer
	b.WriteString("{\n\t\"offsetTable\":")
	appendIntTable(&b, table)
	b.WriteString(",\n")
	if err := appendVersion(&b, version); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// appendOffsetTable writes ConsumerOffsetManager's offsetTable member:
// "\t\"offsetTable\":{" and a line per "<topic>@<group>" with its queues'
// offsets, queue ids unquoted.
func appendOffsetTable(b *bytes.Buffer, offsets []Offset) error {
	byKey := map[string]map[int64]int64{}
	for _, o := range offsets {
		k := o.Topic + "@" + o.Group
		if byKey[k] == nil {
			byKey[k] = map[int64]int64{}
		}
		byKey[k][int64(o.QueueID)] = o.Offset
	}
	return appendKeyedTable(b, "offsetTable", byKey, func(k string) error {
		appendIntTable(b, byKey[k])
		return nil
	})
}

// appendKeyedTable writes "\t\"<field>\":{", then a line per key of
// table in key order ("\t\t<key as JSON>:" and what value writes), then
// "\n\t}": a ConfigManager table keyed by "<topic>@<group>".
func appendKeyedTable[V any](b *bytes.Buffer, field string, table map[string]V, value func(key string) error) error {
	keys := slices.Sorted(maps.Keys(table))
	b.WriteString("\t\"" + field + "\":{")
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		name, err := json.Marshal(k)
		if err != nil {
			return err
		}
		b.WriteString("\n\t\t")
		b.Write(name)
		b.WriteByte(':')
		if err := value(k); err != nil {
			return err
		}
	}
	b.WriteString("\n\t}")
	return nil
}

// appendIntTable writes {k:v,...} with unquoted integer keys in key order.
func appendIntTable(b *bytes.Buffer, m map[int64]int64) {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(k, 10))
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(m[k], 10))
	}
	b.WriteByte('}')
}

func appendVersion(b *bytes.Buffer, version meta.DataVersion) error {
	v, err := json.Marshal(version)
	if err != nil {
		return err
	}
	b.WriteString("\t\"dataVersion\":")
	b.Write(v)
	b.WriteString("\n}\n")
	return nil
}

// TimerCheckpoint is RocketMQ 5's TimerCheckpoint as GET_TIMER_CHECK_POINT
// carries it (the 56 bytes EncodeTimerCheckpoint lays out).
type TimerCheckpoint struct {
	// ReadMs is lastReadTimeMs: the timer's read time.
	ReadMs int64
	// FlushPos is lastTimerLogFlushPos.
	FlushPos int64
	// QueueOffset is lastTimerQueueOffset, MasterQueueOffset
	// masterTimerQueueOffset: where the broker's timer, and its master's,
	// took in rmq_sys_wheel_timer up to.
	QueueOffset, MasterQueueOffset int64
	// Version is the checkpoint's dataVersion.
	Version meta.DataVersion
}

// Encode lays c out as EncodeTimerCheckpoint does.
func (c TimerCheckpoint) Encode() []byte {
	b := make([]byte, 0, 56)
	for _, v := range []int64{c.ReadMs, c.FlushPos, c.QueueOffset, c.MasterQueueOffset, c.Version.StateVersion, c.Version.Timestamp, c.Version.Counter} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// DecodeTimerCheckpoint reads the body of a GET_TIMER_CHECK_POINT answer
// (RocketMQ's TimerCheckpoint.decode): at least its 56 bytes.
func DecodeTimerCheckpoint(b []byte) (TimerCheckpoint, error) {
	if len(b) < 56 {
		return TimerCheckpoint{}, fmt.Errorf("timer checkpoint of %d bytes, want 56", len(b))
	}
	v := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[8*i:])) }
	return TimerCheckpoint{
		ReadMs: v(0), FlushPos: v(1), QueueOffset: v(2), MasterQueueOffset: v(3),
		Version: meta.DataVersion{StateVersion: v(4), Timestamp: v(5), Counter: v(6)},
	}, nil
}
