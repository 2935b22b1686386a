package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// newProducer starts a producer. Each gets its own client instance: the Go
// client shares one instance per client id (ip@instance name) in a process
// and refuses a second name server for it, and tests run in parallel
// against different name servers.
func newProducer(t testing.TB, ns string, group string, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	p, err := rocketmq.NewProducer(producerOptions(t, ns, group, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// producerOptions are the options of every test producer of group (a
// fresh instance, two retries, a 5 s send timeout), then opts.
func producerOptions(t testing.TB, ns string, group string, opts ...producer.Option) []producer.Option {
	return append([]producer.Option{
		producer.WithNameServer([]string{ns}),
		producer.WithGroupName(group),
		producer.WithInstanceName(uniqueInstance(t)),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5 * time.Second),
	}, opts...)
}

// TestSyncSendAndPushConsume: the Go client sends with SendSync and a push
// consumer (clustering, concurrently) receives every message.
func TestSyncSendAndPushConsume(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	startBroker(t, ns, brokerOpts{})
	const topic, n = "E2ESync", 50
	p := newProducer(t, ns.addr, "pg-sync")
	for i := 0; i < n; i++ {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("sync-%d", i))))
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if res.Status != primitive.SendOK || len(res.OffsetMsgID) != 32 {
			t.Fatalf("send %d: %+v", i, res)
		}
	}
	got := newCollector()
	startPushConsumer(t, ns.addr, "cg-sync", topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, n, 60*time.Second)
	for i := 0; i < n; i++ {
		if got.snapshot()[fmt.Sprintf("sync-%d", i)] == 0 {
			t.Errorf("message sync-%d not consumed", i)
		}
	}
}

// startPushConsumer starts a push consumer collecting bodies into got. The
// Go client refuses to subscribe before the name server has a route for the
// topic, so it retries while the broker's registration propagates. Options
// given come after the defaults (a unique instance name among them), so
// they override them.
func startPushConsumer(t testing.TB, ns, group, topic string, sel consumer.MessageSelector, got *collector, opts ...consumer.Option) rocketmq.PushConsumer {
	t.Helper()
	return startPushConsumerFunc(t, ns, group, topic, sel, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			got.add(string(m.Body))
		}
		return consumer.ConsumeSuccess, nil
	}, opts...)
}

// startPushConsumerFunc starts a push consumer calling f.
func startPushConsumerFunc(t testing.TB, ns, group, topic string, sel consumer.MessageSelector,
	f func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error), opts ...consumer.Option) rocketmq.PushConsumer {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		// A fresh instance name each try: a client id the failed try
		// registered is not reused.
		all := append([]consumer.Option{consumer.WithNameServer([]string{ns}), consumer.WithGroupName(group),
			consumer.WithInstance(uniqueInstance(t))}, opts...)
		raw, err := rocketmq.NewPushConsumer(all...)
		if err != nil {
			t.Fatal(err)
		}
		c := &safePushConsumer{PushConsumer: raw, subs: subscriptions{group: group}}
		err = c.Subscribe(topic, sel, f)
		if err == nil {
			err = c.Start()
		}
		if err == nil {
			t.Cleanup(func() { _ = c.Shutdown() })
			return c
		}
		_ = raw.Shutdown()
		if time.Now().After(deadline) {
			t.Fatalf("start consumer %s on %s: %v", group, topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
