package grpcproxy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// popInitModeMax is ConsumeInitMode.MAX: a group without an offset starts
// at the end of a queue (the broker starts at 0 while the queue's first
// message is still in memory), as RocketMQ's proxy pops.
const popInitModeMax = 1

// pollReserve is kept from a receive's deadline for the answer to travel
// back (longPollingReserveTimeInMillis).
const pollReserve = 100 * time.Millisecond

// ReceiveMessage pops messages of a topic for a group from one broker
// group (the one the request's queue names, or the next in turn) with
// long polling, and streams a status, the messages and the time they were
// sent, as RocketMQ's proxy does. Messages delivered more often than the
// group's retry policy allows go to the dead-letter queue instead.
func (s *Server) ReceiveMessage(req *rmqpb.ReceiveMessageRequest, stream rmqpb.MessagingService_ReceiveMessageServer) error {
	ctx := stream.Context()
	who := callerOf(ctx)
	s.clients.touch(who.clientID)
	msgs, err := s.receive(ctx, who, req)
	send := func(r *rmqpb.ReceiveMessageResponse) bool {
		if err := stream.Send(r); err != nil {
			s.log.Debug().Err(err).Str("client", who.clientID).Msg("receive answer not delivered")
			return false
		}
		return true
	}
	switch {
	case err != nil:
		if !send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Status{Status: statusOf(err)}}) {
			return nil
		}
	case len(msgs) == 0:
		st := &rmqpb.Status{Code: rmqpb.Code_MESSAGE_NOT_FOUND, Message: "no new message"}
		if !send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Status{Status: st}}) {
			return nil
		}
	default:
		if !send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Status{Status: okStatus()}}) {
			s.nack(who, msgs)
			return nil
		}
		for i, m := range msgs {
			if !send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Message{Message: m.proto}}) {
				s.nack(who, msgs[i:])
				return nil
			}
		}
	}
	send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_DeliveryTimestamp{DeliveryTimestamp: timestamppb.Now()}})
	return nil
}

// popped is a message ready to stream with what a nack of it needs.
type popped struct {
	proto  *rmqpb.Message
	handle Handle
	group  string
	topic  string // the real topic: the retry topic for retried messages
	addr   string
	// reconsumed is how often the message was delivered before, which a
	// renewal of it needs.
	reconsumed int
}

// receive pops for ReceiveMessage.
// pollTime is how long a receive polls: the long polling time it asks
// for, else, as RocketMQ's proxy, the time left before its deadline less
// half the client's request timeout (the margin the client keeps for the
// answer: the Go simple consumer sends no polling time and waits its
// await duration plus its request timeout, and an answer polled to the
// deadline came too late for it, the messages popped left invisible);
// within the configured bounds, and ending pollReserve before the
// deadline. A deadline too near for the shortest poll is refused.
func (s *Server) pollTime(asked *durationpb.Duration, left time.Duration, hasDeadline bool, clientTimeout time.Duration) (time.Duration, error) {
	poll := s.cfg.MaxLongPolling
	if asked != nil {
		poll = asked.AsDuration()
	} else if hasDeadline {
		poll = left - clientTimeout/2
	}
	poll = min(max(poll, s.cfg.MinLongPolling), s.cfg.MaxLongPolling)
	if hasDeadline {
		left -= pollReserve
		if poll > left {
			if left < s.cfg.MinLongPolling {
				return 0, fail(rmqpb.Code_ILLEGAL_POLLING_TIME, "the %v left before the deadline are not enough for long polling (at least %v)", left.Round(time.Millisecond), s.cfg.MinLongPolling)
			}
			poll = left
		}
	}
	return poll, nil
}

// illegalPollingTimeSince is the client version that introduced the
// status ILLEGAL_POLLING_TIME; RocketMQ's proxy answers older clients
// BAD_REQUEST instead.
const illegalPollingTimeSince = "5.0.3"

// knowsIllegalPollingTime reports whether a client of the version its
// x-mq-client-version names is answered ILLEGAL_POLLING_TIME, compared as
// RocketMQ's proxy compares it: as strings (so "5.0.10" is older than
// "5.0.3"), no version being older than any.
func knowsIllegalPollingTime(version string) bool {
	return version != "" && version >= illegalPollingTimeSince
}

// defaultClientRequestTimeout is the clients' request timeout when their
// settings name none (the 5.x clients' default, 3 s).
const defaultClientRequestTimeout = 3 * time.Second

// clientRequestTimeout returns the request timeout a client's settings
// name.
func (s *Server) clientRequestTimeout(clientID string) time.Duration {
	if st := s.clients.settings(clientID); st != nil && st.GetRequestTimeout() != nil {
		if d := st.GetRequestTimeout().AsDuration(); d > 0 {
			return d
		}
	}
	return defaultClientRequestTimeout
}

func (s *Server) receive(ctx context.Context, who caller, req *rmqpb.ReceiveMessageRequest) ([]popped, error) {
	if meta.IsBlank(who.clientID) {
		st := clientIDRequired()
		return nil, fail(st.Code, "%s", st.Message)
	}
	// The polling time is checked first, as RocketMQ's proxy does.
	left, hasDeadline := time.Duration(0), false
	if dl, ok := ctx.Deadline(); ok {
		left, hasDeadline = time.Until(dl), true
	}
	poll, err := s.pollTime(req.LongPollingTimeout, left, hasDeadline, s.clientRequestTimeout(who.clientID))
	if err != nil {
		var se *statusError
		if errors.As(err, &se) && !knowsIllegalPollingTime(who.version) {
			se.code = rmqpb.Code_BAD_REQUEST
		}
		return nil, err
	}
	topicRes := req.GetMessageQueue().GetTopic()
	topic, group := wrap(topicRes), wrap(req.GetGroup())
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	if err := checkGroup(group); err != nil {
		return nil, err
	}
	autoRenew := s.cfg.AutoRenew && req.GetAutoRenew()
	invisible := s.cfg.DefaultInvisible
	if !autoRenew {
		invisible = req.GetInvisibleDuration().AsDuration()
		if invisible < s.cfg.MinInvisible || invisible > s.cfg.MaxInvisible {
			return nil, fail(rmqpb.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration %v is outside %v..%v", invisible, s.cfg.MinInvisible, s.cfg.MaxInvisible)
		}
	}
	expType, exp := filterOf(req.GetFilterExpression())
	if expType == "SQL92" && exp == "" {
		// An empty expression would have the pop take every message;
		// RocketMQ's proxy refuses it (FilterAPI.build: "Expression
		// can't be null"), and a blank one fails to compile.
		return nil, fail(rmqpb.Code_ILLEGAL_FILTER_EXPRESSION, "the SQL filter expression is empty")
	}
	batch := int(req.GetBatchSize())
	if batch <= 0 {
		batch = s.cfg.ReceiveBatchSize
	}
	batch = min(batch, pop.MaxPopMessages) // as RocketMQ's proxy clamps it
	brokerName := req.GetMessageQueue().GetBroker().GetName()
	start := time.Now()
	var (
		addr     string
		settings *rmqpb.Settings
		res      popclient.PopResult
	)
	for moved := false; ; moved = true {
		r, err := s.routes.get(ctx, topic)
		if err != nil {
			return nil, err
		}
		a, ok := r.masters[brokerName]
		switch {
		case moved && (!ok || a == addr):
			// The route names no other master yet (it was asked
			// again within refreshFloor, or the group is between
			// masters): nothing this time; the client's next receive
			// asks again.
			return nil, nil
		case !ok:
			readable := r.readableBrokers()
			if len(readable) == 0 {
				return nil, fail(rmqpb.Code_FORBIDDEN, "topic %s has no readable queue", topic)
			}
			brokerName = readable[s.next.Add(1)%uint64(len(readable))].BrokerName
			a = r.masters[brokerName]
		}
		addr = a
		settings = s.consumerSettingsOf(ctx, who.clientID, r, group)
		res, err = s.popAt(ctx, addr, brokerName, popclient.PopRequest{
			Group: group, Topic: topic, QueueID: -1, MaxMsgNums: batch, InvisibleTime: invisible,
			// Once moved, what is left of the poll time.
			PollTime: max(poll-time.Since(start), 0), InitMode: popInitModeMax, Exp: exp, ExpType: expType,
			Order: settings.GetSubscription().GetFifo(), AttemptID: req.GetAttemptId(),
		})
		slave := err == nil && answeredBySlave(res.Header)
		if (err != nil && ctx.Err() == nil) || slave || (err == nil && refusedAsSlave(res.Code, res.Remark)) {
			s.routes.refusedBy(addr)
		}
		if err != nil {
			return nil, err
		}
		if !slave {
			break
		}
		// The broker the route names as master is a slave now (a
		// controller-mode switch demoted it since the route was
		// asked for). Its pop wrote nothing of its master's state, as
		// RocketMQ's slave's writes nothing: what it found is not
		// delivered (acks of it would change nothing, and the master
		// would deliver it again) but popped from the master the
		// route names once asked again, by this receive when it names
		// another. An orderly batch it handed out, which it keeps,
		// is given back to it (giveBackOrderly).
		s.log.Debug().Str("topic", topic).Str("broker", addr).Int("found", len(res.Messages)).
			Msg("the route's master answered a pop as a slave: asking for the route again")
		s.giveBackOrderly(ctx, addr, group, res.Messages)
		if moved {
			return nil, nil
		}
	}
	fifo := settings.GetSubscription().GetFifo()
	switch res.Code {
	case remoting.Success:
	case remoting.PullNotFound, remoting.PollingTimeout:
		return nil, nil
	default:
		return nil, popFailure("pop from "+brokerName, &remoting.Command{Code: res.Code, Remark: res.Remark})
	}
	maxAttempts := int(settings.GetBackoffPolicy().GetMaxAttempts())
	out := make([]popped, 0, len(res.Messages))
	for i := range res.Messages {
		pm := &res.Messages[i]
		if fifo {
			// An orderly pop redelivers the stored message unchanged: its
			// consumption count is the answer's orderCountInfo, as
			// RocketMQ's client reads it into reconsumeTimes.
			pm.ReconsumeTimes = max(pm.ReconsumeTimes, pm.OrderCount)
		}
		h := Handle{Handle: pm.Handle, CommitLogOffset: pm.PhyOffset}
		p := popped{handle: h, group: group, topic: pm.RealTopic, addr: addr}
		if maxAttempts > 0 && int(pm.ReconsumeTimes)+1 > maxAttempts {
			// Delivered as often as the group allows: to the dead-letter
			// queue, as RocketMQ's proxy filters a pop's result.
			msgID, _ := commitlog.LookupProperty(pm.Properties, propUniqKey)
			if err := s.toDLQ(ctx, addr, group, p, msgID); err != nil {
				s.log.Warn().Err(err).Str("group", group).Str("topic", topic).Msg("message over its delivery attempts not moved to the dead-letter queue")
			}
			continue
		}
		m, err := toProto(&received{msg: pm.Message, handle: h, topic: unwrap(topic, topicRes.GetResourceNamespace()), invisible: invisible})
		if err != nil {
			s.log.Error().Err(err).Str("group", group).Msg("popped message cannot be converted; it is delivered again after its invisible time")
			continue
		}
		m.Topic.ResourceNamespace = topicRes.GetResourceNamespace()
		p.proto = m
		p.reconsumed = int(pm.ReconsumeTimes)
		out = append(out, p)
	}
	if autoRenew && len(out) > 0 {
		if who.clientID != "" && !s.clients.known(who.clientID) {
			// The client ended (NotifyClientTermination) while the pop
			// waited: nobody would renew or settle these, so they are
			// visible again after a second and the answer says why, as
			// RocketMQ's proxy (apache/rocketmq#9253).
			s.nack(who, out)
			return nil, fail(rmqpb.Code_MESSAGE_NOT_FOUND, "The client [%s] is disconnected.", who.clientID)
		}
		for _, p := range out {
			s.renewer.add(who.clientID, p.handle.String(), held{handle: p.handle, group: p.group, topic: p.topic, routeTopic: topic, addr: p.addr, reconsumed: p.reconsumed}, invisible)
		}
	}
	return out, nil
}

// popAt pops from the broker at addr. The pop is not cancelled with the
// client: a broker's long poll goes on when its request is abandoned and
// pops what arrives, invisible for the whole invisible time. The answer
// is waited for, and what the gone client cannot take is nacked (visible
// again after a second).
func (s *Server) popAt(ctx context.Context, addr, brokerName string, req popclient.PopRequest) (popclient.PopResult, error) {
	rc, err := s.pool.Get(ctx, addr)
	if err != nil {
		return popclient.PopResult{}, err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), req.PollTime+s.cfg.RequestTimeout)
	defer cancel()
	return popclient.New(rc, brokerName).Pop(cctx, req)
}

// giveBackOrderly makes the orderly messages of a slave's pop answer,
// which the proxy does not deliver (receive), visible again on that
// broker after a second, as RocketMQ's proxy gives back what it popped
// and could not stream (CHANGE_MESSAGE_INVISIBLETIME with its
// NACK_INVISIBLE_TIME). A slave keeps the batch its orderly pop handed
// out, in its store too (pop.Service's slaveOrders), and it locks the
// group's queue there until its invisible time ends; were the broker
// made its group's master again before the elected master popped the
// queue, the batch, taken over (TakeOverSlaveState), would hold the
// queue for what is left of that time with messages no consumer has.
// Given back, it locks nothing. Its messages' consumption counts stay:
// the next orderly pop of them counts one more, as RocketMQ counts a
// batch its proxy could not stream. Messages popped without order are
// left alone: a slave keeps those in memory only, and refuses a change
// of their invisible time. A failure is logged, and ends the give-back
// (the broker is then likely gone, and its batch with it when it does
// not come back).
func (s *Server) giveBackOrderly(ctx context.Context, addr, group string, msgs []popclient.Message) {
	ctx = context.WithoutCancel(ctx) // the batch is the broker's, not the client's
	for i := range msgs {
		m := &msgs[i]
		if !m.Handle.Orderly() {
			continue
		}
		h := Handle{Handle: m.Handle, CommitLogOffset: m.PhyOffset}
		if _, err := s.changeInvisible(ctx, addr, group, m.RealTopic, h, time.Second); err != nil {
			s.log.Warn().Err(err).Str("group", group).Str("broker", addr).Str("topic", m.RealTopic).
				Msg("orderly batch a demoted master handed out not given back; it locks the queue there until its invisible time ends")
			return
		}
	}
}

// nack makes messages that could not be streamed to the client visible
// again after a second (RocketMQ's proxy's NACK_INVISIBLE_TIME).
func (s *Server) nack(who caller, msgs []popped) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	for _, p := range msgs {
		s.renewer.remove(ctx, who.clientID, p.handle.String())
		if _, err := s.changeInvisible(ctx, p.addr, p.group, p.topic, p.handle, time.Second); err != nil {
			s.log.Warn().Err(err).Str("group", p.group).Msg("message not streamed could not be made visible again; it is after its invisible time")
		}
	}
}

// AckMessage acknowledges received messages by their receipt handles.
func (s *Server) AckMessage(ctx context.Context, req *rmqpb.AckMessageRequest) (*rmqpb.AckMessageResponse, error) {
	who := callerOf(ctx)
	s.clients.touch(who.clientID)
	topic, group := wrap(req.GetTopic()), wrap(req.GetGroup())
	if err := checkTopic(topic); err != nil {
		return &rmqpb.AckMessageResponse{Status: statusOf(err)}, nil
	}
	if err := checkGroup(group); err != nil {
		return &rmqpb.AckMessageResponse{Status: statusOf(err)}, nil
	}
	out := &rmqpb.AckMessageResponse{}
	codes := map[rmqpb.Code]bool{}
	for _, e := range req.GetEntries() {
		st := statusOf(s.ackOne(ctx, who, topic, group, e.GetMessageId(), e.GetReceiptHandle()))
		codes[st.GetCode()] = true
		out.Entries = append(out.Entries, &rmqpb.AckMessageResultEntry{MessageId: e.GetMessageId(), ReceiptHandle: e.GetReceiptHandle(), Status: st})
	}
	switch {
	case len(out.Entries) == 0:
		// As RocketMQ's proxy: no result to answer with.
		out.Status = &rmqpb.Status{Code: rmqpb.Code_INTERNAL_SERVER_ERROR, Message: "ack message result is empty: no entry to acknowledge"}
	case len(codes) > 1:
		out.Status = &rmqpb.Status{Code: rmqpb.Code_MULTIPLE_RESULTS, Message: "the entries had different results"}
	default:
		out.Status = out.Entries[0].GetStatus()
	}
	return out, nil
}

// ackOne acknowledges one message: with the handle of its latest renewal
// when the proxy renews it, else with the handle the client holds.
func (s *Server) ackOne(ctx context.Context, who caller, topic, group, msgID, handle string) error {
	h, err := ParseHandle(handle)
	if err != nil {
		return fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%v", err)
	}
	if latest, ok := s.renewer.remove(ctx, who.clientID, handle); ok {
		h = latest
	}
	if err := checkNotExpired(h); err != nil {
		return err
	}
	addr, err := s.handleMaster(ctx, topic, h)
	if err != nil {
		return err
	}
	realTopic, err := pop.RealTopic(topic, group, h.RetryFlag)
	if err != nil {
		return fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%v", err)
	}
	resp, _, err := s.invokeHandleMaster(ctx, topic, addr, h, func() *remoting.Command {
		return popclient.AckRequest(group, realTopic, h.Handle)
	})
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		return ackFailure("ack", resp)
	}
	return nil
}

// invokeHandleMaster sends the request build makes for a receipt handle
// to addr, the master of the handle's broker group by the route of
// topic, following the group's master as followHandleMaster does. It
// returns the answer and the address of the broker that gave it.
func (s *Server) invokeHandleMaster(ctx context.Context, topic, addr string, h Handle, build func() *remoting.Command) (*remoting.Command, string, error) {
	return s.followHandleMaster(ctx, topic, addr, h, func(at string) (*remoting.Command, error) {
		return s.invoke(ctx, at, 0, build())
	})
}

// followHandleMaster has send send a request for a receipt handle to
// addr, the master of the handle's broker group by the route of topic.
// When the broker answers as one that is not its group's master
// (notMaster: a master demoted since the route was asked for, whose ack
// changes nothing, whose change of invisible time and send-back fail),
// the route is asked again (routes.refusedBy) and send sends the request
// once more, to the master the route names then: the handle's broker
// group is the same, and its new master holds the handle's checkpoint and
// record, copied to it while it was the old master's slave. When the
// route names no other master yet, the first answer is the result, as
// RocketMQ's proxy, which sends the request there until its route's
// refresh, answers it. It returns the answer and the address of the
// broker that gave it.
func (s *Server) followHandleMaster(ctx context.Context, topic, addr string, h Handle, send func(addr string) (*remoting.Command, error)) (*remoting.Command, string, error) {
	resp, err := send(addr)
	if err != nil || !notMaster(resp) {
		return resp, addr, err
	}
	s.routes.refusedBy(addr)
	moved, err := s.handleMaster(ctx, topic, h)
	if err != nil || moved == addr {
		return resp, addr, nil
	}
	s.log.Debug().Str("topic", topic).Str("slave", addr).Str("master", moved).
		Msg("the route's master answered as a slave: request sent to the master the route names now")
	resp, err = send(moved)
	return resp, moved, err
}

// ChangeInvisibleDuration makes a received message invisible for the given
// time from now (a consumer's nack asks for its retry pause) and answers
// the new receipt handle.
func (s *Server) ChangeInvisibleDuration(ctx context.Context, req *rmqpb.ChangeInvisibleDurationRequest) (*rmqpb.ChangeInvisibleDurationResponse, error) {
	who := callerOf(ctx)
	s.clients.touch(who.clientID)
	topic, group := wrap(req.GetTopic()), wrap(req.GetGroup())
	if err := checkTopic(topic); err != nil {
		return &rmqpb.ChangeInvisibleDurationResponse{Status: statusOf(err)}, nil
	}
	if err := checkGroup(group); err != nil {
		return &rmqpb.ChangeInvisibleDurationResponse{Status: statusOf(err)}, nil
	}
	d := req.GetInvisibleDuration().AsDuration()
	if d < 0 || d > s.cfg.MaxInvisible {
		return &rmqpb.ChangeInvisibleDurationResponse{Status: statusOf(fail(rmqpb.Code_ILLEGAL_INVISIBLE_TIME, "invisible duration %v is outside 0..%v", d, s.cfg.MaxInvisible))}, nil
	}
	h, err := ParseHandle(req.GetReceiptHandle())
	if err != nil {
		return &rmqpb.ChangeInvisibleDurationResponse{Status: statusOf(fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%v", err))}, nil
	}
	if latest, ok := s.renewer.remove(ctx, who.clientID, req.GetReceiptHandle()); ok {
		h = latest // the client now decides when it is due
	}
	if err := checkNotExpired(h); err != nil {
		return &rmqpb.ChangeInvisibleDurationResponse{Status: statusOf(err)}, nil
	}
	addr, err := s.handleMaster(ctx, topic, h)
	if err != nil {
		return &rmqpb.ChangeInvisibleDurationResponse{Status: statusOf(err)}, nil
	}
	realTopic, err := pop.RealTopic(topic, group, h.RetryFlag)
	if err != nil {
		return &rmqpb.ChangeInvisibleDurationResponse{Status: statusOf(fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%v", err))}, nil
	}
	nh, _, err := s.changeInvisibleAt(ctx, topic, addr, group, realTopic, h, d)
	if err != nil {
		return &rmqpb.ChangeInvisibleDurationResponse{Status: statusOf(err)}, nil
	}
	return &rmqpb.ChangeInvisibleDurationResponse{Status: okStatus(), ReceiptHandle: nh.String()}, nil
}

// changeInvisible sends CHANGE_MESSAGE_INVISIBLETIME for a handle on the
// real topic and returns the new handle (the pop's start becomes the
// message's offset, as RocketMQ's clients rebuild it).
func (s *Server) changeInvisible(ctx context.Context, addr, group, realTopic string, h Handle, d time.Duration) (Handle, error) {
	resp, err := s.invoke(ctx, addr, 0, popclient.ChangeInvisibleRequest(group, realTopic, h.Handle, d))
	if err != nil {
		return h, err
	}
	return changedHandle(h, resp)
}

// changeInvisibleAt is changeInvisible for a handle whose broker group's
// master is addr by the route of routeTopic (the topic the message was
// received from), following the group's master to where the route names
// it when addr answers as a slave (invokeHandleMaster); it returns the
// new handle and the address of the broker that changed it.
func (s *Server) changeInvisibleAt(ctx context.Context, routeTopic, addr, group, realTopic string, h Handle, d time.Duration) (Handle, string, error) {
	resp, used, err := s.invokeHandleMaster(ctx, routeTopic, addr, h, func() *remoting.Command {
		return popclient.ChangeInvisibleRequest(group, realTopic, h.Handle, d)
	})
	if err != nil {
		return h, addr, err
	}
	nh, err := changedHandle(h, resp)
	return nh, used, err
}

// changedHandle reads a broker's answer to a change of a handle's
// invisible time into the new handle.
func changedHandle(h Handle, resp *remoting.Command) (Handle, error) {
	if resp.Code != remoting.Success {
		return h, ackFailure("changeInvisibleDuration", resp)
	}
	ph, err := popclient.ChangedHandle(h.Handle, resp)
	if err != nil {
		return h, err
	}
	return Handle{Handle: ph, CommitLogOffset: h.CommitLogOffset}, nil
}

// ForwardMessageToDeadLetterQueue moves a received message to its group's
// dead-letter queue (a consumer gave up on it) and acknowledges it.
func (s *Server) ForwardMessageToDeadLetterQueue(ctx context.Context, req *rmqpb.ForwardMessageToDeadLetterQueueRequest) (*rmqpb.ForwardMessageToDeadLetterQueueResponse, error) {
	who := callerOf(ctx)
	s.clients.touch(who.clientID)
	topic, group := wrap(req.GetTopic()), wrap(req.GetGroup())
	answer := func(err error) (*rmqpb.ForwardMessageToDeadLetterQueueResponse, error) {
		return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: statusOf(err)}, nil
	}
	if err := checkTopic(topic); err != nil {
		return answer(err)
	}
	if err := checkGroup(group); err != nil {
		return answer(err)
	}
	h, err := ParseHandle(req.GetReceiptHandle())
	if err != nil {
		return answer(fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%v", err))
	}
	if latest, ok := s.renewer.remove(ctx, who.clientID, req.GetReceiptHandle()); ok {
		h = latest
	}
	// An expired handle is forwarded all the same, as RocketMQ's proxy
	// forwards it (the send-back copies the record by its CommitLog
	// offset): a FIFO push consumer forwards a message after its local
	// retries, which may outlast the handle, and sends the forward again
	// at once, without end, while it is answered anything but OK.
	addr, err := s.handleMaster(ctx, topic, h)
	if err != nil {
		return answer(err)
	}
	realTopic, err := pop.RealTopic(topic, group, h.RetryFlag)
	if err != nil {
		return answer(fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "%v", err))
	}
	// The send-back follows the group's master as acks do: a master
	// demoted since the route was asked for refuses it as a slave
	// ([REJECTREQUEST]), and a FIFO consumer would send the forward to
	// it again and again until the route's TTL. The record is checked
	// on the broker that copies it.
	p := popped{handle: h, group: group, topic: realTopic}
	resp, used, err := s.followHandleMaster(ctx, topic, addr, h, func(at string) (*remoting.Command, error) {
		if err := s.checkHandleNamesRecord(ctx, at, realTopic, h); err != nil {
			return nil, err
		}
		return s.invoke(ctx, at, 0, sendBackRequest(group, p, req.GetMessageId()))
	})
	p.addr = used
	return answer(s.sentBack(ctx, used, group, p, resp, err))
}

// checkHandleNamesRecord reads the record at a handle's CommitLog offset
// (VIEW_MESSAGE_BY_ID) and refuses the handle unless the record is the
// message it names: of its real topic, queue and offset. The broker copies
// whatever record lies at the offset into the dead-letter queue, and a
// handle is client input: without this, a client allowed to consume one
// topic could copy any message into its group's dead-letter queue.
func (s *Server) checkHandleNamesRecord(ctx context.Context, addr, realTopic string, h Handle) error {
	resp, err := s.invoke(ctx, addr, 0, remoting.NewRequest(remoting.ViewMessageByID,
		map[string]string{"offset": strconv.FormatInt(h.CommitLogOffset, 10)}, nil))
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		return fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "the receipt handle names no message (broker answered %d: %s)", resp.Code, resp.Remark)
	}
	m, err := commitlog.Decode(resp.Body)
	if err != nil {
		return fmt.Errorf("message at %d: %w", h.CommitLogOffset, err)
	}
	if m.Topic != realTopic || m.QueueID != h.QueueID || m.QueueOffset != h.QueueOffset {
		return fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "the receipt handle does not name the message stored at its CommitLog offset")
	}
	return nil
}

// toDLQ sends a popped message to its group's dead-letter queue
// (CONSUMER_SEND_MSG_BACK with delay level -1, by CommitLog offset) and
// then acknowledges it, so that it is not delivered again. The request's
// originTopic is the topic the message was popped from, the retry topic
// for a retried message, as RocketMQ's proxy sends it. The result is the
// send-back's, its code passed on as RocketMQ's proxy passes it
// (responseCode: TOPIC_NOT_EXIST too is INTERNAL_SERVER_ERROR here); the
// ack that follows is logged when it fails, not answered, as RocketMQ's
// proxy does not wait for it: the message is in the dead-letter queue.
func (s *Server) toDLQ(ctx context.Context, addr, group string, p popped, msgID string) error {
	resp, err := s.invoke(ctx, addr, 0, sendBackRequest(group, p, msgID))
	return s.sentBack(ctx, addr, group, p, resp, err)
}

// sendBackRequest is the CONSUMER_SEND_MSG_BACK that moves a popped
// message to its group's dead-letter queue (toDLQ).
func sendBackRequest(group string, p popped, msgID string) *remoting.Command {
	h := map[string]string{
		"offset": strconv.FormatInt(p.handle.CommitLogOffset, 10), "group": group, "delayLevel": "-1",
		"originTopic": p.topic, "unitMode": "false", "maxReconsumeTimes": "0",
	}
	if msgID != "" {
		h["originMsgId"] = msgID
	}
	return remoting.NewRequest(remoting.ConsumerSendMsgBack, h, nil)
}

// sentBack reads the answer of the broker at addr to a send-back
// (sendBackRequest) and, when it moved the message, acknowledges the
// message there, as toDLQ describes.
func (s *Server) sentBack(ctx context.Context, addr, group string, p popped, resp *remoting.Command, err error) error {
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		return fail(responseCode(resp.Code), "forward to the dead-letter queue: broker answered code %d: %s", resp.Code, resp.Remark)
	}
	resp, err = s.invoke(ctx, addr, 0, popclient.AckRequest(group, p.topic, p.handle.Handle))
	if err == nil && resp.Code != remoting.Success {
		err = ackFailure("ack", resp)
	}
	if err != nil {
		s.log.Warn().Err(err).Str("group", group).Str("topic", p.topic).Msg("message forwarded to the dead-letter queue but not acknowledged; it is delivered again after its invisible time")
	}
	return nil
}

// handleMaster returns the master address of the broker group a receipt
// handle names, by the route of the request's topic. A handle naming a
// group the route does not have is INVALID_RECEIPT_HANDLE ("cannot find
// broker"), as RocketMQ's proxy refuses a handle whose broker it cannot
// resolve.
func (s *Server) handleMaster(ctx context.Context, topic string, h Handle) (string, error) {
	r, err := s.routes.get(ctx, topic)
	if err != nil {
		return "", err
	}
	if addr, ok := r.masters[h.BrokerName]; ok {
		return addr, nil
	}
	return "", fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "cannot find broker %s", h.BrokerName)
}

// checkNotExpired refuses a handle whose invisible time is over, as
// RocketMQ's proxy does: the broker would answer an ack of it OK without
// acknowledging anything (the message is delivered again), and a client
// told OK would not know.
func checkNotExpired(h Handle) error {
	if h.PopTime+h.InvisibleTime <= time.Now().UnixMilli() {
		return fail(rmqpb.Code_INVALID_RECEIPT_HANDLE, "receipt handle is expired")
	}
	return nil
}
