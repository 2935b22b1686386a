package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/remoting"
)

// A slave promoted to master re-delivers what was in flight on its master
// and only that: it copied the master's POP in-flight state with the
// consumer offsets. m0 was popped and not acknowledged: it comes back once
// its invisible time is over. m1 was popped and acknowledged: it does not
// come back. Without the state the promoted slave popped every message
// from the committed offset (m0's) on again, m1 included.
func TestPromotedSlaveRedeliversWhatWasInFlight(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	slave := startTestBroker(t, withHA(map[string]string{"brokerRole": "SLAVE", "brokerId": "1", "haMasterAddress": master.haServerAddr()}))
	c, rc := popClient(master)
	sendBodies(t, rc, "PF", 2)
	master.caughtUp()
	req := popclient.PopRequest{Group: "g", Topic: "PF", QueueID: 0, MaxMsgNums: 1, InvisibleTime: time.Second}
	if res := mustPop(t, c, req); fmt.Sprint(bodies(res.Messages)) != "[m0]" {
		t.Fatalf("first pop on the master: %v", bodies(res.Messages))
	}
	req.InvisibleTime = time.Minute
	second := mustPop(t, c, req)
	if fmt.Sprint(bodies(second.Messages)) != "[m1]" {
		t.Fatalf("second pop on the master: %v", bodies(second.Messages))
	}
	if code, _ := c.Ack(ctx20(t), "g", second.Messages[0]); code != remoting.Success {
		t.Fatalf("ack of m1: %d", code)
	}
	mustSend(t, rc, "PF", 0, "m2", "")
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master)

	// The master is lost; the slave is restarted on its store as the
	// master, as RocketMQ's operators promote one.
	master.stop()
	slave.stop()
	promoted := startTestBrokerAt(t, slave.store, withHA(nil))
	pc, _ := popClient(promoted)
	req.PollTime, req.MaxMsgNums = time.Second, 32
	var got []string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && !(slices.Contains(got, "m0") && slices.Contains(got, "m2")); {
		got = append(got, bodies(mustPop(t, pc, req).Messages)...)
	}
	slices.Sort(got)
	if fmt.Sprint(got) != "[m0 m2]" {
		t.Fatalf("popped from the promoted slave: %v, want m0 (in flight, revived) and m2 (new), not m1 (acknowledged)", got)
	}
}
