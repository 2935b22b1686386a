package broker

import (
	"context"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
)

// RocketMQ's BrokerController.handleRegisterBrokerResult hands the
// ORDER_TOPIC_CONFIG table of the first name server that accepted the
// registration to TopicConfigManager.updateOrderTopicConfig: each topic of
// the table the broker has and that is not ordered becomes order=true, and
// when one did the data version moves on once and the table is persisted.
// Topics outside the table keep their flag (none is set back to false),
// and a topic of the table the broker lacks is not created.
func TestRegistrationAppliesTheNameServersOrderTopics(t *testing.T) {
	ns := startTestNameServer(t)
	for _, topic := range []string{"OrdA", "OrdB", "OrdAlready", "OrdMissing"} {
		if err := ns.KV().Put(namesrv.OrderTopicConfigNamespace, topic, "broker-a:4"); err != nil {
			t.Fatal(err)
		}
	}
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String()})
	waitFor(t, "the broker registered", func() bool { return len(ns.Registry().ClusterInfo().BrokerAddrTable) == 1 })

	already := meta.NewTopicConfig("OrdAlready", 4)
	already.Order = true
	outside := meta.NewTopicConfig("OrderedOutside", 4)
	outside.Order = true
	cfgs := []meta.TopicConfig{meta.NewTopicConfig("OrdA", 4), meta.NewTopicConfig("OrdB", 4), already, outside,
		meta.NewTopicConfig("PlainOutside", 4)}
	// Stored without the trigger of topicManager.put: the registration
	// below is the only one that can see them.
	if err := tb.topics.table.Put(cfgs...); err != nil {
		t.Fatal(err)
	}
	before := tb.topics.table.Version()
	registerNow(t, tb)

	want := map[string]bool{"OrdA": true, "OrdB": true, "OrdAlready": true, "OrderedOutside": true, "PlainOutside": false}
	for topic, order := range want {
		tc, ok, err := tb.topics.table.Get(topic)
		if err != nil || !ok || tc.Order != order {
			t.Errorf("after a registration answered ORDER_TOPIC_CONFIG: topic %s order=%v (found %v, %v), want order=%v",
				topic, tc.Order, ok, err, order)
		}
	}
	if _, ok, _ := tb.topics.table.Get("OrdMissing"); ok {
		t.Error("a topic of the ORDER_TOPIC_CONFIG table the broker did not have was created")
	}
	after := tb.topics.table.Version()
	if after.Counter != before.Counter+1 {
		t.Errorf("topic data version %d -> %d over one registration that ordered two topics, want one step",
			before.Counter, after.Counter)
	}
	registerNow(t, tb)
	if again := tb.topics.table.Version(); again != after {
		t.Errorf("a registration that changed no topic moved the data version %+v -> %+v", after, again)
	}
}

// registerNow registers tb with its name servers and waits for it.
func registerNow(t *testing.T, tb *testBroker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tb.register.registerAndWait(ctx)
	if ctx.Err() != nil {
		t.Fatal("registration did not end within 10 s")
	}
}
