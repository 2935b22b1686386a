package timer

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
)

// FuzzPark reads the timer properties of an arbitrary properties string
// (a producer's, or a record read back from the CommitLog) as a send
// does: Park never panics, fails only with its own errors, and a message
// it parks goes to the timer topic, due after now and within the maximum
// delay, bound for the topic and queue it was sent to.
func FuzzPark(f *testing.F) {
	f.Add("TIMER_DELAY_SEC\x015\x02", int32(0))
	f.Add("TIMER_DELIVER_MS\x01-1\x02", int32(0))
	f.Add("TIMER_DELAY_MS\x019223372036854775807\x02", int32(0))
	f.Add("TIMER_DELAY_SEC\x01x\x02TIMER_DEL_UNIQKEY\x01k\x02", int32(0))
	f.Add("TIMER_DELAY_MS\x011500\x02TIMER_OUT_MS\x011\x02", int32(0))
	f.Add("TIMER_DELAY_SEC\x014611686018427387\x02", int32(commitlog.TransactionCommit))
	now := time.UnixMilli(1_700_000_000_000)
	cfg := DefaultConfig()
	f.Fuzz(func(t *testing.T, props string, sysFlag int32) {
		m := &commitlog.Message{Topic: "T", QueueID: 3, Properties: props, SysFlag: sysFlag}
		parked, err := Park(m, now, cfg)
		if err != nil {
			if !errors.Is(err, ErrBadTime) && !errors.Is(err, ErrTooLate) && !errors.Is(err, ErrCancelTooLate) {
				t.Fatalf("Park(%q): unexpected error %v", props, err)
			}
			return
		}
		if !parked {
			if m.Topic != "T" || m.Properties != props {
				t.Fatalf("Park(%q) did not park, yet changed the message to %s %q", props, m.Topic, m.Properties)
			}
			return
		}
		if m.Topic != meta.TimerTopic || m.QueueID != 0 {
			t.Fatalf("Park(%q) parked in %s/%d", props, m.Topic, m.QueueID)
		}
		if topic, qid, ok := commitlog.RealDestination(m.Properties); !ok || topic != "T" || qid != 3 {
			t.Fatalf("Park(%q) = %q: bound for %s/%d %v", props, m.Properties, topic, qid, ok)
		}
		v, _ := commitlog.LookupProperty(m.Properties, PropOutMs)
		at, err := strconv.ParseInt(v, 10, 64)
		if err != nil || at < now.UnixMilli()-cfg.Precision.Milliseconds() || at > now.Add(cfg.MaxDelay).UnixMilli() {
			t.Fatalf("Park(%q) = %q: due at %q, outside now..now+%v", props, m.Properties, v, cfg.MaxDelay)
		}
	})
}
