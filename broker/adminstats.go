package broker

// Statistics and connection queries of the admin tools: mqadmin
// topicStatus, consumerProgress, consumerConnection, producerConnection,
// producer, topicConsumeByWho and the RocketMQ dashboard ask a broker
// these.
//
// TopicStatsTable and ConsumeStats are written in fastjson's object-keyed
// map form (internal/adminbody); the connection and group list bodies are
// plain JSON with properties in alphabetical order, as fastjson writes
// them.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// requiredField reads a header field that must be present and not empty;
// otherwise it returns the SYSTEM_ERROR response naming the field.
func requiredField(req *remoting.Command, key string) (string, *remoting.Command) {
	v, err := remoting.Header(req.ExtFields).String(key)
	if err != nil {
		return "", remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if v == "" {
		return "", remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("header field %q: empty", key))
	}
	return v, nil
}

// requiredFields reads several required header fields, in order, or
// returns the refusal naming the first missing one.
func requiredFields(req *remoting.Command, keys ...string) ([]string, *remoting.Command) {
	out := make([]string, len(keys))
	for i, k := range keys {
		v, bad := requiredField(req, k)
		if bad != nil {
			return nil, bad
		}
		out[i] = v
	}
	return out, nil
}

// storeTimeAt returns the store time (ms) of the message at a queue offset.
// ok is false when the queue does not hold that offset, or its record went
// with a deleted CommitLog segment.
func (b *Broker) storeTimeAt(topic string, queueID int32, offset int64) (ts int64, ok bool, err error) {
	entries, err := b.cqs.Get(topic, queueID, offset, 1)
	if err != nil {
		return 0, false, fmt.Errorf("read %s/%d at %d: %w", topic, queueID, offset, err)
	}
	if len(entries) == 0 {
		return 0, false, nil
	}
	if ts := entries[0].StoreTimestamp; ts > 0 {
		return ts, true, nil
	}
	// The file ConsumeQueue keeps no store time: read the record.
	ts, err = b.storeTimeOf(entries[0].PhyOffset, entries[0].Size)
	if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store time of %s/%d at %d: %w", topic, queueID, offset, err)
	}
	return ts, true, nil
}

// processTopicStats answers GET_TOPIC_STATS_INFO: the offset range of every
// queue of a topic and the store time of its newest message, and the
// rate of puts to the topic over the last minute (topicPutTps).
func (b *Broker) processTopicStats(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, bad := requiredField(req, "topic")
	if bad != nil {
		return bad
	}
	tc, ok, err := b.topicConfig(topic)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("read config of topic %s: %v", topic, err))
	}
	if !ok {
		return remoting.NewResponse(req, remoting.TopicNotExist, "topic["+topic+"] not exist")
	}
	table := make(map[adminbody.MessageQueue]adminbody.TopicOffset)
	for q := int32(0); q < int32(max(tc.WriteQueueNums, tc.ReadQueueNums)); q++ {
		off, err := b.topicOffset(topic, q)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		table[adminbody.MessageQueue{BrokerName: b.cfg.BrokerName, QueueID: q, Topic: topic}] = off
	}
	// topicPutTps is RocketMQ 5.3's brokerStatsManager.tpsTopicPutNums:
	// the topic's TOPIC_PUT_NUMS rate over the last minute.
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = adminbody.EncodeTopicStats(table, b.stats.TopicPutTPS(topic))
	return resp
}

// topicOffset is one queue's row of a TopicStatsTable. The last update
// time is that of the message at maxOffset-1, 0 when the queue is empty or
// no longer holds that message (RocketMQ's store answers -1 there).
func (b *Broker) topicOffset(topic string, q int32) (adminbody.TopicOffset, error) {
	minOff, maxOff, err := b.queueRange(topic, q)
	if err != nil {
		return adminbody.TopicOffset{}, err
	}
	out := adminbody.TopicOffset{MinOffset: max(minOff, 0), MaxOffset: max(maxOff, 0)}
	if out.MaxOffset > 0 {
		ts, _, err := b.storeTimeAt(topic, q, out.MaxOffset-1)
		if err != nil {
			return adminbody.TopicOffset{}, err
		}
		out.LastUpdateTimestamp = ts
	}
	return out, nil
}

// processConsumeStats answers GET_CONSUME_STATS: per queue of the selected
// topics, the queue's end and the group's committed offset, and the rate
// at which the group got messages of them over the last minute.
func (b *Broker) processConsumeStats(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group, bad := requiredField(req, "consumerGroup")
	if bad != nil {
		return bad
	}
	topics, err := b.consumeStatsTopics(group, remoting.Header(req.ExtFields))
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	table := make(map[adminbody.MessageQueue]adminbody.OffsetWrapper)
	var tps float64
	for _, topic := range topics {
		tc, ok, err := b.topicConfig(topic)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("read config of topic %s: %v", topic, err))
		}
		if !ok {
			b.log.Warn().Str("group", group).Str("topic", topic).Msg("consume stats: topic does not exist, skipped")
			continue
		}
		if err := b.addConsumeStats(table, group, topic, tc.ReadQueueNums); err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		tps += b.stats.GroupTPS(group, topic)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = adminbody.EncodeConsumeStats(table, tps)
	return resp
}

// consumeStatsTopics selects the topics of a GET_CONSUME_STATS request:
// topicList when given (exactly those, separated by ';'), else topic, else every topic the
// group committed offsets on. Without a topicList, a group with live
// subscriptions keeps only the topics it subscribes to.
func (b *Broker) consumeStatsTopics(group string, h remoting.Header) ([]string, error) {
	// Split on ';' as RocketMQ's fetchTopicList, and as the permission
	// check reads the field (authRules): every topic it answers for was
	// checked.
	if list := splitNames(h.OptString("topicList", ""), ";"); len(list) > 0 {
		return list, nil
	}
	var topics []string
	if t := h.OptString("topic", ""); t != "" {
		topics = []string{t}
	} else {
		var err error
		if topics, err = b.topicsWithOffsets(group); err != nil {
			return nil, err
		}
	}
	subscribed, live := b.clients.subscribedTopics(group)
	if !live {
		return topics, nil
	}
	kept := topics[:0]
	for _, t := range topics {
		if subscribed[t] {
			kept = append(kept, t)
		}
	}
	return kept, nil
}

// splitTopicList reads a comma list (the ACL requests' topic lists). Blanks are
// dropped; a list written as Java's List.toString ("[a, b]") reads the
// same (topic names cannot hold brackets or commas).
func splitTopicList(s string) []string {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// topicsWithOffsets returns the topics a group committed offsets on,
// sorted (the offset keys are ordered by group, then topic), on a slave
// those of its own entries too.
func (b *Broker) topicsWithOffsets(group string) ([]string, error) {
	var topics []string
	err := b.offsets.Each(group, func(u kvindex.OffsetUpdate) bool {
		if len(topics) == 0 || topics[len(topics)-1] != u.Topic {
			topics = append(topics, u.Topic)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("list offsets of group %s: %w", group, err)
	}
	if svc := b.popSvc; svc != nil && b.isSlave() {
		// The topics of the slave's own entries: one table on
		// RocketMQ's slave (consumerOffset).
		if own := svc.SlaveOffsetTopics(group); len(own) > 0 {
			topics = append(topics, own...)
			slices.Sort(topics)
			topics = slices.Compact(topics)
		}
	}
	return topics, nil
}

// addConsumeStats adds the rows of one topic's read queues to table.
// pullOffset is, as RocketMQ's, the larger of the committed offset and
// the position of the group's last pull of the queue (the committed
// offset alone when it pulled none).
func (b *Broker) addConsumeStats(table map[adminbody.MessageQueue]adminbody.OffsetWrapper, group, topic string, queues int) error {
	for q := int32(0); q < int32(queues); q++ {
		brokerOff, err := b.cqs.MaxOffset(topic, q)
		if err != nil {
			return fmt.Errorf("max offset of %s/%d: %w", topic, q, err)
		}
		consumerOff, _, err := b.consumerOffset(group, topic, q)
		if err != nil {
			return fmt.Errorf("offset of %s on %s/%d: %w", group, topic, q, err)
		}
		w := adminbody.OffsetWrapper{BrokerOffset: max(brokerOff, 0), ConsumerOffset: max(consumerOff, 0)}
		w.PullOffset = w.ConsumerOffset
		if next, ok := b.pulled.get(group, topic, q); ok {
			w.PullOffset = max(w.PullOffset, next)
		}
		if w.ConsumerOffset > 0 {
			if w.LastTimestamp, _, err = b.storeTimeAt(topic, q, w.ConsumerOffset-1); err != nil {
				return err
			}
		}
		table[adminbody.MessageQueue{BrokerName: b.cfg.BrokerName, QueueID: q, Topic: topic}] = w
	}
	return nil
}

// processConsumerConnection answers GET_CONSUMER_CONNECTION_LIST: a
// group's live clients and subscriptions.
func (b *Broker) processConsumerConnection(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group, bad := requiredField(req, "consumerGroup")
	if bad != nil {
		return bad
	}
	cc, ok := b.clients.consumerConnection(group)
	if !ok {
		return remoting.NewResponse(req, remoting.ConsumerNotOnline, "the consumer group["+group+"] not online")
	}
	return jsonResponse(req, cc)
}

// processProducerConnection answers GET_PRODUCER_CONNECTION_LIST.
func (b *Broker) processProducerConnection(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group, bad := requiredField(req, "producerGroup")
	if bad != nil {
		return bad
	}
	conns, ok := b.clients.producerConnections(group)
	if !ok {
		return remoting.NewResponse(req, remoting.SystemError, "the producer group["+group+"] not exist")
	}
	return jsonResponse(req, adminbody.ProducerConnection{ConnectionSet: conns})
}

// processAllProducerInfo answers GET_ALL_PRODUCER_INFO (mqadmin producer):
// the clients of every producer group, as RocketMQ's
// ProducerManager.getProducerTable. The request has no fields.
func (b *Broker) processAllProducerInfo(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return jsonResponse(req, adminbody.ProducerTableInfo{Data: b.clients.producerTable()})
}

// processTopicConsumeByWho answers QUERY_TOPIC_CONSUME_BY_WHO: the groups
// subscribed to a topic now and those with offsets committed on it.
func (b *Broker) processTopicConsumeByWho(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, bad := requiredField(req, "topic")
	if bad != nil {
		return bad
	}
	groups := map[string]bool{}
	for _, g := range b.clients.groupsSubscribedTo(topic) {
		groups[g] = true
	}
	if err := b.groupsWithOffsetsOn(topic, groups); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	list := make([]string, 0, len(groups))
	for g := range groups {
		list = append(list, g)
	}
	sort.Strings(list)
	return jsonResponse(req, struct {
		GroupList []string `json:"groupList"`
	}{list})
}

// groupsWithOffsetsOn adds to groups every group with an offset committed
// on topic. Offset keys lead with the group (kvindex/doc.go, keyspace
// 0x30), so this scans every committed offset of the broker: acceptable for
// the admin calls that use it (this one and DELETE_TOPIC_IN_BROKER).
func (b *Broker) groupsWithOffsetsOn(topic string, groups map[string]bool) error {
	err := b.offsets.Each("", func(u kvindex.OffsetUpdate) bool {
		if u.Topic == topic {
			groups[u.Group] = true
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("scan consumer offsets for topic %s: %w", topic, err)
	}
	return nil
}

// connection describes a client channel for the admin tools.
func (c *clientChannel) connection() adminbody.Connection {
	return adminbody.Connection{ClientAddr: c.conn.RemoteAddr().String(), ClientID: c.clientID, Language: c.language, Version: c.version}
}

// sortedConnections describes channels, ordered by client id.
func sortedConnections(channels map[string]*clientChannel) []adminbody.Connection {
	out := make([]adminbody.Connection, 0, len(channels))
	for _, c := range channels {
		out = append(out, c.connection())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ClientID < out[j].ClientID })
	return out
}

// info describes a subscription as RocketMQ's SubscriptionData, tags and
// codes sorted.
func (s *subscription) info() adminbody.SubscriptionData {
	tags, codes := s.tagList(), s.codeList()
	sort.Strings(tags)
	sort.Slice(codes, func(i, j int) bool { return codes[i] < codes[j] })
	return adminbody.SubscriptionData{CodeSet: codes, ExpressionType: s.ExprType, SubString: s.SubString,
		SubVersion: s.SubVersion, TagsSet: tags, Topic: s.Topic}
}

// consumerConnection describes a group with live clients; ok is false for
// a group without any.
func (m *clientManager) consumerConnection(group string) (adminbody.ConsumerConnection, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.consumers[group]
	if g == nil || len(g.channels) == 0 {
		return adminbody.ConsumerConnection{}, false
	}
	subs := make(map[string]adminbody.SubscriptionData, len(g.subs))
	for topic, s := range g.subs {
		subs[topic] = s.info()
	}
	return adminbody.ConsumerConnection{ConnectionSet: sortedConnections(g.channels), ConsumeFromWhere: g.consumeFromWhere,
		ConsumeType: g.consumeType, MessageModel: g.messageModel, SubscriptionTable: subs}, true
}

// producerConnections describes the live clients of a producer group; ok
// is false when the group has none.
func (m *clientManager) producerConnections(group string) ([]adminbody.Connection, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.producers[group]
	if len(g) == 0 {
		return nil, false
	}
	return sortedConnections(g), true
}

// producerTable describes the clients of every producer group, each
// group's in client id order. Every group a heartbeat named is there,
// the clients' own (CLIENT_INNER_PRODUCER) included, as in RocketMQ; a
// group leaves with its last client, so none is empty.
func (m *clientManager) producerTable() map[string][]adminbody.ProducerInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]adminbody.ProducerInfo, len(m.producers))
	for group, channels := range m.producers {
		list := make([]adminbody.ProducerInfo, 0, len(channels))
		for _, c := range channels {
			list = append(list, adminbody.ProducerInfo{ClientID: c.clientID, Language: c.language,
				LastUpdateTimestamp: c.lastUpdate.UnixMilli(), RemoteIP: "/" + c.conn.PeerAddr().String(), Version: c.version})
		}
		sort.Slice(list, func(i, j int) bool { return list[i].ClientID < list[j].ClientID })
		out[group] = list
	}
	return out
}

// subscribedTopics returns the topics a group subscribes to; live is false
// when the group has no subscription (no live client, or clients that sent
// none).
func (m *clientManager) subscribedTopics(group string) (topics map[string]bool, live bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.consumers[group]
	if g == nil || len(g.subs) == 0 {
		return nil, false
	}
	topics = make(map[string]bool, len(g.subs))
	for t := range g.subs {
		topics[t] = true
	}
	return topics, true
}

// groupsSubscribedTo returns the live groups subscribed to a topic.
func (m *clientManager) groupsSubscribedTo(topic string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for name, g := range m.consumers {
		if _, ok := g.subs[topic]; ok {
			out = append(out, name)
		}
	}
	return out
}

// processBrokerConsumeStats answers GET_BROKER_CONSUME_STATS (mqadmin
// brokerConsumeStats): for every subscription group, the consume stats of
// each topic it committed offsets on (only the topics of its live
// subscriptions, if it has any; only ordered topics with isOrder), as
// RocketMQ's fetchAllConsumeStatsInBroker, which walks the topics' write
// queues. totalDiff sums brokerOffset - consumerOffset over every queue,
// totalInflightDiff pullOffset - consumerOffset (the messages pulled and
// not committed; RocketMQ leaves these rows' pullOffset 0 and so reports
// minus the sum of the committed offsets there).
func (b *Broker) processBrokerConsumeStats(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	isOrder := remoting.Header(req.ExtFields).OptBool("isOrder", false)
	var groups []string
	if err := b.groups.Each(func(g meta.SubscriptionGroupConfig) bool { groups = append(groups, g.GroupName); return true }); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	var list []adminbody.GroupConsumeStats
	var totalDiff, totalInflight int64
	for _, group := range groups {
		topics, err := b.consumeStatsTopics(group, remoting.Header{})
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		entry := adminbody.GroupConsumeStats{Group: group}
		for _, topic := range topics {
			tc, ok, err := b.topicConfig(topic)
			if err != nil {
				return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("read config of topic %s: %v", topic, err))
			}
			if !ok || isOrder && !tc.Order {
				continue
			}
			table := make(map[adminbody.MessageQueue]adminbody.OffsetWrapper, tc.WriteQueueNums)
			if err := b.addConsumeStats(table, group, topic, tc.WriteQueueNums); err != nil {
				return remoting.NewResponse(req, remoting.SystemError, err.Error())
			}
			for _, w := range table {
				totalDiff += w.BrokerOffset - w.ConsumerOffset
				totalInflight += w.PullOffset - w.ConsumerOffset
			}
			entry.Topics = append(entry.Topics, table)
			entry.TPS = append(entry.TPS, b.stats.GroupTPS(group, topic))
		}
		list = append(list, entry)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = adminbody.EncodeConsumeStatsList(b.Addr(), list, totalDiff, totalInflight)
	return resp
}
