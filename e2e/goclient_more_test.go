package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestBatchItemsFiltered: the items of a batch carry their own tags and
// properties, and the broker filters each on its own: a tag subscriber
// receives only the items of its tag, an SQL92 subscriber only the items
// whose properties match.
func TestBatchItemsFiltered(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{"enablePropertyFilter=true"}})
	const topic, n = "E2EBatchFilter", 12
	createTopic(t, b.addr, topic, 1)
	waitRoute(t, ns.addr, topic, b.name)
	p := newProducer(t, ns.addr, "pg-batch-filter")
	var batch []*primitive.Message
	wantTag, wantSQL := map[string]bool{}, map[string]bool{}
	for i := 0; i < n; i++ {
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("bf-%d", i)))
		tag := []string{"TagA", "TagB", "TagC"}[i%3]
		m.WithTag(tag)
		m.WithProperty("p", fmt.Sprint(i))
		if tag == "TagA" {
			wantTag[string(m.Body)] = true
		}
		if i > 6 && tag != "TagC" {
			wantSQL[string(m.Body)] = true
		}
		batch = append(batch, m)
	}
	if _, err := p.SendSync(context.Background(), batch...); err != nil {
		t.Fatal(err)
	}
	gotTag, gotSQL := newCollector(), newCollector()
	startPushConsumer(t, ns.addr, "cg-batch-tag", topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA"}, gotTag,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	startPushConsumer(t, ns.addr, "cg-batch-sql", topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: "p > 6 AND TAGS <> 'TagC'"}, gotSQL,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	gotTag.waitDistinct(t, len(wantTag), 30*time.Second)
	gotSQL.waitDistinct(t, len(wantSQL), 30*time.Second)
	time.Sleep(time.Second)
	for what, c := range map[string]struct {
		got  *collector
		want map[string]bool
	}{"tag": {gotTag, wantTag}, "sql": {gotSQL, wantSQL}} {
		snap := c.got.snapshot()
		for body := range snap {
			if !c.want[body] {
				t.Errorf("%s subscriber received %s", what, body)
			}
		}
		for body := range c.want {
			if snap[body] == 0 {
				t.Errorf("%s subscriber did not receive %s", what, body)
			}
		}
	}
}

// TestBodySizeLimit: the broker's maxMessageSize (4 MiB) applies to the
// body as sent: an incompressible 5 MiB body is refused with an error the
// client reports, a compressible 5 MiB body (which the client compresses
// far below the limit) is stored and consumed as sent.
func TestBodySizeLimit(t *testing.T) {
	t.Parallel()
	const topic = "E2EBodySize"
	ns, b := startWithTopic(t, topic, 1)
	p := newProducer(t, ns.addr, "pg-body-size", producer.WithSendMsgTimeout(20*time.Second), producer.WithRetry(0))
	random := make([]byte, 5<<20)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	if res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, random)); err == nil {
		t.Errorf("an incompressible 5 MiB body was accepted: %+v", res)
	} else {
		t.Logf("5 MiB incompressible: %v", err)
	}
	text := bytes.Repeat([]byte("compressible "), (5<<20)/13)
	if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, text)); err != nil {
		t.Fatalf("a compressible 5 MiB body: %v", err)
	}
	got := newCollector()
	var body []byte
	startPushConsumerFunc(t, ns.addr, "cg-body-size", topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				body = append([]byte(nil), m.Body...)
				got.add(fmt.Sprint(len(m.Body)))
			}
			return consumer.ConsumeSuccess, nil
		}, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, 1, 30*time.Second)
	if !bytes.Equal(body, text) {
		t.Errorf("received %d bytes, sent %d", len(body), len(text))
	}
	if total := topicTotal(t, b.addr, topic, 1); total != 1 {
		t.Errorf("topic holds %d messages, want 1", total)
	}
}

// TestPullConsumerOffsets: the pull consumer's offset calls against the
// broker: OffsetForTimestamp finds the first message stored at or after a
// time (and the end of the queue for a time after the last), UpdateOffset
// and PersistOffset commit an offset the broker then holds, and a new pull
// consumer of the group reads it back with CurrentOffset.
func TestPullConsumerOffsets(t *testing.T) {
	t.Parallel()
	const topic, group = "E2EPullOffsets", "cg-pull-offsets"
	ns, b := startWithTopic(t, topic, 1)
	p := newProducer(t, ns.addr, "pg-pull-offsets")
	sendN(t, p, topic, "early-", 5)
	time.Sleep(300 * time.Millisecond)
	mid := time.Now().UnixMilli()
	time.Sleep(300 * time.Millisecond)
	sendN(t, p, topic, "late-", 5)
	waitDispatched(t, b.addr, topic, 1, 10)

	pc := startPullConsumer(t, ns.addr, group, topic, consumer.MessageSelector{})
	mq := &primitive.MessageQueue{Topic: topic, BrokerName: b.name, QueueId: 0}
	for _, c := range []struct {
		ts   int64
		want int64
	}{{mid, 5}, {0, 0}, {time.Now().Add(time.Hour).UnixMilli(), 10}} {
		off, err := pc.OffsetForTimestamp(mq, c.ts)
		if err != nil {
			t.Fatalf("offset for %d: %v", c.ts, err)
		}
		if off != c.want {
			t.Errorf("offset for timestamp %d: %d, want %d", c.ts, off, c.want)
		}
	}
	res, err := pc.PullFrom(context.Background(), mq, 5, 1)
	if err != nil || res.Status != primitive.PullFound || len(res.GetMessageExts()) != 1 || string(res.GetMessageExts()[0].Body) != "late-0" {
		t.Fatalf("pull at the offset found for the timestamp: %v %+v", err, res)
	}
	// The client persists only the queues its rebalance has taken, and a
	// rebalance taking the queue drops the offset held for it; on a
	// loaded machine the first rebalance can come after this update:
	// update and persist again until the broker holds the offset.
	waitUntil(t, 30*time.Second, "the broker holds the persisted offset", func() bool {
		if err := pc.UpdateOffset(mq, 7); err != nil {
			t.Fatal(err)
		}
		if err := pc.PersistOffset(context.Background(), topic); err != nil {
			t.Fatal(err)
		}
		return committedOffset(t, b.addr, group, topic, 0) == 7
	})
	_ = pc.Shutdown()
	pc2 := startPullConsumer(t, ns.addr, group, topic, consumer.MessageSelector{})
	if off, err := pc2.CurrentOffset(mq); err != nil || off != 7 {
		t.Errorf("a new pull consumer of the group reads offset %d (%v), want 7", off, err)
	}
}

// TestNamespaceDLQ: with a namespace, a message that keeps failing lands
// in %DLQ%ns%group.
func TestNamespaceDLQ(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{fastDelayLevels}})
	const space, topic, group = "e2edlq", "E2ENsDlq", "cg-ns-dlq"
	full, fullGroup := space+"%"+topic, space+"%"+group
	createTopic(t, b.addr, full, 1)
	waitRoute(t, ns.addr, full, b.name)
	createTopic(t, b.addr, "%RETRY%"+fullGroup, 1)
	waitRoute(t, ns.addr, "%RETRY%"+fullGroup, b.name)
	p := newProducer(t, ns.addr, "pg-ns-dlq", producer.WithNamespace(space))
	if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("ns-poison"))); err != nil {
		t.Fatal(err)
	}
	log := newDeliveryLog()
	startPushConsumerFunc(t, ns.addr, group, topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				log.add(m)
			}
			return consumer.ConsumeRetryLater, nil
		},
		consumer.WithNamespace(space), consumer.WithMaxReconsumeTimes(1),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	dlq := "%DLQ%" + fullGroup
	waitUntil(t, 30*time.Second, "the message in "+dlq, func() bool {
		r, err := rawInvoke(b.addr, codeGetMaxOffset, map[string]string{"topic": dlq, "queueId": "0"}, nil)
		return err == nil && r.Code == respSuccess && r.ExtFields["offset"] == "1"
	})
	d := log.get("ns-poison")
	if len(d) != 2 {
		t.Errorf("delivered %d times, want 2", len(d))
	}
	for _, x := range d {
		if !strings.HasSuffix(x.topic, topic) {
			t.Errorf("delivered with topic %q", x.topic)
		}
	}
}

// TestAutoCreateTopicQueueNums: a send to a topic nobody created uses the
// route of TBW102 capped at the producer's default topic queue count, and
// the broker creates the topic with the smaller of the count the request
// names and TBW102's write queues (RocketMQ's
// createTopicInSendMessageMethod). The Go client names the count of
// WithDefaultTopicQueueNums only in a batch's header (SEND_BATCH_MESSAGE,
// field "d"); a single message's header always says TBW102 and 4
// (internal/request.go's SendMessageRequestHeader.Encode), so with
// WithDefaultTopicQueueNums(2) a single send creates 4 queues, as it would
// on RocketMQ, while the client writes to the first 2 only.
func TestAutoCreateTopicQueueNums(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{})
	tbw := waitRoute(t, ns.addr, "TBW102", b.name)
	tbwQueues := tbw.QueueDatas[0].WriteQueueNums
	for _, c := range []struct {
		topic string
		batch bool
		want  int
	}{{"E2EAutoSingle", false, min(4, tbwQueues)}, {"E2EAutoBatch", true, min(2, tbwQueues)}} {
		p := newProducer(t, ns.addr, "pg-"+c.topic, producer.WithDefaultTopicQueueNums(2))
		seen := map[int]bool{}
		for i := 0; i < 20; i++ {
			msgs := []*primitive.Message{primitive.NewMessage(c.topic, []byte(fmt.Sprint(i)))}
			if c.batch {
				msgs = append(msgs, primitive.NewMessage(c.topic, []byte(fmt.Sprint(i, "b"))))
			}
			res, err := p.SendSync(context.Background(), msgs...)
			if err != nil {
				t.Fatalf("send to %s: %v", c.topic, err)
			}
			seen[res.MessageQueue.QueueId] = true
		}
		ri := waitRoute(t, ns.addr, c.topic, b.name)
		if q := ri.QueueDatas[0]; q.ReadQueueNums != c.want || q.WriteQueueNums != c.want {
			t.Errorf("%s auto-created with %d/%d queues, want %d (TBW102 has %d)", c.topic, q.ReadQueueNums, q.WriteQueueNums, c.want, tbwQueues)
		}
		for q := range seen {
			if q >= 2 {
				t.Errorf("%s: a message went to queue %d, beyond the client's default topic queue count 2", c.topic, q)
			}
		}
	}
}
