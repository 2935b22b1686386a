package grpcproxy

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// SendMessage stores the request's messages, all of one topic, in one
// queue, as RocketMQ's proxy does: a single message is one
// SEND_MESSAGE_V2 to its message group's queue when it names one (so a
// group's messages stay in order), otherwise to the next queue in turn;
// several messages are one SEND_BATCH_MESSAGE to the next queue in turn,
// so they land in one queue at consecutive offsets in one round trip.
// The answer has one entry either way (see sendBatch).
func (s *Server) SendMessage(ctx context.Context, req *rmqpb.SendMessageRequest) (*rmqpb.SendMessageResponse, error) {
	who := callerOf(ctx)
	s.clients.touch(who.clientID)
	resp, err := s.send(ctx, who, req)
	if err != nil {
		s.log.Debug().Err(err).Str("client", who.clientID).Msg("send refused")
		return &rmqpb.SendMessageResponse{Status: statusOf(err)}, nil
	}
	return resp, nil
}

func (s *Server) send(ctx context.Context, who caller, req *rmqpb.SendMessageRequest) (*rmqpb.SendMessageResponse, error) {
	msgs := req.GetMessages()
	if len(msgs) == 0 {
		return nil, fail(rmqpb.Code_MESSAGE_CORRUPTED, "no message to send")
	}
	topic := wrap(msgs[0].GetTopic())
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	now := time.Now()
	outs := make([]outgoing, len(msgs))
	// Every message is checked before any is sent, as RocketMQ's proxy
	// does. A gzip body is inflated to be checked and inflated again
	// just before it is encoded for the broker, so that the checks hold
	// one inflated body at a time; all of them together may not inflate
	// to more than a request may carry.
	budget := s.cfg.MaxRecvMsgSize
	for i, m := range msgs {
		o, err := s.buildOutgoing(m, topic, who.addr, now)
		if err != nil {
			return nil, err
		}
		if budget -= len(o.body); budget < 0 {
			return nil, fail(rmqpb.Code_PAYLOAD_TOO_LARGE, "the request's message bodies hold more than %d bytes", s.cfg.MaxRecvMsgSize)
		}
		if m.GetSystemProperties().GetBodyEncoding() == rmqpb.Encoding_GZIP {
			o.body = nil
		}
		outs[i] = o
	}
	r, err := s.routes.get(ctx, topic)
	if err != nil {
		return nil, err
	}
	// RocketMQ's proxy checks the type of the request's first message
	// only: the broker is sent that message's properties in the request
	// header (the batch's items carry their own).
	if len(r.types) == 1 && s.cfg.CheckMessageType { // one type: MIXED topics, and unknown ones, accept any
		if t := outs[0].messageType(); t != r.types[0] {
			return nil, fail(rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
				"topic %s takes %s messages; this one is %s", topic, r.types[0], t)
		}
	}
	qs := r.writeQueues()
	if len(qs) == 0 {
		return nil, fail(rmqpb.Code_FORBIDDEN, "topic %s has no writable queue", topic)
	}
	var q writeQueue
	if len(outs) == 1 && outs[0].group != "" {
		q = qs[consistentHash(groupHash(outs[0].group), len(qs))]
	} else {
		q = qs[s.next.Add(1)%uint64(len(qs))]
	}
	var e *rmqpb.SendResultEntry
	if len(outs) == 1 {
		o := outs[0]
		if o.body == nil {
			if o, err = s.buildOutgoing(msgs[0], topic, who.addr, now); err != nil {
				return nil, err // it passed the same check a moment ago
			}
		}
		e, err = s.sendOne(ctx, topic, q, o)
	} else {
		e, err = s.sendBatch(ctx, topic, q, msgs, outs, who.addr, now)
	}
	if err != nil {
		if statusOf(err).GetCode() == rmqpb.Code_TOPIC_NOT_FOUND {
			s.routes.forget(topic)
		}
		return nil, err
	}
	code := e.GetStatus().GetCode()
	return &rmqpb.SendMessageResponse{Status: &rmqpb.Status{Code: code, Message: code.String()},
		Entries: []*rmqpb.SendResultEntry{e}}, nil
}

// sendHeader is the SEND_MESSAGE_V2 (and SEND_BATCH_MESSAGE) header of a
// send of o to queue q: RocketMQ's proxy names the topic as the
// producer group, the transaction checker's group.
func sendHeader(topic string, q writeQueue, o *outgoing, batch bool) map[string]string {
	return map[string]string{
		"a": topic, "b": topic, "c": "TBW102", "d": "4",
		"e": strconv.Itoa(int(q.queueID)), "f": strconv.Itoa(int(o.sysFlag)), "g": strconv.FormatInt(o.born, 10), "h": "0",
		"i": o.props, "j": "0", "k": "false", "m": strconv.FormatBool(batch),
	}
}

// sendAnswer reads the broker's answer to a send: a stored message (or
// batch) has its entry, and so has one stored without the durability it
// asked for (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE,
// which RocketMQ's client library reads as a send status), with their
// codes and no ids; any other answer is an error, which RocketMQ's proxy
// answers in the response's status, without entries.
func sendAnswer(q writeQueue, resp *remoting.Command, err error) (*rmqpb.SendResultEntry, remoting.Header, error) {
	if err != nil {
		return nil, nil, fmt.Errorf("send to %s: %w", q.broker, err)
	}
	switch resp.Code {
	case remoting.Success:
	case remoting.FlushDiskTimeout, remoting.FlushSlaveTimeout, remoting.SlaveNotAvailable:
		return &rmqpb.SendResultEntry{Status: statusOf(sendFailure("send to "+q.broker, resp))}, nil, nil
	default:
		return nil, nil, sendFailure("send to "+q.broker, resp)
	}
	rh := remoting.Header(resp.ExtFields)
	off, _ := rh.OptInt64("queueOffset", 0)
	return &rmqpb.SendResultEntry{Status: okStatus(), Offset: off,
		TransactionId: rh.OptString("transactionId", ""), RecallHandle: rh.OptString("recallHandle", "")}, rh, nil
}

// sendOne sends one message to queue q and returns its result entry.
func (s *Server) sendOne(ctx context.Context, topic string, q writeQueue, o outgoing) (*rmqpb.SendResultEntry, error) {
	resp, err := s.invoke(ctx, q.addr, 0, remoting.NewRequest(remoting.SendMessageV2, sendHeader(topic, q, &o, false), o.body))
	if masterRefused(ctx, resp, err) {
		s.routes.refusedBy(q.addr)
	}
	e, rh, err := sendAnswer(q, resp, err)
	if err != nil || rh == nil {
		return e, err
	}
	e.MessageId = o.messageID
	if o.sysFlag == commitlog.TransactionPrepared {
		// The half message's place, for the EndTransaction to come: its
		// half-queue offset and the CommitLog offset in its offset id.
		_, phy, err := commitlog.ParseMessageID(rh.OptString("msgId", ""))
		if err != nil {
			return nil, fmt.Errorf("half message sent, but its offset id: %w", err)
		}
		if e.TransactionId == "" {
			e.TransactionId = o.messageID
		}
		s.txns.put(topic, e.TransactionId, txnData{addr: q.addr, broker: q.broker, tranStateTableOffset: e.Offset, commitLogOffset: phy, at: time.Now()})
	}
	return e, nil
}

// sendBatch sends several messages to queue q as one SEND_BATCH_MESSAGE,
// as RocketMQ's proxy does (its client library's MessageBatch): the body
// holds each message's flag, body and properties, the header the first
// message's properties, born time and system flag. The broker stores them
// at consecutive offsets of q, and the answer is one entry, as RocketMQ's
// client library reads a batch's answer into one SendResult: the message
// ids joined by commas, the first message's queue offset, and the
// transaction id the broker answers (the first message's id).
//
// The messages it cannot send as one batch are refused before anything
// is sent: RocketMQ's MessageBatch refuses a retry topic (and a delay
// level), answered INTERNAL_SERVER_ERROR; a transactional message, whose
// batch RocketMQ's broker refuses (MESSAGE_ILLEGAL, INTERNAL_SERVER_ERROR
// through its proxy) when it is the first, is refused wherever it is
// (past the first, RocketMQ would store it as a normal message); so is a
// message with a delivery time, which rocketkv's broker would deliver at
// once (RocketMQ's, with useDelayLevel off, parks the batch by its first
// message's time).
func (s *Server) sendBatch(ctx context.Context, topic string, q writeQueue, msgs []*rmqpb.Message, outs []outgoing, peer string, now time.Time) (*rmqpb.SendResultEntry, error) {
	if meta.IsRetryTopic(topic) {
		return nil, fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "Retry Group is not supported for batching")
	}
	size := 0
	for i, o := range outs {
		switch {
		case o.sysFlag == commitlog.TransactionPrepared:
			return nil, fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "message %d is transactional: transaction messages are not supported for batching", i)
		case o.delay:
			return nil, fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "message %d has a delivery time: delay messages are not supported for batching", i)
		}
		size += batchItemSize(len(o.body), len(o.props))
	}
	body := make([]byte, 0, size)
	ids := make([]string, len(outs))
	for i, o := range outs {
		if o.body == nil {
			var err error
			if o, err = s.buildOutgoing(msgs[i], topic, peer, now); err != nil {
				return nil, err // it passed the same check a moment ago
			}
		}
		var err error
		if body, err = commitlog.AppendBatchItem(body, 0, o.body, o.props); err != nil {
			return nil, fail(rmqpb.Code_MESSAGE_PROPERTIES_TOO_LARGE, "message %d: %v", i, err)
		}
		ids[i] = o.messageID
	}
	resp, err := s.invoke(ctx, q.addr, 0, remoting.NewRequest(remoting.SendBatchMessage, sendHeader(topic, q, &outs[0], true), body))
	if masterRefused(ctx, resp, err) {
		s.routes.refusedBy(q.addr)
	}
	e, rh, err := sendAnswer(q, resp, err)
	if err != nil || rh == nil {
		return e, err
	}
	e.MessageId = strings.Join(ids, ",")
	return e, nil
}

// batchItemSize is the size of one item of a batch body with a body of
// n bytes and properties of p bytes (commitlog.AppendBatchItem's).
func batchItemSize(n, p int) int { return 4 + 4 + 4 + 4 + 4 + n + 2 + p }

// groupHash is the hash RocketMQ's proxy spreads message groups with:
// Java's String.hashCode of the group (which is also how the ConsumeQueue
// codes tags).
func groupHash(group string) int64 { return commitlog.TagsCode(group) }

// consistentHash maps input to a bucket in [0, buckets) so that few
// inputs move when buckets changes by one: Guava's
// Hashing.consistentHash(long, int), which RocketMQ's proxy uses to pick a
// message group's queue, so that a group lands on the same queue through
// either proxy.
func consistentHash(input int64, buckets int) int {
	state := input
	candidate := 0
	for {
		state = 2862933555777941757*state + 1
		next := int(float64(candidate+1) / (float64(int32(uint64(state)>>33)+1) / float64(1<<31)))
		if next >= 0 && next < buckets {
			candidate = next
		} else {
			return candidate
		}
	}
}
