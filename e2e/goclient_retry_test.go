package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// fastDelayLevels shortens the broker's delay levels so that retries come
// back within seconds: level 3 (the first retry) is 2 s, level 4 (the
// second) 3 s.
const fastDelayLevels = "messageDelayLevel=1s 1s 2s 3s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"

// delivery is one delivery of a message to a consumer callback.
type delivery struct {
	at             time.Time
	topic          string
	reconsumeTimes int32
	retryTopic     string
	msgID          string
}

// deliveryLog records the deliveries of each body.
type deliveryLog struct {
	mu sync.Mutex
	by map[string][]delivery
}

func newDeliveryLog() *deliveryLog { return &deliveryLog{by: map[string][]delivery{}} }

func (l *deliveryLog) add(m *primitive.MessageExt) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	body := string(m.Body)
	l.by[body] = append(l.by[body], delivery{time.Now(), m.Topic, m.ReconsumeTimes,
		m.GetProperty(primitive.PropertyRetryTopic), m.MsgId})
	return len(l.by[body])
}

func (l *deliveryLog) get(body string) []delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]delivery(nil), l.by[body]...)
}

// readAll pulls every message of queue 0 … queues-1 of topic from a broker
// with a pull consumer.
func readAll(t testing.TB, ns, broker, brokerName, group, topic string, queues int) []*primitive.MessageExt {
	t.Helper()
	pc := startPullConsumer(t, ns, group, topic, consumer.MessageSelector{})
	var out []*primitive.MessageExt
	for q := 0; q < queues; q++ {
		mq := &primitive.MessageQueue{Topic: topic, BrokerName: brokerName, QueueId: q}
		max := maxOffset(t, broker, topic, q)
		for next := int64(0); next < max; {
			res, err := pc.PullFrom(context.Background(), mq, next, 32)
			if err != nil {
				t.Fatalf("pull %s/%d@%d: %v", topic, q, next, err)
			}
			if res.Status != primitive.PullFound {
				t.Fatalf("pull %s/%d@%d below max %d: status %d", topic, q, next, max, res.Status)
			}
			out = append(out, res.GetMessageExts()...)
			next = res.NextBeginOffset
		}
	}
	return out
}

// TestNamespaceSendConsumeRetry: a producer and a push consumer with a
// namespace work on the broker's "ns%topic" and "ns%group": the messages
// land in the namespaced topic, the broker lists the consumer under the
// namespaced group and commits its offsets there, and a message the
// consumer asks to retry comes back through "%RETRY%ns%group" with the
// topic it was consumed from and a reconsume count of 1.
func TestNamespaceSendConsumeRetry(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{fastDelayLevels}})
	const space, topic, group, n = "e2ens", "E2ENsTopic", "cg-ns", 8
	full, fullGroup := space+"%"+topic, space+"%"+group
	createTopic(t, b.addr, full, 2)
	waitRoute(t, ns.addr, full, b.name)
	createTopic(t, b.addr, "%RETRY%"+fullGroup, 1)
	waitRoute(t, ns.addr, "%RETRY%"+fullGroup, b.name)

	p := newProducer(t, ns.addr, "pg-ns", producer.WithNamespace(space))
	for i := 0; i < n; i++ {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("ns-%d", i))))
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if res.Status != primitive.SendOK {
			t.Fatalf("send %d: %v", i, res)
		}
	}
	waitDispatched(t, b.addr, full, 2, n)

	log := newDeliveryLog()
	retried := newCollector()
	startPushConsumerFunc(t, ns.addr, group, topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			result := consumer.ConsumeSuccess
			for _, m := range msgs {
				log.add(m)
				if m.ReconsumeTimes == 0 {
					result = consumer.ConsumeRetryLater
				} else {
					retried.add(string(m.Body))
				}
			}
			return result, nil
		},
		consumer.WithNamespace(space),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if ids := consumerIDs(t, b.addr, fullGroup); len(ids) != 1 {
		t.Errorf("broker lists %v as consumers of %s, want one", ids, fullGroup)
	}
	retried.waitDistinct(t, n, 60*time.Second)
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("ns-%d", i)
		d := log.get(body)
		if len(d) < 2 || d[0].reconsumeTimes != 0 || d[1].reconsumeTimes != 1 {
			t.Errorf("%s: deliveries %+v, want reconsume times 0 then 1", body, d)
			continue
		}
		if d[1].topic != d[0].topic || !strings.HasSuffix(d[0].topic, topic) {
			t.Errorf("%s: first delivered with topic %q, retried with %q", body, d[0].topic, d[1].topic)
		}
		if d[1].retryTopic != full {
			t.Errorf("%s: retried with RETRY_TOPIC %q, want %q", body, d[1].retryTopic, full)
		}
	}
	if got := topicTotal(t, b.addr, "%RETRY%"+fullGroup, 1); got != n {
		t.Errorf("%%RETRY%%%s holds %d messages, want %d", fullGroup, got, n)
	}
	waitCommitted(t, b.addr, fullGroup, full, 2, 20*time.Second)
}

// TestRetryToDLQ: a push consumer with WithMaxReconsumeTimes(2) that
// always answers "retry later" gets each message three times (reconsume
// times 0, 1, 2), the retries no sooner than delay levels 3 and 4 after
// the previous delivery; then the broker moves it to %DLQ%group, where it
// keeps its body, keys, original topic (RETRY_TOPIC), original message id
// and a reconsume count of 3.
func TestRetryToDLQ(t *testing.T) {
	t.Parallel()
	testRetryToDLQ(t, "E2EDlq", "cg-dlq", false)
}

// TestRetryToDLQWhenSendBackFails: as TestRetryToDLQ, but each send-back
// names a commit log offset the broker does not hold, so the broker
// refuses CONSUMER_SEND_MSG_BACK and the Go client falls back to sending
// the message itself to %RETRY%group (SEND_MESSAGE with reconsume times and
// max reconsume times, delay level 3 + reconsume times). The broker must
// treat those sends as RocketMQ does: delay them, and move the message to
// the DLQ once its reconsume times exceed the maximum.
func TestRetryToDLQWhenSendBackFails(t *testing.T) {
	t.Parallel()
	testRetryToDLQ(t, "E2EDlqFallback", "cg-dlq-fallback", true)
}

func testRetryToDLQ(t *testing.T, topic, group string, breakSendBack bool) {
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{fastDelayLevels}})
	const n, maxTimes = 4, 2
	createTopic(t, b.addr, topic, 2)
	waitRoute(t, ns.addr, topic, b.name)
	createTopic(t, b.addr, "%RETRY%"+group, 1)
	waitRoute(t, ns.addr, "%RETRY%"+group, b.name)

	p := newProducer(t, ns.addr, "pg-"+group)
	// body -> the ORIGIN_MESSAGE_ID the DLQ copy must carry: RocketMQ's
	// send-back copies the id of the message it looked up by offset, a
	// MessageExt whose id is the offset message id; the Go client's own
	// fallback send uses the message's (client-made) id.
	sent := map[string]string{}
	for i := 0; i < n; i++ {
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("%s-%d", group, i)))
		m.WithKeys([]string{fmt.Sprintf("k-%s-%d", group, i)})
		m.WithTag("TagD")
		res, err := p.SendSync(context.Background(), m)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		sent[string(m.Body)] = res.OffsetMsgID
		if breakSendBack {
			sent[string(m.Body)] = res.MsgID
		}
	}

	log := newDeliveryLog()
	last := newCollector()
	startPushConsumerFunc(t, ns.addr, group, topic, consumer.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				if log.add(m) == maxTimes+1 {
					last.add(string(m.Body))
				}
				if breakSendBack {
					m.CommitLogOffset = 1 << 40
				}
			}
			return consumer.ConsumeRetryLater, nil
		},
		consumer.WithMaxReconsumeTimes(maxTimes),
		consumer.WithConsumeMessageBatchMaxSize(1),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	last.waitDistinct(t, n, 60*time.Second)

	// The DLQ (one queue) fills as the last send-backs arrive.
	dlq := "%DLQ%" + group
	waitUntil(t, 30*time.Second, "the DLQ holds every message", func() bool {
		r, err := rawInvoke(b.addr, codeGetMaxOffset, map[string]string{"topic": dlq, "queueId": "0"}, nil)
		return err == nil && r.Code == respSuccess && r.ExtFields["offset"] == fmt.Sprint(n)
	})
	// No fourth delivery: the message is in the DLQ, not retried again.
	time.Sleep(4 * time.Second)
	wantDelay := []time.Duration{0, 2 * time.Second, 3 * time.Second}
	for body := range sent {
		d := log.get(body)
		if len(d) != maxTimes+1 {
			t.Errorf("%s delivered %d times, want %d", body, len(d), maxTimes+1)
		}
		for i := range d {
			if d[i].reconsumeTimes != int32(i) {
				t.Errorf("%s: delivery %d has reconsume times %d", body, i, d[i].reconsumeTimes)
			}
			if d[i].topic != topic {
				t.Errorf("%s: delivery %d has topic %q", body, i, d[i].topic)
			}
			if i > 0 && i < len(wantDelay) {
				if gap := d[i].at.Sub(d[i-1].at); gap < wantDelay[i]-200*time.Millisecond {
					t.Errorf("%s: retry %d came %v after the previous delivery, want at least %v", body, i, gap, wantDelay[i])
				}
			}
		}
	}

	waitRoute(t, ns.addr, dlq, b.name)
	msgs := readAll(t, ns.addr, b.addr, b.name, "cg-dlq-reader-"+group, dlq, 1)
	got := map[string]bool{}
	for _, m := range msgs {
		body := string(m.Body)
		got[body] = true
		id, ok := sent[body]
		if !ok {
			t.Errorf("DLQ holds unexpected %q", body)
			continue
		}
		checks := []struct{ what, got, want string }{
			{"RETRY_TOPIC", m.GetProperty(primitive.PropertyRetryTopic), topic},
			{"ORIGIN_MESSAGE_ID", m.GetProperty(primitive.PropertyOriginMessageId), id},
			{"keys", m.GetKeys(), strings.Replace(body, group, "k-"+group, 1)},
			{"tag", m.GetTags(), "TagD"},
			{"reconsume times", fmt.Sprint(m.ReconsumeTimes), fmt.Sprint(maxTimes + 1)},
			{"topic", m.Topic, dlq},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("DLQ %s: %s is %q, want %q", body, c.what, c.got, c.want)
			}
		}
	}
	if len(got) != n || len(msgs) != n {
		var bodies []string
		for _, m := range msgs {
			bodies = append(bodies, string(m.Body))
		}
		sort.Strings(bodies)
		t.Errorf("DLQ holds %v, want each of the %d messages once", bodies, n)
	}
}
