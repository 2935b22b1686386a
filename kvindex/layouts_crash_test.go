package kvindex

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// Shape of the store whose file layout the catch-up crash test builds:
// catchUpCrashQueues queues of catchUpCrashPerQueue 1,000-byte messages,
// written with the Pebble layout alone; the catch-up records its progress
// every catchUpCrashMark bytes.
const (
	catchUpCrashQueues   = 16
	catchUpCrashPerQueue = 1000
	catchUpCrashMark     = 512 << 10
)

// markEvery makes a dispatcher's catch-up record its progress often.
func markEvery(o *DispatcherOptions) { o.CatchUpMarkBytes = catchUpCrashMark }

// runCatchUpChild opens the store at root with double-write turned on,
// which fills its file layout from the CommitLog, says so, and waits to be
// killed.
func runCatchUpChild(root string) int {
	fmt.Println("ready")
	s := openStackWith(fatalT{}, root, layoutsConfig(root), LayoutKV, LayoutFile, markEvery)
	fmt.Println("caught up")
	_ = s // held open until the kill
	select {}
}

// A broker killed while it fills a layout (double-write turned on for a
// store that ran with the Pebble layout alone) leaves a store whose next
// start completes the layout: afterwards both layouts hold every entry,
// whether the kill came before the first progress record, between two, or
// after the end. Each kill hits a fresh copy of the store at a random
// moment of the child's start.
func TestLayoutCatchUpSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	template := t.TempDir()
	s := openStackWith(t, template, layoutsConfig(template), LayoutKV, "")
	for q := int32(0); q < catchUpCrashQueues; q++ {
		s.put(t, "T", q, catchUpCrashPerQueue)
	}
	s.close(t)

	window := testutil.KillWindow(t, childEnvCatchUp+"="+testutil.CopyStore(t, template), "caught up")
	rng := rand.New(rand.NewPCG(5, uint64(time.Now().UnixNano())))
	var midway int
	for i := 0; i < 8; i++ {
		dir := testutil.CopyStore(t, template)
		cmd, _, lines := testutil.StartChildLines(t, childEnvCatchUp+"="+dir)
		time.Sleep(time.Duration(rng.Int64N(int64(window) + 1)))
		testutil.KillChild(cmd)
		done := false
		for l := range lines {
			done = done || l == "caught up"
		}
		db := openTestDBAt(t, dir)
		if v, ok, _ := db.metaInt64(metaCQWritten + LayoutFile); ok && !done && v > 0 {
			midway++
		}
		_ = db.Close()

		s := openStackWith(t, dir, layoutsConfig(dir), LayoutFile, LayoutKV)
		if n := s.agree(t); n != catchUpCrashQueues*catchUpCrashPerQueue {
			t.Fatalf("kill %d: %d entries compared, want %d", i, n, catchUpCrashQueues*catchUpCrashPerQueue)
		}
		for q := int32(0); q < catchUpCrashQueues; q++ {
			if got := bounds(t, s.store, "T", q); got != [2]int64{0, catchUpCrashPerQueue} {
				t.Fatalf("kill %d: T/%d in the file layout %v", i, q, got)
			}
		}
		s.close(t)
	}
	t.Logf("%d of 8 kills came after the catch-up recorded progress and before its end", midway)
}

const childEnvRebuild = "KVINDEX_CRASH_REBUILD_DIR"

// runRebuildChild opens a store from leaveBehind (file behind) with
// double-write, which rebuilds its file layout, says so, and waits to be
// killed.
func runRebuildChild(root string) int {
	fmt.Println("ready")
	s := openStackWith(fatalT{}, root, layoutsConfig(root), LayoutKV, LayoutFile)
	fmt.Println("caught up")
	_ = s
	select {}
}

// A broker killed while it rebuilds a layout stale past retention leaves
// a store whose next start rebuilds it again: the queue whose records are
// all gone keeps its numbering and both layouts agree, whenever the kill
// came.
func TestLayoutRebuildSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	template := t.TempDir()
	leaveBehind(t, template, LayoutKV, LayoutFile, 0)
	window := testutil.KillWindow(t, childEnvRebuild+"="+testutil.CopyStore(t, template), "caught up")
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	cut := 0
	for i := 0; i < 6; i++ {
		dir := testutil.CopyStore(t, template)
		cmd, _, lines := testutil.StartChildLines(t, childEnvRebuild+"="+dir)
		time.Sleep(time.Duration(rng.Int64N(int64(window) + 1)))
		testutil.KillChild(cmd)
		done := false
		for l := range lines {
			done = done || l == "caught up"
		}
		if !done {
			cut++
		}
		s := openStackWith(t, dir, layoutsConfig(dir), LayoutFile, LayoutKV)
		if got := bounds(t, s.store, "Gone", 0); got != [2]int64{30, 30} {
			t.Fatalf("kill %d: Gone/0 in the file layout %v, want [30,30)", i, got)
		}
		s.agree(t)
		s.close(t)
	}
	t.Logf("%d of 6 kills came before the rebuild's end (window %v)", cut, window)
}
