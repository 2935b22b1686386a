package commitlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/vfs"
)

// File names inside the store root.
const (
	commitLogDirName  = "commitlog"
	lockFileName      = "lock"
	abortFileName     = "abort"
	checkpointName    = "checkpoint"
	checkpointPersist = time.Second
)

// Log is a CommitLog: an append-only sequence of fixed-size, memory-mapped
// segment files holding RocketMQ records.
//
// All methods are safe for concurrent use. Appends are serialized by the
// append lock; reads never take it.
//
// Lock order: mu (append lock) before segsMu (segment list); ckMu and
// flushMu are leaves. The flusher and the retention cleaner never take mu.
//
// Goroutines owned by a Log: the flusher, the retention cleaner, the
// prefaulter and at most one segment preallocator. Close stops and waits for all of them.
type Log struct {
	cfg    Config
	fs     vfs.FS
	log    zerolog.Logger
	segDir string

	segSize int64
	lock    io.Closer
	ckFile  *checkpointFile

	randomReads atomic.Bool // Config.RandomReads as last set
	hints       boundaryHints
	// randomReadsSet is true once SetRandomReads ran: sealed segments may
	// then carry random advice an async-flush log must undo.
	randomReadsSet atomic.Bool

	mu      sync.Mutex // append lock
	pending *prealloc  // next segment being preallocated; guarded by mu
	closed  bool       // guarded by mu; mirrored in closedFlag
	// activeAllocated is false while the active segment may have holes
	// (an existing store's file that could not be fallocated at Open);
	// appends then retry the allocation first. Guarded by mu.
	activeAllocated bool

	segsMu sync.RWMutex
	segs   []*segment // sorted by start; the last one is the active segment

	// retention holds the deletion rules in force (SetRetention).
	retention atomic.Pointer[Retention]
	// storeFull is set from when the disk is used above
	// DiskWarningLevelRatio until it is down to DiskForceCleanRatio
	// (appends refused); usedPercent holds the usage last seen and
	// warningLevel the level the refusal began at, or the level last
	// compared with when appends are taken (math.Float64bits). All three
	// are written by checkDiskSpace.
	storeFull    atomic.Bool
	usedPercent  atomic.Uint64
	warningLevel atomic.Uint64
	// manualPasses counts down the cleaner passes DeleteExpiredSoon asked
	// for.
	manualPasses atomic.Int32

	writePos    atomic.Int64 // readable end (MaxOffset)
	replicaPos  atomic.Int64 // a replica's end of received bytes (ReplicaOffset); see replica.go
	held        heldHeader   // a replica's unfinished record's first bytes, kept out of the mapping; under mu
	flushedPos  atomic.Int64
	minOffset   atomic.Int64
	lastStoreTS atomic.Int64 // store timestamp of the last append; stored before writePos
	closedFlag  atomic.Bool

	// flush
	flushKick chan struct{}
	forceKick chan struct{}
	flushMu   sync.Mutex
	flushCh   chan struct{} // closed after every flush
	flushErr  error         // last flush error, guarded by flushMu
	// flushFailed holds the first flush failure (wrapping ErrFlushFailed):
	// once set, nothing is flushed or reported flushed again (Config.Stop).
	flushFailed atomic.Pointer[error]
	stopFn      func(error) // Config.Stop or its default
	ckMu        sync.Mutex
	ck          Checkpoint             // guarded by ckMu
	flushHook   atomic.Pointer[func()] // Config.BeforeFlush, or a test's: called by flushTo before syncing
	flushes     atomic.Int64           // completed flushes (benchmarks report the grouping)

	// prefaulting
	prefaultKick chan struct{}
	prefaulted   atomic.Int64 // pages before this offset are faulted in

	// tailing
	appendCh atomic.Pointer[chan struct{}] // closed on the next append
	// confirmLimit bounds confirmed readers (SetConfirmLimit; -1: none);
	// confirmCh is closed and replaced when it changes, under confirmMu.
	confirmLimit atomic.Int64
	confirmMu    sync.Mutex
	confirmCh    chan struct{}
	notifyMu     sync.Mutex
	notify       atomic.Pointer[[]chan struct{}]

	// retention
	minSubsMu sync.Mutex
	minSubs   []func(int64)

	scratch sync.Pool // *appendScratch
	timers  sync.Pool // *time.Timer for sync-flush waits

	recovery RecoveryInfo
	stop     chan struct{}
	wg       sync.WaitGroup
}

// RecoveryInfo describes what Open found.
type RecoveryInfo struct {
	// Abnormal is true when the abort file was present (the last run did
	// not Close).
	Abnormal bool
	// EndOffset is the recovered end of the log (MaxOffset after Open).
	EndOffset int64
	// FirstScanned is the offset where the recovery scan started.
	FirstScanned int64
	// Records is the number of records the scan verified.
	Records int
	// CutBytes counts the bytes of data discarded after the end: from the
	// cut to the last non-zero byte of its segment, plus the non-zero
	// extent of every later segment deleted, each looked for within the
	// first 8 MiB (the whole tail is zeroed or deleted regardless).
	CutBytes int64
	// CutReason is the error that ended the scan early (nil when the scan
	// ended on zeros, a clean end).
	CutReason error
}

// Open opens (creating if needed) the store rooted at cfg.Dir: it takes the
// lock file, loads and maps the segments of cfg.SegmentDir, reads the checkpoint, recovers the
// tail (normal recovery after Close, abnormal recovery when the abort file
// is present), creates the abort file and starts the background goroutines.
//
// Errors: ErrLocked when another owner holds the store; ErrBadSegment for a
// misnamed or wrong-size segment file; ErrMapFailed when mapping fails.
func Open(cfg Config) (*Log, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Log{
		cfg:       cfg,
		fs:        cfg.FS,
		log:       cfg.Logger.With().Str("component", "commitlog").Logger(),
		segDir:    cfg.SegmentDir,
		segSize:   cfg.SegmentSize,
		flushKick: make(chan struct{}, 1),
		forceKick: make(chan struct{}, 1),
		confirmCh: make(chan struct{}),

		prefaultKick: make(chan struct{}, 1),
		flushCh:      make(chan struct{}),
		stop:         make(chan struct{}),
	}
	l.confirmLimit.Store(noConfirmLimit)
	l.retention.Store(&Retention{
		FileReservedTime:      cfg.FileReservedTime,
		DeleteWhen:            slices.Clone(cfg.DeleteWhen),
		DiskMaxUsedSpaceRatio: cfg.DiskMaxUsedSpaceRatio,
		KeepUnexpiredWhenFull: cfg.KeepUnexpiredWhenFull,
		DiskForceCleanRatio:   cfg.DiskForceCleanRatio,
		DiskWarningLevelRatio: cfg.DiskWarningLevelRatio,
	})
	l.stopFn = cfg.Stop
	if l.stopFn == nil {
		l.stopFn = stopOnFlushFailure(&l.log)
	}
	if cfg.BeforeFlush != nil {
		l.flushHook.Store(&cfg.BeforeFlush)
	}
	l.scratch.New = func() any { return new(appendScratch) }
	if cfg.ForceVerifyPropCRC && cfg.CheckCRCOnRecover && !cfg.AppendPropCRC && !cfg.Replica {
		l.log.Warn().Msg("forceVerifyPropCRC is on and enabledAppendPropCRC off: records appended from now on carry no " +
			PropertyCRC32 + " property, and the next recovery that scans one cuts the log there, as RocketMQ's does")
	}
	if err := l.fs.MkdirAll(l.segDir, 0o755); err != nil {
		return nil, fmt.Errorf("open commitlog: %w", err)
	}
	lockPath := filepath.Join(cfg.Dir, lockFileName)
	lk, err := l.fs.Lock(lockPath)
	if err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			return nil, fmt.Errorf("open commitlog %s: %w", cfg.Dir, ErrLocked)
		}
		return nil, fmt.Errorf("open commitlog %s: %w", cfg.Dir, err)
	}
	l.lock = lk
	ok := false
	defer func() {
		if !ok {
			l.releaseAll()
		}
	}()
	if err := writeSmallFile(l.fs, lockPath, []byte("lock")); err != nil {
		return nil, err
	}
	abortPath := filepath.Join(cfg.Dir, abortFileName)
	_, err = l.fs.Stat(abortPath)
	abnormal := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open commitlog: stat abort file: %w", err)
	}
	cf, ck, err := openCheckpoint(l.fs, filepath.Join(cfg.Dir, checkpointName))
	if err != nil {
		return nil, err
	}
	l.ckFile, l.ck = cf, ck
	if err := l.loadSegments(); err != nil {
		return nil, err
	}
	if err := l.recover(abnormal); err != nil {
		return nil, err
	}
	l.activeAllocated = l.allocateActive() == nil
	l.randomReads.Store(cfg.RandomReads)
	if seg := l.activeSegment(); seg != nil {
		l.adviseActive(seg, l.writePos.Load()-seg.start)
	}
	if cfg.RandomReads {
		l.adviseSealedSegments()
	}
	l.replicaPos.Store(l.writePos.Load())
	if _, err := l.checkDiskSpace(); err != nil {
		l.log.Warn().Err(err).Msg("disk usage unknown at open: appends are not refused until the cleaner reads it")
	}
	if err := writeSmallFile(l.fs, abortPath, []byte(strconv.Itoa(os.Getpid()))); err != nil {
		return nil, err
	}
	// The abort file's directory entry must survive a power failure too:
	// without it the next start takes the crash for a clean stop.
	if err := syncDir(l.fs, filepath.Dir(abortPath)); err != nil {
		return nil, err
	}
	l.wg.Add(3)
	go l.flusher()
	go l.cleaner()
	go l.prefaulter()
	l.kickPrefaulter(l.writePos.Load())
	ok = true
	l.log.Info().Bool("abnormal", abnormal).Int64("min", l.MinOffset()).Int64("max", l.MaxOffset()).
		Int64("segmentSize", l.segSize).Int("segments", len(l.segs)).Msg("commitlog opened")
	return l, nil
}

// allocateActive reserves every block of the active segment. Files this
// package creates are allocated already (it is then quick), but RocketMQ
// creates sparse files, and writing into a hole of a mapping on a full disk
// raises SIGBUS. Caller holds mu or has not started appending.
func (l *Log) allocateActive() error {
	l.segsMu.RLock()
	var s *segment
	if n := len(l.segs); n > 0 {
		s = l.segs[n-1]
	}
	l.segsMu.RUnlock()
	if s == nil {
		return nil
	}
	if err := l.fs.Allocate(s.f, 0, s.size); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			err = fmt.Errorf("allocate active segment %s: %w: %w", s.path, ErrDiskFull, err)
		} else {
			err = fmt.Errorf("allocate active segment %s: %w", s.path, err)
		}
		l.log.Error().Err(err).Msg("cannot allocate the active segment; appends are refused until it can be")
		return err
	}
	return nil
}

// writeSmallFile replaces the content of a small file and syncs it.
func writeSmallFile(fs vfs.FS, path string, content []byte) error {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.WriteAt(content, 0); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// Close flushes everything, writes the checkpoint, removes the abort file
// (kept if the flush or the checkpoint failed, so that the next Open runs
// abnormal recovery), drops the Log's references to its segments (a
// segment with live Views or Readers stays mapped until they are released)
// and releases the lock.
// Background goroutines are stopped first. Close is idempotent; after it,
// methods return ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.closedFlag.Store(true)
	if l.cfg.Replica {
		l.zeroReplicaTailLocked()
	}
	l.mu.Unlock()
	close(l.stop)
	l.wg.Wait()

	var errs []error
	if err := l.flushTo(l.writePos.Load()); err != nil {
		errs = append(errs, err)
	}
	if err := l.persistCheckpoint(); err != nil {
		errs = append(errs, err)
	}
	l.mu.Lock()
	if p := l.pending; p != nil {
		l.pending = nil
		if p.seg != nil {
			p.seg.deleted.Store(true)
			p.seg.release()
		}
	}
	l.mu.Unlock()
	// The abort file goes only when everything is flushed: otherwise the
	// next Open must run abnormal recovery.
	if len(errs) == 0 {
		if err := l.fs.Remove(filepath.Join(l.cfg.Dir, abortFileName)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove abort file: %w", err))
		}
	}
	if err := l.releaseAll(); err != nil {
		errs = append(errs, err)
	}
	l.log.Info().Int64("max", l.writePos.Load()).Msg("commitlog closed")
	return errors.Join(errs...)
}

// releaseAll drops the list's segment references, closes the checkpoint
// file and unlocks the store.
func (l *Log) releaseAll() error {
	var errs []error
	l.segsMu.Lock()
	segs := l.segs
	l.segs = nil
	l.segsMu.Unlock()
	for _, s := range segs {
		s.release()
	}
	if l.ckFile != nil {
		if err := l.ckFile.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close checkpoint: %w", err))
		}
		l.ckFile = nil
	}
	if l.lock != nil {
		if err := l.lock.Close(); err != nil {
			errs = append(errs, fmt.Errorf("unlock store: %w", err))
		}
		l.lock = nil
	}
	return errors.Join(errs...)
}

// MinOffset returns the offset of the first byte still stored (the start
// of the oldest segment).
func (l *Log) MinOffset() int64 { return l.minOffset.Load() }

// MaxOffset returns the readable end of the log: every record below it is
// complete. It is also where the next append starts unless it rolls.
func (l *Log) MaxOffset() int64 { return l.writePos.Load() }

// FlushedOffset returns the offset up to which the log is on stable
// storage.
func (l *Log) FlushedOffset() int64 { return l.flushedPos.Load() }

// SegmentSize returns the size of the segment files (from the files of an
// existing store, else Config.SegmentSize).
func (l *Log) SegmentSize() int64 { return l.segSize }

// RecoveryInfo returns what Open's recovery found.
func (l *Log) RecoveryInfo() RecoveryInfo { return l.recovery }

// Checkpoint returns the current checkpoint values (PhysicMsgTimestamp is
// updated after every flush; the file is written about once a second and
// on Close).
func (l *Log) Checkpoint() Checkpoint {
	l.ckMu.Lock()
	defer l.ckMu.Unlock()
	return l.ck
}

// SetMasterFlushedOffset records off as the checkpoint's
// MasterFlushedOffset: a slave's note of how far its master's CommitLog was
// flushed (RocketMQ's masterFlushedOffset, set by RESET_MASTER_FLUSH_OFFSET
// and reported by haStatus). The file gets it with the next checkpoint
// write (after a flush, at most once a second) and on Close, as RocketMQ's
// StoreCheckpoint gets it with its next flush. It returns ErrClosed after
// Close.
func (l *Log) SetMasterFlushedOffset(off int64) error {
	if l.closedFlag.Load() {
		return ErrClosed
	}
	l.ckMu.Lock()
	l.ck.MasterFlushedOffset = off
	l.ckMu.Unlock()
	return nil
}

// persistCheckpoint writes the checkpoint file.
func (l *Log) persistCheckpoint() error {
	l.ckMu.Lock()
	ck := l.ck
	l.ckMu.Unlock()
	if l.ckFile == nil {
		return nil
	}
	return l.ckFile.write(ck)
}

// findSegment returns the segment holding offset, or nil. Caller holds
// segsMu (read or write).
func (l *Log) findSegmentLocked(offset int64) *segment {
	segs := l.segs
	lo, hi := 0, len(segs)
	for lo < hi {
		m := (lo + hi) / 2
		if segs[m].end() <= offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(segs) && segs[lo].start <= offset {
		return segs[lo]
	}
	return nil
}

// nextSegmentStart returns the start of the first segment after offset.
func (l *Log) nextSegmentStart(offset int64) (int64, bool) {
	l.segsMu.RLock()
	defer l.segsMu.RUnlock()
	for _, s := range l.segs {
		if s.start > offset {
			return s.start, true
		}
	}
	return 0, false
}

// acquireSegment returns the segment holding offset with a reference the
// caller must release, or nil.
func (l *Log) acquireSegment(offset int64) *segment {
	l.segsMu.RLock()
	defer l.segsMu.RUnlock()
	s := l.findSegmentLocked(offset)
	if s != nil {
		s.acquire()
	}
	return s
}

// activeSegment returns the last segment. Caller holds mu (the list only
// changes at its end under mu, and at its front under segsMu).
func (l *Log) activeSegment() *segment {
	l.segsMu.RLock()
	defer l.segsMu.RUnlock()
	if len(l.segs) == 0 {
		return nil
	}
	return l.segs[len(l.segs)-1]
}
