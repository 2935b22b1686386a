package grpcproxy

import (
	"compress/gzip"
	"compress/zlib"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/internal/msgbody"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// Properties a Remoting message keeps the protocol's system properties in
// (RocketMQ's MessageConst).
const (
	propTags          = "TAGS"
	propKeys          = "KEYS"
	propUniqKey       = "UNIQ_KEY"
	propWait          = "WAIT"
	propDelayLevel    = "DELAY"
	propTimerDeliver  = "TIMER_DELIVER_MS"
	propTimerDelaySec = "TIMER_DELAY_SEC"
	propShardingKey   = "__SHARDINGKEY"
	propTraceContext  = "TRACE_CONTEXT"
	propBornHost      = "__BORNHOST"
	propBornTimestamp = "BORN_TIMESTAMP"
	propProducerGroup = "PGROUP"
	propReconsumeTime = "RECONSUME_TIME"
	propTranMsg       = "TRAN_MSG"
	propPopCK         = "POP_CK"
	propDLQOrigTopic  = "DLQ_ORIGIN_TOPIC"
	propDLQOrigMsgID  = "DLQ_ORIGIN_MESSAGE_ID"
	propRetryTopic    = "RETRY_TOPIC"
	propOriginMsgID   = "ORIGIN_MESSAGE_ID"
	propCheckImmunity = "CHECK_IMMUNITY_TIME_IN_SECONDS"
)

// systemPropertyNames are the property names a user property may not
// take: RocketMQ's MessageConst.STRING_HASH_SET, and the proxy's own
// (__SHARDINGKEY, TRACE_CONTEXT, INNER_MULTI_DISPATCH,
// CHECK_IMMUNITY_TIME_IN_SECONDS), which it writes from system fields.
var systemPropertyNames = map[string]bool{}

func init() {
	for _, n := range strings.Fields(`TRACE_ON MSG_REGION KEYS TAGS WAIT DELAY RETRY_TOPIC REAL_TOPIC REAL_QID
		TRAN_MSG PGROUP MIN_OFFSET MAX_OFFSET BUYER_ID ORIGIN_MESSAGE_ID TRANSFER_FLAG CORRECTION_FLAG
		MQ2_FLAG RECONSUME_TIME UNIQ_KEY MAX_RECONSUME_TIMES CONSUME_START_TIME POP_CK POP_CK_OFFSET
		1ST_POP_TIME TRAN_PREPARED_QUEUE_OFFSET DUP_INFO EXTEND_UNIQ_INFO INSTANCE_ID CORRELATION_ID
		REPLY_TO_CLIENT TTL ARRIVE_TIME PUSH_REPLY_TIME CLUSTER MSG_TYPE INNER_MULTI_QUEUE_OFFSET
		INNER_MULTI_DISPATCH __SHARDINGKEY TRACE_CONTEXT TIMER_DELAY_SEC TIMER_DELIVER_MS __BORNHOST
		TIMER_OUT_MS TIMER_ENQUEUE_MS TIMER_DEQUEUE_MS TIMER_ROLL_TIMES TIMER_DEL_UNIQKEY
		TIMER_DELAY_MS TIMER_DELAY_LEVEL __CRC32#
		BORN_TIMESTAMP DLQ_ORIGIN_TOPIC DLQ_ORIGIN_MESSAGE_ID CHECK_IMMUNITY_TIME_IN_SECONDS`) {
		systemPropertyNames[n] = true
	}
}

// outgoing is one message ready for SEND_MESSAGE_V2.
type outgoing struct {
	props     string
	body      []byte
	born      int64
	messageID string
	group     string // message group (FIFO), or ""
	sysFlag   int32  // TransactionPrepared for a half message
	delay     bool   // a delivery time is set
}

// messageType is the type RocketMQ's proxy gives a message by its
// properties (TopicMessageType.parseFromMessageProperty).
func (o *outgoing) messageType() rmqpb.MessageType {
	switch {
	case o.sysFlag == commitlog.TransactionPrepared:
		return rmqpb.MessageType_TRANSACTION
	case o.delay:
		return rmqpb.MessageType_DELAY
	case o.group != "":
		return rmqpb.MessageType_FIFO
	}
	return rmqpb.MessageType_NORMAL
}

// buildOutgoing checks a message as RocketMQ's proxy does and turns it
// into a Remoting message's properties and body. topic is the wrapped
// topic every message of the request must name; peer is the caller's
// address, the born host when the message names none.
func (s *Server) buildOutgoing(m *rmqpb.Message, topic, peer string, now time.Time) (outgoing, error) {
	var o outgoing
	if wrap(m.GetTopic()) != topic {
		return o, fail(rmqpb.Code_MESSAGE_CORRUPTED, "every message of a request must name the same topic (%s, not %s)", topic, wrap(m.GetTopic()))
	}
	sp := m.GetSystemProperties()
	if sp == nil {
		return o, fail(rmqpb.Code_MESSAGE_CORRUPTED, "message without system properties")
	}
	body := m.GetBody()
	if sp.GetBodyEncoding() == rmqpb.Encoding_GZIP {
		plain, err := inflate(gzipReader, body, s.cfg.MaxMessageSize)
		if errors.Is(err, errInflatedTooLarge) {
			return o, fail(rmqpb.Code_MESSAGE_BODY_TOO_LARGE, "message body inflates to more than the maximum %d bytes", s.cfg.MaxMessageSize)
		}
		if err != nil {
			return o, fail(rmqpb.Code_MESSAGE_CORRUPTED, "message body is not valid gzip: %v", err)
		}
		body = plain
	}
	if len(body) == 0 && s.cfg.CheckEmptyBody {
		return o, fail(rmqpb.Code_MESSAGE_BODY_EMPTY, "message body cannot be empty")
	}
	if len(body) > s.cfg.MaxMessageSize {
		return o, fail(rmqpb.Code_MESSAGE_BODY_TOO_LARGE, "message body of %d bytes exceeds the maximum %d", len(body), s.cfg.MaxMessageSize)
	}
	if meta.IsBlank(sp.GetMessageId()) {
		// As RocketMQ's proxy (StringUtils.isBlank, Java's whitespace): an
		// id of spaces names no message.
		return o, fail(rmqpb.Code_ILLEGAL_MESSAGE_ID, "message id cannot be blank")
	}
	// The message id, trace context and born host go into the properties
	// string as values: a control character (its separators are 0x01 and
	// 0x02) would cut a value short and add properties of the client's
	// choosing past every check here (TRAN_MSG, DELAY, REAL_TOPIC).
	if hasControl(sp.GetMessageId()) {
		return o, fail(rmqpb.Code_ILLEGAL_MESSAGE_ID, "message id %q holds control characters", sp.GetMessageId())
	}
	if hasControl(sp.GetTraceContext()) {
		return o, fail(rmqpb.Code_BAD_REQUEST, "trace context %q holds control characters", sp.GetTraceContext())
	}
	if !meta.IsBlank(sp.GetBornHost()) && hasControl(sp.GetBornHost()) {
		return o, fail(rmqpb.Code_BAD_REQUEST, "born host %q holds control characters", sp.GetBornHost())
	}
	if n := len(m.GetUserProperties()); n > s.cfg.UserPropertyMaxNum {
		return o, fail(rmqpb.Code_MESSAGE_PROPERTIES_TOO_LARGE, "%d user properties, more than %d", n, s.cfg.UserPropertyMaxNum)
	}
	props := make(map[string]string, len(m.GetUserProperties())+8)
	size := 0
	for k, v := range m.GetUserProperties() {
		switch {
		case systemPropertyNames[k]:
			return o, fail(rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "property %s is used by the system", k)
		case k == "" || hasControl(k) || hasControl(v):
			return o, fail(rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "property %q cannot be empty or hold control characters", k)
		}
		props[k] = v
		size += len(k) + len(v)
	}
	// An empty tag or key is no tag or key (the Go client sends SetTag("")
	// as an empty tag); only a non-empty one is checked, as RocketMQ's
	// proxy does (GrpcValidator.validateTag, validateMessageKey).
	if tag := sp.GetTag(); tag != "" {
		if meta.IsBlank(tag) || strings.Contains(tag, "|") || hasControl(tag) {
			return o, fail(rmqpb.Code_ILLEGAL_MESSAGE_TAG, "tag %q must not be blank or hold '|' or control characters", tag)
		}
		props[propTags] = tag
		size += len(tag)
	}
	keys := make([]string, 0, len(sp.GetKeys()))
	for _, k := range sp.GetKeys() {
		if k == "" {
			continue
		}
		if meta.IsBlank(k) || hasControl(k) {
			return o, fail(rmqpb.Code_ILLEGAL_MESSAGE_KEY, "key %q must not be blank or hold control characters", k)
		}
		keys = append(keys, k)
		size += len(k)
	}
	if len(keys) > 0 {
		props[propKeys] = strings.Join(keys, " ")
	}
	if size > s.cfg.MaxUserPropertySize {
		return o, fail(rmqpb.Code_MESSAGE_PROPERTIES_TOO_LARGE, "user properties, tag and keys take %d bytes, more than %d", size, s.cfg.MaxUserPropertySize)
	}
	if sp.GetMessageType() == rmqpb.MessageType_TRANSACTION {
		props[propTranMsg] = "true"
		o.sysFlag = commitlog.TransactionPrepared
		if d := sp.GetOrphanedTransactionRecoveryDuration(); d != nil {
			secs := int64(d.AsDuration() / time.Second)
			if limit := s.cfg.MaxTransactionRecovery; secs < 0 || limit > 0 && time.Duration(secs)*time.Second > limit {
				return o, fail(rmqpb.Code_BAD_REQUEST, "orphaned transaction recovery of %v is outside 0..%v", d.AsDuration(), limit)
			}
			props[propCheckImmunity] = strconv.FormatInt(secs, 10)
		}
	}
	props[propUniqKey] = sp.GetMessageId()
	if ts := sp.GetDeliveryTimestamp(); sp.DeliveryTimestamp != nil {
		if err := ts.CheckValid(); err != nil {
			return o, fail(rmqpb.Code_ILLEGAL_DELIVERY_TIME, "delivery time: %v", err)
		}
		at := ts.AsTime()
		if s.cfg.MaxDelay > 0 && at.Sub(now) > s.cfg.MaxDelay {
			return o, fail(rmqpb.Code_ILLEGAL_DELIVERY_TIME, "delivery time %s is more than %v ahead", at.Format(time.RFC3339), s.cfg.MaxDelay)
		}
		props[propTimerDeliver] = strconv.FormatInt(at.UnixMilli(), 10)
		o.delay = true
	}
	props[propReconsumeTime] = strconv.Itoa(int(sp.GetDeliveryAttempt()))
	props[propProducerGroup] = topic
	if g := sp.GetMessageGroup(); g != "" {
		if meta.IsBlank(g) || hasControl(g) || s.cfg.MaxMessageGroupSize > 0 && len(g) >= s.cfg.MaxMessageGroupSize {
			return o, fail(rmqpb.Code_ILLEGAL_MESSAGE_GROUP, "message group %q must not be blank, hold control characters or reach %d bytes", g, s.cfg.MaxMessageGroupSize)
		}
		props[propShardingKey] = g
		o.group = g
	}
	if tc := sp.GetTraceContext(); tc != "" {
		props[propTraceContext] = tc
	}
	// A blank born host is none: the caller's address stands for it, as
	// RocketMQ's proxy writes it.
	if bh := sp.GetBornHost(); !meta.IsBlank(bh) {
		props[propBornHost] = bh
	} else if peer != "" {
		props[propBornHost] = peer
	}
	o.born = now.UnixMilli()
	if bt := sp.GetBornTimestamp(); bt != nil && bt.IsValid() {
		o.born = bt.AsTime().UnixMilli()
		props[propBornTimestamp] = strconv.FormatInt(o.born, 10)
	}
	props[propWait] = "true"
	o.props = commitlog.FormatProperties(props)
	o.body = body
	o.messageID = sp.GetMessageId()
	return o, nil
}

// deadLetterOrigin returns the topic a message of topic was sent to and
// the id its producer was given, when the broker moved it to a
// dead-letter queue; empty strings otherwise. rocketkv's POP revive and
// send-back named the record they copied in DLQ_ORIGIN_TOPIC and
// DLQ_ORIGIN_MESSAGE_ID before they wrote what RocketMQ's send-back does
// (records stored then keep them, and RocketMQ's proxy reads them); a
// send-back or a POP revive's move to the DLQ
// (CONSUMER_SEND_MSG_BACK, a FIFO consumer's forward) names it, as
// RocketMQ's consumerSendMsgBack, only in RETRY_TOPIC (the topic the
// message was first sent to, or the retry topic the record was in) and
// ORIGIN_MESSAGE_ID (the first record's offset id), as does a retry the
// broker moved there (a Java consumer's own send to its retry topic,
// sendMessageBackAsNormalMessage, whose ORIGIN_MESSAGE_ID may be
// missing): a message of %DLQ%<group> with RETRY_TOPIC is a retry moved
// there. The client knows the topic it subscribed and the id its
// producer was given, which the copy keeps in UNIQ_KEY.
func deadLetterOrigin(topic string, props map[string]string) (origin, id string) {
	origin, id = props[propDLQOrigTopic], props[propDLQOrigMsgID]
	if origin == "" || id == "" {
		if !meta.IsDLQTopic(topic) {
			return "", ""
		}
		origin, id = props[propRetryTopic], props[propOriginMsgID]
	}
	if u := props[propUniqKey]; u != "" {
		id = u
	}
	if origin == "" || id == "" {
		return "", ""
	}
	return dlqOriginTopic(origin, topic, props[propRetryTopic]), id
}

// dlqOriginTopic returns the topic a dead-letter message (of topic
// dlq, "%DLQ%<group>") was sent to, from the origin its DLQ_ORIGIN_TOPIC
// names: a retry topic stands for the topic its RETRY_TOPIC names (a
// Remoting consumer's retry, "%RETRY%<group>") or, for a POP retry
// ("%RETRY%<group>_<topic>", or '+' in RocketMQ's second form), the topic
// its name ends with.
func dlqOriginTopic(origin, dlq, retryTopic string) string {
	if !meta.IsRetryTopic(origin) {
		return origin
	}
	if retryTopic != "" && !meta.IsRetryTopic(retryTopic) {
		return retryTopic
	}
	group, ok := strings.CutPrefix(dlq, meta.DLQGroupTopicPrefix)
	if !ok {
		return origin
	}
	rest, ok := strings.CutPrefix(origin, meta.RetryGroupTopicPrefix+group)
	if ok && len(rest) > 1 && (rest[0] == '_' || rest[0] == '+') {
		return rest[1:]
	}
	return origin
}

// hasControl reports whether s holds a control character.
func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// received is one popped message with what the proxy adds to it (a
// transaction check's half message has no handle).
type received struct {
	msg       commitlog.Message
	handle    Handle
	topic     string // the topic the client asked for, as it named it
	invisible time.Duration
}

// toProto converts a popped message into the protocol's message, as
// RocketMQ's proxy does (GrpcConverter.buildMessage): system properties
// from the properties RocketMQ keeps them in, user properties from the
// rest, the body decompressed.
func toProto(r *received) (*rmqpb.Message, error) {
	m := &r.msg
	props := validUTF8(commitlog.ParseProperties(m.Properties))
	body := m.Body
	if ct := commitlog.CompressionType(m.SysFlag); ct != 0 {
		plain, err := decompress(ct, body)
		if err != nil {
			return nil, fmt.Errorf("message %s/%d@%d: %w", m.Topic, m.QueueID, m.QueueOffset, err)
		}
		body = plain
	}
	sum := md5.Sum(body)
	sp := &rmqpb.SystemProperties{
		MessageId:      props[propUniqKey],
		BodyDigest:     &rmqpb.Digest{Type: rmqpb.DigestType_MD5, Checksum: strings.ToUpper(hex.EncodeToString(sum[:]))},
		BodyEncoding:   rmqpb.Encoding_IDENTITY,
		BornTimestamp:  timestamppb.New(time.UnixMilli(m.BornTimestamp)),
		StoreTimestamp: timestamppb.New(time.UnixMilli(m.StoreTimestamp)),
		StoreHost:      m.StoreHost.String(),
		QueueId:        m.QueueID,
	}
	if sp.MessageId == "" {
		sp.MessageId = commitlog.MessageID(m.StoreHost, m.PhyOffset)
	}
	if t, ok := props[propTags]; ok {
		sp.Tag = &t
	}
	if k := props[propKeys]; k != "" {
		sp.Keys = strings.Fields(k)
	}
	switch {
	case props[propTranMsg] == "true":
		sp.MessageType = rmqpb.MessageType_TRANSACTION
	case props[propDelayLevel] != "" || props[propTimerDeliver] != "" || props[propTimerDelaySec] != "":
		sp.MessageType = rmqpb.MessageType_DELAY
	case props[propShardingKey] != "":
		sp.MessageType = rmqpb.MessageType_FIFO
	default:
		sp.MessageType = rmqpb.MessageType_NORMAL
	}
	if bh := props[propBornHost]; bh != "" {
		sp.BornHost = bh
	} else {
		sp.BornHost = m.BornHost.String()
	}
	if v, err := strconv.ParseInt(props[propTimerDeliver], 10, 64); err == nil {
		sp.DeliveryTimestamp = timestamppb.New(time.UnixMilli(v))
	}
	if g, ok := props[propShardingKey]; ok {
		sp.MessageGroup = &g
	}
	if r.handle.BrokerName != "" {
		rh := r.handle.String()
		sp.ReceiptHandle = &rh
		sp.InvisibleDuration = durationpb.New(r.invisible)
	}
	qo := m.QueueOffset
	sp.QueueOffset = &qo
	attempt := m.ReconsumeTimes + 1
	sp.DeliveryAttempt = &attempt
	if tc, ok := props[propTraceContext]; ok {
		sp.TraceContext = &tc
	}
	if t, id := deadLetterOrigin(m.Topic, props); t != "" && id != "" {
		sp.DeadLetterQueue = &rmqpb.DeadLetterQueue{Topic: t, MessageId: id}
	}
	// A retry or dead-letter record a revive put carries the broker's
	// own RKV_REVIVED_FROM (a client cannot send it to those topics): it
	// is no property of the message.
	revived := meta.IsRetryTopic(m.Topic) || meta.IsDLQTopic(m.Topic)
	user := make(map[string]string, len(props))
	for k, v := range props {
		if !systemPropertyNames[k] && (!revived || k != kvindex.PropertyRevivedFrom) {
			user[k] = v
		}
	}
	return &rmqpb.Message{
		Topic:            &rmqpb.Resource{Name: r.topic},
		UserProperties:   user,
		SystemProperties: sp,
		Body:             body,
	}, nil
}

// validUTF8 makes every key and value of props valid UTF-8, bytes that are
// not replaced by U+FFFD as Java's decoding replaces them: a Remoting
// producer may store any bytes, and gRPC refuses to send a string that is
// not UTF-8, which would fail the whole receive.
func validUTF8(props map[string]string) map[string]string {
	for k, v := range props {
		if utf8.ValidString(k) && utf8.ValidString(v) {
			continue
		}
		delete(props, k)
		props[strings.ToValidUTF8(k, "\uFFFD")] = strings.ToValidUTF8(v, "\uFFFD")
	}
	return props
}

// maxInflated bounds a decompressed body: RocketMQ's largest message is
// well under it, and a hostile body cannot make the proxy allocate more.
const maxInflated = 256 << 20

// decompress inflates a stored body compressed by a Remoting producer
// with the sysFlag's algorithm.
func decompress(ct int32, body []byte) ([]byte, error) {
	return msgbody.Decompress(ct, body, maxInflated)
}

func zlibReader(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }
func gzipReader(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }

// errInflatedTooLarge is inflate's error for a body that decompresses to
// more than its limit.
var errInflatedTooLarge = msgbody.ErrTooLarge

// inflate reads all of a compressed body through open, refusing more than
// limit bytes of output.
func inflate(open func(io.Reader) (io.Reader, error), body []byte, limit int) ([]byte, error) {
	return msgbody.Inflate(open, body, limit)
}
