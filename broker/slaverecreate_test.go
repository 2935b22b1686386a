package broker

import (
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// A topic the master deletes and creates again between two of its slave's
// copies of the tables (an hour apart here) numbers its queue from 0 on
// the master; the slave, which still holds the old topic's entries at
// those offsets, indexes the new messages in their place: a consumer of
// the slave reads what the master acknowledged, not the deleted messages.
func TestSlaveIndexesATopicTheMasterCreatedAgain(t *testing.T) {
	master, slave := startMasterAndSlave(t, nil)
	mc, sc := master.client(nil), slave.client(nil)
	createTopic(t, mc, "Again", 1, 1)
	for _, body := range []string{"old-0", "old-1", "old-2"} {
		mustSend(t, mc, "Again", 0, body, "")
	}
	waitReplicated(t, master, slave)
	slave.caughtUp()
	syncSlave(t, slave, master) // the slave has the topic and its old messages
	if got := slaveBodies(t, sc, "Again"); got != "old-0 old-1 old-2" {
		t.Fatalf("the slave serves %q before the deletion", got)
	}

	if r := call(t, mc, remoting.DeleteTopicInBroker, map[string]string{"topic": "Again"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete the topic on the master: %d %s", r.Code, r.Remark)
	}
	createTopic(t, mc, "Again", 1, 1)
	for _, body := range []string{"new-0", "new-1"} {
		mustSend(t, mc, "Again", 0, body, "")
	}
	waitReplicated(t, master, slave)
	master.caughtUp()
	slave.caughtUp()
	want := strings.Join(pullQueueBodies(t, mc, "Again", 0), " ")
	if want != "new-0 new-1" {
		t.Fatalf("the master serves %q after creating the topic again", want)
	}
	if got := slaveBodies(t, sc, "Again"); got != want {
		t.Errorf("the slave serves %q, the master %q", got, want)
	}
	if got := maxOffsetOf(t, sc, "Again", 0); got != 2 {
		t.Errorf("the slave's queue ends at %d, the master's at 2", got)
	}
}

// slaveBodies pulls queue 0 of topic from offset 0 in one pull (a slave
// answers a pull at its queue's end OFFSET_OVERFLOW_ONE, not
// PULL_NOT_FOUND) and returns the bodies, space-separated.
func slaveBodies(t *testing.T, c *remoting.Client, topic string) string {
	t.Helper()
	r := call(t, c, remoting.PullMessage, pullReq("inspect", topic, 0, 0, 0, 0, "*"), nil)
	if r.Code != remoting.Success {
		t.Fatalf("pull %s/0 at 0: %d %s", topic, r.Code, r.Remark)
	}
	return pulledBodies(t, r)
}
