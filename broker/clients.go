package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/metrics"
	"github.com/rocketkv/rocketkv/remoting"
)

// Message models and consume types as clients name them.
const (
	modelBroadcasting = "BROADCASTING"
	modelClustering   = "CLUSTERING"
)

// heartbeatData is the body of HEART_BEAT. codeSet is ignored (tag codes
// are recomputed), so its element type (string from Go, number from Java)
// does not matter; subVersion is a long in ms (Java) or ns (Go).
//
// A RocketMQ 5 client with heartbeat V2 on (useHeartbeatV2) sets
// heartbeatFingerprint, a hash of its heartbeat without client id and
// subscription versions (0 is a V1 heartbeat). Once a broker's answer said it
// supports V2 and did not report a change of subscriptions, the client
// sends the same fingerprint with withoutSub=true and no
// subscriptionDataSet for as long as its subscriptions stay the same.
type heartbeatData struct {
	ClientID        string `json:"clientID"`
	ProducerDataSet []struct {
		GroupName string `json:"groupName"`
	} `json:"producerDataSet"`
	ConsumerDataSet      []consumerData `json:"consumerDataSet"`
	WithoutSub           bool           `json:"withoutSub"`
	HeartbeatFingerprint int64          `json:"heartbeatFingerprint"`
}

// The ext fields of a HEART_BEAT answer read by RocketMQ 5's clients
// (MixAll.IS_SUPPORT_HEART_BEAT_V2, MixAll.IS_SUB_CHANGE): the broker
// takes fingerprint-only heartbeats, and whether the client must send
// its subscriptions again.
const (
	fieldSupportHeartbeatV2 = "IS_SUPPORT_HEART_BEAT_V2"
	fieldSubChange          = "IS_SUB_CHANGE"
)

type consumerData struct {
	GroupName           string             `json:"groupName"`
	ConsumeType         string             `json:"consumeType"`
	MessageModel        string             `json:"messageModel"`
	ConsumeFromWhere    string             `json:"consumeFromWhere"`
	SubscriptionDataSet []subscriptionData `json:"subscriptionDataSet"`
	UnitMode            bool               `json:"unitMode"`
}

type subscriptionData struct {
	Topic          string            `json:"topic"`
	SubString      string            `json:"subString"`
	TagsSet        []string          `json:"tagsSet"`
	CodeSet        []json.RawMessage `json:"codeSet"`
	SubVersion     json.Number       `json:"subVersion"`
	ExpressionType string            `json:"expressionType"`
}

// clientChannel is one client connection known from its heartbeats.
type clientChannel struct {
	clientID   string
	conn       *remoting.Conn
	language   string
	version    int32
	lastUpdate time.Time
}

// consumerGroup is what the broker knows about one consumer group: its live
// clients and their subscriptions.
type consumerGroup struct {
	name             string
	channels         map[string]*clientChannel // by client id
	subs             map[string]*subscription  // by topic
	consumeType      string
	messageModel     string
	consumeFromWhere string
	// fingerprint is the heartbeatFingerprint of the last heartbeat that
	// carried the group's subscriptions (0 for a V1 heartbeat), valid
	// when fingerprinted: a fingerprint-only (withoutSub) heartbeat
	// stands for subs only when its fingerprint is this one.
	fingerprint   int64
	fingerprinted bool
}

// clientManager holds the producer and consumer tables fed by heartbeats.
// Groups without live clients are dropped, so its size follows the live
// clients, not history. A controller-mode role switch hands it, with
// the connections it knows, to the next Broker (setOwner).
type clientManager struct {
	b         atomic.Pointer[Broker]
	mu        sync.Mutex
	consumers map[string]*consumerGroup
	producers map[string]map[string]*clientChannel // group -> client id -> channel
}

func newClientManager(b *Broker) *clientManager {
	m := &clientManager{consumers: map[string]*consumerGroup{}, producers: map[string]map[string]*clientChannel{}}
	m.b.Store(b)
	return m
}

// owner is the Broker the tables serve: the one running, or the last
// one between two Brokers of a role switch (the close hooks of
// connections read only its settings and logger then).
func (m *clientManager) owner() *Broker { return m.b.Load() }

// setOwner hands the tables to the next Broker of a role switch.
func (m *clientManager) setOwner(b *Broker) { m.b.Store(b) }

type closeHookKey struct{}

// watch arranges for a connection's clients to be removed when it closes.
func (m *clientManager) watch(conn *remoting.Conn) {
	if _, loaded := conn.LoadOrStoreValue(closeHookKey{}, true); loaded {
		return
	}
	conn.OnClose(func() { m.removeConn(conn) })
}

// heartbeat applies one HEART_BEAT body and reports whether the client
// must send its subscriptions again (the answer's IS_SUB_CHANGE).
//
// A V1 heartbeat (heartbeatFingerprint 0) is always answered with a
// change, as RocketMQ answers it. A V2 heartbeat reports one, as
// RocketMQ's heartBeatV2 does, when a group it names last had its
// subscriptions from a heartbeat of another fingerprint (another client
// of the group, or this one before its subscriptions changed); and,
// where RocketMQ does not, when a fingerprint-only heartbeat names a
// group whose subscriptions no heartbeat of that fingerprint gave since
// the group was registered (a broker restarted, a group whose clients
// all left): the client then sends them with its next heartbeat instead
// of pulling without a subscription on this broker from then on.
func (m *clientManager) heartbeat(conn *remoting.Conn, hb *heartbeatData, language string, version int32) (bool, error) {
	if hb.ClientID == "" {
		return false, fmt.Errorf("heartbeat without clientID")
	}
	v2 := hb.HeartbeatFingerprint != 0
	subChange := !v2
	m.watch(conn)
	info := conn.ClientInfo()
	info.ClientID = hb.ClientID
	conn.SetClientInfo(info)
	now := time.Now()
	ch := func() *clientChannel {
		return &clientChannel{clientID: hb.ClientID, conn: conn, language: language, version: version, lastUpdate: now}
	}
	var notify []string
	m.mu.Lock()
	for _, p := range hb.ProducerDataSet {
		g := m.producers[p.GroupName]
		if g == nil {
			g = map[string]*clientChannel{}
			m.producers[p.GroupName] = g
		}
		g[hb.ClientID] = ch()
	}
	m.mu.Unlock()
	for _, cd := range hb.ConsumerDataSet {
		if cd.GroupName == "" {
			continue
		}
		if cd.ConsumeType == consumeActively && m.owner().current().RejectPullConsumerEnable {
			continue // rejectPullConsumerEnable: pull consumers are not registered
		}
		gc, err := m.owner().groupConfig(cd.GroupName, true)
		if err != nil {
			return false, err
		}
		if gc.GroupName == "" {
			// Not a group (autoCreateSubscriptionGroup off, or a name
			// RocketMQ does not allow): skipped, as RocketMQ's heartbeat
			// skips it, with no retry topic created for it.
			m.owner().refusedLog.Warn().Str("group", cd.GroupName).Str("clientId", hb.ClientID).
				Msg("heartbeat of a consumer of a group that does not exist (autoCreateSubscriptionGroup is off, or the name is not allowed); not registered")
			continue
		}
		order, err := m.subscribesOrderTopic(cd.SubscriptionDataSet)
		if err != nil {
			return false, err
		}
		if err := m.ensureRetryTopic(cd.GroupName, gc.RetryQueueNums, order); err != nil {
			return false, err
		}
		subs := make(map[string]*subscription, len(cd.SubscriptionDataSet))
		for _, sd := range cd.SubscriptionDataSet {
			ver, _ := strconv.ParseInt(string(sd.SubVersion), 10, 64)
			s, err := newSubscription(sd.Topic, sd.SubString, sd.ExpressionType, ver)
			switch {
			case err != nil && !isTagType(sd.ExpressionType):
				// A SQL92 expression that does not compile, or a type
				// this broker has no filter for: kept without a filter,
				// as RocketMQ keeps the subscription without its
				// ConsumerFilterData; pulls by it are refused with
				// FILTER_DATA_NOT_EXIST.
				m.owner().log.Warn().Err(err).Str("group", cd.GroupName).Str("topic", sd.Topic).Msg("subscription has no filter: its expression does not compile")
				s = &subscription{Topic: sd.Topic, SubString: sd.SubString, ExprType: sd.ExpressionType, SubVersion: ver, broken: err}
			case err != nil:
				// A TAG expression FilterAPI refuses: remember nothing,
				// pulls without their own expression will fail with
				// SUBSCRIPTION_NOT_EXIST and say why in the log.
				m.owner().log.Warn().Err(err).Str("group", cd.GroupName).Str("topic", sd.Topic).Msg("subscription refused")
				continue
			}
			subs[sd.Topic] = s
		}
		m.mu.Lock()
		if v2 && m.subsStale(cd.GroupName, hb.HeartbeatFingerprint, hb.WithoutSub) {
			subChange = true
		}
		changed := m.registerConsumer(cd, subs, ch(), hb.WithoutSub, hb.HeartbeatFingerprint)
		if changed && cd.MessageModel != modelBroadcasting && gc.NotifyConsumerIdsChangedEnable {
			notify = append(notify, cd.GroupName)
		}
		m.mu.Unlock()
	}
	for _, g := range notify {
		m.notifyChanged(g)
	}
	return subChange, nil
}

// subscribesOrderTopic reports whether one of a consumer's subscriptions
// is of a topic whose order flag is set (RocketMQ's heartbeat's
// hasOrderTopicSub, by TopicConfigManager.isOrderTopic): none for a
// heartbeat without its subscriptions.
func (m *clientManager) subscribesOrderTopic(subs []subscriptionData) (bool, error) {
	for _, sd := range subs {
		tc, ok, err := m.owner().topics.get(sd.Topic)
		if err != nil {
			return false, fmt.Errorf("read topic %s of a subscription: %w", sd.Topic, err)
		}
		if ok && tc.Order {
			return true, nil
		}
	}
	return false, nil
}

// ensureRetryTopic creates the retry topic of a group a consumer's
// heartbeat names, with queues queues (the group's retryQueueNums, at
// least one), as RocketMQ's heartbeat does
// (createTopicInSendMessageBackMethod). Its order flag is order (the
// consumer subscribes to a topic whose order flag is set), at creation
// and at each heartbeat after: as RocketMQ's, a heartbeat that differs
// sets it again, a heartbeat without its subscriptions (a V2 client's
// whose fingerprint did not change) clearing it, and so does a
// send-back.
//
// A slave creates it too, as RocketMQ's slave does, when its copy of the
// master's table does not have it: a group whose consumers first come
// while the master is down has it there, in the routes the slave
// registers. It sets its order flag as well. The write moves the slave's
// table off the master's data version, so the next sync takes the
// master's whole table over it; the master, which creates the retry
// topic or sets its flag at the same consumer's heartbeat there (a client
// heartbeats the master and the slaves of its brokers), moves its own
// version then anyway.
func (m *clientManager) ensureRetryTopic(group string, queues int, order bool) error {
	if queues <= 0 {
		queues = 1
	}
	if _, err := m.owner().topics.ensureSendBackTopic(meta.RetryTopic(group), queues, meta.PermRead|meta.PermWrite, order); err != nil {
		return fmt.Errorf("create retry topic of %s: %w", group, err)
	}
	return nil
}

// subsStale reports whether a V2 heartbeat of fingerprint to group must
// be answered with a change of subscriptions: the group's subscriptions
// came from a heartbeat of another fingerprint, or, for a
// fingerprint-only heartbeat, from no heartbeat with a fingerprint
// since the group was registered. m.mu is held.
func (m *clientManager) subsStale(group string, fingerprint int64, withoutSub bool) bool {
	g := m.consumers[group]
	if g == nil || !g.fingerprinted {
		return withoutSub
	}
	return g.fingerprint != fingerprint
}

// registerConsumer updates a group with one client's heartbeat and reports
// whether the group's clients or topics changed. A heartbeat with its
// subscriptions records its fingerprint as the group's. m.mu is held.
func (m *clientManager) registerConsumer(cd consumerData, subs map[string]*subscription, ch *clientChannel, withoutSub bool, fingerprint int64) bool {
	g := m.consumers[cd.GroupName]
	if g == nil {
		g = &consumerGroup{name: cd.GroupName, channels: map[string]*clientChannel{}, subs: map[string]*subscription{}}
		m.consumers[cd.GroupName] = g
	}
	g.consumeType, g.messageModel, g.consumeFromWhere = cd.ConsumeType, cd.MessageModel, cd.ConsumeFromWhere
	changed := false
	if old, ok := g.channels[ch.clientID]; !ok || old.conn != ch.conn {
		changed = true
	}
	g.channels[ch.clientID] = ch
	if withoutSub {
		return changed
	}
	g.fingerprint, g.fingerprinted = fingerprint, true
	for topic, s := range subs {
		old, ok := g.subs[topic]
		if !ok {
			changed = true
			g.subs[topic] = s
		} else if s.SubVersion > old.SubVersion {
			// Only a newer subscription replaces one, as RocketMQ's
			// ConsumerGroupInfo.updateSubscription: while a group rolls
			// to a new expression, its old clients' heartbeats do not
			// bring the old one back (the new clients' pulls, which name
			// their version, would be refused as not the latest).
			g.subs[topic] = s
		}
	}
	for topic := range g.subs {
		if _, ok := subs[topic]; !ok {
			delete(g.subs, topic)
			changed = true
		}
	}
	return changed
}

// notifyChanged sends NOTIFY_CONSUMER_IDS_CHANGED to every client of a
// group (oneway), so they rebalance at once.
func (m *clientManager) notifyChanged(group string) {
	if !m.owner().cfg.NotifyConsumerIdsChangedEnable {
		return
	}
	m.mu.Lock()
	g := m.consumers[group]
	var conns []*remoting.Conn
	if g != nil {
		for _, c := range g.channels {
			conns = append(conns, c.conn)
		}
	}
	m.mu.Unlock()
	for _, c := range conns {
		req := remoting.NewRequest(remoting.NotifyConsumerIDsChanged, map[string]string{"consumerGroup": group}, nil)
		if err := c.Oneway(req); err != nil {
			m.owner().log.Debug().Err(err).Str("group", group).Msg("notify consumer ids changed")
		}
	}
}

// unregister removes a client of conn from the groups it names
// (UNREGISTER_CLIENT). As RocketMQ unregisters by channel, a client
// registered on another connection stays (client ids are public: any
// connection could otherwise drop any consumer). The group's other
// clients are told unless its notifyConsumerIdsChangedEnable is off.
func (m *clientManager) unregister(conn *remoting.Conn, clientID, producerGroup, consumerGroup string) {
	var notify []string
	m.mu.Lock()
	if producerGroup != "" {
		if g := m.producers[producerGroup]; g != nil {
			if c, ok := g[clientID]; ok && c.conn == conn {
				delete(g, clientID)
			}
			if len(g) == 0 {
				delete(m.producers, producerGroup)
			}
		}
	}
	if consumerGroup != "" {
		if g := m.consumers[consumerGroup]; g != nil {
			if c, ok := g.channels[clientID]; ok && c.conn == conn {
				delete(g.channels, clientID)
				notify = append(notify, m.afterRemoval(g)...)
			}
		}
	}
	m.mu.Unlock()
	for _, g := range notify {
		if gc, err := m.owner().groupConfig(g, false); err == nil && gc.GroupName != "" && !gc.NotifyConsumerIdsChangedEnable {
			continue
		}
		m.notifyChanged(g)
	}
}

// afterRemoval drops an empty group or returns it for notification. m.mu
// is held.
func (m *clientManager) afterRemoval(g *consumerGroup) []string {
	if len(g.channels) == 0 {
		delete(m.consumers, g.name)
		return nil
	}
	if g.messageModel == modelBroadcasting {
		return nil
	}
	return []string{g.name}
}

// removeConn drops every client of a closed connection.
func (m *clientManager) removeConn(conn *remoting.Conn) {
	m.removeWhere(func(c *clientChannel) bool { return c.conn == conn })
}

func (m *clientManager) removeWhere(drop func(*clientChannel) bool) []*clientChannel {
	var notify []string
	var dropped []*clientChannel
	m.mu.Lock()
	for name, g := range m.producers {
		for id, c := range g {
			if drop(c) {
				delete(g, id)
				dropped = append(dropped, c)
			}
		}
		if len(g) == 0 {
			delete(m.producers, name)
		}
	}
	for _, g := range m.consumers {
		removed := false
		for id, c := range g.channels {
			if drop(c) {
				delete(g.channels, id)
				dropped = append(dropped, c)
				removed = true
			}
		}
		if removed {
			notify = append(notify, m.afterRemoval(g)...)
		}
	}
	m.mu.Unlock()
	for _, g := range notify {
		m.notifyChanged(g)
	}
	return dropped
}

// expireLoop removes clients whose heartbeats stopped for longer than
// channelExpiredTimeout, scanning every 10 s, and closes their
// connections as RocketMQ's scan does: a client that stopped heartbeating
// on an open connection (hung, or half-open TCP) holds it for nothing. A
// connection that still carries another live client (the gRPC proxy's,
// which heartbeats for all of its clients) stays open.
func (m *clientManager) expireLoop(ctx context.Context) {
	periodic.Run(ctx, 10*time.Second, func(context.Context) { m.expire(time.Now()) })
}

// expire is one scan of expireLoop at now.
func (m *clientManager) expire(now time.Time) {
	deadline := now.Add(-m.owner().cfg.ChannelExpiredTimeout)
	dropped := m.removeWhere(func(c *clientChannel) bool { return c.lastUpdate.Before(deadline) || c.conn.Closed() })
	if len(dropped) == 0 {
		return
	}
	inUse := map[*remoting.Conn]bool{}
	m.mu.Lock()
	for _, g := range m.producers {
		for _, c := range g {
			inUse[c.conn] = true
		}
	}
	for _, g := range m.consumers {
		for _, c := range g.channels {
			inUse[c.conn] = true
		}
	}
	m.mu.Unlock()
	for _, c := range dropped {
		if inUse[c.conn] || c.conn.Closed() {
			continue
		}
		inUse[c.conn] = true // closed once
		m.owner().log.Warn().Str("clientId", c.clientID).Stringer("conn", c.conn).
			Msg("client expired: no heartbeat within channelExpiredTimeout; closing its connection")
		_ = c.conn.Close()
	}
}

// consumerIDs returns the client ids of a group, sorted.
func (m *clientManager) consumerIDs(group string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.consumers[group]
	if g == nil {
		return nil
	}
	ids := make([]string, 0, len(g.channels))
	for id := range g.channels {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// onlineSubscriptions returns, for each group with a live client, the
// topics its clients subscribe to.
func (m *clientManager) onlineSubscriptions() map[string]map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]map[string]bool, len(m.consumers))
	for name, g := range m.consumers {
		if len(g.channels) == 0 {
			continue
		}
		topics := make(map[string]bool, len(g.subs))
		for t := range g.subs {
			topics[t] = true
		}
		out[name] = topics
	}
	return out
}

// groupSubscription returns a group's subscription to a topic and whether
// the group is known at all.
func (m *clientManager) groupSubscription(group, topic string) (s *subscription, model string, known bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.consumers[group]
	if g == nil {
		return nil, "", false
	}
	return g.subs[topic], g.messageModel, true
}

// producerConn returns a live connection of a producer group (for
// transaction checks), or nil.
func (m *clientManager) producerConn(group string) *remoting.Conn {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.producers[group] {
		if !c.conn.Closed() {
			return c.conn
		}
	}
	return nil
}

// producerConnByClientID returns the live connection of a client that is
// a producer of any group (RocketMQ's ProducerManager.findChannel), or
// nil.
func (m *clientManager) producerConnByClientID(clientID string) *remoting.Conn {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range m.producers {
		if ch := g[clientID]; ch != nil && !ch.conn.Closed() {
			return ch.conn
		}
	}
	return nil
}

// consumerChannels returns the live clients of a consumer group, in
// client id order.
func (m *clientManager) consumerChannels(group string) []*clientChannel {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.consumers[group]
	if g == nil {
		return nil
	}
	out := make([]*clientChannel, 0, len(g.channels))
	for _, ch := range g.channels {
		if !ch.conn.Closed() {
			out = append(out, ch)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].clientID < out[j].clientID })
	return out
}

// consumerConn returns the live connection of one client of a consumer
// group, or nil.
func (m *clientManager) consumerConn(group, clientID string) *remoting.Conn {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.consumers[group]; g != nil {
		if ch := g.channels[clientID]; ch != nil && !ch.conn.Closed() {
			return ch.conn
		}
	}
	return nil
}

// counts returns the number of producer and consumer groups (runtime info).
func (m *clientManager) counts() (producers, consumers int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.producers), len(m.consumers)
}

// producerMetrics counts live producer clients by language and version
// (the rocketmq_producer_connections gauge).
func (m *clientManager) producerMetrics() []metrics.Connection {
	type key struct{ lang, ver string }
	counts := map[key]int{}
	m.mu.Lock()
	for _, g := range m.producers {
		for _, c := range g {
			counts[key{strings.ToLower(c.language), strings.ToLower(remoting.VersionName(int(c.version)))}]++
		}
	}
	m.mu.Unlock()
	out := make([]metrics.Connection, 0, len(counts))
	for k, n := range counts {
		out = append(out, metrics.Connection{Language: k.lang, Version: k.ver, Count: n})
	}
	return out
}

// consumerMetrics counts live consumer clients by group, language, version
// and consume mode (the rocketmq_consumer_connections gauge).
func (m *clientManager) consumerMetrics() []metrics.Connection {
	type key struct{ group, lang, ver, mode string }
	counts := map[key]int{}
	m.mu.Lock()
	for _, g := range m.consumers {
		mode := consumeModeOf(g.consumeType)
		for _, c := range g.channels {
			counts[key{g.name, strings.ToLower(c.language), strings.ToLower(remoting.VersionName(int(c.version))), mode}]++
		}
	}
	m.mu.Unlock()
	out := make([]metrics.Connection, 0, len(counts))
	for k, n := range counts {
		out = append(out, metrics.Connection{Group: k.group, Language: k.lang, Version: k.ver, ConsumeMode: k.mode,
			System: isSystemGroup(k.group), Count: n})
	}
	return out
}

// consumeActively is the ConsumeType of pull consumers (Java's
// DefaultMQPullConsumer and DefaultLitePullConsumer, the Go pull consumer).
const consumeActively = "CONSUME_ACTIVELY"

// pullerKnown reports whether a pull of group over conn may go on under
// rejectPullConsumerEnable, as RocketMQ decides: a group of push consumers
// may, and a group of pull consumers (or none) only over a connection
// that registered it, which heartbeats of pull consumers no longer do.
func (m *clientManager) pullerKnown(group string, conn *remoting.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.consumers[group]
	if g != nil && g.consumeType != consumeActively {
		return true
	}
	if g != nil {
		for _, ch := range g.channels {
			if ch.conn == conn {
				return true
			}
		}
	}
	return false
}

// consumePassively is the ConsumeType of push consumers.
const consumePassively = "CONSUME_PASSIVELY"

// consumeTypeOf returns the ConsumeType group's consumers declared in
// their heartbeats, and false when no consumer of group is registered.
func (m *clientManager) consumeTypeOf(group string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.consumers[group]
	if g == nil {
		return "", false
	}
	return g.consumeType, true
}

// consumeModeOf is RocketMQ's ConsumeType label: CONSUME_PASSIVELY is
// "push", CONSUME_ACTIVELY "pull", CONSUME_POP "pop".
func consumeModeOf(consumeType string) string {
	switch consumeType {
	case consumeActively:
		return "pull"
	case "CONSUME_POP":
		return "pop"
	default:
		return "push"
	}
}
