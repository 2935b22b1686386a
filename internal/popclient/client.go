// Package popclient is a POP consumer over the Remoting protocol, for
// tests and benchmarks (the Go client v2 has no POP). It sends the
// requests a Java 5.x client sends and builds each message's receipt
// handle from the pop response header the way the Java client does
// (MQClientAPIImpl.processPopResponse): POP_CK when the broker put one,
// otherwise from startOffsetInfo and msgOffsetInfo by the message's rank
// among its queue's offsets.
package popclient

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// Client pops through one Remoting connection.
type Client struct {
	rc *remoting.Client
	// BrokerName is put into handles built from headers.
	BrokerName string
}

// New wraps a connected Remoting client.
func New(rc *remoting.Client, brokerName string) *Client {
	return &Client{rc: rc, BrokerName: brokerName}
}

// Message is one popped message with its handle.
type Message struct {
	commitlog.Message
	// Handle is the receipt handle (POP_CK) to ack with.
	Handle pop.Handle
	// RealTopic is the topic to ack against: the pop-retry topic for
	// retried messages.
	RealTopic string
	// OrderCount is the orderly reconsume count from orderCountInfo.
	OrderCount int32
}

// PopRequest is a POP_MESSAGE request.
type PopRequest struct {
	Group, Topic  string
	QueueID       int32
	MaxMsgNums    int
	InvisibleTime time.Duration
	PollTime      time.Duration
	InitMode      int32
	Exp           string
	// ExpType is the expression type of Exp: TAG when empty, or SQL92.
	ExpType   string
	Order     bool
	AttemptID string
}

// PopResult is a decoded pop response.
type PopResult struct {
	// Code is the response code (0, 209, 210, ...).
	Code          int32
	Remark        string
	Messages      []Message
	PopTime       int64
	InvisibleTime int64
	ReviveQID     int32
	RestNum       int64
	Header        map[string]string
}

// Pop sends one POP_MESSAGE and decodes the answer.
func (c *Client) Pop(ctx context.Context, r PopRequest) (PopResult, error) {
	ext := map[string]string{
		"consumerGroup": r.Group, "topic": r.Topic, "queueId": strconv.Itoa(int(r.QueueID)),
		"maxMsgNums": strconv.Itoa(r.MaxMsgNums), "invisibleTime": strconv.FormatInt(r.InvisibleTime.Milliseconds(), 10),
		"pollTime": strconv.FormatInt(r.PollTime.Milliseconds(), 10), "bornTime": strconv.FormatInt(time.Now().UnixMilli(), 10),
		"initMode": strconv.Itoa(int(r.InitMode)), "order": strconv.FormatBool(r.Order),
	}
	if r.Exp != "" {
		ext["expType"], ext["exp"] = "TAG", r.Exp
		if r.ExpType != "" {
			ext["expType"] = r.ExpType
		}
	}
	if r.AttemptID != "" {
		ext["attemptId"] = r.AttemptID
	}
	resp, err := c.rc.Invoke(ctx, remoting.NewRequest(remoting.PopMessage, ext, nil))
	if err != nil {
		return PopResult{}, err
	}
	return c.decodePop(resp, r.Topic, r.Group)
}

func (c *Client) decodePop(resp *remoting.Command, topic, group string) (PopResult, error) {
	res := PopResult{Code: resp.Code, Remark: resp.Remark, Header: resp.ExtFields}
	if resp.Code != remoting.Success {
		return res, nil
	}
	h := remoting.Header(resp.ExtFields)
	var err error
	if res.PopTime, err = h.Int64("popTime"); err != nil {
		return res, err
	}
	if res.InvisibleTime, err = h.Int64("invisibleTime"); err != nil {
		return res, err
	}
	rq, err := h.Int32("reviveQid")
	if err != nil {
		return res, err
	}
	res.ReviveQID = rq
	res.RestNum, _ = h.OptInt64("restNum", 0)
	starts, err := pop.ParseStartOffsetInfo(h.OptString("startOffsetInfo", ""))
	if err != nil {
		return res, err
	}
	offs, err := pop.ParseMsgOffsetInfo(h.OptString("msgOffsetInfo", ""))
	if err != nil {
		return res, err
	}
	counts, err := pop.ParseOrderCountInfo(h.OptString("orderCountInfo", ""))
	if err != nil {
		return res, err
	}
	body := resp.Body
	for len(body) > 0 {
		m, err := commitlog.Decode(body)
		if err != nil {
			return res, fmt.Errorf("decode popped record: %w", err)
		}
		body = body[m.StoreSize:]
		pm := Message{Message: m}
		if ck, ok := commitlog.LookupProperty(m.Properties, pop.PropertyPopCK); ok {
			if pm.Handle, err = pop.ParseHandle(ck); err != nil {
				return res, err
			}
		} else {
			flag := pop.RetryFlagOf(m.Topic)
			key := pop.InfoKey(flag, m.QueueID)
			pm.Handle = pop.Handle{CKOffset: starts[key], PopTime: res.PopTime, InvisibleTime: res.InvisibleTime,
				ReviveQID: res.ReviveQID, RetryFlag: flag, BrokerName: c.BrokerName, QueueID: m.QueueID, QueueOffset: m.QueueOffset}
		}
		if pm.RealTopic, err = pop.RealTopic(topic, group, pm.Handle.RetryFlag); err != nil {
			return res, err
		}
		if n, ok := counts[pop.OrderOffsetKey(pm.Handle.RetryFlag, m.QueueID, m.QueueOffset)]; ok {
			pm.OrderCount = n
		} else if n, ok := counts[pop.InfoKey(pm.Handle.RetryFlag, m.QueueID)]; ok {
			pm.OrderCount = n
		}
		if list := offs[pop.InfoKey(pm.Handle.RetryFlag, pm.Handle.QueueID)]; len(list) == 0 {
			return res, fmt.Errorf("message %s/%d@%d missing from msgOffsetInfo", m.Topic, m.QueueID, m.QueueOffset)
		}
		res.Messages = append(res.Messages, pm)
	}
	return res, nil
}

// Ack acknowledges one message; it returns the response code.
func (c *Client) Ack(ctx context.Context, group string, m Message) (int32, error) {
	return c.AckHandle(ctx, group, m.RealTopic, m.Handle)
}

// AckHandle acknowledges by handle: topic is the real topic.
func (c *Client) AckHandle(ctx context.Context, group, topic string, h pop.Handle) (int32, error) {
	resp, err := c.rc.Invoke(ctx, remoting.NewRequest(remoting.AckMessage, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(int(h.QueueID)),
		"extraInfo": h.String(), "offset": strconv.FormatInt(h.QueueOffset, 10),
	}, nil))
	if err != nil {
		return 0, err
	}
	return resp.Code, nil
}

// BatchAck acknowledges messages in one BATCH_ACK_MESSAGE, one entry per
// queue and pop (as the Java client groups them).
func (c *Client) BatchAck(ctx context.Context, group, topic string, msgs []Message) (int32, error) {
	raw, err := c.batchAckBody(group, topic, msgs)
	if err != nil {
		return 0, err
	}
	resp, err := c.rc.Invoke(ctx, remoting.NewRequest(remoting.BatchAckMessage, nil, raw))
	if err != nil {
		return 0, err
	}
	return resp.Code, nil
}

// batchAckBody builds the JSON body of a batch ack of msgs.
func (c *Client) batchAckBody(group, topic string, msgs []Message) ([]byte, error) {
	type key struct {
		flag string
		q    int32
		pt   int64
		it   int64
		ck   int64
	}
	idx := map[key]int{}
	var body pop.BatchAckBody
	body.BrokerName = c.BrokerName
	for _, m := range msgs {
		h := m.Handle
		k := key{h.RetryFlag, h.QueueID, h.PopTime, h.InvisibleTime, h.CKOffset}
		i, ok := idx[k]
		if !ok {
			i = len(body.Acks)
			idx[k] = i
			body.Acks = append(body.Acks, pop.BatchAck{ConsumerGroup: group, Topic: topic, Retry: h.RetryFlag,
				StartOffset: h.CKOffset, QueueID: h.QueueID, ReviveQueueID: h.ReviveQID, PopTime: h.PopTime, InvisibleTime: h.InvisibleTime})
		}
		body.Acks[i].SetBit(int(h.QueueOffset - h.CKOffset))
	}
	return json.Marshal(body)
}

// ChangeInvisibleTime changes a message's invisible time and returns the
// response code and the new handle (the Java client's rebuild:
// ckQueueOffset = the message offset).
func (c *Client) ChangeInvisibleTime(ctx context.Context, group string, m Message, d time.Duration) (int32, pop.Handle, error) {
	h := m.Handle
	resp, err := c.rc.Invoke(ctx, remoting.NewRequest(remoting.ChangeMessageInvisibleTime, map[string]string{
		"consumerGroup": group, "topic": m.RealTopic, "queueId": strconv.Itoa(int(h.QueueID)),
		"extraInfo": h.String(), "offset": strconv.FormatInt(h.QueueOffset, 10),
		"invisibleTime": strconv.FormatInt(d.Milliseconds(), 10),
	}, nil))
	if err != nil {
		return 0, h, err
	}
	if resp.Code != remoting.Success {
		return resp.Code, h, nil
	}
	rh := remoting.Header(resp.ExtFields)
	nh := h
	nh.CKOffset = h.QueueOffset
	if nh.PopTime, err = rh.Int64("popTime"); err != nil {
		return resp.Code, h, err
	}
	if nh.InvisibleTime, err = rh.Int64("invisibleTime"); err != nil {
		return resp.Code, h, err
	}
	q, err := rh.Int32("reviveQid")
	if err != nil {
		return resp.Code, h, err
	}
	nh.ReviveQID = q
	return resp.Code, nh, nil
}

// Peek sends PEEK_MESSAGE and returns the code and the messages.
func (c *Client) Peek(ctx context.Context, group, topic string, queueID int32, maxNums int) (int32, []commitlog.Message, error) {
	resp, err := c.rc.Invoke(ctx, remoting.NewRequest(remoting.PeekMessage, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(int(queueID)), "maxMsgNums": strconv.Itoa(maxNums),
	}, nil))
	if err != nil {
		return 0, nil, err
	}
	var out []commitlog.Message
	body := resp.Body
	for len(body) > 0 {
		m, err := commitlog.Decode(body)
		if err != nil {
			return resp.Code, nil, err
		}
		out = append(out, m)
		body = body[m.StoreSize:]
	}
	return resp.Code, out, nil
}

// Notification sends NOTIFICATION and returns the code, hasMsg and
// pollingFull.
func (c *Client) Notification(ctx context.Context, group, topic string, queueID int32, poll time.Duration, order bool) (int32, bool, bool, error) {
	resp, err := c.rc.Invoke(ctx, remoting.NewRequest(remoting.Notification, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(int(queueID)),
		"pollTime": strconv.FormatInt(poll.Milliseconds(), 10), "bornTime": strconv.FormatInt(time.Now().UnixMilli(), 10),
		"order": strconv.FormatBool(order),
	}, nil))
	if err != nil {
		return 0, false, false, err
	}
	h := remoting.Header(resp.ExtFields)
	return resp.Code, h.OptBool("hasMsg", false), h.OptBool("pollingFull", false), nil
}
