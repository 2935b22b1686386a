package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
	"github.com/rocketkv/rocketkv/timer"
	"github.com/rocketkv/rocketkv/txn"
)

// maxPropertiesLen is the longest properties string (a signed int16 length).
const maxPropertiesLen = 32767

// sendV2Names maps SEND_MESSAGE_V2's one-letter header keys to the long
// names of SEND_MESSAGE.
var sendV2Names = map[string]string{
	"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums",
	"e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties",
	"j": "reconsumeTimes", "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "bname",
}

// sendHeader is SendMessageRequestHeader.
type sendHeader struct {
	// static is set for a send to a static topic's logic queue (queueID
	// is then its leader's physical queue): its answer names the logic
	// queue and offset.
	static                *staticSend
	producerGroup         string
	topic                 string
	defaultTopic          string
	defaultTopicQueueNums int32
	queueID               int32
	sysFlag               int32
	bornTimestamp         int64
	flag                  int32
	properties            string
	reconsumeTimes        int32
	maxReconsumeTimes     int32
	hasMaxReconsumeTimes  bool
	batch                 bool
	unitMode              bool
}

// sendV2Letters maps the long names of SEND_MESSAGE to the letters of
// SEND_MESSAGE_V2 (the inverse of sendV2Names).
var sendV2Letters = func() map[string]string {
	m := make(map[string]string, len(sendV2Names))
	for letter, long := range sendV2Names {
		m[long] = letter
	}
	return m
}()

// sendFields reads SendMessageRequestHeader fields by their long names from
// either header form in place: a letter header is not copied into a map of
// long names (that copy was a third of the cost of parsing a send).
type sendFields struct {
	h  remoting.Header
	v2 bool
}

// key returns the ext key holding a field: its letter when the header is
// V2 and has it, else the long name (as a V2 header with a long name was
// read before).
func (f sendFields) key(long string) string {
	if f.v2 {
		if l, ok := sendV2Letters[long]; ok {
			if _, ok := f.h[l]; ok {
				return l
			}
		}
	}
	return long
}

// named makes a field error name the long field, as the remark always did.
func named(long string, err error) error {
	var fe *remoting.FieldError
	if errors.As(err, &fe) && fe.Field != long {
		c := *fe
		c.Field = long
		return &c
	}
	return err
}

func (f sendFields) Has(k string) bool { return f.h.Has(f.key(k)) }
func (f sendFields) String(k string) (string, error) {
	v, err := f.h.String(f.key(k))
	return v, named(k, err)
}
func (f sendFields) OptString(k, def string) string { return f.h.OptString(f.key(k), def) }
func (f sendFields) Int32(k string) (int32, error) {
	v, err := f.h.Int32(f.key(k))
	return v, named(k, err)
}
func (f sendFields) OptInt32(k string, def int32) (int32, error) {
	v, err := f.h.OptInt32(f.key(k), def)
	return v, named(k, err)
}
func (f sendFields) Int64(k string) (int64, error) {
	v, err := f.h.Int64(f.key(k))
	return v, named(k, err)
}
func (f sendFields) OptBool(k string, def bool) bool { return f.h.OptBool(f.key(k), def) }

// parseSendHeader reads the header of codes 10 and 324 (long names), 310,
// 320 and 325 (letters, a long name read where its letter is missing). A
// missing or malformed required field is an error naming it. Which names
// a code reads is what the access checks read (authRules, aclNeeds): a
// SEND_REPLY_MESSAGE read by its letters would store in the topic of "b"
// after a check of "topic".
func parseSendHeader(req *remoting.Command) (sendHeader, error) {
	long := req.Code == remoting.SendMessage || req.Code == remoting.SendReplyMessage
	h := sendFields{h: remoting.Header(req.ExtFields), v2: !long}
	var s sendHeader
	var err error
	if s.producerGroup, err = h.String("producerGroup"); err != nil {
		return s, err
	}
	if s.topic, err = h.String("topic"); err != nil {
		return s, err
	}
	s.defaultTopic = h.OptString("defaultTopic", autoCreateTopic)
	if s.defaultTopicQueueNums, err = h.OptInt32("defaultTopicQueueNums", 4); err != nil {
		return s, err
	}
	if s.queueID, err = h.Int32("queueId"); err != nil {
		return s, err
	}
	if s.sysFlag, err = h.Int32("sysFlag"); err != nil {
		return s, err
	}
	if s.bornTimestamp, err = h.Int64("bornTimestamp"); err != nil {
		return s, err
	}
	if s.flag, err = h.Int32("flag"); err != nil {
		return s, err
	}
	s.properties = h.OptString("properties", "")
	if s.reconsumeTimes, err = h.OptInt32("reconsumeTimes", 0); err != nil {
		return s, err
	}
	if h.Has("maxReconsumeTimes") {
		if s.maxReconsumeTimes, err = h.Int32("maxReconsumeTimes"); err != nil {
			return s, err
		}
		s.hasMaxReconsumeTimes = true
	}
	s.batch = h.OptBool("batch", false) || req.Code == remoting.SendBatchMessage
	s.unitMode = h.OptBool("unitMode", false)
	return s, nil
}

// bornHost is the born host stored in a message a client sent over conn:
// the socket's peer, as RocketMQ stores channel.remoteAddress(), even when
// a PROXY protocol header named the client behind a load balancer (the
// header's client is what access control and connection lists see).
func bornHost(conn *remoting.Conn) netip.AddrPort {
	a := conn.PeerAddr()
	if a == nil {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	}
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort()
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	}
	return ap
}

// processSend answers SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE.
func (b *Broker) processSend(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	h, err := parseSendHeader(req)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "bad send request header: "+err.Error())
	}
	if resp, err := b.rewriteStaticSend(req, &h); err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	} else if resp != nil {
		return resp
	}
	fail := func(code int32, format string, args ...any) *remoting.Command {
		return remoting.NewResponse(req, code, fmt.Sprintf(format, args...))
	}
	qid, refused := b.checkSend(conn, req, h)
	if refused != nil {
		return refused
	}
	if h.batch {
		return b.sendBatch(ctx, conn, req, h, qid)
	}

	props := h.properties
	// A consumer's retry of a committed transactional message may still
	// carry TRAN_MSG (RocketMQ 4.x kept it on the committed copy): a send
	// with reconsume times and a delay level is a retry, not a half, as in
	// RocketMQ's SendMessageProcessor.
	half := txn.IsHalfSend(props, h.sysFlag) && !(h.reconsumeTimes > 0 && delayLevelOf(props) > 0)
	if half {
		if b.current().RejectTransactionMessage {
			return fail(remoting.NoPermission, "the broker[%s] sending transaction message is forbidden", b.announcedHost())
		}
		// The half topic exists: every start creates it (topicManager's
		// ensureSystemTopics, as RocketMQ's TopicConfigManager) and no
		// admin request deletes it (systemTopicRefusal).
	}
	topic := h.topic
	reconsume := h.reconsumeTimes
	if meta.IsRetryTopic(topic) {
		var resp *remoting.Command
		if topic, qid, resp = b.retryOrDLQ(req, conn, h, qid); resp != nil {
			return resp
		}
	}
	waitFlush := true
	if v, ok := commitlog.LookupProperty(props, propWait); ok && v == "false" {
		waitFlush = false
	}
	uniq, hasUniq := commitlog.LookupProperty(props, propUniqKey)
	// As RocketMQ's send processor: the broker's region and trace switch
	// (a consumer's trace hook skips a message whose TRACE_ON is false)
	// and its cluster.
	set := [][2]string{
		{propMsgRegion, b.cfg.RegionID},
		{propTraceOn, strconv.FormatBool(b.cfg.TraceOn)},
		{propCluster, b.cfg.BrokerClusterName},
	}
	if !hasUniq || uniq == "" {
		uniq = b.uniq.Next()
		set = append(set, [2]string{propUniqKey, uniq})
	}
	if topic != h.topic { // moved to the DLQ
		// Its delay level is spent: RocketMQ's handleRetryAndDLQ stores
		// DELAY=-1 in the properties it keeps (its level 0 is set on the
		// properties they replace), and no DLQ_ORIGIN_*: the client's
		// RETRY_TOPIC and ORIGIN_MESSAGE_ID name the origin.
		set = append(set, [2]string{propDelay, "-1"})
	}
	props = commitlog.RewriteProperties(props, []string{propPopCK}, set...)
	level, err := sendDelayLevel(props)
	if err != nil {
		// After the DLQ's DELAY=-1, which RocketMQ sets over it too.
		b.busyLog.Warn().Err(err).Str("topic", h.topic).Stringer("producer", conn.RemoteAddr()).Msg("send refused (sampled)")
		return fail(remoting.SystemError, "%v", err)
	}
	sysFlag := h.sysFlag
	if !half {
		// Only a half may carry transaction bits a client set: a retry's
		// PREPARED bits (the clients set them with TRAN_MSG) would keep it
		// out of its ConsumeQueue, and COMMIT bits would name a half.
		sysFlag &^= commitlog.TransactionRollback
	}
	msg := &commitlog.Message{
		Topic:          topic,
		QueueID:        qid,
		Flag:           h.flag,
		SysFlag:        sysFlag,
		BornTimestamp:  h.bornTimestamp,
		BornHost:       bornHost(conn),
		ReconsumeTimes: reconsume,
		Body:           req.Body,
		Properties:     props,
	}
	if err := b.checkLMQNames(topic, props); err != nil {
		return fail(remoting.MessageIllegal, "put message failed: %v", err)
	}
	parkRefusal := func(err error) *remoting.Command {
		code := remoting.SystemError
		if errors.Is(err, timer.ErrTooLate) || errors.Is(err, timer.ErrBadTime) || errors.Is(err, timer.ErrCancelTooLate) {
			code = remoting.MessageIllegal
		}
		return fail(code, "%v", err)
	}
	if half {
		// A delay level or timer applies to the committed message, but a
		// timer the commit would refuse (too far, not a number, the wheel
		// off) is refused now, as RocketMQ's put of the half refuses it:
		// accepted, every commit would fail and the checks give the
		// message up. A delay level overrides the timer at the commit
		// (RocketMQ drops the timer properties then): nothing to refuse.
		if level <= 0 {
			probe := *msg
			probe.SysFlag &^= commitlog.TransactionRollback
			if _, err := timer.Park(&probe, time.Now(), b.timerCfg); err != nil {
				return parkRefusal(err)
			}
		}
		txn.ToHalf(msg)
	} else {
		// A delay level applies whatever the topic, a producer's send to
		// a %DLQ% topic included, as RocketMQ's store parks any message
		// with DELAY > 0; a retry moved to the DLQ above has its level
		// spent already.
		if err := b.park(msg, level); err != nil {
			return parkRefusal(err)
		}
	}
	began := time.Now()
	res, err := b.appendMessages(ctx, []*commitlog.Message{msg}, false)
	if errors.Is(err, errInSyncReplicasNotEnough) {
		return fail(remoting.SystemError, inSyncReplicasRemark)
	}
	if err != nil {
		b.stats.PutTook(time.Since(began), true)
		return fail(appendErrorCode(err), "put message failed: %v", err)
	}
	b.countIn(msg.Topic, props, 1, res.WroteBytes)
	if topic != h.topic {
		b.countRetrySendToDLQ(h.producerGroup, h.topic)
	}
	respQueue := h.queueIDResponse(qid, msg)
	recall, hasRecall := b.recallHandleOf(msg, uniq)
	return b.answerDurable(conn, req, res, waitFlush, 0, began, func(res commitlog.AppendResult) *remoting.Command {
		resp := remoting.NewResponse(req, appendStatusCode(res.Status), "")
		rh := remoting.Header{}
		rh.Set("msgId", res.MsgIDs[0])
		q, off := h.static.answer(respQueue, res.QueueOffset)
		rh.SetInt32("queueId", q)
		rh.SetInt64("queueOffset", off)
		rh.Set("transactionId", uniq)
		rh.Set("MSG_REGION", b.cfg.RegionID)
		rh.SetBool("TRACE_ON", b.cfg.TraceOn)
		if hasRecall {
			rh.Set("recallHandle", recall)
		}
		resp.ExtFields = rh
		return resp
	})
}

// park sends a message on to wait when it asks to, as RocketMQ's put does:
// a delay level > 0 to the schedule topic, else a timer property to the
// timer topic (created on first use). The sends of producers and the
// transactions' commits share it.
func (b *Broker) park(m *commitlog.Message, level int) error {
	if level > 0 {
		b.toSchedule(m, level)
		return nil
	}
	parked, err := timer.Park(m, time.Now(), b.timerCfg)
	if err != nil || !parked {
		return err
	}
	if err := b.checkTimerCongestion(m); err != nil {
		return err
	}
	if _, err := b.topics.ensureSystemTopic(meta.TimerTopic, 1, meta.PermRead|meta.PermWrite); err != nil {
		return fmt.Errorf("create the timer topic: %w", err)
	}
	return nil
}

// errTimerCongested refuses a timer message whose delivery slot is full
// (RocketMQ's WHEEL_TIMER_FLOW_CONTROL, answered SYSTEM_ERROR).
var errTimerCongested = errors.New("timer message is under flow control")

// checkTimerCongestion applies RocketMQ's timer flow control
// (TimerMessageStore.isReject) to a message Park parked: with n timer
// messages indexed in the slot of its TIMER_OUT_MS (one timerPrecisionMs
// of time) and N the timerCongestNumEachSlot, it passes for n <= N, is
// refused for n >= 2N, and between the two is refused unless a draw from
// 0 to 999 is at most 1000(n-N)/(N+0.1), RocketMQ's arithmetic. With the
// default N (2^31-1) nothing is counted. A message not yet dispatched is
// not counted, as RocketMQ's wheel counts what its timer took in.
func (b *Broker) checkTimerCongestion(m *commitlog.Message) error {
	limit := int64(b.cfg.TimerCongestNumEachSlot)
	if limit <= 0 || limit >= math.MaxInt32 {
		return nil
	}
	v, _ := commitlog.LookupProperty(m.Properties, timer.PropOutMs)
	deliverMs, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("parked timer message with TIMER_OUT_MS %q: %w", v, err)
	}
	p := b.timerCfg.Precision.Milliseconds()
	slot := deliverMs - deliverMs%p
	n, err := b.db.Timers().Count(slot, slot+p-1, int(2*limit))
	if err != nil {
		return fmt.Errorf("timer flow control: %w", err)
	}
	congested := int64(n) >= 2*limit
	if int64(n) > limit && !congested {
		congested = float64(rand.IntN(1000)) > 1000*float64(int64(n)-limit)/(float64(limit)+0.1)
	}
	if !congested {
		return nil
	}
	topic, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyRealTopic)
	b.busyLog.Warn().Int64("slot", slot).Int("messages", n).Str("topic", topic).Msg("timer send refused by flow control (sampled)")
	return fmt.Errorf("%w, max num limit is %d or the current value is greater than %d and less than %d, trigger random flow control",
		errTimerCongested, 2*limit, limit, 2*limit)
}

// sendsAcceptedFrom reports whether sends are accepted now, and when not,
// from when they are (startAcceptSendRequestTimeStamp, in RocketMQ's
// format): an operator holds producers off a broker until then.
func (b *Broker) sendsAcceptedFrom() (string, bool) {
	from := b.current().StartAcceptSendRequestTimeStamp
	if from <= 0 || time.Now().UnixMilli() >= from {
		return "", true
	}
	return time.UnixMilli(from).Format("2006-01-02 15:04:05,000"), false
}

// checkSend applies RocketMQ's checks of a send (SendMessageProcessor's
// msgCheck and more) shared by sends and replies: the broker is writable
// for an order topic, the topic name, properties and body are valid, the topic
// exists or is created from the default topic, and the queue is one of
// the topic's (a negative queue id picks one at random). It returns the
// queue, or the refusal to answer.
func (b *Broker) checkSend(conn *remoting.Conn, req *remoting.Command, h sendHeader) (qid int32, refused *remoting.Command) {
	fail := func(code int32, format string, args ...any) *remoting.Command {
		return remoting.NewResponse(req, code, fmt.Sprintf(format, args...))
	}
	if from, ok := b.sendsAcceptedFrom(); !ok {
		return 0, fail(remoting.SystemError, "broker unable to service, until %s", from)
	}
	if remark := validateTopicName(h.topic); remark != "" {
		return 0, fail(remoting.InvalidParameter, "%s", remark) // as AbstractSendMessageProcessor.msgCheck
	}
	if notSendable[h.topic] {
		return 0, fail(remoting.NoPermission, "Sending message to topic[%s] is forbidden.", h.topic)
	}
	if len(h.properties) > maxPropertiesLen {
		return 0, fail(remoting.MessageIllegal, "the message properties length %d is longer than %d", len(h.properties), maxPropertiesLen)
	}
	if len(req.Body) > b.cfg.MaxMessageSize {
		return 0, fail(remoting.MessageIllegal, "the message body size %d is larger than maxMessageSize %d", len(req.Body), b.cfg.MaxMessageSize)
	}
	if kvindex.ClaimsRevive(h.topic, h.properties) {
		return 0, fail(remoting.MessageIllegal, "the property %s of a message to %s is the broker's own", kvindex.PropertyRevivedFrom, h.topic)
	}
	// As RocketMQ's innerBatchChecker: a record that stands for several
	// messages belongs to a BatchCQ topic only (this broker has none), and
	// INNER_NUM to such a record only. A Java consumer unpacks a record
	// with the flag into INNER_NUM messages numbered over the next ones.
	if h.sysFlag&commitlog.FlagInnerBatch != 0 {
		return 0, fail(remoting.MessageIllegal, "the message is an inner batch (sysFlag %#x), which only a BatchCQ topic takes", h.sysFlag)
	}
	if _, ok := commitlog.LookupProperty(h.properties, commitlog.PropertyInnerNum); ok {
		return 0, fail(remoting.MessageIllegal, "the message has the property %s but is no inner batch", commitlog.PropertyInnerNum)
	}
	tc, code, remark := b.topics.createOnSend(h.topic, h.defaultTopic, int(h.defaultTopicQueueNums))
	if code != remoting.Success {
		return 0, fail(code, "%s", remark)
	}
	// As RocketMQ's msgCheck, a broker that is not writable refuses sends
	// to order topics only, and a topic's own permission is not checked:
	// producers follow the routes, which carry both permissions, and a
	// producer whose route is older (up to its 30 s refresh after a
	// brokerPermission or updateTopicPerm change) still has its sends,
	// oneway ones included, stored instead of refused.
	if tc.Order && !meta.Writable(b.permission()) {
		return 0, fail(remoting.NoPermission, "the broker[%s] sending message is forbidden", b.announcedHost())
	}
	if tc.Compacted() && !h.batch {
		// As RocketMQ's SendMessageProcessor (a batch is not checked).
		if keys, _ := commitlog.LookupProperty(h.properties, commitlog.PropertyKeys); strings.TrimSpace(keys) == "" {
			return 0, fail(remoting.MessageIllegal, "Required message key is missing")
		}
	}
	qid = h.queueID
	if qid < 0 {
		qid = int32(rand.IntN(max(tc.WriteQueueNums, 1)))
	}
	if int(qid) >= tc.QueueCount() {
		return 0, fail(remoting.InvalidParameter, "request queueId[%d] is illegal, %s Producer: %s", qid, h.topic, conn.RemoteAddr())
	}
	return qid, nil
}

// queueIDResponse is the queue reported to the producer: the queue it
// asked for when the broker parked the message elsewhere (delay levels,
// timers, transaction halves), else the queue used.
func (h sendHeader) queueIDResponse(qid int32, msg *commitlog.Message) int32 {
	if msg.Topic == meta.ScheduleTopic || msg.Topic == meta.TransHalfTopic || msg.Topic == meta.TimerTopic {
		return qid
	}
	return msg.QueueID
}

// retryOrDLQ applies RocketMQ's handleRetryAndDLQ to a send to a %RETRY%
// topic: past the group's maximum of reconsume times, or at once when the
// group holds an unexpired queue lock (an orderly consumer sends a
// message back only when it gives up on it), the message goes to the
// group's %DLQ% topic. It returns the target topic and queue, or a
// response when the send must be refused.
func (b *Broker) retryOrDLQ(req *remoting.Command, conn *remoting.Conn, h sendHeader, qid int32) (string, int32, *remoting.Command) {
	group := strings.TrimPrefix(h.topic, meta.RetryGroupTopicPrefix)
	gc, err := b.groupConfig(group, true)
	if err != nil {
		return "", 0, remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if gc.GroupName == "" {
		return "", 0, remoting.NewResponse(req, remoting.SubscriptionGroupNotExist, "subscription group not exist, "+group+" "+faqSuggestion)
	}
	maxTimes := int32(gc.RetryMaxTimes)
	if h.hasMaxReconsumeTimes && conn.ClientInfo().Version >= 121 {
		maxTimes = h.maxReconsumeTimes
	}
	if h.reconsumeTimes <= maxTimes && !b.locks.anyLive(group) {
		return h.topic, qid, nil
	}
	dlq := meta.DLQTopic(group)
	if _, err := b.topics.ensureSendBackTopic(dlq, 1, meta.PermWrite|meta.PermRead, false); err != nil {
		return "", 0, remoting.NewResponse(req, remoting.SystemError, "create DLQ topic: "+err.Error())
	}
	return dlq, 0, nil
}

// sendBatch stores a batch-send body: each item becomes a record of the
// same topic and queue with consecutive queue offsets.
func (b *Broker) sendBatch(ctx context.Context, conn *remoting.Conn, req *remoting.Command, h sendHeader, qid int32) *remoting.Command {
	if meta.IsRetryTopic(h.topic) {
		return remoting.NewResponse(req, remoting.MessageIllegal, "batch request does not support retry group "+h.topic)
	}
	if commitlog.TransactionType(h.sysFlag) != commitlog.TransactionNotType {
		return remoting.NewResponse(req, remoting.MessageIllegal, "batch request does not support transaction messages")
	}
	level, err := sendDelayLevel(h.properties)
	if err != nil {
		b.busyLog.Warn().Err(err).Str("topic", h.topic).Stringer("producer", conn.RemoteAddr()).Msg("batch send refused (sampled)")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if level > 0 {
		// As RocketMQ's asyncPutMessages: a batch is stored as it comes,
		// never parked in the schedule topic.
		return remoting.NewResponse(req, remoting.MessageIllegal, "batch request does not support delay messages")
	}
	items, err := commitlog.DecodeBatch(req.Body)
	if err != nil {
		return remoting.NewResponse(req, remoting.MessageIllegal, "malformed batch body: "+err.Error())
	}
	if len(items) == 0 {
		return remoting.NewResponse(req, remoting.MessageIllegal, "empty batch")
	}
	born := bornHost(conn)
	msgs := make([]*commitlog.Message, len(items))
	for i, it := range items {
		if len(it.Properties) > maxPropertiesLen {
			return remoting.NewResponse(req, remoting.MessageIllegal, fmt.Sprintf("batch message %d: properties longer than %d", i, maxPropertiesLen))
		}
		if kvindex.ClaimsRevive(h.topic, it.Properties) {
			return remoting.NewResponse(req, remoting.MessageIllegal, fmt.Sprintf("batch message %d: the property %s is the broker's own", i, kvindex.PropertyRevivedFrom))
		}
		msgs[i] = &commitlog.Message{
			Topic: h.topic, QueueID: qid, Flag: it.Flag, SysFlag: h.sysFlag,
			BornTimestamp: h.bornTimestamp, BornHost: born, Body: it.Body, Properties: it.Properties,
		}
	}
	waitFlush := true
	if v, ok := commitlog.LookupProperty(h.properties, propWait); ok && v == "false" {
		waitFlush = false
	}
	if waitFlush && b.inSyncReplicasShort() {
		return remoting.NewResponse(req, remoting.SystemError, inSyncReplicasRemark)
	}
	began := time.Now()
	res, err := b.appendBatch(ctx, msgs)
	if err != nil {
		b.stats.PutTook(time.Since(began), true)
		return remoting.NewResponse(req, appendErrorCode(err), "put batch failed: "+err.Error())
	}
	b.countIn(h.topic, h.properties, len(msgs), res.WroteBytes)
	return b.answerDurable(conn, req, res, waitFlush, 0, began, func(res commitlog.AppendResult) *remoting.Command {
		resp := remoting.NewResponse(req, appendStatusCode(res.Status), "")
		rh := remoting.Header{}
		rh.Set("msgId", strings.Join(res.MsgIDs, ","))
		q, off := h.static.answer(qid, res.QueueOffset)
		rh.SetInt32("queueId", q)
		rh.SetInt64("queueOffset", off)
		if uniq, _ := commitlog.LookupProperty(h.properties, propUniqKey); uniq != "" {
			// The batch's own UNIQ_KEY (the Java client's
			// SendResult.getTransactionId), as RocketMQ answers it.
			rh.Set("transactionId", uniq)
		}
		rh.Set("MSG_REGION", b.cfg.RegionID)
		rh.SetBool("TRACE_ON", b.cfg.TraceOn)
		resp.ExtFields = rh
		return resp
	})
}

// sendDelayLevel returns a send's DELAY property as a level (0 when absent
// or negative), reading the properties once, and refuses one that is not a
// 32-bit integer. RocketMQ's store reads it with Integer.parseInt before it
// puts any message (getDelayTimeLevel, in the hook that parks delayed and
// timer messages), and its remoting server answers the exception with
// SYSTEM_ERROR: such a message is never stored, where rocketkv would store
// it at once, undelayed.
func sendDelayLevel(props string) (int, error) {
	v, ok := commitlog.LookupProperty(props, propDelay)
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("the property %s=%q is no delay level, which is a 32-bit integer", propDelay, v)
	}
	return max(int(n), 0), nil
}

// delayLevelOf returns the DELAY property as a level (0 when absent or not
// a positive number).
func delayLevelOf(props string) int {
	v, ok := commitlog.LookupProperty(props, propDelay)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
