package broker

// More requests that access control let through before these were
// closed (found by a review against RocketMQ 5.3.4's checks): each test
// failed then.

import (
	"context"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// SEND_REPLY_MESSAGE (324) is read by its long names, as the check reads
// it: a letter "b" naming another topic stores nothing there.
func TestAReplyIsStoredInTheTopicTheCheckRead(t *testing.T) {
	b, root, alice := brokerWithAlice(t)
	root.must(remoting.UpdateAndCreateTopic, map[string]string{"topic": "Secret", "readQueueNums": "1", "writeQueueNums": "1"}, nil)
	alice.call(remoting.SendReplyMessage, map[string]string{"producerGroup": "pg", "topic": "AuthT", "b": "Secret", "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0"}, []byte("injected"))
	b.caughtUp()
	if n, err := b.cqs.MaxOffset("Secret", 0); err != nil || n != 0 {
		t.Fatalf("Secret holds %d messages (%v) after alice's reply checked on AuthT", n, err)
	}
}

// CONSUME_MESSAGE_DIRECTLY hands a client only a message of the topic the
// check read: alice (Sub on AuthT and her group) cannot have a message of
// Secret relayed to her own client.
func TestConsumeDirectlyRelaysOnlyTheCheckedTopicsMessages(t *testing.T) {
	b, root, _ := brokerWithAlice(t)
	root.must(remoting.UpdateAndCreateTopic, map[string]string{"topic": "Secret", "readQueueNums": "1", "writeQueueNums": "1"}, nil)
	root.must(remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"ag"}`))
	secret := root.must(remoting.SendMessageV2, sendV2Fields("Secret"), []byte("top secret body")).ExtFields["msgId"]
	own := root.must(remoting.SendMessageV2, sendV2Fields("AuthT"), []byte("alice's own")).ExtFields["msgId"]
	got := make(chan string, 4)
	conn := b.client(func(_ context.Context, cmd *remoting.Command) *remoting.Command {
		if cmd.Code != remoting.ConsumeMessageDirectly {
			return nil
		}
		m, _ := commitlog.Decode(cmd.Body)
		got <- m.Topic
		r := remoting.NewResponse(cmd, remoting.Success, "")
		r.Body = []byte(`{"consumeResult":"CR_SUCCESS","order":false,"autoCommit":true}`)
		return r
	})
	alice := asUser{t, conn, "alice", "alice-password"}
	alice.must(remoting.HeartBeat, nil, heartbeatBody("10.0.0.9@alice", "", "ag", map[string]string{"AuthT": "*"}))
	for _, topic := range []string{"AuthT", ""} {
		resp := alice.call(remoting.ConsumeMessageDirectly, map[string]string{"consumerGroup": "ag", "clientId": "10.0.0.9@alice", "msgId": secret, "topic": topic}, nil)
		if resp.Code != remoting.NoPermission {
			t.Errorf("consume directly of a Secret message naming topic %q: %d %q, want NO_PERMISSION", topic, resp.Code, resp.Remark)
		}
	}
	// Her own topic's message is relayed.
	if resp := alice.call(remoting.ConsumeMessageDirectly, map[string]string{"consumerGroup": "ag", "clientId": "10.0.0.9@alice", "msgId": own, "topic": "AuthT"}, nil); resp.Code != remoting.Success {
		t.Fatalf("consume directly of an AuthT message: %d %q", resp.Code, resp.Remark)
	}
	select {
	case topic := <-got:
		if topic != "AuthT" {
			t.Fatalf("alice's client was handed a message of %s", topic)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the AuthT message was not relayed")
	}
	select {
	case topic := <-got:
		t.Fatalf("alice's client was handed a second message, of %s", topic)
	default:
	}
}
