package grpcproxy

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"compress/zlib"
	"crypto/md5"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/timer"
)

// configOnlyServer returns a Server holding only a configuration (the
// defaults changed by mutate): enough for buildOutgoing, which reads
// nothing else of it.
func configOnlyServer(mutate func(*Config)) *Server {
	cfg := DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	return &Server{cfg: cfg}
}

// validMessage returns a message of topic TopicA that buildOutgoing
// accepts with the default configuration: a tag, two keys, a message id,
// one user property and a small body.
func validMessage() *rmqpb.Message {
	return &rmqpb.Message{
		Topic:          &rmqpb.Resource{Name: "TopicA"},
		UserProperties: map[string]string{"u1": "v1"},
		SystemProperties: &rmqpb.SystemProperties{
			Tag:         proto.String("TagA"),
			Keys:        []string{"k1", "k2"},
			MessageId:   "01ID-1",
			MessageType: rmqpb.MessageType_NORMAL,
		},
		Body: []byte("hello"),
	}
}

// gzipped returns b compressed with gzip.
func gzipped(t testing.TB, b []byte) []byte { return compressed(t, "gzip", &gzipWriters, b) }

// The compressors are reused: making one allocates its window and tables,
// which took most of the time of an input of FuzzDecompress, FuzzInflate
// and FuzzToProto (a zstd encoder alone several times what it encodes).
var (
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	zlibWriters = sync.Pool{New: func() any { return zlib.NewWriter(nil) }}
	lz4Writers  = sync.Pool{New: func() any { return lz4.NewWriter(nil) }}
	zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) { return zstd.NewWriter(nil) })
)

// compressed returns b written through a stream compressor of pool (name
// is for failures).
func compressed(t testing.TB, name string, pool *sync.Pool, b []byte) []byte {
	t.Helper()
	w := pool.Get().(interface {
		io.WriteCloser
		Reset(io.Writer)
	})
	defer pool.Put(w)
	var buf bytes.Buffer
	w.Reset(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatalf("%s %d bytes: %v", name, len(b), err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("%s %d bytes: %v", name, len(b), err)
	}
	return buf.Bytes()
}

// codeOf returns the protocol status code an error of the proxy answers.
func codeOf(err error) rmqpb.Code { return statusOf(err).GetCode() }

// TestBuildOutgoingRefuses checks that buildOutgoing refuses the messages
// RocketMQ's proxy refuses, each with the status code RocketMQ answers.
func TestBuildOutgoingRefuses(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	small := func(c *Config) {
		c.MaxMessageSize = 16
		c.MaxUserPropertySize = 32
		c.UserPropertyMaxNum = 3
		c.MaxMessageGroupSize = 8
		c.MaxDelay = time.Hour
	}
	tests := []struct {
		name   string
		topic  string // the request's topic; TopicA when empty
		mutate func(m *rmqpb.Message)
		want   rmqpb.Code
	}{
		{"another topic than the request's", "TopicB", func(m *rmqpb.Message) {}, rmqpb.Code_MESSAGE_CORRUPTED},
		{"same name in another namespace", "", func(m *rmqpb.Message) { m.Topic.ResourceNamespace = "ns1" }, rmqpb.Code_MESSAGE_CORRUPTED},
		{"no system properties", "", func(m *rmqpb.Message) { m.SystemProperties = nil }, rmqpb.Code_MESSAGE_CORRUPTED},
		{"GZIP encoding of a body that is not gzip", "", func(m *rmqpb.Message) {
			m.SystemProperties.BodyEncoding = rmqpb.Encoding_GZIP
		}, rmqpb.Code_MESSAGE_CORRUPTED},
		{"empty body", "", func(m *rmqpb.Message) { m.Body = nil }, rmqpb.Code_MESSAGE_BODY_EMPTY},
		{"GZIP body that inflates to nothing", "", func(m *rmqpb.Message) {
			m.SystemProperties.BodyEncoding = rmqpb.Encoding_GZIP
			m.Body = gzipped(t, nil)
		}, rmqpb.Code_MESSAGE_BODY_EMPTY},
		{"body one byte over the maximum", "", func(m *rmqpb.Message) { m.Body = make([]byte, 17) }, rmqpb.Code_MESSAGE_BODY_TOO_LARGE},
		{"empty message id", "", func(m *rmqpb.Message) { m.SystemProperties.MessageId = "" }, rmqpb.Code_ILLEGAL_MESSAGE_ID},
		{"blank message id", "", func(m *rmqpb.Message) { m.SystemProperties.MessageId = " \t " }, rmqpb.Code_ILLEGAL_MESSAGE_ID},
		// Each would end its value in the properties string and add a
		// property past the checks: here a transaction's TRAN_MSG.
		{"message id carrying a property", "", func(m *rmqpb.Message) {
			m.SystemProperties.MessageId = "id\x02TRAN_MSG\x01true"
		}, rmqpb.Code_ILLEGAL_MESSAGE_ID},
		{"trace context carrying a property", "", func(m *rmqpb.Message) {
			m.SystemProperties.TraceContext = proto.String("tc\x02DELAY\x013")
		}, rmqpb.Code_BAD_REQUEST},
		{"born host carrying a property", "", func(m *rmqpb.Message) {
			m.SystemProperties.BornHost = "10.0.0.1\x02REAL_TOPIC\x01other"
		}, rmqpb.Code_BAD_REQUEST},
		{"system property TAGS as a user property", "", func(m *rmqpb.Message) {
			m.UserProperties["TAGS"] = "x"
		}, rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"system property UNIQ_KEY as a user property", "", func(m *rmqpb.Message) {
			m.UserProperties["UNIQ_KEY"] = "x"
		}, rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"system property __SHARDINGKEY as a user property", "", func(m *rmqpb.Message) {
			m.UserProperties["__SHARDINGKEY"] = "x"
		}, rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"empty user property key", "", func(m *rmqpb.Message) { m.UserProperties[""] = "x" }, rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"control character in a user property key", "", func(m *rmqpb.Message) {
			m.UserProperties["a\x01b"] = "x"
		}, rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"control character in a user property value", "", func(m *rmqpb.Message) {
			m.UserProperties["u2"] = "x\x02y"
		}, rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		{"blank tag", "", func(m *rmqpb.Message) { m.SystemProperties.Tag = proto.String("  \t ") }, rmqpb.Code_ILLEGAL_MESSAGE_TAG},
		{"tag with '|'", "", func(m *rmqpb.Message) { m.SystemProperties.Tag = proto.String("a|b") }, rmqpb.Code_ILLEGAL_MESSAGE_TAG},
		{"tag with a control character", "", func(m *rmqpb.Message) {
			m.SystemProperties.Tag = proto.String("a\nb")
		}, rmqpb.Code_ILLEGAL_MESSAGE_TAG},
		{"blank key", "", func(m *rmqpb.Message) { m.SystemProperties.Keys = []string{"k1", " "} }, rmqpb.Code_ILLEGAL_MESSAGE_KEY},
		{"user properties, tag and keys over the maximum", "", func(m *rmqpb.Message) {
			m.UserProperties["u2"] = strings.Repeat("v", 32)
		}, rmqpb.Code_MESSAGE_PROPERTIES_TOO_LARGE},
		{"more user properties than the maximum", "", func(m *rmqpb.Message) {
			for _, k := range []string{"a", "b", "c", "d"} {
				m.UserProperties[k] = ""
			}
		}, rmqpb.Code_MESSAGE_PROPERTIES_TOO_LARGE},
		{"transaction recovery time over an hour", "", func(m *rmqpb.Message) {
			m.SystemProperties.MessageType = rmqpb.MessageType_TRANSACTION
			m.SystemProperties.OrphanedTransactionRecoveryDuration = durationpb.New(time.Hour + time.Second)
		}, rmqpb.Code_BAD_REQUEST},
		{"negative transaction recovery time", "", func(m *rmqpb.Message) {
			m.SystemProperties.MessageType = rmqpb.MessageType_TRANSACTION
			m.SystemProperties.OrphanedTransactionRecoveryDuration = durationpb.New(-time.Second)
		}, rmqpb.Code_BAD_REQUEST},
		{"delivery time a millisecond beyond the maximum delay", "", func(m *rmqpb.Message) {
			m.SystemProperties.DeliveryTimestamp = timestamppb.New(now.Add(time.Hour + time.Millisecond))
		}, rmqpb.Code_ILLEGAL_DELIVERY_TIME},
		{"invalid delivery timestamp", "", func(m *rmqpb.Message) {
			m.SystemProperties.DeliveryTimestamp = &timestamppb.Timestamp{Seconds: 1, Nanos: -1}
		}, rmqpb.Code_ILLEGAL_DELIVERY_TIME},
		{"message group as long as the maximum", "", func(m *rmqpb.Message) {
			m.SystemProperties.MessageGroup = proto.String("12345678")
		}, rmqpb.Code_ILLEGAL_MESSAGE_GROUP},
		{"blank message group", "", func(m *rmqpb.Message) {
			m.SystemProperties.MessageGroup = proto.String("   ")
		}, rmqpb.Code_ILLEGAL_MESSAGE_GROUP},
		{"message group with a control character", "", func(m *rmqpb.Message) {
			m.SystemProperties.MessageGroup = proto.String("g\x7f")
		}, rmqpb.Code_ILLEGAL_MESSAGE_GROUP},
	}
	s := configOnlyServer(small)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := validMessage()
			tc.mutate(m)
			topic := cmp.Or(tc.topic, "TopicA")
			o, err := s.buildOutgoing(m, topic, "10.0.0.1:5555", now)
			if err == nil {
				t.Fatalf("buildOutgoing accepted the message (properties %q), want %v", o.props, tc.want)
			}
			if got := codeOf(err); got != tc.want {
				t.Fatalf("buildOutgoing answered %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

// TestBuildOutgoingAcceptsLimits checks that buildOutgoing accepts the
// values just inside each limit it enforces.
func TestBuildOutgoingAcceptsLimits(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	s := configOnlyServer(func(c *Config) {
		c.MaxMessageSize = 16
		c.MaxUserPropertySize = 32
		c.MaxMessageGroupSize = 8
		c.MaxDelay = time.Hour
	})
	tests := []struct {
		name   string
		mutate func(m *rmqpb.Message)
	}{
		{"body of exactly the maximum size", func(m *rmqpb.Message) { m.Body = make([]byte, 16) }},
		{"GZIP body inflating to exactly the maximum size", func(m *rmqpb.Message) {
			m.SystemProperties.BodyEncoding = rmqpb.Encoding_GZIP
			m.Body = gzipped(t, make([]byte, 16))
		}},
		{"delivery time exactly the maximum delay ahead", func(m *rmqpb.Message) {
			m.SystemProperties.DeliveryTimestamp = timestamppb.New(now.Add(time.Hour))
		}},
		{"delivery time in the past", func(m *rmqpb.Message) {
			m.SystemProperties.DeliveryTimestamp = timestamppb.New(now.Add(-time.Hour))
		}},
		{"message group one byte under the maximum", func(m *rmqpb.Message) {
			m.SystemProperties.MessageGroup = proto.String("1234567")
		}},
		// u1 v1 TagA k1 k2 take 12 bytes; u2 and 18 bytes more make 32.
		{"user properties, tag and keys of exactly the maximum", func(m *rmqpb.Message) {
			m.UserProperties["u2"] = strings.Repeat("v", 18)
		}},
		{"no tag and no keys", func(m *rmqpb.Message) {
			m.SystemProperties.Tag = nil
			m.SystemProperties.Keys = nil
		}},
		{"namespaced topic", func(m *rmqpb.Message) { m.Topic.ResourceNamespace = "ns1" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := validMessage()
			tc.mutate(m)
			if _, err := s.buildOutgoing(m, wrap(m.GetTopic()), "10.0.0.1:5555", now); err != nil {
				t.Fatalf("buildOutgoing refused the message: %v", err)
			}
		})
	}
}

// TestBuildOutgoingEmptyTagAndKeysAreNone checks that an empty tag (the Go
// client's SetTag("")) and empty entries of the keys list are accepted
// and stored as no tag and no key, as RocketMQ's proxy only checks a
// non-empty tag or key (GrpcValidator.validateTag, validateMessageKey),
// while a blank one is still refused (TestBuildOutgoingRefuses).
func TestBuildOutgoingEmptyTagAndKeysAreNone(t *testing.T) {
	s := configOnlyServer(nil)
	m := validMessage()
	m.SystemProperties.Tag = proto.String("")
	m.SystemProperties.Keys = []string{"", "k1", "", "k2", ""}
	o, err := s.buildOutgoing(m, "TopicA", "", time.Now())
	if err != nil {
		t.Fatalf("an empty tag and empty keys refused with %v (%v); RocketMQ's proxy accepts them", codeOf(err), err)
	}
	props := commitlog.ParseProperties(o.props)
	if tag, ok := props["TAGS"]; ok {
		t.Errorf("an empty tag is stored as TAGS %q, want no TAGS", tag)
	}
	if got := props["KEYS"]; got != "k1 k2" {
		t.Errorf("KEYS = %q, want %q (the empty keys left out)", got, "k1 k2")
	}
	m.SystemProperties.Keys = []string{""}
	if o, err = s.buildOutgoing(m, "TopicA", "", time.Now()); err != nil {
		t.Fatalf("a keys list of one empty key refused with %v (%v)", codeOf(err), err)
	}
	if keys, ok := commitlog.ParseProperties(o.props)["KEYS"]; ok {
		t.Errorf("a keys list of one empty key is stored as KEYS %q, want no KEYS", keys)
	}
}

// TestBuildOutgoingGzipBodyTooLarge checks that a GZIP-encoded body that
// inflates to more than the maximum message size is refused as too large,
// as the same body sent uncompressed is.
func TestBuildOutgoingGzipBodyTooLarge(t *testing.T) {
	s := configOnlyServer(func(c *Config) { c.MaxMessageSize = 16 })
	m := validMessage()
	m.SystemProperties.BodyEncoding = rmqpb.Encoding_GZIP
	m.Body = gzipped(t, make([]byte, 17))
	_, err := s.buildOutgoing(m, "TopicA", "", time.Now())
	if got := codeOf(err); got != rmqpb.Code_MESSAGE_BODY_TOO_LARGE {
		t.Fatalf("buildOutgoing of a GZIP body inflating to 17 bytes (maximum 16) answered %v (%v), want MESSAGE_BODY_TOO_LARGE", got, err)
	}
}

// TestBuildOutgoingProperties checks the Remoting properties and fields of
// an accepted message: every system property in the property RocketMQ
// keeps it in (keys space-joined), the producer group, WAIT, the peer as
// born host when the message names none, and the user properties as
// given.
func TestBuildOutgoingProperties(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	deliver := now.Add(90 * time.Minute)
	born := now.Add(-time.Second)
	m := validMessage()
	m.UserProperties["u2"] = "v 2"
	sp := m.SystemProperties
	sp.DeliveryTimestamp = timestamppb.New(deliver)
	sp.BornTimestamp = timestamppb.New(born)
	sp.MessageGroup = proto.String("group-1")
	sp.TraceContext = proto.String("00-trace-01")
	sp.DeliveryAttempt = proto.Int32(2)

	o, err := configOnlyServer(nil).buildOutgoing(m, "TopicA", "10.0.0.1:5555", now)
	if err != nil {
		t.Fatalf("buildOutgoing: %v", err)
	}
	want := map[string]string{
		"u1": "v1", "u2": "v 2",
		"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "01ID-1",
		"TIMER_DELIVER_MS": strconv.FormatInt(deliver.UnixMilli(), 10),
		"BORN_TIMESTAMP":   strconv.FormatInt(born.UnixMilli(), 10),
		"__SHARDINGKEY":    "group-1", "TRACE_CONTEXT": "00-trace-01",
		"__BORNHOST": "10.0.0.1:5555", "RECONSUME_TIME": "2",
		"PGROUP": "TopicA", "WAIT": "true",
	}
	if got := commitlog.ParseProperties(o.props); !maps.Equal(got, want) {
		t.Fatalf("properties %v, want %v", got, want)
	}
	if string(o.body) != "hello" || o.messageID != "01ID-1" || o.group != "group-1" || o.born != born.UnixMilli() {
		t.Fatalf("outgoing body %q, id %q, group %q, born %d; want \"hello\", 01ID-1, group-1, %d",
			o.body, o.messageID, o.group, o.born, born.UnixMilli())
	}
}

// TestBuildOutgoingDefaults checks the fields of a message that names
// neither born host nor born time: its born time is now, no
// BORN_TIMESTAMP is written, and a born host it names wins over the
// peer's address.
func TestBuildOutgoingDefaults(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	s := configOnlyServer(nil)
	o, err := s.buildOutgoing(validMessage(), "TopicA", "10.0.0.1:5555", now)
	if err != nil {
		t.Fatalf("buildOutgoing: %v", err)
	}
	props := commitlog.ParseProperties(o.props)
	if o.born != now.UnixMilli() {
		t.Errorf("born %d, want now %d", o.born, now.UnixMilli())
	}
	for _, k := range []string{"BORN_TIMESTAMP", "TIMER_DELIVER_MS", "__SHARDINGKEY", "TRACE_CONTEXT"} {
		if v, ok := props[k]; ok {
			t.Errorf("property %s = %q on a message that does not set it", k, v)
		}
	}
	if o.group != "" {
		t.Errorf("message group %q on a message without one", o.group)
	}

	m := validMessage()
	m.SystemProperties.BornHost = "192.168.1.9:40000"
	o, err = s.buildOutgoing(m, "TopicA", "10.0.0.1:5555", now)
	if err != nil {
		t.Fatalf("buildOutgoing with a born host: %v", err)
	}
	if got := commitlog.ParseProperties(o.props)["__BORNHOST"]; got != "192.168.1.9:40000" {
		t.Errorf("__BORNHOST %q, want the message's 192.168.1.9:40000", got)
	}
}

// TestBuildOutgoingTransaction checks that a transactional message is
// sent as a half message (TRAN_MSG and the prepared sysFlag) and that its
// orphaned-transaction recovery time becomes
// CHECK_IMMUNITY_TIME_IN_SECONDS in whole seconds.
func TestBuildOutgoingTransaction(t *testing.T) {
	m := validMessage()
	m.SystemProperties.MessageType = rmqpb.MessageType_TRANSACTION
	m.SystemProperties.OrphanedTransactionRecoveryDuration = durationpb.New(30*time.Second + 500*time.Millisecond)
	o, err := configOnlyServer(nil).buildOutgoing(m, "TopicA", "", time.Now())
	if err != nil {
		t.Fatalf("buildOutgoing: %v", err)
	}
	props := commitlog.ParseProperties(o.props)
	if props["TRAN_MSG"] != "true" || props["CHECK_IMMUNITY_TIME_IN_SECONDS"] != "30" {
		t.Errorf("TRAN_MSG %q, CHECK_IMMUNITY_TIME_IN_SECONDS %q; want true, 30", props["TRAN_MSG"], props["CHECK_IMMUNITY_TIME_IN_SECONDS"])
	}
	if o.sysFlag != commitlog.TransactionPrepared {
		t.Errorf("sysFlag %#x, want TransactionPrepared %#x", o.sysFlag, commitlog.TransactionPrepared)
	}

	o, err = configOnlyServer(nil).buildOutgoing(validMessage(), "TopicA", "", time.Now())
	if err != nil {
		t.Fatalf("buildOutgoing of a normal message: %v", err)
	}
	if _, ok := commitlog.ParseProperties(o.props)["TRAN_MSG"]; ok || o.sysFlag != 0 {
		t.Errorf("normal message has TRAN_MSG %v, sysFlag %#x; want neither", ok, o.sysFlag)
	}
}

// TestBuildOutgoingGzipBody checks that a GZIP-encoded body is stored
// decompressed.
func TestBuildOutgoingGzipBody(t *testing.T) {
	plain := []byte(strings.Repeat("compressible gzip body ", 20))
	m := validMessage()
	m.SystemProperties.BodyEncoding = rmqpb.Encoding_GZIP
	m.Body = gzipped(t, plain)
	o, err := configOnlyServer(nil).buildOutgoing(m, "TopicA", "", time.Now())
	if err != nil {
		t.Fatalf("buildOutgoing: %v", err)
	}
	if !bytes.Equal(o.body, plain) {
		t.Fatalf("stored body %q, want the inflated %q", o.body, plain)
	}
}

// storedMessage returns a popped message as the broker stores it: topic
// TopicA, queue 2 offset 14, reconsumed twice, with the given properties
// and body.
func storedMessage(props map[string]string, body []byte) commitlog.Message {
	return commitlog.Message{
		Topic: "TopicA", QueueID: 2, QueueOffset: 14, PhyOffset: 4096,
		BornTimestamp: 1_700_000_000_000, StoreTimestamp: 1_700_000_000_500,
		BornHost:       netip.MustParseAddrPort("10.0.0.1:5555"),
		StoreHost:      netip.MustParseAddrPort("127.0.0.1:10911"),
		ReconsumeTimes: 2,
		Properties:     commitlog.FormatProperties(props),
		Body:           body,
	}
}

// testHandle is the receipt handle the toProto tests give their messages.
var testHandle = Handle{Handle: pop.Handle{CKOffset: 14, PopTime: 1_700_000_001_000, InvisibleTime: 30000,
	ReviveQID: 1, RetryFlag: pop.FlagNormal, BrokerName: "broker-a", QueueID: 2, QueueOffset: 14}, CommitLogOffset: 4096}

// md5Upper is the body digest RocketMQ's proxy sends: MD5 in upper-case
// hex.
func md5Upper(b []byte) string { return fmt.Sprintf("%X", md5.Sum(b)) }

// TestToProtoSystemProperties checks that a popped message's system
// properties come from the properties RocketMQ keeps them in, that the
// proxy's own fields (handle, delivery attempt, queue, invisible time,
// digest) are set, and that only user properties stay user properties.
func TestToProtoSystemProperties(t *testing.T) {
	props := map[string]string{
		"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "01ID-1", "u1": "v1", "u2": "v2",
		"__SHARDINGKEY": "group-1", "TIMER_DELIVER_MS": "1700000060000", "TRACE_CONTEXT": "00-trace-01",
		"__BORNHOST": "10.9.9.9:7777", "WAIT": "true", "PGROUP": "TopicA", "RECONSUME_TIME": "2",
		"POP_CK": "14 1700000001000 30000 1 0 broker-a 2 14", "MAX_OFFSET": "15", "MIN_OFFSET": "0",
		"REAL_TOPIC": "TopicA", "REAL_QID": "2", "CONSUME_START_TIME": "1700000001000",
		// enabledAppendPropCRC's: RocketMQ's proxy keeps it out of the
		// user properties (MessageConst.STRING_HASH_SET).
		"__CRC32#": "7682564440",
	}
	r := &received{msg: storedMessage(props, []byte("hello")), handle: testHandle, topic: "TopicA", invisible: 30 * time.Second}
	m, err := toProto(r)
	if err != nil {
		t.Fatalf("toProto: %v", err)
	}
	sp := m.GetSystemProperties()
	checks := []struct {
		field     string
		got, want any
	}{
		{"topic", m.GetTopic().GetName(), "TopicA"},
		{"body", string(m.GetBody()), "hello"},
		{"message id", sp.GetMessageId(), "01ID-1"},
		{"tag", sp.GetTag(), "TagA"},
		{"keys", strings.Join(sp.GetKeys(), ","), "k1,k2"},
		{"message type (delivery time beats message group)", sp.GetMessageType(), rmqpb.MessageType_DELAY},
		{"message group", sp.GetMessageGroup(), "group-1"},
		{"delivery time", sp.GetDeliveryTimestamp().AsTime().UnixMilli(), int64(1700000060000)},
		{"trace context", sp.GetTraceContext(), "00-trace-01"},
		{"digest type", sp.GetBodyDigest().GetType(), rmqpb.DigestType_MD5},
		{"digest", sp.GetBodyDigest().GetChecksum(), md5Upper([]byte("hello"))},
		{"body encoding", sp.GetBodyEncoding(), rmqpb.Encoding_IDENTITY},
		{"delivery attempt (reconsume times + 1)", sp.GetDeliveryAttempt(), int32(3)},
		{"receipt handle", sp.GetReceiptHandle(), testHandle.String()},
		{"queue id", sp.GetQueueId(), int32(2)},
		{"queue offset", sp.GetQueueOffset(), int64(14)},
		{"invisible duration", sp.GetInvisibleDuration().AsDuration(), 30 * time.Second},
		{"born host (from __BORNHOST)", sp.GetBornHost(), "10.9.9.9:7777"},
		{"store host", sp.GetStoreHost(), "127.0.0.1:10911"},
		{"born time", sp.GetBornTimestamp().AsTime().UnixMilli(), int64(1_700_000_000_000)},
		{"store time", sp.GetStoreTimestamp().AsTime().UnixMilli(), int64(1_700_000_000_500)},
		{"dead letter queue", sp.GetDeadLetterQueue() == nil, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.field, c.got, c.want)
		}
	}
	if want := map[string]string{"u1": "v1", "u2": "v2"}; !maps.Equal(m.GetUserProperties(), want) {
		t.Errorf("user properties %v, want only %v", m.GetUserProperties(), want)
	}
	if _, err := proto.Marshal(m); err != nil {
		t.Errorf("the converted message does not marshal: %v", err)
	}
}

// TestToProtoMessageType checks the precedence of the message type as
// RocketMQ's proxy derives it: transaction, then delay (any of three
// properties), then FIFO (a message group), else normal.
func TestToProtoMessageType(t *testing.T) {
	tests := []struct {
		name  string
		props map[string]string
		want  rmqpb.MessageType
	}{
		{"no type property", map[string]string{"UNIQ_KEY": "x"}, rmqpb.MessageType_NORMAL},
		{"message group", map[string]string{"__SHARDINGKEY": "g"}, rmqpb.MessageType_FIFO},
		{"delay level", map[string]string{"DELAY": "3"}, rmqpb.MessageType_DELAY},
		{"delay seconds", map[string]string{"TIMER_DELAY_SEC": "10"}, rmqpb.MessageType_DELAY},
		{"delivery time and message group", map[string]string{"TIMER_DELIVER_MS": "1700000000000", "__SHARDINGKEY": "g"}, rmqpb.MessageType_DELAY},
		{"transaction and delivery time", map[string]string{"TRAN_MSG": "true", "TIMER_DELIVER_MS": "1700000000000"}, rmqpb.MessageType_TRANSACTION},
		{"TRAN_MSG other than true", map[string]string{"TRAN_MSG": "false"}, rmqpb.MessageType_NORMAL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := toProto(&received{msg: storedMessage(tc.props, []byte("b")), handle: testHandle, topic: "TopicA"})
			if err != nil {
				t.Fatalf("toProto: %v", err)
			}
			if got := m.GetSystemProperties().GetMessageType(); got != tc.want {
				t.Fatalf("message type %v, want %v", got, tc.want)
			}
		})
	}
}

// TestToProtoFallbacks checks the fields a popped message without the
// usual properties gets: the offset message id without UNIQ_KEY, the
// record's born host without __BORNHOST, no tag, keys, group or delivery
// time, and a dead-letter queue from the DLQ properties.
func TestToProtoFallbacks(t *testing.T) {
	r := &received{msg: storedMessage(map[string]string{
		"DLQ_ORIGIN_TOPIC": "TopicA", "DLQ_ORIGIN_MESSAGE_ID": "01ID-0",
	}, []byte("b")), handle: testHandle, topic: "%DLQ%GroupA"}
	m, err := toProto(r)
	if err != nil {
		t.Fatalf("toProto: %v", err)
	}
	sp := m.GetSystemProperties()
	if want := commitlog.MessageID(r.msg.StoreHost, r.msg.PhyOffset); sp.GetMessageId() != want {
		t.Errorf("message id %q, want the offset id %q", sp.GetMessageId(), want)
	}
	if sp.GetBornHost() != "10.0.0.1:5555" {
		t.Errorf("born host %q, want the record's 10.0.0.1:5555", sp.GetBornHost())
	}
	if sp.Tag != nil || len(sp.Keys) != 0 || sp.MessageGroup != nil || sp.DeliveryTimestamp != nil || sp.TraceContext != nil {
		t.Errorf("tag %v, keys %v, group %v, delivery %v, trace %v on a message without them",
			sp.Tag, sp.Keys, sp.MessageGroup, sp.DeliveryTimestamp, sp.TraceContext)
	}
	if dlq := sp.GetDeadLetterQueue(); dlq.GetTopic() != "TopicA" || dlq.GetMessageId() != "01ID-0" {
		t.Errorf("dead letter queue %v, want topic TopicA message 01ID-0", dlq)
	}
	if len(m.GetUserProperties()) != 0 {
		t.Errorf("user properties %v, want none", m.GetUserProperties())
	}
}

// TestToProtoWithoutHandle checks that a message converted without a
// receipt handle (the half message of a broker's transaction check) has
// no receipt handle and no invisible duration, which only a receive
// gives.
func TestToProtoWithoutHandle(t *testing.T) {
	m, err := toProto(&received{msg: storedMessage(map[string]string{"UNIQ_KEY": "x", "TRAN_MSG": "true"}, []byte("b")), topic: "TopicA"})
	if err != nil {
		t.Fatalf("toProto: %v", err)
	}
	sp := m.GetSystemProperties()
	if sp.ReceiptHandle != nil || sp.InvisibleDuration != nil {
		t.Fatalf("receipt handle %v, invisible %v on a message converted without a handle; want neither", sp.ReceiptHandle, sp.InvisibleDuration)
	}
	if sp.GetMessageType() != rmqpb.MessageType_TRANSACTION {
		t.Fatalf("message type %v, want TRANSACTION", sp.GetMessageType())
	}
}

// TestToProtoReplacesInvalidUTF8UserProperties checks that user
// properties that are not UTF-8 (a Remoting producer can store any bytes)
// have their bad bytes replaced by U+FFFD, as Java's decoding does, so
// that the message still marshals.
func TestToProtoReplacesInvalidUTF8UserProperties(t *testing.T) {
	props := map[string]string{"good": "v", "bad\xff": "v", "badvalue": "\xfe\xff"}
	m, err := toProto(&received{msg: storedMessage(props, []byte("b")), handle: testHandle, topic: "TopicA"})
	if err != nil {
		t.Fatalf("toProto: %v", err)
	}
	if want := map[string]string{"good": "v", "bad\uFFFD": "v", "badvalue": "\uFFFD"}; !maps.Equal(m.GetUserProperties(), want) {
		t.Fatalf("user properties %q, want %q", m.GetUserProperties(), want)
	}
	if _, err := proto.Marshal(m); err != nil {
		t.Fatalf("the converted message does not marshal: %v", err)
	}
}

// TestToProtoInvalidUTF8SystemProperties checks that a popped message
// whose system properties (tag, keys, message group) hold bytes that are
// not UTF-8 still converts to a message that marshals: gRPC refuses to
// send proto3 strings that are not UTF-8, which would fail the whole
// receive stream and redeliver the message again and again.
func TestToProtoInvalidUTF8SystemProperties(t *testing.T) {
	props := map[string]string{"TAGS": "tag\xff", "KEYS": "k\xfe", "__SHARDINGKEY": "g\xff", "UNIQ_KEY": "01ID-1"}
	m, err := toProto(&received{msg: storedMessage(props, []byte("b")), handle: testHandle, topic: "TopicA"})
	if err != nil {
		t.Fatalf("toProto: %v", err)
	}
	if _, err := proto.Marshal(m); err != nil {
		t.Fatalf("the converted message does not marshal: %v", err)
	}
	if sp := m.GetSystemProperties(); !strings.HasPrefix(sp.GetTag(), "tag") || !strings.HasPrefix(sp.GetMessageGroup(), "g") {
		t.Fatalf("tag %q, group %q: want the valid parts kept", sp.GetTag(), sp.GetMessageGroup())
	}
}

// compressors returns, by name, the sysFlag a Remoting producer stores a
// body compressed with each algorithm under and a function compressing
// with it.
func compressors() []struct {
	name     string
	sysFlag  int32
	compress func(testing.TB, []byte) []byte
} {
	return []struct {
		name     string
		sysFlag  int32
		compress func(testing.TB, []byte) []byte
	}{
		{"zlib", commitlog.FlagCompressed | commitlog.CompressionZLIB, zlibbed},
		{"zlib without type bits (old clients)", commitlog.FlagCompressed, zlibbed},
		{"lz4 frame", commitlog.FlagCompressed | commitlog.CompressionLZ4, lz4Framed},
		{"zstd", commitlog.FlagCompressed | commitlog.CompressionZSTD, zstded},
	}
}

// zlibbed returns b compressed with zlib.
func zlibbed(t testing.TB, b []byte) []byte { return compressed(t, "zlib", &zlibWriters, b) }

// lz4Framed returns b compressed as one LZ4 frame.
func lz4Framed(t testing.TB, b []byte) []byte { return compressed(t, "lz4", &lz4Writers, b) }

// zstded returns b compressed with zstd.
func zstded(t testing.TB, b []byte) []byte {
	t.Helper()
	e, err := zstdEncoder() // EncodeAll may be called concurrently
	if err != nil {
		t.Fatalf("zstd: %v", err)
	}
	return e.EncodeAll(b, nil)
}

// TestToProtoDecompressesBody checks that a body a Remoting producer
// stored compressed (sysFlag compression bits) reaches the gRPC client
// decompressed, with the digest of the plain body and IDENTITY encoding.
func TestToProtoDecompressesBody(t *testing.T) {
	plain := []byte(strings.Repeat("a body worth compressing; ", 200))
	for _, c := range compressors() {
		t.Run(c.name, func(t *testing.T) {
			msg := storedMessage(map[string]string{"UNIQ_KEY": "x"}, c.compress(t, plain))
			msg.SysFlag = c.sysFlag
			m, err := toProto(&received{msg: msg, handle: testHandle, topic: "TopicA"})
			if err != nil {
				t.Fatalf("toProto: %v", err)
			}
			if !bytes.Equal(m.GetBody(), plain) {
				t.Fatalf("body of %d bytes, want the %d plain bytes", len(m.GetBody()), len(plain))
			}
			sp := m.GetSystemProperties()
			if sp.GetBodyDigest().GetChecksum() != md5Upper(plain) || sp.GetBodyEncoding() != rmqpb.Encoding_IDENTITY {
				t.Fatalf("digest %q encoding %v, want %q IDENTITY", sp.GetBodyDigest().GetChecksum(), sp.GetBodyEncoding(), md5Upper(plain))
			}
		})
	}
}

// TestToProtoCorruptCompressedBody checks that a body flagged compressed
// that does not decompress (garbage, or a stream cut short) is an error,
// not a message with a wrong body.
func TestToProtoCorruptCompressedBody(t *testing.T) {
	plain := []byte(strings.Repeat("a body worth compressing; ", 200))
	for _, c := range compressors() {
		valid := c.compress(t, plain)
		for _, body := range []struct {
			name string
			b    []byte
		}{
			{"garbage", []byte("this is not a compressed body at all")},
			{"truncated", valid[:len(valid)/2]},
		} {
			t.Run(c.name+"/"+body.name, func(t *testing.T) {
				msg := storedMessage(map[string]string{"UNIQ_KEY": "x"}, body.b)
				msg.SysFlag = c.sysFlag
				m, err := toProto(&received{msg: msg, handle: testHandle, topic: "TopicA"})
				if err == nil {
					t.Fatalf("toProto of a corrupt body gave a body of %d bytes, want an error", len(m.GetBody()))
				}
			})
		}
	}
}

// TestDecompressUnknownType checks that a compression type the proxy does
// not know is an error.
func TestDecompressUnknownType(t *testing.T) {
	if out, err := decompress(0x400, []byte("x")); err == nil {
		t.Fatalf("decompress with type 0x400 gave %q, want an error", out)
	}
}

// TestInflateLimit checks that inflate returns bodies up to its limit and
// refuses one byte more.
func TestInflateLimit(t *testing.T) {
	tests := []struct {
		size, limit int
		ok          bool
	}{
		{0, 0, true}, {10, 10, true}, {11, 10, false}, {1 << 16, 1<<16 - 1, false}, {1 << 16, 1 << 16, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d bytes, limit %d", tc.size, tc.limit), func(t *testing.T) {
			plain := bytes.Repeat([]byte{'z'}, tc.size)
			out, err := inflate(gzipReader, gzipped(t, plain), tc.limit)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("inflate: %v", err)
			case tc.ok && !bytes.Equal(out, plain):
				t.Fatalf("inflate gave %d bytes, want the %d plain bytes", len(out), len(plain))
			case !tc.ok && err == nil:
				t.Fatalf("inflate gave %d bytes over the limit %d, want an error", len(out), tc.limit)
			}
		})
	}
}

// TestSystemPropertyNamesHoldProxyProperties checks that every property
// the proxy writes for a system property is among the names a user
// property may not take, so that none can be forged or shadowed by a
// user property.
func TestSystemPropertyNamesHoldProxyProperties(t *testing.T) {
	written := []string{propTags, propKeys, propUniqKey, propWait, propDelayLevel, propTimerDeliver, propTimerDelaySec,
		propShardingKey, propTraceContext, propBornHost, propBornTimestamp, propProducerGroup, propReconsumeTime,
		propTranMsg, propPopCK, propDLQOrigTopic, propDLQOrigMsgID, propCheckImmunity}
	var missing []string
	for _, n := range written {
		if !systemPropertyNames[n] {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Fatalf("system properties %v are not refused as user properties", missing)
	}
	// Every timer property the broker acts on (a user property of one
	// would delay a NORMAL or FIFO message past the type check), and the
	// rest of RocketMQ's list; names RocketMQ lets through pass.
	for _, n := range []string{timer.PropDelaySec, timer.PropDelayMs, timer.PropDeliverMs, timer.PropDeleteKey, "TIMER_DELAY_LEVEL", "__CRC32#"} {
		if !systemPropertyNames[n] {
			t.Errorf("%s is not refused as a user property", n)
		}
	}
	for _, n := range []string{"CRC32", "TRANSACTION_ID", "INNER_NUM", "INNER_BASE"} {
		if systemPropertyNames[n] {
			t.Errorf("%s is refused as a user property; RocketMQ takes it", n)
		}
	}
}

// TestToProtoDeadLetterOrigin checks the origin a dead-letter message is
// given: the topic its producer sent it to, whichever record the broker
// copied into the queue (the message itself, a Remoting consumer's retry
// in %RETRY%<group> naming the topic in RETRY_TOPIC, or a POP retry in
// %RETRY%<group>_<topic>), and the message id its producer was given.
func TestToProtoDeadLetterOrigin(t *testing.T) {
	tests := []struct {
		name        string
		props       map[string]string
		topic, id   string
		wantMissing bool
	}{
		{"the message itself", map[string]string{"DLQ_ORIGIN_TOPIC": "Orders", "DLQ_ORIGIN_MESSAGE_ID": "7F00000100002A9F0000000000000000", "UNIQ_KEY": "01UNIQ"}, "Orders", "01UNIQ", false},
		{"a Remoting consumer's retry", map[string]string{"DLQ_ORIGIN_TOPIC": "%RETRY%g1", "RETRY_TOPIC": "Orders", "DLQ_ORIGIN_MESSAGE_ID": "7F00000100002A9F0000000000000000", "UNIQ_KEY": "01UNIQ"}, "Orders", "01UNIQ", false},
		{"a POP retry", map[string]string{"DLQ_ORIGIN_TOPIC": "%RETRY%g1_Orders", "DLQ_ORIGIN_MESSAGE_ID": "x", "UNIQ_KEY": "01UNIQ"}, "Orders", "01UNIQ", false},
		{"a POP retry, second form", map[string]string{"DLQ_ORIGIN_TOPIC": "%RETRY%g1+Orders", "DLQ_ORIGIN_MESSAGE_ID": "x", "UNIQ_KEY": "01UNIQ"}, "Orders", "01UNIQ", false},
		{"another group's retry topic is kept", map[string]string{"DLQ_ORIGIN_TOPIC": "%RETRY%g2_Orders", "DLQ_ORIGIN_MESSAGE_ID": "x", "UNIQ_KEY": "01UNIQ"}, "%RETRY%g2_Orders", "01UNIQ", false},
		{"no UNIQ_KEY: the broker's id", map[string]string{"DLQ_ORIGIN_TOPIC": "Orders", "DLQ_ORIGIN_MESSAGE_ID": "01ID-0"}, "Orders", "01ID-0", false},
		{"not moved", map[string]string{"UNIQ_KEY": "01UNIQ"}, "", "", true},
		// A send-back's copy, as RocketMQ's consumerSendMsgBack writes
		// it: no DLQ_ORIGIN_*, the origin in RETRY_TOPIC and
		// ORIGIN_MESSAGE_ID.
		{"a send-back of the message itself", map[string]string{"RETRY_TOPIC": "Orders", "ORIGIN_MESSAGE_ID": "7F00000100002A9F0000000000000000", "UNIQ_KEY": "01UNIQ", "DELAY": "0"}, "Orders", "01UNIQ", false},
		{"a send-back of a POP retry", map[string]string{"RETRY_TOPIC": "%RETRY%g1_Orders", "ORIGIN_MESSAGE_ID": "x", "UNIQ_KEY": "01UNIQ"}, "Orders", "01UNIQ", false},
		{"a send-back without UNIQ_KEY", map[string]string{"RETRY_TOPIC": "Orders", "ORIGIN_MESSAGE_ID": "7F00000100002A9F0000000000000000"}, "Orders", "7F00000100002A9F0000000000000000", false},
		{"only DLQ_ORIGIN_TOPIC: RETRY_TOPIC names it", map[string]string{"DLQ_ORIGIN_TOPIC": "%RETRY%g1", "RETRY_TOPIC": "Orders", "ORIGIN_MESSAGE_ID": "x", "UNIQ_KEY": "01UNIQ"}, "Orders", "01UNIQ", false},
		{"a moved retry without ORIGIN_MESSAGE_ID", map[string]string{"RETRY_TOPIC": "Orders", "UNIQ_KEY": "01UNIQ", "DELAY": "-1"}, "Orders", "01UNIQ", false},
		{"RETRY_TOPIC alone", map[string]string{"RETRY_TOPIC": "Orders"}, "", "", true},
		{"DLQ_ORIGIN_TOPIC alone", map[string]string{"DLQ_ORIGIN_TOPIC": "Orders"}, "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := storedMessage(tc.props, []byte("b"))
			msg.Topic = "%DLQ%g1"
			m, err := toProto(&received{msg: msg, handle: testHandle, topic: "%DLQ%g1"})
			if err != nil {
				t.Fatalf("toProto: %v", err)
			}
			dlq := m.GetSystemProperties().GetDeadLetterQueue()
			if tc.wantMissing {
				if dlq != nil {
					t.Fatalf("dead letter queue %v on a message never moved", dlq)
				}
				return
			}
			if dlq.GetTopic() != tc.topic || dlq.GetMessageId() != tc.id {
				t.Fatalf("dead letter queue %v, want topic %s message %s", dlq, tc.topic, tc.id)
			}
		})
	}
	// A retry carries RETRY_TOPIC and ORIGIN_MESSAGE_ID as well: only a
	// message of a dead-letter topic was moved there.
	msg := storedMessage(map[string]string{"RETRY_TOPIC": "Orders", "ORIGIN_MESSAGE_ID": "x", "UNIQ_KEY": "01UNIQ"}, []byte("b"))
	msg.Topic = "%RETRY%g1"
	m, err := toProto(&received{msg: msg, handle: testHandle, topic: "Orders"})
	if err != nil {
		t.Fatalf("toProto: %v", err)
	}
	if dlq := m.GetSystemProperties().GetDeadLetterQueue(); dlq != nil {
		t.Errorf("dead letter queue %v on a retry", dlq)
	}
}
