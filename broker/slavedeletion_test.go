package broker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// sendOld sends n messages to each of the first queues of topic on the
// master and waits until the slave indexed them and copied the tables.
func sendOld(t *testing.T, master, slave *testBroker, topic string, queues, n int) {
	t.Helper()
	mc := master.client(nil)
	createTopic(t, mc, topic, queues, queues)
	for q := range queues {
		for i := range n {
			mustSend(t, mc, topic, int32(q), "old-"+strconv.Itoa(i), "")
		}
	}
	waitReplicated(t, master, slave)
	slave.caughtUp()
	syncSlave(t, slave, master)
}

// slaveEnds returns the max offsets of the first queues of topic in the
// slave's ConsumeQueue.
func slaveEnds(t *testing.T, slave *testBroker, topic string, queues int) []int64 {
	t.Helper()
	ends := make([]int64, queues)
	for q := range ends {
		var err error
		if ends[q], err = slave.cqs.MaxOffset(topic, int32(q)); err != nil {
			t.Fatal(err)
		}
	}
	return ends
}

// A topic the master deleted goes from the slave with its next copy of
// the master's table: its queues and its consumers' offsets, as the
// master dropped them, so a slave promoted does not serve the deleted
// messages once the topic is created on it again.
func TestSlaveDropsATopicItsMasterDeleted(t *testing.T) {
	master, slave := startMasterAndSlave(t, nil)
	mc := master.client(nil)
	sendOld(t, master, slave, "Gone", 2, 2)
	commit(t, mc, "g", "Gone", 0, 2)
	syncSlave(t, slave, master)
	if got := slaveEnds(t, slave, "Gone", 2); got[0] != 2 || got[1] != 2 {
		t.Fatalf("the slave's queues of Gone end at %v before the deletion", got)
	}
	mustDeleteTopic(t, mc, "Gone")
	syncSlave(t, slave, master)
	if got := slaveEnds(t, slave, "Gone", 2); got[0] != 0 || got[1] != 0 {
		t.Errorf("the slave's queues of Gone end at %v after its copy of the master's table, want [0 0]", got)
	}
	if off, ok, err := slave.offsets.Get("g", "Gone", 0); err != nil || ok {
		t.Errorf("the slave keeps offset %d (%v, %v) of g on Gone/0 after the master deleted the topic", off, ok, err)
	}
}

// What a slave drops of a topic its master's table no longer lists is
// bounded: a queue the topic, created again since the slave asked for
// the table, already started anew stays, and so does every queue the
// master says is not empty.
func TestSlaveKeepsWhatTheMasterStillHoldsOfADeletedTopic(t *testing.T) {
	master, slave := startMasterAndSlave(t, nil)
	mc := master.client(nil)
	sendOld(t, master, slave, "Again", 2, 2)
	commit(t, mc, "g", "Again", 1, 2)
	syncSlave(t, slave, master)
	mustDeleteTopic(t, mc, "Again")
	r := call(t, mc, remoting.GetAllTopicConfig, nil, nil)
	if r.Code != remoting.Success {
		t.Fatalf("the master's topic table: %d %s", r.Code, r.Remark)
	}
	withoutAgain := r.Body
	logEnd := slave.clog.MaxOffset()
	// Created again, with a message in queue 0, which the slave indexes
	// before it applies the table it asked for before.
	createTopic(t, mc, "Again", 2, 2)
	mustSend(t, mc, "Again", 0, "new-0", "")
	waitReplicated(t, master, slave)
	slave.caughtUp()
	// What the master's consumer of the new topic commits, copied.
	if err := slave.offsets.Set("g", "Again", 0, 1); err != nil {
		t.Fatal(err)
	}

	// The table again as before an apply (Put moves its version on).
	tc, ok, err := master.topics.table.Get("Again")
	if err != nil || !ok {
		t.Fatalf("the master's config of Again: %v %v", ok, err)
	}
	for _, step := range []struct {
		masterEnd int64
		masterErr error
		want      [2]int64
		why       string
	}{
		{0, errors.New("no answer"), [2]int64{1, 2}, "from a master that does not say how far its queues go"},
		{3, nil, [2]int64{1, 2}, "from a master holding them"},
		{0, nil, [2]int64{1, 0}, "from a master holding none: queue 0 started anew after the table was asked for"},
	} {
		if err := slave.topics.table.Put(tc); err != nil {
			t.Fatal(err)
		}
		seen := masterSeen{logEnd: logEnd, maxOffset: func(string, int32) (int64, error) { return step.masterEnd, step.masterErr }}
		if err := slave.applyMasterTopics(withoutAgain, seen); err != nil {
			t.Fatalf("apply a table without Again %s: %v", step.why, err)
		}
		if got := slaveEnds(t, slave, "Again", 2); [2]int64(got) != step.want {
			t.Errorf("the slave's queues of Again end at %v after a table without it %s, want %v", got, step.why, step.want)
		}
		// The table is the master's whatever was dropped.
		if _, ok, err := slave.topics.table.Get("Again"); err != nil || ok {
			t.Errorf("the slave still holds Again's config after a table without it %s (%v)", step.why, err)
		}
	}
	for _, q := range []struct {
		queueID int32
		want    string
	}{{0, "1"}, {1, "none"}} {
		if got := heldOffset(t, slave, "g", "Again", q.queueID); got != q.want {
			t.Errorf("the slave's offset of g on Again/%d is %s, want %s", q.queueID, got, q.want)
		}
	}
}

// The slave asks the master about a deleted topic's queues several at a
// time, never more than maxOffsetAsksInFlight, and names the empty ones
// in order.
func TestMasterEmptyQueuesAsksSeveralAtATime(t *testing.T) {
	const queues = 1000
	var inFlight, most atomic.Int32
	overlapped := make(chan struct{})
	var overlapOnce sync.Once
	empty, err := masterEmptyQueues("Gone", queues, func(topic string, qid int32) (int64, error) {
		if topic != "Gone" {
			return 0, fmt.Errorf("asked about %s", topic)
		}
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if n > 1 {
			overlapOnce.Do(func() { close(overlapped) })
		}
		select {
		case <-overlapped:
		case <-time.After(10 * time.Second):
			return 0, errors.New("no other ask came while this one was in flight")
		}
		time.Sleep(time.Millisecond) // a round trip, while more asks come
		if qid%3 == 0 {
			return 0, nil
		}
		return int64(qid), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(empty) != (queues+2)/3 {
		t.Fatalf("%d queues named empty, want %d", len(empty), (queues+2)/3)
	}
	for i, qid := range empty {
		if qid != int32(3*i) {
			t.Fatalf("empty queue %d is %d, want %d (every third, in order)", i, qid, 3*i)
		}
	}
	if m := most.Load(); m > maxOffsetAsksInFlight {
		t.Errorf("%d asks were in flight at once, want at most %d", m, maxOffsetAsksInFlight)
	}
}

// A master that does not answer for one queue ends the asks: the topic is
// kept, and a master gone away is not asked about the queues left.
func TestMasterEmptyQueuesStopsAtTheFirstError(t *testing.T) {
	const queues = 1000
	var asked atomic.Int32
	_, err := masterEmptyQueues("Gone", queues, func(_ string, qid int32) (int64, error) {
		asked.Add(1)
		if qid == 0 {
			return 0, errors.New("no answer")
		}
		time.Sleep(2 * time.Millisecond) // a round trip
		return 0, nil
	})
	if err == nil || !strings.Contains(err.Error(), "Gone/0") || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("error %v, want the master's missing answer about Gone/0", err)
	}
	if n := asked.Load(); n >= queues {
		t.Errorf("the master was asked about %d queues after it failed to answer for the first, want fewer than %d", n, queues)
	}
}
