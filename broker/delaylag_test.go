package broker

import (
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/remoting"
)

// A SYNC_MASTER with inSyncReplicas=2 whose slave stopped keeps
// delivering delayed and timer messages, as RocketMQ's schedule service
// and timer put their deliveries with WAIT=false: a delay level's
// progress moves past each delivery without a slave, so the next message
// of the level is delivered too, and a timer batch does not wait for the
// slave before the next. slaveTimeout is far beyond the hang guard: a
// delivery that waited for the slave would not come in time.
func TestSyncMasterDeliversDelayedAndTimerMessagesWithoutItsSlave(t *testing.T) {
	master := startTestBroker(t, withHA(map[string]string{"brokerRole": "SYNC_MASTER", "inSyncReplicas": "2",
		"slaveTimeout": "600000", "timerPrecisionMs": "100"}))
	slave := startSlaveOf(t, master, nil)
	waitReplicated(t, master, slave)
	slave.stop()
	mc := master.client(nil)
	// WAIT=false: the sends themselves do not wait for the slave.
	mustSend(t, mc, "DlyLag", 0, "first", "WAIT\x01false\x02DELAY\x011\x02")
	waitDelivered(t, master, mc, "DlyLag", 0, 1)
	mustSend(t, mc, "DlyLag", 0, "second", "WAIT\x01false\x02DELAY\x011\x02")
	if got := waitDelivered(t, master, mc, "DlyLag", 0, 2); len(got) != 2 || string(got[1].Body) != "second" {
		t.Fatalf("DlyLag/0 holds %d messages, want the two delivered", len(got))
	}
	waitFor(t, "level 1 progress past both deliveries", func() bool {
		off, _, err := master.offsets.Get(scheduleOffsetGroup, meta.ScheduleTopic, 0)
		return err == nil && off == 2
	})

	mustSend(t, mc, "TmLag", 0, "soon", "WAIT\x01false\x02TIMER_DELAY_MS\x01200\x02")
	waitDelivered(t, master, mc, "TmLag", 0, 1)
	mustSend(t, mc, "TmLag", 0, "next", "WAIT\x01false\x02TIMER_DELAY_MS\x01200\x02")
	if got := waitDelivered(t, master, mc, "TmLag", 0, 2); len(got) != 2 || string(got[1].Body) != "next" {
		t.Fatalf("TmLag/0 holds %d messages, want the two delivered", len(got))
	}
}

// delayAnswer asks c's broker for GET_ALL_DELAY_OFFSET with ext and
// returns its levels.
func delayAnswer(t *testing.T, c *remoting.Client, ext map[string]string) map[int]int64 {
	t.Helper()
	r := call(t, c, remoting.GetAllDelayOffset, ext, nil)
	if r.Code != remoting.Success {
		t.Fatalf("GET_ALL_DELAY_OFFSET: %d %s", r.Code, r.Remark)
	}
	levels, err := rmqconfig.ParseDelayOffsets(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return levels
}

// A master records a delay level's progress past a delivery its slave
// lacks, but answers that slave's GET_ALL_DELAY_OFFSET with a progress no
// further than the slave's CommitLog holds: the slave keeps its own, and
// promoted, it delivers the message. A request naming no CommitLog end
// (Apache RocketMQ's slave) is bounded by the slaves connected to the HA
// port, here none; one naming the master's end gets the progress.
func TestLaggingSlaveCopiesDelayProgressOnlyAsFarAsItsLog(t *testing.T) {
	master := startTestBroker(t, withHA(map[string]string{"brokerRole": "SYNC_MASTER", "inSyncReplicas": "2", "slaveTimeout": "300"}))
	slave := startSlaveOf(t, master, nil)
	mc := master.client(nil)
	waitReplicated(t, master, slave)
	if r := sendV2(t, mc, "Dly", 0, "in one second", "DELAY\x011\x02"); r.Code != remoting.Success {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	waitReplicated(t, master, slave) // the parked copy is on the slave: SEND_OK was right
	parked := slave.clog.MaxOffset()
	// The HA link goes; the master delivers the message meanwhile.
	if err := master.repl.server.Close(); err != nil {
		t.Fatal(err)
	}
	waitDelivered(t, master, mc, "Dly", 0, 1)
	waitFor(t, "the master's level-1 progress past its delivery", func() bool {
		off, _, err := master.offsets.Get(scheduleOffsetGroup, meta.ScheduleTopic, 0)
		return err == nil && off == 1
	})
	if got := delayAnswer(t, mc, map[string]string{syncFieldCommitLogEnd: strconv.FormatInt(parked, 10)}); got[1] != 0 {
		t.Fatalf("a slave whose log ends at %d (before the delivery) is answered level 1 at %d: %v", parked, got[1], got)
	}
	if got := delayAnswer(t, mc, nil); got[1] != 0 {
		t.Fatalf("a slave naming no log end, with none connected, is answered level 1 at %d: %v", got[1], got)
	}
	end := strconv.FormatInt(master.clog.MaxOffset(), 10)
	if got := delayAnswer(t, mc, map[string]string{syncFieldCommitLogEnd: end}); got[1] != 1 {
		t.Fatalf("a slave holding the whole log is answered level 1 at %d, want 1: %v", got[1], got)
	}
	if r := call(t, mc, remoting.GetAllDelayOffset, map[string]string{syncFieldCommitLogEnd: "-5"}, nil); r.Code != remoting.SystemError {
		t.Fatalf("a negative CommitLog end: %d %s, want SYSTEM_ERROR", r.Code, r.Remark)
	}

	if err := slave.syncFromMaster(t.Context(), master.Addr()); err != nil {
		t.Fatal(err)
	}
	if off, ok, err := slave.offsets.Get(scheduleOffsetGroup, meta.ScheduleTopic, 0); err != nil || (ok && off > 0) {
		t.Fatalf("the slave copied level-1 progress %d (%v, %v) past a delivery its log lacks", off, ok, err)
	}
	master.stop()
	slave.stop()
	promoted := startTestBrokerAt(t, slave.store, withHA(nil))
	pc := promoted.client(nil)
	createTopic(t, pc, "Dly", 8, 8)
	if got := waitDelivered(t, promoted, pc, "Dly", 0, 1); len(got) != 1 || string(got[0].Body) != "in one second" {
		t.Fatalf("the promoted slave's Dly/0 holds %d messages; the master acknowledged one", len(got))
	}
}

// A slave that holds the master's deliveries copies the progress past
// them with its metadata sync.
func TestSlaveCopiesDelayProgressItHolds(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	slave := startSlaveOf(t, master, nil)
	mc := master.client(nil)
	mustSend(t, mc, "DlyHeld", 0, "delayed", "DELAY\x011\x02")
	waitDelivered(t, master, mc, "DlyHeld", 0, 1)
	waitFor(t, "the master's level-1 progress past its delivery", func() bool {
		off, _, err := master.offsets.Get(scheduleOffsetGroup, meta.ScheduleTopic, 0)
		return err == nil && off == 1
	})
	waitReplicated(t, master, slave)
	if err := slave.syncFromMaster(t.Context(), master.Addr()); err != nil {
		t.Fatal(err)
	}
	if off, ok, err := slave.offsets.Get(scheduleOffsetGroup, meta.ScheduleTopic, 0); err != nil || !ok || off != 1 {
		t.Fatalf("the slave's level-1 progress is %d (%v, %v), want the master's 1", off, ok, err)
	}
}

// The marks answer the latest progress whose deliveries lie below what a
// slave holds, merge progress that passed no new delivery, and thin the
// older half past maxDelayMarks without ever answering a later progress.
func TestDelayMarks(t *testing.T) {
	var d delayMarks
	d.reset(100, map[int]int64{1: 5})
	if off, ok := d.heldBy(1, 99); ok {
		t.Fatalf("held below the start's end: got %d", off)
	}
	if off, ok := d.heldBy(1, 100); !ok || off != 5 {
		t.Fatalf("held at the start's end: %d %v, want 5", off, ok)
	}
	d.add(1, 7, 150)
	d.add(1, 9, 0) // dropped messages only: same deliveries held
	d.add(1, 12, 200)
	if n := len(d.levels[1]); n != 3 {
		t.Fatalf("%d marks, want 3 (the drop merged): %v", n, d.levels[1])
	}
	for _, c := range []struct{ held, want int64 }{{149, 5}, {150, 9}, {199, 9}, {200, 12}, {1 << 40, 12}} {
		if off, ok := d.heldBy(1, c.held); !ok || off != c.want {
			t.Errorf("held %d: %d %v, want %d", c.held, off, ok, c.want)
		}
	}
	if _, ok := d.heldBy(2, 1<<40); ok {
		t.Error("a level without progress has a mark")
	}
	d.add(2, 1, 0)
	if off, ok := d.heldBy(2, 100); !ok || off != 1 {
		t.Errorf("a new level's first progress without a delivery: %d %v, want 1 at the start's end", off, ok)
	}
	for i := int64(1); i <= 1000; i++ {
		d.add(3, i, 1000+i)
	}
	if n := len(d.levels[3]); n > maxDelayMarks {
		t.Fatalf("%d marks kept, bound %d", n, maxDelayMarks)
	}
	for held := int64(1000); held <= 2000; held++ {
		off, ok := d.heldBy(3, held)
		if ok && off > held-1000 {
			t.Fatalf("held %d: answered progress %d past its deliveries", held, off)
		}
	}
	if off, _ := d.heldBy(3, 2000); off != 1000 {
		t.Fatalf("the latest progress is lost: %d", off)
	}
}

// checkpointReadMs asks c's broker for GET_TIMER_CHECK_POINT with ext and
// returns its lastReadTimeMs.
func checkpointReadMs(t *testing.T, c *remoting.Client, ext map[string]string) int64 {
	t.Helper()
	r := call(t, c, remoting.GetTimerCheckPoint, ext, nil)
	if r.Code != remoting.Success || len(r.Body) < 8 {
		t.Fatalf("GET_TIMER_CHECK_POINT: %d %s", r.Code, r.Remark)
	}
	return int64(binary.BigEndian.Uint64(r.Body))
}

// The timer checkpoint's read time, from which a promoted RocketMQ slave
// resumes its timer, does not pass a timer message whose delivery the
// asking slave lacks: one naming its CommitLog's end from before the
// delivery, or one naming none with no slave connected to the HA port.
// A slave holding the whole log gets the read time past the delivery.
func TestTimerReadTimeWaitsForTheSlavesLog(t *testing.T) {
	master := startTestBroker(t, withHA(map[string]string{"timerPrecisionMs": "100"}))
	slave := startSlaveOf(t, master, map[string]string{"timerPrecisionMs": "100"})
	mc := master.client(nil)
	waitReplicated(t, master, slave)
	if err := master.repl.server.Close(); err != nil {
		t.Fatal(err)
	}
	before := master.clog.MaxOffset()
	due := time.Now().Add(300 * time.Millisecond).UnixMilli()
	mustSend(t, mc, "TmHeld", 0, "soon", "TIMER_DELIVER_MS\x01"+strconv.FormatInt(due, 10)+"\x02")
	waitDelivered(t, master, mc, "TmHeld", 0, 1)
	whole := func() map[string]string {
		return map[string]string{syncFieldCommitLogEnd: strconv.FormatInt(master.clog.MaxOffset(), 10)}
	}
	waitFor(t, "the read time past the delivery, for a slave holding it", func() bool {
		return checkpointReadMs(t, mc, whole()) > due
	})
	if ms := checkpointReadMs(t, mc, map[string]string{syncFieldCommitLogEnd: strconv.FormatInt(before, 10)}); ms > due {
		t.Fatalf("a slave whose log ends before the delivery is answered read time %d, past the message due at %d", ms, due)
	}
	if ms := checkpointReadMs(t, mc, nil); ms > due {
		t.Fatalf("a slave naming no log end, none connected, is answered read time %d, past the message due at %d", ms, due)
	}
}

// The same in controller mode without allAckInSyncStateSet: a master
// with inSyncReplicas=2 whose sync state set shrank to itself (its slave
// stopped) keeps delivering delayed and timer messages, one after the
// other, without waiting for a slave.
func TestControllerModeDeliversDelayedAndTimerMessagesWithoutItsSlave(t *testing.T) {
	ctlAddr := startTestController(t, false, true)
	a := newCtlBroker(t, ctlAddr, "")
	a.settings["inSyncReplicas"] = "2"
	a.settings["slaveTimeout"] = "600000"
	a.settings["timerPrecisionMs"] = "100"
	a.start()
	b := newCtlBroker(t, ctlAddr, "")
	b.start()
	waitUntil(t, 20*time.Second, "the sync state set to hold both", func() bool { return len(a.sup.role().syncSet) == 2 })
	b.stop()
	waitUntil(t, 20*time.Second, "the sync state set to shrink", func() bool { return len(a.sup.role().syncSet) == 1 })
	if n := a.sup.Broker().slaveAcks(); n != 1 {
		t.Fatalf("a send waits for %d slaves, want inSyncReplicas-1", n)
	}
	ca := dialCtl(t, a.addr())
	for i, body := range []string{"first", "second"} {
		mustSend(t, ca, "DlyCtl", 0, body, "WAIT\x01false\x02DELAY\x011\x02")
		mustSend(t, ca, "TmCtl", 0, body, "WAIT\x01false\x02TIMER_DELAY_MS\x01200\x02")
		for _, topic := range []string{"DlyCtl", "TmCtl"} {
			waitUntil(t, 20*time.Second, body+" delivered to "+topic, func() bool {
				r := call(t, ca, remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": "0"}, nil)
				return r.Code == remoting.Success && header(t, r, "offset") == int64(i+1)
			})
		}
	}
}
