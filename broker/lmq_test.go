package broker

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

// lmqProps is a message's properties naming light message queues.
func lmqProps(names string) string {
	return commitlog.PropertyMultiDispatch + "\x01" + names + "\x02"
}

// Under enableLmq and enableMultiDispatch a message sent to a topic is also
// read from each light message queue its INNER_MULTI_DISPATCH names, as a
// topic of its own with one queue and no config, by a group without a
// config, whose offsets are kept; long polling on one is woken by the
// dispatch; the record carries its offset in each (INNER_MULTI_QUEUE_OFFSET);
// and all of it survives a restart.
func TestLightMessageQueues(t *testing.T) {
	store := t.TempDir()
	set := map[string]string{"enableLmq": "true", "enableMultiDispatch": "true"}
	b := startTestBrokerAt(t, store, set)
	c := b.client(nil)
	createTopic(t, c, "Parent", 2, 2)
	for i, body := range []string{"m0", "m1", "m2"} {
		mustSend(t, c, "Parent", int32(i%2), body, lmqProps("%LMQ%dev1,NotLMQ,%LMQ%dev2"))
	}
	mustSend(t, c, "Parent", 0, "only-dev2", lmqProps("%LMQ%dev2"))
	b.caughtUp()
	pull := func(c *remoting.Client, topic string, offset int64, suspend time.Duration) (*remoting.Command, []commitlog.Message) {
		t.Helper()
		flag := 0
		if suspend > 0 {
			flag = pullSuspend
		}
		r := call(t, c, remoting.PullMessage, pullReq("%LMQ%g1", topic, 0, offset, flag, suspend, "*"), nil)
		if r.Code != remoting.Success {
			return r, nil
		}
		return r, decodeRecords(t, r.Body)
	}
	bodies := func(ms []commitlog.Message) string {
		var out []string
		for _, m := range ms {
			out = append(out, string(m.Body))
		}
		return strings.Join(out, " ")
	}
	r, ms := pull(c, "%LMQ%dev1", 0, 0)
	if got := bodies(ms); r.Code != remoting.Success || got != "m0 m1 m2" {
		t.Fatalf("pull of %%LMQ%%dev1: %d %q, want m0 m1 m2", r.Code, got)
	}
	for i, m := range ms {
		if v, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyMultiQueueOffset); v != fmt.Sprintf("%d,,%d", i, i) {
			t.Errorf("record %d: %s = %q", i, commitlog.PropertyMultiQueueOffset, v)
		}
	}
	if _, ms := pull(c, "%LMQ%dev2", 0, 0); bodies(ms) != "m0 m1 m2 only-dev2" {
		t.Fatalf("pull of %%LMQ%%dev2: %q", bodies(ms))
	}
	// A light message queue's name becomes an index key and, in
	// double-write, a directory: one with a '/' or past 255 bytes is
	// refused.
	for _, bad := range []string{"%LMQ%a/../../x", "%LMQ%" + strings.Repeat("x", 251)} {
		if r := sendV2(t, c, "Parent", 0, "bad", lmqProps("%LMQ%dev1,"+bad)); r.Code != remoting.MessageIllegal || !strings.Contains(r.Remark, "light message queue") {
			t.Errorf("send naming light message queue %q: %d %s", bad, r.Code, r.Remark)
		}
	}
	if r, _ := pull(c, "NotLMQ", 0, 0); r.Code != remoting.TopicNotExist {
		t.Errorf("pull of a name that is no light message queue: %d %s", r.Code, r.Remark)
	}
	// The light message queue's group commits and reads its offset, with
	// no config of its own; creating one (or the queue's topic) is
	// answered and dropped.
	if r := call(t, c, remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": "%LMQ%g1", "topic": "%LMQ%dev1", "queueId": "0", "commitOffset": "2"}, nil); r.Code != remoting.Success {
		t.Fatalf("commit of %%LMQ%%g1: %d %s", r.Code, r.Remark)
	}
	if r := call(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"%LMQ%g1","retryMaxTimes":3}`)); r.Code != remoting.Success {
		t.Fatalf("create %%LMQ%%g1: %d %s", r.Code, r.Remark)
	}
	createTopic(t, c, "%LMQ%dev1", 8, 8)
	if off := committedOffset(t, c, "%LMQ%g1", "%LMQ%dev1", 0); off != 2 {
		t.Fatalf("committed offset of %%LMQ%%g1 on %%LMQ%%dev1: %d", off)
	}
	if r := call(t, c, remoting.GetMaxOffset, map[string]string{"topic": "%LMQ%dev2", "queueId": "0"}, nil); r.Code != remoting.Success || r.ExtFields["offset"] != "4" {
		t.Errorf("max offset of %%LMQ%%dev2: %d %v", r.Code, r.ExtFields)
	}
	// A held pull of a light message queue is woken by the dispatch.
	done := make(chan string, 1)
	go func() {
		c2 := b.client(nil)
		_, ms := pull(c2, "%LMQ%dev1", 3, 10*time.Second)
		done <- bodies(ms)
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	mustSend(t, c, "Parent", 1, "late", lmqProps("%LMQ%dev1"))
	select {
	case got := <-done:
		if got != "late" || time.Since(start) > 5*time.Second {
			t.Fatalf("held pull of %%LMQ%%dev1 answered %q after %v", got, time.Since(start))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("held pull of a light message queue never woken")
	}
	// No config was stored for either.
	if _, ok, _ := b.topics.table.Get("%LMQ%dev1"); ok {
		t.Error("a topic config was stored for a light message queue")
	}
	if _, ok, _ := b.groups.Get("%LMQ%g1"); ok {
		t.Error("a group config was stored for a light message queue's group")
	}
	// After a restart the queues and offsets are there, and numbering
	// goes on.
	b.stop()
	b = startTestBrokerAt(t, store, set)
	c = b.client(nil)
	mustSend(t, c, "Parent", 0, "after", lmqProps("%LMQ%dev1"))
	b.caughtUp()
	if _, ms := pull(c, "%LMQ%dev1", 0, 0); bodies(ms) != "m0 m1 m2 late after" {
		t.Fatalf("pull of %%LMQ%%dev1 after a restart: %q", bodies(ms))
	}
	if off := committedOffset(t, c, "%LMQ%g1", "%LMQ%dev1", 0); off != 2 {
		t.Fatalf("committed offset after a restart: %d", off)
	}
}

// Without enableLmq the property is stored as sent and nothing else
// happens: the light message queue does not exist.
func TestLightMessageQueuesOff(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enableMultiDispatch": "true"})
	c := b.client(nil)
	mustSend(t, c, "Parent", 0, "m0", lmqProps("%LMQ%dev1"))
	b.caughtUp()
	r := call(t, c, remoting.PullMessage, pullReq("g", "%LMQ%dev1", 0, 0, 0, 0, "*"), nil)
	if r.Code != remoting.TopicNotExist {
		t.Fatalf("pull of a light message queue with enableLmq off: %d %s", r.Code, r.Remark)
	}
	r = call(t, c, remoting.PullMessage, pullReq("g", "Parent", 0, 0, 0, 0, "*"), nil)
	ms := decodeRecords(t, r.Body)
	if len(ms) != 1 {
		t.Fatalf("pull of Parent: %d %d records", r.Code, len(ms))
	}
	if _, ok := commitlog.LookupProperty(ms[0].Properties, commitlog.PropertyMultiQueueOffset); ok {
		t.Errorf("offsets written with enableLmq off: %q", ms[0].Properties)
	}
}

// POP from a light message queue: the broker pops the queue's entries and
// acks them at their offsets in it (which the client reads from
// INNER_MULTI_QUEUE_OFFSET, as the Java client does), not at the parent
// topic's.
func TestPopLightMessageQueue(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enableLmq": "true", "enableMultiDispatch": "true"})
	c := b.client(nil)
	// Parent/0 offsets 0..3; %LMQ%p1 gets the last two at 0 and 1.
	mustSend(t, c, "Parent", 0, "x0", "")
	mustSend(t, c, "Parent", 0, "x1", lmqProps("%LMQ%other"))
	mustSend(t, c, "Parent", 0, "m0", lmqProps("%LMQ%other,%LMQ%p1"))
	mustSend(t, c, "Parent", 0, "m1", lmqProps("%LMQ%p1"))
	b.caughtUp()
	pc, _ := popClient(b)
	req := popclient.PopRequest{Group: "%LMQ%pg", Topic: "%LMQ%p1", QueueID: -1, MaxMsgNums: 8, InvisibleTime: time.Second}
	res := mustPop(t, pc, req)
	if res.Code != remoting.Success || bodiesOf(res.Messages) != "m0 m1" {
		t.Fatalf("pop of %%LMQ%%p1: %d %q", res.Code, bodiesOf(res.Messages))
	}
	for i, m := range res.Messages {
		if m.Handle.QueueID != 0 || m.Handle.QueueOffset != int64(i) {
			t.Fatalf("handle of %s: queue %d offset %d, want 0 and %d", m.Body, m.Handle.QueueID, m.Handle.QueueOffset, i)
		}
		if code, err := pc.Ack(ctx20(t), "%LMQ%pg", m); err != nil || code != remoting.Success {
			t.Fatalf("ack of %s: %d %v", m.Body, code, err)
		}
	}
	if off := committedOffset(t, c, "%LMQ%pg", "%LMQ%p1", 0); off != 2 {
		t.Fatalf("committed offset after the acks: %d, want 2", off)
	}
	// Acked: nothing comes back after the invisible time.
	time.Sleep(1500 * time.Millisecond)
	req.PollTime = 200 * time.Millisecond
	if res := mustPop(t, pc, req); len(res.Messages) != 0 {
		t.Fatalf("acked messages popped again: %q", bodiesOf(res.Messages))
	}
}

// QUERY_ASSIGNMENT of a light message queue (a Java push consumer with
// server-side rebalance, RocketMQ's LMQPushPopConsumer example) answers its
// one queue on this broker.
func TestQueryAssignmentLightMessageQueue(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enableLmq": "true", "enableMultiDispatch": "true"})
	c := b.client(nil)
	if a := queryAssignment(t, c, "%LMQ%q", "%LMQ%g", "c1"); len(a) != 1 || a[0].MessageQueue.Topic != "%LMQ%q" || a[0].MessageQueue.QueueID != 0 || a[0].MessageQueue.BrokerName != b.cfg.BrokerName {
		t.Fatalf("assignment of a light message queue: %+v", a)
	}
}

func bodiesOf(ms []popclient.Message) string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Body))
	}
	return strings.Join(out, " ")
}

// A delayed or timer message naming a light message queue that is no
// valid topic name is refused at its send, as any send naming one: parked,
// it was accepted and then dropped when it fell due, lost from its own
// topic too. One parked before the check (a RocketMQ store, which takes
// any name, may hold one) is delivered to its topic and to the valid
// light message queues it names, the invalid one skipped.
func TestParkedMessagesNamingAnInvalidLMQ(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enableLmq": "true", "enableMultiDispatch": "true"})
	c := b.client(nil)
	createTopic(t, c, "Parent", 1, 1)
	const bad = "%LMQ%home/temp"
	for _, parked := range []string{"DELAY\x011\x02", "TIMER_DELAY_SEC\x011\x02"} {
		r := sendV2(t, c, "Parent", 0, "refused", lmqProps(bad)+parked)
		if r.Code != remoting.MessageIllegal || !strings.Contains(r.Remark, "light message queue") {
			t.Errorf("send of a message parked by %q naming %s: %d %q, want MESSAGE_ILLEGAL naming the light message queue", parked, bad, r.Code, r.Remark)
		}
	}

	m := &commitlog.Message{Topic: "Parent", BornTimestamp: time.Now().UnixMilli(), Body: []byte("parked"),
		BornHost:   netip.MustParseAddrPort("127.0.0.1:1"),
		Properties: lmqProps("%LMQ%ok,"+bad) + "UNIQ_KEY\x01PARKED-1\x02"}
	b.toSchedule(m, 1)
	if _, err := b.putMessages(context.Background(), []*commitlog.Message{m}, false); err != nil {
		t.Fatal(err)
	}
	got := waitDelivered(t, b, c, "Parent", 0, 1)
	if len(got) != 1 || string(got[0].Body) != "parked" {
		t.Fatalf("Parent/0 after the delivery: %d messages, want the parked one", len(got))
	}
	if ms := pullAll(t, b, c, "%LMQ%ok", 0); len(ms) != 1 || string(ms[0].Body) != "parked" {
		t.Fatalf("%%LMQ%%ok after the delivery: %d messages, want the parked one", len(ms))
	}
}

// A SEND_BATCH_MESSAGE's messages are not dispatched to the light message
// queues they name, one alone as two: RocketMQ's batch put gives them no
// INNER_MULTI_QUEUE_OFFSET, and its dispatcher needs it. A one-message
// batch went the single send's way.
func TestABatchIsNotDispatchedToLightMessageQueues(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enableLmq": "true", "enableMultiDispatch": "true"})
	c := b.client(nil)
	createTopic(t, c, "Parent", 1, 1)
	mustSendBatch(t, c, "Parent", []batchItem{{body: "alone", props: lmqProps("%LMQ%batch")}})
	mustSendBatch(t, c, "Parent", []batchItem{{body: "one", props: lmqProps("%LMQ%batch")}, {body: "two", props: lmqProps("%LMQ%batch")}})
	mustSend(t, c, "Parent", 0, "single", lmqProps("%LMQ%batch"))
	b.caughtUp()
	if got := pullAll(t, b, c, "Parent", 0); len(got) != 4 {
		t.Fatalf("Parent/0 holds %d messages, want the 4 sent", len(got))
	}
	got := pullAll(t, b, c, "%LMQ%batch", 0)
	if len(got) != 1 || string(got[0].Body) != "single" {
		var bodies []string
		for _, m := range got {
			bodies = append(bodies, string(m.Body))
		}
		t.Fatalf("%%LMQ%%batch holds %q, want only the single send's message", bodies)
	}
}

// A light message queue is named as RocketMQ's MQTT bridge names them,
// after the MQTT topic with '%' for '/' and every other character kept:
// messages are dispatched to "%LMQ%home%room.1:temp" and read from it,
// stored without WAIT as RocketMQ's LMQ dispatch stores them.
func TestLightMessageQueuesNamedAfterMQTTTopics(t *testing.T) {
	b := startTestBroker(t, map[string]string{"enableLmq": "true", "enableMultiDispatch": "true"})
	c := b.client(nil)
	createTopic(t, c, "Parent", 1, 1)
	const lmq = "%LMQ%home%room.1:temp+" + "\u00e9t\u00e9"
	mustSend(t, c, "Parent", 0, "reading", lmqProps(lmq)+"WAIT\x01true\x02")
	b.caughtUp()
	got := pullAll(t, b, c, lmq, 0)
	if len(got) != 1 || string(got[0].Body) != "reading" {
		t.Fatalf("%s holds %d messages, want the one sent", lmq, len(got))
	}
	if v, ok := commitlog.LookupProperty(got[0].Properties, "WAIT"); ok {
		t.Errorf("the dispatched message kept WAIT=%s", v)
	}
}
