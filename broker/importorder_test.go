package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// writeRocketMQConfig writes one of RocketMQ's config files under
// store/config.
func writeRocketMQConfig(t *testing.T, store, name, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(store, "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "config", name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRocketMQStoreKeepsOrderlyPopBatches moves a store on which
// orderly POP consumers of RocketMQ 5 had batches in flight
// (consumerOrderInfo.json, as fastjson writes it) and checks that each
// batch carries on: a batch inside its invisible time keeps the queue
// locked and is acknowledged with RocketMQ's receipt handle; an expired
// one is delivered again with its messages' counts one higher, unless a
// change of invisible time holds it; a batch without an invisible time of
// its own is judged by the pop's; and the
// batches RocketMQ would drop are not imported.
func TestOpenRocketMQStoreKeepsOrderlyPopBatches(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	c := b.client(nil)
	for q, n := range []int{5, 3, 2, 1} {
		for i := range n {
			mustSend(t, c, "OrdT", int32(q), fmt.Sprintf("q%d-m%d", q, i), "")
		}
	}
	b.caughtUp()
	b.stop()
	if err := os.RemoveAll(filepath.Join(store, kvindex.DirName)); err != nil {
		t.Fatal(err)
	}

	now := time.Now().UnixMilli()
	inFlight, expired, noInvisible := now-1_000, now-120_000, now-1_000
	ms := func(v int64) string { return strconv.FormatInt(v, 10) }
	writeRocketMQConfig(t, store, "topics.json", `{"topicConfigTable":{
		"OrdT":{"topicName":"OrdT","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicFilterType":"SINGLE_TAG","order":true}}}`)
	writeRocketMQConfig(t, store, "subscriptionGroup.json", `{"subscriptionGroupTable":{
		"cg-ord":{"groupName":"cg-ord","consumeMessageOrderly":true,"consumeEnable":true},
		"cg-idle":{"groupName":"cg-idle","consumeEnable":true},
		"cg-done":{"groupName":"cg-done","consumeEnable":true}}}`)
	// RocketMQ commits an orderly batch up to its first unacknowledged
	// message: offset 1 of queue 0 is acknowledged, so the group is at 2.
	writeRocketMQConfig(t, store, "consumerOffset.json", `{"offsetTable":{"OrdT@cg-ord":{0:2,1:0,2:0,3:0}}}`)
	writeRocketMQConfig(t, store, "consumerOrderInfo.json", `{"table":{
		"OrdT@cg-ord":{
			0:{"a":"att-1","cm":1,"i":60000,"l":`+ms(inFlight)+`,"o":[1,1,2],"oc":{2:1,3:1},"popTime":`+ms(inFlight)+`},
			1:{"cm":0,"i":60000,"l":`+ms(expired)+`,"o":[0,1],"oc":{0:2},"popTime":`+ms(expired)+`},
			2:{"cm":0,"l":`+ms(noInvisible)+`,"o":[0,1],"popTime":`+ms(noInvisible)+`},
			3:{"cm":0,"i":60000,"l":`+ms(expired)+`,"o":[0],"ot":{0:`+ms(now+60_000)+`},"popTime":`+ms(expired)+`},
			7:{"cm":0,"i":60000,"l":`+ms(inFlight)+`,"o":[0],"popTime":`+ms(inFlight)+`}},
		"OrdT@cg-idle":{0:{"cm":0,"i":60000,"l":`+ms(now-25*3600_000)+`,"o":[0],"popTime":`+ms(inFlight)+`}},
		"OrdT@cg-done":{0:{"cm":3,"i":60000,"l":`+ms(inFlight)+`,"o":[0,1],"popTime":`+ms(inFlight)+`}},
		"OrdT@cg-gone":{0:{"cm":0,"i":60000,"l":`+ms(inFlight)+`,"o":[0],"popTime":`+ms(inFlight)+`}},
		"Gone@cg-ord":{0:{"cm":0,"i":60000,"l":`+ms(inFlight)+`,"o":[0],"popTime":`+ms(inFlight)+`}}}}`)

	b = startTestBrokerAt(t, store, nil)
	for _, skipped := range []struct {
		group, topic string
		queue        int32
	}{{"cg-ord", "OrdT", 7}, {"cg-idle", "OrdT", 0}, {"cg-done", "OrdT", 0}, {"cg-gone", "OrdT", 0}, {"cg-ord", "Gone", 0}} {
		if st, ok, err := b.db.Pop().Order(skipped.group, skipped.topic, skipped.queue); err != nil || ok {
			t.Errorf("batch of %+v imported: %+v %v", skipped, st, err)
		}
	}
	pc, rc := popClient(b)
	orderly := func(queue int32, attempt string, invisible time.Duration) popclient.PopResult {
		return mustPop(t, pc, popclient.PopRequest{Group: "cg-ord", Topic: "OrdT", QueueID: queue, MaxMsgNums: 2,
			InvisibleTime: invisible, Order: true, AttemptID: attempt})
	}

	// Queue 0: locked while the batch is in flight.
	if res := orderly(0, "att-2", time.Minute); res.Code != remoting.PollingTimeout {
		t.Fatalf("pop of the queue RocketMQ's batch locks: %d %v", res.Code, bodies(res.Messages))
	}
	// The client acks message 2 with the handle RocketMQ gave it.
	h := pop.Handle{CKOffset: 1, PopTime: inFlight, InvisibleTime: 60_000, ReviveQID: pop.OrderReviveQueue,
		RetryFlag: pop.FlagNormal, BrokerName: "broker-a", QueueID: 0, QueueOffset: 2}
	r := call(t, rc, remoting.AckMessage, map[string]string{"consumerGroup": "cg-ord", "topic": "OrdT", "queueId": "0",
		"extraInfo": h.String(), "offset": "2"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("ack with RocketMQ's handle: %d %s", r.Code, r.Remark)
	}
	if got := committedOffset(t, rc, "cg-ord", "OrdT", 0); got != 3 {
		t.Fatalf("committed offset after the ack: %d, want 3", got)
	}
	if res := orderly(0, "att-2", time.Minute); res.Code != remoting.PollingTimeout {
		t.Fatalf("queue unlocked with message 3 still in flight: %d %v", res.Code, bodies(res.Messages))
	}

	// Queue 1: the expired batch comes again, its counts carried on.
	res := orderly(1, "", time.Minute)
	if fmt.Sprint(bodies(res.Messages)) != "[q1-m0 q1-m1]" {
		t.Fatalf("expired batch: %d %v", res.Code, bodies(res.Messages))
	}
	if got := res.Header["orderCountInfo"]; got != "0 qo1%0 3;0 qo1%1 1;0 1 1" {
		t.Fatalf("orderCountInfo %q, want RocketMQ's counts plus one", got)
	}

	// Queue 3: expired by its pop time, but its message's invisible time
	// was changed since.
	if res := orderly(3, "", time.Minute); res.Code != remoting.PollingTimeout {
		t.Fatalf("pop of the queue whose message got a later deadline: %d %v", res.Code, bodies(res.Messages))
	}

	// Queue 2: no invisible time of its own, popped a second ago: a pop
	// that asks for a minute finds it in flight, one that asks for half a
	// second finds it expired.
	st, ok, err := b.db.Pop().Order("cg-ord", "OrdT", 2)
	if err != nil || !ok || st.InvisibleTime != 0 {
		t.Fatalf("imported batch of queue 2: %+v %v %v", st, ok, err)
	}
	if res := orderly(2, "", time.Minute); res.Code != remoting.PollingTimeout {
		t.Fatalf("batch without invisible time, pop of a minute: %d %v", res.Code, bodies(res.Messages))
	}
	if res := orderly(2, "", 500*time.Millisecond); fmt.Sprint(bodies(res.Messages)) != "[q2-m0 q2-m1]" {
		t.Fatalf("batch without invisible time, pop of 500 ms: %d %v", res.Code, bodies(res.Messages))
	}
}
