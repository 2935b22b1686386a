package broker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

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

	mustDeleteTopic(t, mc, "Again")
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

// The master's deletion of a topic deletes its consumers' offsets; its
// slave, whose copies of the offsets keep what the master no longer
// lists, drops those of a queue when a replicated record starts it anew.
// Otherwise a consumer of the slave promoted would start the new topic's
// queue at the old offset and skip the messages below it. The offsets of
// another topic stay, and what the master's consumer commits of the new
// topic comes with the next copy.
func TestSlaveDropsTheOffsetsOfAQueueStartedAnew(t *testing.T) {
	master, slave := startMasterAndSlave(t, nil)
	mc := master.client(nil)
	createTopic(t, mc, "Again", 1, 1)
	createTopic(t, mc, "Other", 1, 1)
	for _, body := range []string{"old-0", "old-1", "old-2"} {
		mustSend(t, mc, "Again", 0, body, "")
	}
	mustSend(t, mc, "Other", 0, "other-0", "")
	commit(t, mc, "g", "Again", 0, 3)
	commit(t, mc, "g", "Other", 0, 1)
	waitReplicated(t, master, slave)
	slave.caughtUp()
	syncSlave(t, slave, master)
	offsetOf := func(topic string) string { return heldOffset(t, slave, "g", topic, 0) }
	if got := offsetOf("Again"); got != "3" {
		t.Fatalf("the slave's offset of g on Again/0 is %s before the deletion, want the master's 3", got)
	}

	mustDeleteTopic(t, mc, "Again")
	createTopic(t, mc, "Again", 1, 1)
	for i := range 5 {
		mustSend(t, mc, "Again", 0, fmt.Sprint("new-", i), "")
	}
	waitReplicated(t, master, slave)
	slave.caughtUp()
	if got := offsetOf("Again"); got != "none" {
		t.Errorf("the slave's offset of g on Again/0 is %s once the queue started anew, want none (it would skip new-0 to new-2)", got)
	}
	syncSlave(t, slave, master)
	if got := offsetOf("Again"); got != "none" {
		t.Errorf("the slave's offset of g on Again/0 is %s after a copy of the master's, which has none", got)
	}
	if got := offsetOf("Other"); got != "1" {
		t.Errorf("the slave's offset of g on Other/0 is %s, want 1 (another topic)", got)
	}
	commit(t, mc, "g", "Again", 0, 2)
	syncSlave(t, slave, master)
	if got := offsetOf("Again"); got != "2" {
		t.Errorf("the slave's offset of g on Again/0 is %s after the master's consumer committed 2 and a copy", got)
	}
}

// A copy of the master's offsets fetched before a queue restarted on the
// slave, and applied after, would put the old queue's offsets back; the
// slave drops them again once the copy's step applied its table.
func TestSlaveDropsAgainWhatACopyFetchedBeforeARestartPutBack(t *testing.T) {
	master, slave := startMasterAndSlave(t, nil)
	step := syncStep{what: "offsets fetched before the restart",
		ask: func(context.Context, masterClient) ([]byte, error) {
			slave.repl.restarts.note("Again", 0) // the restart while the table is on its way
			return []byte("{}"), nil
		},
		apply: func([]byte) error { return slave.offsets.Set("g", "Again", 0, 3) },
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := slave.runSyncSteps(ctx, master.Addr(), []syncStep{step}); err != nil {
		t.Fatal(err)
	}
	if off, ok, err := slave.offsets.Get("g", "Again", 0); err != nil || ok {
		t.Errorf("the slave holds offset %d (%v, %v) of g on Again/0 after the step, want none", off, ok, err)
	}
	// A restart noted before a step's fetch was dropped already: the
	// step's table stands.
	slave.repl.restarts.note("Again", 0)
	step.ask = func(context.Context, masterClient) ([]byte, error) { return []byte("{}"), nil }
	if err := slave.runSyncSteps(ctx, master.Addr(), []syncStep{step}); err != nil {
		t.Fatal(err)
	}
	if off, ok, err := slave.offsets.Get("g", "Again", 0); err != nil || !ok || off != 3 {
		t.Errorf("the slave holds offset %d (%v, %v) of g on Again/0 after a step that began after the restart, want 3", off, ok, err)
	}
}

// mustDeleteTopic deletes topic on the broker c is connected to
// (DELETE_TOPIC_IN_BROKER) and fails unless it succeeded.
func mustDeleteTopic(t *testing.T, c *remoting.Client, topic string) {
	t.Helper()
	if r := call(t, c, remoting.DeleteTopicInBroker, map[string]string{"topic": topic}, nil); r.Code != remoting.Success {
		t.Fatalf("delete topic %s: %d %s", topic, r.Code, r.Remark)
	}
}

// heldOffset returns the offset b holds for group on a queue, or
// "none".
func heldOffset(t *testing.T, b *testBroker, group, topic string, queueID int32) string {
	t.Helper()
	off, ok, err := b.offsets.Get(group, topic, queueID)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return "none"
	}
	return strconv.FormatInt(off, 10)
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
