package grpcproxy

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/remoting"
)

// SendMessage stores the request's messages, all of one topic, in one
// queue: the message group's queue when a single message names one (so a
// group's messages stay in order), otherwise the next queue in turn.
// Each message is one SEND_MESSAGE_V2 with the properties RocketMQ's
// proxy sets; the answer has one entry per message.
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
	// just before its send, so that a request holds one inflated body at
	// a time; all of them together may not inflate to more than a
	// request may carry.
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
	if len(r.types) == 1 && s.cfg.CheckMessageType { // one type: MIXED topics, and unknown ones, accept any
		for _, o := range outs {
			if t := o.messageType(); t != r.types[0] {
				return nil, fail(rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
					"topic %s takes %s messages; this one is %s", topic, r.types[0], t)
			}
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
	out := &rmqpb.SendMessageResponse{}
	codes := map[rmqpb.Code]bool{}
	for i, o := range outs {
		if o.body == nil {
			if o, err = s.buildOutgoing(msgs[i], topic, who.addr, now); err != nil {
				return nil, err // it passed the same check a moment ago
			}
		}
		e := s.sendOne(ctx, topic, q, o)
		if e.GetStatus().GetCode() == rmqpb.Code_TOPIC_NOT_FOUND {
			s.routes.forget(topic)
		}
		codes[e.GetStatus().GetCode()] = true
		out.Entries = append(out.Entries, e)
	}
	if len(codes) > 1 {
		out.Status = &rmqpb.Status{Code: rmqpb.Code_MULTIPLE_RESULTS, Message: "the messages had different results"}
	} else {
		out.Status = out.Entries[0].GetStatus()
	}
	return out, nil
}

// sendOne sends one message to queue q and returns its result entry.
func (s *Server) sendOne(ctx context.Context, topic string, q writeQueue, o outgoing) *rmqpb.SendResultEntry {
	h := map[string]string{
		"a": topic, "b": topic, "c": "TBW102", "d": "4",
		"e": strconv.Itoa(int(q.queueID)), "f": strconv.Itoa(int(o.sysFlag)), "g": strconv.FormatInt(o.born, 10), "h": "0",
		"i": o.props, "j": "0", "k": "false", "m": "false",
	}
	resp, err := s.invoke(ctx, q.addr, 0, remoting.NewRequest(remoting.SendMessageV2, h, o.body))
	if err != nil {
		return &rmqpb.SendResultEntry{Status: statusOf(err)}
	}
	if resp.Code != remoting.Success {
		return &rmqpb.SendResultEntry{Status: statusOf(sendFailure("send to "+q.broker, resp))}
	}
	rh := remoting.Header(resp.ExtFields)
	off, _ := rh.OptInt64("queueOffset", 0)
	e := &rmqpb.SendResultEntry{Status: okStatus(), MessageId: o.messageID, Offset: off,
		TransactionId: rh.OptString("transactionId", ""), RecallHandle: rh.OptString("recallHandle", "")}
	if o.sysFlag == commitlog.TransactionPrepared {
		// The half message's place, for the EndTransaction to come: its
		// half-queue offset and the CommitLog offset in its offset id.
		_, phy, err := commitlog.ParseMessageID(rh.OptString("msgId", ""))
		if err != nil {
			return &rmqpb.SendResultEntry{Status: statusOf(fmt.Errorf("half message sent, but its offset id: %w", err))}
		}
		if e.TransactionId == "" {
			e.TransactionId = o.messageID
		}
		s.txns.put(topic, e.TransactionId, txnData{addr: q.addr, broker: q.broker, tranStateTableOffset: off, commitLogOffset: phy, at: time.Now()})
	}
	return e
}

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
