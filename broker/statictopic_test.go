package broker

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// staticItem is a mapping item of broker-a with RocketMQ's defaults.
func staticItem(gen, queue int32, logic, start, end int64) meta.LogicQueueMappingItem {
	it := meta.NewLogicQueueMappingItem()
	it.Bname, it.Gen, it.QueueID, it.LogicOffset, it.StartOffset, it.EndOffset = "broker-a", gen, queue, logic, start, end
	return it
}

// updateStatic sends UPDATE_AND_CREATE_STATIC_TOPIC as mqadmin
// updateStaticTopic does: the topic's config in the header, the detail as
// the body.
func updateStatic(t *testing.T, c *remoting.Client, queues int, d meta.TopicQueueMappingDetail) *remoting.Command {
	t.Helper()
	body, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return call(t, c, remoting.UpdateAndCreateStaticTopic, map[string]string{
		"topic": d.Topic, "defaultTopic": "TBW102", "readQueueNums": strconv.Itoa(queues), "writeQueueNums": strconv.Itoa(queues),
		"perm": "6", "topicFilterType": "SINGLE_TAG", "order": "false",
	}, body)
}

// A static topic on one broker, its logic queue 0 moved once from
// physical queue 0 to physical queue 1 of the same broker (its logic
// offsets going on from 10, as RocketMQ's remapping rounds them up): the name
// server routes its leaders, sends and pulls name logic queues and
// offsets, consumer offsets are stored physically and read back
// logically, and the mapping survives a restart and goes with the topic.
func TestStaticTopicOnOneBroker(t *testing.T) {
	ns := startNameServerAt(t, "127.0.0.1:0", time.Now, nil)
	store := t.TempDir()
	settings := map[string]string{"brokerName": "broker-a", "namesrvAddr": ns.Addr().String()}
	tb := startTestBrokerAt(t, store, settings)
	c := tb.client(nil)
	const topic = "static-topic"

	// Epoch 1: logic 0 on physical 0, logic 1 on physical 2.
	d := meta.NewTopicQueueMappingDetail(topic, 2, "broker-a", 1000)
	d.HostedQueues[0] = []meta.LogicQueueMappingItem{staticItem(0, 0, 0, 0, -1)}
	d.HostedQueues[1] = []meta.LogicQueueMappingItem{staticItem(0, 2, 0, 0, -1)}
	if r := updateStatic(t, c, 3, d); r.Code != remoting.Success {
		t.Fatalf("create static topic: %d %s", r.Code, r.Remark)
	}
	route, ok := ns.Registry().Route(topic)
	if !ok {
		t.Fatal("the name server has no route of the static topic after its creation was answered")
	}
	info := route.TopicQueueMappingByBroker["broker-a"]
	if want := map[int32]int32{0: 0, 1: 2}; !reflect.DeepEqual(info.CurrIDMap, want) || info.Epoch != 1000 || info.TotalQueues != 2 {
		t.Fatalf("routed mapping %+v, want currIdMap %v epoch 1000 totalQueues 2", info, want)
	}

	for i := range 2 {
		r := mustSend(t, c, topic, 0, "old-"+strconv.Itoa(i), "")
		if q, off := header(t, r, "queueId"), header(t, r, "queueOffset"); q != 0 || off != int64(i) {
			t.Fatalf("send %d answered queue %d offset %d", i, q, off)
		}
	}
	// Logic 1 is physical 2: its message lands there.
	if r := mustSend(t, c, topic, 1, "one", ""); header(t, r, "queueId") != 1 {
		t.Fatalf("a send to logic queue 1 answered queue %d", header(t, r, "queueId"))
	}
	tb.caughtUp()
	if n, err := tb.cqs.MaxOffset(topic, 2); err != nil || n != 1 {
		t.Fatalf("physical queue 2 holds %d (%v), want the message of logic queue 1", n, err)
	}

	// Epoch 2: logic 0 moves to physical 1 from logic offset 10 on.
	d.Epoch = 2000
	d.HostedQueues[0] = []meta.LogicQueueMappingItem{staticItem(0, 0, 0, 0, 2), staticItem(1, 1, 10, 0, -1)}
	if r := updateStatic(t, c, 3, d); r.Code != remoting.Success {
		t.Fatalf("move logic queue 0: %d %s", r.Code, r.Remark)
	}
	if route, _ := ns.Registry().Route(topic); route.TopicQueueMappingByBroker["broker-a"].CurrIDMap[0] != 1 {
		t.Fatalf("the route's mapping did not follow the move: %+v", route.TopicQueueMappingByBroker)
	}
	r := mustSend(t, c, topic, 0, "new", "")
	if q, off := header(t, r, "queueId"), header(t, r, "queueOffset"); q != 0 || off != 10 {
		t.Fatalf("send after the move answered queue %d offset %d, want 0/10", q, off)
	}
	tb.caughtUp()

	ensureGroup(t, c, "g")
	pull := func(offset int64) *remoting.Command {
		t.Helper()
		return call(t, c, remoting.PullMessage, pullReq("g", topic, 0, offset, 0, 0, "*"), nil)
	}
	// From logic 0: the old item's two messages, then its end.
	r = pull(0)
	if r.Code != remoting.Success || len(decodeRecords(t, r.Body)) != 2 {
		t.Fatalf("pull from logic 0: %d %s", r.Code, r.Remark)
	}
	if next, delta := header(t, r, "nextBeginOffset"), header(t, r, "offsetDelta"); next != 2 || delta != 0 {
		t.Fatalf("pull from logic 0: nextBeginOffset %d offsetDelta %d, want 2 and 0", next, delta)
	}
	// At the old item's end: sent on to the next item's start.
	r = pull(2)
	if r.Code != remoting.PullRetryImmediately || header(t, r, "nextBeginOffset") != 10 {
		t.Fatalf("pull at the old item's end: %d %s nextBeginOffset %s, want PULL_RETRY_IMMEDIATELY to 10", r.Code, r.Remark, r.ExtFields["nextBeginOffset"])
	}
	// From logic 10: physical 0 of queue 1, its queue offset put back by
	// offsetDelta.
	r = pull(10)
	if r.Code != remoting.Success {
		t.Fatalf("pull from logic 10: %d %s", r.Code, r.Remark)
	}
	msgs := decodeRecords(t, r.Body)
	if len(msgs) != 1 || string(msgs[0].Body) != "new" {
		t.Fatalf("pull from logic 10: %d messages", len(msgs))
	}
	if delta := header(t, r, "offsetDelta"); msgs[0].QueueOffset+delta != 10 {
		t.Fatalf("the message's queue offset %d + offsetDelta %d is not its logic offset 10", msgs[0].QueueOffset, delta)
	}
	if next, maxOff := header(t, r, "nextBeginOffset"), header(t, r, "maxOffset"); next != 11 || maxOff != 11 {
		t.Fatalf("pull from logic 10: nextBeginOffset %d maxOffset %d, want 11 and 11", next, maxOff)
	}

	offsetOf := func(code int32, ext map[string]string) int64 {
		t.Helper()
		r := call(t, c, code, ext, nil)
		if r.Code != remoting.Success {
			t.Fatalf("request %d %v: %d %s", code, ext, r.Code, r.Remark)
		}
		return header(t, r, "offset")
	}
	q0 := map[string]string{"topic": topic, "queueId": "0"}
	if got := offsetOf(remoting.GetMaxOffset, q0); got != 11 {
		t.Fatalf("max offset of logic 0: %d, want 11", got)
	}
	if got := offsetOf(remoting.GetMinOffset, q0); got != 0 {
		t.Fatalf("min offset of logic 0: %d, want 0", got)
	}
	if got := offsetOf(remoting.SearchOffsetByTimestamp, map[string]string{"topic": topic, "queueId": "0", "timestamp": strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)}); got != 2 {
		t.Fatalf("offset of logic 0 by a time after every message: %d, want 2 (the old item's end)", got)
	}
	commit(t, c, "g", topic, 0, 11)
	if got := committedOffset(t, c, "g", topic, 0); got != 11 {
		t.Fatalf("logic offset read back %d, want 11", got)
	}
	// Stored as physical offset 1 of queue 1 (lo=false names a physical
	// queue, as a forwarding RocketMQ broker asks).
	if got := offsetOf(remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "g", "topic": topic, "queueId": "1", "lo": "false"}); got != 1 {
		t.Fatalf("physical offset of queue 1: %d, want 1", got)
	}

	// A queue the broker does not lead, and refused updates.
	if r := sendV2(t, c, topic, 5, "x", ""); r.Code != remoting.NotLeaderForQueue {
		t.Fatalf("send to an unmapped logic queue: %d %s, want NOT_LEADER_FOR_QUEUE", r.Code, r.Remark)
	}
	old := d
	old.Epoch = 1500
	if r := updateStatic(t, c, 3, old); r.Code != remoting.SystemError || !strings.Contains(r.Remark, "small epoch") {
		t.Fatalf("an update with a smaller epoch: %d %s", r.Code, r.Remark)
	}
	other := d.Clone()
	other.Bname = "broker-b"
	if r := updateStatic(t, c, 3, other); r.Code != remoting.SystemError {
		t.Fatalf("a mapping of another broker: %d %s", r.Code, r.Remark)
	}
	wide := d.Clone()
	wide.Epoch = 3000
	wide.HostedQueues[2] = []meta.LogicQueueMappingItem{staticItem(0, 1, 0, 0, -1)}
	if r := updateStatic(t, c, 3, wide); r.Code != remoting.SystemError || !strings.Contains(r.Remark, "total queue") {
		t.Fatalf("a logic queue beyond totalQueues: %d %s", r.Code, r.Remark)
	}

	// GET_TOPIC_CONFIG answers the detail when asked with lo=true.
	getConfig := func(lo string) map[string]json.RawMessage {
		t.Helper()
		r := call(t, c, remoting.GetTopicConfig, map[string]string{"topic": topic, "lo": lo}, nil)
		if r.Code != remoting.Success {
			t.Fatalf("get topic config: %d %s", r.Code, r.Remark)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if _, ok := getConfig("false")["mappingDetail"]; ok {
		t.Fatal("GET_TOPIC_CONFIG without lo answered a mappingDetail")
	}
	got, err := meta.DecodeTopicQueueMappingDetail(getConfig("true")["mappingDetail"])
	if err != nil || got.Epoch != 2000 || len(got.HostedQueues[0]) != 2 {
		t.Fatalf("mappingDetail %+v (%v)", got, err)
	}

	// Durable: a restart serves the same mapping.
	tb.stop()
	tb = startTestBrokerAt(t, store, settings)
	c = tb.client(nil)
	if r := sendV2(t, c, topic, 0, "after-restart", ""); r.Code != remoting.Success || header(t, r, "queueOffset") != 11 {
		t.Fatalf("send after a restart: %d %s offset %s", r.Code, r.Remark, r.ExtFields["queueOffset"])
	}

	// Deleting the topic deletes its mapping: created again, it is an
	// ordinary topic.
	if r := call(t, c, remoting.DeleteTopicInBroker, map[string]string{"topic": topic}, nil); r.Code != remoting.Success {
		t.Fatalf("delete: %d %s", r.Code, r.Remark)
	}
	if _, ok, err := tb.mappings.Get(topic); err != nil || ok {
		t.Fatalf("the mapping outlived its topic (%v)", err)
	}
	if r := call(t, c, remoting.UpdateAndCreateTopic, map[string]string{"topic": topic, "readQueueNums": "2", "writeQueueNums": "2"}, nil); r.Code != remoting.Success {
		t.Fatalf("create again: %d %s", r.Code, r.Remark)
	}
	if r := sendV2(t, c, topic, 1, "plain", ""); r.Code != remoting.Success || header(t, r, "queueId") != 1 {
		t.Fatalf("send to the ordinary topic: %d %s", r.Code, r.Remark)
	}
}

// A static topic's logic queue moved from broker-b to broker-a: broker-a
// forwards what concerns the old item to broker-b (its messages, its
// minimum, a commit and a query of an offset in it) and answers in logic
// offsets; broker-b refuses a send to the queue it no longer leads.
func TestStaticTopicForwardsToTheOldGroup(t *testing.T) {
	ns := startNameServerAt(t, "127.0.0.1:0", time.Now, nil)
	ta := startTestBroker(t, map[string]string{"brokerName": "broker-a", "namesrvAddr": ns.Addr().String()})
	tb := startTestBroker(t, map[string]string{"brokerName": "broker-b", "namesrvAddr": ns.Addr().String()})
	ca, cb := ta.client(nil), tb.client(nil)
	const topic = "moved-topic"
	item := func(bname string, gen int32, logic, end int64) meta.LogicQueueMappingItem {
		it := staticItem(gen, 0, logic, 0, end)
		it.Bname = bname
		return it
	}
	onB := meta.NewTopicQueueMappingDetail(topic, 1, "broker-b", 1000)
	onB.HostedQueues[0] = []meta.LogicQueueMappingItem{item("broker-b", 0, 0, -1)}
	if r := updateStatic(t, cb, 1, onB); r.Code != remoting.Success {
		t.Fatalf("create on broker-b: %d %s", r.Code, r.Remark)
	}
	for i := range 2 {
		mustSend(t, cb, topic, 0, "old-"+strconv.Itoa(i), "")
	}
	tb.caughtUp()
	moved := []meta.LogicQueueMappingItem{item("broker-b", 0, 0, 2), item("broker-a", 1, 10, -1)}
	for _, c := range []struct {
		cl    *remoting.Client
		bname string
	}{{cb, "broker-b"}, {ca, "broker-a"}} {
		d := meta.NewTopicQueueMappingDetail(topic, 1, c.bname, 2000)
		d.HostedQueues[0] = moved
		if r := updateStatic(t, c.cl, 1, d); r.Code != remoting.Success {
			t.Fatalf("move onto broker-a (%s): %d %s", c.bname, r.Code, r.Remark)
		}
	}
	if r := sendV2(t, cb, topic, 0, "x", ""); r.Code != remoting.NotLeaderForQueue {
		t.Fatalf("send to broker-b after the move: %d %s, want NOT_LEADER_FOR_QUEUE", r.Code, r.Remark)
	}
	if r := mustSend(t, ca, topic, 0, "new", ""); header(t, r, "queueOffset") != 10 {
		t.Fatalf("send to broker-a answered offset %d, want 10", header(t, r, "queueOffset"))
	}
	ta.caughtUp()

	ensureGroup(t, ca, "g")
	ensureGroup(t, cb, "g")
	r := call(t, ca, remoting.PullMessage, pullReq("g", topic, 0, 0, 0, 0, "*"), nil)
	if r.Code != remoting.Success {
		t.Fatalf("pull of the old item through broker-a: %d %s", r.Code, r.Remark)
	}
	if msgs := decodeRecords(t, r.Body); len(msgs) != 2 || string(msgs[0].Body) != "old-0" {
		t.Fatalf("pull of the old item: %d messages", len(msgs))
	}
	if next := header(t, r, "nextBeginOffset"); next != 2 {
		t.Fatalf("nextBeginOffset %d, want 2", next)
	}
	if r := call(t, ca, remoting.GetMinOffset, map[string]string{"topic": topic, "queueId": "0"}, nil); r.Code != remoting.Success || header(t, r, "offset") != 0 {
		t.Fatalf("min offset through broker-a: %d %s %v", r.Code, r.Remark, r.ExtFields)
	}
	// A commit in the old item is stored on broker-b, physically; the
	// query through broker-a finds none on its own item and asks broker-b.
	commit(t, ca, "g", topic, 0, 1)
	if got := committedOffset(t, ca, "g", topic, 0); got != 1 {
		t.Fatalf("offset through broker-a %d, want 1", got)
	}
	if r := call(t, cb, remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "g", "topic": topic, "queueId": "0", "lo": "false"}, nil); header(t, r, "offset") != 1 {
		t.Fatalf("broker-b's physical offset: %v", r.ExtFields)
	}
}

// A slave copies its master's static topic mappings with the topics
// (GET_ALL_TOPIC_CONFIG's topicQueueMappingDetailMap), and their removal.
func TestSlaveSyncCopiesStaticTopicMappings(t *testing.T) {
	master := startTestBroker(t, map[string]string{"brokerName": "broker-a"})
	slave := startTestBroker(t, map[string]string{"brokerName": "broker-a"})
	mc := master.client(nil)
	d := meta.NewTopicQueueMappingDetail("SlaveST", 1, "broker-a", 1000)
	d.HostedQueues[0] = []meta.LogicQueueMappingItem{staticItem(0, 0, 0, 0, -1)}
	if r := updateStatic(t, mc, 1, d); r.Code != remoting.Success {
		t.Fatalf("create: %d %s", r.Code, r.Remark)
	}
	syncSlave(t, slave, master)
	got, ok, err := slave.mappings.Get("SlaveST")
	if err != nil || !ok || !reflect.DeepEqual(got, d) {
		t.Fatalf("the slave's mapping %+v (%v, %v), want %+v", got, ok, err, d)
	}
	if r := call(t, mc, remoting.DeleteTopicInBroker, map[string]string{"topic": "SlaveST"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete: %d %s", r.Code, r.Remark)
	}
	syncSlave(t, slave, master)
	if _, ok, err := slave.mappings.Get("SlaveST"); err != nil || ok {
		t.Fatalf("the slave kept the mapping of a deleted topic (%v)", err)
	}
}

// A slave with slaveReadEnable serves a static topic's reads from the
// mapping it copied and the messages it replicated: pulls name logic
// queues and offsets (the move to the next item at an item's end
// included), and GET_MAX_OFFSET, GET_MIN_OFFSET and QUERY_CONSUMER_OFFSET
// answer logic offsets, the consumer offset the master stored physically
// and the slave copied.
func TestSlaveServesStaticTopicReads(t *testing.T) {
	master := startTestBroker(t, withHA(map[string]string{"brokerName": "broker-a"}))
	mc := master.client(nil)
	const topic = "slave-static"
	d := meta.NewTopicQueueMappingDetail(topic, 1, "broker-a", 1000)
	d.HostedQueues[0] = []meta.LogicQueueMappingItem{staticItem(0, 0, 0, 0, -1)}
	if r := updateStatic(t, mc, 2, d); r.Code != remoting.Success {
		t.Fatalf("create: %d %s", r.Code, r.Remark)
	}
	mustSend(t, mc, topic, 0, "old-0", "")
	mustSend(t, mc, topic, 0, "old-1", "")
	d.Epoch = 2000
	d.HostedQueues[0] = []meta.LogicQueueMappingItem{staticItem(0, 0, 0, 0, 2), staticItem(1, 1, 10, 0, -1)}
	if r := updateStatic(t, mc, 2, d); r.Code != remoting.Success {
		t.Fatalf("move: %d %s", r.Code, r.Remark)
	}
	mustSend(t, mc, topic, 0, "new", "")
	master.caughtUp()
	ensureGroup(t, mc, "g")
	commit(t, mc, "g", topic, 0, 11)

	slave := startSlaveOf(t, master, map[string]string{"brokerName": "broker-a", "slaveReadEnable": "true"})
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master)
	sc := slave.client(nil)

	pull := func(offset int64) *remoting.Command {
		t.Helper()
		return call(t, sc, remoting.PullMessage, pullReq("g", topic, 0, offset, 0, 0, "*"), nil)
	}
	r := pull(0)
	if r.Code != remoting.Success || len(decodeRecords(t, r.Body)) != 2 || header(t, r, "nextBeginOffset") != 2 {
		t.Fatalf("slave pull from logic 0: %d %s %v", r.Code, r.Remark, r.ExtFields)
	}
	if r = pull(2); r.Code != remoting.PullRetryImmediately || header(t, r, "nextBeginOffset") != 10 {
		t.Fatalf("slave pull at the old item's end: %d %s %v, want PULL_RETRY_IMMEDIATELY to 10", r.Code, r.Remark, r.ExtFields)
	}
	r = pull(10)
	msgs := decodeRecords(t, r.Body)
	if r.Code != remoting.Success || len(msgs) != 1 || string(msgs[0].Body) != "new" || msgs[0].QueueOffset+header(t, r, "offsetDelta") != 10 {
		t.Fatalf("slave pull from logic 10: %d %s %d messages %v", r.Code, r.Remark, len(msgs), r.ExtFields)
	}
	for _, q := range []struct {
		code int32
		want int64
	}{{remoting.GetMaxOffset, 11}, {remoting.GetMinOffset, 0}} {
		r := call(t, sc, q.code, map[string]string{"topic": topic, "queueId": "0"}, nil)
		if r.Code != remoting.Success || header(t, r, "offset") != q.want {
			t.Fatalf("slave's request %d of logic 0: %d %s %v, want %d", q.code, r.Code, r.Remark, r.ExtFields, q.want)
		}
	}
	if got := committedOffset(t, sc, "g", topic, 0); got != 11 {
		t.Fatalf("the slave's logic offset of g: %d, want 11 (physical 1 of queue 1, copied from the master)", got)
	}
	// A queue the group does not lead is refused on the slave as on the
	// master.
	if r := call(t, sc, remoting.PullMessage, pullReq("g", topic, 1, 0, 0, 0, "*"), nil); r.Code != remoting.NotLeaderForQueue {
		t.Fatalf("slave pull of an unmapped logic queue: %d %s, want NOT_LEADER_FOR_QUEUE", r.Code, r.Remark)
	}
}
