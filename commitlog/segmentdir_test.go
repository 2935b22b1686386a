package commitlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A RocketMQ store whose segments were moved to another directory opens
// through SegmentDir, with the store root's checkpoint and abort file in
// force: the abort file in the root makes the recovery abnormal, and
// starting where the root's checkpoint says; the files of the root are
// not created in the segment directory, and the log is the fixture's.
func TestSegmentDirElsewhere(t *testing.T) {
	for _, abnormal := range []bool{false, true} {
		root := fixtureStore(t, store498)
		segDir := filepath.Join(t.TempDir(), "commitlog-disk")
		if err := os.Rename(filepath.Join(root, "commitlog"), segDir); err != nil {
			t.Fatal(err)
		}
		if abnormal {
			markAbort(t, root)
		}
		cfg := DefaultConfig(root)
		cfg.SegmentDir = segDir
		cfg.StoreHost = testStoreHost
		cfg.Logger = testLogger(t)
		l := mustOpen(t, cfg)
		info := l.RecoveryInfo()
		if info.Abnormal != abnormal || info.EndOffset != 53272 || info.CutBytes != 0 {
			t.Fatalf("abnormal=%v: recovery %+v, want end 53272, nothing cut", abnormal, info)
		}
		if ck := l.Checkpoint(); ck.PhysicMsgTimestamp != 1795976099056 {
			t.Errorf("checkpoint %+v is not the root's", ck)
		}
		if got := scanAll(t, l); len(got) != 104 {
			t.Fatalf("scanned %d records, want 104", len(got))
		}
		if _, err := os.Stat(filepath.Join(root, "commitlog")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("root/commitlog created: %v", err)
		}
		if _, err := os.Stat(filepath.Join(root, "abort")); err != nil {
			t.Errorf("no abort file in the root while open: %v", err)
		}
		for _, name := range []string{"lock", "abort", "checkpoint"} {
			if _, err := os.Stat(filepath.Join(segDir, name)); err == nil {
				t.Errorf("%s created in the segment directory", name)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "abort")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("abort file left in the root after Close: %v", err)
		}
		// The read-only reader finds the same log through the directory.
		ro, err := OpenReadOnlyDir(segDir)
		if err != nil {
			t.Fatal(err)
		}
		if ro.MaxOffset() != 53272 {
			t.Errorf("read-only end %d, want 53272", ro.MaxOffset())
		}
		_ = ro.Close()
	}
}

// Two logs with the same root but different segment directories exclude
// each other: the lock is the root's, as RocketMQ's is.
func TestSegmentDirSharesTheRootLock(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(t, 1<<16)
	cfg.Dir = root
	cfg.SegmentDir = filepath.Join(t.TempDir(), "a")
	l := mustOpen(t, cfg)
	defer l.Close()
	cfg.SegmentDir = filepath.Join(t.TempDir(), "b")
	if _, err := Open(cfg); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open on the same root: %v, want ErrLocked", err)
	}
}
