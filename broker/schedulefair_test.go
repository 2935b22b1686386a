package broker

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
)

// A backlog in one delay level does not hold back the others: the levels
// take turns of schedShare messages, as RocketMQ's task per level
// delivers each level on its own. Here 60 messages of level 1 and one of
// level 2 are due together; the level-2 message is delivered after the
// first turn of level 1, not after its whole backlog.
func TestADelayLevelBacklogDoesNotHoldBackTheOtherLevels(t *testing.T) {
	gate := make(chan struct{})
	var once, opened sync.Once
	open := func() { opened.Do(func() { close(gate) }) }
	b := startTestBrokerWith(t, t.TempDir(), map[string]string{"messageDelayLevel": "1s 2s"}, func(b *Broker) {
		b.schedShare = 4
		// The loop waits at its first turn until everything is due.
		b.delayTurn = func(int) { once.Do(func() { <-gate }) }
	})
	// Registered after the broker's stop, so it runs first: a failure
	// before the gate opens must not leave the loop waiting at it.
	t.Cleanup(open)
	c := b.client(nil)
	const backlog = 60
	for i := range backlog {
		mustSend(t, c, "DelayTurns", 0, "level 1 #"+strconv.Itoa(i), "DELAY\x011\x02")
	}
	mustSend(t, c, "DelayTurns", 0, "level 2", "DELAY\x012\x02")
	time.Sleep(2200 * time.Millisecond) // the level-2 message is due
	open()
	var got []commitlog.Message
	waitFor(t, "every delayed message delivered", func() bool {
		got = pullAllOf(t, b, c, "DelayTurns", 0)
		return len(got) > backlog
	})
	at := -1
	for i, m := range got {
		if string(m.Body) == "level 2" {
			at = i
		}
	}
	if at < 0 || at > b.schedShare {
		t.Fatalf("the level-2 message was delivered %dth of %d, want after at most one turn of %d level-1 messages", at+1, len(got), b.schedShare)
	}
}
