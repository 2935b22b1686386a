package commitlog

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"
)

// syncFlushTick is how often the group-commit flusher looks for work
// without being kicked (RocketMQ's GroupCommitService waits 10 ms).
const syncFlushTick = 10 * time.Millisecond

// forceFlusher wakes the flusher for a flush that ignores
// FlushLeastPages, without blocking.
func (l *Log) forceFlusher() {
	select {
	case l.forceKick <- struct{}{}:
	default:
	}
}

// kickFlusher wakes the flusher without blocking.
func (l *Log) kickFlusher() {
	select {
	case l.flushKick <- struct{}{}:
	default:
	}
}

// flusher is the flush goroutine.
//
// SyncFlush (group commit): woken by every append (and every 10 ms), it
// flushes everything written so far in one msync per touched segment, then
// wakes all waiters; appends that arrive during a flush are covered by the
// next one, so concurrent appenders share syncs.
//
// AsyncFlush: every FlushInterval it flushes if at least FlushLeastPages
// dirty pages accumulated or FlushThoroughInterval passed since the last
// complete flush.
//
// After a flush the checkpoint's PhysicMsgTimestamp becomes the store time
// of the last flushed append; the checkpoint file is written at most once a
// second from here, and on Close.
func (l *Log) flusher() {
	defer l.wg.Done()
	interval := l.cfg.FlushInterval
	if l.cfg.FlushType == SyncFlush {
		interval = syncFlushTick
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	lastThorough := time.Now()
	lastPersist := time.Now()
	persisted := l.Checkpoint() // what the file holds
	for {
		forced := false
		select {
		case <-l.stop:
			return
		case <-l.flushKick:
		case <-t.C:
		case <-l.forceKick:
			forced = true
		}
		target := l.writePos.Load()
		if l.cfg.FlushType == AsyncFlush && !forced {
			dirty := target/pageSize - l.flushedPos.Load()/pageSize
			if dirty < int64(l.cfg.FlushLeastPages) && time.Since(lastThorough) < l.cfg.FlushThoroughInterval {
				continue
			}
			lastThorough = time.Now()
		}
		if err := l.flushTo(target); err != nil {
			l.log.Error().Err(err).Msg("flush failed")
		}
		if time.Since(lastPersist) >= checkpointPersist && l.Checkpoint() != persisted {
			lastPersist = time.Now()
			ck := l.Checkpoint()
			if err := l.persistCheckpoint(); err != nil {
				l.log.Error().Err(err).Msg("write checkpoint")
			} else {
				persisted = ck
			}
		}
	}
}

// flushTo flushes everything up to at least target (everything written when
// it starts), then wakes sync-flush waiters. Only the flusher goroutine and
// Close (after stopping the flusher) call it.
func (l *Log) flushTo(target int64) error {
	if end := l.writePos.Load(); end > target {
		target = end
	}
	// Loaded after the end (appends store their timestamp before their
	// end): at least the store time of the last record below target, or
	// that of an append that raced in right after it, which recovery's 3 s
	// margin covers.
	ts := l.lastStoreTS.Load()
	from := l.flushedPos.Load()
	if target <= from {
		return nil
	}
	if failed := l.flushFailed.Load(); failed != nil {
		l.flushDone(*failed, 0)
		return *failed
	}
	if h := l.flushHook.Load(); h != nil {
		(*h)()
	}
	var err error
	for off := from; off < target && err == nil; {
		s := l.acquireSegment(off)
		if s == nil {
			// Deleted by retention, or a gap: nothing to flush there.
			next, ok := l.nextSegmentStart(off)
			if !ok {
				next = target
			}
			off = min(next, target)
			continue
		}
		to := min(target, s.end())
		err = s.flushRange(off-s.start, to-s.start)
		s.release()
		off = to
	}
	if err != nil {
		err = l.failFlush(from, err)
		l.flushDone(err, 0)
		return err
	}
	if ts > 0 {
		// Before publishing the flushed offset: whoever sees the offset
		// sees the checkpoint that goes with it.
		l.ckMu.Lock()
		l.ck.PhysicMsgTimestamp = ts
		l.ckMu.Unlock()
	}
	l.flushDone(nil, target)
	return nil
}

// flushDone records the outcome of a flush, with the new flushed offset
// when it succeeded, and wakes those waiting for one.
func (l *Log) flushDone(err error, flushed int64) {
	l.flushMu.Lock()
	if err == nil {
		l.flushedPos.Store(flushed)
		l.flushes.Add(1)
	}
	l.flushErr = err
	close(l.flushCh)
	l.flushCh = make(chan struct{})
	l.flushMu.Unlock()
}

// failFlush makes err, a failed flush of what follows from (the end of
// the last good flush), the log's lasting flush failure and calls
// Config.Stop with it, once; it returns the failure (wrapping
// ErrFlushFailed).
func (l *Log) failFlush(from int64, err error) error {
	failure := fmt.Errorf("%w: flushed up to %d: %w", ErrFlushFailed, from, err)
	if !l.flushFailed.CompareAndSwap(nil, &failure) {
		return *l.flushFailed.Load()
	}
	l.log.Error().Err(err).Int64("flushed", from).Int64("written", l.writePos.Load()).
		Msg("commitlog flush failed: nothing appended since the last good flush is known to be on disk; no append is reported flushed any more")
	l.stopFn(failure)
	return failure
}

// stopOnFlushFailure is Config.Stop's default: the process ends, and the
// next start recovers the log from its files.
func stopOnFlushFailure(log *zerolog.Logger) func(error) {
	return func(err error) {
		log.WithLevel(zerolog.FatalLevel).Err(err).Msg("stopping: the CommitLog cannot go on after a failed flush; restart to recover it from its files")
		_, _ = fmt.Fprintf(os.Stderr, "commitlog fatal: %v\n", err)
		os.Exit(2)
	}
}

// WaitFlushed is what an Append with WaitFlush does after the append, for
// a caller that appended several records without waiting and must know
// them durable before it records having stored them: under SyncFlush it
// wakes the flusher and waits until everything before end is flushed,
// reporting false when SyncFlushTimeout passes, ctx ends or the log
// closes first. Under AsyncFlush it reports true at once.
func (l *Log) WaitFlushed(ctx context.Context, end int64) bool {
	if l.cfg.FlushType != SyncFlush {
		return true
	}
	l.kickFlusher()
	return l.waitFlushed(ctx, end)
}

// WaitDurable waits until everything before end is flushed, however many
// SyncFlushTimeouts it takes, logging each one that passes. It is for a
// service that appended records without waiting and must not append them
// again, such as a delivery whose progress it records only once the
// delivered copies are durable: after a WaitFlushed timeout the records
// are in the log all the same, and a second append would store them
// twice. It returns ctx's error when ctx ends first and ErrClosed when
// the log closes first (Close flushes everything, but the caller cannot
// tell whether that has happened yet). Under AsyncFlush it returns nil at
// once.
func (l *Log) WaitDurable(ctx context.Context, end int64) error {
	if l.cfg.FlushType != SyncFlush {
		return nil
	}
	start := time.Now()
	for {
		if l.WaitFlushed(ctx, end) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("wait for the flush to %d (flushed to %d): %w", end, l.flushedPos.Load(), err)
		}
		if l.closedFlag.Load() {
			return fmt.Errorf("wait for the flush to %d (flushed to %d): %w", end, l.flushedPos.Load(), ErrClosed)
		}
		if failed := l.flushFailed.Load(); failed != nil {
			return fmt.Errorf("wait for the flush to %d: %w", end, *failed)
		}
		l.flushMu.Lock()
		flushErr := l.flushErr
		l.flushMu.Unlock()
		l.log.Warn().Int64("end", end).Int64("flushed", l.flushedPos.Load()).Dur("waited", time.Since(start)).
			AnErr("lastFlushError", flushErr).Msg("the flush takes longer than syncFlushTimeout; still waiting for it")
	}
}

// waitFlushed waits until the log is flushed to at least end. It returns
// false when SyncFlushTimeout passes, ctx ends or the log closes first.
func (l *Log) waitFlushed(ctx context.Context, end int64) bool {
	if l.flushedPos.Load() >= end {
		return true
	}
	t, _ := l.timers.Get().(*time.Timer)
	if t == nil {
		t = time.NewTimer(l.cfg.SyncFlushTimeout)
	} else {
		t.Reset(l.cfg.SyncFlushTimeout)
	}
	defer func() {
		t.Stop()
		l.timers.Put(t)
	}()
	for {
		l.flushMu.Lock()
		ch := l.flushCh
		l.flushMu.Unlock()
		if l.flushedPos.Load() >= end {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return l.flushedPos.Load() >= end
		case <-ctx.Done():
			return l.flushedPos.Load() >= end
		case <-l.stop:
			// Close flushes everything before it returns; but the caller
			// cannot rely on that having happened yet.
			return l.flushedPos.Load() >= end
		}
	}
}

// Flush flushes everything appended so far and waits for it. It is for
// admin tools and tests; appends use the flusher.
func (l *Log) Flush() error {
	if l.closedFlag.Load() {
		return ErrClosed
	}
	end := l.writePos.Load()
	l.forceFlusher()
	for l.flushedPos.Load() < end {
		l.flushMu.Lock()
		ch := l.flushCh
		err := l.flushErr
		l.flushMu.Unlock()
		if l.flushedPos.Load() >= end {
			break
		}
		if err != nil {
			return err
		}
		l.forceFlusher()
		select {
		case <-ch:
		case <-l.stop:
			return ErrClosed
		}
	}
	return nil
}
