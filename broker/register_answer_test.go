package broker

import (
	"fmt"
	"testing"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
)

// RocketMQ's AdminBrokerProcessor.updateAndCreateTopic calls
// registerIncrementBrokerData (synchronous: BrokerOuterAPI.registerBrokerAll
// waits on its latch) before it answers SUCCESS, so once mqadmin updateTopic
// returns the name servers route the topic.
func TestACreatedTopicIsRoutedWhenAnswered(t *testing.T) {
	ns := startTestNameServer(t)
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String()})
	waitFor(t, "the broker registered", func() bool { return len(ns.Registry().ClusterInfo().BrokerAddrTable) == 1 })
	c := tb.client(nil)
	createTopic(t, c, "RegSyncTopic", 4, 4)
	if _, found := ns.Registry().Route("RegSyncTopic"); !found {
		t.Fatal("UPDATE_AND_CREATE_TOPIC answered SUCCESS before the name server knew the topic (RocketMQ registers before answering)")
	}
}

// RocketMQ's AdminBrokerProcessor.updateBrokerConfig calls
// registerBrokerAll(false, false, true) before answering when the body has
// brokerPermission: producers stop being routed to the broker once
// mqadmin updateBrokerConfig returns.
func TestABrokerPermissionChangeIsRoutedWhenAnswered(t *testing.T) {
	ns := startTestNameServer(t)
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String()})
	c := tb.client(nil)
	createTopic(t, c, "RegPermTopic", 4, 4)
	waitForRoutePerm(t, ns, "RegPermTopic", 6)
	updateConfig(t, c, "brokerPermission=4\n")
	r, _ := ns.Registry().Route("RegPermTopic")
	if r == nil || len(r.QueueDatas) != 1 || r.QueueDatas[0].Perm != 4 {
		t.Fatalf("UPDATE_BROKER_CONFIG brokerPermission=4 answered SUCCESS while the name server routes %+v (RocketMQ registers before answering)", r)
	}
}

// With compressedRegister=false (the default) RocketMQ's BrokerController
// always registers the plain JSON body (RegisterBrokerBody.encode(false)),
// which carries each topic's topicSysFlag into the name server's QueueData.
// rocketkv switches to the compressed form above 1,000 topics by itself,
// whose topic text (TopicConfig.encode) has no topicSysFlag, only when no
// topic has one; every unit topic of a large broker used to be routed
// with topicSysFlag 0.
func TestALargeTopicTableKeepsItsTopicSysFlags(t *testing.T) {
	ns := startTestNameServer(t)
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String()})
	var cfgs []meta.TopicConfig
	for i := range 1001 {
		tc := meta.NewTopicConfig(fmt.Sprintf("RegBulk%04d", i), 1)
		cfgs = append(cfgs, tc)
	}
	unit := meta.NewTopicConfig("RegUnitTopic", 2)
	unit.TopicSysFlag = 1
	cfgs = append(cfgs, unit)
	if err := tb.topics.put(cfgs...); err != nil {
		t.Fatal(err)
	}
	waitForRoute(t, ns, "RegUnitTopic", "routed", func(*namesrv.TopicRouteData) bool { return true })
	r, _ := ns.Registry().Route("RegUnitTopic")
	if r.QueueDatas[0].TopicSysFlag != 1 {
		t.Fatalf("route of a topic with topicSysFlag 1 on a broker of %d topics: %+v", len(cfgs), r.QueueDatas)
	}
}
