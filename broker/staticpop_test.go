package broker

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// POP on a static topic is served on its physical queues, as RocketMQ
// 5.3.4 serves it: none of its POP_MESSAGE, ACK_MESSAGE,
// BATCH_ACK_MESSAGE or CHANGE_MESSAGE_INVISIBLETIME processors builds a
// TopicQueueMappingContext, and its static topic design lists POP on
// logic queues as not supported. A pop's queueId (lo=true or not) names a
// physical queue, its messages carry physical queue ids and offsets (no
// offsetDelta), acks name physical queues, and what a pop commits is the
// physical offset a pull consumer's logic commit is stored as: a pull
// consumer reads a pop's progress in logic offsets, and a group's first
// pop of a queue starts from a pull consumer's logic commit.
// QUERY_ASSIGNMENT, which hands POP consumers their queues, assigns the
// physical queues as well.
func TestStaticTopicPopServesPhysicalQueues(t *testing.T) {
	tb := startTestBroker(t, map[string]string{"brokerName": "broker-a"})
	c, rc := popClient(tb)
	const topic = "static-pop"

	// Logic 0 on physical 0, then moved to physical 1 from logic offset
	// 10 on; logic 1 on physical 2.
	d := meta.NewTopicQueueMappingDetail(topic, 2, "broker-a", 1000)
	d.HostedQueues[0] = []meta.LogicQueueMappingItem{staticItem(0, 0, 0, 0, -1)}
	d.HostedQueues[1] = []meta.LogicQueueMappingItem{staticItem(0, 2, 0, 0, -1)}
	if r := updateStatic(t, rc, 3, d); r.Code != remoting.Success {
		t.Fatalf("create static topic: %d %s", r.Code, r.Remark)
	}
	mustSend(t, rc, topic, 0, "old-0", "")
	mustSend(t, rc, topic, 0, "old-1", "")
	d.Epoch = 2000
	d.HostedQueues[0] = []meta.LogicQueueMappingItem{staticItem(0, 0, 0, 0, 2), staticItem(1, 1, 10, 0, -1)}
	if r := updateStatic(t, rc, 3, d); r.Code != remoting.Success {
		t.Fatalf("move logic queue 0: %d %s", r.Code, r.Remark)
	}
	if r := mustSend(t, rc, topic, 0, "new", ""); header(t, r, "queueOffset") != 10 {
		t.Fatalf("send after the move answered logic offset %s, want 10", r.ExtFields["queueOffset"])
	}
	mustSend(t, rc, topic, 1, "one", "")
	tb.caughtUp()

	// QUERY_ASSIGNMENT assigns the physical queues too (RocketMQ's
	// broker drops the route's mapping for its subscribe info): three
	// queues, not the two logic ones.
	if a := queryAssignment(t, rc, topic, "g", "c1"); len(a) != 3 {
		t.Fatalf("assignment of the static topic: %+v, want its 3 physical queues", a)
	}

	// A pop of every queue reads the physical ones.
	res := mustPop(t, c, popclient.PopRequest{Group: "g", Topic: topic, QueueID: -1, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if res.Code != remoting.Success {
		t.Fatalf("pop of every queue: %d %s", res.Code, res.Remark)
	}
	type at struct {
		body  string
		queue int32
		off   int64
	}
	var got []at
	for _, m := range res.Messages {
		got = append(got, at{string(m.Body), m.QueueID, m.QueueOffset})
		if m.Handle.QueueID != m.QueueID {
			t.Fatalf("message %q: its handle names queue %d, the message queue %d", m.Body, m.Handle.QueueID, m.QueueID)
		}
	}
	slices.SortFunc(got, func(a, b at) int { return int(a.queue-b.queue)*100 + int(a.off-b.off) })
	want := []at{{"old-0", 0, 0}, {"old-1", 0, 1}, {"new", 1, 0}, {"one", 2, 0}}
	if !slices.Equal(got, want) {
		t.Fatalf("popped %v, want the physical queues and offsets %v", got, want)
	}
	if _, ok := res.Header["offsetDelta"]; ok {
		t.Fatal("a pop answered an offsetDelta")
	}
	byBody := map[string]popclient.Message{}
	for _, m := range res.Messages {
		byBody[string(m.Body)] = m
	}

	// Acks, a batch ack and a change of invisible time name physical
	// queues and offsets.
	if code, err := c.Ack(ctx20(t), "g", byBody["new"]); err != nil || code != remoting.Success {
		t.Fatalf("ack of the message on physical queue 1: %d %v", code, err)
	}
	if code, err := c.BatchAck(ctx20(t), "g", topic, []popclient.Message{byBody["old-0"], byBody["old-1"]}); err != nil || code != remoting.Success {
		t.Fatalf("batch ack of physical queue 0: %d %v", code, err)
	}
	if code, _, err := c.ChangeInvisibleTime(ctx20(t), "g", byBody["one"], time.Hour); err != nil || code != remoting.Success {
		t.Fatalf("change of invisible time on physical queue 2: %d %v", code, err)
	}
	if got := storedOffset(t, tb, "g", topic, 1); got != 1 {
		t.Fatalf("physical queue 1 committed %d after its ack, want 1", got)
	}
	if got := storedOffset(t, tb, "g", topic, 0); got != 2 {
		t.Fatalf("physical queue 0 committed %d after its batch ack, want 2", got)
	}
	// A pull consumer of the group reads the pop's progress in logic
	// offsets: physical 1 of queue 1 is logic 11 of logic queue 0.
	if got := committedOffset(t, rc, "g", topic, 0); got != 11 {
		t.Fatalf("logic queue 0's offset after the pop's ack: %d, want 11", got)
	}

	// A logic commit is stored physically, and a pop of a group that has
	// not popped the queue starts from it.
	mustSend(t, rc, topic, 0, "after", "")
	mustSend(t, rc, topic, 0, "last", "")
	tb.caughtUp()
	ensureGroup(t, rc, "g3")
	commit(t, rc, "g3", topic, 0, 12)
	res = mustPop(t, c, popclient.PopRequest{Group: "g3", Topic: topic, QueueID: 1, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if b := bodies(res.Messages); res.Code != remoting.Success || len(b) != 1 || b[0] != "last" || res.Messages[0].QueueOffset != 2 {
		t.Fatalf("pop of physical queue 1 after the logic commit of 12: %d %s %v", res.Code, res.Remark, b)
	}

	// A queue id names a physical queue whatever lo says: 2 is logic 1's
	// physical queue, not logic queue 2 (which the topic does not have).
	resp := call(t, rc, remoting.PopMessage, map[string]string{
		"consumerGroup": "g2", "topic": topic, "queueId": "2", "maxMsgNums": "32", "invisibleTime": "60000",
		"pollTime": "0", "bornTime": strconv.FormatInt(time.Now().UnixMilli(), 10), "initMode": "0", "order": "false", "lo": "true",
	}, nil)
	if resp.Code != remoting.Success || len(decodeRecords(t, resp.Body)) != 1 || string(decodeRecords(t, resp.Body)[0].Body) != "one" {
		t.Fatalf("pop of queue 2 with lo=true: %d %s", resp.Code, resp.Remark)
	}
}
