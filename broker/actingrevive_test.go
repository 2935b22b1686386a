package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// bodiesIn returns the bodies of the messages of topic's queues 0-3 on
// tb, with the messages.
func bodiesIn(t *testing.T, tb *testBroker, topic string) ([]string, []commitlog.Message) {
	t.Helper()
	var bodies []string
	var msgs []commitlog.Message
	for _, ms := range pulledFrom(t, tb, topic) {
		for _, m := range ms {
			bodies = append(bodies, string(m.Body))
			msgs = append(msgs, m)
		}
	}
	slices.Sort(bodies)
	return bodies, msgs
}

// waitRoute waits until the name server routes topic to broker group
// name.
func waitRoute(t *testing.T, c escapeCluster, topic, name string) {
	t.Helper()
	waitFor(t, "the route of "+topic+" to name "+name, func() bool {
		r, err := routeOf(t, c.ns, topic)
		if err != nil {
			return false
		}
		for _, qd := range r.QueueDatas {
			if qd.BrokerName == name {
				return true
			}
		}
		return false
	})
}

// An acting master with enableRemoteEscape revives what its master had
// in flight, from the POP state it copied, through the escape bridge
// into the pop-retry topic of the other group's master once its
// invisible time is over, where a consumer pops it: not a message
// acknowledged on the master, nor one acknowledged on the acting master
// after the failover, and its own pops start past what the master
// popped (revived, not popped again). With the master back, the slave's
// revive stops: a checkpoint due after that is the master's to revive.
func TestActingMasterRevivesPopThroughEscape(t *testing.T) {
	const (
		topic = "PRV"
		group = "prv-g"
		// soon is the invisible time of the messages revived while the
		// master is down, later of the one due after it is back.
		soon  = 6 * time.Second
		later = 16 * time.Second
	)
	retry := pop.RetryTopicV1(topic, group)
	var first, second popclient.PopResult
	var poppedAt time.Time
	c := startEscapeCluster(t, topic, nil, func(master, other *testBroker) {
		// The other group's master has the pop-retry topic, which the
		// bridge finds in its route (RocketMQ's finds it there only).
		createTopic(t, other.client(nil), retry, 1, 1)
		mc := master.client(nil)
		pc := popclient.New(mc, master.cfg.BrokerName)
		sendBodies(t, mc, topic, 5)
		master.caughtUp()
		poppedAt = time.Now()
		first = mustPop(t, pc, popclient.PopRequest{Group: group, Topic: topic, QueueID: 0, MaxMsgNums: 2, InvisibleTime: soon})
		second = mustPop(t, pc, popclient.PopRequest{Group: group, Topic: topic, QueueID: 0, MaxMsgNums: 1, InvisibleTime: later})
		acked := mustPop(t, pc, popclient.PopRequest{Group: group, Topic: topic, QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Minute})
		if len(first.Messages) != 2 || len(second.Messages) != 1 || len(acked.Messages) != 1 {
			t.Fatalf("pops on the master: %d, %d, %d messages, want 2, 1, 1", len(first.Messages), len(second.Messages), len(acked.Messages))
		}
		if code, err := pc.Ack(ctx20(t), group, acked.Messages[0]); err != nil || code != remoting.Success {
			t.Fatalf("ack on the master: %d %v", code, err)
		}
	})
	waitRoute(t, c, retry, c.other.cfg.BrokerName)
	t.Logf("acting %v after the pops", time.Since(poppedAt))
	if !c.slave.popSvc.ActingRevive() {
		t.Fatal("the acting master runs no POP revive")
	}

	// The acting master's pops start past what the master popped: m4,
	// not m0-m2 again (they are revived) nor m3 (acknowledged).
	sc := popclient.New(c.slave.client(nil), c.slave.cfg.BrokerName)
	got := mustPop(t, sc, popclient.PopRequest{Group: group, Topic: topic, QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if len(got.Messages) != 1 || string(got.Messages[0].Body) != "m4" {
		var bodies []string
		for _, m := range got.Messages {
			bodies = append(bodies, string(m.Body))
		}
		t.Fatalf("pop on the acting master: %q, want [m4]", bodies)
	}
	// m1, popped on the master, is acknowledged on the acting master
	// before its invisible time is over: not revived.
	if code, err := sc.Ack(ctx20(t), group, first.Messages[1]); err != nil || code != remoting.Success {
		t.Fatalf("ack on the acting master: %d %v", code, err)
	}
	if since := time.Since(poppedAt); since >= soon {
		t.Fatalf("the failover took %v, past the invisible time %v: the test cannot tell an ack from a revive", since, soon)
	}

	var msgs []commitlog.Message
	waitFor(t, "m0 revived into the other group's pop-retry topic", func() bool {
		_, msgs = bodiesIn(t, c.other, retry)
		return len(msgs) > 0
	})
	time.Sleep(time.Second) // a second put, or m1's, would show by now
	bodies, msgs := bodiesIn(t, c.other, retry)
	if !slices.Equal(bodies, []string{"m0"}) {
		t.Fatalf("the other group's pop-retry topic holds %q, want [m0]", bodies)
	}
	m := msgs[0]
	props := commitlog.ParseProperties(m.Properties)
	if m.ReconsumeTimes != 1 || props[pop.PropertyFirstPopTime] == "" || props[kvindex.PropertyRevivedFrom] != "" || props["WAIT"] != "false" {
		t.Fatalf("revived message: reconsumeTimes %d, properties %q", m.ReconsumeTimes, m.Properties)
	}
	if inFlight(t, c.slave, group, topic, 0, 0) {
		t.Error("the acting master still holds m0 in flight after its revive")
	}
	// A consumer of the group pops it from the other group's master.
	oc := popclient.New(c.other.client(nil), c.other.cfg.BrokerName)
	var popped []string
	waitFor(t, "a consumer to pop m0 from the other group's master", func() bool {
		res, err := oc.Pop(ctx20(t), popclient.PopRequest{Group: group, Topic: topic, QueueID: -1, MaxMsgNums: 32, InvisibleTime: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Messages {
			popped = append(popped, string(m.Body))
		}
		return len(popped) > 0
	})
	if !slices.Equal(popped, []string{"m0"}) {
		t.Fatalf("popped %q from the other group's master, want [m0]", popped)
	}

	// The master back: the slave's revive stops before m2 is due.
	master2 := startTestBrokerAt(t, c.master.store, actingSettings(c.ns.Addr().String(), nil))
	waitFor(t, "the slave to stop acting", func() bool { return !c.slave.actingMaster() })
	if c.slave.popSvc.ActingRevive() {
		t.Fatal("the slave's POP revive still runs with its master back")
	}
	if since := time.Since(poppedAt); since >= later {
		t.Fatalf("the master came back %v after the pops, past m2's invisible time %v", since, later)
	}
	// The master revives m2 itself (and m0 and m1 again: it knows
	// nothing of the acting master's revive and acks, as RocketMQ's).
	for deadline := poppedAt.Add(later + 10*time.Second); ; time.Sleep(50 * time.Millisecond) {
		if b, _ := bodiesIn(t, master2, retry); slices.Contains(b, "m2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting: the master to revive m2")
		}
	}
	time.Sleep(500 * time.Millisecond)
	if bodies, _ := bodiesIn(t, c.other, retry); !slices.Equal(bodies, []string{"m0"}) {
		t.Fatalf("with the master back, the other group's pop-retry topic holds %q, want [m0]", bodies)
	}
}

// Without enableRemoteEscape an acting master revives nothing (RocketMQ's
// bridge refuses every put with SERVICE_NOT_AVAILABLE): the message the
// master had in flight stays in the slave's copy past its invisible
// time, and the slave's pops deliver it again from the queue instead.
func TestActingMasterWithoutEscapeRevivesNothing(t *testing.T) {
	const topic, group = "PRN", "prn-g"
	retry := pop.RetryTopicV1(topic, group)
	const invisible = time.Second
	c := startEscapeCluster(t, topic, map[string]string{"enableRemoteEscape": "false"}, func(master, other *testBroker) {
		createTopic(t, other.client(nil), retry, 1, 1)
		mc := master.client(nil)
		sendBodies(t, mc, topic, 1)
		master.caughtUp()
		res := mustPop(t, popclient.New(mc, master.cfg.BrokerName), popclient.PopRequest{Group: group, Topic: topic, QueueID: 0, MaxMsgNums: 1, InvisibleTime: invisible})
		if len(res.Messages) != 1 {
			t.Fatalf("pop on the master: %d messages", len(res.Messages))
		}
	})
	waitRoute(t, c, retry, c.other.cfg.BrokerName)
	if c.slave.popSvc.ActingRevive() {
		t.Fatal("an acting master without enableRemoteEscape runs its POP revive")
	}
	time.Sleep(invisible + 2*time.Second)
	if bodies, _ := bodiesIn(t, c.other, retry); len(bodies) != 0 {
		t.Fatalf("the other group's pop-retry topic holds %q, want nothing", bodies)
	}
	if !inFlight(t, c.slave, group, topic, 0, 0) {
		t.Fatal("the slave's copy of the master's checkpoint is gone")
	}
	res, err := popclient.New(c.slave.client(nil), c.slave.cfg.BrokerName).Pop(context.Background(),
		popclient.PopRequest{Group: group, Topic: topic, QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if err != nil || len(res.Messages) != 1 || string(res.Messages[0].Body) != "m0" {
		t.Fatalf("pop on the acting master: %v, %d messages, want m0 again", err, len(res.Messages))
	}
}

// On an acting master that revives, a change of invisible time of a
// message popped from the master moves it in the copy to its new
// deadline (RocketMQ's acting master puts the new checkpoint through its
// escape bridge): m0, shortened, is revived at its new deadline through
// the bridge and is then no longer in flight (the master's checkpoint,
// due much later, is gone with the change), and m1, moved, is taken out
// by an ack with the new handle; a message the acting master popped
// itself still cannot have its invisible time changed (SYSTEM_ERROR, as
// on any slave). The master's pops are invisible for longer than any
// failover takes, so that the changes come before the master's deadline
// however slowly the slave takes over; nothing waits for that deadline.
func TestActingMasterChangesInvisibleTimeOfTheMastersPops(t *testing.T) {
	const topic, group = "PRC", "prc-g"
	const invisible = 10 * time.Minute
	retry := pop.RetryTopicV1(topic, group)
	var popped []popclient.Message
	var poppedAt time.Time
	c := startEscapeCluster(t, topic, nil, func(master, other *testBroker) {
		createTopic(t, other.client(nil), retry, 1, 1)
		mc := master.client(nil)
		sendBodies(t, mc, topic, 3)
		master.caughtUp()
		poppedAt = time.Now()
		pc := popclient.New(mc, master.cfg.BrokerName)
		for range 2 {
			res := mustPop(t, pc, popclient.PopRequest{Group: group, Topic: topic, QueueID: 0, MaxMsgNums: 1, InvisibleTime: invisible})
			if len(res.Messages) != 1 {
				t.Fatalf("pop on the master: %d messages, want 1", len(res.Messages))
			}
			popped = append(popped, res.Messages[0])
		}
	})
	waitRoute(t, c, retry, c.other.cfg.BrokerName)
	if since := time.Since(poppedAt); since >= invisible {
		t.Fatalf("the failover took %v, past the invisible time %v", since, invisible)
	}
	if !inFlight(t, c.slave, group, topic, 0, 0) || !inFlight(t, c.slave, group, topic, 0, 1) {
		t.Fatal("the acting master's copy does not hold the master's pops of m0 and m1")
	}
	sc := popclient.New(c.slave.client(nil), c.slave.cfg.BrokerName)

	// m0, due in minutes, becomes visible in a second: revived then.
	if code, _, err := sc.ChangeInvisibleTime(ctx20(t), group, popped[0], time.Second); err != nil || code != remoting.Success {
		t.Fatalf("change of m0's invisible time on the acting master: %d %v, want SUCCESS", code, err)
	}
	waitUntil(t, time.Minute, "m0 revived at its new deadline into the other group's pop-retry topic", func() bool {
		bodies, _ := bodiesIn(t, c.other, retry)
		return len(bodies) > 0
	})
	if bodies, _ := bodiesIn(t, c.other, retry); !slices.Equal(bodies, []string{"m0"}) {
		t.Fatalf("the other group's pop-retry topic holds %q, want [m0]", bodies)
	}
	if inFlight(t, c.slave, group, topic, 0, 0) {
		t.Fatal("m0 still in flight on the acting master after its revive at the new deadline: the master's checkpoint stayed")
	}

	// m1 moves to a minute; an ack with the new handle takes it out.
	code, h, err := sc.ChangeInvisibleTime(ctx20(t), group, popped[1], time.Minute)
	if err != nil || code != remoting.Success {
		t.Fatalf("change of m1's invisible time on the acting master: %d %v, want SUCCESS", code, err)
	}
	if !inFlight(t, c.slave, group, topic, 0, 1) {
		t.Fatal("m1 is not in flight on the acting master after the change")
	}
	moved := popped[1]
	moved.Handle = h
	if code, err := sc.Ack(ctx20(t), group, moved); err != nil || code != remoting.Success {
		t.Fatalf("ack with the new handle: %d %v", code, err)
	}
	if inFlight(t, c.slave, group, topic, 0, 1) {
		t.Fatal("m1 still in flight on the acting master after the ack with its new handle")
	}

	own := mustPop(t, sc, popclient.PopRequest{Group: group, Topic: topic, QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute})
	if len(own.Messages) != 1 || string(own.Messages[0].Body) != "m2" {
		t.Fatalf("pop on the acting master: %d messages, want m2", len(own.Messages))
	}
	if code, _, err := sc.ChangeInvisibleTime(ctx20(t), group, own.Messages[0], time.Minute); err != nil || code != remoting.SystemError {
		t.Fatalf("change of invisible time of the acting master's own pop: %d %v, want SYSTEM_ERROR", code, err)
	}
}
