package broker

import (
	"testing"
	"time"
)

// registerNameServerPeriod is bounded from above by 60 s, as RocketMQ's
// BrokerController bounds it (Math.min(period, 60000)); a period not
// positive is the default 30 s. A period below RocketMQ's lower bound of
// 10 s is kept: the tests that watch routes change register every 100 ms.
func TestRegisterPeriodBounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		set, got time.Duration
	}{
		{"unset", 0, 30 * time.Second},
		{"negative", -time.Second, 30 * time.Second},
		{"below RocketMQ's 10 s floor", 100 * time.Millisecond, 100 * time.Millisecond},
		{"just below the floor", 9999 * time.Millisecond, 9999 * time.Millisecond},
		{"at the floor", 10 * time.Second, 10 * time.Second},
		{"inside", 30 * time.Second, 30 * time.Second},
		{"at the bound", 60 * time.Second, 60 * time.Second},
		{"just above the bound", 60001 * time.Millisecond, 60 * time.Second},
		{"far above the bound", time.Hour, 60 * time.Second},
	} {
		if got := registerPeriod(tc.set); got != tc.got {
			t.Errorf("%s: registerNameServerPeriod %v registers every %v, want %v", tc.name, tc.set, got, tc.got)
		}
	}
}
