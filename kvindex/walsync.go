package kvindex

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// WALSync says what a durable write of the index (a commit with sync: a
// pop, an ack, an offset commit, a config change) waits for before it
// returns.
type WALSync int

const (
	// WALSyncAlways waits for an fdatasync of the write-ahead log: the
	// write survives a power failure (the default; RocketMQ's
	// SYNC_FLUSH contract).
	WALSyncAlways WALSync = iota
	// WALSyncInterval waits until the write's log bytes are handed to the
	// operating system, so that it survives a crash of the broker process
	// (SIGKILL included) as an ASYNC_FLUSH CommitLog append does, and
	// fdatasyncs the log every WALSyncInterval: a power failure loses at
	// most about that much of the index's recent writes, as it loses the
	// CommitLog's unflushed tail.
	WALSyncInterval
)

// DefaultWALSyncInterval is the default WALSyncInterval period: the
// CommitLog's default async flush interval.
const DefaultWALSyncInterval = 500 * time.Millisecond

// intervalSyncFS hands Pebble write-ahead log files whose Sync and
// SyncData return at once (Pebble's log writer has written the bytes
// before it syncs, so a synced commit still waits for the write) and
// fdatasyncs them on a timer and when they are closed. Every other file
// (tables, MANIFEST, OPTIONS) syncs as usual.
//
// The timer goroutine belongs to the FS: start runs it, stop ends it and
// waits for it.
type intervalSyncFS struct {
	vfs.FS
	every time.Duration
	log   zerolog.Logger

	mu   sync.Mutex
	wals map[*intervalWAL]struct{}

	cancel context.CancelFunc
	done   chan struct{}
}

func newIntervalSyncFS(inner vfs.FS, every time.Duration, log zerolog.Logger) *intervalSyncFS {
	return &intervalSyncFS{FS: inner, every: every, log: log, wals: map[*intervalWAL]struct{}{}}
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

// start runs the timer goroutine until stop.
func (fs *intervalSyncFS) start() {
	ctx, cancel := context.WithCancel(context.Background())
	fs.cancel, fs.done = cancel, make(chan struct{})
	go fs.run(ctx)
}

// stop ends the timer goroutine and waits for it. Logs still open keep
// their data until their close syncs it.
func (fs *intervalSyncFS) stop() {
	if fs.cancel == nil {
		return
	}
	fs.cancel()
	<-fs.done
	fs.cancel = nil
}

func (fs *intervalSyncFS) run(ctx context.Context) {
	defer close(fs.done)
	t := time.NewTicker(fs.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fs.syncAll()
	}
}

// syncAll fdatasyncs every open log written since its last sync.
func (fs *intervalSyncFS) syncAll() {
	fs.mu.Lock()
	open := make([]*intervalWAL, 0, len(fs.wals))
	for w := range fs.wals {
		open = append(open, w)
	}
	fs.mu.Unlock()
	for _, w := range open {
		if err := w.syncNow(); err != nil {
			fs.log.Error().Err(err).Str("file", w.name).Msg("periodic sync of the index write-ahead log failed")
		}
	}
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

// Sync implements vfs.File: the timer or Close syncs.
func (w *intervalWAL) Sync() error { return nil }

// SyncData implements vfs.File: the timer or Close syncs.
func (w *intervalWAL) SyncData() error { return nil }

// syncNow fdatasyncs the log if it was written since its last sync.
func (w *intervalWAL) syncNow() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || !w.dirty.Swap(false) {
		return nil
	}
	if err := w.File.SyncData(); err != nil {
		w.dirty.Store(true)
		return fmt.Errorf("sync %s: %w", w.name, err)
	}
	return nil
}

// Close syncs what the timer has not and closes the log.
func (w *intervalWAL) Close() error {
	w.mu.Lock()
	var serr error
	if !w.closed && w.dirty.Swap(false) {
		serr = w.File.SyncData()
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
