// Package popclient is a POP consumer over the Remoting protocol, for
// tests, benchmarks and the gRPC proxy (the Go client v2 has no POP). It sends the
// requests a Java 5.x client sends and builds each message's receipt
// handle from the pop response header the way the Java client does
// (MQClientAPIImpl.processPopResponse): POP_CK when the broker put one,
// otherwise from startOffsetInfo and msgOffsetInfo by the message's rank
// among its queue's offsets.
package popclient

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// Invoker sends a request and waits for its answer: a remoting.Client,
// or a remoting.AddrClient, which dials again when its connection failed
// and reconnects on GO_AWAY.
type Invoker interface {
	Invoke(ctx context.Context, cmd *remoting.Command) (*remoting.Command, error)
}

// Client pops through one Remoting connection.
type Client struct {
	rc Invoker
	// BrokerName is put into handles built from headers.
	BrokerName string
}

// New wraps a connected Remoting client (or AddrClient).
func New(rc Invoker, brokerName string) *Client {
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

// decodePop decodes a pop response. Per message it allocates only the
// record's properties string: the topic string is the requested one when
// the record names it, the slice of messages is sized by msgOffsetInfo,
// the header maps are looked up with keys built in one reused buffer,
// and the real topic is computed once per run of a retry flag.
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
	info := headerInfo{key: make([]byte, 0, 64)}
	if info.starts, err = pop.ParseStartOffsetInfo(h.OptString("startOffsetInfo", "")); err != nil {
		return res, err
	}
	if info.offs, err = pop.ParseMsgOffsetInfo(h.OptString("msgOffsetInfo", "")); err != nil {
		return res, err
	}
	if info.counts, err = pop.ParseOrderCountInfo(h.OptString("orderCountInfo", "")); err != nil {
		return res, err
	}
	topics := realTopics{topic: topic, group: group}
	opts := commitlog.DecodeOptions{Topics: func(b []byte) string {
		if string(b) == topic {
			return topic
		}
		return string(b)
	}}
	body := resp.Body
	for len(body) > 0 {
		m, err := commitlog.DecodeWith(body, opts)
		if err != nil {
			return res, fmt.Errorf("decode popped record: %w", err)
		}
		body = body[m.StoreSize:]
		pm := Message{Message: m}
		if ck, ok := popCK(m.Properties); ok {
			if pm.Handle, err = pop.ParseHandle(ck); err != nil {
				return res, err
			}
		} else {
			flag := pop.RetryFlagOf(m.Topic)
			qid, qoff := m.QueueID, m.QueueOffset
			if meta.IsLMQ(topic) && flag == pop.FlagNormal {
				// A light message queue's message is its parent topic's
				// record: its place in the queue is in its properties, as
				// the Java client reads it.
				if qid, qoff, err = lmqPosition(&m, topic); err != nil {
					return res, err
				}
			}
			pm.Handle = pop.Handle{CKOffset: info.start(flag, qid), PopTime: res.PopTime, InvisibleTime: res.InvisibleTime,
				ReviveQID: res.ReviveQID, RetryFlag: flag, BrokerName: c.BrokerName, QueueID: qid, QueueOffset: qoff}
		}
		if pm.RealTopic, err = topics.of(pm.Handle.RetryFlag); err != nil {
			return res, err
		}
		pm.OrderCount = info.orderCount(pm.Handle.RetryFlag, pm.Handle.QueueID, pm.Handle.QueueOffset)
		if !info.listed(pm.Handle.RetryFlag, pm.Handle.QueueID) {
			return res, fmt.Errorf("message %s/%d@%d missing from msgOffsetInfo", m.Topic, m.QueueID, m.QueueOffset)
		}
		if res.Messages == nil {
			res.Messages = make([]Message, 0, max(info.messages(), 1))
		}
		res.Messages = append(res.Messages, pm)
	}
	return res, nil
}

// lmqPosition returns the queue id (0) and offset of a record popped from
// the light message queue lmq: the offset its INNER_MULTI_QUEUE_OFFSET
// gives at lmq's place in its INNER_MULTI_DISPATCH.
func lmqPosition(m *commitlog.Message, lmq string) (int32, int64, error) {
	for name, off := range commitlog.MultiDispatched(m.Properties) {
		if name != lmq {
			continue
		}
		if off < 0 {
			return 0, 0, fmt.Errorf("message %s/%d@%d popped from %s: no offset there in %s", m.Topic, m.QueueID, m.QueueOffset, lmq, commitlog.PropertyMultiQueueOffset)
		}
		return 0, off, nil
	}
	return 0, 0, fmt.Errorf("message %s/%d@%d popped from %s does not name it in %s", m.Topic, m.QueueID, m.QueueOffset, lmq, commitlog.PropertyMultiDispatch)
}

// popCKPair is how a POP_CK pair starts inside a properties string.
const popCKPair = pop.PropertyPopCK + string(rune(commitlog.NameValueSeparator))

// popCK returns a record's POP_CK property. Most records have none, which
// one substring search tells without walking every pair.
func popCK(props string) (string, bool) {
	if !strings.Contains(props, popCKPair) {
		return "", false
	}
	return commitlog.LookupProperty(props, pop.PropertyPopCK)
}

// headerInfo holds the parsed info strings of a pop response's header,
// keyed as pop.InfoKey and pop.OrderOffsetKey spell them; lookups build
// their keys in key, reused, so they allocate nothing.
type headerInfo struct {
	starts map[string]int64
	offs   map[string][]int64
	counts map[string]int32
	key    []byte
}

// start returns a queue's ckStartOffset from startOffsetInfo (0 when it
// is not listed).
func (h *headerInfo) start(flag string, queueID int32) int64 {
	h.key = pop.AppendInfoKey(h.key[:0], flag, queueID)
	return h.starts[string(h.key)]
}

// listed reports whether msgOffsetInfo lists offsets for a queue.
func (h *headerInfo) listed(flag string, queueID int32) bool {
	h.key = pop.AppendInfoKey(h.key[:0], flag, queueID)
	return len(h.offs[string(h.key)]) > 0
}

// messages is how many messages msgOffsetInfo lists: the response's
// message count, which sizes its slice.
func (h *headerInfo) messages() int {
	n := 0
	for _, offs := range h.offs {
		n += len(offs)
	}
	return n
}

// orderCount returns a message's count from orderCountInfo: its own entry,
// else its queue's, else 0.
func (h *headerInfo) orderCount(flag string, queueID int32, offset int64) int32 {
	if len(h.counts) == 0 {
		return 0
	}
	h.key = pop.AppendOrderOffsetKey(h.key[:0], flag, queueID, offset)
	if n, ok := h.counts[string(h.key)]; ok {
		return n
	}
	h.key = pop.AppendInfoKey(h.key[:0], flag, queueID)
	return h.counts[string(h.key)]
}

// realTopics answers pop.RealTopic for one pop's topic and group,
// remembering the last answer: a response's messages come from few
// topics, in runs.
type realTopics struct {
	topic, group string
	flag, real   string
	known        bool
}

// of returns the topic a message with the retry flag lives in.
func (r *realTopics) of(flag string) (string, error) {
	if r.known && flag == r.flag {
		return r.real, nil
	}
	real, err := pop.RealTopic(r.topic, r.group, flag)
	if err != nil {
		return "", err
	}
	r.flag, r.real, r.known = flag, real, true
	return real, nil
}

// Ack acknowledges one message; it returns the response code.
func (c *Client) Ack(ctx context.Context, group string, m Message) (int32, error) {
	return c.AckHandle(ctx, group, m.RealTopic, m.Handle)
}

// AckHandle acknowledges by handle: topic is the real topic.
func (c *Client) AckHandle(ctx context.Context, group, topic string, h pop.Handle) (int32, error) {
	resp, err := c.rc.Invoke(ctx, AckRequest(group, topic, h))
	if err != nil {
		return 0, err
	}
	return resp.Code, nil
}

// AckRequest is the ACK_MESSAGE of the message a handle names; topic is
// the real topic (the pop-retry topic of a retried message).
func AckRequest(group, topic string, h pop.Handle) *remoting.Command {
	return remoting.NewRequest(remoting.AckMessage, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(int(h.QueueID)),
		"extraInfo": h.String(), "offset": strconv.FormatInt(h.QueueOffset, 10),
	}, nil)
}

// ChangeInvisibleRequest is the CHANGE_MESSAGE_INVISIBLETIME that makes
// the message a handle names invisible for d from now; topic is the real
// topic.
func ChangeInvisibleRequest(group, topic string, h pop.Handle, d time.Duration) *remoting.Command {
	return remoting.NewRequest(remoting.ChangeMessageInvisibleTime, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(int(h.QueueID)),
		"extraInfo": h.String(), "offset": strconv.FormatInt(h.QueueOffset, 10),
		"invisibleTime": strconv.FormatInt(d.Milliseconds(), 10),
	}, nil)
}

// ChangedHandle is the handle after a successful change of invisible time
// answered resp, as the Java client rebuilds it: the pop's start becomes
// the message's offset, the pop time, invisible time and revive queue the
// answer's.
func ChangedHandle(h pop.Handle, resp *remoting.Command) (pop.Handle, error) {
	rh := remoting.Header(resp.ExtFields)
	nh := h
	nh.CKOffset = h.QueueOffset
	var err error
	if nh.PopTime, err = rh.Int64("popTime"); err != nil {
		return h, err
	}
	if nh.InvisibleTime, err = rh.Int64("invisibleTime"); err != nil {
		return h, err
	}
	if nh.ReviveQID, err = rh.Int32("reviveQid"); err != nil {
		return h, err
	}
	return nh, nil
}

// BatchAck acknowledges messages in one BATCH_ACK_MESSAGE, one entry per
// queue and pop (as the Java client groups them).
func (c *Client) BatchAck(ctx context.Context, group, topic string, msgs []Message) (int32, error) {
	body, err := c.batchAckBody(group, topic, msgs)
	if err != nil {
		return 0, err
	}
	resp, err := c.rc.Invoke(ctx, remoting.NewRequest(remoting.BatchAckMessage, nil, body))
	if err != nil {
		return 0, err
	}
	return resp.Code, nil
}

// batchAckBody builds the JSON body of a batch ack of msgs: one entry per
// retry flag, queue, pop time, invisible time and check-point offset, in
// the order of their first message. A response's messages come queue by
// queue, so the entry of the message before is tried first, then the
// others in turn (a batch ack has few). A handle whose offset has no place
// in its entry's bit set is an error (pop.ErrAckBit).
func (c *Client) batchAckBody(group, topic string, msgs []Message) ([]byte, error) {
	body := pop.BatchAckBody{BrokerName: c.BrokerName}
	last := -1
	for i := range msgs {
		h := &msgs[i].Handle
		if last < 0 || !sameAck(&body.Acks[last], h) {
			last = slices.IndexFunc(body.Acks, func(a pop.BatchAck) bool { return sameAck(&a, h) })
			if last < 0 {
				last = len(body.Acks)
				body.Acks = append(body.Acks, pop.BatchAck{ConsumerGroup: group, Topic: topic, Retry: h.RetryFlag,
					StartOffset: h.CKOffset, QueueID: h.QueueID, ReviveQueueID: h.ReviveQID, PopTime: h.PopTime, InvisibleTime: h.InvisibleTime})
			}
		}
		if err := body.Acks[last].SetBit(h.QueueOffset - h.CKOffset); err != nil {
			return nil, fmt.Errorf("batch ack of %s/%d: %w", topic, h.QueueID, err)
		}
	}
	return body.AppendJSON(nil), nil
}

// sameAck reports whether a message with handle h belongs to entry a.
func sameAck(a *pop.BatchAck, h *pop.Handle) bool {
	return a.QueueID == h.QueueID && a.StartOffset == h.CKOffset && a.PopTime == h.PopTime &&
		a.InvisibleTime == h.InvisibleTime && a.Retry == h.RetryFlag
}

// ChangeInvisibleTime changes a message's invisible time and returns the
// response code and the new handle (the Java client's rebuild:
// ckQueueOffset = the message offset).
func (c *Client) ChangeInvisibleTime(ctx context.Context, group string, m Message, d time.Duration) (int32, pop.Handle, error) {
	h := m.Handle
	resp, err := c.rc.Invoke(ctx, ChangeInvisibleRequest(group, m.RealTopic, h, d))
	if err != nil {
		return 0, h, err
	}
	if resp.Code != remoting.Success {
		return resp.Code, h, nil
	}
	nh, err := ChangedHandle(h, resp)
	return resp.Code, nh, err
}

// Peek sends PEEK_MESSAGE and returns the code and the messages.
func (c *Client) Peek(ctx context.Context, group, topic string, queueID int32, maxNums int) (int32, []commitlog.Message, error) {
	resp, err := c.rc.Invoke(ctx, remoting.NewRequest(remoting.PeekMessage, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(int(queueID)), "maxMsgNums": strconv.Itoa(maxNums),
	}, nil))
	if err != nil {
		return 0, nil, err
	}
	out, err := commitlog.DecodeAll(resp.Body)
	if err != nil {
		return resp.Code, nil, fmt.Errorf("decode peeked messages: %w", err)
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
