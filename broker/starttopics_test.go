package broker

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/rocketkv/rocketkv/namesrv"
)

// startTopic is a topic RocketMQ's TopicConfigManager creates at every
// start, with its queue count (read and write) and permission.
type startTopic struct {
	queues int
	perm   int
}

// checkStartTopics checks that the broker's topic table and the name
// server's routes hold each of want with its queue counts and
// permission, and that none of absent is in either.
func checkStartTopics(t *testing.T, b *testBroker, ns *namesrv.Server, want map[string]startTopic, absent []string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		w := want[name]
		tc, ok, err := b.topics.get(name)
		if err != nil || !ok {
			t.Errorf("topic %s not in the broker's table (%v)", name, err)
			continue
		}
		if tc.ReadQueueNums != w.queues || tc.WriteQueueNums != w.queues || tc.Perm != w.perm {
			t.Errorf("topic %s: %d/%d queues, perm %d; want %d queues, perm %d", name,
				tc.ReadQueueNums, tc.WriteQueueNums, tc.Perm, w.queues, w.perm)
		}
		waitForRoute(t, ns, name, fmt.Sprintf("%s with %d queues and perm %d", b.cfg.BrokerName, w.queues, w.perm),
			func(r *namesrv.TopicRouteData) bool {
				return len(r.QueueDatas) == 1 && r.QueueDatas[0].BrokerName == b.cfg.BrokerName &&
					r.QueueDatas[0].ReadQueueNums == int32(w.queues) && r.QueueDatas[0].WriteQueueNums == int32(w.queues) &&
					r.QueueDatas[0].Perm == int32(w.perm)
			})
	}
	for _, name := range absent {
		if _, ok, err := b.topics.get(name); err != nil || ok {
			t.Errorf("topic %s in the broker's table (%v), want it left out", name, err)
		}
		if _, ok := ns.Registry().Route(name); ok {
			t.Errorf("topic %s routed, want it left out", name)
		}
	}
}

// A started broker holds, and registers, every topic RocketMQ 5.3's
// broker creates at start (TopicConfigManager's constructor) with its
// queue counts and permissions: the default configuration.
func TestStartCreatesRocketMQsTopics(t *testing.T) {
	ns := startTestNameServer(t)
	b := startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String()})
	checkStartTopics(t, b, ns, map[string]startTopic{
		"TBW102":                              {8, 7}, // defaultTopicQueueNums, inheritable
		"SELF_TEST_TOPIC":                     {1, 6},
		"BenchmarkTest":                       {1024, 6},
		"DefaultCluster":                      {16, 7}, // TopicConfig's default queue count
		"broker-a":                            {1, 7},
		"OFFSET_MOVED_EVENT":                  {1, 6},
		"SCHEDULE_TOPIC_XXXX":                 {18, 6},
		"DefaultCluster_REPLY_TOPIC":          {1, 6},
		"rmq_sys_REVIVE_LOG_DefaultCluster":   {8, 6}, // reviveQueueNum
		"rmq_sys_SYNC_BROKER_MEMBER_broker-a": {1, 1}, // PERM_INHERIT only
		"RMQ_SYS_TRANS_HALF_TOPIC":            {1, 6},
		"RMQ_SYS_TRANS_OP_HALF_TOPIC":         {1, 6},
		"rmq_sys_wheel_timer":                 {1, 6}, // timerWheelEnable
	}, []string{"RMQ_SYS_TRACE_TOPIC"})
}

// The switches RocketMQ's TopicConfigManager reads: without
// autoCreateTopicEnable no TBW102, without clusterTopicEnable and
// brokerTopicEnable their topics only inheritable, with traceTopicEnable
// the trace topic, without timerWheelEnable no timer topic; the names
// follow the cluster and the broker.
func TestStartTopicsFollowTheSwitches(t *testing.T) {
	ns := startTestNameServer(t)
	b := startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String(),
		"brokerClusterName": "C2", "brokerName": "b2", "autoCreateTopicEnable": "false",
		"clusterTopicEnable": "false", "brokerTopicEnable": "false", "traceTopicEnable": "true",
		"msgTraceTopicName": "MyTrace", "timerWheelEnable": "false"})
	checkStartTopics(t, b, ns, map[string]startTopic{
		"SELF_TEST_TOPIC":               {1, 6},
		"BenchmarkTest":                 {1024, 6},
		"C2":                            {16, 1},
		"b2":                            {1, 1},
		"OFFSET_MOVED_EVENT":            {1, 6},
		"SCHEDULE_TOPIC_XXXX":           {18, 6},
		"MyTrace":                       {1, 6},
		"C2_REPLY_TOPIC":                {1, 6},
		"rmq_sys_REVIVE_LOG_C2":         {8, 6},
		"rmq_sys_SYNC_BROKER_MEMBER_b2": {1, 1},
		"RMQ_SYS_TRANS_HALF_TOPIC":      {1, 6},
		"RMQ_SYS_TRANS_OP_HALF_TOPIC":   {1, 6},
	}, []string{"TBW102", "rmq_sys_wheel_timer", "RMQ_SYS_TRACE_TOPIC", "DefaultCluster", "broker-a"})
}
