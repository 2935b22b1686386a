package main

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/remoting"
)

// TestEmbeddedProxyReceiverFollowsRoleSwitch: a gRPC consumer that only
// receives, through the embedded proxy of broker a (the master, b its
// slave), goes on consuming from b soon after the controller makes b
// the master, although the proxy sends nothing that b or a could refuse
// and its route cache would keep a as the master for 10 minutes
// (topicRouteServiceCacheRefreshSeconds): a, a slave now, answers the
// proxy's pops as one (rocketkvSlave), and the proxy asks for the route
// again. What it receives after the switch is popped from and
// acknowledged on b: b's consumer offsets of the group reach the end of
// its queues (popping a, a slave, would move neither). A receive long
// polling on a across the switch is answered with a status.
func TestEmbeddedProxyReceiverFollowsRoleSwitch(t *testing.T) {
	const topic, group = "SwitchReceiveTopic", "SwitchReceiveGroup"
	g := startSwitchGroup(t, topic, 600)
	nsAddr, pool, invoke, a, b := g.nsAddr, g.pool, g.invoke, g.a, g.b

	// ca only receives, through a's proxy; cb sends, through b's.
	ca, cb := newSwitchClient(t, "CA", a.grpcAddr), newSwitchClient(t, "CB", b.grpcAddr)
	consumer := &rmqpb.Settings{ClientType: rmqpb.ClientType_SIMPLE_CONSUMER.Enum(), RequestTimeout: durationpb.New(3 * time.Second),
		PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{Group: &rmqpb.Resource{Name: group},
			Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: &rmqpb.Resource{Name: topic},
				Expression: &rmqpb.FilterExpression{Type: rmqpb.FilterType_TAG, Expression: "*"}}}}}}
	producer := &rmqpb.Settings{ClientType: rmqpb.ClientType_PRODUCER.Enum(), RequestTimeout: durationpb.New(3 * time.Second),
		PubSub: &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{Topics: []*rmqpb.Resource{{Name: topic}}}}}
	ca.telemetry(t, consumer)
	cb.telemetry(t, producer)

	// receiveAll receives through ca until cond holds, acknowledging
	// every message; it returns the bodies received.
	receiveAll := func(what string, d time.Duration, cond func(got []string) bool) []string {
		t.Helper()
		var got []string
		waitFor(t, d, what, func() bool {
			st, msgs, err := ca.receive(t, group, topic, time.Second)
			if err != nil {
				t.Fatalf("receive: %v", err)
			}
			if c := st.GetCode(); c != rmqpb.Code_OK && c != rmqpb.Code_MESSAGE_NOT_FOUND {
				t.Logf("receive answered %v", st)
			}
			for _, m := range msgs {
				got = append(got, string(m.GetBody()))
				if st := ca.ack(t, group, topic, m); st.GetCode() != rmqpb.Code_OK {
					t.Errorf("ack of %q: %v", m.GetBody(), st)
				}
			}
			return cond(got)
		})
		return got
	}
	if st := cb.send(t, topic, "before"); st.GetCode() != rmqpb.Code_OK {
		t.Fatalf("send before the switch: %v", st)
	}
	receiveAll("the message sent before the switch", 30*time.Second, func(got []string) bool { return slices.Contains(got, "before") })

	// A receive long polling on a across the switch.
	pollDone := make(chan *rmqpb.Status, 1)
	go func() {
		st, msgs, err := ca.receive(t, group, topic, 8*time.Second)
		if err != nil {
			t.Errorf("the receive long polling across the switch failed as a call: %v", err)
		}
		if len(msgs) > 0 {
			t.Errorf("the receive long polling across the switch got %d messages, none sent", len(msgs))
		}
		pollDone <- st
	}()

	g.elect(t, topic, b.addr)
	waitFor(t, 30*time.Second, "the name server to route b as master and a as its slave", func() bool {
		m, s := masterOf(t, pool, nsAddr, topic)
		return m == b.addr && slices.Equal(s, []string{a.addr})
	})
	if st := <-pollDone; st.GetCode() != rmqpb.Code_OK && st.GetCode() != rmqpb.Code_MESSAGE_NOT_FOUND && st.GetCode() != rmqpb.Code_INTERNAL_SERVER_ERROR {
		t.Errorf("the receive long polling across the switch answered %v", st)
	}
	waitFor(t, 60*time.Second, "a send through b's proxy after the switch", func() bool {
		return cb.send(t, topic, "after").GetCode() == rmqpb.Code_OK
	})

	// consumedOnB reports whether b's consumer offsets of the group
	// reach the end of both queues.
	consumedOnB := func() bool {
		for q := range 2 {
			qid := strconv.Itoa(q)
			end := invoke(b.addr, remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": qid})
			off := invoke(b.addr, remoting.QueryConsumerOffset, map[string]string{"consumerGroup": group, "topic": topic, "queueId": qid})
			if end.Code != remoting.Success || off.Code != remoting.Success || off.ExtFields["offset"] != end.ExtFields["offset"] {
				return false
			}
		}
		return true
	}
	// Well within the 10 minutes of the route's refresh (a hang guard,
	// not a measure).
	got := receiveAll("the message sent after the switch to be received from b and acknowledged there", 15*time.Second,
		func(got []string) bool { return slices.Contains(got, "after") && consumedOnB() })
	t.Logf("received after the switch: %v", got)
}
