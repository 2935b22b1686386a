package txn

import (
	"sync"
	"testing"
	"time"
)

// transactionTimeOut, transactionCheckInterval and transactionCheckMax
// changed while the checker runs (UPDATE_BROKER_CONFIG) apply at the next
// check, as RocketMQ's checker reads them at each pass: a longer timeout
// puts off a half younger than it, a new interval spaces the next check,
// a lower maximum gives up a half checked that many times.
func TestCheckLimitsChangedWhileRunningApplyAtTheNextCheck(t *testing.T) {
	var mu sync.Mutex
	lim := Limits{Timeout: 6 * time.Second, CheckInterval: 30 * time.Second, CheckMax: 15}
	set := func(f func(*Limits)) {
		mu.Lock()
		defer mu.Unlock()
		f(&lim)
	}
	f := newFixture(t, Config{Limits: func() Limits {
		mu.Lock()
		defer mu.Unlock()
		return lim
	}})
	start := f.now
	h := f.sendHalf("L", "")
	checks := func() int32 {
		o, _ := f.open(h.PhyOffset)
		return o.Checks
	}

	// Due at 6 s; a timeout raised to 20 s meanwhile puts it off.
	set(func(l *Limits) { l.Timeout = 20 * time.Second })
	f.now = start.Add(6*time.Second + time.Millisecond)
	if st := f.pass(); st != (PassStats{Immune: 1}) || checks() != 0 {
		t.Fatalf("pass at 6 s with a 20 s timeout: %+v, %d checks; want the half put off", st, checks())
	}
	f.now = start.Add(20*time.Second + time.Millisecond)
	if st := f.pass(); st != (PassStats{Checked: 1}) {
		t.Fatalf("pass at 20 s: %+v, want a check", st)
	}
	// The interval, lowered to 5 s, spaces the next check.
	set(func(l *Limits) { l.CheckInterval = 5 * time.Second })
	f.now = start.Add(50*time.Second + time.Millisecond)
	if st := f.pass(); st != (PassStats{Checked: 1}) {
		t.Fatalf("pass at 50 s: %+v, want the second check", st)
	}
	if o, _ := f.open(h.PhyOffset); o.NextCheckAt != f.now.Add(5*time.Second).UnixMilli() {
		t.Fatalf("next check %d ms after the second, want 5000", o.NextCheckAt-f.now.UnixMilli())
	}
	// A maximum lowered to 2 gives it up at its next visit.
	set(func(l *Limits) { l.CheckMax = 2 })
	f.now = f.now.Add(5 * time.Second)
	if st := f.pass(); st != (PassStats{Discarded: 1}) {
		t.Fatalf("pass with transactionCheckMax lowered to 2: %+v, want the half given up", st)
	}
	if n := f.askedCount(); n != 2 {
		t.Fatalf("asked %d times, want 2", n)
	}
}
