package broker

import (
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// RocketMQ's CreateTopicListRequestBody decodes each entry into a
// TopicConfig whose no-arg constructor gives perm=6 (RW), 16/16 queues and
// SINGLE_TAG; fields left out keep those defaults. A list entry without
// "perm" must give a readable, writable topic.
func TestATopicListEntryWithoutPermIsReadWrite(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	body := `{"topicConfigList":[{"topicName":"ListNoPerm","readQueueNums":2,"writeQueueNums":2}]}`
	if r := call(t, c, remoting.UpdateAndCreateTopicList, nil, []byte(body)); r.Code != remoting.Success {
		t.Fatalf("create list: %d %s", r.Code, r.Remark)
	}
	tc, ok, err := b.topics.get("ListNoPerm")
	if err != nil || !ok {
		t.Fatalf("topic not created: %v", err)
	}
	if tc.Perm != 6 {
		t.Errorf("perm of a list entry without perm = %d, RocketMQ's TopicConfig default is 6", tc.Perm)
	}
	if r := sendV2(t, c, "ListNoPerm", 0, "x", ""); r.Code != remoting.Success {
		t.Errorf("send to the topic created by the list: %d %s", r.Code, r.Remark)
	}
}

// An entry naming only the topic: RocketMQ creates it with 16/16 queues.
func TestABareTopicListEntryGetsSixteenQueues(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	body := `{"topicConfigList":[{"topicName":"ListBare"}]}`
	if r := call(t, c, remoting.UpdateAndCreateTopicList, nil, []byte(body)); r.Code != remoting.Success {
		t.Fatalf("create list with a bare entry: %d %s (RocketMQ: SUCCESS, 16/16 queues, perm 6)", r.Code, r.Remark)
	}
}

// SendMessageProcessor.msgCheck answers an invalid topic name with
// INVALID_PARAMETER (TopicValidator.validateTopic), not SYSTEM_ERROR.
func TestASendToAnInvalidTopicNameIsInvalidParameter(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	r := sendV2(t, c, "bad topic!", 0, "x", "")
	if r.Code != remoting.InvalidParameter {
		t.Errorf("send to an invalid topic name: code %d %q, RocketMQ answers INVALID_PARAMETER (29)", r.Code, r.Remark)
	}
}

// AdminBrokerProcessor.deleteTopic answers a blank topic with
// INVALID_PARAMETER "The specified topic is blank.".
func TestDeletingABlankTopicIsRefused(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for _, topic := range []string{"", "   "} {
		r := call(t, c, remoting.DeleteTopicInBroker, map[string]string{"topic": topic}, nil)
		if r.Code != remoting.InvalidParameter {
			t.Errorf("delete topic %q: code %d %q, RocketMQ answers INVALID_PARAMETER", topic, r.Code, r.Remark)
		}
	}
}

// AdminBrokerProcessor.updateAndCreateTopic takes the queue numbers as they
// come: mqadmin updateTopic -w 0 (stop writes to this broker's queues
// while consumers drain them) is accepted.
func TestATopicMayHaveNoWriteQueues(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	createTopic(t, c, "Drain", 4, 4)
	r := call(t, c, remoting.UpdateAndCreateTopic, map[string]string{
		"topic": "Drain", "defaultTopic": "TBW102", "readQueueNums": "4",
		"writeQueueNums": "0", "perm": "6", "topicFilterType": "SINGLE_TAG",
	}, nil)
	if r.Code != remoting.Success {
		t.Errorf("updateTopic -w 0: code %d %q, RocketMQ answers SUCCESS", r.Code, r.Remark)
	}
}
