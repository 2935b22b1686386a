package kvindex

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walFailStopFS stops the process at the first failed creation, write or
// sync of a Pebble write-ahead log file (a full disk, an I/O error),
// through stop (the logger's Fatalf: a log line, then exit status 2).
//
// Pebble cannot go on after such a failure either: a commit that meets it
// panics, or calls its logger's Fatalf, with the commit pipeline's lock
// held. A panic in a request handler is recovered by the Remoting server
// (to answer SYSTEM_ERROR), and that would leave the lock held: every
// later write of the index, and so every send, pop and offset commit,
// would wait forever in a broker that looks alive. Stopping at the
// failure itself makes the outcome the same for every writer: the process
// ends with a line that names the file and the error, and a restart
// recovers the index from its log and the CommitLog (nothing a synced
// write acknowledged is lost), once the disk has room again. A failed
// sync is not retried: after a failed fdatasync the kernel may have
// dropped the unwritten pages, so a later sync that succeeds proves
// nothing about them.
//
// Tables, the MANIFEST and OPTIONS files are left to Pebble: it retries
// a failed flush or compaction (writes stall meanwhile, see writeStalls)
// and stops itself on a failed MANIFEST write.
type walFailStopFS struct {
	vfs.FS
	stop func(format string, args ...any)
}

// Create implements vfs.FS.
func (fs walFailStopFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return fs.wrap(f, err, name, "create")
}

// ReuseForWrite implements vfs.FS (Pebble recycles old logs this way).
func (fs walFailStopFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(f, err, newname, "reuse")
}

// Unwrap implements vfs.FS.
func (fs walFailStopFS) Unwrap() vfs.FS { return fs.FS }

// wrap returns a log file that stops the process when a write or sync
// fails, after stopping it for a failed open; other files pass through.
func (fs walFailStopFS) wrap(f vfs.File, err error, name, op string) (vfs.File, error) {
	if !isWAL(name) {
		return f, err
	}
	if err != nil {
		fs.failed(name, op, err)
		return nil, err // reached only with a stop that returns (tests)
	}
	return failStopWAL{File: f, fs: fs, name: name}, nil
}

// failed reports a log failure through stop.
func (fs walFailStopFS) failed(name, op string, err error) {
	fs.stop("index write-ahead log %s: %s failed: %v; stopping: the index cannot go on after a failed log write "+
		"(restart once the disk has room; synced writes are kept)", name, op, err)
}

// failStopWAL is an open write-ahead log of a walFailStopFS.
type failStopWAL struct {
	vfs.File
	fs   walFailStopFS
	name string
}

// Write implements vfs.File.
func (w failStopWAL) Write(p []byte) (int, error) {
	n, err := w.File.Write(p)
	if err != nil {
		w.fs.failed(w.name, fmt.Sprintf("write of %d bytes", len(p)), err)
	}
	return n, err
}

// WriteAt implements vfs.File.
func (w failStopWAL) WriteAt(p []byte, off int64) (int, error) {
	n, err := w.File.WriteAt(p, off)
	if err != nil {
		w.fs.failed(w.name, fmt.Sprintf("write of %d bytes at %d", len(p), off), err)
	}
	return n, err
}

// Sync implements vfs.File.
func (w failStopWAL) Sync() error { return w.check("sync", w.File.Sync()) }

// SyncData implements vfs.File.
func (w failStopWAL) SyncData() error { return w.check("fdatasync", w.File.SyncData()) }

// SyncTo implements vfs.File.
func (w failStopWAL) SyncTo(length int64) (bool, error) {
	full, err := w.File.SyncTo(length)
	if err != nil {
		// Formatted only here: SyncTo runs for every MiB of the log.
		w.fs.failed(w.name, fmt.Sprintf("sync of the first %d bytes", length), err)
	}
	return full, err
}

// check stops the process when err is set.
func (w failStopWAL) check(op string, err error) error {
	if err != nil {
		w.fs.failed(w.name, op, err)
	}
	return err
}
