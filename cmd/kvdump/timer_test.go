package main

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/timer"
)

// withTimerHook wires the dispatcher as the broker does: a record of the
// timer topic is indexed at its TIMER_OUT_MS by the timer service's hook.
func withTimerHook(o *kvindex.DispatcherOptions) {
	o.Hooks = map[string]kvindex.Hook{meta.TimerTopic: timer.New(o.DB.Timers(), nil, timer.Options{}, zerolog.Nop()).Hook()}
}

// parkAndSend parks a message with timer properties as the broker's send
// path does at testClock, and stores it.
func parkAndSend(t *testing.T, s *testStore, topic string, qid int32, props map[string]string) commitlog.AppendResult {
	t.Helper()
	m := &commitlog.Message{Topic: topic, QueueID: qid, Body: []byte("timer " + topic), Properties: commitlog.FormatProperties(props)}
	if ok, err := timer.Park(m, testClock, timer.DefaultConfig()); !ok || err != nil {
		t.Fatalf("park %v: %v %v", props, ok, err)
	}
	return s.sendMessage(t, m)
}

func TestTimer(t *testing.T) {
	root := t.TempDir()
	s := openTestStore(t, root, 0, withTimerHook)
	// testClock is 07:08:09.123; delivery times are rounded down to the
	// second, and one on the second is a second early, as in RocketMQ.
	at := func(hms string) int64 {
		tm, err := time.Parse(time.RFC3339Nano, "2026-05-06T"+hms+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMilli()
	}
	a := parkAndSend(t, s, "TopicA", 1, map[string]string{timer.PropDelaySec: "3600", "UNIQ_KEY": "UA"})
	b := parkAndSend(t, s, "TopicB", 0, map[string]string{timer.PropDeliverMs: fmt.Sprint(at("07:10:00.000"))})
	c := parkAndSend(t, s, "TopicA", 2, map[string]string{timer.PropDelayMs: "30000", "UNIQ_KEY": "UC"})
	d := parkAndSend(t, s, "TopicA", 0, map[string]string{timer.PropDelaySec: "30", "UNIQ_KEY": "UD"})
	// g cancels a when both come due.
	g := parkAndSend(t, s, "TopicA", 1, map[string]string{timer.PropDelaySec: "3600", "UNIQ_KEY": "UG", timer.PropDeleteKey: "TopicA+UA"})
	// A record sent to the timer topic itself has no TIMER_OUT_MS (due
	// when stored) and no destination.
	e := s.send(t, meta.TimerTopic, 0, map[string]string{"UNIQ_KEY": "UE"}, "no destination")
	// f is delivered: the timer deleted its entry.
	f := parkAndSend(t, s, "TopicA", 0, map[string]string{timer.PropDelaySec: "60"})
	if err := s.db.Timers().Delete([]kvindex.TimerEntry{{DeliverMs: at("07:09:09.000"), PhyOffset: f.PhyOffset, Size: int32(f.WroteBytes)}}); err != nil {
		t.Fatal(err)
	}
	// h is due 2 days and an hour after it was parked: past the roll
	// window, it is indexed at its roll point a day after it was parked.
	h := parkAndSend(t, s, "TopicB", 1, map[string]string{timer.PropDelaySec: fmt.Sprint(2*24*3600 + 3600), "UNIQ_KEY": "UH"})
	hRoll := testClock.UnixMilli() + 24*3600*1000
	hDue := (testClock.UnixMilli() + (2*24*3600+3600)*1000) / 1000 * 1000
	plain := s.send(t, "TopicA", 0, nil, "not a timer message")
	end := s.log.MaxOffset()
	s.close(t)

	// Entries that do not match their record: one at a record of another
	// topic, one with the wrong size, one past the end of the CommitLog.
	gone := end + 4096
	editIndex(t, root, func(db *pebble.DB) {
		for _, kv := range []struct {
			deliver, phy int64
			size         int32
		}{{at("07:08:40.000"), plain.PhyOffset, int32(plain.WroteBytes)}, {at("09:00:00.000"), c.PhyOffset, int32(c.WroteBytes) + 1}, {at("10:00:00.000"), gone, 100}} {
			if err := db.Set(docTimerKey(kv.deliver, kv.phy), binary.BigEndian.AppendUint32(nil, uint32(kv.size)), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}
	})
	ro, err := commitlog.OpenReadOnly(root)
	if err != nil {
		t.Fatal(err)
	}
	_, goneErr := ro.ReadRecord(gone)
	_ = ro.Close()
	if goneErr == nil {
		t.Fatalf("a record at %d, past the end %d", gone, end)
	}

	head := []string{"DELIVER AT", "PHY", "SIZE", "TOPIC", "QUEUE", "MSGID", "PARKED AT"}
	parked := kvindex.FormatMillis(testClock.UnixMilli())
	row := func(deliver string, r commitlog.AppendResult, topic, queue, id string) []string {
		return []string{kvindex.FormatMillis(at(deliver)), num(r.PhyOffset), num(r.WroteBytes), topic, queue, id, parked}
	}
	errRow := func(deliver string, phy, size int64, msg string) []string {
		return []string{kvindex.FormatMillis(at(deliver)), num(phy), num(size), "error: " + msg, "-", "-", "-"}
	}
	rows := [][]string{
		row("07:08:09.123", e, "-", "-", "UE"),
		row("07:08:39.000", c, "TopicA", "2", "UC"),
		row("07:08:39.000", d, "TopicA", "0", "UD"),
		errRow("07:08:40.000", plain.PhyOffset, plain.WroteBytes, fmt.Sprintf("record at %d is in topic TopicA, not rmq_sys_wheel_timer", plain.PhyOffset)),
		row("07:09:59.000", b, "TopicB", "0", "-"),
		row("08:08:09.000", a, "TopicA", "1", "UA"),
		row("08:08:09.000", g, "TopicA", "1", "UG (cancels TopicA+UA)"),
		errRow("09:00:00.000", c.PhyOffset, c.WroteBytes+1, fmt.Sprintf("record at %d is %d bytes, the entry says %d", c.PhyOffset, c.WroteBytes, c.WroteBytes+1)),
		errRow("10:00:00.000", gone, 100, goneErr.Error()),
		{kvindex.FormatMillis(hRoll) + " (roll; due " + kvindex.FormatMillis(hDue) + ")", num(h.PhyOffset), num(h.WroteBytes), "TopicB", "1", "UH", parked},
	}
	for _, cs := range []struct {
		args []string
		want string
	}{
		{[]string{"timer"}, alignRows(append([][]string{head}, rows...)...)},
		// The bound is inclusive, to the millisecond.
		{[]string{"timer", "--due-before", "2026-05-06T07:08:39Z"}, alignRows(append([][]string{head}, rows[:3]...)...)},
		{[]string{"timer", "--due-before", fmt.Sprint(at("07:08:38.999"))}, alignRows(head, rows[0])},
		{[]string{"timer", "--due-before", "0"}, alignRows(head)},
	} {
		if got := mustKvdump(t, append([]string{"--store", root}, cs.args...)...); got != cs.want {
			t.Errorf("%s:\n%s\nwant:\n%s", strings.Join(cs.args, " "), got, cs.want)
		}
	}

	lineJSON := func(deliver string, r commitlog.AppendResult, topic string, queue int32, id string) map[string]any {
		m := map[string]any{"kind": "timer", "deliverMs": at(deliver), "phyOffset": r.PhyOffset, "size": r.WroteBytes, "parkedAt": testClock.UnixMilli()}
		if topic != "" {
			m["realTopic"], m["realQueueId"] = topic, queue
		}
		if id != "" {
			m["msgId"] = id
		}
		return asJSON(t, m)
	}
	errJSON := func(deliver string, phy, size int64, msg string) map[string]any {
		return asJSON(t, map[string]any{"kind": "timer", "deliverMs": at(deliver), "phyOffset": phy, "size": size, "messageError": msg})
	}
	checkJSON(t, "timer --json", jsonLines(t, mustKvdump(t, "--store", root, "--json", "timer")),
		lineJSON("07:08:09.123", e, "", 0, "UE"),
		lineJSON("07:08:39.000", c, "TopicA", 2, "UC"),
		lineJSON("07:08:39.000", d, "TopicA", 0, "UD"),
		errJSON("07:08:40.000", plain.PhyOffset, plain.WroteBytes, fmt.Sprintf("record at %d is in topic TopicA, not rmq_sys_wheel_timer", plain.PhyOffset)),
		lineJSON("07:09:59.000", b, "TopicB", 0, ""),
		lineJSON("08:08:09.000", a, "TopicA", 1, "UA"),
		withCancel(lineJSON("08:08:09.000", g, "TopicA", 1, "UG"), "TopicA+UA"),
		errJSON("09:00:00.000", c.PhyOffset, c.WroteBytes+1, fmt.Sprintf("record at %d is %d bytes, the entry says %d", c.PhyOffset, c.WroteBytes, c.WroteBytes+1)),
		errJSON("10:00:00.000", gone, 100, goneErr.Error()),
		asJSON(t, map[string]any{"kind": "timer", "deliverMs": hRoll, "dueMs": hDue, "phyOffset": h.PhyOffset, "size": h.WroteBytes,
			"parkedAt": testClock.UnixMilli(), "realTopic": "TopicB", "realQueueId": 1, "msgId": "UH"}))
	checkJSON(t, "timer --json --due-before", jsonLines(t, mustKvdump(t, "--store", root, "--json", "timer", "--due-before", "2026-05-06T07:08:09.123Z")),
		lineJSON("07:08:09.123", e, "", 0, "UE"))

	if _, _, err := runKvdump(t, "--store", root, "timer", "--due-before", "tomorrow"); err == nil || exitStatus(err) != exitError {
		t.Errorf("timer --due-before tomorrow: %v, want an error", err)
	}

	// summary counts the keys of the timer keyspace; raw decodes them.
	var sum map[string]any
	for _, l := range jsonLines(t, mustKvdump(t, "--store", root, "--json", "summary")) {
		if l["kind"] == "summary" {
			sum = l
		}
	}
	if n := fmt.Sprint(sum["timerMessages"]); n != "10" {
		t.Errorf("summary counts %s timer messages, want 10", n)
	}
	if got := mustKvdump(t, "--store", root, "summary"); !regexp.MustCompile(`(?m)^timer messages +10 waiting$`).MatchString(got) {
		t.Errorf("summary table:\n%s", got)
	}
	raw := regexp.MustCompile(fmt.Sprintf(`(?m)^timer +70%016x%016x +%08x +deliverAt=%s phyOffset=%d size=%d$`,
		at("08:08:09.000"), a.PhyOffset, a.WroteBytes, regexp.QuoteMeta(kvindex.FormatMillis(at("08:08:09.000"))), a.PhyOffset, a.WroteBytes))
	if got := mustKvdump(t, "--store", root, "raw", "--prefix", "70"); !raw.MatchString(got) {
		t.Errorf("raw 70 does not decode the timer message due last:\n%s", got)
	}
}

// withCancel adds the cancels field to an expected JSON line.
func withCancel(m map[string]any, key string) map[string]any {
	m["cancels"] = key
	return m
}

// A store without timer messages lists an empty table.
func TestTimerEmpty(t *testing.T) {
	sc, _ := buildScenario(t, false)
	if got, want := mustKvdump(t, "--store", sc.root, "timer"), alignRows([]string{"DELIVER AT", "PHY", "SIZE", "TOPIC", "QUEUE", "MSGID", "PARKED AT"}); got != want {
		t.Errorf("timer of a store without timer messages:\n%s\nwant:\n%s", got, want)
	}
	if got := mustKvdump(t, "--store", sc.root, "--json", "timer"); got != "" {
		t.Errorf("timer --json of a store without timer messages: %q", got)
	}
}
