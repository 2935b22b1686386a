package grpcproxy

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
)

// A recall handle names its broker group in its third field, decoded as
// RocketMQ decodes it; anything else is refused with errBadRecallHandle.
func TestRecallBroker(t *testing.T) {
	enc := func(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name, handle, want string
	}{
		{"padded", enc("v1 Orders broker-a 1700000000000 0A0B0C"), "broker-a"},
		{"unpadded", base64.RawURLEncoding.EncodeToString([]byte("v1 Orders broker-b 1700000000000 0A0B0C")), "broker-b"},
		{"not base64", "%%%", ""},
		{"too few fields", enc("v1 Orders broker-a"), ""},
		{"other version", enc("v2 Orders broker-a 1700000000000 0A0B0C"), ""},
		{"trailing spaces", enc("v1 Orders broker-c 1700000000000 0A0B0C   "), "broker-c"},
		{"trailing spaces making five fields", enc("v1 Orders broker-a 1700000000000    "), ""},
		{"line break", enc("v1 Orders broker-a 1700000000000 0A0B0C")[:8] + "\n" + enc("v1 Orders broker-a 1700000000000 0A0B0C")[8:], ""},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := recallBroker(tc.handle)
			if tc.want == "" {
				if !errors.Is(err, errBadRecallHandle) {
					t.Fatalf("recallBroker(%q) = %q, %v; want errBadRecallHandle", tc.handle, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("recallBroker(%q) = %q, %v; want %q", tc.handle, got, err, tc.want)
			}
		})
	}
}

// FuzzRecallBroker: any text a client sends as a recall handle is either
// refused or names a broker group (possibly empty, as in RocketMQ, which
// then finds no broker); it never panics.
func FuzzRecallBroker(f *testing.F) {
	f.Add(base64.URLEncoding.EncodeToString([]byte("v1 Orders broker-a 1700000000000 0A0B0C")))
	f.Add("")
	f.Add("djEgICAg")
	f.Fuzz(func(t *testing.T, handle string) {
		b, err := recallBroker(handle)
		if err == nil && strings.Contains(b, " ") {
			t.Fatalf("recallBroker(%q) = %q, a broker name with a space", handle, b)
		}
	})
}

// A recall is refused as RocketMQ's proxy refuses it: on a topic that
// takes no delay messages with MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, with a
// handle that does not decode with INTERNAL_SERVER_ERROR, with one naming
// a broker group that is not the topic's (or none) with BAD_REQUEST.
func TestRecallRefusals(t *testing.T) {
	c := startTestCluster(t, nil)
	c.createTopic(t, "RecallDelay", 1, "+message.type=DELAY")
	c.createTopic(t, "RecallNormal", 1, "")
	enc := func(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name, topic, handle string
		want                rmqpb.Code
	}{
		{"topic of normal messages", "RecallNormal", enc("v1 RecallNormal " + c.brokerName + " 1700000000000 0A0B0C"), rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE},
		{"handle not base64", "RecallDelay", "%%%", rmqpb.Code_INTERNAL_SERVER_ERROR},
		{"handle of another version", "RecallDelay", enc("v2 RecallDelay " + c.brokerName + " 1700000000000 0A0B0C"), rmqpb.Code_INTERNAL_SERVER_ERROR},
		{"unknown broker group", "RecallDelay", enc("v1 RecallDelay broker-x 1700000000000 0A0B0C"), rmqpb.Code_BAD_REQUEST},
		{"empty broker group", "RecallDelay", enc("v1 RecallDelay  1700000000000 0A0B0C"), rmqpb.Code_BAD_REQUEST},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.rpc.RecallMessage(callCtx(t, "recall-client", 5*time.Second), &rmqpb.RecallMessageRequest{
				Topic: &rmqpb.Resource{Name: tc.topic}, RecallHandle: tc.handle})
			if err != nil {
				t.Fatalf("RecallMessage: %v", err)
			}
			if resp.GetStatus().GetCode() != tc.want {
				t.Fatalf("recall answered %v, want %v", resp.GetStatus(), tc.want)
			}
		})
	}
}
