package broker

import (
	"testing"
	"time"
)

// The controller heartbeat reads the running Broker's CommitLog end from
// a goroutine of the Supervisor's while a role switch stops that Broker
// and closes its CommitLog: it reads under the Broker's clogMu and sends
// the last values while the log closes, never a dropped log (a nil
// dereference) nor a data race (which -race reports). The heartbeat's
// read runs in a loop here across two switches; the ends it reports
// never go back (the group's log only grows: nothing is cut).
func TestHeartbeatReadsOffsetsAcrossSwitches(t *testing.T) {
	ctlAddr, a, b := newCtlGroup(t, nil)
	a.start()
	b.start()
	if !a.isMaster() {
		t.Fatal("the first broker is not the master")
	}
	ca := dialCtl(t, a.addr())
	mustSend(t, ca, "TopicTest", 0, "before the switches", "")
	waitUntil(t, 20*time.Second, "the sync state set to hold both", func() bool {
		return len(a.sup.role().syncSet) == 2 && b.end() == a.end()
	})

	var reads int
	var back []int64
	var last int64
	switchAwayAndBack(t, ctlAddr, a, b, nil, func() {
		end, _ := a.sup.heartbeatOffsets()
		reads++
		if end < last {
			back = append(back, last, end)
		}
		last = end
	})
	if len(back) > 0 {
		t.Fatalf("the heartbeat's CommitLog end went back (from, to): %v over %d reads", back, reads)
	}
	if end, _ := a.sup.heartbeatOffsets(); end <= 0 {
		t.Fatalf("the heartbeat reports CommitLog end %d after the switches, with a message stored", end)
	}
}

// replicaOffsets may be called while the Broker stops: it reads the
// CommitLog's end until the stop closes the log and reports nothing (ok
// false) from then on, never a dropped log nor, under -race, a read
// unordered with the close.
func TestReplicaOffsetsWhileTheBrokerStops(t *testing.T) {
	tb := startTestBroker(t, nil)
	if _, _, ok := tb.replicaOffsets(); !ok {
		t.Fatal("a running broker's offsets are not read")
	}
	stop, done := make(chan struct{}), make(chan struct{})
	var reads, closedReads int
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, ok := tb.replicaOffsets(); !ok {
				closedReads++
			}
			reads++
		}
	}()
	tb.stop()
	close(stop)
	<-done
	if _, _, ok := tb.replicaOffsets(); ok {
		t.Fatal("a stopped broker's CommitLog end is still read")
	}
	t.Logf("%d reads during the stop, %d after the log closed", reads, closedReads)
}
