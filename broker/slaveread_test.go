package broker

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

// suggestedBroker pulls queue 0 of topic from offset for group g and
// returns the answer's code and suggestWhichBrokerId.
func suggestedBroker(t *testing.T, c *remoting.Client, topic string, offset int64) (int32, string) {
	t.Helper()
	r := call(t, c, remoting.PullMessage, pullReq("g", topic, 0, offset, pullSuspend, time.Second, "*"), nil)
	return r.Code, r.ExtFields["suggestWhichBrokerId"]
}

// With slaveReadEnable, a master sends a consumer reading messages older
// than accessMessageInMemoryMaxRatio of the machine's memory to the
// group's whichBrokerWhenConsumeSlowly (1 by default, the first slave),
// and keeps the others on the group's brokerId. Without it every answer
// names the master. accessMessageInMemoryMaxRatio=0 makes every message
// old.
func TestMasterSuggestsTheSlaveToSlowConsumers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		want     string
	}{
		{"slave read, old messages", map[string]string{"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": "0"}, "1"},
		{"slave read, recent messages", map[string]string{"slaveReadEnable": "true"}, "0"},
		{"no slave read", map[string]string{"accessMessageInMemoryMaxRatio": "0"}, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startTestBroker(t, tc.settings)
			c := b.client(nil)
			mustSend(t, c, "SR", 0, "one", "")
			mustSend(t, c, "SR", 0, "two", "")
			b.caughtUp()
			if code, got := suggestedBroker(t, c, "SR", 0); code != remoting.Success || got != tc.want {
				t.Fatalf("pull: code %d, suggestWhichBrokerId %q, want %s", code, got, tc.want)
			}
		})
	}
}

// A slave serving reads sends a consumer that keeps up back to its master,
// at once when it has nothing for it rather than holding the pull; one
// reading old messages it serves, naming itself.
func TestSlaveSendsConsumersKeepingUpToTheMaster(t *testing.T) {
	ns := startTestNameServer(t)
	addr := ns.Addr().String()
	master := startTestBroker(t, withHA(map[string]string{"namesrvAddr": addr}))
	mc := master.client(nil)
	mustSend(t, mc, "SR", 0, "one", "")
	master.caughtUp()
	slaves := map[string]*testBroker{}
	for name, ratio := range map[string]string{"recent": "40", "old": "0"} {
		slaves[name] = startTestBroker(t, withHA(map[string]string{"namesrvAddr": addr, "brokerRole": "SLAVE",
			"brokerId": map[string]string{"recent": "1", "old": "2"}[name], "haMasterAddress": master.haServerAddr(),
			"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": ratio}))
	}
	for name, s := range slaves {
		waitReplicated(t, master, s)
		deadline := time.Now().Add(10 * time.Second)
		for s.masterAddr() == "" && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if s.masterAddr() == "" {
			t.Fatalf("slave %s never learnt its master's address", name)
		}
		createTopic(t, s.client(nil), "SR", 4, 4) // the slave's own copy of the config, until it syncs
	}

	sc := slaves["recent"].client(nil)
	if code, got := suggestedBroker(t, sc, "SR", 0); code != remoting.Success || got != "0" {
		t.Errorf("slave, recent message: code %d, suggestWhichBrokerId %q, want SUCCESS and 0", code, got)
	}
	// A held pull would be answered PULL_NOT_FOUND when its second ends.
	if code, got := suggestedBroker(t, sc, "SR", 1); code != remoting.PullRetryImmediately || got != "0" {
		t.Errorf("slave, at the end of the queue: code %d, suggestWhichBrokerId %q, want PULL_RETRY_IMMEDIATELY and 0", code, got)
	}
	if code, got := suggestedBroker(t, slaves["old"].client(nil), "SR", 0); code != remoting.Success || got != "1" {
		t.Errorf("slave, old message: code %d, suggestWhichBrokerId %q, want SUCCESS and 1", code, got)
	}
	// The offset a pull commits is the master's to store: the slave takes
	// its offsets from the master.
	req := pullReq("g", "SR", 0, 1, pullCommitOffset, 0, "*")
	req["commitOffset"] = "1"
	call(t, sc, remoting.PullMessage, req, nil)
	if off, ok, err := slaves["recent"].offsets.Get("g", "SR", 0); err != nil || ok {
		t.Errorf("the slave stored the offset %d a pull committed (%v)", off, err)
	}
}

// disableConsumeIfConsumerReadSlowly turns off the consumption of a group
// whose pull read further behind the CommitLog's end than
// consumerFallbehindThreshold (0 here: any message but the last): that
// pull is answered, the next ones refused.
func TestSlowConsumerGroupDisabled(t *testing.T) {
	for _, on := range []bool{false, true} {
		b := startTestBroker(t, map[string]string{"disableConsumeIfConsumerReadSlowly": strconv.FormatBool(on), "consumerFallbehindThreshold": "0"})
		c := b.client(nil)
		mustSend(t, c, "Slow", 0, "one", "")
		mustSend(t, c, "Slow", 0, "two", "")
		b.caughtUp()
		if code, _ := suggestedBroker(t, c, "Slow", 0); code != remoting.Success {
			t.Fatalf("on=%v: first pull: code %d", on, code)
		}
		gc, err := b.groupConfig("g", false)
		if err != nil || gc.ConsumeEnable == on {
			t.Fatalf("on=%v: group after a pull far behind: consumeEnable %v (%v)", on, gc.ConsumeEnable, err)
		}
		want := int32(remoting.Success)
		if on {
			want = remoting.NoPermission
		}
		if code, _ := suggestedBroker(t, c, "Slow", 0); code != want {
			t.Fatalf("on=%v: next pull: code %d, want %d", on, code, want)
		}
	}
}

// A pop reading as far behind is treated the same way.
func TestSlowPopGroupDisabled(t *testing.T) {
	b := startTestBroker(t, map[string]string{"disableConsumeIfConsumerReadSlowly": "true", "consumerFallbehindThreshold": "0"})
	c, rc := popClient(b)
	sendBodies(t, rc, "SlowPop", 2)
	b.caughtUp()
	req := popclient.PopRequest{Group: "gp", Topic: "SlowPop", QueueID: -1, MaxMsgNums: 1, InvisibleTime: time.Minute}
	if res := mustPop(t, c, req); res.Code != remoting.Success || len(res.Messages) != 1 {
		t.Fatalf("first pop: %d, %d messages", res.Code, len(res.Messages))
	}
	if gc, err := b.groupConfig("gp", false); err != nil || gc.ConsumeEnable {
		t.Fatalf("group after a pop far behind: consumeEnable %v (%v)", gc.ConsumeEnable, err)
	}
	if res := mustPop(t, c, req); res.Code != remoting.NoPermission {
		t.Fatalf("next pop: %d, want NO_PERMISSION", res.Code)
	}
}

// A slave never moves a consumer's offset, as RocketMQ's slave does not
// (offsetCheckInSlave false): a pull outside what it holds (behind its
// master in replication, or new) is PULL_RETRY_IMMEDIATELY from the same
// offset, sending the consumer to the master, with or without its master
// known and whatever the group's brokerId, as RocketMQ's classic slave
// (composeResponseHeader, minBrokerIdInGroup 0). A moved offset would be
// stored by the client and consumed again from the master.
func TestASlaveDoesNotMoveConsumerOffsets(t *testing.T) {
	for _, tc := range []struct {
		masterKnown   bool
		groupBrokerID string // the group's preferred broker
		want          string // suggestWhichBrokerId
	}{
		{false, "0", "0"},
		{true, "0", "0"},
		// A group that reads from the slave is still sent to the master
		// for what the slave lacks.
		{true, "1", "0"},
		{false, "1", "0"},
	} {
		s := startTestBroker(t, map[string]string{"brokerRole": "SLAVE", "brokerId": "1", "slaveReadEnable": "true"})
		if tc.masterKnown {
			a := "127.0.0.1:1"
			s.repl.masterAddr.Store(&a)
		}
		c := s.client(nil)
		createTopic(t, c, "SlaveOffsets", 1, 1)
		if r := call(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"g","brokerId":`+tc.groupBrokerID+`}`)); r.Code != remoting.Success {
			t.Fatalf("create group: %d %s", r.Code, r.Remark)
		}
		r := call(t, c, remoting.PullMessage, pullReq("g", "SlaveOffsets", 0, 5, 0, 0, "*"), nil)
		if r.Code != remoting.PullRetryImmediately || r.ExtFields["nextBeginOffset"] != "5" || r.ExtFields["suggestWhichBrokerId"] != tc.want {
			t.Fatalf("%+v: pull at 5 of a queue the slave holds nothing of: code %d (%s) nextBeginOffset %s suggest %s; want %d from 5, broker %s",
				tc, r.Code, r.Remark, r.ExtFields["nextBeginOffset"], r.ExtFields["suggestWhichBrokerId"], remoting.PullRetryImmediately, tc.want)
		}
		s.stop()
	}
}

// A slave counts a read as in memory within 10 % less of memory than its
// master (RocketMQ's BrokerStartup lowers accessMessageInMemoryMaxRatio by
// 10 on a slave): a consumer the master sends to the slave for being
// behind is not sent straight back to the master.
func TestASlaveCountsTenPercentLessOfMemoryAsHot(t *testing.T) {
	master := startTestBroker(t, map[string]string{"accessMessageInMemoryMaxRatio": "40"})
	slave := startTestBroker(t, map[string]string{"brokerRole": "SLAVE", "brokerId": "1", "accessMessageInMemoryMaxRatio": "40"})
	mem := physicalMemory()
	if master.hotBytes != mem*40/100 || slave.hotBytes != mem*30/100 {
		t.Fatalf("hot bytes: master %d, slave %d; want %d and %d (40 %% and 30 %% of %d)", master.hotBytes, slave.hotBytes, mem*40/100, mem*30/100, mem)
	}
	// GET_BROKER_CONFIG reports the ratio in force, as RocketMQ's reports
	// the field its startup lowered.
	for _, tc := range []struct {
		b    *testBroker
		want string
	}{{master, "accessMessageInMemoryMaxRatio=40\n"}, {slave, "accessMessageInMemoryMaxRatio=30\n"}} {
		r := call(t, tc.b.client(nil), remoting.GetBrokerConfig, nil, nil)
		if r.Code != remoting.Success || !strings.Contains(string(r.Body), tc.want) {
			t.Errorf("GET_BROKER_CONFIG of the %s: %d %s; want a line %q", tc.b.cfg.BrokerRole, r.Code, r.Remark, tc.want)
		}
	}
}

// A slave whose name servers name no master still sends consumers to the
// master (suggestWhichBrokerId 0, as RocketMQ's slave always does), but
// holds a pull it has nothing for, as a master does, instead of answering
// PULL_RETRY_IMMEDIATELY at once as RocketMQ's does: a push consumer
// whose route has no master would come straight back to the slave and
// spin (suggestBroker).
func TestASlaveWithoutAMasterHoldsPulls(t *testing.T) {
	s := startTestBroker(t, map[string]string{"brokerRole": "SLAVE", "brokerId": "1", "slaveReadEnable": "true"})
	c := s.client(nil)
	createTopic(t, c, "NoMaster", 1, 1)
	if r := call(t, c, remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"g","brokerId":1}`)); r.Code != remoting.Success {
		t.Fatalf("create group: %d %s", r.Code, r.Remark)
	}
	const suspend = 300 * time.Millisecond
	start := time.Now()
	r := call(t, c, remoting.PullMessage, pullReq("g", "NoMaster", 0, 0, pullSuspend, suspend, "*"), nil)
	if r.Code != remoting.PullNotFound || r.ExtFields["suggestWhichBrokerId"] != "0" {
		t.Fatalf("pull at the end of the queue of a slave without a master: code %d (%s) suggest %s; want PULL_NOT_FOUND naming broker 0",
			r.Code, r.Remark, r.ExtFields["suggestWhichBrokerId"])
	}
	if held := time.Since(start); held < suspend {
		t.Fatalf("answered after %s, before the suspend timeout %s: not held", held, suspend)
	}
}
