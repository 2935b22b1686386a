package broker

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/brokerstats"
	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

func viewStats(t *testing.T, c *remoting.Client, name, key string) adminbody.BrokerStatsData {
	t.Helper()
	r := call(t, c, remoting.ViewBrokerStatsData, map[string]string{"statsName": name, "statsKey": key}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("view %s %s: %d %s", name, key, r.Code, r.Remark)
	}
	d, err := adminbody.DecodeBrokerStatsData(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Sends, pulls and send-backs are counted per topic and group, and read
// back through VIEW_BROKER_STATS_DATA, GET_CONSUME_STATS and the runtime
// info as RocketMQ's tools read them.
func TestBrokerStatistics(t *testing.T) {
	clk := testutil.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.Local))
	b := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) { b.statsClock = clk.Now })
	c := b.client(nil)
	createTopic(t, c, "StatsT", 1, 1)
	for i := 0; i < 3; i++ {
		mustSend(t, c, "StatsT", 0, "m"+strconv.Itoa(i), "")
	}
	mustSend(t, c, "StatsT", 0, "m3", "")
	got := pullAll(t, b, c, "StatsT", 0) // group "inspect"
	if len(got) != 4 {
		t.Fatalf("pulled %d messages, want 4", len(got))
	}
	// A send-back of one of them, by another group. Its copy waits two
	// hours (level 18) in the schedule topic, longer than the test runs.
	r := call(t, c, remoting.ConsumerSendMsgBack, map[string]string{
		"offset": strconv.FormatInt(got[0].PhyOffset, 10), "group": "G2", "delayLevel": "18",
		"originMsgId": commitlog.MessageID(got[0].StoreHost, got[0].PhyOffset), "originTopic": "StatsT",
	}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("send back: %d %s", r.Code, r.Remark)
	}

	// Nothing sampled yet: the items exist, their windows are empty.
	if d := viewStats(t, c, brokerstats.TopicPutNums, "StatsT"); d.Minute.Sum != 0 {
		t.Fatalf("minute window before any sampling: %+v", d.Minute)
	}
	clk.Advance(10 * time.Second)
	b.stats.Tick()

	put := viewStats(t, c, brokerstats.TopicPutNums, "StatsT")
	if put.Minute.Sum != 4 || put.Minute.TPS != 0.4 || put.Minute.AvgPT != 1 {
		t.Errorf("TOPIC_PUT_NUMS minute %+v, want 4 messages in 10 s, one per send", put.Minute)
	}
	if put.Hour.Sum != 0 || put.Day.Sum != 0 {
		t.Errorf("TOPIC_PUT_NUMS hour %+v day %+v before their first sampling", put.Hour, put.Day)
	}
	if size := viewStats(t, c, brokerstats.TopicPutSize, "StatsT"); size.Minute.Sum < 4*60 {
		t.Errorf("TOPIC_PUT_SIZE minute %+v, want the records' bytes", size.Minute)
	}
	if g := viewStats(t, c, brokerstats.GroupGetNums, "StatsT@inspect"); g.Minute.Sum != 4 || g.Minute.AvgPT != 4 {
		t.Errorf("GROUP_GET_NUMS minute %+v, want 4 messages in one pull", g.Minute)
	}
	if s := viewStats(t, c, brokerstats.SendBackPutNums, "StatsT@G2"); s.Minute.Sum != 1 {
		t.Errorf("SNDBCK_PUT_NUMS minute %+v, want 1", s.Minute)
	}
	if bp := viewStats(t, c, brokerstats.BrokerPutNums, "DefaultCluster"); bp.Minute.Sum != 4 {
		t.Errorf("BROKER_PUT_NUMS minute %+v, want the 4 sends", bp.Minute)
	}

	for _, tc := range []struct {
		ext    map[string]string
		remark string
	}{
		{map[string]string{"statsName": brokerstats.TopicPutNums, "statsKey": "Nope"}, "The stats <TOPIC_PUT_NUMS> <Nope> not exist"},
		{map[string]string{"statsName": "NO_SUCH_STATS", "statsKey": "StatsT"}, "not exist"},
		{map[string]string{"statsName": brokerstats.TopicPutNums}, "statsKey"},
	} {
		if r := call(t, c, remoting.ViewBrokerStatsData, tc.ext, nil); r.Code != remoting.SystemError || !strings.Contains(r.Remark, tc.remark) {
			t.Errorf("view %v: %d %q, want an error with %q", tc.ext, r.Code, r.Remark, tc.remark)
		}
	}

	// The consume rate of GET_CONSUME_STATS is the group's minute rate.
	r = call(t, c, remoting.GetConsumeStats, map[string]string{"consumerGroup": "inspect", "topic": "StatsT"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("consume stats: %d %s", r.Code, r.Remark)
	}
	if _, tps, err := adminbody.DecodeConsumeStats(r.Body); err != nil || tps != 0.4 {
		t.Errorf("consumeTps %v (%v), want 0.4", tps, err)
	}

	info := runtimeInfo(t, c)
	if info["msgPutTotalTodayNow"] != "4" || info["msgGetTotalTodayNow"] != "4" {
		t.Errorf("day totals: put %s get %s, want 4 (the sends; the send-back's copy waits in the schedule topic, a system topic) and 4",
			info["msgPutTotalTodayNow"], info["msgGetTotalTodayNow"])
	}
	if ts, err := strconv.ParseInt(info["earliestMessageTimeStamp"], 10, 64); err != nil || ts != got[0].StoreTimestamp {
		t.Errorf("earliestMessageTimeStamp %q, want the first record's store time %d", info["earliestMessageTimeStamp"], got[0].StoreTimestamp)
	}
	if ratio, err := strconv.ParseFloat(info["commitLogDiskRatio"], 64); err != nil || ratio <= 0 || ratio > 1 {
		t.Errorf("commitLogDiskRatio %q is not a fraction", info["commitLogDiskRatio"])
	}
	if info["sendThreadPoolQueueSize"] != "0" || info["sendThreadPoolQueueCapacity"] != strconv.Itoa(maxAdmitWaiters) {
		t.Errorf("send queue %s of %s, want 0 of %d", info["sendThreadPoolQueueSize"], info["sendThreadPoolQueueCapacity"], maxAdmitWaiters)
	}
	for _, k := range []string{"putTps", "getTransferredTps", "getFoundTps", "getMissTps", "getTotalTps", "msgPutTotalTodayMorning", "brokerActive"} {
		if _, ok := info[k]; !ok {
			t.Errorf("runtime info lacks %s", k)
		}
	}

	// The hour and day windows take their samples every 10 minutes and
	// every hour.
	clk.Advance(10 * time.Minute)
	b.stats.Tick()
	if h := viewStats(t, c, brokerstats.TopicPutNums, "StatsT").Hour; h.Sum != 4 {
		t.Errorf("TOPIC_PUT_NUMS hour %+v, want 4", h)
	}
	clk.Advance(time.Hour)
	b.stats.Tick()
	if d := viewStats(t, c, brokerstats.TopicPutNums, "StatsT").Day; d.Sum != 4 {
		t.Errorf("TOPIC_PUT_NUMS day %+v, want 4", d)
	}

	// Deleting the topic drops its items.
	if r := call(t, c, remoting.DeleteTopicInBroker, map[string]string{"topic": "StatsT"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete topic: %d %s", r.Code, r.Remark)
	}
	for _, k := range [][2]string{{brokerstats.TopicPutNums, "StatsT"}, {brokerstats.GroupGetNums, "StatsT@inspect"}} {
		if r := call(t, c, remoting.ViewBrokerStatsData, map[string]string{"statsName": k[0], "statsKey": k[1]}, nil); r.Code != remoting.SystemError {
			t.Errorf("%s %s after the topic's deletion: %d", k[0], k[1], r.Code)
		}
	}
}

// GET_BROKER_RUNTIME_INFO's day totals count what RocketMQ's
// BROKER_PUT_NUMS_WITHOUT_SYSTEM_TOPIC and
// BROKER_GET_NUMS_WITHOUT_SYSTEM_TOPIC count: messages stored and
// delivered outside system topics, by the puts RocketMQ counts. A
// committed transaction is one message (not its half, op and committed
// records), a delayed message one, when it is delivered (not when parked
// in the schedule topic); a send-back to the dead-letter topic counts
// nowhere, and a pull of a system topic is no get. The store's totals
// still count every record.
func TestDayTotalsLeaveOutSystemTopics(t *testing.T) {
	clk := testutil.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.Local))
	b := startTestBrokerWith(t, t.TempDir(), nil, func(b *Broker) { b.statsClock = clk.Now })
	c := b.client(nil)
	createTopic(t, c, "DayT", 1, 1)
	mustSend(t, c, "DayT", 0, "a", "")
	mustSend(t, c, "DayT", 0, "b", "")
	h := sendHalf(t, c, "DayT", 0, "UNIQ-DAY", "tx", "", time.Now().UnixMilli())
	if r := endTxn(t, c, h, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	mustSend(t, c, "DayT", 0, "later", "DELAY\x011\x02")
	// Waited for without a pull, which would count as a get.
	waitFor(t, "the delayed message delivered", func() bool {
		n, err := b.cqs.MaxOffset("DayT", 0)
		return err == nil && n == 4
	})
	got := pullAll(t, b, c, "DayT", 0)
	if len(got) != 4 {
		t.Fatalf("pulled %d messages of DayT, want 2 sends, the commit and the delayed message", len(got))
	}
	if halves := pullAll(t, b, c, meta.TransHalfTopic, 0); len(halves) != 1 {
		t.Fatalf("pulled %d halves, want 1", len(halves))
	}
	if r := call(t, c, remoting.ConsumerSendMsgBack, map[string]string{
		"offset": strconv.FormatInt(got[0].PhyOffset, 10), "group": "G-day", "delayLevel": "-1",
		"originMsgId": commitlog.MessageID(got[0].StoreHost, got[0].PhyOffset), "originTopic": "DayT",
	}, nil); r.Code != remoting.Success {
		t.Fatalf("send back to the DLQ: %d %s", r.Code, r.Remark)
	}

	info := runtimeInfo(t, c)
	if info["msgPutTotalTodayNow"] != "4" || info["msgGetTotalTodayNow"] != "4" {
		t.Errorf("day totals: put %s get %s, want 4 (2 sends, the commit, the delivered delayed message) and 4 (the pull of DayT)",
			info["msgPutTotalTodayNow"], info["msgGetTotalTodayNow"])
	}
	// The store counts the half, its op message, the parked delayed
	// message and the dead letter as well.
	if stored, err := strconv.Atoi(info["putMessageTimesTotal"]); err != nil || stored < 8 {
		t.Errorf("putMessageTimesTotal %q, want every record stored, at least 8", info["putMessageTimesTotal"])
	}
	// Past midnight the totals are this morning's.
	clk.Advance(12 * time.Hour)
	b.stats.Tick()
	info = runtimeInfo(t, c)
	if info["msgPutTotalTodayMorning"] != "4" || info["msgGetTotalTodayMorning"] != "4" {
		t.Errorf("morning totals: put %s get %s, want 4 and 4", info["msgPutTotalTodayMorning"], info["msgGetTotalTodayMorning"])
	}
}

// A delayed, timer or transactional send counts as a put of the topic the
// store put it in (SCHEDULE_TOPIC_XXXX, rmq_sys_wheel_timer,
// RMQ_SYS_TRANS_HALF_TOPIC), as RocketMQ counts it and its exportMetrics
// reads the schedule and half topics' rates; the message's own topic
// counts it when it is delivered or committed, and never when rolled back.
func TestPutStatisticsOfParkedMessages(t *testing.T) {
	clk := testutil.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.Local))
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{"timerPrecisionMs": "100"}, func(b *Broker) { b.statsClock = clk.Now })
	c := b.client(nil)
	mustSend(t, c, "ParkT", 0, "delayed", "DELAY\x011\x02")
	mustSend(t, c, "ParkT", 0, "timed", "TIMER_DELAY_MS\x01300\x02")
	born := time.Now().UnixMilli()
	for i, state := range []int{8, 12} { // one committed, one rolled back
		h := sendHalf(t, c, "TxParkT", 0, "UNIQ-PARK-"+strconv.Itoa(i), "tx", "", born)
		if r := endTxn(t, c, h, "pg", state, false); r.Code != remoting.Success {
			t.Fatalf("END_TRANSACTION %d: %d %s", state, r.Code, r.Remark)
		}
	}
	waitDelivered(t, b, c, "ParkT", 0, 2)
	b.caughtUp()
	clk.Advance(10 * time.Second)
	b.stats.Tick()
	for key, want := range map[string]int64{
		meta.ScheduleTopic: 1, meta.TimerTopic: 1, meta.TransHalfTopic: 2,
		"ParkT": 2, "TxParkT": 1,
	} {
		if d := viewStats(t, c, brokerstats.TopicPutNums, key); d.Minute.Sum != want {
			t.Errorf("TOPIC_PUT_NUMS of %s: %+v, want %d", key, d.Minute, want)
		}
	}
}

// The runtime info carries RocketMQ's schedule and timer backlog keys:
// scheduleMessageOffset_<level> ("progress,queue end" of each level the
// scheduler has worked, which rocketmq-exporter reads), timerReadBehind
// (seconds the timer's read time is behind: here, held at the message
// due and not delivered) and timerOffsetBehind.
func TestRuntimeInfoScheduleAndTimerBacklog(t *testing.T) {
	b := startTestBroker(t, map[string]string{"timerPrecisionMs": "100"})
	c := b.client(nil)
	mustSend(t, c, "BacklogT", 0, "delayed", "DELAY\x011\x02")
	waitDelivered(t, b, c, "BacklogT", 0, 1)
	updateConfig(t, c, "timerStopDequeue=true")
	mustSend(t, c, "BacklogT", 0, "held", "TIMER_DELAY_MS\x01100\x02")
	b.caughtUp()
	waitFor(t, "the held timer message to be a second overdue", func() bool {
		behind, err := strconv.ParseInt(runtimeInfo(t, c)["timerReadBehind"], 10, 64)
		return err == nil && behind >= 1
	})
	info := runtimeInfo(t, c)
	if v := info["scheduleMessageOffset_1"]; v != "1,1" {
		t.Errorf("scheduleMessageOffset_1 = %q, want 1,1 (level 1 delivered its one message)", v)
	}
	if v := info["timerOffsetBehind"]; v != "0" {
		t.Errorf("timerOffsetBehind = %q, want 0: the timer took the message in", v)
	}
}

// The runtime info carries every timer key RocketMQ writes and mqadmin
// clusterList -m prints: timerCongestNum, the timer messages waiting (a
// cancel takes one off), and timerEnqueueTps and timerDequeueTps, the
// rates of the records the timer took in and put over the last 10 s;
// with the timer off they read 0, as on RocketMQ.
func TestRuntimeInfoTimerCongestionAndRates(t *testing.T) {
	clk := testutil.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.Local))
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{"timerPrecisionMs": "100"}, func(b *Broker) { b.statsClock = clk.Now })
	c := b.client(nil)
	for range 10 { // ten seconds sampled before the timer does anything
		clk.Advance(time.Second)
		b.stats.Tick()
	}
	padded := time.Now()
	later := "TIMER_DELIVER_MS\x01" + strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10) + "\x02"
	mustSend(t, c, "RtTimerT", 0, "soon", "UNIQ_KEY\x01RT-1\x02TIMER_DELAY_MS\x01300\x02")
	mustSend(t, c, "RtTimerT", 0, "later", "UNIQ_KEY\x01RT-2\x02"+later)
	mustSend(t, c, "RtTimerT", 0, "later too", "UNIQ_KEY\x01RT-3\x02"+later)
	mustSend(t, c, "RtTimerT", 0, "cancel", "UNIQ_KEY\x01RT-4\x02"+later+"TIMER_DEL_UNIQKEY\x01RtTimerT+RT-3\x02")
	waitDelivered(t, b, c, "RtTimerT", 0, 1)
	b.caughtUp()
	clk.Advance(time.Second)
	b.stats.Tick()
	info := runtimeInfo(t, c)
	if took := time.Since(padded); took >= 9*time.Second {
		// The broker's own ticker samples every second (at the frozen
		// clock's time): ten of its samples would push the ones from
		// before the sends out of the 10 s window.
		t.Logf("the sends and the delivery took %v: the rates are not checked, their window no longer reaches back before them", took)
	} else {
		for _, k := range []string{"timerEnqueueTps", "timerDequeueTps"} {
			if v, err := strconv.ParseFloat(info[k], 32); err != nil || v <= 0 || !strings.Contains(info[k], ".") {
				t.Errorf("%s = %q, want a positive Java float: the timer took in 4 records and delivered 1 in the last 10 s", k, info[k])
			}
		}
	}
	waitFor(t, "timerCongestNum to count the message waiting", func() bool {
		return runtimeInfo(t, c)["timerCongestNum"] == "1"
	})

	off := startTestBroker(t, map[string]string{"timerWheelEnable": "false"})
	want := map[string]string{"timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0", "timerEnqueueTps": "0.0", "timerDequeueTps": "0.0"}
	got := runtimeInfo(t, off.client(nil))
	for k, v := range want {
		if got[k] != v {
			t.Errorf("with timerWheelEnable=false %s = %q, want %q", k, got[k], v)
		}
	}
}

// A delayed message's delivery counts, as RocketMQ's schedule service
// counts it with enableScheduleMessageStats (its default), as a put of
// the message's topic and as a get of SCHEDULE_TOPIC_XXXX by group
// SCHEDULE_CONSUMER; with the switch off neither is counted.
func TestDelayedDeliveryStatistics(t *testing.T) {
	for _, on := range []bool{true, false} {
		clk := testutil.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.Local))
		b := startTestBrokerWith(t, t.TempDir(), map[string]string{"enableScheduleMessageStats": strconv.FormatBool(on)},
			func(b *Broker) { b.statsClock = clk.Now })
		c := b.client(nil)
		mustSend(t, c, "SchedStatsT", 0, "delayed", "DELAY\x011\x02")
		waitDelivered(t, b, c, "SchedStatsT", 0, 1)
		b.caughtUp()
		clk.Advance(10 * time.Second)
		b.stats.Tick()
		for _, s := range []struct{ name, key string }{
			{brokerstats.GroupGetNums, meta.ScheduleTopic + "@SCHEDULE_CONSUMER"},
			{brokerstats.TopicPutNums, "SchedStatsT"},
		} {
			r := call(t, c, remoting.ViewBrokerStatsData, map[string]string{"statsName": s.name, "statsKey": s.key}, nil)
			if !on {
				if r.Code == remoting.Success {
					t.Errorf("enableScheduleMessageStats=false: %s of %s kept", s.name, s.key)
				}
				continue
			}
			if d := viewStats(t, c, s.name, s.key); d.Minute.Sum != 1 {
				t.Errorf("%s of %s: %+v, want the one delivery", s.name, s.key, d.Minute)
			}
		}
	}
}
