package broker

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
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
	slave := startSlaveOf(t, master, nil)
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

// The same failover with the master SIGKILLed, and POP traffic after the
// last sync that the slave never hears of. Nothing acknowledged by a
// SYNC_MASTER is lost: the promoted slave delivers every message but the
// ones acknowledged before the sync (m1-m4, above the committed offset
// since m0 was in flight), which the copied state keeps from coming
// back. m0 and m5-m9 were in flight at the sync (m5-m9 acknowledged after
// it), m10-m19 popped after it, m20-m39 never popped: all come again.
func TestPopStateSurvivesASIGKILLedMaster(t *testing.T) {
	haPort := freeTCPPort(t)
	master := startChildBroker(t, t.TempDir(), freeTCPPort(t), "brokerName=broker-a", "brokerRole=SYNC_MASTER",
		fmt.Sprintf("haListenPort=%d", haPort), "haSendHeartbeatInterval=50")
	segment := strconv.Itoa(childSegmentSize)
	slave := startTestBroker(t, withHA(map[string]string{"brokerRole": "SLAVE", "brokerId": "1", "mappedFileSizeCommitLog": segment,
		"haMasterAddress": fmt.Sprintf("127.0.0.1:%d", haPort)}))
	rc := master.dial()
	c := popclient.New(rc, "broker-a")
	// A SYNC_MASTER answers SLAVE_NOT_AVAILABLE until its slave is
	// connected; from then on each answered send is on the slave.
	waitFor(t, "the slave connected", func() bool { return sendV2(t, rc, "PK", 0, "m0", "").Code == remoting.Success })
	for i := 1; i < 40; i++ {
		mustSend(t, rc, "PK", 0, fmt.Sprintf("m%d", i), "")
	}
	req := popclient.PopRequest{Group: "g", Topic: "PK", QueueID: 0, MaxMsgNums: 10, InvisibleTime: 5 * time.Second, PollTime: time.Second}
	before := mustPop(t, c, req)
	if fmt.Sprint(bodies(before.Messages)) != "[m0 m1 m2 m3 m4 m5 m6 m7 m8 m9]" {
		t.Fatalf("first pop on the master: %v", bodies(before.Messages))
	}
	for _, m := range before.Messages[1:5] {
		if code, err := c.Ack(ctx20(t), "g", m); code != remoting.Success || err != nil {
			t.Fatalf("ack of %s: %d %v", m.Body, code, err)
		}
	}
	ctx := ctx20(t)
	if err := slave.syncFromMaster(ctx, master.addr); err != nil {
		t.Fatalf("sync from the master: %v", err)
	}

	// After the sync: acknowledgements the slave does not copy. An ack
	// that comes after its invisible time on a slow machine changes
	// nothing the assertions depend on.
	for _, m := range before.Messages[5:] {
		_, _ = c.Ack(ctx, "g", m)
	}
	after := mustPop(t, c, req)
	if fmt.Sprint(bodies(after.Messages)) != "[m10 m11 m12 m13 m14 m15 m16 m17 m18 m19]" {
		t.Fatalf("second pop on the master: %v", bodies(after.Messages))
	}
	for _, m := range after.Messages[:5] {
		_, _ = c.Ack(ctx, "g", m)
	}
	master.kill()

	slave.stop()
	promoted := startTestBrokerAt(t, slave.store, withHA(map[string]string{"mappedFileSizeCommitLog": segment}))
	pc, _ := popClient(promoted)
	req.MaxMsgNums = 32
	want := map[string]bool{"m0": true}
	for i := 5; i < 40; i++ {
		want[fmt.Sprintf("m%d", i)] = true
	}
	got := map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && len(got) < len(want); {
		for _, m := range mustPop(t, pc, req).Messages {
			got[string(m.Body)] = true
			if code, err := pc.Ack(ctx, "g", m); code != remoting.Success || err != nil {
				t.Fatalf("ack of %s on the promoted slave: %d %v", m.Body, code, err)
			}
		}
	}
	if !maps.Equal(got, want) {
		var lost, again []string
		for b := range want {
			if !got[b] {
				lost = append(lost, b)
			}
		}
		for b := range got {
			if !want[b] {
				again = append(again, b)
			}
		}
		slices.Sort(lost)
		slices.Sort(again)
		t.Fatalf("the promoted slave lost %v and delivered again %v, acknowledged before the sync", lost, again)
	}
}
