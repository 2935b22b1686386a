package main

import (
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
)

func TestBurstDueIsOnAWholeSecond(t *testing.T) {
	for _, tc := range []struct {
		now  int64 // Unix ms
		lead time.Duration
		want int64
	}{
		{now: 1_000_250, lead: 2 * time.Second, want: 1_003_000},
		{now: 1_000_000, lead: 2 * time.Second, want: 1_002_000}, // already whole: kept
		{now: 1_000_999, lead: time.Millisecond, want: 1_001_000},
	} {
		if got := burstDue(time.UnixMilli(tc.now), tc.lead).UnixMilli(); got != tc.want {
			t.Errorf("burstDue(%d, %v) = %d, want %d", tc.now, tc.lead, got, tc.want)
		}
	}
}

func TestPullClockTimesAPhase(t *testing.T) {
	due := time.UnixMilli(1_000_000)
	p := &pullClock{due: due, late: NewRecorder()}
	two := make([]commitlog.Message, 2)
	p.seen(two, due.Add(300*time.Millisecond))
	p.seen(two[:1], due.Add(100*time.Millisecond)) // answers arrive out of order
	p.seen(two[:1], due.Add(-time.Millisecond))
	if got := time.Unix(0, p.first.Load()).Sub(due); got != -time.Millisecond {
		t.Errorf("first %v after due, want -1ms", got)
	}
	if got := time.Unix(0, p.last.Load()).Sub(due); got != 300*time.Millisecond {
		t.Errorf("last %v after due, want 300ms", got)
	}
	if n := p.early.Load(); n != 1 {
		t.Errorf("%d early, want 1", n)
	}
	l := p.late.Summary()
	if l.Count != 3 || l.Max < 299*time.Millisecond || l.P50 < 299*time.Millisecond {
		t.Errorf("lateness %+v, want 3 samples: 100 ms once, 300 ms twice", l)
	}
	plain := &pullClock{}
	plain.seen(two, due)
	if plain.last.Load() != due.UnixNano() || plain.early.Load() != 0 {
		t.Errorf("plain phase: last %d early %d", plain.last.Load(), plain.early.Load())
	}
}
