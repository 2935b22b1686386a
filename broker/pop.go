package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// popBroker lends the POP service what it needs of the broker.
type popBroker struct{ b *Broker }

// ReadQueueNums implements pop.Broker.
func (a popBroker) ReadQueueNums(topic string) (int, bool, error) {
	tc, ok, err := a.b.topics.get(topic)
	return tc.ReadQueueNums, ok, err
}

// EnsureTopic implements pop.Broker: a pop-retry or DLQ topic with one
// queue, readable and writable.
func (a popBroker) EnsureTopic(topic string) error {
	_, err := a.b.topics.ensureSystemTopic(topic, 1, meta.PermRead|meta.PermWrite)
	return err
}

// RetryMaxTimes implements pop.Broker with the group's config, created
// with the defaults when auto-creation is on; a group that does not exist
// and is not created is not ok.
func (a popBroker) RetryMaxTimes(group string) (int32, bool, error) {
	gc, err := a.b.groupConfig(group, true)
	if err != nil || gc.GroupName == "" {
		return 0, false, err
	}
	return int32(gc.RetryMaxTimes), true, nil
}

// Put implements pop.Broker.
func (a popBroker) Put(ctx context.Context, msgs []*commitlog.Message) (commitlog.AppendStatus, error) {
	res, err := a.b.putMessages(ctx, msgs, true)
	if err != nil {
		return res.Status, err
	}
	a.b.countDLQ(msgs)
	return res.Status, nil
}

// WaitDispatched implements pop.Broker.
func (a popBroker) WaitDispatched(ctx context.Context) error {
	return a.b.disp.WaitFor(ctx, a.b.clog.MaxOffset())
}

// popFilter adapts a subscription to pop.Filter.
type popFilter struct{ s *subscription }

func (f popFilter) MatchesCode(code int64) bool   { return f.s.matchesCode(code) }
func (f popFilter) MatchesRecord(rec []byte) bool { return f.s.matchesRecord(rec) }

// startPop creates the POP service and its long-polling holds.
func (b *Broker) startPop() error {
	svc, err := pop.New(pop.Config{
		DB: b.db, CQ: b.cqs, Log: b.clog, Offsets: b.offsets, Broker: popBroker{b},
		BrokerName: b.cfg.BrokerName, StoreHost: b.storeHost,
		RetryTopicV2: b.cfg.EnableRetryTopicV2, ReadRetryV1: b.cfg.RetrieveMessageFromPopRetryTopicV1,
		RetryFirstPercent:      retryFirstPercent(b.cfg.PopFromRetryProbability),
		OnQueueReady:           func(topic, group string, queueID int32) { b.popHolds.notifyGroup(topic, group, queueID) },
		QuietOrderLockRelease:  !b.cfg.EnableNotifyAfterPopOrderLockRelease,
		ReturnActualRetryTopic: b.cfg.PopResponseReturnActualRetryTopic,
		DropExhaustedRevives:   b.cfg.SkipWhenCKRePutReachMaxTimes,
		StageAhead:             b.cfg.PopReviveStageAhead,
		GiveBackWait:           b.reviveGiveBackWait,
		InMemory: func(phy int64, size int32) bool {
			return b.current().InitPopOffsetByCheckMsgInMem && b.resident(phy, size)
		},
		InFlightLimit: func() (int64, bool) {
			c := b.current()
			return c.PopInflightMessageThreshold, c.EnablePopMessageThreshold
		},
		Compaction:       b.compaction,
		MaxTransferBytes: b.cfg.MaxTransferBytesOnMessageInMemory,
		Observer:         popObserver(b.metrics, b.cfg.EnablePopMetrics),
		Logger:           b.root,
	})
	if err != nil {
		return err
	}
	if b.isSlave() {
		// What the slave's own pops kept before it stopped (RocketMQ's
		// slave loads its offset and order info files).
		n, err := svc.LoadSlaveState()
		if err != nil {
			return errors.Join(err, svc.Close())
		}
		if n > 0 {
			b.log.Info().Int("queues", n).Msg("slave: loaded the offsets and orderly batches its own pops kept")
		}
	} else {
		// A slave restarted as the master: what its own pops kept goes on.
		n, err := svc.TakeOverSlaveState()
		if err != nil {
			return errors.Join(err, svc.Close())
		}
		if n > 0 {
			b.log.Info().Int("queues", n).Msg("took over the offsets and orderly batches this broker's pops kept as a slave")
		}
	}
	b.popSvc = svc
	b.reviving.Store(svc)
	b.popHolds = newPopHolds(b)
	if !b.isSlave() {
		// Revive puts messages; a slave's come from its master, but an
		// acting master's (changeSpecialServices).
		svc.Start()
	}
	return nil
}

// stopPop stops revive.
func (b *Broker) stopPop() error {
	if b.popSvc == nil {
		return nil
	}
	b.reviving.Store(nil)
	err := b.popSvc.Close()
	b.popSvc = nil
	return err
}

// popHeader is PopMessageRequestHeader.
type popHeader struct {
	group, topic  string
	queueID       int32
	maxMsgNums    int32
	invisibleTime int64
	pollTime      int64
	bornTime      int64
	initMode      int32
	expType, exp  string
	order         bool
	attemptID     string
}

func parsePopHeader(req *remoting.Command) (popHeader, error) {
	r := remoting.Header(req.ExtFields).Reader()
	p := popHeader{
		group:         r.String("consumerGroup"),
		topic:         r.String("topic"),
		queueID:       r.Int32("queueId"),
		maxMsgNums:    r.Int32("maxMsgNums"),
		invisibleTime: r.Int64("invisibleTime"),
		pollTime:      r.Int64("pollTime"),
		bornTime:      r.OptInt64("bornTime", 0),
		initMode:      r.OptInt32("initMode", pop.InitMin),
		expType:       r.OptString("expType", exprTag),
		exp:           r.OptString("exp", ""),
		order:         r.OptBool("order", false),
		attemptID:     r.OptString("attemptId", ""),
	}
	return p, r.Err()
}

// popTimeoutTooMuch is how far past bornTime + pollTime a pop may arrive
// before it is refused at once (RocketMQ's isTimeoutTooMuch).
const popTimeoutTooMuch = 500

// processPop answers POP_MESSAGE; a pop that finds nothing and may poll is
// held until a message arrives for its topic or pop-retry topic, or its
// poll time is up.
func (b *Broker) processPop(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	p, err := parsePopHeader(req)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "bad pop request header: "+err.Error())
	}
	if p.bornTime <= 0 {
		p.bornTime = time.Now().UnixMilli()
	}
	return b.pop(conn, req, p)
}

// The verbs of popCheck's answer to a read-forbidden broker: RocketMQ's
// PopMessageProcessor says "pop message", its PEEK_MESSAGE, NOTIFICATION
// and POLLING_INFO processors "peeking message".
const (
	popVerb  = "pop"
	peekVerb = "peeking"
)

// popCheck validates a POP, PEEK, NOTIFICATION or POLLING_INFO request
// the way RocketMQ's processors do; it returns the request's subscription
// (nil when it takes every message) or an error response. verb (popVerb
// or peekVerb) words the refusal of a broker that may not be read, which
// names it by brokerIP1 as RocketMQ's does.
func (b *Broker) popCheck(req *remoting.Command, verb, group, topic string, queueID int32, expType, exp string) (*subscription, *remoting.Command) {
	fail := func(code int32, format string, args ...any) (*subscription, *remoting.Command) {
		return nil, remoting.NewResponse(req, code, fmt.Sprintf(format, args...))
	}
	if !meta.Readable(b.permission()) {
		return fail(remoting.NoPermission, "the broker[%s] %s message is forbidden", b.announcedHost(), verb)
	}
	tc, ok, err := b.topicConfig(topic)
	if err != nil {
		return fail(remoting.SystemError, "%v", err)
	}
	if !ok {
		return fail(remoting.TopicNotExist, "topic[%s] not exist, apply first please! %s", topic, faqSuggestion)
	}
	if !meta.Readable(tc.Perm) {
		return fail(remoting.NoPermission, "the topic[%s] peeking message is forbidden", topic)
	}
	if int(queueID) >= tc.ReadQueueNums {
		return fail(remoting.InvalidParameter, "queueId[%d] is illegal, topic:[%s] topicConfig.readQueueNums:[%d]", queueID, topic, tc.ReadQueueNums)
	}
	gc, err := b.groupConfig(group, true)
	if err != nil {
		return fail(remoting.SystemError, "%v", err)
	}
	if gc.GroupName == "" {
		return fail(remoting.SubscriptionGroupNotExist, "subscription group [%s] does not exist, %s", group, faqSuggestion)
	}
	if !gc.ConsumeEnable {
		return fail(remoting.NoPermission, "subscription group no permission, %s", group)
	}
	if exp == "" {
		return nil, nil
	}
	sub, err := newSubscription(topic, exp, expType, 0)
	if err != nil {
		b.refusedLog.Warn().Err(err).Str("group", group).Str("topic", topic).Str("subscription", exp).
			Msg("pop refused: its subscription does not parse")
		return fail(remoting.SubscriptionParseFailed, "parse the consumer's subscription failed")
	}
	if sub.all {
		return nil, nil
	}
	return sub, nil
}

// pop runs one pass of a pop; a slave's answer says it is one
// (markSlave).
func (b *Broker) pop(conn *remoting.Conn, req *remoting.Command, p popHeader) *remoting.Command {
	return b.markSlave(b.popPass(conn, req, p))
}

// markSlave sets remoting.FieldSlave on resp (nil: held, nothing to
// mark) when the broker is a slave following its master: an answer of
// POP, ack or change of invisible time that RocketMQ's slave gives as a
// master would, which tells a client routed here as to the master, by a
// route older than a controller-mode switch, to ask for the route again.
// An acting master, which name servers route as its group's master,
// does not set it.
func (b *Broker) markSlave(resp *remoting.Command) *remoting.Command {
	if resp == nil || b.specialServicesActive() {
		return resp
	}
	if resp.ExtFields == nil {
		resp.ExtFields = map[string]string{}
	}
	resp.ExtFields[remoting.FieldSlave] = "true"
	return resp
}

// slaveMarked is process with its answers marked by markSlave.
func (b *Broker) slaveMarked(process remoting.RespondFunc) remoting.RespondFunc {
	return func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		return b.markSlave(process(ctx, conn, req))
	}
}

// popPass runs one pass of a pop for pop.
func (b *Broker) popPass(conn *remoting.Conn, req *remoting.Command, p popHeader) *remoting.Command {
	now := time.Now().UnixMilli()
	if now-p.bornTime-p.pollTime > popTimeoutTooMuch {
		// With the header's fields, zero, as RocketMQ's: the Java client
		// decodes them from every POLLING_TIMEOUT and fails the pop
		// (waiting 3 s) when one is missing.
		resp := remoting.NewResponse(req, remoting.PollingTimeout, fmt.Sprintf("the broker[%s] pop message is timeout too much", b.announcedHost()))
		resp.ExtFields = zeroFields("popTime", "invisibleTime", "reviveQid", "restNum")
		return resp
	}
	// RocketMQ bounds maxMsgNums from above only. A pop asking for no
	// message (0 or less) reads no queue: it finds nothing and ends like
	// any pop that finds nothing, held to its poll time and answered
	// POLLING_TIMEOUT.
	if p.maxMsgNums > pop.MaxPopMessages {
		return remoting.NewResponse(req, remoting.InvalidParameter, fmt.Sprintf("the broker[%s] pop message's num is greater than 32", b.announcedHost()))
	}
	wantsNone := p.maxMsgNums <= 0
	sub, resp := b.popCheck(req, popVerb, p.group, p.topic, p.queueID, p.expType, p.exp)
	if resp != nil {
		return resp
	}
	var filter pop.Filter
	if sub != nil {
		filter = popFilter{sub}
	}
	preq := pop.PopRequest{
		Group: p.group, Topic: p.topic, QueueID: p.queueID, MaxMsgNums: int(max(p.maxMsgNums, 0)),
		InvisibleTime: p.invisibleTime, InitMode: p.initMode, Order: p.order, AttemptID: p.attemptID, Filter: filter,
		Body: b.bodies.get(0),
	}
	var res pop.PopResult
	var err error
	if b.isSlave() {
		// RocketMQ's slave answers a pop with the messages and writes
		// nothing (pop.Service.PopReadOnly): its master's checkpoint and
		// offsets are the ones that count, copied here by the slave sync.
		// What it handed out it keeps in memory, so that the next pop
		// goes on past it; its own offsets and orderly batches in its
		// store too (pop.Service.LoadSlaveState).
		res, err = b.popSvc.PopReadOnly(preq)
	} else {
		// A pop starts from the committed offset a reset set; the reset's
		// wait for a pull ends here, as RocketMQ erases it at the queue's
		// pop (getPopOffset). Left waiting, it would move a later pull of
		// the group back past everything the pops consumed.
		b.resets.takePopped(p.group, p.topic, p.queueID)
		res, err = b.popSvc.Pop(preq)
	}
	sent := false
	defer func() {
		if !sent {
			b.bodies.put(res.Body)
		}
	}()
	if err != nil {
		b.log.Error().Err(err).Str("group", p.group).Str("topic", p.topic).Msg("pop failed")
		return remoting.NewResponse(req, remoting.SystemError, "pop failed: "+err.Error())
	}
	b.protectFromSlowReader(p.group, res.LowestPhy)
	code, remark := remoting.Success, "FOUND"
	if len(res.Records) == 0 {
		ready := func() bool {
			has, err := b.popHasMessage(p.group, p.topic, p.queueID, p.order, p.attemptID)
			return err != nil || has
		}
		waitTopics := b.popWaitTopics(p.topic, p.group, p.order)
		if wantsNone {
			// Nothing it could find: only its poll time ends it.
			ready, waitTopics = func() bool { return false }, nil
		}
		// No poll time is no polling: 210 at once, before the count of
		// held requests or the deadline is looked at (RocketMQ's
		// NOT_POLLING), even when a client's clock ahead of ours puts
		// bornTime in the future.
		outcome := holdTimeout
		if p.pollTime > 0 {
			outcome = b.popHolds.hold(popHoldKey{p.topic, p.group, p.queueID}, p.bornTime+p.pollTime, waitTopics,
				b.popArrivalMatch(sub), ready, func() {
					rerunHeld(conn, req, func() *remoting.Command { return b.pop(conn, req, p) })
				})
		}
		switch outcome {
		case holdOK:
			// Messages left behind that another pop can get (RestNum
			// leaves out those an orderly batch locks: this pop, woken,
			// would find them locked again and spin until the lock ran
			// out). A pop that wants none would wake itself.
			if res.RestNum > 0 && !wantsNone {
				b.popHolds.notifyGroup(p.topic, p.group, p.queueID)
			}
			return nil
		case holdFull:
			code = remoting.PollingFull
		default:
			code = remoting.PollingTimeout
		}
		remark = "NO_MESSAGE_IN_QUEUE"
	} else if res.RestNum > 0 {
		b.popHolds.notifyGroup(p.topic, p.group, p.queueID)
	}
	resp = remoting.NewResponse(req, code, remark)
	h := remoting.Header{}
	h.SetInt64("popTime", res.PopTime)
	h.SetInt64("invisibleTime", res.InvisibleTime)
	h.SetInt32("reviveQid", res.ReviveQID)
	h.SetInt64("restNum", res.RestNum)
	h.Set("startOffsetInfo", res.StartOffsetInfo)
	h.Set("msgOffsetInfo", res.MsgOffsetInfo)
	if p.order && res.OrderCountInfo != "" {
		h.Set("orderCountInfo", res.OrderCountInfo)
	}
	resp.ExtFields = h
	if code == remoting.Success {
		b.bodies.attach(resp, res.Body)
		sent = true
		b.countPopOut(p.topic, p.group, &res)
	} else {
		b.stats.Miss()
	}
	return resp
}

// popHasMessage reports whether a pop of the queue would find a message
// now: on a slave, a read-only pop from where it would start.
func (b *Broker) popHasMessage(group, topic string, queueID int32, order bool, attemptID string) (bool, error) {
	if b.isSlave() {
		return b.popSvc.HasMessageReadOnly(group, topic, queueID, order, attemptID)
	}
	return b.popSvc.HasMessage(group, topic, queueID, order, attemptID)
}

// popWaitTopics are the topics whose dispatches wake a held pop: the topic
// and, for non-orderly pops, the group's pop-retry topics.
func (b *Broker) popWaitTopics(topic, group string, order bool) []string {
	out := []string{topic}
	if !order {
		if b.cfg.RetrieveMessageFromPopRetryTopicV1 || !b.cfg.EnableRetryTopicV2 {
			out = append(out, pop.RetryTopicV1(topic, group))
		}
		if b.cfg.EnableRetryTopicV2 {
			out = append(out, pop.RetryTopicV2(topic, group))
		}
	}
	return out
}

// ackTarget validates an ack or change of invisible time of one message:
// the topic must exist, the queue be readable and the offset inside the
// queue (up to maxOffset inclusive for acks, exclusive for changes, as
// RocketMQ checks).
func (b *Broker) ackTarget(req *remoting.Command, topic string, queueID int32, offset int64, inclusive bool) *remoting.Command {
	tc, ok, err := b.topicConfig(topic)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if !ok {
		return remoting.NewResponse(req, remoting.TopicNotExist, fmt.Sprintf("topic[%s] not exist, apply first please! %s", topic, faqSuggestion))
	}
	if queueID < 0 || int(queueID) >= tc.ReadQueueNums {
		return remoting.NewResponse(req, remoting.MessageIllegal, fmt.Sprintf("queueId[%d] is illegal, topic:[%s] topicConfig.readQueueNums:[%d]", queueID, topic, tc.ReadQueueNums))
	}
	minOff, maxOff, err := b.queueRange(topic, queueID)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if offset < minOff || offset > maxOff || (!inclusive && offset == maxOff) {
		return remoting.NewResponse(req, remoting.NoMessage, fmt.Sprintf("offset is illegal, key:%s@%d, commit:%d, store:%d~%d", topic, queueID, offset, minOff, maxOff))
	}
	return nil
}

// processAck answers ACK_MESSAGE. RocketMQ answers SUCCESS for a handle
// that matches nothing in flight (acknowledged, expired and revived,
// stale); so does this.
//
// On a slave a non-orderly ack that passes the checks is answered
// SUCCESS and changes nothing in the store, as RocketMQ's slave answers
// it: its AckMessageProcessor puts the ack through EscapeBridge, which
// puts nothing on a broker that is not broker 0 and says
// SERVICE_NOT_AVAILABLE, which the processor only logs (and takes the
// message out of its in-flight counter, as the slave's own count for the
// threshold is here). The master's in-flight state, which the slave
// copies, is the one a promoted slave revives; an ack of a message
// popped from the master is for the master, but on an acting master
// that revives that state (enableRemoteEscape), where it takes the
// message out of its copy so that it is not revived (RocketMQ's acting
// master escapes its ACK to a revive queue of another group's master,
// which the message's checkpoint seldom reaches). An orderly
// ack moves what the slave keeps of its own orderly pops
// (pop.Service.AckReadOnly), as RocketMQ's slave's ackOrderly moves its
// order info and offset table (which it persists), and is MESSAGE_ILLEGAL for an
// offset outside the batch an orderly pop on the slave handed out.
func (b *Broker) processAck(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	group, topic, queueID := r.String("consumerGroup"), r.String("topic"), r.Int32("queueId")
	extra, offset := r.String("extraInfo"), r.Int64("offset")
	if err := r.Err(); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "bad ack request header: "+err.Error())
	}
	if resp := b.ackTarget(req, topic, queueID, offset, true); resp != nil {
		return resp
	}
	h, err := pop.ParseHandle(extra)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if b.isSlave() {
		if _, err := b.popSvc.AckReadOnly(group, topic, queueID, offset, h); err != nil {
			return b.popError(req, err)
		}
		return remoting.NewResponse(req, remoting.Success, "")
	}
	if _, err := b.popSvc.Ack(group, topic, queueID, offset, h); err != nil {
		return b.popError(req, err)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// popError maps a POP service error to a response.
func (b *Broker) popError(req *remoting.Command, err error) *remoting.Command {
	if errors.Is(err, pop.ErrIllegalOffset) {
		return remoting.NewResponse(req, remoting.MessageIllegal, err.Error())
	}
	b.log.Error().Err(err).Int32("code", req.Code).Msg("pop state change failed")
	return remoting.NewResponse(req, remoting.SystemError, err.Error())
}

// processBatchAck answers BATCH_ACK_MESSAGE: every entry's offsets inside
// its queue are acknowledged; entries of unknown topics and offsets out of
// range are skipped, as RocketMQ does. An orderly offset outside its batch
// makes the answer MESSAGE_ILLEGAL, the other offsets acknowledged all the
// same (RocketMQ's ackOrderly per offset). On a slave the entries are
// acknowledged as single acks are there (processAck): the orderly ones
// in the slave's memory, the others not at all.
func (b *Broker) processBatchAck(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	if len(req.Body) == 0 {
		return remoting.NewResponse(req, remoting.NoMessage, "")
	}
	body, err := pop.DecodeBatchAck(req.Body)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if len(body.Acks) == 0 {
		return remoting.NewResponse(req, remoting.NoMessage, "")
	}
	total := 0
	for i := range body.Acks {
		total += body.Acks[i].Count()
	}
	if total > pop.MaxBatchAckOffsets {
		b.log.Warn().Int("offsets", total).Int("entries", len(body.Acks)).Msg("BATCH_ACK_MESSAGE refused: it acknowledges more offsets than any pops returned")
		return remoting.NewResponse(req, remoting.SystemError,
			fmt.Sprintf("batch ack of %d offsets: at most %d in one request", total, pop.MaxBatchAckOffsets))
	}
	entries := make([]pop.AckEntry, 0, len(body.Acks))
	for i := range body.Acks {
		a := &body.Acks[i]
		topic, err := pop.RealTopic(a.Topic, a.ConsumerGroup, a.Retry)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		if _, ok, err := b.topicConfig(topic); err != nil || !ok {
			continue
		}
		minOff, maxOff, err := b.queueRange(topic, a.QueueID)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		offsets := a.OffsetsIn(minOff, maxOff)
		b.warnAckPastTheEnd(a, topic, maxOff)
		if len(offsets) == 0 {
			continue
		}
		entries = append(entries, pop.AckEntry{Group: a.ConsumerGroup, Topic: topic, QueueID: a.QueueID, CKOffset: a.StartOffset,
			Offsets: offsets, PopTime: a.PopTime, InvisibleTime: a.InvisibleTime, Orderly: a.ReviveQueueID == pop.OrderReviveQueue})
	}
	if b.isSlave() {
		if _, err := b.popSvc.AckBatchReadOnly(entries); err != nil {
			return b.popError(req, err)
		}
		return remoting.NewResponse(req, remoting.Success, "")
	}
	if _, err := b.popSvc.AckBatch(entries); err != nil {
		return b.popError(req, err)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// warnAckPastTheEnd logs the offsets of a batch ack entry above its
// queue's MaxOffset (which RocketMQ's range check still admits), which
// processBatchAck skips and answers SUCCESS for, as RocketMQ does. No pop
// hands such an offset out, so the consumer that sent them names messages
// this broker never served (another broker's, or a broker that read past
// its own end), and a message it meant to acknowledge may come back at its
// deadline. Offsets below the minimum, whose messages retention removed,
// are skipped without a word. A client sends such acks at will, so the
// warning goes to refusedLog, which bounds its lines a second.
func (b *Broker) warnAckPastTheEnd(a *pop.BatchAck, topic string, maxOff int64) {
	if a.StartOffset+8*int64(len(a.Bits))-1 <= maxOff {
		return // no bit reaches past the end: the common case, no walk
	}
	past := a.OffsetsIn(maxOff+1, math.MaxInt64)
	if len(past) == 0 {
		return
	}
	b.refusedLog.Warn().Str("group", a.ConsumerGroup).Str("topic", topic).Int32("queue", a.QueueID).
		Int64("maxOffset", maxOff).Int("offsets", len(past)).Int64("first", past[0]).Int64("last", past[len(past)-1]).
		Msg("BATCH_ACK_MESSAGE named offsets past the queue's end: skipped, the answer says SUCCESS")
}

// processChangeInvisibleTime answers CHANGE_MESSAGE_INVISIBLETIME with the
// new handle's popTime, invisibleTime and reviveQid. A refusal carries
// the three fields too, zero, as RocketMQ's answers all do: the Java
// client decodes them before it looks at the code, and takes a refusal
// without them for an exception instead of AckStatus.NO_EXIST.
func (b *Broker) processChangeInvisibleTime(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	resp := b.changeInvisibleTime(req)
	if resp.Code != remoting.Success {
		resp.ExtFields = zeroFields("popTime", "invisibleTime", "reviveQid")
	}
	return resp
}

// zeroFields is a response header holding each key as "0": the not-null
// primitive fields a RocketMQ response header class writes on every
// answer, which the Java client decodes whatever the code.
func zeroFields(keys ...string) remoting.Header {
	h := remoting.Header{}
	for _, k := range keys {
		h.Set(k, "0")
	}
	return h
}

// changeInvisibleTime serves processChangeInvisibleTime.
func (b *Broker) changeInvisibleTime(req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	group, topic, queueID := r.String("consumerGroup"), r.String("topic"), r.Int32("queueId")
	extra, offset, invisible := r.String("extraInfo"), r.Int64("offset"), r.Int64("invisibleTime")
	if err := r.Err(); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "bad change invisible time request header: "+err.Error())
	}
	if resp := b.ackTarget(req, topic, queueID, offset, false); resp != nil {
		return resp
	}
	h, err := pop.ParseHandle(extra)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if b.isSlave() {
		return b.slaveChangeInvisibleTime(req, group, topic, queueID, offset, h, invisible)
	}
	res, err := b.popSvc.ChangeInvisibleTime(group, topic, queueID, offset, h, invisible)
	if err != nil {
		return b.popError(req, err)
	}
	return changedResponse(req, res)
}

// changedResponse answers a change of invisible time with the handle
// fields of its result (ChangeInvisibleTimeResponseHeader).
func changedResponse(req *remoting.Command, res pop.ChangeResult) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	rh := remoting.Header{}
	rh.SetInt64("popTime", res.PopTime)
	rh.SetInt64("invisibleTime", res.InvisibleTime)
	rh.SetInt32("reviveQid", res.ReviveQID)
	resp.ExtFields = rh
	return resp
}

// slaveChangeInvisibleTime answers, on a slave, a change of invisible time
// that passed the checks, as RocketMQ's slave does. A message popped
// from the master without order, on an acting master that revives the
// master's in-flight messages (enableRemoteEscape), moves to its new
// deadline in the copy and gets SUCCESS, as RocketMQ's acting master
// puts its new checkpoint through the escape bridge. Another message popped
// without order gets SYSTEM_ERROR without a remark: its
// ChangeInvisibleTimeProcessor first puts a new checkpoint through
// EscapeBridge, which on a broker that is not broker 0 puts nothing and
// says SERVICE_NOT_AVAILABLE, and answers that failure so. An orderly one
// moves the message's deadline in what the slave keeps of its own
// orderly pops (pop.Service.ChangeInvisibleTimeReadOnly, RocketMQ's
// slave's ConsumerOrderInfoManager.updateNextVisibleTime) and gets
// SUCCESS with the handle's popTime and reviveQid and the new invisible
// time counted from popTime, or zero fields for an offset below the
// committed one, as a master answers it.
func (b *Broker) slaveChangeInvisibleTime(req *remoting.Command, group, topic string, queueID int32, offset int64, h pop.Handle, invisible int64) *remoting.Command {
	if !h.Orderly() {
		// An acting master that revives what its master had in flight
		// moves a message of it to its new deadline.
		res, err := b.popSvc.ChangeInvisibleTimeCopied(group, topic, queueID, offset, h, invisible)
		if err != nil {
			return b.popError(req, err)
		}
		if res.Changed {
			return changedResponse(req, res)
		}
		b.busyLog.Warn().Str("group", group).Str("topic", topic).Int32("queue", queueID).Int64("offset", offset).
			Msg("change of invisible time on a slave: SYSTEM_ERROR, as RocketMQ's slave cannot write the new checkpoint (sampled, at most one line a second)")
		return remoting.NewResponse(req, remoting.SystemError, "")
	}
	res, err := b.popSvc.ChangeInvisibleTimeReadOnly(group, topic, queueID, offset, h, invisible)
	if err != nil {
		return b.popError(req, err)
	}
	return changedResponse(req, res)
}

// processPeek answers PEEK_MESSAGE: what a pop would return, changing
// nothing; 19 when there is nothing (or maxMsgNums is 0).
func (b *Broker) processPeek(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	topic, queueID, maxNums, group := r.String("topic"), r.Int32("queueId"), r.Int32("maxMsgNums"), r.String("consumerGroup")
	if err := r.Err(); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "bad peek request header: "+err.Error())
	}
	if _, resp := b.popCheck(req, peekVerb, group, topic, queueID, "", ""); resp != nil {
		return resp
	}
	// Any number, as RocketMQ's peek: 0 finds nothing (RocketMQ's store
	// reads no message for it). Below 0 its processor fails after the
	// checks above, allocating a result list of that capacity, and the
	// client gets SYSTEM_ERROR.
	if maxNums < 0 {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("peek of %d messages: maxMsgNums is negative", maxNums))
	}
	recs, rest, err := b.popSvc.Peek(group, topic, queueID, int(maxNums), pop.InitMin)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "peek failed: "+err.Error())
	}
	code, remark := remoting.Success, "FOUND"
	if len(recs) == 0 {
		code, remark = remoting.PullNotFound, "NO_MESSAGE_IN_QUEUE"
	}
	resp := remoting.NewResponse(req, code, remark)
	h := remoting.Header{}
	h.SetInt64("popTime", time.Now().UnixMilli())
	h.SetInt64("invisibleTime", 0)
	h.SetInt32("reviveQid", 0)
	h.SetInt64("restNum", rest)
	resp.ExtFields = h
	for _, rec := range recs {
		resp.Body = kvindex.AppendShown(resp.Body, rec) // no POP revive's own property
	}
	return resp
}

// notificationHeader is NotificationRequestHeader.
type notificationHeader struct {
	group, topic       string
	queueID            int32
	pollTime, bornTime int64
	order              bool
	attemptID          string
}

// processNotification answers NOTIFICATION: whether a pop would find a
// message, long-polled like a pop; always code 0 with hasMsg.
func (b *Broker) processNotification(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	n := notificationHeader{
		group: r.String("consumerGroup"), topic: r.String("topic"), queueID: r.Int32("queueId"),
		pollTime: r.Int64("pollTime"), bornTime: r.OptInt64("bornTime", 0),
		order: r.OptBool("order", false), attemptID: r.OptString("attemptId", ""),
	}
	if err := r.Err(); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "bad notification request header: "+err.Error())
	}
	if n.bornTime <= 0 {
		n.bornTime = time.Now().UnixMilli()
	}
	return b.notification(conn, req, n)
}

func (b *Broker) notification(conn *remoting.Conn, req *remoting.Command, n notificationHeader) *remoting.Command {
	if _, resp := b.popCheck(req, peekVerb, n.group, n.topic, n.queueID, "", ""); resp != nil {
		return resp
	}
	has, err := b.popHasMessage(n.group, n.topic, n.queueID, n.order, n.attemptID)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "notification failed: "+err.Error())
	}
	full := false
	if !has {
		ready := func() bool {
			has, err := b.popHasMessage(n.group, n.topic, n.queueID, n.order, n.attemptID)
			return err != nil || has
		}
		// No match: NOTIFICATION carries no filter (RocketMQ's header has
		// none, and hasMsg counts every message), so every message is an
		// answer.
		// No poll time is no polling, as for a pop.
		outcome := holdTimeout
		if n.pollTime > 0 {
			outcome = b.popHolds.hold(popHoldKey{n.topic, n.group, n.queueID}, n.bornTime+n.pollTime, b.popWaitTopics(n.topic, n.group, n.order),
				nil, ready, func() {
					rerunHeld(conn, req, func() *remoting.Command { return b.notification(conn, req, n) })
				})
		}
		switch outcome {
		case holdOK:
			return nil
		case holdFull:
			full = true
		}
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	h := remoting.Header{}
	h.SetBool("hasMsg", has)
	if full {
		h.SetBool("pollingFull", true)
	}
	resp.ExtFields = h
	return resp
}

// processPollingInfo answers POLLING_INFO with the number of requests held
// for a topic, group and queue.
func (b *Broker) processPollingInfo(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	r := remoting.Header(req.ExtFields).Reader()
	group, topic, queueID := r.String("consumerGroup"), r.String("topic"), r.Int32("queueId")
	if err := r.Err(); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "bad polling info request header: "+err.Error())
	}
	if _, resp := b.popCheck(req, peekVerb, group, topic, queueID, "", ""); resp != nil {
		return resp
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	h := remoting.Header{}
	h.SetInt32("pollingNum", int32(b.popHolds.count(popHoldKey{topic, group, queueID})))
	resp.ExtFields = h
	return resp
}

// retryFirstPercent is pop.Config.RetryFirstPercent for
// popFromRetryProbability, whose 0 (never first) pop.Config spells -1.
func retryFirstPercent(p int) int {
	if p == 0 {
		return -1
	}
	return p
}
