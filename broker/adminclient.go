package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/remoting"
)

// consumerRelayTimeout bounds the wait for a client's answer to a relayed
// admin request (RocketMQ's Broker2Client waits 10 s).
const consumerRelayTimeout = 10 * time.Second

// processGetBrokerConfig answers GET_BROKER_CONFIG (mqadmin
// getBrokerConfig, the dashboard's broker page): every setting as
// "key=value" lines of the configuration in force, with the values the
// broker derived where the configuration leaves them to it (see
// effectiveSettings), and its DataVersion (moved on by every
// UPDATE_BROKER_CONFIG) in the version header field.
func (b *Broker) processGetBrokerConfig(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	live := b.live.cur.Load()
	version, err := json.Marshal(live.version)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{"version": string(version)}
	resp.Body = configs.PropertiesText(b.effectiveSettings(live.cfg))
	return resp
}

// effectiveSettings returns the settings of cfg with the values the
// running broker derived, as RocketMQ's getBrokerConfig reports the
// fields its startup set: brokerIP1 the address (or host name) it
// registers, brokerIP2 brokerIP1 when empty, the ports it listens on
// where the configuration gave 0 (listenPort, haListenPort,
// fastListenPort), and on a slave accessMessageInMemoryMaxRatio 10 less
// (memoryRatio: BrokerStartup lowers the field itself). Only the answer
// changes: the configuration kept and written back on an update keeps
// what the operator gave.
func (b *Broker) effectiveSettings(cfg configs.Broker) map[string]string {
	settings := cfg.Settings()
	settings["accessMessageInMemoryMaxRatio"] = strconv.Itoa(memoryRatio(cfg))
	port := func(a net.Addr) (string, bool) {
		if t, ok := a.(*net.TCPAddr); ok {
			return strconv.Itoa(t.Port), true
		}
		return "", false
	}
	if settings["brokerIP1"] == "" {
		settings["brokerIP1"] = b.announcedHost()
	}
	if settings["brokerIP2"] == "" {
		settings["brokerIP2"] = settings["brokerIP1"]
	}
	if settings["listenPort"] == "0" {
		settings["listenPort"] = strconv.Itoa(int(b.hostAddr().Port()))
	}
	if settings["haListenPort"] == "0" && b.repl.server != nil {
		if p, ok := port(b.repl.server.Addr()); ok {
			settings["haListenPort"] = p
		}
	}
	if settings["haListenPort"] == "0" && b.repl.auto != nil {
		if p, ok := port(b.repl.auto.Addr()); ok {
			settings["haListenPort"] = p
		}
	}
	if settings["fastListenPort"] == "0" {
		if p, ok := port(b.FastAddr()); ok {
			settings["fastListenPort"] = p
		}
	}
	return settings
}

// topicList is RocketMQ's TopicList body.
type topicList struct {
	TopicList  []string `json:"topicList"`
	BrokerAddr string   `json:"brokerAddr,omitempty"`
}

// processTopicsByConsumer answers QUERY_TOPICS_BY_CONSUMER: the topics a
// group has committed offsets on.
func (b *Broker) processTopicsByConsumer(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group, bad := requiredField(req, "group")
	if bad != nil {
		return bad
	}
	topics, err := b.topicsWithOffsets(group)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if topics == nil {
		topics = []string{}
	}
	return jsonResponse(req, topicList{TopicList: topics, BrokerAddr: b.Addr()})
}

// processConsumerRunningInfo answers GET_CONSUMER_RUNNING_INFO from an
// admin tool (mqadmin consumerStatus, the dashboard) with the named
// client's own answer.
func (b *Broker) processConsumerRunningInfo(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return b.relayToConsumer(ctx, req, nil)
}

// processConsumeMessageDirectly answers CONSUME_MESSAGE_DIRECTLY (the
// dashboard's "consume directly", mqadmin consumeMessage): the message
// its offset msgId names is handed to the named client, whose
// ConsumeMessageDirectlyResult is the answer.
func (b *Broker) processConsumeMessageDirectly(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	_, phy, bad := offsetMsgID(req)
	if bad != nil {
		return bad
	}
	rec, m, ok, err := b.readClientRecord(phy)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if !ok {
		return remoting.NewResponse(req, remoting.SystemError, "can not find message by the offset, "+strconv.FormatInt(phy, 10))
	}
	if topic := remoting.Header(req.ExtFields).OptString("topic", ""); topic != m.Topic && b.accessControlled() {
		// The check was of the topic named (none: the group's only), and
		// the message would go to a client the caller may run: only a
		// message of that topic does (RocketMQ relays any).
		return remoting.NewResponse(req, remoting.NoPermission, fmt.Sprintf("the message at offset %d is not of topic %q", phy, topic))
	}
	return b.relayToConsumer(ctx, req, shownRecord(rec, m.Topic))
}

// offsetMsgID reads the msgId header field, an offset message id (store
// host and CommitLog offset), or returns the answer refusing it.
func offsetMsgID(req *remoting.Command) (id string, phy int64, refused *remoting.Command) {
	id, refused = requiredField(req, "msgId")
	if refused != nil {
		return "", 0, refused
	}
	_, phy, err := commitlog.ParseMessageID(id)
	if err != nil {
		return "", 0, remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("msgId %s is not an offset message id: %v", id, err))
	}
	return id, phy, nil
}

// relayToConsumer asks the client the request's consumerGroup and
// clientId name, on its connection, with the request's code and header
// (brokerName set to this broker's) and the given body, and answers with
// the client's answer, as RocketMQ's AdminBrokerProcessor.callConsumer.
func (b *Broker) relayToConsumer(ctx context.Context, req *remoting.Command, body []byte) *remoting.Command {
	f, bad := requiredFields(req, "consumerGroup", "clientId")
	if bad != nil {
		return bad
	}
	group, clientID := f[0], f[1]
	conn := b.clients.consumerConn(group, clientID)
	if conn == nil {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("The Consumer <%s> <%s> not online", group, clientID))
	}
	ext := make(map[string]string, len(req.ExtFields)+1)
	for k, v := range req.ExtFields {
		ext[k] = v
	}
	ext["brokerName"] = b.cfg.BrokerName
	ctx, cancel := context.WithTimeout(ctx, consumerRelayTimeout)
	defer cancel()
	answer, err := conn.Request(ctx, remoting.NewRequest(req.Code, ext, body))
	if err != nil {
		b.log.Warn().Err(err).Int32("code", req.Code).Str("group", group).Str("clientId", clientID).Msg("relay to a consumer")
		if errors.Is(err, context.DeadlineExceeded) {
			// RocketMQ's callConsumer answers a client that did not
			// answer in time with CONSUME_MSG_TIMEOUT.
			return remoting.NewResponse(req, remoting.ConsumeMsgTimeout,
				fmt.Sprintf("consumer <%s> <%s> Timeout: %v", group, clientID, err))
		}
		return remoting.NewResponse(req, remoting.SystemError,
			fmt.Sprintf("invoke consumer <%s> <%s> Exception: %v", group, clientID, err))
	}
	resp := remoting.NewResponse(req, answer.Code, answer.Remark)
	resp.ExtFields = answer.ExtFields
	resp.Body = answer.Body
	return resp
}

// processSubscriptionByConsumer answers QUERY_SUBSCRIPTION_BY_CONSUMER:
// a live group's subscription to a topic (none when it has none).
func (b *Broker) processSubscriptionByConsumer(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	f, bad := requiredFields(req, "group", "topic")
	if bad != nil {
		return bad
	}
	group, topic := f[0], f[1]
	body := struct {
		Group            string                      `json:"group"`
		Topic            string                      `json:"topic"`
		SubscriptionData *adminbody.SubscriptionData `json:"subscriptionData,omitempty"`
	}{Group: group, Topic: topic}
	if s, _, _ := b.clients.groupSubscription(group, topic); s != nil {
		info := s.info()
		body.SubscriptionData = &info
	}
	return jsonResponse(req, body)
}

// queueTimeSpan is RocketMQ's QueueTimeSpan.
type queueTimeSpan struct {
	MessageQueue     adminbody.MessageQueue `json:"messageQueue"`
	MinTimeStamp     int64                  `json:"minTimeStamp"`
	MaxTimeStamp     int64                  `json:"maxTimeStamp"`
	ConsumeTimeStamp int64                  `json:"consumeTimeStamp"`
	DelayTime        int64                  `json:"delayTime"`
}

// processConsumeTimeSpan answers QUERY_CONSUME_TIME_SPAN (the admin
// API's queryConsumeTimeSpan): per write queue of a topic, the store
// times of its first and last messages, of the last message the group
// consumed, and how long the next one has waited. A time the broker
// cannot read is -1, as RocketMQ's.
func (b *Broker) processConsumeTimeSpan(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	f, bad := requiredFields(req, "topic", "group")
	if bad != nil {
		return bad
	}
	topic, group := f[0], f[1]
	tc, ok, err := b.topicConfig(topic)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if !ok {
		return remoting.NewResponse(req, remoting.TopicNotExist, "topic["+topic+"] not exist")
	}
	at := func(q int32, off int64) (int64, error) {
		ts, ok, err := b.storeTimeAt(topic, q, off)
		if err != nil || !ok {
			return -1, err
		}
		return ts, nil
	}
	spans := []queueTimeSpan{}
	for q := int32(0); q < int32(tc.WriteQueueNums); q++ {
		span, err := b.queueTimeSpan(group, topic, q, at)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		spans = append(spans, span)
	}
	return jsonResponse(req, struct {
		ConsumeTimeSpanSet []queueTimeSpan `json:"consumeTimeSpanSet"`
	}{spans})
}

// queueTimeSpan is one queue's row of QUERY_CONSUME_TIME_SPAN: the store
// times of its first and last message, of the group's last consumed one
// and how long ago the next one to consume was stored. at reads a store
// time (-1 when there is none); each offset is read once.
func (b *Broker) queueTimeSpan(group, topic string, q int32, at func(int32, int64) (int64, error)) (queueTimeSpan, error) {
	span := queueTimeSpan{MessageQueue: adminbody.MessageQueue{BrokerName: b.cfg.BrokerName, QueueID: q, Topic: topic}}
	minOff, maxOff, err := b.queueRange(topic, q)
	if err != nil {
		return span, err
	}
	consumed, ok, err := b.consumerOffset(group, topic, q)
	if err != nil {
		return span, err
	}
	if !ok {
		consumed = 0
	}
	times := map[int64]int64{} // offset -> store time, read once each
	read := func(off int64) (int64, error) {
		if ts, ok := times[off]; ok {
			return ts, nil
		}
		ts, err := at(q, off)
		times[off] = ts
		return ts, err
	}
	if span.MinTimeStamp, err = read(minOff); err != nil {
		return span, err
	}
	if span.MaxTimeStamp, err = read(maxOff - 1); err != nil {
		return span, err
	}
	span.ConsumeTimeStamp = span.MinTimeStamp
	if consumed > 0 {
		if span.ConsumeTimeStamp, err = read(consumed - 1); err != nil {
			return span, err
		}
	}
	if consumed < maxOff {
		next, err := read(consumed)
		if err != nil {
			return span, err
		}
		if next > 0 {
			span.DelayTime = time.Now().UnixMilli() - next
		}
	}
	return span, nil
}

// consumerStatusTimeout bounds the wait for each client's answer to
// GET_CONSUMER_STATUS_FROM_CLIENT (RocketMQ's Broker2Client waits 5 s).
const consumerStatusTimeout = 5 * time.Second

// processConsumerStatus answers INVOKE_BROKER_TO_GET_CONSUMER_STATUS
// (mqadmin getConsumerStatus): each live client of the group (or the one
// clientAddr names) is asked for the offsets it holds of the topic's
// queues, and the answers are returned by client id, as RocketMQ's
// Broker2Client.getConsumeStatus does. A client that does not answer is
// left out.
func (b *Broker) processConsumerStatus(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	f, bad := requiredFields(req, "topic", "group")
	if bad != nil {
		return bad
	}
	topic, group := f[0], f[1]
	only := remoting.Header(req.ExtFields).OptString("clientAddr", "")
	channels := b.clients.consumerChannels(group)
	if len(channels) == 0 {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("No Any Consumer online in the consumer group: [%s]", group))
	}
	// The clients are asked at once, so that slow ones cost one
	// consumerStatusTimeout in all (RocketMQ asks them one by one).
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		table = map[string]map[adminbody.MessageQueue]int64{}
	)
	for _, ch := range channels {
		if only != "" && only != ch.clientID {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if offsets, ok := b.askConsumerStatus(ctx, ch, topic, group); ok {
				mu.Lock()
				table[ch.clientID] = offsets
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = adminbody.EncodeConsumerStatusTable(table)
	return resp
}

// askConsumerStatus asks one client of a group for its offsets on a topic
// (GET_CONSUMER_STATUS_FROM_CLIENT); false, with a log line, when it does
// not answer with them.
func (b *Broker) askConsumerStatus(ctx context.Context, ch *clientChannel, topic, group string) (map[adminbody.MessageQueue]int64, bool) {
	ctx, cancel := context.WithTimeout(ctx, b.statusAskTimeout)
	defer cancel()
	ask := remoting.NewRequest(remoting.GetConsumerStatusFromClient, map[string]string{"topic": topic, "group": group}, nil)
	answer, err := ch.conn.Request(ctx, ask)
	if err != nil {
		b.log.Warn().Err(err).Str("group", group).Str("clientId", ch.clientID).Msg("GET_CONSUMER_STATUS_FROM_CLIENT not answered")
		return nil, false
	}
	if answer.Code != remoting.Success || len(answer.Body) == 0 {
		b.log.Warn().Int32("code", answer.Code).Str("remark", answer.Remark).Str("group", group).Str("clientId", ch.clientID).
			Msg("GET_CONSUMER_STATUS_FROM_CLIENT answered without a status")
		return nil, false
	}
	offsets, err := adminbody.DecodeConsumerStatus(answer.Body)
	if err != nil {
		b.log.Warn().Err(err).Str("group", group).Str("clientId", ch.clientID).Msg("GET_CONSUMER_STATUS_FROM_CLIENT answer not understood")
		return nil, false
	}
	return offsets, true
}
