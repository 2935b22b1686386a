package broker

import (
	"strings"
	"sync"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// A topic is not created again while its deletion is under way: the
// deletion's later steps would drop what the new topic received (a send
// answered SEND_OK whose message no consumer ever reads), and a crash
// between them would leave the new topic the old one's queues and
// offsets. A send that would auto-create it, and an admin creation, are
// refused until the deletion ends; then the topic is created anew and
// numbers its queue from 0.
func TestATopicIsNotCreatedAgainWhileItsDeletionRuns(t *testing.T) {
	b := startTestBroker(t, map[string]string{"autoCreateTopicEnable": "true"})
	c := b.client(nil)
	mustSend(t, c, "Reborn", 0, "old", "")
	b.caughtUp()

	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.recoveryStep = func(step string) {
		if step == stepTopicConfigDeleted {
			once.Do(func() { close(paused); <-resume })
		}
	}
	deleted := make(chan error, 1)
	go func() { deleted <- b.deleteTopic("Reborn") }()
	<-paused

	var acked []string // what the broker acknowledged sending to the new topic
	resp := sendV2(t, c, "Reborn", 0, "during", "")
	if resp.Code == remoting.Success {
		acked = append(acked, "during")
	}
	if resp.Code != remoting.TopicNotExist || !strings.Contains(resp.Remark, "being deleted") {
		t.Errorf("send that would auto-create a topic under deletion: %d %q, want TOPIC_NOT_EXIST saying it is being deleted", resp.Code, resp.Remark)
	}
	resp = call(t, c, remoting.UpdateAndCreateTopic, map[string]string{"topic": "Reborn", "readQueueNums": "4", "writeQueueNums": "4"}, nil)
	if resp.Code == remoting.Success || !strings.Contains(resp.Remark, "being deleted") {
		t.Errorf("admin creation of a topic under deletion: %d %q, want a refusal saying it is being deleted", resp.Code, resp.Remark)
	}
	if _, err := b.topics.ensureSystemTopic("Reborn", 1, 6); err == nil {
		t.Error("a system topic of the name was created while its deletion ran")
	}
	close(resume)
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}

	// After the deletion the name is free: the send creates the topic,
	// whose queue starts at 0, and every message it acknowledged is read.
	sent := mustSend(t, c, "Reborn", 0, "new", "")
	acked = append(acked, "new")
	if off := header(t, sent, "queueOffset"); off != int64(len(acked)-1) {
		t.Errorf("message %d of the topic created again at queue offset %d", len(acked), off)
	}
	b.caughtUp()
	pulled := call(t, c, remoting.PullMessage, pullReq("rg", "Reborn", 0, 0, 0, 0, "*"), nil)
	if pulled.Code != remoting.Success {
		t.Fatalf("pull of the topic created again: %d %s", pulled.Code, pulled.Remark)
	}
	var bodies []string
	for _, m := range decodeRecords(t, pulled.Body) {
		bodies = append(bodies, string(m.Body))
	}
	if strings.Join(bodies, ",") != strings.Join(acked, ",") {
		t.Errorf("topic created again holds %q, want %q: every message it acknowledged, and only those", bodies, acked)
	}
}
