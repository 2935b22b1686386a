package kvindex

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// WALSync says what a durable write of the index (a commit with sync: a
// pop, an ack, an offset commit, a config change) waits for before it
// returns.
type WALSync int

const (
	// WALSyncAlways waits for an fdatasync of the write-ahead log: the
	// write survives a power failure (Options' zero value; the broker
	// uses it under SYNC_FLUSH).
	WALSyncAlways WALSync = iota
	// WALSyncInterval waits until the write's log bytes are handed to the
	// operating system, so that it survives a crash of the broker process
	// (SIGKILL included) as an ASYNC_FLUSH CommitLog append does. The log
	// is fdatasynced by SyncWAL, which the broker's sync loop calls every
	// indexWalSyncIntervalMillis, and when it is closed: a power failure
	// loses at most about one period of the index's recent writes, as it
	// loses the CommitLog's unflushed tail.
	WALSyncInterval
)

// intervalSyncFS hands Pebble write-ahead log files whose Sync and
// SyncData return at once (Pebble's log writer has written the bytes
// before it syncs, so a synced commit still waits for the write); syncAll
// and closing a log fdatasync them. Every other file (tables, MANIFEST,
// OPTIONS) syncs as usual.
type intervalSyncFS struct {
	vfs.FS

	mu   sync.Mutex
	wals map[*intervalWAL]struct{}
	// syncs counts the fdatasyncs made (syncAll and closes).
	syncs atomic.Int64
}

func newIntervalSyncFS(inner vfs.FS) *intervalSyncFS {
	return &intervalSyncFS{FS: inner, wals: map[*intervalWAL]struct{}{}}
}

// isWAL reports whether name is a Pebble write-ahead log file.
func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

// Create implements vfs.FS.
func (fs *intervalSyncFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !isWAL(name) {
		return f, err
	}
	return fs.track(f, name), nil
}

// ReuseForWrite implements vfs.FS (Pebble recycles old logs this way).
func (fs *intervalSyncFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil || !isWAL(newname) {
		return f, err
	}
	return fs.track(f, newname), nil
}

// Unwrap implements vfs.FS.
func (fs *intervalSyncFS) Unwrap() vfs.FS { return fs.FS }

func (fs *intervalSyncFS) track(f vfs.File, name string) *intervalWAL {
	w := &intervalWAL{File: f, fs: fs, name: name}
	fs.mu.Lock()
	fs.wals[w] = struct{}{}
	fs.mu.Unlock()
	return w
}

// syncAll fdatasyncs every open log written since its last sync and
// returns the first error. A failed fdatasync stops the process before
// that returns (walFailStopFS, which the logs are opened through): a
// failed log is not synced again.
func (fs *intervalSyncFS) syncAll() error {
	fs.mu.Lock()
	open := make([]*intervalWAL, 0, len(fs.wals))
	for w := range fs.wals {
		open = append(open, w)
	}
	fs.mu.Unlock()
	var first error
	for _, w := range open {
		if err := w.syncNow(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// intervalWAL is an open write-ahead log of an intervalSyncFS.
type intervalWAL struct {
	vfs.File
	fs    *intervalSyncFS
	name  string
	dirty atomic.Bool

	mu     sync.Mutex // serialises syncNow and Close
	closed bool
}

// Write implements vfs.File.
func (w *intervalWAL) Write(p []byte) (int, error) {
	n, err := w.File.Write(p)
	if n > 0 {
		w.dirty.Store(true)
	}
	return n, err
}

// WriteAt implements vfs.File.
func (w *intervalWAL) WriteAt(p []byte, off int64) (int, error) {
	n, err := w.File.WriteAt(p, off)
	if n > 0 {
		w.dirty.Store(true)
	}
	return n, err
}

// Sync implements vfs.File: syncAll or Close syncs.
func (w *intervalWAL) Sync() error { return nil }

// SyncData implements vfs.File: syncAll or Close syncs.
func (w *intervalWAL) SyncData() error { return nil }

// syncNow fdatasyncs the log if it was written since its last sync.
func (w *intervalWAL) syncNow() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || !w.dirty.Swap(false) {
		return nil
	}
	if err := w.File.SyncData(); err != nil {
		return fmt.Errorf("sync %s: %w", w.name, err)
	}
	w.fs.syncs.Add(1)
	return nil
}

// Close syncs what syncAll has not and closes the log.
func (w *intervalWAL) Close() error {
	w.mu.Lock()
	var serr error
	if !w.closed && w.dirty.Swap(false) {
		if serr = w.File.SyncData(); serr == nil {
			w.fs.syncs.Add(1)
		}
	}
	w.closed = true
	cerr := w.File.Close()
	w.mu.Unlock()
	w.fs.mu.Lock()
	delete(w.fs.wals, w)
	w.fs.mu.Unlock()
	if serr != nil {
		return fmt.Errorf("sync %s at close: %w", w.name, serr)
	}
	return cerr
}
