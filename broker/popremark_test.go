package broker

import (
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
