package broker

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// A compacted topic deleted and created again restarts its queue offsets
// at 0; the expiry entries its old tombstones left (DropTopic keeps them)
// name the same queue offsets, and retention of the old records must not
// delete the new topic's copies there (it did: the newest value of k was
// gone).
func TestARecreatedCompactedTopicKeepsItsCopiesPastTheOldExpiries(t *testing.T) {
	b := startTestBroker(t, map[string]string{
		"mappedFileSizeCommitLog": "65536", "cleanResourceInterval": "20",
		"deleteWhen": strconv.Itoa((time.Now().Hour() + 12) % 24), "diskMaxUsedSpaceRatio": "95",
	})
	c := b.client(nil)
	createCompactedTopic(t, c, "CT")
	mustSend(t, c, "CT", 0, "", "KEYS\x01k\x02") // tombstone of k at offset 0
	filler := strings.Repeat("x", 4096)
	for range 20 {
		mustSend(t, c, "FillT", 0, filler, "")
	}
	b.caughtUp()
	if r := call(t, c, remoting.DeleteTopicInBroker, map[string]string{"topic": "CT"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete the topic: %d %s", r.Code, r.Remark)
	}
	createCompactedTopic(t, c, "CT")
	for range 20 {
		mustSend(t, c, "FillT", 0, filler, "")
	}
	r := mustSend(t, c, "CT", 0, "v1", "KEYS\x01k\x02")
	t.Logf("new message of k at queue offset %s", r.ExtFields["queueOffset"])
	if got, want := pulledKV(t, b, c, "CT"), "0:k=v1"; got != want {
		t.Fatalf("before retention: %s, want %s", got, want)
	}
	updateConfig(t, c, "fileReservedTime=0")
	if r := call(t, c, remoting.DeleteExpiredCommitLog, nil, nil); r.Code != remoting.Success {
		t.Fatalf("DELETE_EXPIRED_COMMITLOG: %d %s", r.Code, r.Remark)
	}
	waitFor(t, "retention past the old tombstone", func() bool { return b.clog.MinOffset() > 70000 })
	time.Sleep(200 * time.Millisecond)
	if got, want := pulledKV(t, b, c, "CT"), "0:k=v1"; got != want {
		t.Fatalf("after retention of the deleted topic's tombstone: %q, want %q", got, want)
	}
}

// A power failure under ASYNC_FLUSH loses the CommitLog's tail with a
// delayed message parked and delivered in it, while the level's progress
// (synced in the index) stays past it. After the restart the schedule
// queue numbers from below the progress again: the progress is lowered to
// the queue's end before sends are taken (RocketMQ's correctDelayOffset),
// or the next delayed message of the level would never be delivered.
func TestADelayProgressPastALostTailIsLowered(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	c := b.client(nil)
	mustSend(t, c, "Warm", 0, "w", "")
	b.caughtUp()
	tail := b.clog.MaxOffset()
	mustSend(t, c, "DLost", 0, "lost", "DELAY\x011\x02")
	waitDelivered(t, b, c, "DLost", 0, 1)
	waitFor(t, "the level's progress past the delivered message", func() bool {
		off, ok, err := b.offsets.Get(scheduleOffsetGroup, meta.ScheduleTopic, 0)
		return err == nil && ok && off == 1
	})
	end := b.clog.MaxOffset()
	b.stop()

	losePower(t, store, tail, end)

	b = startTestBrokerAt(t, store, nil)
	c = b.client(nil)
	if got := b.clog.MaxOffset(); got != tail {
		t.Fatalf("the recovered log ends at %d, want %d", got, tail)
	}
	mustSend(t, c, "DAfter", 0, "after the restart", "DELAY\x011\x02")
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if got := pullAll(t, b, c, "DAfter", 0); len(got) == 1 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	off, _, _ := b.offsets.Get(scheduleOffsetGroup, meta.ScheduleTopic, 0)
	maxOff, _ := b.cqs.MaxOffset(meta.ScheduleTopic, 0)
	t.Fatalf("a level-1 (1 s) message sent after the restart not delivered in 6 s: level progress %d, schedule queue max %d", off, maxOff)
}
