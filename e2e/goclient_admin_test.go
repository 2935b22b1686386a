package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// newAdmin starts a Go admin client of a name server.
func newAdmin(t testing.TB, ns string) admin.Admin {
	t.Helper()
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{ns})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	return adm
}

// deleteTopic deletes topic from broker and the name server at ns with
// the Go admin client, as mqadmin deleteTopic does.
func deleteTopic(t testing.TB, ns, broker, topic string) {
	t.Helper()
	if err := newAdmin(t, ns).DeleteTopic(context.Background(), admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(broker),
		admin.WithNameSrvAddr([]string{ns})); err != nil {
		t.Fatalf("delete topic %s: %v", topic, err)
	}
}

// TestGoAdmin drives the Go client's admin API: CreateTopic makes a topic
// with the queues and permission asked (the name server routes it, the
// topic list and the publish queues list it, its cluster is the broker's);
// GetAllSubscriptionGroup lists a group that consumed, with RocketMQ's
// defaults; DeleteTopic removes it from the broker and the name server for
// good (the route stays gone after the broker registers again, sends fail
// with the broker's auto-creation off, as in RocketMQ), and a topic
// created again under the name starts from offset 0.
func TestGoAdmin(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	b := startBroker(t, ns, brokerOpts{sets: []string{"autoCreateTopicEnable=false"}})
	adm := newAdmin(t, ns.addr)
	ctx := context.Background()
	const topic, group = "E2EAdminTopic", "cg-admin"

	if err := adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(b.addr),
		admin.WithReadQueueNums(3), admin.WithWriteQueueNums(3), admin.WithPerm(6)); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	ri := waitRoute(t, ns.addr, topic, b.name)
	if q := ri.QueueDatas[0]; q.ReadQueueNums != 3 || q.WriteQueueNums != 3 || q.Perm != 6 {
		t.Errorf("route of the created topic: %+v, want 3/3 queues, perm 6", q)
	}
	list, err := adm.FetchAllTopicList(ctx)
	if err != nil {
		t.Fatalf("fetch topic list: %v", err)
	}
	if !slices.Contains(list.TopicList, topic) {
		t.Errorf("topic list %v lacks %s", list.TopicList, topic)
	}
	mqs, err := adm.FetchPublishMessageQueues(ctx, topic)
	if err != nil {
		t.Fatalf("fetch publish queues: %v", err)
	}
	var ids []int
	for _, mq := range mqs {
		if mq.Topic != topic || mq.BrokerName != b.name {
			t.Errorf("publish queue %v", mq)
		}
		ids = append(ids, mq.QueueId)
	}
	sort.Ints(ids)
	if fmt.Sprint(ids) != "[0 1 2]" {
		t.Errorf("publish queues %v, want 0 1 2", ids)
	}
	if clusters, err := adm.FetchClusterList(topic); err != nil || fmt.Sprint(clusters) != "[DefaultCluster]" {
		t.Errorf("cluster list of %s: %v %v", topic, clusters, err)
	}

	p := newProducer(t, ns.addr, "pg-admin")
	sendN(t, p, topic, "adm-", 6)
	got := newCollector()
	c := startPushConsumer(t, ns.addr, group, topic, consumer.MessageSelector{}, got,
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	got.waitDistinct(t, 6, 30*time.Second)
	_ = c.Shutdown()

	subs, err := adm.GetAllSubscriptionGroup(ctx, b.addr, 3*time.Second)
	if err != nil {
		t.Fatalf("get subscription groups: %v", err)
	}
	sg, ok := subs.SubscriptionGroupTable[group]
	if !ok {
		var names []string
		for name := range subs.SubscriptionGroupTable {
			names = append(names, name)
		}
		t.Errorf("subscription groups %v lack %s", names, group)
	} else if sg.GroupName != group || !sg.ConsumeEnable || !sg.ConsumeBroadcastEnable || sg.RetryMaxTimes != 16 ||
		sg.RetryQueueNums != 1 || sg.BrokerId != 0 || sg.WhichBrokerWhenConsumeSlowly != 1 || !sg.NotifyConsumerIdsChangedEnable {
		t.Errorf("subscription group %s: %+v, want RocketMQ's defaults", group, sg)
	}
	if subs.DataVersion.Timestamp == 0 {
		t.Errorf("subscription groups' data version %+v", subs.DataVersion)
	}

	deleteTopic(t, ns.addr, b.addr, topic)
	if ri := topicRoute(t, ns.addr, topic); ri != nil {
		t.Errorf("route of the deleted topic: %+v", ri)
	}
	// The broker registers every 2 s: the topic must not come back.
	time.Sleep(5 * time.Second)
	if ri := topicRoute(t, ns.addr, topic); ri != nil {
		t.Errorf("route of the deleted topic after the broker registered again: %+v", ri)
	}
	if list, err := adm.FetchAllTopicList(ctx); err != nil || slices.Contains(list.TopicList, topic) {
		t.Errorf("topic list after the delete: %v %v", list, err)
	}
	// The producer still has the route cached: the broker refuses.
	if res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("after delete"))); err == nil {
		t.Errorf("send to the deleted topic with a cached route: %+v, want an error", res)
	}
	// A new producer finds no route.
	p2 := newProducer(t, ns.addr, "pg-admin-2")
	if res, err := p2.SendSync(ctx, primitive.NewMessage(topic, []byte("after delete"))); err == nil {
		t.Errorf("send to the deleted topic: %+v, want an error", res)
	}

	// Created again, the topic is empty and starts from offset 0.
	if err := adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(b.addr),
		admin.WithReadQueueNums(1), admin.WithWriteQueueNums(1)); err != nil {
		t.Fatalf("create topic again: %v", err)
	}
	waitRoute(t, ns.addr, topic, b.name)
	p3 := newProducer(t, ns.addr, "pg-admin-3", producer.WithRetry(0))
	var res *primitive.SendResult
	waitUntil(t, 10*time.Second, "a send to the topic created again", func() bool {
		res, err = p3.SendSync(ctx, primitive.NewMessage(topic, []byte("again")))
		return err == nil
	})
	if res.MessageQueue.QueueId != 0 || res.QueueOffset != 0 {
		t.Errorf("first message of the topic created again stored at queue %d offset %d, want 0/0", res.MessageQueue.QueueId, res.QueueOffset)
	}
	if off := committedOffset(t, b.addr, group, topic, 0); off > 0 {
		t.Errorf("%s's offset of the deleted topic survived as %d", group, off)
	}
}
