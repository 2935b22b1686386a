package grpcproxy

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/pop"
)

// FuzzToProto converts a popped message of arbitrary properties, body and
// sysFlag (bytes a Remoting producer stored, read back from the broker)
// into the protocol's message: it never panics, and what it returns can
// be marshalled (gRPC refuses to send a string that is not UTF-8, which
// would fail the whole receive).
func FuzzToProto(f *testing.F) {
	f.Add("UNIQ_KEY\x01ID1\x02TAGS\x01t\x02KEYS\x01a b\x02u\x01v\x02", []byte("hello"), int32(0))
	f.Add("TRAN_MSG\x01true\x02TIMER_DELIVER_MS\x01-9223372036854775808\x02__SHARDINGKEY\x01g\x02", []byte{}, int32(0))
	f.Add("DLQ_ORIGIN_TOPIC\x01T\x02DLQ_ORIGIN_MESSAGE_ID\x01x\x02TRACE_CONTEXT\x01\xff\xfe\x02\xc3\x01\xc3\x02", []byte("x"), int32(1))
	f.Add("\x01\x02\x01\x01\x02", zlibbed(f, []byte("compressed body")), commitlog.FlagCompressed|commitlog.CompressionZLIB)
	f.Add("", lz4Framed(f, []byte("lz4 body")), commitlog.FlagCompressed|commitlog.CompressionLZ4)
	f.Add("__BORNHOST\x01\xff:1\x02", zstded(f, []byte("zstd body")), commitlog.FlagCompressed|commitlog.CompressionZSTD)
	f.Fuzz(func(t *testing.T, props string, body []byte, sysFlag int32) {
		r := &received{
			msg: commitlog.Message{Topic: "T", QueueID: 1, QueueOffset: 5, PhyOffset: 4096, Properties: props, Body: body,
				SysFlag: sysFlag, ReconsumeTimes: 2, BornTimestamp: 1, StoreTimestamp: 2},
			handle:    Handle{Handle: pop.Handle{BrokerName: "b", QueueID: 1, QueueOffset: 5}, CommitLogOffset: 4096},
			topic:     "T",
			invisible: time.Second,
		}
		m, err := toProto(r)
		if err != nil {
			if commitlog.CompressionType(sysFlag) == 0 {
				t.Fatalf("an uncompressed message was refused: %v", err)
			}
			return
		}
		if _, err := proto.Marshal(m); err != nil {
			t.Fatalf("properties %q: the message cannot be sent: %v", props, err)
		}
	})
}

// FuzzBuildOutgoingFields sends a message whose client-supplied fields
// (message id, tag, keys, message group, trace context, born host, one
// user property) are arbitrary UTF-8 text, as gRPC delivers them:
// buildOutgoing never panics, refuses only with a status, and the
// properties string it builds for an accepted message reads back as the
// client's fields: no field can add, drop or change another property.
func FuzzBuildOutgoingFields(f *testing.F) {
	f.Add("01ID-1", "TagA", "k1 k2", "", "", "", "u1", "v1")
	f.Add("id", "", "", "group", "trace", "10.0.0.1:1", "u", "v")
	f.Add("id\x01x", "t", "", "", "", "", "u", "v")
	f.Add("  ", "|", "\x00", "\t", "", "", "TAGS", "x")
	f.Add("id", "t", "k", "g", "tc", "bh", "u", "v")
	f.Add("id", "t", "k", "g", "tc", " \x1e\t", "u", "v") // a blank born host: the caller's address
	s := configOnlyServer(nil)
	now := time.UnixMilli(1_700_000_000_000)
	f.Fuzz(func(t *testing.T, id, tag, keys, group, trace, bornHost, uk, uv string) {
		for _, s := range []string{id, tag, keys, group, trace, bornHost, uk, uv} {
			if !utf8.ValidString(s) {
				return // gRPC does not deliver such a string
			}
		}
		m := validMessage()
		sp := m.SystemProperties
		sp.MessageId, sp.Tag, sp.Keys = id, proto.String(tag), strings.Split(keys, " ")
		sp.MessageGroup, sp.TraceContext, sp.BornHost = proto.String(group), proto.String(trace), bornHost
		m.UserProperties = map[string]string{uk: uv}
		o, err := s.buildOutgoing(m, "TopicA", "127.0.0.1:9", now)
		if err != nil {
			if c := codeOf(err); c == rmqpb.Code_OK || c == rmqpb.Code_INTERNAL_SERVER_ERROR {
				t.Fatalf("refused without a status: %v", err)
			}
			return
		}
		got := commitlog.ParseProperties(o.props)
		want := map[string]string{propUniqKey: id, uk: uv}
		if tag != "" {
			want[propTags] = tag
		}
		if group != "" {
			want[propShardingKey] = group
		}
		if trace != "" {
			want[propTraceContext] = trace
		}
		// A blank born host (Java's whitespace, 0x1C-0x1F included) is
		// none: the caller's address stands for it, as in RocketMQ's proxy.
		want[propBornHost] = bornHost
		if meta.IsBlank(bornHost) {
			want[propBornHost] = "127.0.0.1:9"
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("field %s=%q was stored as %q; properties %q", k, v, got[k], o.props)
			}
		}
		if _, ok := got[propTranMsg]; ok || o.sysFlag != 0 {
			t.Fatalf("a normal message became a transaction message: properties %q", o.props)
		}
	})
}
