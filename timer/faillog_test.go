package timer

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/repeatlog"
)

// A due message whose put fails every round is retried every round, but
// logged the first time and then once per repeatlog.DefaultInterval (15
// s): a minute of 100 ms rounds writes 4 lines, not 600, the last
// counting the rounds held back; the round that delivers it writes one
// info line.
func TestAPutFailingEveryRoundIsLoggedAFewTimesAMinute(t *testing.T) {
	f := newFixture(t)
	f.park("A1", "A", 0, 5, "")
	f.caughtUp()
	f.store.fail = func(int, []*commitlog.Message) error { return errTransient }
	var buf bytes.Buffer
	fails := repeatlog.New(zerolog.New(&buf), repeatlog.DefaultInterval, f.svc.now)
	f.at(10)
	const rounds = 600 // a minute of rounds
	for range rounds {
		f.svc.round(context.Background(), fails)
		f.nowMs.Add(100)
	}
	if calls := f.store.calls; calls != rounds {
		t.Fatalf("%d puts over %d rounds, want one a round", calls, rounds)
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(got) != 4 {
		t.Fatalf("%d lines over %d failing rounds, want 4:\n%s", len(got), rounds, buf.String())
	}
	for i, l := range got {
		if !strings.Contains(l, `"level":"warn"`) || !strings.Contains(l, "deliver timer messages") || !strings.Contains(l, "disk full") {
			t.Errorf("line %d: %s", i, l)
		}
		if i > 0 && !strings.Contains(l, `"suppressed":149`) {
			t.Errorf("line %d does not count the 149 rounds held back: %s", i, l)
		}
	}
	buf.Reset()

	f.store.fail = nil
	f.svc.round(context.Background(), fails)
	f.wantDelivered("A1")
	f.svc.round(context.Background(), fails)
	got = strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(got) != 1 || !strings.Contains(got[0], `"level":"info"`) || !strings.Contains(got[0], `"suppressed":149`) {
		t.Fatalf("after the delivery, logged:\n%s\nwant one info line counting the 149 rounds held back", buf.String())
	}
}
