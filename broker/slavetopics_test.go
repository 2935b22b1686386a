package broker

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// A topic created on the master after the slave's last copy of its tables
// reaches the slave with the topic's first replicated message, not at the
// next slaveSyncIntervalMillis (an hour here): the slave's dispatcher
// meets a topic the slave has no config for, and the slave copies the
// master's tables at once. A message of a topic the slave has does not
// make it copy them.
func TestSlaveCopiesTheTopicOfANewReplicatedMessage(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	master, slave := startMasterAndSlave(t, func(b *Broker) { b.log = zerolog.New(logs) })
	const copied = "a replicated record names a topic this slave has no config for: copying the master's topics and groups now"

	// Known is on both; its message makes the slave look, and find it.
	mc := master.client(nil)
	createTopic(t, mc, "Known", 2, 2)
	createTopic(t, slave.client(nil), "Known", 2, 2)
	mustSend(t, mc, "Known", 0, "one", "")
	waitReplicated(t, master, slave)
	waitFor(t, "the slave to look at the topics it met", func() bool {
		s := slave.repl.sightings
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.names) == 0 && len(s.kick) == 0
	})

	createTopic(t, mc, "Fresh", 2, 2)
	if _, ok := topicTable(t, slave)["Fresh"]; ok {
		t.Fatal("the slave has Fresh before any message of it: the test shows nothing")
	}
	mustSend(t, mc, "Fresh", 1, "two", "")
	waitReplicated(t, master, slave)
	waitFor(t, "the slave to copy Fresh's config", func() bool {
		_, ok := topicTable(t, slave)["Fresh"]
		return ok
	})
	sc := slave.client(nil)
	if r := call(t, sc, remoting.PullMessage, pullReq("g", "Fresh", 1, 0, 0, 0, "*"), nil); r.Code != remoting.Success {
		t.Errorf("pull of Fresh from the slave: %d %s, want SUCCESS", r.Code, r.Remark)
	}
	lines := logLines(logs, copied)
	if len(lines) != 1 || lines[0]["topic"] != "Fresh" {
		t.Errorf("copies for new topics: %v, want one, for Fresh; log:\n%s", lines, logs.String())
	}
}

// A pull from the slave of a queue the master added to a topic after the
// slave's last copy (the master's route gives it to the client) is
// refused at first, as the slave's copy has fewer queues, and makes the
// slave copy the master's tables at once, not at the next
// slaveSyncIntervalMillis (an hour here). A pull of a queue past the
// count that the slave holds no message of (a client's mistake) does not.
func TestSlaveCopiesTheTopicWhoseAddedQueueAClientPulled(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	_, slave := growBehindTheSlave(t, logs)
	const copied = "a client pulled a queue past this slave's copy of the topic's config: copying the master's topics and groups now"
	sc := slave.client(nil)
	pull := func(q int32) *remoting.Command {
		return call(t, sc, remoting.PullMessage, pullReq("g", "Grows", q, 0, 0, 0, "*"), nil)
	}
	if r := pull(3); r.Code != remoting.InvalidParameter {
		t.Fatalf("first pull of Grows/3 from the slave: %d %s, want INVALID_PARAMETER from its copy of one queue", r.Code, r.Remark)
	}
	waitFor(t, "the slave to serve Grows/3", func() bool {
		r := pull(3)
		return r.Code == remoting.Success && pulledBodies(t, r) == "three"
	})
	s := slave.repl.sightings
	noted := func() staleQueue {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.stale
	}
	// A pull refused while the copy was under way notes Grows/3 again
	// (the polls above may have made one); the look after the copy finds
	// the queue given and copies nothing more.
	s.noteStale("Grows", 3)
	waitFor(t, "the slave to look at Grows/3 again", func() bool { return noted().topic == "" })
	if lines := logLines(logs, copied); len(lines) != 1 || lines[0]["topic"] != "Grows" {
		t.Errorf("copies for queues past the copied count: %v, want one, for Grows; log:\n%s", lines, logs.String())
	}
	if r := pull(5); r.Code != remoting.InvalidParameter {
		t.Fatalf("pull of Grows/5, which nothing wrote, from the slave: %d %s, want INVALID_PARAMETER", r.Code, r.Remark)
	}
	if q := noted(); q.topic != "" {
		t.Errorf("a pull of a queue past the count that the slave holds no message of asks for a copy of %s/%d", q.topic, q.queueID)
	}
}

// growBehindTheSlave starts a master and a slave logging to logs, has
// the slave copy topic Grows with one queue, then grows Grows to four
// queues on the master and writes "three" to queue 3, which the slave
// holds and its copy of the config does not cover.
func growBehindTheSlave(t *testing.T, logs *testutil.SyncBuffer) (master, slave *testBroker) {
	t.Helper()
	master, slave = startMasterAndSlave(t, func(b *Broker) { b.log = zerolog.New(logs) })
	mc := master.client(nil)
	createTopic(t, mc, "Grows", 1, 1)
	mustSend(t, mc, "Grows", 0, "one", "")
	waitReplicated(t, master, slave)
	waitFor(t, "the slave to copy Grows's config", func() bool {
		_, ok := topicTable(t, slave)["Grows"]
		return ok
	})
	createTopic(t, mc, "Grows", 4, 4)
	mustSend(t, mc, "Grows", 3, "three", "")
	waitReplicated(t, master, slave)
	return master, slave
}

// startMasterAndSlave starts a name server, a master and a slave reading
// allowed, that replicates the master and knows its address; the slave's
// full copy of the master's tables is an hour away. adjust, when not nil,
// changes the slave before it starts.
func startMasterAndSlave(t *testing.T, adjust func(*Broker)) (master, slave *testBroker) {
	t.Helper()
	ns := startTestNameServer(t)
	addr := ns.Addr().String()
	master = startTestBroker(t, withHA(map[string]string{"namesrvAddr": addr}))
	slave = startTestBrokerWith(t, t.TempDir(), withHA(map[string]string{"namesrvAddr": addr, "brokerRole": "SLAVE",
		"brokerId": "1", "haMasterAddress": master.haServerAddr(), "slaveReadEnable": "true",
		"slaveSyncIntervalMillis": "3600000"}), adjust)
	waitFor(t, "the slave to know its master", func() bool { return slave.masterAddr() == master.Addr() })
	return master, slave
}

// A slave whose early copy fails (its master is down) keeps what made it
// copy for the next look.
func TestSlaveTriesAFailedEarlyCopyAgainLater(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	master, slave := growBehindTheSlave(t, logs)
	master.stop()

	sc := slave.client(nil)
	if r := call(t, sc, remoting.PullMessage, pullReq("g", "Grows", 3, 0, 0, 0, "*"), nil); r.Code != remoting.InvalidParameter {
		t.Fatalf("pull of Grows/3 from the slave: %d %s, want INVALID_PARAMETER from its copy of one queue", r.Code, r.Remark)
	}
	s := slave.repl.sightings
	waitFor(t, "the slave's early copy to fail and keep Grows/3 for the next look", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(logLines(logs, "copy the master's topics for a new topic")) > 0 && s.stale == staleQueue{topic: "Grows", queueID: 3}
	})
}

// While its early copies fail, a slave looks less often:
// topicSightingGap doubled per failure, up to the full sync's interval.
func TestEarlyCopyGap(t *testing.T) {
	for _, c := range []struct {
		failed   int
		interval time.Duration
		want     time.Duration
	}{
		{0, time.Minute, time.Second},
		{1, time.Minute, 2 * time.Second},
		{3, time.Minute, 8 * time.Second},
		{6, time.Minute, time.Minute},
		{1000, time.Minute, time.Minute},
		{2, 500 * time.Millisecond, time.Second},
	} {
		if got := earlyCopyGap(c.failed, c.interval); got != c.want {
			t.Errorf("earlyCopyGap(%d, %s) = %s, want %s", c.failed, c.interval, got, c.want)
		}
	}
}
