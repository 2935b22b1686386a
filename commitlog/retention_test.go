package commitlog

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/internal/vfs"
)

// next0430 returns 04:30 local time tomorrow. The fake clock stays within
// a day or two of the real one, so a segment whose mtime the kernel moves
// to the real "now" (the prefaulter writing to it) still counts as recent.
func next0430() time.Time {
	n := time.Now().AddDate(0, 0, 1)
	return time.Date(n.Year(), n.Month(), n.Day(), 4, 30, 0, 0, time.Local)
}

// retentionLog returns a log of 4 KiB segments holding five full segments
// and an active one, with a fake clock and disk usage.
func retentionLog(t *testing.T, adjust ...func(*Config)) (*Log, *testutil.Clock, *vfs.Faulty, *[]int64) {
	t.Helper()
	cfg := testConfig(t, 4096)
	for _, a := range adjust {
		a(&cfg)
	}
	clock := testutil.NewClock(next0430())
	cfg.Now = clock.Now
	ffs := vfs.NewFaulty(vfs.OS{})
	ffs.SetUsage(&vfs.DiskUsage{Total: 100, Free: 90, Avail: 90})
	cfg.FS = ffs
	cfg.CleanInterval = time.Hour // the tests drive passes themselves
	l := mustOpen(t, cfg)
	t.Cleanup(func() { l.Close() })
	for l.MaxOffset() < 5*4096+100 {
		mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 880)})
	}
	var mins []int64
	var mu sync.Mutex
	l.OnMinOffsetChange(func(m int64) { mu.Lock(); mins = append(mins, m); mu.Unlock() })
	// Segments 0..2 expired (100 h old), 3 and 4 recent, 5 active.
	for i := int64(0); i < 6; i++ {
		age := time.Hour
		if i < 3 {
			age = 100 * time.Hour
		}
		mt := clock.Now().Add(-age)
		if err := os.Chtimes(segPath(cfg.Dir, i*4096), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	return l, clock, ffs, &mins
}

func TestRetentionAtDeleteHour(t *testing.T) {
	l, clock, _, mins := retentionLog(t)
	// 05:30 is not a deletion hour and the disk is 10% used: nothing goes.
	clock.Set(next0430().Add(time.Hour)) // 05:30
	if n, err := l.cleanOnce(); err != nil || n != 0 {
		t.Fatalf("off-hour pass deleted %d, %v", n, err)
	}
	// A view into segment 0 taken before the deletion keeps it readable.
	v, err := l.ReadRecord(0)
	if err != nil {
		t.Fatal(err)
	}
	before := append([]byte(nil), v.Data...)
	clock.Set(next0430())
	n, err := l.cleanOnce()
	if err != nil || n != 3 {
		t.Fatalf("04:30 pass deleted %d, %v; want the 3 expired segments", n, err)
	}
	if l.MinOffset() != 3*4096 || len(*mins) != 1 || (*mins)[0] != 3*4096 {
		t.Fatalf("min offset %d, subscribers told %v", l.MinOffset(), *mins)
	}
	if _, err := l.ReadRecord(0); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the new min: %v", err)
	}
	r := l.NewReader(0)
	if _, err := r.Next(); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("reader below the new min: %v", err)
	}
	r.Close()
	// The view still reads the old bytes, and the file is still there.
	if string(v.Data) != string(before) {
		t.Fatal("view changed after deletion")
	}
	if _, err := os.Stat(segPath(l.cfg.Dir, 0)); err != nil {
		t.Fatalf("segment 0 removed while a view is live: %v", err)
	}
	for i := int64(1); i < 3; i++ {
		if _, err := os.Stat(segPath(l.cfg.Dir, i*4096)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("segment %d not removed: %v", i, err)
		}
	}
	v.Release()
	if _, err := os.Stat(segPath(l.cfg.Dir, 0)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("segment 0 not removed after the last release: %v", err)
	}
	// The pass stopped at the first recent segment; nothing more goes.
	if n, _ := l.cleanOnce(); n != 0 {
		t.Fatalf("second pass deleted %d", n)
	}
	if got := scanAll(t, l); len(got) == 0 || got[0].PhyOffset != 3*4096 {
		t.Fatalf("records after retention start at %d", got[0].PhyOffset)
	}
}

func TestRetentionDiskRatio(t *testing.T) {
	l, clock, ffs, mins := retentionLog(t)
	clock.Set(next0430().Add(9 * time.Hour)) // 13:30, not a deletion hour
	// Above DiskMaxUsedSpaceRatio (75%): expired segments go at any hour.
	ffs.SetUsage(&vfs.DiskUsage{Total: 100, Free: 20, Avail: 20})
	if n, err := l.cleanOnce(); err != nil || n != 3 {
		t.Fatalf("80%% used: deleted %d, %v", n, err)
	}
	// Above DiskForceCleanRatio (85%): the oldest go whatever their age,
	// but never the active segment.
	ffs.SetUsage(&vfs.DiskUsage{Total: 100, Free: 12, Avail: 12})
	if n, err := l.cleanOnce(); err != nil || n != 2 {
		t.Fatalf("88%% used: deleted %d, %v", n, err)
	}
	if n, _ := l.cleanOnce(); n != 0 {
		t.Fatalf("the active segment was deleted")
	}
	if l.MinOffset() != 5*4096 || len(*mins) != 2 || (*mins)[1] != 5*4096 {
		t.Fatalf("min %d, told %v", l.MinOffset(), *mins)
	}
	r := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 1, 10)})
	if r.PhyOffset < 5*4096 {
		t.Fatalf("append at %d", r.PhyOffset)
	}
}

// Above the warning level, where appends are refused, the oldest segments
// go whatever their age even when DiskForceCleanRatio is set higher, as
// RocketMQ's isSpaceToDelete: the log would otherwise refuse appends until
// its segments expired.
func TestRetentionForcesCleaningAboveTheWarningLevel(t *testing.T) {
	l, clock, ffs, _ := retentionLog(t)
	clock.Set(next0430().Add(9 * time.Hour)) // 13:30, not a deletion hour
	l.SetRetention(Retention{FileReservedTime: 72 * time.Hour, DeleteWhen: []int{4}, DiskMaxUsedSpaceRatio: 75, DiskForceCleanRatio: 95, DiskWarningLevelRatio: 90})
	ffs.SetUsage(&vfs.DiskUsage{Total: 100, Free: 8, Avail: 8}) // 92 %
	if n, err := l.cleanOnce(); err != nil || n != 5 {
		t.Fatalf("92%% used, above the warning level: deleted %d, %v, want every segment but the active one (3 expired, 2 not)", n, err)
	}
}

// Above the clean-forcibly ratio a pass deletes the expired segments at
// any hour even with KeepUnexpiredWhenFull and DiskMaxUsedSpaceRatio set
// above the usage: RocketMQ's isSpaceToDelete says so whatever
// cleanFileForciblyEnable, which only decides whether unexpired segments go
// too. Else a log refusing appends above the warning level kept its expired
// segments, and refused, until the deleteWhen hour.
func TestRetentionDeletesExpiredAboveTheCleanForciblyRatio(t *testing.T) {
	l, clock, ffs, _ := retentionLog(t, func(c *Config) { c.KeepUnexpiredWhenFull = true })
	clock.Set(next0430().Add(9 * time.Hour)) // 13:30, not a deletion hour
	rules := l.RetentionRules()
	rules.DiskMaxUsedSpaceRatio = 95
	l.SetRetention(rules)
	for _, tc := range []struct {
		used    uint64
		deleted int
	}{{85, 0}, {88, 3}, {92, 0}} {
		ffs.SetUsage(&vfs.DiskUsage{Total: 100, Free: 100 - tc.used, Avail: 100 - tc.used})
		if n, err := l.cleanOnce(); err != nil || n != tc.deleted {
			t.Fatalf("%d%% used at 13:30: deleted %d, %v; want %d (the expired segments once above the clean-forcibly ratio of %v, none unexpired)",
				tc.used, n, err, tc.deleted, rules.DiskForceCleanRatio)
		}
	}
}

// With KeepUnexpiredWhenFull (cleanFileForciblyEnable=false) a nearly full
// disk still loses its expired segments at any hour, but no segment
// younger than the retention time, until SetRetention turns it off.
func TestRetentionKeepsUnexpiredWhenFull(t *testing.T) {
	l, clock, ffs, _ := retentionLog(t, func(c *Config) { c.KeepUnexpiredWhenFull = true })
	clock.Set(next0430().Add(9 * time.Hour)) // 13:30, not a deletion hour
	ffs.SetUsage(&vfs.DiskUsage{Total: 100, Free: 5, Avail: 5})
	if n, err := l.cleanOnce(); err != nil || n != 3 {
		t.Fatalf("95%% used: deleted %d, %v, want the 3 expired segments", n, err)
	}
	if n, err := l.cleanOnce(); err != nil || n != 0 {
		t.Fatalf("95%% used, second pass: deleted %d, %v, want none of the unexpired", n, err)
	}
	if l.MinOffset() != 3*4096 {
		t.Fatalf("min offset %d, want 3*4096", l.MinOffset())
	}
	// Turned off while the log runs (cleanFileForciblyEnable=true through
	// UPDATE_BROKER_CONFIG): the next pass deletes the unexpired ones too,
	// all but the active segment.
	rules := l.RetentionRules()
	if !rules.KeepUnexpiredWhenFull {
		t.Fatalf("rules in force %+v do not carry the start value of KeepUnexpiredWhenFull", rules)
	}
	rules.KeepUnexpiredWhenFull = false
	l.SetRetention(rules)
	if n, err := l.cleanOnce(); err != nil || n != 2 {
		t.Fatalf("95%% used after KeepUnexpiredWhenFull was turned off: deleted %d, %v, want the 2 unexpired segments", n, err)
	}
	if l.MinOffset() != 5*4096 {
		t.Fatalf("min offset %d, want 5*4096", l.MinOffset())
	}
}

func TestDeleteExpiredManual(t *testing.T) {
	l, clock, _, _ := retentionLog(t)
	if n, err := l.DeleteExpired(clock.Now(), false); err != nil || n != 3 {
		t.Fatalf("DeleteExpired = %d, %v", n, err)
	}
	if n, err := l.DeleteExpired(clock.Now(), true); err != nil || n != 2 {
		t.Fatalf("forced DeleteExpired = %d, %v", n, err)
	}
}

func TestCleanerGoroutine(t *testing.T) {
	cfg := testConfig(t, 4096)
	cfg.CleanInterval = 5 * time.Millisecond
	ffs := vfs.NewFaulty(vfs.OS{})
	ffs.SetUsage(&vfs.DiskUsage{Total: 100, Free: 12, Avail: 12}) // forces deletion, below the warning level
	cfg.FS = ffs
	l := mustOpen(t, cfg)
	defer l.Close()
	got := make(chan int64, 16)
	l.OnMinOffsetChange(func(m int64) { got <- m })
	for l.MaxOffset() < 2*4096+10 {
		mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 880)})
	}
	select {
	case m := <-got:
		if m <= 0 {
			t.Fatalf("new min %d", m)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the cleaner never deleted anything")
	}
}

func TestSetRetentionTakesEffectOnTheNextPass(t *testing.T) {
	l, clock, ffs, _ := retentionLog(t)
	clock.Set(next0430().Add(9 * time.Hour)) // 13:30, not a deletion hour
	if n, err := l.cleanOnce(); err != nil || n != 0 {
		t.Fatalf("off-hour pass with the defaults deleted %d, %v", n, err)
	}
	// An operator makes 13:00 a deletion hour and keeps segments 20 h (the
	// three old ones are 109 h old now, the next two 10 h).
	hours := []int{13}
	l.SetRetention(Retention{FileReservedTime: 20 * time.Hour, DeleteWhen: hours, DiskMaxUsedSpaceRatio: 75})
	hours[0] = 5 // the log keeps its own copy
	if got := l.RetentionRules(); got.FileReservedTime != 20*time.Hour || len(got.DeleteWhen) != 1 || got.DeleteWhen[0] != 13 {
		t.Fatalf("rules in force %+v", got)
	}
	if n, err := l.cleanOnce(); err != nil || n != 3 {
		t.Fatalf("13:30 pass with 13 a deletion hour deleted %d, %v; want the 3 segments 100 h old", n, err)
	}
	// The two younger segments go at an off hour once nothing is reserved
	// and the disk passes a lowered ratio.
	clock.Set(clock.Now().Add(time.Hour))
	ffs.SetUsage(&vfs.DiskUsage{Total: 100, Free: 50, Avail: 50})
	l.SetRetention(Retention{FileReservedTime: 0, DiskMaxUsedSpaceRatio: 40})
	if n, err := l.cleanOnce(); err != nil || n != 2 {
		t.Fatalf("50%% used against a 40%% threshold: deleted %d, %v; want the 2 older segments", n, err)
	}
}

// DeleteExpiredSoon makes the next passes delete expired segments at an
// off hour, for 20 passes, and never a segment younger than the reserved
// time.
func TestDeleteExpiredSoon(t *testing.T) {
	l, clock, _, _ := retentionLog(t)
	clock.Set(next0430().Add(9 * time.Hour)) // 13:30, not a deletion hour
	l.SetRetention(Retention{FileReservedTime: 50 * time.Hour, DeleteWhen: []int{4}, DiskMaxUsedSpaceRatio: 75})
	l.DeleteExpiredSoon()
	if n, err := l.cleanOnce(); err != nil || n != 3 {
		t.Fatalf("first pass after DeleteExpiredSoon deleted %d, %v; want the 3 segments past the reserved time", n, err)
	}
	for i := 2; i <= manualDeletePasses; i++ {
		if n, err := l.cleanOnce(); err != nil || n != 0 {
			t.Fatalf("pass %d deleted %d (%v) segments younger than the reserved time", i, n, err)
		}
	}
	// The 20 passes are used up: at an off hour nothing goes any more,
	// even once the two remaining old segments have expired.
	l.SetRetention(Retention{FileReservedTime: 0, DeleteWhen: []int{4}, DiskMaxUsedSpaceRatio: 75})
	if n, err := l.cleanOnce(); err != nil || n != 0 {
		t.Fatalf("the 21st pass deleted %d, %v", n, err)
	}
	l.DeleteExpiredSoon()
	if n, err := l.cleanOnce(); err != nil || n != 2 {
		t.Fatalf("a second DeleteExpiredSoon: deleted %d, %v; want 2", n, err)
	}
}

// Above DiskWarningLevelRatio (90%) appends are refused with ErrStoreFull
// from the first check of the disk that sees it (a retention pass, or
// Open), nothing is written, and they resume once a check sees the usage
// down to DiskForceCleanRatio (85%): between the two the refusal stays, as
// RocketMQ's disk-full flag does, so appends do not flap around one line.
func TestAppendsRefusedAboveWarningLevel(t *testing.T) {
	l, _, ffs, _ := retentionLog(t)
	ffs.SetUsage(&vfs.DiskUsage{Total: 100, Free: 9, Avail: 9})
	if _, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, 0, 10)}); err != nil {
		t.Fatalf("append before any pass saw the disk at 91%%: %v", err)
	}
	if _, err := l.cleanOnce(); err != nil {
		t.Fatal(err)
	}
	end := l.MaxOffset()
	_, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, 0, 10)})
	if !errors.Is(err, ErrStoreFull) || !strings.Contains(err.Error(), "91.0%") {
		t.Fatalf("append at 91%% used: %v, want ErrStoreFull naming the usage", err)
	}
	if l.MaxOffset() != end {
		t.Fatalf("a refused append moved the end %d -> %d", end, l.MaxOffset())
	}
	for _, used := range []uint64{90, 86} {
		ffs.SetUsage(&vfs.DiskUsage{Total: 100, Free: 100 - used, Avail: 100 - used})
		if _, err := l.DiskUsedPercent(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, 0, 10)}); !errors.Is(err, ErrStoreFull) {
			t.Fatalf("append at %d%% used, down from 91%% but above the clean-forcibly ratio: %v, want ErrStoreFull still", used, err)
		}
	}
	ffs.SetUsage(&vfs.DiskUsage{Total: 100, Free: 15, Avail: 15})
	if _, err := l.DiskUsedPercent(); err != nil {
		t.Fatal(err)
	}
	r := mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 10)})
	if r.PhyOffset != end {
		t.Fatalf("append after the usage fell back at %d, want %d", r.PhyOffset, end)
	}
}

// A warning level raised while appends are refused ends the refusal at
// once, whatever the clean-forcibly ratio (100 turns the refusal off): the
// operator's way out when retention cannot free the disk.
func TestRaisingTheWarningLevelLiftsTheRefusal(t *testing.T) {
	l, _, ffs, _ := retentionLog(t)
	ffs.SetUsage(&vfs.DiskUsage{Total: 100, Free: 8, Avail: 8}) // 92 %
	if _, err := l.DiskUsedPercent(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, 0, 10)}); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("append at 92%% used: %v, want ErrStoreFull", err)
	}
	for _, level := range []float64{95, 100} {
		r := l.RetentionRules()
		r.DiskWarningLevelRatio = level
		l.SetRetention(r)
		if _, err := l.DiskUsedPercent(); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 10)})
	}
}

// A log opened on a disk above the warning level refuses appends at once.
func TestOpenAboveWarningLevelRefusesAppends(t *testing.T) {
	cfg := testConfig(t, 4096)
	ffs := vfs.NewFaulty(vfs.OS{})
	ffs.SetUsage(&vfs.DiskUsage{Total: 1000, Free: 40, Avail: 40})
	cfg.FS = ffs
	cfg.CleanInterval = time.Hour
	cfg.DiskWarningLevelRatio = 95
	l := mustOpen(t, cfg)
	defer l.Close()
	if _, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, 0, 10)}); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("append on a 96%% used disk with the level at 95%%: %v, want ErrStoreFull", err)
	}
}

// With the segments on a file system of their own, the store root's (the
// checkpoint's, and a broker's index) counts too: the fuller one decides.
func TestWarningLevelWatchesTheStoreRootToo(t *testing.T) {
	cfg := testConfig(t, 4096)
	cfg.SegmentDir = t.TempDir()
	ffs := vfs.NewFaulty(vfs.OS{})
	ffs.SetUsageOf(cfg.SegmentDir, &vfs.DiskUsage{Total: 100, Free: 90, Avail: 90})
	ffs.SetUsageOf(cfg.Dir, &vfs.DiskUsage{Total: 100, Free: 50, Avail: 50})
	cfg.FS = ffs
	cfg.CleanInterval = time.Hour
	l := mustOpen(t, cfg)
	defer l.Close()
	mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, 0, 10)})
	ffs.SetUsageOf(cfg.Dir, &vfs.DiskUsage{Total: 100, Free: 4, Avail: 4})
	if used, err := l.DiskUsedPercent(); err != nil || used != 96 {
		t.Fatalf("DiskUsedPercent = %v, %v, want the root's 96", used, err)
	}
	_, err := l.Append(context.Background(), AppendRequest{Message: testMessage("T", 0, 0, 10)})
	if !errors.Is(err, ErrStoreFull) || !strings.Contains(err.Error(), cfg.Dir) {
		t.Fatalf("append with the root's disk at 96%%: %v, want ErrStoreFull naming %s", err, cfg.Dir)
	}
}
