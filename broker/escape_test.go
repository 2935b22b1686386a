package broker

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/repeatlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// escapeCluster is a name server with supportActingMaster, a group
// (master and slave, enableSlaveActingMaster) whose master was stopped,
// its slave acting, and another group's master, escape-b; both groups
// hold topic (one queue in the first, four in escape-b).
type escapeCluster struct {
	ns     *namesrv.Server
	master *testBroker // stopped
	slave  *testBroker
	other  *testBroker
}

// startEscapeCluster starts an escapeCluster; common adds to the
// settings of the acting-master group's brokers, before runs with the
// master up (and the other group's master).
func startEscapeCluster(t *testing.T, topic string, common map[string]string, before func(master, other *testBroker)) escapeCluster {
	t.Helper()
	ns := startActingNameServer(t, false)
	nsAddr := ns.Addr().String()
	master := startTestBroker(t, actingSettings(nsAddr, common))
	skv := map[string]string{"brokerRole": "SLAVE", "brokerId": "1", "slaveReadEnable": "true", "enableRemoteEscape": "true"}
	for k, v := range common {
		skv[k] = v
	}
	slave := startTestBroker(t, actingSettings(nsAddr, skv))
	other := startTestBroker(t, map[string]string{"namesrvAddr": nsAddr, "brokerName": "escape-b", "registerNameServerPeriod": "300"})
	createTopic(t, master.client(nil), topic, 1, 1)
	createTopic(t, other.client(nil), topic, 4, 4)
	if before != nil {
		before(master, other)
	}
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master)
	waitFor(t, "the slave to see the master as its group's smallest member", func() bool {
		m := slave.group.members.Load()
		return m != nil && (*m)[0] == master.Addr()
	})
	master.stop()
	waitFor(t, "the slave to act as master", slave.actingMaster)
	waitFor(t, "the route to show both groups", func() bool {
		r, err := routeOf(t, ns, topic)
		return err == nil && len(r.QueueDatas) == 2
	})
	return escapeCluster{ns: ns, master: master, slave: slave, other: other}
}

// pulledFrom returns the messages of topic's queues 0-3 on tb.
func pulledFrom(t *testing.T, tb *testBroker, topic string) map[int32][]commitlog.Message {
	t.Helper()
	out := map[int32][]commitlog.Message{}
	for qid := range int32(4) {
		resp := call(t, tb.client(nil), remoting.PullMessage, pullReq("escape-check", topic, qid, 0, 0, 0, "*"), nil)
		if resp.Code == remoting.Success {
			out[qid] = decodeRecords(t, resp.Body)
		}
	}
	return out
}

// Java's String.hashCode, the queue choice of putMessageToSpecificQueue:
// values Java gives.
func TestJavaStringHash(t *testing.T) {
	for s, want := range map[string]int32{"": 0, "hello": 99162322, "TopicA/127.0.0.1:10911": -221494688, "é😀": 1996812} {
		if got := javaStringHash(s); got != want {
			t.Errorf("hash(%q) = %d, want %d", s, got, want)
		}
	}
	if floorMod(-7, 4) != 1 || floorMod(7, 4) != 3 {
		t.Error("floorMod")
	}
}

// The acting master's escape bridge sends a message to the other group's
// master, as its inner producer, into a queue the route gives (put) or
// the one its topic and store host choose (putToSpecificQueue); without
// enableRemoteEscape it refuses with SERVICE_NOT_AVAILABLE.
func TestEscapeBridgeSendsToAnotherGroupsMaster(t *testing.T) {
	c := startEscapeCluster(t, "ESC", nil, nil)
	ctx := context.Background()
	msg := func(body string) *commitlog.Message {
		return &commitlog.Message{Topic: "ESC", Body: []byte(body), BornTimestamp: time.Now().UnixMilli(),
			Properties: commitlog.FormatProperties(map[string]string{"UNIQ_KEY": "U-" + body, "WAIT": "true"})}
	}
	for _, body := range []string{"e0", "e1", "e2", "e3"} {
		if err := c.slave.escape.put(ctx, msg(body)); err != nil {
			t.Fatalf("escape put %s: %v", body, err)
		}
	}
	want := int(floorMod(javaStringHash("ESC"+"/"+c.slave.storeHost.String()), 4))
	if err := c.slave.escape.putToSpecificQueue(ctx, msg("specific")); err != nil {
		t.Fatalf("escape put to the specific queue: %v", err)
	}
	c.other.caughtUp()
	got := pulledFrom(t, c.other, "ESC")
	n := 0
	seen := map[int32]bool{}
	for qid, ms := range got {
		for _, m := range ms {
			n++
			props := commitlog.ParseProperties(m.Properties)
			if props["WAIT"] != "false" {
				t.Errorf("escaped %s: WAIT %q, want false", m.Body, props["WAIT"])
			}
			if string(m.Body) == "specific" {
				if int(qid) != want {
					t.Errorf("specific put in queue %d, want %d", qid, want)
				}
				continue
			}
			seen[qid] = true
		}
	}
	if n != 5 {
		t.Fatalf("other group's master holds %d escaped messages, want 5: %v", n, got)
	}
	// The route's queues in turn: four puts, four queues.
	if len(seen) != 4 {
		t.Errorf("put went to queues %v, want all four in turn", seen)
	}
	if got := pulledFrom(t, c.slave, "ESC"); len(got[0]) != 0 {
		t.Errorf("the acting master stored %d escaped messages itself", len(got[0]))
	}

	// A topic only the acting master's group has: no other master to
	// take it.
	err := c.slave.escape.put(ctx, &commitlog.Message{Topic: "ESC-missing", Body: []byte("x")})
	if !errors.Is(err, errEscapeFailed) {
		t.Fatalf("escape of a topic without a route: %v, want PUT_TO_REMOTE_BROKER_FAIL", err)
	}

	off := startTestBroker(t, map[string]string{"enableSlaveActingMaster": "true", "brokerRole": "SLAVE", "brokerId": "1"})
	if err := off.escape.put(ctx, msg("off")); !errors.Is(err, errEscapeUnavailable) {
		t.Fatalf("escape without enableRemoteEscape: %v, want SERVICE_NOT_AVAILABLE", err)
	}
}

// An acting master with enableRemoteEscape delivers the timer messages
// of its copy that fall due while the master is down, through the escape
// bridge to the other group's master; one the master delivered before it
// went down is not delivered again (the slave forgot it with the
// master's watermark). With the master back the timer stops.
func TestActingMasterDeliversTimerMessagesThroughEscape(t *testing.T) {
	common := map[string]string{"timerPrecisionMs": "100"}
	c := startEscapeCluster(t, "TMX", common, func(master, _ *testBroker) {
		mc := master.client(nil)
		mustSend(t, mc, "TMX", 0, "soon", "UNIQ_KEY\x01TMX-1\x02TIMER_DELAY_MS\x01200\x02")
		waitDelivered(t, master, mc, "TMX", 0, 1)
		mustSend(t, mc, "TMX", 0, "later", "UNIQ_KEY\x01TMX-2\x02TIMER_DELAY_MS\x013000\x02")
	})
	if !specialRunning(c.slave) {
		t.Fatal("the acting master runs no timer")
	}
	var got []string
	waitFor(t, "the due timer message on the other group's master", func() bool {
		got = got[:0]
		for _, ms := range pulledFrom(t, c.other, "TMX") {
			for _, m := range ms {
				got = append(got, string(m.Body))
			}
		}
		return len(got) > 0
	})
	time.Sleep(500 * time.Millisecond) // a second delivery would show by now
	got = got[:0]
	for _, ms := range pulledFrom(t, c.other, "TMX") {
		for _, m := range ms {
			got = append(got, string(m.Body))
			if _, ok := commitlog.LookupProperty(m.Properties, "TIMER_OUT_MS"); !ok {
				t.Errorf("escaped timer message without TIMER_OUT_MS: %q", m.Properties)
			}
			if _, ok := commitlog.LookupProperty(m.Properties, "REAL_TOPIC"); ok {
				t.Errorf("escaped timer message with REAL_TOPIC: %q", m.Properties)
			}
		}
	}
	if len(got) != 1 || got[0] != "later" {
		t.Fatalf("the other group's master holds %q, want the one message due while the master was down", got)
	}
	left, err := c.slave.db.Timers().Due(math.MaxInt64, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the acting master's timer index holds %d entries after the delivery", len(left))
	}

	nsAddr := c.ns.Addr().String()
	master2 := startTestBrokerAt(t, c.master.store, actingSettings(nsAddr, common))
	waitFor(t, "the slave to stop acting", func() bool { return !c.slave.actingMaster() })
	if specialRunning(c.slave) {
		t.Fatal("the slave's timer still runs with its master back")
	}
	_ = master2
}

// Without enableRemoteEscape an acting master runs no special service.
func TestActingMasterWithoutEscapeRunsNoTimer(t *testing.T) {
	c := startEscapeCluster(t, "TMN", map[string]string{"enableRemoteEscape": "false"}, nil)
	if specialRunning(c.slave) {
		t.Fatal("an acting master without enableRemoteEscape runs its timer")
	}
}

// specialRunning reports whether tb runs its acting master's special
// services.
func specialRunning(tb *testBroker) bool {
	tb.special.mu.Lock()
	defer tb.special.mu.Unlock()
	return tb.special.stop != nil
}

// An acting master with enableRemoteEscape sends the open transactions
// of its copy (not one ended before the master went down) to the other
// group's master as halves of its own, whose checker then asks the
// producer, and forgets them.
func TestActingMasterEscapesOpenTransactions(t *testing.T) {
	c := startEscapeCluster(t, "TXE", nil, func(master, _ *testBroker) {
		mc := master.client(nil)
		sendHalf(t, mc, "TXE", 0, "TXE-open", "open", "", time.Now().UnixMilli())
		done := sendHalf(t, mc, "TXE", 0, "TXE-done", "done", "", time.Now().UnixMilli())
		if resp := endTxn(t, mc, done, "pg", 12, false); resp.Code != remoting.Success {
			t.Fatalf("rollback: %d %s", resp.Code, resp.Remark)
		}
	})
	openHalves := func(tb *testBroker) []commitlog.Message {
		var out []commitlog.Message
		if err := tb.db.Transactions().OpenHalves(func(h kvindex.TxnHalf) bool {
			m, ok, err := recordStore{b: tb.Broker}.Read(h.PhyOffset)
			if err != nil || !ok {
				t.Errorf("open half at %d unreadable: %v", h.PhyOffset, err)
				return false
			}
			out = append(out, m)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var halves []commitlog.Message
	waitFor(t, "the open transaction on the other group's master", func() bool {
		halves = openHalves(c.other)
		return len(halves) > 0
	})
	time.Sleep(1500 * time.Millisecond) // a pass that sent it again would show by now
	halves = openHalves(c.other)
	if len(halves) != 1 {
		t.Fatalf("the other group's master holds %d open halves, want 1", len(halves))
	}
	h := halves[0]
	props := commitlog.ParseProperties(h.Properties)
	if string(h.Body) != "open" || props["REAL_TOPIC"] != "TXE" || props["UNIQ_KEY"] != "TXE-open" || props["PGROUP"] != "pg" {
		t.Fatalf("escaped half %q with %q", h.Body, h.Properties)
	}
	if left := openHalves(c.slave); len(left) != 0 {
		t.Fatalf("the acting master still holds %d open halves", len(left))
	}
}

// An acting master with enableRemoteEscape delivers the delayed messages
// of its copy that fall due while the master is down through the escape
// bridge, without DELAY (the other master would park them again), and
// keeps the level's progress.
func TestActingMasterDeliversDelayLevelsThroughEscape(t *testing.T) {
	common := map[string]string{"messageDelayLevel": "3s 5s"}
	c := startEscapeCluster(t, "DLX", common, func(master, _ *testBroker) {
		mustSend(t, master.client(nil), "DLX", 0, "delayed", "UNIQ_KEY\x01DLX-1\x02DELAY\x011\x02")
	})
	var got []commitlog.Message
	waitFor(t, "the delayed message on the other group's master", func() bool {
		got = got[:0]
		for _, ms := range pulledFrom(t, c.other, "DLX") {
			got = append(got, ms...)
		}
		return len(got) > 0
	})
	time.Sleep(500 * time.Millisecond) // a second delivery would show by now
	got = got[:0]
	for _, ms := range pulledFrom(t, c.other, "DLX") {
		got = append(got, ms...)
	}
	if len(got) != 1 || string(got[0].Body) != "delayed" {
		t.Fatalf("the other group's master holds %d messages, want the delayed one once", len(got))
	}
	if _, ok := commitlog.LookupProperty(got[0].Properties, "DELAY"); ok {
		t.Errorf("escaped delayed message with DELAY: %q", got[0].Properties)
	}
	off, ok, err := c.slave.offsets.Get(scheduleOffsetGroup, meta.ScheduleTopic, 0)
	if err != nil || !ok || off != 1 {
		t.Fatalf("the acting master's progress of level 1: %d %v %v, want 1", off, ok, err)
	}
}

// A put through the bridge that fails every 100 ms round (here refused,
// enableRemoteEscape being off) is logged the first time, then once per
// escapeLogInterval (12 s) with the count of those held back: a minute of
// rounds writes 5 lines, not 600.
func TestEscapeBridgeLogsARepeatedFailureAFewTimesAMinute(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(1_700_000_000, 0)
	e := &escapeBridge{b: &Broker{}, fails: repeatlog.New(zerolog.New(&buf), escapeLogInterval, func() time.Time { return clock })}
	const rounds = 600
	for range rounds {
		if err := e.put(context.Background(), &commitlog.Message{Topic: "ESC-off", Body: []byte("x")}); !errors.Is(err, errEscapeUnavailable) {
			t.Fatalf("put with enableRemoteEscape off: %v, want %v", err, errEscapeUnavailable)
		}
		clock = clock.Add(100 * time.Millisecond)
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(got) != 5 {
		t.Fatalf("%d lines over %d failed puts, want 5:\n%s", len(got), rounds, buf.String())
	}
	for i, l := range got[1:] {
		if !strings.Contains(l, `"suppressed":119`) || !strings.Contains(l, "enableRemoteEscape is off") {
			t.Errorf("line %d: %s", i+1, l)
		}
	}
}
