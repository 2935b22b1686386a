package broker

import (
	"strconv"
	"testing"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// RocketMQ's heartbeat creates a consumer group's retry topic with the
// order flag set when one of the consumer's subscriptions is of a topic
// whose order flag is set (hasOrderTopicSub), and sets the flag of the
// existing retry topic again whenever it differs
// (createTopicInSendMessageBackMethod): the change moves the topic
// table's data version without registering at once (updateTopicConfig),
// where the creation registers. A heartbeat without its subscriptions (a
// V2 client's whose fingerprint did not change) and a send-back clear it.
func TestHeartbeatSetsTheRetryTopicOrderFlag(t *testing.T) {
	ns := startHangingNameServer(t)
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.addr, "registerNameServerPeriod": "60000"})
	waitFor(t, "the broker registered", func() bool { return ns.registers.Load() > 0 })
	c := tb.client(nil)
	p := topicChangeProbe{t: t, c: c, ns: ns}
	p.send(remoting.UpdateAndCreateTopic, map[string]string{"topic": "OrdT", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6", "order": "true"}, "")
	p.send(remoting.UpdateAndCreateTopic, map[string]string{"topic": "PlainT", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}, "")
	retry := meta.RetryTopic("og")

	// step sends a heartbeat and checks the retry topic's order flag,
	// whether the data version moved and whether a registration followed.
	step := func(what string, body []byte, order, moves, registers bool) {
		t.Helper()
		regs := p.settledRegistrations()
		_, before := p.topicTable()
		heartbeat(t, c, body)
		after := p.settledRegistrations()
		table, version := p.topicTable()
		tc, ok := table[retry]
		switch {
		case !ok:
			t.Fatalf("%s: no %s in GET_ALL_TOPIC_CONFIG", what, retry)
		case tc.Order != order:
			t.Fatalf("%s: %s order %v, want %v", what, retry, tc.Order, order)
		case (version != before) != moves:
			t.Fatalf("%s: data version %+v -> %+v, want it moved: %v", what, before, version, moves)
		case (after != regs) != registers:
			t.Fatalf("%s: registrations %d -> %d, want one: %v", what, regs, after, registers)
		}
	}
	step("first heartbeat, subscribed to an orderly topic", heartbeatBody("c1", "", "og", map[string]string{"OrdT": "*"}), true, true, true)
	step("same heartbeat again", heartbeatBody("c1", "", "og", map[string]string{"OrdT": "*"}), true, false, false)
	step("subscribed to an unordered topic only", heartbeatBody("c1", "", "og", map[string]string{"PlainT": "*"}), false, true, false)
	step("subscribed to both", heartbeatBody("c1", "", "og", map[string]string{"PlainT": "*", "OrdT": "*"}), true, true, false)
	step("V2 heartbeat with its subscriptions", heartbeatV2Body("c1", "og", "OrdT", "*", 1, 7, false), true, false, false)
	step("V2 heartbeat without its subscriptions", heartbeatV2Body("c1", "og", "OrdT", "*", 1, 7, true), false, true, false)
	step("V2 heartbeat with them again", heartbeatV2Body("c1", "og", "OrdT", "*", 1, 8, false), true, true, false)

	// A send-back clears the flag, as RocketMQ's, which creates or gets
	// the retry topic unordered.
	mustSend(t, c, "OrdT", 0, "m0", "")
	tb.caughtUp()
	m := pullAll(t, tb, c, "OrdT", 0)[0]
	_, before := p.topicTable()
	if r := call(t, c, remoting.ConsumerSendMsgBack, map[string]string{
		"offset": strconv.FormatInt(m.PhyOffset, 10), "group": "og", "delayLevel": "1"}, nil); r.Code != remoting.Success {
		t.Fatalf("send back: %d %s", r.Code, r.Remark)
	}
	table, version := p.topicTable()
	if table[retry].Order || version == before {
		t.Fatalf("after a send-back: %s order %v, data version %+v -> %+v; want unordered and a moved version", retry, table[retry].Order, before, version)
	}
}

// A slave's heartbeat sets its retry topic's order flag as a master's
// does, as RocketMQ's slave runs the same heartbeat: created ordered, and
// cleared by a heartbeat without its subscriptions.
func TestSlaveHeartbeatSetsTheRetryTopicOrderFlag(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	slave := startSlaveOf(t, master, nil)
	mc := master.client(nil)
	if r := call(t, mc, remoting.UpdateAndCreateTopic, map[string]string{"topic": "OrdS", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6", "order": "true"}, nil); r.Code != remoting.Success {
		t.Fatalf("create OrdS: %d %s", r.Code, r.Remark)
	}
	syncSlave(t, slave, master)
	// Stopped: no sync of the master's table comes over the slave's.
	master.stop()
	retry := meta.RetryTopic("os")
	sc := slave.client(nil)
	for _, step := range []struct {
		what  string
		body  []byte
		order bool
	}{
		{"heartbeat subscribed to an orderly topic", heartbeatV2Body("c1", "os", "OrdS", "*", 1, 7, false), true},
		{"heartbeat without its subscriptions", heartbeatV2Body("c1", "os", "OrdS", "*", 1, 7, true), false},
	} {
		heartbeat(t, sc, step.body)
		tc, ok, err := slave.topics.get(retry)
		if err != nil || !ok || tc.Order != step.order {
			t.Fatalf("%s: %s on the slave %+v (%v %v), want order %v", step.what, retry, tc, ok, err, step.order)
		}
	}
}
