package broker

import (
	"strconv"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// A broker whose permission forbids reading refuses POP_MESSAGE with
// "pop message is forbidden" and PEEK_MESSAGE, NOTIFICATION and
// POLLING_INFO with "peeking message is forbidden", naming itself by
// brokerIP1 as RocketMQ's processors do; so does a pop born too long
// ago ("timeout too much").
func TestPopRemarksNameTheBrokerIP(t *testing.T) {
	b := startTestBroker(t, map[string]string{"brokerPermission": "2", "brokerName": "broker-remark"})
	_, rc := popClient(b)
	ext := map[string]string{"consumerGroup": "g", "topic": "T", "queueId": "0", "maxMsgNums": "1",
		"invisibleTime": "60000", "pollTime": "0", "bornTime": "0", "initMode": "0"}
	for code, want := range map[int32]string{
		remoting.PopMessage:   "the broker[127.0.0.1] pop message is forbidden",
		remoting.PeekMessage:  "the broker[127.0.0.1] peeking message is forbidden",
		remoting.Notification: "the broker[127.0.0.1] peeking message is forbidden",
		remoting.PollingInfo:  "the broker[127.0.0.1] peeking message is forbidden",
	} {
		if r := call(t, rc, code, ext, nil); r.Code != remoting.NoPermission || r.Remark != want {
			t.Errorf("request %d on a broker not readable: %d %q, want %d %q", code, r.Code, r.Remark, remoting.NoPermission, want)
		}
	}
	ext["bornTime"] = "1000"
	const want = "the broker[127.0.0.1] pop message is timeout too much"
	if r := call(t, rc, remoting.PopMessage, ext, nil); r.Code != remoting.PollingTimeout || r.Remark != want {
		t.Errorf("pop born long ago: %d %q, want %d %q", r.Code, r.Remark, remoting.PollingTimeout, want)
	}
}

// A broker that may not be read or written refuses pulls, sends,
// send-backs and (with rejectTransactionMessage) transactional sends
// naming itself by brokerIP1, as RocketMQ's PullMessageProcessor,
// AbstractSendMessageProcessor and SendMessageProcessor do.
func TestPullAndSendRefusalsNameTheBrokerIP(t *testing.T) {
	b := startTestBroker(t, map[string]string{"brokerName": "broker-remark", "rejectTransactionMessage": "true"})
	c := b.client(nil)
	mustSend(t, c, "RemarkT", 0, "m", "")
	createOrderTopic(t, c, "RemarkOrderT")
	b.caughtUp()
	m := pullAll(t, b, c, "RemarkT", 0)[0]
	ensureGroup(t, c, "g-remark")
	want := func(what string, r *remoting.Command, remark string) {
		t.Helper()
		if r.Code != remoting.NoPermission || r.Remark != remark {
			t.Errorf("%s: %d %q, want %d %q", what, r.Code, r.Remark, remoting.NoPermission, remark)
		}
	}
	want("transactional send", sendV2(t, c, "RemarkT", 0, "half", halfProps("UNIQ-REMARK", "")),
		"the broker[127.0.0.1] sending transaction message is forbidden")
	updateConfig(t, c, "brokerPermission=0")
	want("pull", call(t, c, remoting.PullMessage, pullReq("g-remark", "RemarkT", 0, 0, 0, 0, "*"), nil),
		"the broker[127.0.0.1] pulling message is forbidden")
	want("send", sendV2(t, c, "RemarkOrderT", 0, "m2", ""), "the broker[127.0.0.1] sending message is forbidden")
	want("send-back", call(t, c, remoting.ConsumerSendMsgBack, map[string]string{
		"offset": strconv.FormatInt(m.PhyOffset, 10), "group": "g-remark", "delayLevel": "-1"}, nil),
		"the broker[127.0.0.1] sending message is forbidden")
}

// A topic's own permission does not refuse sends, as RocketMQ's msgCheck
// checks none: producers route by the permission in the topic's route,
// and one whose route predates an updateTopicPerm has its send stored
// (a oneway send would otherwise be lost without a word).
func TestASendToAReadOnlyTopicIsStoredAsRocketMQs(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	if r := call(t, c, remoting.UpdateAndCreateTopic, map[string]string{
		"topic": "ReadOnlyT", "defaultTopic": "TBW102", "readQueueNums": "1",
		"writeQueueNums": "1", "perm": "4", "topicFilterType": "SINGLE_TAG",
	}, nil); r.Code != remoting.Success {
		t.Fatalf("create: %d %s", r.Code, r.Remark)
	}
	mustSend(t, c, "ReadOnlyT", 0, "stale route", "")
	b.caughtUp()
	if got := pullAll(t, b, c, "ReadOnlyT", 0); len(got) != 1 {
		t.Fatalf("pulled %d messages from the read-only topic, want the one sent", len(got))
	}
}
