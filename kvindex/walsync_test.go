package kvindex

import (
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// walCountingFS counts the writes and syncs that reach the write-ahead log
// files of the file system under it.
type walCountingFS struct {
	vfs.FS
	writes, syncs atomic.Int64
}

func (fs *walCountingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil || !isWAL(name) {
		return f, err
	}
	return &walCountingFile{File: f, fs: fs}, nil
}

func (fs *walCountingFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	if err != nil || !isWAL(newname) {
		return f, err
	}
	return &walCountingFile{File: f, fs: fs}, nil
}

type walCountingFile struct {
	vfs.File
	fs *walCountingFS
}

func (f *walCountingFile) Write(p []byte) (int, error) {
	f.fs.writes.Add(1)
	return f.File.Write(p)
}

func (f *walCountingFile) Sync() error {
	f.fs.syncs.Add(1)
	return f.File.Sync()
}

func (f *walCountingFile) SyncData() error {
	f.fs.syncs.Add(1)
	return f.File.SyncData()
}

// TestWALSyncInterval checks the two WALSync modes against the file system:
// under WALSyncAlways a durable write fdatasyncs the log before it
// returns; under WALSyncInterval it has written the log (so a killed
// process keeps it) but not synced it, SyncWAL syncs it, and Close syncs
// what is left. A failed sync stops the process
// (TestWALWriteFailureStopsTheProcess).
func TestWALSyncInterval(t *testing.T) {
	open := func(t *testing.T, mode WALSync) (*DB, *walCountingFS) {
		t.Helper()
		fs := &walCountingFS{FS: vfs.Default}
		db, err := Open(Options{Dir: t.TempDir(), FS: fs, WALSync: mode, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		return db, fs
	}
	t.Run("always", func(t *testing.T) {
		db, fs := open(t, WALSyncAlways)
		defer db.Close()
		before := fs.syncs.Load()
		if err := db.ConsumerOffsets().Set("G", "T", 0, 5); err != nil {
			t.Fatal(err)
		}
		if fs.syncs.Load() == before {
			t.Fatal("a durable write returned without syncing the log")
		}
		if n := db.WALSyncs(); n != 0 {
			t.Fatalf("WALSyncs %d: Pebble syncs the log itself in always mode", n)
		}
	})
	t.Run("interval", func(t *testing.T) {
		db, fs := open(t, WALSyncInterval)
		syncs, writes := fs.syncs.Load(), fs.writes.Load()
		for i := 0; i < 3; i++ {
			if err := db.ConsumerOffsets().Set("G", "T", 0, int64(i)); err != nil {
				t.Fatal(err)
			}
		}
		if fs.syncs.Load() != syncs {
			t.Fatalf("durable writes synced the log %d times", fs.syncs.Load()-syncs)
		}
		if fs.writes.Load() == writes {
			t.Fatal("a durable write returned before its log bytes were written")
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if fs.syncs.Load() == syncs {
			t.Fatal("close left the log unsynced")
		}
	})
	t.Run("SyncWAL", func(t *testing.T) {
		db, fs := open(t, WALSyncInterval)
		defer db.Close()
		if err := db.ConsumerOffsets().Set("G", "T", 0, 1); err != nil {
			t.Fatal(err)
		}
		syncs := fs.syncs.Load()
		if err := db.SyncWAL(); err != nil {
			t.Fatal(err)
		}
		if fs.syncs.Load() == syncs {
			t.Fatal("SyncWAL did not sync the log written since the last sync")
		}
		if n := db.WALSyncs(); n != 1 {
			t.Fatalf("WALSyncs %d after one SyncWAL, want 1", n)
		}
	})
}

// TestCommitDurable checks PopBatch.CommitDurable in both WALSync modes:
// the batch is visible as soon as it returns, its wait returns once the
// log holds it (written, and synced under WALSyncAlways), it counts as one
// wait for the log, and a batch closed before its wait is released by
// the wait and kept.
func TestCommitDurable(t *testing.T) {
	for _, mode := range []WALSync{WALSyncAlways, WALSyncInterval} {
		t.Run(map[WALSync]string{WALSyncAlways: "always", WALSyncInterval: "interval"}[mode], func(t *testing.T) {
			dir := t.TempDir()
			fs := &walCountingFS{FS: vfs.Default}
			db, err := Open(Options{Dir: dir, FS: fs, WALSync: mode, Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			s := db.Pop()
			syncs, writes, flushes := fs.syncs.Load(), fs.writes.Load(), db.Flushes()
			b := s.NewBatch()
			if err := b.SetPosition("G", "T", 0, 7); err != nil {
				t.Fatal(err)
			}
			wait, err := b.CommitDurable()
			if err != nil {
				t.Fatal(err)
			}
			if pos, ok, err := s.Position("G", "T", 0); err != nil || !ok || pos != 7 {
				t.Fatalf("position before the wait: %d %v %v, want 7", pos, ok, err)
			}
			if err := wait(); err != nil {
				t.Fatal(err)
			}
			b.Close()
			if fs.writes.Load() == writes {
				t.Fatal("the wait returned before the log was written")
			}
			if synced := fs.syncs.Load() > syncs; synced != (mode == WALSyncAlways) {
				t.Fatalf("log synced: %v, want %v", synced, mode == WALSyncAlways)
			}
			if n := db.Flushes() - flushes; n != 1 {
				t.Fatalf("a durable commit counted %d waits for the log, want 1", n)
			}
			// Closed before its wait (a deferred Close under a lock): the
			// wait still waits, releases the batch, and nothing is lost.
			b = s.NewBatch()
			if err := b.SetPosition("G", "T", 1, 9); err != nil {
				t.Fatal(err)
			}
			wait, err = b.CommitDurable()
			if err != nil {
				t.Fatal(err)
			}
			b.Close()
			if err := wait(); err != nil {
				t.Fatal(err)
			}
			if err := wait(); err != nil {
				t.Fatalf("a second wait: %v", err)
			}
			b.Close()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = Open(Options{Dir: dir, WALSync: mode, Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for q, want := range map[int32]int64{0: 7, 1: 9} {
				if pos, ok, err := db.Pop().Position("G", "T", q); err != nil || !ok || pos != want {
					t.Fatalf("position of queue %d after reopening: %d %v %v, want %d", q, pos, ok, err, want)
				}
			}
		})
	}
}
