package broker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqpop"
	"github.com/rocketkv/rocketkv/namesrv"
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

// validateTopicName applies RocketMQ's topic rules (TopicValidator, in its
// order and with its remarks): not blank, the allowed characters,
// at most 127 bytes (255 for %RETRY% and %DLQ% topics). It returns the
// remark of the refusal, or "".
func validateTopicName(topic string) string {
	if strings.TrimSpace(topic) == "" {
		return "The specified topic is blank."
	}
	if !meta.ValidTopicChars(topic) {
		return "The specified topic: " + topic + ", contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
	}
	if meta.IsRetryTopic(topic) || meta.IsDLQTopic(topic) {
		if len(topic) > 255 {
			return "The specified topic is DLQ or Retry topic: " + topic + ", and it's longer than topic max length: 255"
		}
	} else if len(topic) > 127 {
		return "The specified topic: " + topic + ", is longer than topic max length: 127"
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
	// deleting counts the deletions under way of each topic (guarded by
	// create): no config of such a topic is written until they end.
	deleting map[string]int
}

// errTopicBeingDeleted is the error of a creation or change of a topic
// whose deletion is under way.
var errTopicBeingDeleted = errors.New("the topic is being deleted; create it again once the deletion ends")

// beginDeletion marks topic as being deleted until endDeletion: from now
// on no request creates or changes its config. The deletion's later steps
// would otherwise drop what a topic created again under the name received
// meanwhile (a send answered SEND_OK, its message never indexed), and a
// crash between them would leave that topic the old one's queues and
// offsets (completeTopicDeletions keeps a topic that exists).
func (m *topicManager) beginDeletion(topic string) {
	m.create.Lock()
	defer m.create.Unlock()
	if m.deleting == nil {
		m.deleting = map[string]int{}
	}
	m.deleting[topic]++
}

// endDeletion ends what beginDeletion began, whether the deletion
// succeeded or not.
func (m *topicManager) endDeletion(topic string) {
	m.create.Lock()
	defer m.create.Unlock()
	if m.deleting[topic]--; m.deleting[topic] <= 0 {
		delete(m.deleting, topic)
	}
}

func newTopicManager(b *Broker) (*topicManager, error) {
	t, err := b.db.Topics(b.cfg.TopicConfigCacheSize)
	if err != nil {
		return nil, err
	}
	return &topicManager{b: b, table: t}, nil
}

func (m *topicManager) get(topic string) (meta.TopicConfig, bool, error) {
	if m.b.lmqName(topic) {
		return lmqTopicConfig(topic), true, nil
	}
	return m.table.Get(topic)
}

// lmqTopicConfig is the config a light message queue has under enableLmq,
// never stored: one queue, readable and writable (RocketMQ's
// LmqTopicConfigManager).
func lmqTopicConfig(topic string) meta.TopicConfig {
	tc := meta.NewTopicConfig(topic, 1)
	tc.Perm = meta.PermRead | meta.PermWrite
	return tc
}

// dataVersion is the data version of the topic table as the broker's
// registrations and its QUERY_DATA_VERSION heartbeats carry it.
func (m *topicManager) dataVersion() namesrv.DataVersion {
	ver := m.table.Version()
	return namesrv.DataVersion{Counter: ver.Counter, Timestamp: ver.Timestamp}
}

// topicConfigDefaultQueueNums is the queue count of a RocketMQ
// TopicConfig that sets none (its defaultReadQueueNums and
// defaultWriteQueueNums).
const topicConfigDefaultQueueNums = 16

// benchmarkTopic is RocketMQ's RMQ_SYS_BENCHMARK_TOPIC, created at start
// with benchmarkQueueNums queues as RocketMQ's TopicConfigManager does.
const (
	benchmarkTopic     = "BenchmarkTest"
	benchmarkQueueNums = 1024
)

// ensureSystemTopics creates the topics RocketMQ's broker creates at start
// (TopicConfigManager's constructor) when they are missing, with its
// queue counts and permissions: besides those above, the cluster's revive
// topic (which rocketkv writes to only for POP_ROLLBACK: its checkpoints
// live in the index), the topic whose route tells an acting-master
// group's members about each other (compatibleWithOldNameSrv), the two
// transaction topics, and under timerWheelEnable the timer's topic, so
// that topic lists and routes show what RocketMQ's do. A topic that
// exists keeps its queues, as RocketMQ's stored topics replace the ones
// it makes at start (only the permissions set below change).
func (m *topicManager) ensureSystemTopics() error {
	cfg := m.b.cfg
	want := []meta.TopicConfig{
		meta.NewTopicConfig(selfTestTopic, 1),
		meta.NewTopicConfig(offsetMovedTopic, 1),
		meta.NewTopicConfig(meta.ScheduleTopic, scheduleQueueNums),
		meta.NewTopicConfig(m.b.replyTopic(), 1),
		// The default topic of RocketMQ's benchmark producer.
		meta.NewTopicConfig(benchmarkTopic, benchmarkQueueNums),
		// RocketMQ gives it reviveQueueNum queues; that key is inert
		// here and its default is the count rocketkv uses.
		meta.NewTopicConfig(rmqpop.TopicPrefix+cfg.BrokerClusterName, reviveQueueNum),
		meta.NewTopicConfig(meta.TransHalfTopic, 1),
		meta.NewTopicConfig(meta.TransOpHalfTopic, 1),
	}
	// Inheritable only: neither read nor written, only routed.
	members := meta.NewTopicConfig(namesrv.SyncBrokerMemberGroupPrefix+cfg.BrokerName, 1)
	members.Perm = meta.PermInherit
	want = append(want, members)
	if cfg.TimerWheelEnable {
		want = append(want, meta.NewTopicConfig(meta.TimerTopic, 1))
	}
	// The topics named after the cluster and the broker (templates of
	// topics created on send) are readable and writable only with
	// clusterTopicEnable and brokerTopicEnable; RocketMQ sets their
	// permission at each start.
	// The cluster's topic keeps the queue count of RocketMQ's TopicConfig
	// (16), which its TopicConfigManager does not set; the broker's has 1.
	cluster := meta.NewTopicConfig(cfg.BrokerClusterName, topicConfigDefaultQueueNums)
	cluster.Perm = nameTopicPerm(cfg.ClusterTopicEnable)
	brokerT := meta.NewTopicConfig(cfg.BrokerName, 1)
	brokerT.Perm = nameTopicPerm(cfg.BrokerTopicEnable)
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
	var changed []meta.TopicConfig
	for _, tc := range want {
		have, ok, err := m.table.Get(tc.TopicName)
		if err != nil {
			return fmt.Errorf("system topic %s: %w", tc.TopicName, err)
		}
		switch {
		case !ok:
			changed = append(changed, tc)
		case (tc.TopicName == cluster.TopicName || tc.TopicName == brokerT.TopicName) && have.Perm != tc.Perm:
			have.Perm = tc.Perm
			changed = append(changed, have)
		}
	}
	if !cfg.AutoCreateTopicEnable {
		// RocketMQ keeps TBW102 but takes away its inheritance, so sends
		// to unknown topics fail with TOPIC_NOT_EXIST.
		if tbw, ok, err := m.table.Get(autoCreateTopic); err == nil && ok && meta.Inheritable(tbw.Perm) {
			tbw.Perm = meta.PermRead | meta.PermWrite
			changed = append(changed, tbw)
		}
	}
	if err := m.table.Put(changed...); err != nil {
		return fmt.Errorf("create system topics: %w", err)
	}
	return nil
}

// nameTopicPerm is the permission of the topic named after the cluster or
// the broker: inheritable always, readable and writable when enabled.
func nameTopicPerm(enabled bool) int {
	if enabled {
		return meta.PermInherit | meta.PermRead | meta.PermWrite
	}
	return meta.PermInherit
}

// put creates or replaces topic configs and schedules a registration.
func (m *topicManager) put(cfgs ...meta.TopicConfig) error {
	if err := m.table.Put(cfgs...); err != nil {
		return err
	}
	m.b.compactionTopicsChanged(cfgs)
	if m.b.register != nil {
		m.b.register.trigger()
	}
	return nil
}

// createOrUpdate stores topic configs whose Attributes are RocketMQ
// attribute modifications ("+key", "-key"): each config's attributes
// become its topic's current ones with the modifications applied
// (meta.AlterAttributes), unless one of them is refused; then nothing is
// stored and the refusal is returned. A config equal to the stored one
// (sameTopicConfig) is left out, as RocketMQ's updateAndCreateTopic
// answers it without a change, and so is a light message queue's (its
// config is fixed); stored is how many configs were written, each table
// write moving the data version and scheduling a registration. It holds
// the get-or-create lock, so that changes of one topic apply one after
// the other (RocketMQ's updateAndCreateTopic is synchronized). Configs
// are stored in chunks of 10,000 (a bulk creation of a million topics).
func (m *topicManager) createOrUpdate(cfgs []meta.TopicConfig) (stored int, refusal string, err error) {
	m.create.Lock()
	defer m.create.Unlock()
	// As RocketMQ: a light message queue keeps its fixed config (one
	// queue); an update of it is answered and dropped.
	cfgs = slices.DeleteFunc(slices.Clone(cfgs), func(tc meta.TopicConfig) bool { return m.b.lmqName(tc.TopicName) })
	for _, tc := range cfgs {
		if m.deleting[tc.TopicName] > 0 {
			return 0, fmt.Sprintf("topic %s: %v", tc.TopicName, errTopicBeingDeleted), nil
		}
	}
	current, err := m.currentConfigs(cfgs)
	if err != nil {
		return 0, "", err
	}
	changing := map[string]bool{} // stored topics an earlier config of cfgs changes
	var unchanged []string
	cfgs = slices.DeleteFunc(cfgs, func(tc meta.TopicConfig) bool {
		cur, exists := current[tc.TopicName]
		if !exists {
			return false
		}
		if !changing[tc.TopicName] && sameTopicConfig(tc, cur) {
			unchanged = append(unchanged, tc.TopicName)
			return true
		}
		changing[tc.TopicName] = true
		return false
	})
	if len(unchanged) > 0 {
		// One line per request: a bulk request may name a million topics.
		m.b.log.Info().Int("topics", len(unchanged)).Strs("first", unchanged[:min(len(unchanged), 10)]).
			Msg("topic configs have no changes, so idempotent: not stored")
	}
	for i := range cfgs {
		tc := &cfgs[i]
		cur, exists := current[tc.TopicName]
		attrs, refusal := meta.AlterAttributes(!exists, meta.TopicAttributes, cur.Attributes, tc.Attributes)
		if refusal != "" {
			return 0, refusal, nil
		}
		tc.Attributes = attrs
		// A later config of the same topic in the list alters this one's
		// attributes, as RocketMQ applies a list's configs one by one.
		current[tc.TopicName] = *tc
	}
	const chunk = 10000
	for i := 0; i < len(cfgs); i += chunk {
		if err := m.put(cfgs[i:min(i+chunk, len(cfgs))]...); err != nil {
			return 0, "", err
		}
	}
	return len(cfgs), "", nil
}

// currentConfigs reads the stored configs of the topics cfgs name, those
// that exist. A bulk request reads them in one pass over the table
// instead of one point read each (kvindex.ConfigTable.GetMany).
func (m *topicManager) currentConfigs(cfgs []meta.TopicConfig) (map[string]meta.TopicConfig, error) {
	names := make([]string, len(cfgs))
	for i := range cfgs {
		names[i] = cfgs[i].TopicName
	}
	if len(cfgs) >= bulkReadMin {
		stored, err := m.table.GetMany(names)
		if err != nil {
			return nil, fmt.Errorf("read %d topic configs: %w", len(names), err)
		}
		return stored, nil
	}
	stored := make(map[string]meta.TopicConfig, len(names))
	for _, name := range names {
		tc, ok, err := m.table.Get(name)
		if err != nil {
			return nil, fmt.Errorf("read topic config %s: %w", name, err)
		}
		if ok {
			stored[name] = tc
		}
	}
	return stored, nil
}

// sameTopicConfig reports whether the config of an update request equals
// the stored one the way RocketMQ's TopicConfig.equals compares them in
// AdminBrokerProcessor.updateAndCreateTopic(List): every field, the
// request's attributes (modifications: "+key", "-key") as a map against
// the stored attributes (plain keys). A request that carries an attribute
// modification therefore never equals a stored config, nor does one
// without modifications a topic that has attributes; those take the
// update path as in RocketMQ, which applies and checks them.
func sameTopicConfig(req, stored meta.TopicConfig) bool {
	return req.TopicName == stored.TopicName &&
		req.ReadQueueNums == stored.ReadQueueNums && req.WriteQueueNums == stored.WriteQueueNums &&
		req.Perm == stored.Perm && req.TopicFilterType == stored.TopicFilterType &&
		req.TopicSysFlag == stored.TopicSysFlag && req.Order == stored.Order &&
		maps.Equal(req.Attributes, stored.Attributes)
}

// markOrderTopics applies the ORDER_TOPIC_CONFIG table a name server
// answered a registration with, as RocketMQ's
// TopicConfigManager.updateOrderTopicConfig: each topic of the table
// the broker has that is not ordered becomes ordered; topics outside the
// table keep their flag and topics the broker lacks are not created. The
// changed configs are stored in one synced batch, which moves the data
// version once; nothing is written when nothing changed. Like RocketMQ it
// does not register again: the next registration carries the change.
func (m *topicManager) markOrderTopics(table map[string]string) error {
	if len(table) == 0 {
		return nil
	}
	names := make([]string, 0, len(table))
	for name := range table {
		if !m.b.lmqName(name) {
			names = append(names, name)
		}
	}
	// Under the get-or-create lock: an admin update of one of these
	// topics is not lost between the read and the write below.
	m.create.Lock()
	defer m.create.Unlock()
	stored, err := m.table.GetMany(names)
	if err != nil {
		return fmt.Errorf("read the order topics of the name server: %w", err)
	}
	var changed []meta.TopicConfig
	for _, tc := range stored {
		if !tc.Order && m.deleting[tc.TopicName] == 0 {
			tc.Order = true
			changed = append(changed, tc)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	slices.SortFunc(changed, func(a, b meta.TopicConfig) int { return strings.Compare(a.TopicName, b.TopicName) })
	if err := m.table.Put(changed...); err != nil {
		return fmt.Errorf("mark %d topics ordered: %w", len(changed), err)
	}
	for _, tc := range changed {
		m.b.log.Info().Str("topic", tc.TopicName).Msg("topic ordered by the name server's ORDER_TOPIC_CONFIG")
	}
	return nil
}

// bulkReadMin is the size from which createOrUpdate reads the topics of
// a request with one iterator rather than a cached point read each.
const bulkReadMin = 64

// mixedRefusal is RocketMQ's answer to a topic created or changed to the
// MIXED message type while enableMixedMessageType is off (its default).
const mixedRefusal = "MIXED message type is not supported."

// refusesMixedType reports whether attribute modifications set the MIXED
// message type while enableMixedMessageType is off.
func (b *Broker) refusesMixedType(mods map[string]string) bool {
	return !b.current().EnableMixedMessageType && mods["+"+meta.AttrMessageType] == "MIXED"
}

// createOnSend returns the config of topic, creating it from the template
// topic when it does not exist, as RocketMQ's
// createTopicInSendMessageMethod; a retry topic the template cannot give
// still gets one queue. It answers the code and remark of a refusal.
func (m *topicManager) createOnSend(topic, template string, queueNums int) (meta.TopicConfig, int32, string) {
	if tc, ok, err := m.get(topic); err != nil { // a light message queue's fixed config included
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
	if m.deleting[topic] > 0 {
		return meta.TopicConfig{}, remoting.TopicNotExist, fmt.Sprintf("topic[%s] is being deleted, send again once the deletion ends", topic)
	}
	if template == "" {
		template = autoCreateTopic
	}
	tpl, ok, err := m.table.Get(template)
	if err != nil {
		return tpl, remoting.SystemError, err.Error()
	}
	if !ok || !meta.Inheritable(tpl.Perm) {
		if meta.IsRetryTopic(topic) {
			// A retry topic the template cannot give gets one queue,
			// as RocketMQ's createTopicInSendMessageBackMethod.
			tc := meta.NewTopicConfig(topic, 1)
			if err := m.put(tc); err != nil {
				return tc, remoting.SystemError, err.Error()
			}
			return tc, remoting.Success, ""
		}
		return tpl, remoting.TopicNotExist, fmt.Sprintf("topic[%s] not exist, apply first please!%s", topic, faqSuggestion)
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

// ensureSendBackTopic is ensureSystemTopic for a group's retry and DLQ
// topics as RocketMQ's createTopicInSendMessageBackMethod gives them: a
// topic it creates has order as its order flag, and an existing one whose
// order flag is not order takes it. That change moves the data version,
// so the next registration carries it, but schedules none at once (no
// route has an order flag), as RocketMQ's updateTopicConfig.
func (m *topicManager) ensureSendBackTopic(topic string, queues, perm int, order bool) (meta.TopicConfig, error) {
	tc, ok, err := m.table.Get(topic)
	if err != nil {
		return tc, err
	}
	if ok && tc.Order == order {
		return tc, nil
	}
	m.create.Lock()
	defer m.create.Unlock()
	tc, ok, err = m.table.Get(topic)
	switch {
	case err != nil:
		return tc, err
	case ok && tc.Order == order:
		return tc, nil
	case ok:
		tc.Order = order
		if err := m.table.Put(tc); err != nil {
			return tc, fmt.Errorf("set order of topic %s to %v: %w", topic, order, err)
		}
		m.b.log.Info().Str("topic", topic).Bool("order", order).Msg("order flag of a retry or DLQ topic changed")
		return tc, nil
	case m.deleting[topic] > 0:
		return meta.TopicConfig{}, fmt.Errorf("create topic %s: %w", topic, errTopicBeingDeleted)
	}
	tc = meta.NewTopicConfig(topic, queues)
	tc.Perm, tc.Order = perm, order
	return tc, m.put(tc)
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
	if m.deleting[topic] > 0 {
		return meta.TopicConfig{}, fmt.Errorf("create topic %s: %w", topic, errTopicBeingDeleted)
	}
	tc := meta.NewTopicConfig(topic, queues)
	tc.Perm = perm
	return tc, m.put(tc)
}
