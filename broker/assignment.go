package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
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
// then pull or pop. Retry topics always pull.
func (b *Broker) processSetRequestMode(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body requestModeBody
	if err := json.Unmarshal(req.Body, &body); err != nil || body.Topic == "" || body.ConsumerGroup == "" {
		return remoting.NewResponse(req, remoting.SystemError, "bad set message request mode body")
	}
	if meta.IsRetryTopic(body.Topic) {
		return remoting.NewResponse(req, remoting.SystemError, "retry topic is not allowed to set mode")
	}
	if err := setRequestMode(b.db, body); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	return remoting.NewResponse(req, remoting.Success, "")
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
// used by Java 5.x clients): this broker's queues of the topic, divided
// among the group's live clients averagely in PULL mode; in POP mode each
// client pops every queue (queueId -1) unless popShareQueueNum asks for
// sharing. Unknown topics answer a null assignment, as RocketMQ does.
func (b *Broker) processQueryAssignment(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body queryAssignmentBody
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "bad query assignment body: "+err.Error())
	}
	mode, err := b.requestMode(body.Topic, body.ConsumerGroup)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	var assigned []assignedQueue
	tc, ok, err := b.topicConfig(body.Topic)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if ok {
		all := make([]assignedQueue, tc.ReadQueueNums)
		for i := range all {
			all[i] = assignedQueue{BrokerName: b.cfg.BrokerName, QueueID: int32(i), Topic: body.Topic}
		}
		cids := b.clients.consumerIDs(body.ConsumerGroup)
		if body.ClientID != "" && !contains(cids, body.ClientID) {
			cids = append(cids, body.ClientID)
		}
		sort.Strings(cids)
		switch {
		case body.MessageModel == modelBroadcasting:
			assigned = all
		case mode.Mode == modePop && (mode.PopShareQueueNum <= 0 || mode.PopShareQueueNum >= len(cids)-1):
			assigned = []assignedQueue{{BrokerName: b.cfg.BrokerName, QueueID: -1, Topic: body.Topic}}
		case mode.Mode == modePop:
			idx := indexOf(cids, body.ClientID)
			assigned = allocateAveragely(all, cids, idx)
			for i := 1; i <= mode.PopShareQueueNum; i++ {
				assigned = append(assigned, allocateAveragely(all, cids, (idx+i)%len(cids))...)
			}
		default:
			assigned = allocateAveragely(all, cids, indexOf(cids, body.ClientID))
		}
	}
	var out struct {
		MessageQueueAssignments []queueAssignment `json:"messageQueueAssignments"`
	}
	if ok {
		out.MessageQueueAssignments = []queueAssignment{}
	}
	for _, q := range assigned {
		out.MessageQueueAssignments = append(out.MessageQueueAssignments, queueAssignment{MessageQueue: q, Mode: mode.Mode, Attachments: map[string]string{}})
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = raw
	return resp
}

// allocateAveragely is RocketMQ's AllocateMessageQueueAveragely for the
// client at index idx of the sorted client ids.
func allocateAveragely(all []assignedQueue, cids []string, idx int) []assignedQueue {
	if idx < 0 || len(cids) == 0 || len(all) == 0 {
		return nil
	}
	n, c := len(all), len(cids)
	mod := n % c
	size := n / c
	if n <= c {
		size = 1
	} else if mod > 0 && idx < mod {
		size++
	}
	start := idx*size + mod
	if mod > 0 && idx < mod {
		start = idx * size
	}
	var out []assignedQueue
	for i := 0; i < min(size, n-start); i++ {
		out = append(out, all[(start+i)%n])
	}
	return out
}

func contains(s []string, v string) bool { return indexOf(s, v) >= 0 }

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
