package broker

import (
	"testing"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// Topic admin requests leave RocketMQ's system topics alone while
// validateSystemTopicWhenUpdateTopic is on (the default); off, only the
// topics whose configuration and messages the broker owns stay refused.
// enableMixedMessageType lets a topic take the MIXED message type.
func TestTopicAdminOnSystemTopics(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	create := func(topic, attrs string) *remoting.Command {
		return call(t, c, remoting.UpdateAndCreateTopic, map[string]string{"topic": topic, "readQueueNums": "2",
			"writeQueueNums": "2", "perm": "6", "attributes": attrs}, nil)
	}
	list := func(topic string) *remoting.Command {
		body := `{"topicConfigList":[{"topicName":"plain-in-list","readQueueNums":1,"writeQueueNums":1,"perm":6},` +
			`{"topicName":"` + topic + `","readQueueNums":1,"writeQueueNums":1,"perm":6}]}`
		return call(t, c, remoting.UpdateAndCreateTopicList, nil, []byte(body))
	}
	remove := func(topic string) *remoting.Command {
		return call(t, c, remoting.DeleteTopicInBroker, map[string]string{"topic": topic}, nil)
	}
	refused := func(what, topic string, r *remoting.Command) {
		t.Helper()
		if r.Code != remoting.InvalidParameter || r.Remark != "The topic["+topic+"] is conflict with system topic." {
			t.Errorf("%s %s: %d %q, want INVALID_PARAMETER", what, topic, r.Code, r.Remark)
		}
	}
	setting := func(kv string) {
		t.Helper()
		if r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte(kv)); r.Code != remoting.Success {
			t.Fatalf("UPDATE_BROKER_CONFIG %s: %d %s", kv, r.Code, r.Remark)
		}
	}

	system := []string{"rmq_sys_mine", "BenchmarkTest", b.cfg.BrokerName, b.cfg.BrokerClusterName}
	owned := []string{autoCreateTopic, meta.ScheduleTopic, meta.TransHalfTopic}
	for _, topic := range append(append([]string{}, system...), owned...) {
		refused("create", topic, create(topic, ""))
		refused("create in a list", topic, list(topic))
		refused("delete", topic, remove(topic))
	}
	if _, ok, _ := b.topics.get("plain-in-list"); ok {
		t.Error("a refused list stored its other topic")
	}
	if _, ok, _ := b.topics.get(meta.ScheduleTopic); !ok {
		t.Errorf("%s gone after a refused deletion", meta.ScheduleTopic)
	}

	setting("validateSystemTopicWhenUpdateTopic=false")
	if r := create("rmq_sys_mine", ""); r.Code != remoting.Success {
		t.Errorf("create rmq_sys_mine without the validation: %d %s", r.Code, r.Remark)
	}
	if r := list("rmq_sys_listed"); r.Code != remoting.Success {
		t.Errorf("list with rmq_sys_listed without the validation: %d %s", r.Code, r.Remark)
	}
	if r := remove("rmq_sys_mine"); r.Code != remoting.Success {
		t.Errorf("delete rmq_sys_mine without the validation: %d %s", r.Code, r.Remark)
	}
	for _, topic := range owned {
		refused("create without the validation", topic, create(topic, ""))
		refused("delete without the validation", topic, remove(topic))
	}

	if r := create("mixed", "+message.type=MIXED"); r.Code != remoting.InvalidParameter || r.Remark != mixedRefusal {
		t.Errorf("MIXED by default: %d %q", r.Code, r.Remark)
	}
	setting("enableMixedMessageType=true")
	if r := create("mixed", "+message.type=MIXED"); r.Code != remoting.Success {
		t.Fatalf("MIXED with enableMixedMessageType: %d %s", r.Code, r.Remark)
	}
	if tc, ok, err := b.topics.get("mixed"); err != nil || !ok || tc.Attributes[meta.AttrMessageType] != "MIXED" {
		t.Errorf("mixed topic %+v %v %v", tc, ok, err)
	}
}
