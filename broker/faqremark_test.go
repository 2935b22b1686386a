package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// The remarks of an unknown topic or group end with the FAQ tip RocketMQ
// appends (FAQUrl.suggestTodo), spaced as each Java processor spaces it:
// clients show the remark to the user, and tools match on it.
func TestUnknownTopicAndGroupRemarksCarryRocketMQsFAQTip(t *testing.T) {
	const tip = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
	b := startTestBroker(t, map[string]string{"autoCreateTopicEnable": "false", "autoCreateSubscriptionGroup": "false"})
	c := b.client(nil)
	createTopic(t, c, "FT", 1, 1)
	ensureGroup(t, c, "fg")
	mustSend(t, c, "FT", 0, "x", "")
	b.caughtUp()
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	pop := func(group, topic string) map[string]string {
		return map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0", "maxMsgNums": "1",
			"invisibleTime": "60000", "pollTime": "0", "bornTime": now, "initMode": "0"}
	}
	cases := []struct {
		name   string
		code   int32
		ext    map[string]string
		want   int32
		remark string
	}{
		{"send to an unknown topic", remoting.SendMessageV2, map[string]string{"a": "pg", "b": "Nope", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": now, "h": "0", "i": "", "j": "0", "k": "false"},
			remoting.TopicNotExist, "topic[Nope] not exist, apply first please!" + tip},
		{"pull of an unknown topic", remoting.PullMessage, pullReq("fg", "Nope", 0, 0, 0, 0, "*"),
			remoting.TopicNotExist, "topic[Nope] not exist, apply first please! " + tip},
		{"pull of an unknown group", remoting.PullMessage, pullReq("ng", "FT", 0, 0, 0, 0, "*"),
			remoting.SubscriptionGroupNotExist, "subscription group [ng] does not exist, " + tip},
		{"pop of an unknown topic", remoting.PopMessage, pop("fg", "Nope"),
			remoting.TopicNotExist, "topic[Nope] not exist, apply first please! " + tip},
		{"pop of an unknown group", remoting.PopMessage, pop("ng", "FT"),
			remoting.SubscriptionGroupNotExist, "subscription group [ng] does not exist, " + tip},
		{"ack of an unknown topic", remoting.AckMessage, map[string]string{"consumerGroup": "fg", "topic": "Nope", "queueId": "0", "extraInfo": "0 0 60000 0 0 broker-a 0 0", "offset": "0"},
			remoting.TopicNotExist, "topic[Nope] not exist, apply first please! " + tip},
		{"send-back of an unknown group", remoting.ConsumerSendMsgBack, map[string]string{"offset": "0", "group": "ng", "delayLevel": "0", "originMsgId": "", "originTopic": "FT"},
			remoting.SubscriptionGroupNotExist, "subscription group not exist, ng " + tip},
	}
	for _, tc := range cases {
		var body []byte
		if tc.code == remoting.SendMessageV2 {
			body = []byte("x")
		}
		if _, ok := tc.ext["bornTime"]; ok {
			// Stamped as it is sent: a pop born more than 500 ms before
			// the broker reads it is POLLING_TIMEOUT, which a loaded
			// machine reached between building the table and this call.
			tc.ext["bornTime"] = strconv.FormatInt(time.Now().UnixMilli(), 10)
		}
		r := call(t, c, tc.code, tc.ext, body)
		if r.Code != tc.want || r.Remark != tc.remark {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.Code, r.Remark, tc.want, tc.remark)
		}
	}
}
