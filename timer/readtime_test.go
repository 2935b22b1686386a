package timer

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// Run starts the read time (DeliveredBefore, RocketMQ's currReadTimeMs)
// where the last run saved it, as RocketMQ's timer starts at its
// checkpoint's lastReadTimeMs: with delivery stopped from the start it
// stays there, not at the start's slot; it saves it when it stops. A
// saved time older than RocketMQ's wheel (7 days but 60 slots) starts at
// the wheel's start, and one in the future at now.
func TestRunResumesTheSavedReadTime(t *testing.T) {
	f := newFixture(t)
	run := func(saved int64) (int64, int64) {
		t.Helper()
		if err := f.db.SetTimerReadTime(saved); err != nil {
			t.Fatal(err)
		}
		svc := New(f.db.Timers(), f.store, Options{Paused: func() bool { return true },
			SavedReadTime: f.db.TimerReadTime, SaveReadTime: f.db.SetTimerReadTime}, zerolog.Nop())
		svc.now = f.svc.now
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); svc.Run(ctx) }()
		for deadline := time.Now().Add(20 * time.Second); svc.readMs.Load() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("Run set no read time")
			}
		}
		got, err := svc.DeliveredBefore(time.UnixMilli(base))
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		<-done
		after, ok, err := f.db.TimerReadTime()
		if err != nil || !ok {
			t.Fatalf("saved read time after Run: %d %v %v", after, ok, err)
		}
		return got, after
	}
	if got, after := run(base - 3_600_250); got != base-3_601_000 || after != got {
		t.Fatalf("read time an hour back: %d, saved %d at the end; want the slot %d", got, after, base-3_601_000)
	}
	earliest := base - (wheelSlots-wheelBlankSlots)*1000
	if got, _ := run(base - 8*24*3600*1000); got != earliest {
		t.Fatalf("read time 8 days back: %d, want the wheel's start %d", got, earliest)
	}
	if got, _ := run(base + 60_000); got != base {
		t.Fatalf("read time a minute ahead: %d, want now %d", got, base)
	}
}
