package broker

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// movedStaticTopic is the store of TestStaticTopicCleanDropsExpiredItems:
// a static topic of two logic queues created on broker-a (queue 1 holding
// two messages) and moved onto broker-b; both groups hold the moved
// mapping.
func movedStaticTopic(t *testing.T) (ta, tb *testBroker, ca, cb *remoting.Client, moved map[int32][]meta.LogicQueueMappingItem) {
	t.Helper()
	ns := startNameServerAt(t, "127.0.0.1:0", time.Now, nil)
	ta = startTestBroker(t, map[string]string{"brokerName": "broker-a", "namesrvAddr": ns.Addr().String()})
	tb = startTestBroker(t, map[string]string{"brokerName": "broker-b", "namesrvAddr": ns.Addr().String()})
	ca, cb = ta.client(nil), tb.client(nil)
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
	moved = map[int32][]meta.LogicQueueMappingItem{
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

	return ta, tb, ca, cb, moved
}

// RocketMQ's TopicQueueMappingCleanService (cleanItemExpired) on the
// group leading two logic queues moved onto it from broker-a: the queue
// whose old physical queue on broker-a never held a message (max offset
// 0) loses its old item, the one whose old queue still holds messages
// keeps it (a pull from logic offset 0 still reads them through the new
// leader), the epoch stays, broker-a's mapping is left alone, and a second
// run drops nothing.
func TestStaticTopicCleanDropsExpiredItems(t *testing.T) {
	ta, tb, ca, cb, moved := movedStaticTopic(t)
	const topic = "clean-topic"
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

// The clean runs on its timer only at the hours of deleteWhen (RocketMQ's
// isItTimeToDo): a round at another hour drops nothing, and the timer at
// one of them drops the expired item.
func TestStaticTopicCleanRunsAtDeleteWhen(t *testing.T) {
	_, tb, _, _, moved := movedStaticTopic(t)
	const topic = "clean-topic"
	hours := tb.live.cur.Load().cfg.DeleteWhen
	if len(hours) == 0 || len(hours) == 24 {
		t.Fatalf("deleteWhen %v: the test needs an hour inside and one outside", hours)
	}
	outside := (hours[0] + 1) % 24
	for slices.Contains(hours, outside) {
		outside = (outside + 1) % 24
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if tb.staticCleanRound(ctx, outside) {
		t.Fatalf("a round at %02d h ran with deleteWhen %v", outside, hours)
	}
	if got, _, _ := tb.mappings.Get(topic); len(got.HostedQueues[0]) != len(moved[0]) {
		t.Fatalf("a round outside deleteWhen dropped an item: %+v", got.HostedQueues[0])
	}
	at := time.Date(2026, 12, 6, hours[0], 30, 0, 0, time.Local)
	loopCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tb.runStaticClean(loopCtx, 20*time.Millisecond, func() time.Time { return at })
	}()
	waitUntil(t, 20*time.Second, "the timer's round to drop the expired item", func() bool {
		got, _, _ := tb.mappings.Get(topic)
		return len(got.HostedQueues[0]) == len(moved[0])-1
	})
	stop()
	<-done
}

// RocketMQ's cleanItemListMoreThanSecondGen: logic queue 0 moved from
// broker-a to broker-b and on to broker-c. broker-a, whose items of it
// end with broker-b, keeps them while its epoch differs from the real
// leader's, and drops the queue once the epochs agree and broker-c's own
// mapping ends the queue with broker-c; broker-b, whose items already end
// with broker-c, keeps them; broker-c's reads are untouched.
func TestStaticTopicCleanDropsMovedLogicQueues(t *testing.T) {
	ns := startNameServerAt(t, "127.0.0.1:0", time.Now, nil)
	tbs := map[string]*testBroker{}
	cls := map[string]*remoting.Client{}
	for _, name := range []string{"broker-a", "broker-b", "broker-c"} {
		tbs[name] = startTestBroker(t, map[string]string{"brokerName": name, "namesrvAddr": ns.Addr().String()})
		cls[name] = tbs[name].client(nil)
	}
	const topic = "moved-on-topic"
	item := func(bname string, gen int32, logic int64) meta.LogicQueueMappingItem {
		it := staticItem(gen, 0, logic, 0, -1)
		it.Bname = bname
		return it
	}
	stale := []meta.LogicQueueMappingItem{item("broker-a", 0, 0), item("broker-b", 1, 10000)}
	full := append(append([]meta.LogicQueueMappingItem{}, stale...), item("broker-c", 2, 20000))
	put := func(bname string, epoch int64, items []meta.LogicQueueMappingItem) {
		t.Helper()
		d := meta.NewTopicQueueMappingDetail(topic, 1, bname, epoch)
		d.HostedQueues[0] = items
		if r := updateStatic(t, cls[bname], 1, d); r.Code != remoting.Success {
			t.Fatalf("update %s: %d %s", bname, r.Code, r.Remark)
		}
	}
	put("broker-c", 3000, full)
	put("broker-b", 3000, full)
	put("broker-a", 2000, stale)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clean := func(bname string) int {
		t.Helper()
		n, err := tbs[bname].cleanMovedLogicQueues(ctx)
		if err != nil {
			t.Fatalf("clean on %s: %v", bname, err)
		}
		return n
	}
	if n := clean("broker-a"); n != 0 {
		t.Fatalf("broker-a dropped %d queues at an epoch other than the leader's", n)
	}
	put("broker-a", 3000, stale)
	if n := clean("broker-b"); n != 0 {
		t.Fatalf("broker-b, which knows the leader, dropped %d queues", n)
	}
	if n := clean("broker-a"); n != 1 {
		t.Fatalf("broker-a dropped %d queues, want 1", n)
	}
	d, ok, err := tbs["broker-a"].mappings.Get(topic)
	if err != nil || !ok || len(d.HostedQueues) != 0 || d.Epoch != 3000 {
		t.Fatalf("broker-a's mapping after the clean: %+v %v %v", d, ok, err)
	}
	if d, _, _ := tbs["broker-c"].mappings.Get(topic); !reflect.DeepEqual(d.HostedQueues[0], full) {
		t.Fatalf("broker-c's mapping changed: %+v", d.HostedQueues)
	}
	if n := clean("broker-a"); n != 0 {
		t.Fatalf("second clean dropped %d", n)
	}
}

// realLeaders takes, per logic queue, the group of the highest epoch
// leading it in the route, and leaves out a queue two groups claim at
// the same epoch or of another scope.
func TestRealLeaders(t *testing.T) {
	info := func(bname string, epoch int64, scope string, ids ...int32) namesrv.TopicQueueMappingInfo {
		m := map[int32]int32{}
		for _, id := range ids {
			m[id] = 0
		}
		return namesrv.TopicQueueMappingInfo{Bname: bname, Epoch: epoch, Scope: scope, CurrIDMap: m}
	}
	route := namesrv.TopicRouteData{TopicQueueMappingByBroker: map[string]namesrv.TopicQueueMappingInfo{
		"a": info("a", 1000, "", 0, 1),
		"b": info("b", 2000, meta.MetadataScopeGlobal, 0, 2),
		"c": info("c", 2000, meta.MetadataScopeGlobal, 2),
		"d": info("d", 5000, "other", 1),
	}}
	if got, want := realLeaders(route, meta.MetadataScopeGlobal), map[int32]string{0: "b", 1: "a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("leaders %v, want %v", got, want)
	}
}
