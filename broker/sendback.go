package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// processSendBack answers CONSUMER_SEND_MSG_BACK, RocketMQ's
// consumerSendMsgBack: a message the consumer failed is stored again in the
// group's %RETRY% topic with its reconsume count raised, delayed by delay
// level 3 + reconsumeTimes unless the client chose one, or, past the
// group's maximum (or with a negative level), in the group's %DLQ% topic.
// Both copies are the record's properties with what RocketMQ adds to them:
// RETRY_TOPIC (the record's topic, unless it has one), ORIGIN_MESSAGE_ID
// (the record's offset id, unless it has one), WAIT=false and DELAY (the
// retry's level, 0 in the DLQ). RocketMQ writes no DLQ_ORIGIN_* there: a
// reader of the DLQ finds the origin in RETRY_TOPIC and UNIQ_KEY.
func (b *Broker) processSendBack(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	h := remoting.Header(req.ExtFields)
	offset, err := h.Int64("offset")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	group, err := h.String("group")
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	delayLevel, err := h.OptInt32("delayLevel", 0)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	gc, err := b.groupConfig(group, true)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if gc.GroupName == "" {
		return remoting.NewResponse(req, remoting.SubscriptionGroupNotExist, "subscription group not exist, "+group+" "+faqSuggestion)
	}
	if !meta.Writable(b.permission()) {
		return remoting.NewResponse(req, remoting.NoPermission, fmt.Sprintf("the broker[%s] sending message is forbidden", b.announcedHost()))
	}
	if gc.RetryQueueNums <= 0 {
		return remoting.NewResponse(req, remoting.Success, "")
	}
	_, m, ok, err := b.readClientRecord(offset)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if !ok {
		return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("look message by offset failed, %d", offset))
	}
	if origin := h.OptString("originTopic", ""); b.accessControlled() && !b.sendBackAllowed(m, origin, group) {
		// Under access control a send-back copies only a message of the
		// topic it names (whose Sub the check asked for), or a retry of
		// the group's own: any other offset would copy a topic the group
		// may not read into its retry topic.
		return remoting.NewResponse(req, remoting.NoPermission,
			fmt.Sprintf("the message at offset %d is of topic %s, not of originTopic %q nor a retry of group %s", offset, m.Topic, origin, group))
	}
	maxTimes := int32(gc.RetryMaxTimes)
	if h.Has("maxReconsumeTimes") && conn.ClientInfo().Version >= 121 {
		if v, err := h.Int32("maxReconsumeTimes"); err == nil {
			maxTimes = v
		}
	}
	set := meta.SendBackProperties(&m)
	topic := meta.RetryTopic(group)
	// As RocketMQ's send-back, which creates the topic unordered and
	// clears the order flag a heartbeat set (ensureRetryTopic).
	tc, err := b.topics.ensureSendBackTopic(topic, gc.RetryQueueNums, meta.PermRead|meta.PermWrite, false)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if !meta.Writable(tc.Perm) {
		// An operator made the retry topic read-only: the client keeps
		// the message and consumes it again itself.
		return remoting.NewResponse(req, remoting.NoPermission, fmt.Sprintf("the topic[%s] sending message is forbidden", topic))
	}
	qid := int32(rand.IntN(max(tc.WriteQueueNums, 1)))
	toDLQ := m.ReconsumeTimes >= maxTimes || delayLevel < 0
	if toDLQ {
		topic = meta.DLQTopic(group)
		if _, err := b.topics.ensureSendBackTopic(topic, 1, meta.PermRead|meta.PermWrite, false); err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		qid = 0
		set = append(set, [2]string{propDelay, "0"})
	} else if delayLevel == 0 {
		delayLevel = 3 + m.ReconsumeTimes
	}
	out := &commitlog.Message{
		Topic: topic, QueueID: qid, Flag: m.Flag, SysFlag: m.SysFlag,
		BornTimestamp: m.BornTimestamp, BornHost: m.BornHost, ReconsumeTimes: m.ReconsumeTimes + 1,
		Body: m.Body,
		// Not a POP revive's RKV_REVIVED_FROM: the copy is no put of a
		// revive, whose recovery would take it for one.
		Properties: commitlog.RewriteProperties(m.Properties, []string{propDelay, propPopCK, kvindex.PropertyRevivedFrom}, set...),
	}
	if !toDLQ {
		b.toSchedule(out, int(delayLevel))
	}
	// The consumer moves its offset past the message once this succeeds,
	// so the answer waits for the copy's flush and a SYNC_MASTER's slaves
	// (RocketMQ does not: it stores the copy with WAIT=false), but at most
	// sendBackDurableWait, and a copy stored is answered SUCCESS whatever
	// was confirmed by then. A failure would have the client store the
	// message a second time: the Java push consumer sends its own copy to
	// the retry topic when a send-back fails (sendMessageBackAsNormalMessage)
	// and the Go client consumes it again, so while a slave is down every
	// failed consumption would double the message. The bound keeps the
	// answer inside the clients' send-back timeouts (3 s in Go, 5 s in
	// Java), after which they do the same.
	began := time.Now()
	res, err := b.appendRecords(ctx, []*commitlog.Message{out}, appendOptions{multiDispatch: true, uncounted: true})
	if err != nil {
		b.stats.PutTook(time.Since(began), true)
		return remoting.NewResponse(req, appendErrorCode(err), "send back failed: "+err.Error())
	}
	// Counted under the topic the message was first sent to, as RocketMQ.
	back := m.Topic
	if t, ok := commitlog.LookupProperty(m.Properties, propRetryTopic); ok && t != "" {
		back = t
	}
	counted := []*commitlog.Message{{Topic: out.Topic, Properties: out.Properties}} // not the body, while the answer waits
	return b.answerDurable(conn, req, res, true, sendBackDurableWait, began, func(res commitlog.AppendResult) *remoting.Command {
		if res.Status != commitlog.PutOK {
			b.busyLog.Warn().Str("group", group).Str("status", res.Status.String()).Int64("offset", res.PhyOffset).
				Msg("send back: retry message stored, not yet confirmed flushed or replicated; answered SUCCESS (sampled)")
		}
		b.countDLQ(counted)
		b.stats.SendBack(group, back)
		return remoting.NewResponse(req, remoting.Success, "")
	})
}

// sendBackDurableWait bounds how long a send-back's answer waits for its
// copy's flush and slaves (see processSendBack).
const sendBackDurableWait = time.Second

// sendBackOriginTopic returns the topic a send-back's originTopic must be
// readable on, besides the group: originTopic itself, the topic of the
// group's POP retry topic it names (%RETRY%group_T, %RETRY%group+T, as
// RocketMQ's proxy sends them), or none for the group's own retry topic.
// Another retry topic names its own group (ok false: check the group).
func sendBackOriginTopic(origin, group string) (topic string, ok bool) {
	if !meta.IsRetryTopic(origin) {
		return origin, true
	}
	own := meta.RetryTopic(group)
	if origin == own {
		return "", true
	}
	if rest, cut := strings.CutPrefix(origin, own); cut && len(rest) > 1 && (rest[0] == '_' || rest[0] == '+') {
		return rest[1:], true
	}
	return "", false
}

// sendBackAllowed reports whether, under access control, a send-back of
// group naming origin may copy the record m: one of the group's own retry
// topic, or of origin itself (whose topic the check covered), unless
// origin's %RETRY%g_T form is in fact the classic retry topic of a group
// named g_T (group names may hold '_'), which the check did not cover.
func (b *Broker) sendBackAllowed(m commitlog.Message, origin, group string) bool {
	if m.Topic == meta.RetryTopic(group) {
		return true
	}
	if m.Topic != origin {
		return false
	}
	if rest, cut := strings.CutPrefix(origin, meta.RetryTopic(group)+"_"); cut && rest != "" {
		gc, err := b.groupConfig(strings.TrimPrefix(origin, meta.RetryGroupTopicPrefix), false)
		return err == nil && gc.GroupName == ""
	}
	return true
}
