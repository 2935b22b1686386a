package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// consumerRunningInfoTimeout bounds the wait for a client's answer to a
// relayed GET_CONSUMER_RUNNING_INFO (RocketMQ's Broker2Client waits 10 s).
const consumerRunningInfoTimeout = 10 * time.Second

// processGetBrokerConfig answers GET_BROKER_CONFIG (mqadmin
// getBrokerConfig, the dashboard's broker page): every setting as
// "key=value" lines, and the configuration's DataVersion in the version
// header field. The configuration does not change while the broker runs,
// so the version is the start time.
func (b *Broker) processGetBrokerConfig(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	keys := make([]string, 0, len(b.cfg.Settings))
	for k := range b.cfg.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var body strings.Builder
	for _, k := range keys {
		body.WriteString(k)
		body.WriteByte('=')
		body.WriteString(b.cfg.Settings[k])
		body.WriteByte('\n')
	}
	version, err := json.Marshal(meta.DataVersion{Timestamp: b.started.UnixMilli()})
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{"version": string(version)}
	resp.Body = []byte(body.String())
	return resp
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
// admin tool (mqadmin consumerStatus, the dashboard) by asking the named
// client on its connection and relaying its answer, as RocketMQ's
// Broker2Client does.
func (b *Broker) processConsumerRunningInfo(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group, bad := requiredField(req, "consumerGroup")
	if bad != nil {
		return bad
	}
	clientID, bad := requiredField(req, "clientId")
	if bad != nil {
		return bad
	}
	conn := b.clients.consumerConn(group, clientID)
	if conn == nil {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("The Consumer <%s> <%s> not online", group, clientID))
	}
	ctx, cancel := context.WithTimeout(ctx, consumerRunningInfoTimeout)
	defer cancel()
	ask := remoting.NewRequest(remoting.GetConsumerRunningInfo, req.ExtFields, nil)
	answer, err := conn.Request(ctx, ask)
	if err != nil {
		b.log.Warn().Err(err).Str("group", group).Str("clientId", clientID).Msg("relay GET_CONSUMER_RUNNING_INFO")
		return remoting.NewResponse(req, remoting.SystemError,
			fmt.Sprintf("invoke consumer <%s> <%s> Exception: %v", group, clientID, err))
	}
	resp := remoting.NewResponse(req, answer.Code, answer.Remark)
	resp.ExtFields = answer.ExtFields
	resp.Body = answer.Body
	return resp
}
