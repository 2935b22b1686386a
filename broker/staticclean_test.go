package broker

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// RocketMQ's TopicQueueMappingCleanService (cleanItemExpired) on the
// group leading two logic queues moved onto it from broker-a: the queue
// whose old physical queue on broker-a never held a message (max offset
// 0) loses its old item, the one whose old queue still holds messages
// keeps it (a pull from logic offset 0 still reads them through the new
// leader), the epoch stays, broker-a's mapping is left alone, and a second
// run drops nothing.
func TestStaticTopicCleanDropsExpiredItems(t *testing.T) {
	ns := startNameServerAt(t, "127.0.0.1:0", time.Now, nil)
	ta := startTestBroker(t, map[string]string{"brokerName": "broker-a", "namesrvAddr": ns.Addr().String()})
	tb := startTestBroker(t, map[string]string{"brokerName": "broker-b", "namesrvAddr": ns.Addr().String()})
	ca, cb := ta.client(nil), tb.client(nil)
	const topic = "clean-topic"
	item := func(bname string, gen, queue int32, logic int64) meta.LogicQueueMappingItem {
		it := staticItem(gen, queue, logic, 0, -1)
		it.Bname = bname
		return it
	}
	onA := meta.NewTopicQueueMappingDetail(topic, 2, "broker-a", 1000)
	onA.HostedQueues[0] = []meta.LogicQueueMappingItem{item("broker-a", 0, 0, 0)}
	onA.HostedQueues[1] = []meta.LogicQueueMappingItem{item("broker-a", 0, 1, 0)}
	if r := updateStatic(t, ca, 2, onA); r.Code != remoting.Success {
		t.Fatalf("create on broker-a: %d %s", r.Code, r.Remark)
	}
	for i := range 2 {
		mustSend(t, ca, topic, 1, "old-"+strconv.Itoa(i), "")
	}
	ta.caughtUp()
	moved := map[int32][]meta.LogicQueueMappingItem{
		0: {item("broker-a", 0, 0, 0), item("broker-b", 1, 0, 10000)},
		1: {item("broker-a", 0, 1, 0), item("broker-b", 1, 1, 10000)},
	}
	for _, c := range []struct {
		cl    *remoting.Client
		bname string
	}{{cb, "broker-b"}, {ca, "broker-a"}} {
		d := meta.NewTopicQueueMappingDetail(topic, 2, c.bname, 2000)
		hosted := map[int32][]meta.LogicQueueMappingItem{}
		for id, items := range moved {
			hosted[id] = items
		}
		d.HostedQueues = hosted
		if r := updateStatic(t, c.cl, 2, d); r.Code != remoting.Success {
			t.Fatalf("move onto broker-b (%s): %d %s", c.bname, r.Code, r.Remark)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := tb.cleanExpiredMappingItems(ctx)
	if err != nil || n != 1 {
		t.Fatalf("clean on broker-b: %d dropped, %v; want 1", n, err)
	}
	got, ok, err := tb.mappings.Get(topic)
	if err != nil || !ok {
		t.Fatalf("broker-b's mapping: %v %v", ok, err)
	}
	if want := moved[0][1:]; !reflect.DeepEqual(got.HostedQueues[0], want) {
		t.Fatalf("queue 0 after the clean: %+v, want %+v", got.HostedQueues[0], want)
	}
	if !reflect.DeepEqual(got.HostedQueues[1], moved[1]) {
		t.Fatalf("queue 1, whose old item still has messages: %+v", got.HostedQueues[1])
	}
	if got.Epoch != 2000 {
		t.Fatalf("epoch %d after the clean, want 2000", got.Epoch)
	}
	if onA, _, _ := ta.mappings.Get(topic); len(onA.HostedQueues[0]) != 2 {
		t.Fatalf("broker-a's mapping changed: %+v", onA.HostedQueues)
	}
	if n, err := tb.cleanExpiredMappingItems(ctx); err != nil || n != 0 {
		t.Fatalf("second clean: %d dropped, %v", n, err)
	}

	ensureGroup(t, ca, "g")
	ensureGroup(t, cb, "g")
	r := call(t, cb, remoting.PullMessage, pullReq("g", topic, 1, 0, 0, 0, "*"), nil)
	if r.Code != remoting.Success || len(decodeRecords(t, r.Body)) != 2 {
		t.Fatalf("pull of logic queue 1's old item through broker-b: %d %s", r.Code, r.Remark)
	}
	// The cleaned mapping is what a later update is checked against: the
	// same epoch with the old item back is still accepted (RocketMQ
	// skips the gens one side lacks).
	d := meta.NewTopicQueueMappingDetail(topic, 2, "broker-b", 2000)
	d.HostedQueues = moved
	if r := updateStatic(t, cb, 2, d); r.Code != remoting.Success {
		t.Fatalf("update after the clean: %d %s", r.Code, r.Remark)
	}
}
