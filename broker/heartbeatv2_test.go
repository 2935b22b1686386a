package broker

import (
	"fmt"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// heartbeatV2Body is a HEART_BEAT body as a RocketMQ 5.3 client with
// useHeartbeatV2 sends it (fastjson, fields in name order): one push
// consumer of group on topic with a TAG expression, the client's
// fingerprint, and, when withoutSub, an empty subscriptionDataSet.
func heartbeatV2Body(clientID, group, topic, expr string, subVersion int64, fingerprint int32, withoutSub bool) []byte {
	subs := ""
	if !withoutSub {
		subs = fmt.Sprintf(`{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":%q,"subVersion":%d,"tagsSet":[%q],"topic":%q}`,
			expr, subVersion, expr, topic)
	}
	return []byte(fmt.Sprintf(`{"clientID":%q,"consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",`+
		`"consumeType":"CONSUME_PASSIVELY","groupName":%q,"messageModel":"CLUSTERING","subscriptionDataSet":[%s],"unitMode":false}],`+
		`"heartbeatFingerprint":%d,"producerDataSet":[],"withoutSub":%t}`, clientID, group, subs, fingerprint, withoutSub))
}

// heartbeatAnswer sends a heartbeat and returns its answer's
// IS_SUPPORT_HEART_BEAT_V2 and IS_SUB_CHANGE ext fields.
func heartbeatAnswer(t *testing.T, c *remoting.Client, body []byte) (supportV2, subChange string) {
	t.Helper()
	r := call(t, c, remoting.HeartBeat, nil, body)
	if r.Code != remoting.Success {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	return r.ExtFields["IS_SUPPORT_HEART_BEAT_V2"], r.ExtFields["IS_SUB_CHANGE"]
}

// RocketMQ 5.3's heartbeat V2 (ClientManageProcessor.heartBeatV2): the
// broker says it supports V2 and whether the client's subscriptions must
// be sent again; a client told no change sends fingerprint-only
// heartbeats (withoutSub, no subscriptions), which keep the group's
// subscriptions as they are; a new fingerprint (changed subscriptions)
// carries them and is seen.
func TestHeartbeatV2(t *testing.T) {
	b := startTestBroker(t, nil)
	p := b.client(nil)
	mustSend(t, p, "HBv2", 0, "tag-a", "TAGS\x01a\x02")
	mustSend(t, p, "HBv2", 0, "tag-b", "TAGS\x01b\x02")
	b.caughtUp()
	pulled := func(c *remoting.Client) string {
		t.Helper()
		req := pullReq("cgV2", "HBv2", 0, 0, 0, 0, "")
		req["sysFlag"] = "0" // no expression of its own: the group's subscription filters
		r := call(t, c, remoting.PullMessage, req, nil)
		if r.Code != remoting.Success {
			t.Fatalf("pull by the group's subscription: code %d %q", r.Code, r.Remark)
		}
		msgs := decodeRecords(t, r.Body)
		if len(msgs) != 1 {
			t.Fatalf("pull by the group's subscription: %d messages, want 1", len(msgs))
		}
		return string(msgs[0].Body)
	}
	c := b.client(nil)
	const fpA, fpB = int32(-1851246079), int32(977654321)

	// V1 (no fingerprint): RocketMQ answers that it supports V2 and that
	// the subscriptions changed.
	if v2, ch := heartbeatAnswer(t, c, consumerHeartbeat("10.0.0.9@v1", "cgV1")); v2 != "true" || ch != "true" {
		t.Errorf("V1 heartbeat answered IS_SUPPORT_HEART_BEAT_V2=%q IS_SUB_CHANGE=%q, want true, true", v2, ch)
	}

	// The first V2 heartbeat carries the subscriptions.
	if v2, ch := heartbeatAnswer(t, c, heartbeatV2Body("10.0.0.1@1", "cgV2", "HBv2", "a", 100, fpA, false)); v2 != "true" || ch != "false" {
		t.Fatalf("first V2 heartbeat answered IS_SUPPORT_HEART_BEAT_V2=%q IS_SUB_CHANGE=%q, want true, false", v2, ch)
	}
	// Then fingerprint-only ones: the subscription stays.
	for range 2 {
		if v2, ch := heartbeatAnswer(t, c, heartbeatV2Body("10.0.0.1@1", "cgV2", "", "", 0, fpA, true)); v2 != "true" || ch != "false" {
			t.Fatalf("fingerprint-only heartbeat answered %q %q, want true, false", v2, ch)
		}
	}
	if s, _, _ := b.clients.groupSubscription("cgV2", "HBv2"); s == nil || s.SubString != "a" {
		t.Fatalf("subscription after fingerprint-only heartbeats: %+v, want \"a\"", s)
	}
	if got := pulled(c); got != "tag-a" {
		t.Errorf("pulled %q, want tag-a", got)
	}
	if ids := b.clients.consumerIDs("cgV2"); len(ids) != 1 || ids[0] != "10.0.0.1@1" {
		t.Errorf("consumers %v, want the V2 client", ids)
	}

	// The subscription changes: the client's fingerprint changes, so it
	// sends the subscriptions; the broker takes them and, as RocketMQ,
	// answers a change (the client sends them once more).
	if _, ch := heartbeatAnswer(t, c, heartbeatV2Body("10.0.0.1@1", "cgV2", "HBv2", "b", 200, fpB, false)); ch != "true" {
		t.Errorf("heartbeat of a new fingerprint answered IS_SUB_CHANGE=%q, want true", ch)
	}
	if _, ch := heartbeatAnswer(t, c, heartbeatV2Body("10.0.0.1@1", "cgV2", "HBv2", "b", 200, fpB, false)); ch != "false" {
		t.Errorf("the same heartbeat again answered IS_SUB_CHANGE=%q, want false", ch)
	}
	if _, ch := heartbeatAnswer(t, c, heartbeatV2Body("10.0.0.1@1", "cgV2", "", "", 0, fpB, true)); ch != "false" {
		t.Errorf("fingerprint-only heartbeat after the change answered IS_SUB_CHANGE=%q, want false", ch)
	}
	if got := pulled(c); got != "tag-b" {
		t.Errorf("after the change pulled %q, want tag-b", got)
	}

	// A fingerprint-only heartbeat of another fingerprint (a client whose
	// subscriptions differ, or one that changed them) is told to send
	// them; the group's stay.
	other := b.client(nil)
	if _, ch := heartbeatAnswer(t, other, heartbeatV2Body("10.0.0.2@2", "cgV2", "", "", 0, fpA, true)); ch != "true" {
		t.Errorf("fingerprint-only heartbeat of another fingerprint answered IS_SUB_CHANGE=%q, want true", ch)
	}
	if got := pulled(c); got != "tag-b" {
		t.Errorf("after another fingerprint's heartbeat pulled %q, want tag-b", got)
	}

	// A fingerprint-only heartbeat of a group the broker holds no
	// subscriptions of (it restarted, say) is registered and told to send
	// them, rather than left pulling without a subscription.
	if _, ch := heartbeatAnswer(t, other, heartbeatV2Body("10.0.0.2@2", "cgFresh", "", "", 0, fpA, true)); ch != "true" {
		t.Errorf("fingerprint-only heartbeat of an unknown group answered IS_SUB_CHANGE=%q, want true", ch)
	}
	if ids := b.clients.consumerIDs("cgFresh"); len(ids) != 1 {
		t.Errorf("consumers of the fresh group %v, want the client", ids)
	}
	if _, ch := heartbeatAnswer(t, other, heartbeatV2Body("10.0.0.2@2", "cgFresh", "HBv2", "a", 100, fpA, false)); ch != "false" {
		t.Errorf("its subscriptions answered IS_SUB_CHANGE=%q, want false", ch)
	}
	if s, _, _ := b.clients.groupSubscription("cgFresh", "HBv2"); s == nil || s.SubString != "a" {
		t.Errorf("fresh group's subscription %+v, want \"a\"", s)
	}
}
