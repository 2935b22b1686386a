package main

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// The allocation of a new static topic spreads the logic queues over the
// target groups in turn, each on its own new physical queue, and a
// widening keeps the existing queues where they are.
func TestPlanStaticTopic(t *testing.T) {
	targets := map[string]bool{"a": true, "b": true}
	plan, err := planStaticTopic("S", 3, targets, nil, 5000)
	if err != nil {
		t.Fatal(err)
	}
	a, b := plan["a"], plan["b"]
	if a.config.WriteQueueNums != 2 || b.config.WriteQueueNums != 1 {
		t.Fatalf("queues a=%d b=%d, want 2 and 1", a.config.WriteQueueNums, b.config.WriteQueueNums)
	}
	if got, want := a.mapping.LeaderIDMap(), map[int32]int32{0: 0, 2: 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("a leads %v, want %v", got, want)
	}
	if a.mapping.Epoch != 6000 || a.mapping.TotalQueues != 3 || b.mapping.TotalQueues != 3 {
		t.Fatalf("epoch %d totals %d/%d", a.mapping.Epoch, a.mapping.TotalQueues, b.mapping.TotalQueues)
	}
	current := map[string]staticConfig{"a": a, "b": b}
	for name, sc := range current {
		sc.config.TopicName = "S"
		current[name] = sc
	}
	wider, err := planStaticTopic("S", 4, targets, current, 5500)
	if err != nil {
		t.Fatal(err)
	}
	if got := wider["b"].mapping.LeaderIDMap(); !reflect.DeepEqual(got, map[int32]int32{1: 0, 3: 1}) {
		t.Fatalf("after widening b leads %v", got)
	}
	if wider["a"].mapping.Epoch != 7000 {
		t.Fatalf("widened epoch %d, want the old one + 1000", wider["a"].mapping.Epoch)
	}
	if _, err := planStaticTopic("S", 2, targets, current, 5500); err == nil || !strings.Contains(err.Error(), "decrease") {
		t.Fatalf("fewer queues: %v", err)
	}
	broken := map[string]staticConfig{"a": current["a"], "b": {config: current["b"].config}}
	if _, err := planStaticTopic("S", 4, targets, broken, 5500); err == nil || !strings.Contains(err.Error(), "should not be null") {
		t.Fatalf("a group with the topic but no mapping: %v", err)
	}
}

// updateStaticTopic over a cluster of two groups creates the topic on
// both, the name server routes both groups' leaders, and each group takes
// sends to the logic queues it leads only; a widening with mqadmin's
// spelling (-qn, --brokers) adds queues and raises the epoch.
func TestUpdateStaticTopicOverTwoGroups(t *testing.T) {
	ns, a, b := startTwoMasters(t)
	out0(t, "updateStaticTopic", "-n", ns, "-t", "ST", "-c", "DefaultCluster", "--qn", "4")

	mapping := func(addr string) meta.TopicQueueMappingDetail { return staticMappingAt(t, addr, "ST") }
	ma, mb := mapping(a), mapping(b)
	if !reflect.DeepEqual(ma.LeaderIDMap(), map[int32]int32{0: 0, 2: 1}) || !reflect.DeepEqual(mb.LeaderIDMap(), map[int32]int32{1: 0, 3: 1}) {
		t.Fatalf("leaders a %v b %v", ma.LeaderIDMap(), mb.LeaderIDMap())
	}
	if ma.Epoch != mb.Epoch || ma.TotalQueues != 4 {
		t.Fatalf("epochs %d/%d total %d", ma.Epoch, mb.Epoch, ma.TotalQueues)
	}
	route := out0(t, "topicRoute", "-n", ns, "-t", "ST")
	if !strings.Contains(route, "topicQueueMappingByBroker") || !strings.Contains(route, `"broker-b"`) {
		t.Fatalf("the route has no mapping of both groups:\n%s", route)
	}

	g := &globals{timeout: 10 * time.Second}
	send := func(addr string, q string) *remoting.Command {
		t.Helper()
		resp, _ := g.invoke(context.Background(), addr, remoting.SendMessage, remoting.Header{
			"producerGroup": "pg", "topic": "ST", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
			"queueId": q, "sysFlag": "0", "bornTimestamp": "1", "flag": "0"}, []byte("x"))
		if resp == nil {
			t.Fatalf("send to %s queue %s: no answer", addr, q)
		}
		return resp
	}
	if r := send(b, "3"); r.Code != remoting.Success || r.ExtFields["queueId"] != "3" {
		t.Fatalf("send to logic queue 3 on broker-b: %d %s queueId %s", r.Code, r.Remark, r.ExtFields["queueId"])
	}
	if r := send(b, "0"); r.Code != remoting.NotLeaderForQueue {
		t.Fatalf("send to logic queue 0 on broker-b, which broker-a leads: %d %s", r.Code, r.Remark)
	}

	out0(t, "updateStaticTopic", "-n", ns, "-t", "ST", "--brokers", "broker-a", "--totalQueueNum", "5")
	if ma2 := mapping(a); ma2.Epoch <= ma.Epoch || ma2.TotalQueues != 5 || len(ma2.LeaderIDMap())+len(mapping(b).LeaderIDMap()) != 5 {
		t.Fatalf("after widening: a %+v", ma2)
	}
	if _, err := run(t, "updateStaticTopic", "-n", ns, "-t", "ST", "-c", "DefaultCluster", "--qn", "5"); err == nil || !strings.Contains(err.Error(), "equal") {
		t.Fatalf("the same queue count again: %v", err)
	}
	if got := mqadminArgs([]string{"updateStaticTopic", "-qn", "4", "-t", "X"}); got[1] != "--qn" {
		t.Fatalf("mqadmin's -qn is read as %v", got)
	}
}

// staticMappingAt returns the static mapping of topic that the broker at
// addr answers GET_TOPIC_CONFIG with (lo=true), failing the test when it
// has none.
func staticMappingAt(t *testing.T, addr, topic string) meta.TopicQueueMappingDetail {
	t.Helper()
	g := &globals{timeout: 10 * time.Second}
	resp, err := g.invoke(context.Background(), addr, remoting.GetTopicConfig, remoting.Header{"topic": topic, "lo": "true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := decodeStaticConfig(resp.Body)
	if err != nil || sc.mapping == nil {
		t.Fatalf("config of %s: %+v %v", addr, sc, err)
	}
	return *sc.mapping
}
