package timer

import (
	"errors"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

func TestPark(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_500) // half a second past a whole second
	const base = "UNIQ_KEY\x01U\x02"
	for _, tc := range []struct {
		name    string
		props   string
		topic   string
		sysFlag int32
		cfg     Config
		parked  bool
		outMs   string // expected TIMER_OUT_MS when parked
		err     error
	}{
		{name: "no timer property", props: base},
		{name: "delay in seconds, floored to the second", props: base + "TIMER_DELAY_SEC\x0110\x02", parked: true, outMs: "1700000010000"},
		{name: "delay in ms, floored", props: base + "TIMER_DELAY_MS\x011700\x02", parked: true, outMs: "1700000002000"},
		{name: "absolute time on a whole second goes one step earlier", props: base + "TIMER_DELIVER_MS\x011700000005000\x02", parked: true, outMs: "1700000004000"},
		{name: "absolute time with precision 200", props: base + "TIMER_DELIVER_MS\x011700000005150\x02",
			cfg: Config{Enable: true, Precision: 200 * time.Millisecond}, parked: true, outMs: "1700000005000"},
		{name: "seconds win over ms and absolute", props: base + "TIMER_DELIVER_MS\x011800000000000\x02TIMER_DELAY_MS\x0199999\x02TIMER_DELAY_SEC\x012\x02",
			parked: true, outMs: "1700000002000"},
		{name: "ms win over absolute", props: base + "TIMER_DELIVER_MS\x011800000000000\x02TIMER_DELAY_MS\x013000\x02", parked: true, outMs: "1700000003000"},
		{name: "time already come", props: base + "TIMER_DELIVER_MS\x011700000000500\x02"},
		{name: "zero delay", props: base + "TIMER_DELAY_SEC\x010\x02"},
		{name: "cancel of a time to come", props: base + "TIMER_DELIVER_MS\x011700000003000\x02TIMER_DEL_UNIQKEY\x01Orders+X\x02", parked: true, outMs: "1700000002000"},
		{name: "cancel of a time come", props: base + "TIMER_DELIVER_MS\x011700000000000\x02TIMER_DEL_UNIQKEY\x01Orders+X\x02", err: ErrCancelTooLate},
		{name: "just within the max delay", props: base + "TIMER_DELAY_SEC\x01259200\x02", parked: true, outMs: "1700259200000"},
		{name: "past the max delay", props: base + "TIMER_DELAY_MS\x01259200001\x02", err: ErrTooLate},
		{name: "disabled", props: base + "TIMER_DELAY_SEC\x015\x02", cfg: Config{Enable: false, Precision: time.Second, MaxDelay: time.Hour}, err: ErrDisabled},
		// RocketMQ refuses any timer property on a broker without the
		// wheel, before it reads the time (HookUtils.handleScheduleMessage).
		{name: "disabled, time already come", props: base + "TIMER_DELAY_SEC\x010\x02", cfg: Config{Enable: false, Precision: time.Second, MaxDelay: time.Hour}, err: ErrDisabled},
		{name: "disabled, a time in the past", props: base + "TIMER_DELIVER_MS\x011\x02", cfg: Config{Enable: false, Precision: time.Second, MaxDelay: time.Hour}, err: ErrDisabled},
		{name: "disabled, not a number", props: base + "TIMER_DELAY_MS\x01soon\x02", cfg: Config{Enable: false, Precision: time.Second, MaxDelay: time.Hour}, err: ErrDisabled},
		{name: "not a number", props: base + "TIMER_DELAY_SEC\x01soon\x02", err: ErrBadTime},
		{name: "negative delay: come, stored at once as RocketMQ", props: base + "TIMER_DELAY_MS\x01-5\x02"},
		{name: "negative time", props: base + "TIMER_DELIVER_MS\x01-1\x02"},
		{name: "overflowing negative seconds", props: base + "TIMER_DELAY_SEC\x01-9223372036854775807\x02", err: ErrBadTime},
		{name: "overflowing seconds", props: base + "TIMER_DELAY_SEC\x019223372036854775807\x02", err: ErrBadTime},
		{name: "already in the timer topic", topic: meta.TimerTopic, props: base + "TIMER_DELAY_SEC\x015\x02"},
		{name: "delivered by the timer", props: base + "TIMER_DELAY_SEC\x015\x02TIMER_OUT_MS\x011700000004000\x02"},
		{name: "prepared transaction record", props: base + "TIMER_DELAY_SEC\x015\x02", sysFlag: commitlog.TransactionPrepared},
		{name: "committed transaction record", props: base + "TIMER_DELAY_SEC\x015\x02", sysFlag: commitlog.TransactionCommit, parked: true, outMs: "1700000005000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := tc.topic
			if topic == "" {
				topic = "Orders"
			}
			cfg := tc.cfg
			if cfg == (Config{}) {
				cfg = DefaultConfig()
			}
			m := &commitlog.Message{Topic: topic, QueueID: 3, SysFlag: tc.sysFlag, Properties: tc.props}
			parked, err := Park(m, now, cfg)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if parked != tc.parked {
				t.Fatalf("parked %v, want %v", parked, tc.parked)
			}
			if !parked {
				if m.Topic != topic || m.QueueID != 3 || m.Properties != tc.props {
					t.Fatalf("a message not parked was changed: %+v", m)
				}
				return
			}
			p := commitlog.ParseProperties(m.Properties)
			if m.Topic != meta.TimerTopic || m.QueueID != 0 || p["TIMER_OUT_MS"] != tc.outMs || p["REAL_TOPIC"] != "Orders" ||
				p["REAL_QID"] != "3" || p["UNIQ_KEY"] != "U" {
				t.Fatalf("parked as topic %s queue %d properties %v, want TIMER_OUT_MS %s", m.Topic, m.QueueID, p, tc.outMs)
			}
		})
	}
}

func TestDelivered(t *testing.T) {
	parked := &commitlog.Message{Topic: meta.TimerTopic, QueueID: 0, Flag: 7, SysFlag: commitlog.TransactionCommit,
		PreparedTransactionOffset: 99, StoreTimestamp: 1_700_000_000_740, ReconsumeTimes: 2, Body: []byte("b"),
		Properties: "UNIQ_KEY\x01U\x02TIMER_DELAY_SEC\x015\x02TIMER_OUT_MS\x011700000005000\x02REAL_TOPIC\x01Orders\x02REAL_QID\x013\x02"}
	m, err := deliveredMessage(parked, time.UnixMilli(1_700_000_005_020), 500)
	if err != nil {
		t.Fatal(err)
	}
	// As RocketMQ's timer stores it: REAL_TOPIC and REAL_QID kept, no
	// PREPARED TX OFFSET, TIMER_ENQUEUE_MS the time it was taken in,
	// rounded down to the precision.
	want := "UNIQ_KEY\x01U\x02TIMER_DELAY_SEC\x015\x02TIMER_OUT_MS\x011700000005000\x02REAL_TOPIC\x01Orders\x02REAL_QID\x013\x02" +
		"TIMER_ENQUEUE_MS\x011700000000500\x02TIMER_DEQUEUE_MS\x011700000005020\x02"
	if m.Topic != "Orders" || m.QueueID != 3 || m.Flag != 7 || m.SysFlag != commitlog.TransactionCommit ||
		m.PreparedTransactionOffset != 0 || m.ReconsumeTimes != 2 || string(m.Body) != "b" || m.Properties != want {
		t.Fatalf("delivered %+v\nproperties %q\nwant       %q", m, m.Properties, want)
	}
	if parkedAgain, _ := Park(m, time.UnixMilli(1_700_000_005_020), DefaultConfig()); parkedAgain {
		t.Fatal("a delivered message would be parked again by its TIMER_DELAY_SEC")
	}
	parked.Properties = "UNIQ_KEY\x01U\x02REAL_QID\x013\x02"
	if _, err := deliveredMessage(parked, time.Now(), 1000); !errors.Is(err, errDropped) {
		t.Fatalf("a parked message without REAL_TOPIC: %v", err)
	}
}

func TestWholeTimes(t *testing.T) {
	at := func(ms ...int64) []kvindex.TimerEntry {
		out := make([]kvindex.TimerEntry, len(ms))
		for i, m := range ms {
			out[i] = kvindex.TimerEntry{DeliverMs: m, PhyOffset: int64(i)}
		}
		return out
	}
	for _, tc := range []struct {
		in   []kvindex.TimerEntry
		want int
	}{
		{at(1, 2, 3, 3), 2},
		{at(1, 1, 2), 2},
		{at(5, 5, 5), 3}, // one time: kept whole
		{at(7), 1},
	} {
		if got := wholeTimes(tc.in); len(got) != tc.want {
			t.Errorf("wholeTimes(%v) kept %d, want %d", tc.in, len(got), tc.want)
		}
	}
}
