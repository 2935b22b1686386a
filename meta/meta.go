// Package meta holds RocketMQ's broker metadata types — topic configs,
// subscription group configs, data versions, permission bits — with the
// JSON field names RocketMQ's Java code writes, so the same values travel
// to name servers, admin tools, config files and the Pebble index without
// translation.
package meta

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Permission bits (RocketMQ's PermName).
const (
	PermPriority = 8
	PermRead     = 4
	PermWrite    = 2
	PermInherit  = 1
)

// Readable reports whether perm allows reads.
func Readable(perm int) bool { return perm&PermRead != 0 }

// Writable reports whether perm allows writes.
func Writable(perm int) bool { return perm&PermWrite != 0 }

// Inheritable reports whether a topic with perm may serve as an auto-create
// template.
func Inheritable(perm int) bool { return perm&PermInherit != 0 }

// Topic filter types.
const (
	SingleTag = "SINGLE_TAG"
	MultiTag  = "MULTI_TAG"
)

// TopicConfig is RocketMQ's TopicConfig as JSON.
type TopicConfig struct {
	TopicName       string            `json:"topicName"`
	ReadQueueNums   int               `json:"readQueueNums"`
	WriteQueueNums  int               `json:"writeQueueNums"`
	Perm            int               `json:"perm"`
	TopicFilterType string            `json:"topicFilterType"`
	TopicSysFlag    int               `json:"topicSysFlag"`
	Order           bool              `json:"order"`
	Attributes      map[string]string `json:"attributes"`
}

// NewTopicConfig returns a config with RocketMQ's defaults for the given
// queue count: read-write, single tag.
func NewTopicConfig(name string, queues int) TopicConfig {
	return TopicConfig{
		TopicName:       name,
		ReadQueueNums:   queues,
		WriteQueueNums:  queues,
		Perm:            PermRead | PermWrite,
		TopicFilterType: SingleTag,
		Attributes:      map[string]string{},
	}
}

// QueueCount returns the number of queues that hold data: the larger of the
// read and write counts.
func (t TopicConfig) QueueCount() int {
	return max(t.ReadQueueNums, t.WriteQueueNums)
}

// Compacted reports whether the topic asks for compaction by message key
// (attribute cleanup.policy=COMPACTION) rather than deletion by age.
func (t TopicConfig) Compacted() bool {
	return t.Attributes[AttrCleanupPolicy] == "COMPACTION"
}

// RetryGroupTopicPrefix and DLQGroupTopicPrefix name the per-group system
// topics.
const (
	RetryGroupTopicPrefix = "%RETRY%"
	DLQGroupTopicPrefix   = "%DLQ%"
)

// RetryTopic returns the retry topic of a consumer group.
func RetryTopic(group string) string { return RetryGroupTopicPrefix + group }

// DLQTopic returns the dead-letter topic of a consumer group.
func DLQTopic(group string) string { return DLQGroupTopicPrefix + group }

// IsRetryTopic reports whether topic is a %RETRY% topic.
func IsRetryTopic(topic string) bool { return strings.HasPrefix(topic, RetryGroupTopicPrefix) }

// RetryTopicGroup returns the consumer group a %RETRY% topic belongs to,
// as RocketMQ's KeyBuilder.parseGroup reads it: a POP retry topic of the
// second form, "%RETRY%group+topic", gives the group before the '+'; any
// other gives what follows the prefix (the whole "group_topic" of a first
// form POP retry topic, which names no group). The topic is assumed to
// carry the prefix (IsRetryTopic).
func RetryTopicGroup(retryTopic string) string {
	rest := strings.TrimPrefix(retryTopic, RetryGroupTopicPrefix)
	// Java splits on '+' and drops trailing empty parts; exactly two parts
	// make a second form name.
	parts := strings.Split(rest, "+")
	for len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) == 2 {
		return parts[0]
	}
	return rest
}

// IsDLQTopic reports whether topic is a %DLQ% topic.
func IsDLQTopic(topic string) bool { return strings.HasPrefix(topic, DLQGroupTopicPrefix) }

// LMQPrefix starts the names of light message queues (RocketMQ's LMQ):
// queues a message sent to another topic is also dispatched to (its
// INNER_MULTI_DISPATCH property names them). Each has one queue, id 0,
// no topic config, and is read like a topic of its own; a consumer group
// whose name has the prefix has no config either.
const LMQPrefix = "%LMQ%"

// IsLMQ reports whether a topic or group name is a light message queue's.
func IsLMQ(name string) bool { return strings.HasPrefix(name, LMQPrefix) }

// ValidLMQ reports whether name is a light message queue's that a
// message may be dispatched to: the prefix, at most 255 bytes of UTF-8,
// no '/' and no control character. RocketMQ dispatches to any name
// without a path separator: its MQTT bridge names a queue after the MQTT
// topic with '%' for '/' and keeps every other character
// ("%LMQ%home%temp.c"). The name becomes an index key and, in
// double-write, a directory of the file ConsumeQueue, which these rules
// keep inside consumequeue/ (the prefix rules out "." and "..").
func ValidLMQ(name string) bool {
	if !IsLMQ(name) || len(name) > 255 || !utf8.ValidString(name) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == '/' || c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// ValidTopicChars reports whether topic is not empty and made of the
// characters RocketMQ allows in topic names (^[%|a-zA-Z0-9_-]+$).
func ValidTopicChars(topic string) bool {
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '%' || c == '|' || c == '_' || c == '-') {
			return false
		}
	}
	return topic != ""
}

// TopicAllowsLMQ reports whether messages of topic are dispatched to the
// light message queues they name: not those of retry topics, system
// topics or SCHEDULE_TOPIC_XXXX (RocketMQ's MixAll.topicAllowsLMQ).
func TopicAllowsLMQ(topic string) bool {
	return !IsRetryTopic(topic) && !strings.HasPrefix(topic, "rmq_sys_") && topic != ScheduleTopic
}

// SubscriptionGroupConfig is RocketMQ's SubscriptionGroupConfig as JSON.
type SubscriptionGroupConfig struct {
	GroupName                      string            `json:"groupName"`
	ConsumeEnable                  bool              `json:"consumeEnable"`
	ConsumeFromMinEnable           bool              `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool              `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          bool              `json:"consumeMessageOrderly"`
	RetryQueueNums                 int               `json:"retryQueueNums"`
	RetryMaxTimes                  int               `json:"retryMaxTimes"`
	GroupRetryPolicy               *GroupRetryPolicy `json:"groupRetryPolicy,omitempty"`
	BrokerID                       int64             `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64             `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool              `json:"notifyConsumerIdsChangedEnable"`
	GroupSysFlag                   int               `json:"groupSysFlag"`
	ConsumeTimeoutMinute           int               `json:"consumeTimeoutMinute"`
	// SubscriptionDataSet lists the subscriptions a group was given
	// (RocketMQ 5's static subscriptions; kept and returned, not applied).
	SubscriptionDataSet []SimpleSubscriptionData `json:"subscriptionDataSet,omitempty"`
	Attributes          map[string]string        `json:"attributes"`
}

// SimpleSubscriptionData is one entry of a group's subscriptionDataSet.
type SimpleSubscriptionData struct {
	Topic          string `json:"topic"`
	ExpressionType string `json:"expressionType"`
	Expression     string `json:"expression"`
	Version        int64  `json:"version"`
}

// NewSubscriptionGroupConfig returns a group config with RocketMQ's
// defaults.
func NewSubscriptionGroupConfig(group string) SubscriptionGroupConfig {
	return SubscriptionGroupConfig{
		GroupName:                      group,
		ConsumeEnable:                  true,
		ConsumeFromMinEnable:           true,
		ConsumeBroadcastEnable:         true,
		RetryQueueNums:                 1,
		RetryMaxTimes:                  16,
		GroupRetryPolicy:               &GroupRetryPolicy{Type: "CUSTOMIZED"},
		WhichBrokerWhenConsumeSlowly:   1,
		NotifyConsumerIdsChangedEnable: true,
		ConsumeTimeoutMinute:           15,
		Attributes:                     map[string]string{},
	}
}

// DataVersion is RocketMQ's DataVersion: a timestamp and a counter bumped on
// every change, compared by name servers to skip unchanged registrations.
type DataVersion struct {
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"`
	Counter      int64 `json:"counter"`
}

// VersionCounter produces DataVersions safely from many goroutines.
type VersionCounter struct {
	counter   atomic.Int64
	timestamp atomic.Int64
}

// NewVersionCounter starts a counter at the given version (for example one
// loaded from disk).
func NewVersionCounter(start DataVersion) *VersionCounter {
	v := &VersionCounter{}
	v.counter.Store(start.Counter)
	ts := start.Timestamp
	if ts == 0 {
		ts = time.Now().UnixMilli()
	}
	v.timestamp.Store(ts)
	return v
}

// Bump records a change and returns the new version.
func (v *VersionCounter) Bump() DataVersion {
	c := v.counter.Add(1)
	ts := time.Now().UnixMilli()
	v.timestamp.Store(ts)
	return DataVersion{Timestamp: ts, Counter: c}
}

// Set makes d the current version (a slave taking over its master's,
// RocketMQ's DataVersion.assignNewOne). StateVersion is not kept.
func (v *VersionCounter) Set(d DataVersion) {
	v.counter.Store(d.Counter)
	v.timestamp.Store(d.Timestamp)
}

// Current returns the current version.
func (v *VersionCounter) Current() DataVersion {
	return DataVersion{Timestamp: v.timestamp.Load(), Counter: v.counter.Load()}
}

// ScheduleTopic is where RocketMQ parks messages sent with a delay level:
// queue level-1, tagsCode = delivery time.
const ScheduleTopic = "SCHEDULE_TOPIC_XXXX"

// ScheduleOffsetGroup is the consumer-offset group under which the broker
// keeps, per delay level, the next SCHEDULE_TOPIC_XXXX offset to deliver
// (queue level-1): RocketMQ's delayOffset.json.
const ScheduleOffsetGroup = "rmq_sys_SCHEDULE_OFFSET"

// TimerTopic is where RocketMQ 5 parks timer messages (TIMER_DELIVER_MS,
// TIMER_DELAY_SEC, TIMER_DELAY_MS) until they are due, in queue 0.
const TimerTopic = "rmq_sys_wheel_timer"

// Transaction system topics: half messages wait in TransHalfTopic queue 0
// until their transaction ends; TransCheckMaxTopic receives the halves
// given up after transactionCheckMax checks. RocketMQ writes its op
// messages to TransOpHalfTopic; rocketkv keeps that state in the index
// and writes an op message there for every end all the same (a give-up's
// too), refusing producers' sends to the name.
const (
	TransHalfTopic     = "RMQ_SYS_TRANS_HALF_TOPIC"
	TransOpHalfTopic   = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	TransCheckMaxTopic = "TRANS_CHECK_MAX_TIME_TOPIC"
)

// IsSystemTopic reports whether RocketMQ's TopicValidator counts topic as
// a system topic whatever the broker: TBW102, the schedule, transaction,
// trace, benchmark, self-test and offset-moved topics, the RocksDB
// offsets' CHECKPOINT_TOPIC, and every rmq_sys_ topic. (A broker also
// counts its cluster's and its own name, and its trace and reply topics.)
func IsSystemTopic(topic string) bool {
	switch topic {
	case "TBW102", ScheduleTopic, "BenchmarkTest", TransHalfTopic, "RMQ_SYS_TRACE_TOPIC", TransOpHalfTopic,
		TransCheckMaxTopic, "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC":
		return true
	}
	return strings.HasPrefix(topic, "rmq_sys_")
}

// IsSystemGroup reports whether group is one of RocketMQ's own consumer
// groups (CID_RMQ_SYS_..., MixAll.isSysConsumerGroup), which clients may
// not use.
func IsSystemGroup(group string) bool { return strings.HasPrefix(group, "CID_RMQ_SYS_") }

// IsPredefinedGroup reports whether group is one of the group names
// RocketMQ's clients and tools use for themselves (MixAll's
// PREDEFINE_GROUP_SET: DEFAULT_CONSUMER, TOOLS_CONSUMER, CID_RMQ_SYS_TRANS,
// ...), which mqadmin leaves out of a broker's user groups.
func IsPredefinedGroup(group string) bool {
	switch group {
	case "DEFAULT_CONSUMER", "DEFAULT_PRODUCER", "TOOLS_CONSUMER", "SCHEDULE_CONSUMER", "FILTERSRV_CONSUMER",
		"__MONITOR_CONSUMER", "CLIENT_INNER_PRODUCER", "SELF_TEST_P_GROUP", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
		"CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL", "CID_RMQ_SYS_TRANS":
		return true
	}
	return false
}

// DefaultMessageDelayLevel is RocketMQ's messageDelayLevel.
const DefaultMessageDelayLevel = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

// ParseDelayLevels parses a messageDelayLevel string: space-separated
// durations with unit s, m, h or d; level i (1-based) is element i-1.
func ParseDelayLevels(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Fields(s) {
		if len(f) < 2 {
			return nil, fmt.Errorf("delay level %q: want a number and a unit (s, m, h, d)", f)
		}
		n, err := strconv.ParseInt(f[:len(f)-1], 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("delay level %q: want a number and a unit (s, m, h, d)", f)
		}
		unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[f[len(f)-1]]
		if unit == 0 {
			return nil, fmt.Errorf("delay level %q: unknown unit %q", f, f[len(f)-1:])
		}
		out = append(out, time.Duration(n)*unit)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("messageDelayLevel %q names no level", s)
	}
	return out, nil
}

// DelayMillis returns the delay of a level as RocketMQ computes the
// delivery time of a SCHEDULE_TOPIC_XXXX message: levels above the last are
// clamped to it, unknown (< 1) levels mean 1000 ms.
func DelayMillis(levels []time.Duration, level int) int64 {
	if level < 1 || len(levels) == 0 {
		return 1000
	}
	if level > len(levels) {
		level = len(levels)
	}
	return levels[level-1].Milliseconds()
}
