package broker

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
)

// A due delayed message whose put fails every round (here the disk is
// full for its topic) is retried every round, but logged the first time
// and then once per repeatlog.DefaultInterval (15 s): a minute of rounds writes
// 4 lines of its level, not 600; the round that delivers it writes one
// info line. The broker's own loop waits at its first turn, and the test
// drives the rounds with a clock of its own.
func TestADelayedMessageFailingEveryRoundIsLoggedAFewTimesAMinute(t *testing.T) {
	gate, entered := make(chan struct{}), make(chan struct{})
	var turns atomic.Int32
	var opened sync.Once
	open := func() { opened.Do(func() { close(gate) }) }
	var full atomic.Bool
	var refused atomic.Int32
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{"messageDelayLevel": "1s 2s"}, func(b *Broker) {
		b.delayTurn = func(int) {
			if turns.Add(1) == 1 {
				close(entered)
				<-gate
			}
		}
		b.beforePut = func(msgs []*commitlog.Message) error {
			if msgs[0].Topic == "DelayFull" && full.Load() {
				refused.Add(1)
				return fmt.Errorf("put: %w", commitlog.ErrDiskFull)
			}
			return nil
		}
	})
	t.Cleanup(open) // runs before the broker's stop
	<-entered
	c := b.client(nil)
	createTopic(t, c, "DelayFull", 1, 1)
	full.Store(true)
	mustSend(t, c, "DelayFull", 0, "delayed", "DELAY\x011\x02")

	var buf bytes.Buffer
	clock := time.Unix(1_700_000_000, 0)
	fails := b.scheduleFailLogs(zerolog.New(&buf), func() time.Time { return clock })
	ctx := context.Background()
	waitFor(t, "the delayed message due and refused", func() bool {
		b.scheduleRound(ctx, fails)
		return refused.Load() > 0
	})
	buf.Reset()
	clock = clock.Add(100 * time.Millisecond)
	const rounds = 600 // a minute of rounds
	before := refused.Load()
	for range rounds {
		b.scheduleRound(ctx, fails)
		clock = clock.Add(100 * time.Millisecond)
	}
	if n := refused.Load() - before; n != rounds {
		t.Fatalf("%d puts refused over %d rounds, want one a round", n, rounds)
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	// The first line came before the rounds counted: 15, 30, 45 and 60 s.
	if len(got) != 4 {
		t.Fatalf("%d lines over %d failing rounds, want 4:\n%s", len(got), rounds, buf.String())
	}
	for i, l := range got {
		if !strings.Contains(l, `"level":"warn"`) || !strings.Contains(l, `"delayLevel":1`) || !strings.Contains(l, "deliver delayed messages") ||
			!strings.Contains(l, `"suppressed":149`) || strings.Contains(l, `"level":1`) {
			t.Errorf("line %d: %s", i, l)
		}
	}
	buf.Reset()

	full.Store(false)
	b.scheduleRound(ctx, fails)
	b.scheduleRound(ctx, fails)
	if got := pullAllOf(t, b, c, "DelayFull", 0); len(got) != 1 || string(got[0].Body) != "delayed" {
		t.Fatalf("delivered %d messages, want the delayed one", len(got))
	}
	got = strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(got) != 1 || !strings.Contains(got[0], `"level":"info"`) || !strings.Contains(got[0], `"delayLevel":1`) {
		t.Fatalf("after the delivery, logged:\n%s\nwant one info line of level 1", buf.String())
	}
}
