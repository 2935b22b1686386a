package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// Message request modes (RocketMQ's MessageRequestMode).
const (
	modePull = "PULL"
	modePop  = "POP"
)

// requestModeBody is SetMessageRequestModeRequestBody.
type requestModeBody struct {
	Topic            string `json:"topic"`
	ConsumerGroup    string `json:"consumerGroup"`
	Mode             string `json:"mode"`
	PopShareQueueNum int    `json:"popShareQueueNum"`
}

// processSetRequestMode answers SET_MESSAGE_REQUEST_MODE: the mode is kept
// durably and reported by QUERY_ASSIGNMENT to the group's clients, which
// then pull or pop. Retry topics always pull; the topic must exist here and
// the group too (or be created, as a subscription would create it).
func (b *Broker) processSetRequestMode(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body requestModeBody
	if err := json.Unmarshal(req.Body, &body); err != nil || body.Topic == "" || body.ConsumerGroup == "" {
		return remoting.NewResponse(req, remoting.SystemError, "bad set message request mode body")
	}
	if meta.IsRetryTopic(body.Topic) {
		return remoting.NewResponse(req, remoting.NoPermission, "retry topic is not allowed to set mode")
	}
	if _, ok, err := b.topicConfig(body.Topic); err != nil || !ok {
		return topicOrGroupMissing(req, err, remoting.TopicNotExist, "topic["+body.Topic+"] not exist")
	}
	if gc, err := b.groupConfig(body.ConsumerGroup, true); err != nil || gc.GroupName == "" {
		return topicOrGroupMissing(req, err, remoting.SubscriptionGroupNotExist, "subscription group does not exist")
	}
	if err := setRequestMode(b.db, body); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// topicOrGroupMissing answers a request naming a topic or group that could
// not be read (err) or does not exist (code and remark).
func topicOrGroupMissing(req *remoting.Command, err error, code int32, remark string) *remoting.Command {
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	return remoting.NewResponse(req, code, remark)
}

// setRequestMode stores a group's request mode on a topic: POP, or PULL
// for anything else.
func setRequestMode(db *kvindex.DB, body requestModeBody) error {
	body = normalRequestMode(body)
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode the request mode of %s on %s: %w", body.ConsumerGroup, body.Topic, err)
	}
	return db.Pop().SetRequestMode(body.Topic, body.ConsumerGroup, raw)
}

// normalRequestMode is body as it is stored: mode POP or else PULL.
func normalRequestMode(body requestModeBody) requestModeBody {
	body.Mode = strings.ToUpper(body.Mode)
	if body.Mode != modePop {
		body.Mode = modePull
	}
	return body
}

// processGetAllRequestMode answers GET_ALL_MESSAGE_REQUEST_MODE with
// MessageRequestModeSerializeWrapper: {"messageRequestModeMap":{topic:{group:body}}}.
func (b *Broker) processGetAllRequestMode(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	all := map[string]map[string]json.RawMessage{}
	err := b.db.Pop().EachRequestMode(func(m kvindex.RequestMode) bool {
		if all[m.Topic] == nil {
			all[m.Topic] = map[string]json.RawMessage{}
		}
		all[m.Topic][m.Group] = m.JSON
		return true
	})
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	out, err := json.Marshal(map[string]any{"messageRequestModeMap": all})
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = out
	return resp
}

// requestMode returns the mode of a topic and group: the stored one, or
// defaultMessageRequestMode (with defaultPopShareQueueNum when POP); always
// PULL for retry topics.
func (b *Broker) requestMode(topic, group string) (requestModeBody, error) {
	m := requestModeBody{Topic: topic, ConsumerGroup: group, Mode: modePull}
	if meta.IsRetryTopic(topic) {
		return m, nil
	}
	raw, err := b.db.Pop().RequestMode(topic, group)
	if err != nil {
		return m, err
	}
	if raw == nil {
		if cur := b.current(); cur.DefaultMessageRequestMode == modePop {
			m.Mode, m.PopShareQueueNum = modePop, cur.DefaultPopShareQueueNum
		}
		return m, nil
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return requestModeBody{Topic: topic, ConsumerGroup: group, Mode: modePull}, nil
	}
	return m, nil
}

// queryAssignmentBody is QueryAssignmentRequestBody.
type queryAssignmentBody struct {
	Topic         string `json:"topic"`
	ConsumerGroup string `json:"consumerGroup"`
	ClientID      string `json:"clientId"`
	StrategyName  string `json:"strategyName"`
	MessageModel  string `json:"messageModel"`
}

type assignedQueue struct {
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
	Topic      string `json:"topic"`
}

type queueAssignment struct {
	MessageQueue assignedQueue     `json:"messageQueue"`
	Mode         string            `json:"mode"`
	Attachments  map[string]string `json:"attachments"`
}

// processQueryAssignment answers QUERY_ASSIGNMENT (server-side rebalance,
// used by Java 5.x clients) as RocketMQ's QueryAssignmentProcessor does.
// The queues divided are the readable queues of the topic on every broker
// group (assignRoutes), so any broker a client asks gives the same answer.
// In PULL mode they are divided among the group's live clients by the
// named strategy; in POP mode each client pops every queue (queueId -1 per
// broker group) unless popShareQueueNum asks for sharing. A broadcasting
// client, or any client with serverLoadBalancerEnable off, is given every
// queue. A null assignment (an unknown topic or strategy, no route from
// the name servers, or no readable queue to divide) tells the client to
// keep the queues it has; a topic without readable queues still gives an
// empty one, which drops them, where RocketMQ's does: to broadcasting
// clients, with the balancer off, and in POP mode without sharing.
func (b *Broker) processQueryAssignment(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body queryAssignmentBody
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "bad query assignment body: "+err.Error())
	}
	mode, err := b.requestMode(body.Topic, body.ConsumerGroup)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	all, found, err := b.assignRoutes.queues(ctx, body.Topic)
	if err != nil {
		b.log.Warn().Err(err).Str("topic", body.Topic).Str("group", body.ConsumerGroup).Msg("query assignment: queues unknown, nothing assigned")
	}
	var out struct {
		MessageQueueAssignments []queueAssignment `json:"messageQueueAssignments"`
	}
	if assigned, ok := b.assign(body, mode, all, found && err == nil); ok {
		out.MessageQueueAssignments = make([]queueAssignment, 0, len(assigned))
		for _, q := range assigned {
			out.MessageQueueAssignments = append(out.MessageQueueAssignments, queueAssignment{MessageQueue: q, Mode: mode.Mode, Attachments: map[string]string{}})
		}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = raw
	return resp
}

// assign picks the client's queues among all, the topic's readable queues
// in order, and reports false for a null assignment.
func (b *Broker) assign(body queryAssignmentBody, mode requestModeBody, all []assignedQueue, found bool) ([]assignedQueue, bool) {
	if !found {
		return nil, false
	}
	if body.MessageModel == modelBroadcasting || !b.current().ServerLoadBalancerEnable {
		return all, true
	}
	strategy, ok := allocationStrategies[body.StrategyName]
	if !ok {
		b.log.Warn().Str("strategy", body.StrategyName).Str("group", body.ConsumerGroup).Msg("query assignment: unknown allocation strategy, nothing assigned")
		return nil, false
	}
	// The asking client counts even before its heartbeat reaches this
	// broker: it is alive, and leaving it out would give it nothing.
	cids := b.clients.consumerIDs(body.ConsumerGroup)
	if body.ClientID != "" && !slices.Contains(cids, body.ClientID) {
		cids = append(cids, body.ClientID)
		slices.Sort(cids)
	}
	if len(cids) == 0 {
		return nil, false
	}
	share := mode.PopShareQueueNum
	if mode.Mode == modePop && (share <= 0 || share >= len(cids)-1) {
		// Every client pops every queue: one queue -1 per broker group.
		// No queue to read is an empty assignment, not a null one: the
		// client drops the queues it had (RocketMQ's allocate4Pop).
		out := []assignedQueue{}
		for _, q := range all {
			if len(out) == 0 || out[len(out)-1].BrokerName != q.BrokerName {
				out = append(out, assignedQueue{BrokerName: q.BrokerName, QueueID: -1, Topic: q.Topic})
			}
		}
		return out, true
	}
	if len(all) == 0 {
		// RocketMQ's strategies refuse an empty queue list.
		return nil, false
	}
	if body.ClientID == "" {
		// RocketMQ's strategies refuse an empty client id too.
		return nil, false
	}
	idx := slices.Index(cids, body.ClientID)
	if mode.Mode != modePop {
		return strategy(all, len(cids), idx), true
	}
	switch {
	case len(cids) <= len(all):
		// Its own share and those of the share clients after it.
		out := strategy(all, len(cids), idx)
		for i := 1; i <= share; i++ {
			out = append(out, strategy(all, len(cids), (idx+i)%len(cids))...)
		}
		return out, true
	default:
		// More clients than queues: each is given one, round the queues.
		return []assignedQueue{all[idx%len(all)]}, true
	}
}

// allocationStrategies are the strategies QUERY_ASSIGNMENT knows, by the
// name clients send (AllocateMessageQueueStrategy.getName). An empty name
// is taken as the average strategy, every client's default.
var allocationStrategies = map[string]func(all []assignedQueue, clients, idx int) []assignedQueue{
	"":              allocateAveragely,
	"AVG":           allocateAveragely,
	"AVG_BY_CIRCLE": allocateAveragelyByCircle,
}

// allocateAveragely is RocketMQ's AllocateMessageQueueAveragely for the
// client at index idx of the sorted client ids (meta.AverageShare).
func allocateAveragely(all []assignedQueue, clients, idx int) []assignedQueue {
	from, to := meta.AverageShare(len(all), clients, idx)
	if from == to {
		return nil
	}
	return slices.Clone(all[from:to])
}

// allocateAveragelyByCircle is RocketMQ's
// AllocateMessageQueueAveragelyByCircle: the client at index idx takes
// every clients-th queue from queue idx.
func allocateAveragelyByCircle(all []assignedQueue, clients, idx int) []assignedQueue {
	if idx < 0 || clients == 0 {
		return nil
	}
	var out []assignedQueue
	for i := idx; i < len(all); i += clients {
		out = append(out, all[i])
	}
	return out
}
