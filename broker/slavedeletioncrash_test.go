package broker

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// A slave SIGKILLed after it dropped the queues and consumer state of a
// topic its master deleted, before it took the master's topic table,
// still holds the topic's config when it starts again, and finishes the
// deletion at its next copy of the table: the topic's config, messages
// and committed offsets are gone, another topic keeps its own, and the
// topic created again on the master reads from queue offset 0 on the
// slave, with none of the deleted messages.
func TestSlaveKilledBetweenADeletedTopicsDropAndTheTableFinishesIt(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	ns := startTestNameServer(t)
	master := startTestBroker(t, withHA(map[string]string{"namesrvAddr": ns.Addr().String(),
		"mappedFileSizeCommitLog": strconv.Itoa(childSegmentSize)}))
	mc := master.client(nil)
	createTopic(t, mc, "Gone", 2, 2)
	createTopic(t, mc, "Kept", 1, 1)
	for i := range 4 {
		mustSend(t, mc, "Gone", int32(i%2), fmt.Sprint("gone-", i), "")
	}
	mustSend(t, mc, "Kept", 0, "kept-0", "")
	commit(t, mc, "g", "Gone", 0, 1)
	commit(t, mc, "g", "Kept", 0, 1)

	store := t.TempDir()
	settings := []string{"brokerRole=SLAVE", "brokerId=1", "haMasterAddress=" + master.haServerAddr(),
		"haSendHeartbeatInterval=50", "slaveReadEnable=true", "namesrvAddr=" + ns.Addr().String(), "slaveSyncIntervalMillis=200"}
	slave := startChildBroker(t, store, freeTCPPort(t), append(settings,
		childKillAtStep+"="+strings.ReplaceAll(stepMasterDeletedTopicDropped, " ", "_"))...)
	sc := slave.dial()
	waitFor(t, "the slave copied Gone and g's offset on it", func() bool {
		if r := call(t, sc, remoting.GetTopicConfig, map[string]string{"topic": "Gone"}, nil); r.Code != remoting.Success {
			return false
		}
		// Until the offsets are copied the answer is QUERY_NOT_FOUND.
		r := call(t, sc, remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "Gone", "queueId": "0", "setZeroIfNotFound": "false"}, nil)
		return r.Code == remoting.Success && r.ExtFields["offset"] == "1"
	})
	mustDeleteTopic(t, mc, "Gone")
	waitChildExit(t, slave, 20*time.Second)
	readStoppedIndex(t, store, func(db *kvindex.DB) error {
		topics, err := db.Topics(0)
		if err != nil {
			return err
		}
		if _, ok, err := topics.Get("Gone"); err != nil || !ok {
			t.Fatalf("the killed slave's table lacks Gone (%v): the kill did not come before the table was taken", err)
		}
		for q := range int32(2) {
			if end, err := db.ConsumeQueue(0).MaxOffset("Gone", q); err != nil || end != 0 {
				t.Fatalf("the killed slave's Gone/%d ends at %d (%v): the kill came before the drop", q, end, err)
			}
		}
		return nil
	})

	slave.extra = settings
	slave.start()
	sc = slave.dial()
	waitFor(t, "the slave took the master's table without Gone", func() bool {
		return call(t, sc, remoting.GetTopicConfig, map[string]string{"topic": "Gone"}, nil).Code == remoting.TopicNotExist
	})
	for q := range int32(2) {
		if end := maxOffsetOf(t, sc, "Gone", q); end != 0 {
			t.Errorf("the slave's Gone/%d ends at %d after the restart, want 0", q, end)
		}
	}
	r := call(t, sc, remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "Gone", "queueId": "0", "setZeroIfNotFound": "false"}, nil)
	if r.Code != remoting.QueryNotFound {
		t.Errorf("the slave's offset of g on Gone/0 after the restart: %d %s %v, want none", r.Code, r.Remark, r.ExtFields)
	}
	if got := slaveBodies(t, sc, "Kept"); got != "kept-0" {
		t.Errorf("the slave's Kept/0 reads %q, want kept-0", got)
	}
	if off := committedOffset(t, sc, "g", "Kept", 0); off != 1 {
		t.Errorf("the slave's offset of g on Kept/0: %d, want 1", off)
	}

	createTopic(t, mc, "Gone", 2, 2)
	mustSend(t, mc, "Gone", 0, "again", "")
	waitFor(t, "the slave copied Gone created again", func() bool {
		return call(t, sc, remoting.GetTopicConfig, map[string]string{"topic": "Gone"}, nil).Code == remoting.Success &&
			maxOffsetOf(t, sc, "Gone", 0) == 1
	})
	if got := slaveBodies(t, sc, "Gone"); got != "again" {
		t.Errorf("the slave's Gone/0 created again reads %q, want again", got)
	}
}

// waitChildExit waits until a child broker ends on its own (it SIGKILLed
// itself at a step), failing the test after timeout.
func waitChildExit(t *testing.T, cb *childBroker, timeout time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	cmd := cb.cmd
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		cb.cmd = nil
	case <-time.After(timeout):
		t.Fatalf("the child broker did not end within %v", timeout)
	}
}
