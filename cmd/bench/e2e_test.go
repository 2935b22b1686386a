package main

import (
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
)

// The probe counts only what consumers took inside its measured window:
// before the window opens and after it closes nothing counts, and the
// rate divides by the window's length.
func TestProbeConsumptionCountsTheWindowOnly(t *testing.T) {
	var p probeConsumption
	three := make([]commitlog.Message, 3)
	p.count(three, time.Now()) // before the window
	if p.rate() != 0 {
		t.Fatalf("rate %g before the window opened", p.rate())
	}
	p.mark(true)
	open := time.Unix(0, p.start.Load())
	p.count(three, open.Add(-time.Millisecond)) // taken before it, decoded late
	p.count(three, open.Add(time.Millisecond))
	p.count(three, open.Add(2*time.Millisecond))
	p.mark(false)
	closed := time.Unix(0, p.end.Load())
	p.count(three, closed.Add(time.Millisecond))
	if got := p.messages.Load(); got != 6 {
		t.Fatalf("%d messages counted, want the 6 taken inside the window", got)
	}
	if want := 6 / closed.Sub(open).Seconds(); p.rate() != want {
		t.Fatalf("rate %g, want %g", p.rate(), want)
	}
}
