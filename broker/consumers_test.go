package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// consumerHeartbeat is a classic (V1) heartbeat body of one push consumer.
func consumerHeartbeat(clientID, group string) []byte {
	return []byte(fmt.Sprintf(`{"clientID":%q,"producerDataSet":[],"consumerDataSet":[{"groupName":%q,`+
		`"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",`+
		`"subscriptionDataSet":[{"topic":"T","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1,"expressionType":"TAG"}],"unitMode":false}]}`,
		clientID, group))
}

func consumerIDList(t *testing.T, c *remoting.Client, group string) (int32, []string) {
	t.Helper()
	r := call(t, c, remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": group}, nil)
	var body struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}
	if r.Code == remoting.Success {
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
	}
	return r.Code, body.ConsumerIDList
}

// RocketMQ 5.x ClientManageProcessor.heartBeat: when
// findSubscriptionGroupConfig returns null (group unknown and
// autoCreateSubscriptionGroup=false) the consumer data is skipped with
// `continue`: no retry topic, no registration.
func TestAHeartbeatOfAnUnknownGroupRegistersNothingWithoutAutoCreate(t *testing.T) {
	b := startTestBroker(t, map[string]string{"autoCreateSubscriptionGroup": "false"})
	c := b.client(nil)
	if r := call(t, c, remoting.HeartBeat, nil, consumerHeartbeat("10.0.0.1@1", "NoSuchGroup")); r.Code != remoting.Success {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	if _, ok, _ := b.topicConfig("%RETRY%NoSuchGroup"); ok {
		t.Errorf("retry topic of a group that does not exist was created (RocketMQ skips the group)")
	}
	if code, ids := consumerIDList(t, c, "NoSuchGroup"); code == remoting.Success {
		t.Errorf("consumer list of a group that does not exist: %v (RocketMQ: SYSTEM_ERROR, never registered)", ids)
	}
}

// RocketMQ validates the name before auto-creating a group
// (TopicValidator.validateGroup: ^[%|a-zA-Z0-9_-]+$, at most 255 bytes as its clients' Validators.checkGroup);
// an invalid one gets no config, no retry topic, no registration.
func TestAHeartbeatCreatesNoGroupWithANameRocketMQRefuses(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for _, group := range []string{"bad group/..", strings.Repeat("g", 300)} {
		if r := call(t, c, remoting.HeartBeat, nil, consumerHeartbeat("10.0.0.1@1", group)); r.Code != remoting.Success {
			t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
		}
		if gc, ok, _ := b.groups.Get(group); ok {
			t.Errorf("group %.20q... with an invalid name was auto-created: %+v", group, gc.GroupName != "")
		}
		if _, ok, _ := b.topicConfig("%RETRY%" + group); ok {
			t.Errorf("retry topic %.30q... of an invalid group name was created", "%RETRY%"+group)
		}
	}
}

// RocketMQ unregisters by channel (ConsumerGroupInfo.unregisterChannel
// removes channelInfoTable[ctx.channel()]): UNREGISTER_CLIENT sent on
// another connection does not drop a live client.
func TestUnregisterClientDropsOnlyItsOwnConnection(t *testing.T) {
	b := startTestBroker(t, nil)
	victim := b.client(nil)
	heartbeat(t, victim, consumerHeartbeat("10.0.0.1@1", "cgU"))
	other := b.client(nil)
	if r := call(t, other, remoting.UnregisterClient, map[string]string{"clientID": "10.0.0.1@1", "consumerGroup": "cgU"}, nil); r.Code != remoting.Success {
		t.Fatalf("unregister: %d", r.Code)
	}
	if code, ids := consumerIDList(t, victim, "cgU"); code != remoting.Success || len(ids) != 1 {
		t.Errorf("live client dropped by an UNREGISTER_CLIENT sent on another connection: code %d ids %v", code, ids)
	}
}

// RocketMQ's unregisterClient passes the group's
// notifyConsumerIdsChangedEnable to unregisterConsumer: a group that
// turned it off is not notified when a member unregisters.
func TestUnregisterClientHonoursTheGroupsNotifyFlag(t *testing.T) {
	b := startTestBroker(t, nil)
	admin := b.client(nil)
	if r := call(t, admin, remoting.UpdateAndCreateSubscriptionGroup, nil,
		[]byte(`{"groupName":"cgQuiet","notifyConsumerIdsChangedEnable":false,"consumeEnable":true,"retryQueueNums":1,"retryMaxTimes":16}`)); r.Code != remoting.Success {
		t.Fatalf("create group: %d %s", r.Code, r.Remark)
	}
	var notified atomic.Int32
	c1 := b.client(func(_ context.Context, req *remoting.Command) *remoting.Command {
		if req.Code == remoting.NotifyConsumerIDsChanged {
			notified.Add(1)
		}
		return nil
	})
	heartbeat(t, c1, consumerHeartbeat("10.0.0.1@1", "cgQuiet"))
	c2 := b.client(nil)
	heartbeat(t, c2, consumerHeartbeat("10.0.0.2@2", "cgQuiet"))
	time.Sleep(200 * time.Millisecond)
	if n := notified.Load(); n != 0 {
		t.Fatalf("notified on join despite group flag off: %d (heartbeat path honours it)", n)
	}
	call(t, c2, remoting.UnregisterClient, map[string]string{"clientID": "10.0.0.2@2", "consumerGroup": "cgQuiet"}, nil)
	time.Sleep(300 * time.Millisecond)
	if n := notified.Load(); n != 0 {
		t.Errorf("group with notifyConsumerIdsChangedEnable=false was notified %d times on UNREGISTER_CLIENT", n)
	}
}

// RocketMQ AdminBrokerProcessor.callConsumer: a client that does not
// answer within 10 s gives CONSUME_MSG_TIMEOUT (207), not SYSTEM_ERROR.
func TestARelayToAConsumerThatDoesNotAnswerTimesOut(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 10 s")
	}
	b := startTestBroker(t, nil)
	silent := b.client(func(_ context.Context, req *remoting.Command) *remoting.Command { return nil })
	heartbeat(t, silent, consumerHeartbeat("10.0.0.1@1", "cgSilent"))
	admin := b.client(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := admin.Invoke(ctx, remoting.NewRequest(remoting.GetConsumerRunningInfo,
		map[string]string{"consumerGroup": "cgSilent", "clientId": "10.0.0.1@1", "jstackEnable": "false"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if r.Code != remoting.ConsumeMsgTimeout {
		t.Errorf("relay to a client that does not answer: code %d %q, want 207 CONSUME_MSG_TIMEOUT", r.Code, r.Remark)
	}
}

func consumerHeartbeatSub(clientID, group, topic, expr string, ver int64) []byte {
	return []byte(fmt.Sprintf(`{"clientID":%q,"producerDataSet":[],"consumerDataSet":[{"groupName":%q,`+
		`"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",`+
		`"subscriptionDataSet":[{"topic":%q,"subString":%q,"tagsSet":[%q],"codeSet":[],"subVersion":%d,"expressionType":"TAG"}],"unitMode":false}]}`,
		clientID, group, topic, expr, expr, ver))
}

// RocketMQ ConsumerGroupInfo.updateSubscription replaces a topic's
// subscription only when the heartbeat's subVersion is larger. During a
// rolling change of a group's subscription (old clients "a"@100, new
// clients "b"@200) the broker keeps the newest one; a heartbeat of an old
// client does not bring "a" back, and the new client's pulls (Java sends
// its subVersion) are never refused as SUBSCRIPTION_NOT_LATEST.
func TestAnOlderSubscriptionDoesNotReplaceANewerOne(t *testing.T) {
	b := startTestBroker(t, nil)
	p := b.client(nil)
	mustSend(t, p, "TSub", 0, "x", "TAGS\x01b\x02")
	b.caughtUp()
	oldC := b.client(nil)
	newC := b.client(nil)
	heartbeat(t, oldC, consumerHeartbeatSub("10.0.0.1@old", "cgRoll", "TSub", "a", 100))
	heartbeat(t, newC, consumerHeartbeatSub("10.0.0.2@new", "cgRoll", "TSub", "b", 200))
	heartbeat(t, oldC, consumerHeartbeatSub("10.0.0.1@old", "cgRoll", "TSub", "a", 100))
	if s, _, _ := b.clients.groupSubscription("cgRoll", "TSub"); s == nil || s.SubVersion != 200 {
		t.Errorf("group subscription after an older client's heartbeat: %+v, want the newer (subVersion 200, \"b\")", s)
	}
	req := pullReq("cgRoll", "TSub", 0, 0, 0, 0, "")
	req["sysFlag"] = "0"
	req["subVersion"] = "200"
	if r := call(t, newC, remoting.PullMessage, req, nil); r.Code != remoting.Success {
		t.Errorf("pull of the client with the newest subscription: code %d %q (RocketMQ: found)", r.Code, r.Remark)
	}
}

// A client whose heartbeats stopped for channelExpiredTimeout is removed
// and its connection closed, as RocketMQ's scan closes the channel; a
// connection that still carries a live client (the gRPC proxy heartbeats
// for all of its clients over one) stays open.
func TestAnExpiredClientsConnectionIsClosedUnlessItCarriesALiveOne(t *testing.T) {
	b := startTestBroker(t, nil)
	alone, shared := b.client(nil), b.client(nil)
	heartbeat(t, alone, consumerHeartbeat("expired-alone", "gx"))
	heartbeat(t, shared, consumerHeartbeat("expired-shared", "gx"))
	between := time.Now()
	time.Sleep(50 * time.Millisecond)
	heartbeat(t, shared, consumerHeartbeat("live", "gx"))

	b.clients.expire(between.Add(b.cfg.ChannelExpiredTimeout))
	if ids := b.clients.consumerIDs("gx"); len(ids) != 1 || ids[0] != "live" {
		t.Fatalf("group after the scan: %v, want only the live client", ids)
	}
	select {
	case <-alone.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the expired client's connection is still open")
	}
	if code, ids := consumerIDList(t, shared, "gx"); code != remoting.Success || len(ids) != 1 {
		t.Fatalf("the connection carrying a live client: %d %v", code, ids)
	}
}
