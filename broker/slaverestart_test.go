package broker

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// slaveRestartSettings are the settings of a slave of the master whose HA
// address is masterHA, for starting it again on its store.
func slaveRestartSettings(masterHA string) map[string]string {
	return withHA(map[string]string{"brokerRole": "SLAVE", "brokerId": "1", "haMasterAddress": masterHA})
}

// What consumers took through a slave while its master was down survives
// a restart of the slave, as RocketMQ's slave persists its
// consumerOffset.json and consumerOrderInfo.json: a client's offset
// commit on it (UPDATE_CONSUMER_OFFSET), and the batch and progress of
// its orderly pops and acks, which still lock the queue for another
// consumer and move the group on from where it was. When the master is
// back, its sync takes precedence as RocketMQ's: a pair the master's
// offset table has replaces the slave's, whether behind it or not (the
// commit made on the slave is gone), and a pair it does not have keeps
// the slave's own progress.
func TestASlavesOwnOffsetsSurviveItsRestart(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	masterHA := master.haServerAddr()
	slave := startSlaveOf(t, master, nil)
	_, mrc := popClient(master)
	sendBodies(t, mrc, "SK", 6)
	createGroups(t, mrc, "c", "o")
	commit(t, mrc, "c", "SK", 0, 1)
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master) // the topic, the groups, c's offset 1
	master.stop()

	// The master down: the consumers go to the slave.
	sc, src := popClient(slave)
	ctx := ctx20(t)
	if r := call(t, src, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "c", "topic": "SK", "queueId": "0", "commitOffset": "4"}, nil); r.Code != remoting.Success {
		t.Fatalf("offset commit on the slave: %d %s", r.Code, r.Remark)
	}
	req := popclient.PopRequest{Group: "o", Topic: "SK", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true, AttemptID: "a"}
	first := mustPop(t, sc, req)
	if fmt.Sprint(bodies(first.Messages)) != "[m0 m1]" {
		t.Fatalf("orderly pop on the slave: %v, want [m0 m1]", bodies(first.Messages))
	}
	if code, err := sc.Ack(ctx, "o", first.Messages[0]); err != nil || code != remoting.Success {
		t.Fatalf("orderly ack of m0 on the slave: %d %v", code, err)
	}

	slave.stop()
	slave = startTestBrokerAt(t, slave.store, slaveRestartSettings(masterHA))
	sc, src = popClient(slave)
	ctx = ctx20(t)
	if off := committedOffset(t, src, "c", "SK", 0); off != 4 {
		t.Fatalf("c's offset on the restarted slave: %d, want the 4 committed on it", off)
	}
	req.AttemptID = "b"
	if got := mustPop(t, sc, req); len(got.Messages) != 0 {
		t.Fatalf("another consumer's orderly pop on the restarted slave while m1 of the batch is in flight: %v, want nothing", bodies(got.Messages))
	}
	if code, err := sc.Ack(ctx, "o", first.Messages[1]); err != nil || code != remoting.Success {
		t.Fatalf("orderly ack of m1 on the restarted slave: %d %v", code, err)
	}
	next := mustPop(t, sc, req)
	if fmt.Sprint(bodies(next.Messages)) != "[m2 m3]" {
		t.Fatalf("orderly pop on the restarted slave after the batch's acks: %v, want [m2 m3]", bodies(next.Messages))
	}
	for _, m := range next.Messages {
		if code, err := sc.Ack(ctx, "o", m); err != nil || code != remoting.Success {
			t.Fatalf("orderly ack of %s on the restarted slave: %d %v", m.Body, code, err)
		}
	}

	// The master back, with its own offsets: c's replaces the slave's
	// commit (RocketMQ's putAll, no rule for a smaller offset); it has
	// none of o, whose progress on the slave stays.
	master = startTestBrokerAt(t, master.store, withHA(nil))
	syncSlave(t, slave, master)
	if off := committedOffset(t, src, "c", "SK", 0); off != 1 {
		t.Fatalf("c's offset on the slave after the master's sync: %d, want the master's 1", off)
	}
	if got := mustPop(t, sc, req); fmt.Sprint(bodies(got.Messages)) != "[m4 m5]" {
		t.Fatalf("orderly pop on the slave after a sync of a master without o's offset: %v, want [m4 m5]", bodies(got.Messages))
	}
}

// startChildSlave starts a slave of master in a child process on store,
// at port.
func startChildSlave(t *testing.T, master *testBroker, store string, port int) *childBroker {
	t.Helper()
	return startChildBroker(t, store, port, "brokerRole=SLAVE", "brokerId=1", "haMasterAddress="+master.haServerAddr(),
		"haSendHeartbeatInterval=50", "slaveReadEnable=true")
}

// A slave SIGKILLed right after it answered a client's offset commit and
// the orderly pops and acks of another group keeps them when it starts
// again: each is in its store before it is answered.
func TestASlavesOwnOffsetsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	master := startTestBroker(t, withHA(map[string]string{"mappedFileSizeCommitLog": strconv.Itoa(childSegmentSize)}))
	_, mrc := popClient(master)
	sendBodies(t, mrc, "KS", 6)
	store := t.TempDir()
	port := freeTCPPort(t)
	slave := startChildSlave(t, master, store, port)
	rc := slave.dial()
	// No name server tells this slave where its master's Remoting port
	// is, so nothing is synced: the slave's own copies of the configs.
	createTopic(t, rc, "KS", 1, 1)
	createGroups(t, rc, "c", "o")
	waitFor(t, "the slave holds the master's messages", func() bool {
		r := call(t, rc, remoting.GetMaxOffset, map[string]string{"topic": "KS", "queueId": "0"}, nil)
		return r.Code == remoting.Success && r.ExtFields["offset"] == "6"
	})

	sc := popclient.New(rc, master.cfg.BrokerName)
	ctx := ctx20(t)
	if r := call(t, rc, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "c", "topic": "KS", "queueId": "0", "commitOffset": "5"}, nil); r.Code != remoting.Success {
		t.Fatalf("offset commit on the slave: %d %s", r.Code, r.Remark)
	}
	req := popclient.PopRequest{Group: "o", Topic: "KS", QueueID: 0, MaxMsgNums: 3, InvisibleTime: time.Minute, Order: true, AttemptID: "a"}
	first := mustPop(t, sc, req)
	if fmt.Sprint(bodies(first.Messages)) != "[m0 m1 m2]" {
		t.Fatalf("orderly pop on the slave: %v, want [m0 m1 m2]", bodies(first.Messages))
	}
	for _, m := range first.Messages[:2] {
		if code, err := sc.Ack(ctx, "o", m); err != nil || code != remoting.Success {
			t.Fatalf("orderly ack of %s on the slave: %d %v", m.Body, code, err)
		}
	}
	slave.kill()

	slave.start()
	rc = slave.dial()
	sc = popclient.New(rc, master.cfg.BrokerName)
	ctx = ctx20(t)
	if off := committedOffset(t, rc, "c", "KS", 0); off != 5 {
		t.Fatalf("c's offset on the slave after a SIGKILL: %d, want the 5 committed on it", off)
	}
	req.AttemptID = "b"
	if got := mustPop(t, sc, req); len(got.Messages) != 0 {
		t.Fatalf("another consumer's orderly pop after a SIGKILL while m2 of the batch is in flight: %v, want nothing", bodies(got.Messages))
	}
	if code, err := sc.Ack(ctx, "o", first.Messages[2]); err != nil || code != remoting.Success {
		t.Fatalf("orderly ack of m2 after a SIGKILL: %d %v", code, err)
	}
	if got := mustPop(t, sc, req); fmt.Sprint(bodies(got.Messages)) != "[m3 m4 m5]" {
		t.Fatalf("orderly pop after a SIGKILL and the batch's last ack: %v, want [m3 m4 m5]", bodies(got.Messages))
	}
}

// A slave restarted as its group's master (the manual failover) goes on
// from where the consumers that came to it while the old master was
// down were, as RocketMQ's promoted slave goes by its own offset and
// order info tables: the group's committed offset is what its orderly
// acks on the slave committed, the batch handed out on the slave still
// locks the queue for another consumer until its last message is
// acknowledged on the promoted broker, and the next pop starts past it.
// Nothing is left in the slave's own keyspace.
func TestAPromotedSlaveGoesOnFromItsOwnPops(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	slave := startSlaveOf(t, master, nil)
	_, mrc := popClient(master)
	sendBodies(t, mrc, "PS", 6)
	if r := call(t, mrc, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"o"}`)); r.Code != remoting.Success {
		t.Fatalf("create group o on the master: %d %s", r.Code, r.Remark)
	}
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master)
	master.stop()

	sc, _ := popClient(slave)
	ctx := ctx20(t)
	req := popclient.PopRequest{Group: "o", Topic: "PS", QueueID: 0, MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true, AttemptID: "a"}
	var batch popclient.PopResult
	for i, want := range []string{"[m0 m1]", "[m2 m3]"} {
		batch = mustPop(t, sc, req)
		if fmt.Sprint(bodies(batch.Messages)) != want {
			t.Fatalf("orderly pop %d on the slave: %v, want %s", i, bodies(batch.Messages), want)
		}
		acked := batch.Messages
		if i == 1 {
			acked = acked[:1] // m3 stays in flight
		}
		for _, m := range acked {
			if code, err := sc.Ack(ctx, "o", m); err != nil || code != remoting.Success {
				t.Fatalf("orderly ack of %s on the slave: %d %v", m.Body, code, err)
			}
		}
	}

	slave.stop()
	promoted := startTestBrokerAt(t, slave.store, withHA(nil))
	pc, prc := popClient(promoted)
	ctx = ctx20(t)
	if off := committedOffset(t, prc, "o", "PS", 0); off != 3 {
		t.Fatalf("o's offset on the promoted slave: %d, want the 3 its orderly acks committed as a slave", off)
	}
	req.AttemptID = "b"
	if got := mustPop(t, pc, req); len(got.Messages) != 0 {
		t.Fatalf("another consumer's orderly pop on the promoted slave while m3 is in flight: %v, want nothing", bodies(got.Messages))
	}
	if code, err := pc.Ack(ctx, "o", batch.Messages[1]); err != nil || code != remoting.Success {
		t.Fatalf("orderly ack of m3 on the promoted slave: %d %v", code, err)
	}
	if got := mustPop(t, pc, req); fmt.Sprint(bodies(got.Messages)) != "[m4 m5]" {
		t.Fatalf("orderly pop on the promoted slave after m3's ack: %v, want [m4 m5]", bodies(got.Messages))
	}
	if err := promoted.db.Pop().EachSlaveOwn(func(o kvindex.SlaveOwn) bool {
		t.Errorf("left in the slave's own keyspace: %+v", o)
		return true
	}); err != nil {
		t.Fatal(err)
	}
}
