package rmqconfig

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/meta"
)

// topicQueueMapping.json holds the static topics' mappings, carried over
// (Config.QueueMappings):
//
//	topicQueueMapping.json  {"dataVersion":{...},"topicQueueMappingInfoMap":{"<topic>":{TopicQueueMappingDetail}}}
//	                        static topics: logical queues mapped onto brokers' physical ones
//
// Files of features rocketkv does not have: their content is read only to
// tell the operator what does not move with the store (Config.NotCarried).
//
//	lmqConsumerOffset.json  {"offsetTable":{...},"lmqOffsetTable":{"<key>":<offset>}}
//	                        every consumer offset of a broker with enableLmq (light message
//	                        queues, used by RocketMQ MQTT); carried with ReadOptions.LMQ

// parseQueueMappings reads topicQueueMapping.json's static topic
// mappings (Config.QueueMappings), in topic order; a mapping without its
// topic takes its key's.
func (c *Config) parseQueueMappings(data []byte) error {
	var w struct {
		Table map[string]json.RawMessage `json:"topicQueueMappingInfoMap"`
	}
	if err := adminbody.UnmarshalFastjson(data, &w); err != nil {
		return err
	}
	for _, topic := range slices.Sorted(maps.Keys(w.Table)) {
		d, err := meta.DecodeTopicQueueMappingDetail(w.Table[topic])
		if err != nil {
			return fmt.Errorf("static topic %s: %w", topic, err)
		}
		if d.Topic == "" {
			d.Topic = topic
		}
		c.QueueMappings = append(c.QueueMappings, d)
	}
	return nil
}

func (c *Config) parseLmqOffsets(data []byte, carry bool) error {
	if carry {
		return c.parseLmqOffsetsCarried(data)
	}
	// What would be lost: the light message queues' offsets, and the
	// others where they differ from consumerOffset.json's (a RocketMQ
	// broker with enableLmq updates only this file; kvdump export-rocketmq
	// writes both alike).
	lmq, err := tableKeys(data, "lmqOffsetTable")
	if err != nil {
		return err
	}
	known := make(map[Offset]bool, len(c.Offsets))
	for _, o := range c.Offsets {
		known[o] = true
	}
	others, _, err := readOffsetTable(nil, data)
	if err != nil {
		return err
	}
	n := len(lmq)
	for _, o := range others {
		if !known[o] {
			n++
		}
	}
	if n > 0 {
		c.NotCarried = append(c.NotCarried, fmt.Sprintf("lmqConsumerOffset.json: %d consumer offsets (of light message queues, or other than consumerOffset.json's) are not carried over: the RocketMQ broker ran with enableLmq, and rocketkv reads them with enableLmq=true", n))
	}
	return nil
}

// parseLmqOffsetsCarried reads lmqConsumerOffset.json as a RocketMQ broker
// with enableLmq loads it: its offsets replace consumerOffset.json's.
func (c *Config) parseLmqOffsetsCarried(data []byte) error {
	offsets, skipped, err := readOffsetTable(nil, data)
	if err != nil {
		return err
	}
	c.noteNegativeQueues("lmqConsumerOffset.json", skipped)
	lmq, err := tableMembers(data, "lmqOffsetTable")
	if err != nil {
		return err
	}
	for _, m := range lmq {
		key := unquote(m.Key)
		topic, group, ok := cutLast(key, "@")
		if !ok || topic == "" || group == "" {
			return fmt.Errorf("light message queue offset key %q is not <topic>@<group>", key)
		}
		if string(m.Value) == "null" {
			continue
		}
		off, err := strconv.ParseInt(string(m.Value), 10, 64)
		if err != nil {
			return fmt.Errorf("light message queue offset of %s: %s: %w", key, m.Value, err)
		}
		offsets = append(offsets, Offset{Group: group, Topic: topic, QueueID: 0, Offset: off})
	}
	sortOffsets(offsets)
	c.Offsets = offsets
	return nil
}

// tableKeys returns the keys of the object named field of a config file
// (none when it is absent or null), sorted.
func tableKeys(data []byte, field string) ([]string, error) {
	members, err := tableMembers(data, field)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(members))
	for _, k := range members {
		keys = append(keys, unquote(k.Key))
	}
	sort.Strings(keys)
	return keys, nil
}

// names lists up to five names, then how many more.
func names(all []string) string {
	const shown = 5
	if len(all) <= shown {
		return strings.Join(all, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(all[:shown], ", "), len(all)-shown)
}

// noteTopicsNotCarried notes the topics whose attributes ask for what
// rocketkv does not do: a BatchCQ topic's records each hold a batch of
// messages that RocketMQ counts one queue offset apiece, where rocketkv
// indexes one entry per record; a compacted topic's keys are carried
// over only while their newest messages are in the CommitLog (RocketMQ's
// compaction logs are not read).
func (c *Config) noteTopicsNotCarried() {
	var batch, compacted []string
	for _, t := range c.Topics {
		if t.Attributes[meta.AttrQueueType] == "BatchCQ" {
			batch = append(batch, t.TopicName)
		}
		if t.Attributes[meta.AttrCleanupPolicy] == "COMPACTION" {
			compacted = append(compacted, t.TopicName)
		}
	}
	if len(batch) > 0 {
		c.NotCarried = append(c.NotCarried, fmt.Sprintf("topics.json: %d BatchCQ topics (%s): rocketkv has no batch ConsumeQueue and indexes each batch record as one message at its first offset, so consumers cannot read these topics as RocketMQ numbered them; drain them before the move",
			len(batch), names(batch)))
	}
	if len(compacted) > 0 {
		c.NotCarried = append(c.NotCarried, fmt.Sprintf("topics.json: %d compacted topics (cleanup.policy=COMPACTION: %s): rocketkv compacts them from the messages still in the CommitLog; RocketMQ's compaction logs (compaction/) are not read, so a key whose newest message left the CommitLog is not carried over",
			len(compacted), names(compacted)))
	}
}
