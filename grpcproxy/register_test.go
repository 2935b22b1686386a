package grpcproxy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/remoting"
)

// consumerConnection asks the broker for group's clients
// (GET_CONSUMER_CONNECTION_LIST, what mqadmin consumerConnection shows);
// ok is false when the broker knows no live client of group.
func (c *testCluster) consumerConnection(t *testing.T, group string) (adminbody.ConsumerConnection, bool) {
	t.Helper()
	resp := c.invoke(t, c.brokerAddr, remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": group}, nil)
	switch resp.Code {
	case remoting.ConsumerNotOnline:
		return adminbody.ConsumerConnection{}, false
	case remoting.Success:
	default:
		t.Fatalf("consumer connections of %s: code %d %s", group, resp.Code, resp.Remark)
	}
	var cc adminbody.ConsumerConnection
	if err := json.Unmarshal(resp.Body, &cc); err != nil {
		t.Fatalf("consumer connections of %s: %v", group, err)
	}
	return cc, true
}

func consumerSettingsFor(ct rmqpb.ClientType, group, topic string) *rmqpb.Settings {
	return &rmqpb.Settings{ClientType: ct.Enum(),
		PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{Group: &rmqpb.Resource{Name: group},
			Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: &rmqpb.Resource{Name: topic},
				Expression: &rmqpb.FilterExpression{Type: rmqpb.FilterType_TAG, Expression: "a||b"}}}}}}
}

// A gRPC consumer is registered with the brokers as RocketMQ's proxy
// registers it (ClientActivity): by its settings already, before any
// heartbeat; a simple consumer as CONSUME_ACTIVELY and a push consumer as
// CONSUME_PASSIVELY (buildConsumeType); its subscriptions stamped with the
// time of its settings, which its heartbeats do not renew (they register
// the client without updating subscriptions), so that consumerConnection
// shows one subVersion per settings, not one per heartbeat.
func TestConsumerRegistrationAsRocketMQProxy(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic = "RegisterTopic"
	c.createTopic(t, topic, 1, "")
	heartbeat := func(client, group string) {
		t.Helper()
		resp, err := c.rpc.Heartbeat(callCtx(t, client, 10*time.Second), &rmqpb.HeartbeatRequest{Group: &rmqpb.Resource{Name: group}})
		if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
			t.Fatalf("heartbeat of %s: %v %v", client, resp.GetStatus(), err)
		}
	}
	for _, tc := range []struct {
		ct              rmqpb.ClientType
		client, group   string
		wantConsumeType string
	}{
		{rmqpb.ClientType_SIMPLE_CONSUMER, "reg-simple", "GroupRegisterSimple", "CONSUME_ACTIVELY"},
		{rmqpb.ClientType_PUSH_CONSUMER, "reg-push", "GroupRegisterPush", "CONSUME_PASSIVELY"},
	} {
		t.Run(tc.ct.String(), func(t *testing.T) {
			before := time.Now().UnixMilli()
			c.telemetryOnce(t, tc.client, consumerSettingsFor(tc.ct, tc.group, topic))
			if cc, ok := c.consumerConnection(t, tc.group); !ok || len(cc.ConnectionSet) != 1 || cc.ConnectionSet[0].ClientID != tc.client {
				t.Errorf("after its settings the broker lists %+v (online %v) for %s, want the client %s", cc.ConnectionSet, ok, tc.group, tc.client)
			}
			heartbeat(tc.client, tc.group)
			cc, ok := c.consumerConnection(t, tc.group)
			if !ok || len(cc.ConnectionSet) != 1 || cc.ConnectionSet[0].ClientID != tc.client {
				t.Fatalf("after its heartbeat the broker lists %+v (online %v) for %s, want the client %s", cc.ConnectionSet, ok, tc.group, tc.client)
			}
			if cc.ConsumeType != tc.wantConsumeType || cc.MessageModel != "CLUSTERING" || cc.ConsumeFromWhere != "CONSUME_FROM_LAST_OFFSET" {
				t.Errorf("registered as %s %s %s, want %s CLUSTERING CONSUME_FROM_LAST_OFFSET", cc.ConsumeType, cc.MessageModel, cc.ConsumeFromWhere, tc.wantConsumeType)
			}
			sub, ok := cc.SubscriptionTable[topic]
			if !ok || sub.SubString != "a||b" || sub.ExpressionType != "TAG" {
				t.Fatalf("subscriptions %+v, want %s by TAG a||b", cc.SubscriptionTable, topic)
			}
			if sub.SubVersion < before || sub.SubVersion > time.Now().UnixMilli() {
				t.Errorf("subVersion %d is not the time of the settings (%d..now)", sub.SubVersion, before)
			}
			for range 2 {
				time.Sleep(20 * time.Millisecond)
				heartbeat(tc.client, tc.group)
				cc, ok := c.consumerConnection(t, tc.group)
				if !ok {
					t.Fatalf("%s not online after a heartbeat", tc.group)
				}
				if got := cc.SubscriptionTable[topic].SubVersion; got != sub.SubVersion {
					t.Errorf("a heartbeat moved the subVersion from %d to %d; RocketMQ's proxy's heartbeats leave it", sub.SubVersion, got)
				}
				if cc.ConsumeType != tc.wantConsumeType {
					t.Errorf("after a heartbeat registered as %s, want %s", cc.ConsumeType, tc.wantConsumeType)
				}
			}
			// New settings bring new subscriptions, of a newer version.
			time.Sleep(20 * time.Millisecond)
			changed := consumerSettingsFor(tc.ct, tc.group, topic)
			changed.GetSubscription().GetSubscriptions()[0].Expression.Expression = "c"
			c.telemetryOnce(t, tc.client, changed)
			heartbeat(tc.client, tc.group)
			cc, _ = c.consumerConnection(t, tc.group)
			if got := cc.SubscriptionTable[topic]; got.SubString != "c" || got.SubVersion <= sub.SubVersion {
				t.Errorf("after new settings the subscription is %q version %d, want \"c\" newer than %d", got.SubString, got.SubVersion, sub.SubVersion)
			}
		})
	}
}

// A client that only receives, without settings or a heartbeat, is not
// registered with the brokers: RocketMQ's proxy registers clients only from
// their settings and heartbeats (ClientActivity), not from
// ReceiveMessage.
func TestReceiverWithoutHeartbeatNotRegistered(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, group, client = "RegisterReceiver", "GroupRegisterReceiver", "reg-receiver"
	c.createTopic(t, topic, 1, "")
	c.receiveOnce(t, client, receiveRequest(group, topic, time.Second, time.Second), 5*time.Second)
	if cc, ok := c.consumerConnection(t, group); ok {
		t.Fatalf("the broker lists %+v for %s, whose only client never sent settings or a heartbeat", cc.ConnectionSet, group)
	}
}
