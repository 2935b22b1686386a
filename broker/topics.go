package broker

import (
	"fmt"
	"sync"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// Topic names with a meaning to the broker.
const (
	autoCreateTopic   = "TBW102"
	selfTestTopic     = "SELF_TEST_TOPIC"
	offsetMovedTopic  = "OFFSET_MOVED_EVENT"
	scheduleQueueNums = 18
)

// notSendable are the system topics clients may not send to (RocketMQ
// answers NO_PERMISSION).
var notSendable = map[string]bool{
	meta.ScheduleTopic: true, meta.TransHalfTopic: true, meta.TransOpHalfTopic: true,
	meta.TransCheckMaxTopic: true, selfTestTopic: true, offsetMovedTopic: true,
}

// validTopicChars reports whether topic matches RocketMQ's
// ^[%|a-zA-Z0-9_-]+$ (a loop: this runs on every send).
func validTopicChars(topic string) bool {
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '%' || c == '|' || c == '_' || c == '-') {
			return false
		}
	}
	return topic != ""
}

// validateTopicName applies RocketMQ's topic rules: the allowed characters,
// at most 127 bytes (255 for %RETRY% and %DLQ% topics). It returns the
// remark of the refusal, or "".
func validateTopicName(topic string) string {
	if topic == "" {
		return "The specified topic is blank."
	}
	limit := 127
	if meta.IsRetryTopic(topic) || meta.IsDLQTopic(topic) {
		limit = 255
	}
	if len(topic) > limit {
		return fmt.Sprintf("The specified topic is longer than topic max length %d.", limit)
	}
	if !validTopicChars(topic) {
		return fmt.Sprintf("The specified topic[%s] contains illegal characters, allowing only ^[%%|a-zA-Z0-9_-]+$", topic)
	}
	return ""
}

// topicManager owns topic configs: the Pebble table with its bounded cache,
// the system topics, auto-creation, and telling the registrar about
// changes.
type topicManager struct {
	b      *Broker
	table  *kvindex.Topics
	create sync.Mutex // serialises get-or-create
}

func newTopicManager(b *Broker) (*topicManager, error) {
	t, err := b.db.Topics(b.cfg.TopicConfigCacheSize)
	if err != nil {
		return nil, err
	}
	return &topicManager{b: b, table: t}, nil
}

func (m *topicManager) get(topic string) (meta.TopicConfig, bool, error) {
	return m.table.Get(topic)
}

// ensureSystemTopics creates the topics RocketMQ's broker creates at start
// when they are missing.
func (m *topicManager) ensureSystemTopics() error {
	cfg := m.b.cfg
	want := []meta.TopicConfig{
		meta.NewTopicConfig(selfTestTopic, 1),
		meta.NewTopicConfig(offsetMovedTopic, 1),
		meta.NewTopicConfig(meta.ScheduleTopic, scheduleQueueNums),
		meta.NewTopicConfig(m.b.replyTopic(), 1),
	}
	cluster := meta.NewTopicConfig(cfg.BrokerClusterName, 1)
	cluster.Perm = meta.PermInherit | meta.PermRead | meta.PermWrite
	brokerT := meta.NewTopicConfig(cfg.BrokerName, 1)
	brokerT.Perm = meta.PermInherit | meta.PermRead | meta.PermWrite
	want = append(want, cluster, brokerT)
	if cfg.TraceTopicEnable {
		if remark := validateTopicName(cfg.MsgTraceTopicName); remark != "" {
			return fmt.Errorf("msgTraceTopicName %q: %s", cfg.MsgTraceTopicName, remark)
		}
		want = append(want, meta.NewTopicConfig(cfg.MsgTraceTopicName, 1))
	}
	if cfg.AutoCreateTopicEnable {
		tbw := meta.NewTopicConfig(autoCreateTopic, cfg.DefaultTopicQueueNums)
		tbw.Perm = meta.PermInherit | meta.PermRead | meta.PermWrite
		want = append(want, tbw)
	}
	var missing []meta.TopicConfig
	for _, tc := range want {
		_, ok, err := m.table.Get(tc.TopicName)
		if err != nil {
			return fmt.Errorf("system topic %s: %w", tc.TopicName, err)
		}
		if !ok {
			missing = append(missing, tc)
		}
	}
	if !cfg.AutoCreateTopicEnable {
		// RocketMQ keeps TBW102 but takes away its inheritance, so sends
		// to unknown topics fail with TOPIC_NOT_EXIST.
		if tbw, ok, err := m.table.Get(autoCreateTopic); err == nil && ok && meta.Inheritable(tbw.Perm) {
			tbw.Perm = meta.PermRead | meta.PermWrite
			missing = append(missing, tbw)
		}
	}
	if err := m.table.Put(missing...); err != nil {
		return fmt.Errorf("create system topics: %w", err)
	}
	return nil
}

// put creates or replaces topic configs and schedules a registration.
func (m *topicManager) put(cfgs ...meta.TopicConfig) error {
	if err := m.table.Put(cfgs...); err != nil {
		return err
	}
	if m.b.register != nil {
		m.b.register.trigger()
	}
	return nil
}

// createOnSend returns the config of topic, creating it from the template
// topic when it does not exist, as RocketMQ's
// createTopicInSendMessageMethod. It answers the code and remark of a
// refusal.
func (m *topicManager) createOnSend(topic, template string, queueNums int) (meta.TopicConfig, int32, string) {
	if tc, ok, err := m.table.Get(topic); err != nil {
		return tc, remoting.SystemError, err.Error()
	} else if ok {
		return tc, remoting.Success, ""
	}
	m.create.Lock()
	defer m.create.Unlock()
	if tc, ok, err := m.table.Get(topic); err != nil {
		return tc, remoting.SystemError, err.Error()
	} else if ok {
		return tc, remoting.Success, ""
	}
	if meta.IsRetryTopic(topic) {
		tc := meta.NewTopicConfig(topic, 1)
		if err := m.put(tc); err != nil {
			return tc, remoting.SystemError, err.Error()
		}
		return tc, remoting.Success, ""
	}
	if template == "" {
		template = autoCreateTopic
	}
	tpl, ok, err := m.table.Get(template)
	if err != nil {
		return tpl, remoting.SystemError, err.Error()
	}
	if !ok || !meta.Inheritable(tpl.Perm) {
		return tpl, remoting.TopicNotExist, fmt.Sprintf("topic[%s] not exist, apply first please!", topic)
	}
	if queueNums <= 0 || queueNums > tpl.WriteQueueNums {
		queueNums = tpl.WriteQueueNums
	}
	tc := meta.NewTopicConfig(topic, queueNums)
	tc.Perm = tpl.Perm &^ meta.PermInherit
	tc.TopicFilterType = tpl.TopicFilterType
	if err := m.put(tc); err != nil {
		return tc, remoting.SystemError, err.Error()
	}
	m.b.log.Info().Str("topic", topic).Int("queues", queueNums).Str("template", template).Msg("topic auto-created on send")
	return tc, remoting.Success, ""
}

// ensureSystemTopic returns a broker-internal topic (retry, DLQ,
// transaction), creating it with the given queue count.
func (m *topicManager) ensureSystemTopic(topic string, queues, perm int) (meta.TopicConfig, error) {
	if tc, ok, err := m.table.Get(topic); err != nil || ok {
		return tc, err
	}
	m.create.Lock()
	defer m.create.Unlock()
	if tc, ok, err := m.table.Get(topic); err != nil || ok {
		return tc, err
	}
	tc := meta.NewTopicConfig(topic, queues)
	tc.Perm = perm
	return tc, m.put(tc)
}
