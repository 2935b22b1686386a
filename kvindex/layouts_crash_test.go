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

const childEnvRebuildAlone = "KVINDEX_CRASH_REBUILD_ALONE_DIR"

// runRebuildAloneChild opens a store whose Pebble layout is stale past
// retention with that layout alone and no file layout to take numbering
// from, so the rebuild falls back on where the queues stood in the layout
// itself. It says "dropped" once the rebuild has dropped the queues and
// waits there to be killed.
func runRebuildAloneChild(root string) int {
	fmt.Println("ready")
	openStackWith(fatalT{}, root, layoutsConfig(root), LayoutKV, "", func(o *DispatcherOptions) {
		o.AfterRebuildDrop = func(string) {
			fmt.Println("dropped")
			select {}
		}
	})
	fmt.Println("caught up")
	select {}
}

// A broker killed after a rebuild dropped a layout's queues and before it
// gave the emptied ones their numbering back, with no other layout to take
// it from, leaves a store whose next start still knows where they stood:
// the rebuild recorded it before dropping them.
func TestLayoutRebuildAloneSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	dir := t.TempDir()
	leaveBehind(t, dir, LayoutFile, LayoutKV, 10) // the Pebble layout saw 30 of Gone's 40
	cmd, _, lines := testutil.StartChildLines(t, childEnvRebuildAlone+"="+dir)
	dropped := false
	for l := range lines {
		if l == "dropped" {
			dropped = true
			testutil.KillChild(cmd)
		}
		if l == "caught up" {
			t.Fatal("the child rebuilt the layout without stopping where the test kills it")
		}
	}
	if !dropped {
		t.Fatal("the child never reached the rebuild")
	}
	db := openTestDBAt(t, dir)
	if got, err := db.rebuildStarts(LayoutKV); err != nil || len(got) == 0 {
		t.Fatalf("rebuild starts after the kill: %v (%v)", got, err)
	}
	_ = db.Close()

	s := openStackWith(t, dir, layoutsConfig(dir), LayoutKV, "")
	defer s.close(t)
	if got := bounds(t, s.store, "Gone", 0); got != [2]int64{30, 30} {
		t.Fatalf("Gone/0 after the interrupted rebuild %v, want [30,30) as the layout had it", got)
	}
	if got := bounds(t, s.store, "Live", 0); got[1] != 205 || got[0] <= 5 {
		t.Fatalf("Live/0 after the interrupted rebuild %v", got)
	}
	if got, _ := s.db.rebuildStarts(LayoutKV); len(got) != 0 {
		t.Fatalf("rebuild starts left after the rebuild completed: %v", got)
	}
}
