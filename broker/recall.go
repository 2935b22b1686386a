package broker

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
	"github.com/rocketkv/rocketkv/timer"
)

// A recall handle names a timer message a producer may recall before it
// is due (RocketMQ 5.3's RecallMessageHandle, version 1): URL-safe base64
// of
//
//	"v1" SP topic SP brokerName SP deliverMs SP uniqKey
//
// where deliverMs is the message's TIMER_OUT_MS plus one (the timer
// rounds it down to the same slot again) and uniqKey its UNIQ_KEY. The
// send response carries it in recallHandle; RECALL_MESSAGE gives it back.
type recallHandle struct {
	topic, brokerName, deliverMs, uniqKey string
}

// recallHandleVersion is the first field of a version 1 handle.
const recallHandleVersion = "v1"

// errBadRecallHandle is RocketMQ's remark for a handle that does not
// decode.
var errBadRecallHandle = errors.New("recall handle is invalid")

func (h recallHandle) encode() string {
	raw := strings.Join([]string{recallHandleVersion, h.topic, h.brokerName, h.deliverMs, h.uniqKey}, " ")
	return base64.URLEncoding.EncodeToString([]byte(raw))
}

// parseRecallHandle decodes a handle as RocketMQ does: base64 with or
// without padding (no line breaks), fields split at single spaces with
// trailing empty ones dropped (Java's String.split), fields after the
// fifth ignored; an empty field among the first five is refused.
func parseRecallHandle(s string) (recallHandle, error) {
	if s == "" || strings.ContainsAny(s, "\r\n") {
		return recallHandle{}, errBadRecallHandle
	}
	raw, err := base64.URLEncoding.DecodeString(s)
	if err != nil {
		raw, err = base64.RawURLEncoding.DecodeString(s)
	}
	if err != nil {
		return recallHandle{}, errBadRecallHandle
	}
	f := strings.Split(string(raw), " ")
	for len(f) > 0 && f[len(f)-1] == "" {
		f = f[:len(f)-1]
	}
	if len(f) < 5 || f[0] != recallHandleVersion {
		return recallHandle{}, errBadRecallHandle
	}
	if slices.Contains(f[1:5], "") {
		// Two spaces in a row: RocketMQ would read an empty field, but no
		// handle it or rocketkv writes has one, and an empty UNIQ_KEY
		// would park a cancel that matches nothing.
		return recallHandle{}, errBadRecallHandle
	}
	return recallHandle{topic: f[1], brokerName: f[2], deliverMs: f[3], uniqKey: f[4]}, nil
}

// recallHandleOf returns the handle of a message a send parked in the
// timer topic, as RocketMQ's SendMessageProcessor attaches it; ok is false
// for any other message (and for a consumer's retry).
func (b *Broker) recallHandleOf(m *commitlog.Message, uniq string) (string, bool) {
	if m.Topic != meta.TimerTopic {
		return "", false // every send comes here: no property scan for the others
	}
	out, ok := commitlog.LookupProperty(m.Properties, timer.PropOutMs)
	if !ok {
		return "", false
	}
	realTopic, ok := commitlog.LookupProperty(m.Properties, commitlog.PropertyRealTopic)
	if !ok || strings.HasPrefix(realTopic, meta.RetryGroupTopicPrefix) {
		return "", false
	}
	ms, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		return "", false
	}
	return recallHandle{topic: realTopic, brokerName: b.cfg.BrokerName,
		deliverMs: strconv.FormatInt(ms+1, 10), uniqKey: uniq}.encode(), true
}

// recallTag is the tag of the message a recall stores.
const recallTag = "_RECALL_TAG_"

// processRecallMessage answers RECALL_MESSAGE (the Java 5.3 producer's
// recallMessage): it stores a timer message due at the recalled
// message's time that cancels it (TIMER_DEL_UNIQKEY), as RocketMQ's
// RecallMessageProcessor does, and answers with the recalled UNIQ_KEY. It
// needs recallMessageEnable; the handle must name this broker and the
// request's topic, and a time still to come within timerMaxDelaySec.
func (b *Broker) processRecallMessage(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	fail := func(code int32, remark string) *remoting.Command {
		b.log.Debug().Stringer("conn", conn).Int32("code", code).Str("remark", remark).Msg("RECALL_MESSAGE refused")
		resp := remoting.NewResponse(req, code, remark)
		resp.ExtFields = map[string]string{"MSG_REGION": b.cfg.RegionID}
		return resp
	}
	if !b.current().RecallMessageEnable {
		return fail(remoting.NoPermission, "recall failed, operation is forbidden")
	}
	if b.cfg.BrokerRole == "SLAVE" {
		return fail(remoting.SlaveNotAvailable, "recall failed, broker service not available")
	}
	if _, ok := b.sendsAcceptedFrom(); !ok {
		return fail(remoting.ServiceNotAvailable, "recall failed, broker service not available")
	}
	if !meta.Writable(b.current().BrokerPermission) && !b.current().AllowRecallWhenBrokerNotWriteable {
		return fail(remoting.ServiceNotAvailable, "recall failed, broker service not available")
	}
	h := remoting.Header(req.ExtFields)
	topic, err := h.String("topic")
	if err != nil {
		return fail(remoting.SystemError, "bad RECALL_MESSAGE header: "+err.Error())
	}
	group := h.OptString("producerGroup", "")
	if _, ok, err := b.topicConfig(topic); err != nil {
		return fail(remoting.SystemError, err.Error())
	} else if !ok {
		return fail(remoting.TopicNotExist, "recall failed, the topic["+topic+"] not exist")
	}
	raw, err := h.String("recallHandle")
	if err != nil {
		return fail(remoting.SystemError, "bad RECALL_MESSAGE header: "+err.Error())
	}
	handle, err := parseRecallHandle(raw)
	if err != nil {
		return fail(remoting.IllegalOperation, err.Error())
	}
	if handle.topic != topic {
		return fail(remoting.IllegalOperation, "recall failed, topic not match")
	}
	if handle.brokerName != b.cfg.BrokerName {
		return fail(remoting.IllegalOperation, "recall failed, broker service not available")
	}
	deliverMs, err := strconv.ParseInt(handle.deliverMs, 10, 64)
	now := time.Now()
	if left := deliverMs - now.UnixMilli(); err != nil || left <= 0 || left >= b.timerCfg.MaxDelay.Milliseconds() {
		return fail(remoting.IllegalOperation, "recall failed, timestamp invalid")
	}
	props := commitlog.RewriteProperties("", nil,
		[2]string{commitlog.PropertyTags, recallTag},
		[2]string{timer.PropDeleteKey, handle.topic + "+" + handle.uniqKey},
		[2]string{propUniqKey, handle.uniqKey},
		[2]string{timer.PropDeliverMs, handle.deliverMs},
		[2]string{"BORN_TIMESTAMP", strconv.FormatInt(now.UnixMilli(), 10)},
		[2]string{"TRACE_CONTEXT", ""},
		[2]string{"PGROUP", group},
	)
	msg := &commitlog.Message{Topic: handle.topic, QueueID: 0, BornTimestamp: now.UnixMilli(),
		BornHost: bornHost(conn), Body: []byte("0"), Properties: props}
	if err := b.park(msg, 0); err != nil {
		b.log.Warn().Err(err).Str("topic", topic).Str("uniqKey", handle.uniqKey).Msg("recall: the cancel cannot be parked")
		return fail(remoting.SystemError, "recall failed, execute error")
	}
	// A FLUSH_DISK_TIMEOUT still answers SUCCESS, as RocketMQ's does: the
	// cancel is stored.
	if _, err := b.putMessages(ctx, []*commitlog.Message{msg}, true); err != nil {
		b.log.Warn().Err(err).Str("topic", topic).Str("uniqKey", handle.uniqKey).Msg("recall: put failed")
		return fail(remoting.SystemError, "recall failed, execute error")
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{"msgId": handle.uniqKey, "MSG_REGION": b.cfg.RegionID}
	return resp
}
