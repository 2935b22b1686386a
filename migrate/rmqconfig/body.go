package rmqconfig

import (
	"encoding/json"
	"fmt"

	"github.com/rocketkv/rocketkv/meta"
)

// The GET_ALL_* answers a RocketMQ master gives its slaves (SlaveSynchronize)
// carry the same JSON as the config files: GET_ALL_TOPIC_CONFIG is
// topics.json (plus the static-topic mapping, ignored), 201 is
// subscriptionGroup.json, 43 consumerOffset.json, 45 delayOffset.json and
// 402 messageRequestMode.json. The functions below parse such bytes,
// whether read from a file or a socket.

// ParseTopics parses a TopicConfigSerializeWrapper (topics.json, the body
// of GET_ALL_TOPIC_CONFIG): the topics in name order and the table's
// data version (zero when the body has none).
func ParseTopics(data []byte) ([]meta.TopicConfig, meta.DataVersion, error) {
	var c Config
	if err := c.parseTopics(data); err != nil {
		return nil, meta.DataVersion{}, fmt.Errorf("topic table: %w", err)
	}
	v, err := dataVersion(data)
	if err != nil {
		return nil, v, fmt.Errorf("topic table: %w", err)
	}
	return c.Topics, v, nil
}

// ParseGroups parses a SubscriptionGroupWrapper (subscriptionGroup.json,
// the body of GET_ALL_SUBSCRIPTIONGROUP_CONFIG): the groups in name order
// and the table's data version (zero when the body has none).
func ParseGroups(data []byte) ([]meta.SubscriptionGroupConfig, meta.DataVersion, error) {
	var c Config
	if err := c.parseGroups(data); err != nil {
		return nil, meta.DataVersion{}, fmt.Errorf("subscription group table: %w", err)
	}
	v, err := dataVersion(data)
	if err != nil {
		return nil, v, fmt.Errorf("subscription group table: %w", err)
	}
	return c.Groups, v, nil
}

// ParseOffsets parses a ConsumerOffsetSerializeWrapper (consumerOffset.json,
// the body of GET_ALL_CONSUMER_OFFSET), integer keys unquoted or quoted:
// the offsets in group, topic, queue order.
func ParseOffsets(data []byte) ([]Offset, error) {
	var c Config
	if err := c.parseOffsets(data); err != nil {
		return nil, fmt.Errorf("consumer offsets: %w", err)
	}
	return c.Offsets, nil
}

// ParseDelayOffsets parses a DelayOffsetSerializeWrapper (delayOffset.json,
// the body of GET_ALL_DELAY_OFFSET): per delay level (1-based) the next
// SCHEDULE_TOPIC_XXXX offset of its queue.
func ParseDelayOffsets(data []byte) (map[int]int64, error) {
	var c Config
	if err := c.parseDelayOffsets(data); err != nil {
		return nil, fmt.Errorf("delay offsets: %w", err)
	}
	return c.DelayOffsets, nil
}

// ParseRequestModes parses a MessageRequestModeSerializeWrapper
// (messageRequestMode.json, the body of GET_ALL_MESSAGE_REQUEST_MODE): the
// modes in topic and group order.
func ParseRequestModes(data []byte) ([]RequestMode, error) {
	var c Config
	if err := c.parseRequestModes(data); err != nil {
		return nil, fmt.Errorf("message request modes: %w", err)
	}
	return c.RequestModes, nil
}

// dataVersion reads the top-level dataVersion of a ConfigManager body.
func dataVersion(data []byte) (meta.DataVersion, error) {
	var f struct {
		DataVersion *meta.DataVersion `json:"dataVersion"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return meta.DataVersion{}, fmt.Errorf("dataVersion: %w", err)
	}
	if f.DataVersion == nil {
		return meta.DataVersion{}, nil
	}
	return *f.DataVersion, nil
}
