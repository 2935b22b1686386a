// Package timer implements RocketMQ 5's timer messages: a message sent
// with TIMER_DELIVER_MS (an absolute time), TIMER_DELAY_SEC or
// TIMER_DELAY_MS is parked in rmq_sys_wheel_timer and stored in its real
// topic when it is due.
//
//	producer --send, TIMER_DELAY_SEC=30--> Park: topic rmq_sys_wheel_timer q0,
//	                                       TIMER_OUT_MS, REAL_TOPIC, REAL_QID
//	dispatcher (Hook) -----------------------------> index 0x70 [deliverMs|phyOffset]
//	Service.Run, every 100 ms: entries due -> record read back ->
//	    real topic and queue, TIMER_ENQUEUE_MS, TIMER_DEQUEUE_MS -> Put -> entry deleted
//
// RocketMQ keeps the pending timers in a timerlog and a timing wheel of
// 604,800 slots, rolling longer delays through the wheel again; here they
// are keys of the index ordered by delivery time, so any delay up to
// timerMaxDelaySec is one key and what is due is one range scan.
//
// Delivery is at least once: a crash between the re-put and the deletion
// of the entry delivers the message again, as RocketMQ's timer and delay
// levels do. The delay levels of RocketMQ 4 (the DELAY property) are the
// broker's scheduler, not this package.
package timer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
)

// Property names of timer messages (RocketMQ's MessageConst).
const (
	PropDelaySec  = "TIMER_DELAY_SEC"
	PropDelayMs   = "TIMER_DELAY_MS"
	PropDeliverMs = "TIMER_DELIVER_MS"
	PropOutMs     = "TIMER_OUT_MS"
	PropEnqueueMs = "TIMER_ENQUEUE_MS"
	PropDequeueMs = "TIMER_DEQUEUE_MS"
	// PropRollTimes counts how often Apache RocketMQ parked a message again
	// because its delivery time lay beyond its timing wheel.
	PropRollTimes = "TIMER_ROLL_TIMES"
	// PropDeleteKey marks a message that cancels the timer message named
	// REAL_TOPIC+"+"+UNIQ_KEY due at the same time.
	PropDeleteKey = "TIMER_DEL_UNIQKEY"
)

// Config holds the broker settings of timer messages (RocketMQ's
// MessageStoreConfig names and defaults).
type Config struct {
	// Enable is timerWheelEnable: when false, a timer message that is not
	// due yet is refused.
	Enable bool
	// Precision is timerPrecisionMs (default 1 s): delivery times are
	// rounded down to it.
	Precision time.Duration
	// MaxDelay is timerMaxDelaySec (default 3 days): a message due later
	// is refused.
	MaxDelay time.Duration
	// RollWindow is timerRollWindowSlot slots of Precision (default 2
	// days): a parked message due further ahead of its store time is
	// parked again within it (Service.Hook), as RocketMQ rolls it through
	// its wheel, so retention (fileReservedTime) keeps a copy of it.
	RollWindow time.Duration
}

// DefaultConfig returns RocketMQ's defaults.
func DefaultConfig() Config {
	return Config{Enable: true, Precision: time.Second, MaxDelay: 72 * time.Hour, RollWindow: 48 * time.Hour}
}

func (c Config) withDefaults() Config {
	def := DefaultConfig()
	if c.Precision <= 0 {
		c.Precision = def.Precision
	}
	if c.MaxDelay <= 0 {
		c.MaxDelay = def.MaxDelay
	}
	if c.RollWindow <= 0 {
		c.RollWindow = def.RollWindow
	}
	return c
}

// Errors of Park; the broker answers ErrDisabled with SYSTEM_ERROR and
// the others with MESSAGE_ILLEGAL.
var (
	// ErrDisabled: a timer message was sent while timerWheelEnable is off.
	ErrDisabled = errors.New("accurate timer message is not enabled, timerWheelEnable is false")
	// ErrTooLate: the delivery time is further ahead than timerMaxDelaySec.
	ErrTooLate = errors.New("timer message illegal, the delay time should not be bigger than the max delay")
	// ErrBadTime: a timer property is not a number.
	ErrBadTime = errors.New("timer message illegal, the delivery time is not a number")
	// ErrCancelTooLate: a cancel (TIMER_DEL_UNIQKEY) names a time that has
	// come; the message it names is delivered already.
	ErrCancelTooLate = errors.New("timer message illegal, if set del msg, the delay time should be bigger than the current time")
)

// Park parks a message sent with a timer property in the timer topic, as
// RocketMQ does at put, and reports whether it did: a message already in
// the timer topic or already delivered by it (TIMER_OUT_MS set), a
// prepared or rolled-back transaction record, a message without timer
// properties and one whose time has come are left as they are. The
// caller handles a DELAY level first: it takes precedence.
func Park(m *commitlog.Message, now time.Time, cfg Config) (bool, error) {
	if !strings.Contains(m.Properties, "TIMER_") {
		return false, nil // every send comes here: one scan for the common case
	}
	cfg = cfg.withDefaults()
	tx := commitlog.TransactionType(m.SysFlag)
	if m.Topic == meta.TimerTopic || (tx != commitlog.TransactionNotType && tx != commitlog.TransactionCommit) {
		return false, nil
	}
	if _, ok := commitlog.LookupProperty(m.Properties, PropOutMs); ok {
		return false, nil
	}
	if !cfg.Enable && hasTimerProperty(m.Properties) {
		// RocketMQ refuses it before reading the time (HookUtils:
		// WHEEL_TIMER_NOT_ENABLE), whatever the time says.
		return false, ErrDisabled
	}
	deliverMs, ok, err := deliveryTime(m.Properties, now.UnixMilli())
	if err != nil || !ok {
		return false, err
	}
	nowMs := now.UnixMilli()
	if deliverMs <= nowMs {
		if _, cancel := commitlog.LookupProperty(m.Properties, PropDeleteKey); cancel {
			return false, ErrCancelTooLate
		}
		return false, nil
	}
	if deliverMs-nowMs > cfg.MaxDelay.Milliseconds() {
		return false, fmt.Errorf("%w %dms", ErrTooLate, cfg.MaxDelay.Milliseconds())
	}
	precision := cfg.Precision.Milliseconds()
	if deliverMs%precision == 0 {
		deliverMs -= precision
	} else {
		deliverMs -= deliverMs % precision
	}
	m.Properties = commitlog.RewriteProperties(m.Properties, nil,
		[2]string{PropOutMs, strconv.FormatInt(deliverMs, 10)},
		[2]string{commitlog.PropertyRealTopic, m.Topic},
		[2]string{commitlog.PropertyRealQueueID, strconv.Itoa(int(m.QueueID))})
	m.Topic = meta.TimerTopic
	m.QueueID = 0
	return true, nil
}

// hasTimerProperty reports whether props ask for a delivery time
// (TIMER_DELAY_SEC, TIMER_DELAY_MS or TIMER_DELIVER_MS).
func hasTimerProperty(props string) bool {
	for _, name := range []string{PropDelaySec, PropDelayMs, PropDeliverMs} {
		if _, ok := commitlog.LookupProperty(props, name); ok {
			return true
		}
	}
	return false
}

// deliveryTime reads TIMER_DELAY_SEC, TIMER_DELAY_MS or TIMER_DELIVER_MS,
// in that order, as an absolute time in milliseconds.
func deliveryTime(props string, nowMs int64) (int64, bool, error) {
	for _, p := range []struct {
		name  string
		scale int64
		base  int64
	}{{PropDelaySec, 1000, nowMs}, {PropDelayMs, 1, nowMs}, {PropDeliverMs, 1, 0}} {
		v, ok := commitlog.LookupProperty(props, p.name)
		if !ok {
			continue
		}
		// A negative delay or time is one already come: RocketMQ stores
		// such a message at once.
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -(1<<62)/p.scale || n > (1<<62)/p.scale {
			return 0, false, fmt.Errorf("%w: %s=%q", ErrBadTime, p.name, v)
		}
		return p.base + n*p.scale, true, nil
	}
	return 0, false, nil
}
