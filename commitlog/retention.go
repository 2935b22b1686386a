package commitlog

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// maxDeletePerPass bounds the segments one retention pass deletes
// (RocketMQ's deleteFileBatchMax).
const maxDeletePerPass = 10

// manualDeletePasses is how many cleaner passes after DeleteExpiredSoon
// delete expired segments whatever the hour (RocketMQ's
// MAX_MANUAL_DELETE_FILE_TIMES).
const manualDeletePasses = 20

// Retention is the part of the configuration that decides which segments
// the cleaner deletes; SetRetention changes it while the log runs.
type Retention struct {
	// FileReservedTime is how long a segment is kept after its last
	// modification.
	FileReservedTime time.Duration
	// DeleteWhen lists the local hours at which expired segments go.
	DeleteWhen []int
	// DiskMaxUsedSpaceRatio is the disk usage in percent above which
	// expired segments go at any hour.
	DiskMaxUsedSpaceRatio float64
	// KeepUnexpiredWhenFull never deletes a segment younger than
	// FileReservedTime, however full the disk (Config's field of the same
	// name).
	KeepUnexpiredWhenFull bool
	// DiskForceCleanRatio and DiskWarningLevelRatio are Config's fields
	// of the same names; zero keeps the value in force.
	DiskForceCleanRatio, DiskWarningLevelRatio float64
}

// SetRetention replaces the retention rules; the next pass of the cleaner
// (or call of DeleteExpired) follows them.
func (l *Log) SetRetention(r Retention) {
	r.DeleteWhen = slices.Clone(r.DeleteWhen)
	cur := l.retention.Load()
	if r.DiskForceCleanRatio <= 0 {
		r.DiskForceCleanRatio = cur.DiskForceCleanRatio
	}
	if r.DiskWarningLevelRatio <= 0 {
		r.DiskWarningLevelRatio = cur.DiskWarningLevelRatio
	}
	l.retention.Store(&r)
}

// RetentionRules returns the retention rules in force.
func (l *Log) RetentionRules() Retention {
	r := *l.retention.Load()
	r.DeleteWhen = slices.Clone(r.DeleteWhen)
	return r
}

// DeleteExpiredSoon makes the cleaner's next 20 passes delete expired
// segments whatever the hour, as if each were at a deleteWhen hour
// (DELETE_EXPIRED_COMMITLOG, mqadmin deleteExpiredCommitLog). Segments
// younger than FileReservedTime stay.
func (l *Log) DeleteExpiredSoon() {
	l.manualPasses.Store(manualDeletePasses)
	l.log.Info().Msg("expired segments will be deleted by the next cleaner passes, at any hour")
}

// OnMinOffsetChange registers fn to be called with the new MinOffset after
// retention deleted segments. fn runs on the goroutine that deleted them
// (the cleaner, or the caller of DeleteExpired) and must not block long.
func (l *Log) OnMinOffsetChange(fn func(newMin int64)) {
	l.minSubsMu.Lock()
	l.minSubs = append(l.minSubs, fn)
	l.minSubsMu.Unlock()
}

// cleaner is the retention goroutine: every CleanInterval it deletes
// expired segments if the local hour is in DeleteWhen or the disk usage is
// above DiskMaxUsedSpaceRatio, and the oldest segments whatever their age
// if usage is above DiskForceCleanRatio (unless KeepUnexpiredWhenFull).
func (l *Log) cleaner() {
	defer l.wg.Done()
	t := time.NewTicker(l.cfg.CleanInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if _, err := l.cleanOnce(); err != nil {
			l.log.Error().Err(err).Msg("retention pass failed")
		}
	}
}

// cleanOnce runs one retention pass with the configured clock and rules.
func (l *Log) cleanOnce() (int, error) {
	now := l.cfg.Now()
	rules := l.retention.Load()
	hourOK := slices.Contains(rules.DeleteWhen, now.Hour())
	if n := l.manualPasses.Load(); n > 0 {
		l.manualPasses.CompareAndSwap(n, n-1)
		hourOK = true
	}
	ratio, err := l.checkDiskSpace()
	if err != nil {
		return 0, fmt.Errorf("retention: %w", err)
	}
	over := ratio > rules.DiskMaxUsedSpaceRatio
	// Above the clean-forcibly ratio, or the warning level where appends
	// are refused, a pass deletes expired segments at any hour and, unless
	// KeepUnexpiredWhenFull, unexpired ones too: as RocketMQ's
	// isSpaceToDelete, whose answer does not depend on
	// cleanFileForciblyEnable (that only decides cleanAtOnce). Else a log
	// refusing appends kept its expired segments until the deleteWhen hour.
	pressed := ratio > rules.DiskForceCleanRatio || ratio > rules.DiskWarningLevelRatio
	force := pressed && !rules.KeepUnexpiredWhenFull
	if !hourOK && !over && !pressed {
		return 0, nil
	}
	if over || force {
		l.log.Warn().Float64("usedPercent", ratio).Bool("force", force).Msg("disk usage above the cleaning threshold")
	}
	return l.DeleteExpired(now, force)
}

// DeleteExpired deletes, oldest first, segments whose file was last
// modified at least FileReservedTime before now, stopping at the first one
// it keeps; with force it deletes the oldest segments whatever their age.
// It never deletes the active (last) segment, and deletes at most 10 per
// call. A deleted segment disappears from reads at once; its file is
// removed when its last View or Reader releases it. Subscribers of
// OnMinOffsetChange are told the new MinOffset. It returns the number of
// segments deleted.
//
// Age is the file's modification time (as RocketMQ does), which the kernel
// moves forward when mapped pages are written.
func (l *Log) DeleteExpired(now time.Time, force bool) (int, error) {
	if l.closedFlag.Load() {
		return 0, ErrClosed
	}
	var victims []*segment
	var firstErr error
	reserved := l.retention.Load().FileReservedTime
	l.segsMu.Lock()
	for len(victims) < maxDeletePerPass && len(victims) < len(l.segs)-1 {
		s := l.segs[len(victims)]
		if !force {
			info, err := l.fs.Stat(s.path)
			if err != nil {
				firstErr = fmt.Errorf("retention: stat segment %s: %w", s.path, err)
				break
			}
			if info.ModTime().Add(reserved).After(now) {
				break
			}
		}
		victims = append(victims, s)
	}
	newMin := l.minOffset.Load()
	if len(victims) > 0 {
		l.segs = slices.Delete(l.segs, 0, len(victims))
		newMin = l.segs[0].start
		l.minOffset.Store(newMin)
	}
	l.segsMu.Unlock()
	if len(victims) == 0 {
		return 0, firstErr
	}
	for _, s := range victims {
		l.log.Info().Str("segment", s.path).Bool("force", force).Msg("deleting segment")
		s.deleted.Store(true)
		s.release()
	}
	if err := syncDir(l.fs, l.segDir); err != nil && firstErr == nil {
		firstErr = err
	}
	l.minSubsMu.Lock()
	subs := slices.Clone(l.minSubs)
	l.minSubsMu.Unlock()
	for _, fn := range subs {
		fn(newMin)
	}
	return len(victims), firstErr
}

// DiskUsedPercent is how full, in percent, the file system holding the
// segments is (or the store root's, when that one is elsewhere and
// fuller): what retention compares with its ratios. Like
// every retention pass, it also refuses or resumes appends at
// DiskWarningLevelRatio.
func (l *Log) DiskUsedPercent() (float64, error) {
	return l.checkDiskSpace()
}

// checkDiskSpace reads how full the file system holding the segments is
// (or the store root's, when SegmentDir is elsewhere and that one is
// fuller: the root holds the checkpoint, and a broker's index), and
// refuses appends (ErrStoreFull) while it is used above
// DiskWarningLevelRatio, logging each change of that state.
func (l *Log) checkDiskSpace() (float64, error) {
	ratio := 0.0
	for i, dir := range []string{l.segDir, l.cfg.Dir} {
		if i > 0 && dir == l.segDir {
			break
		}
		usage, err := l.fs.Statfs(dir)
		if err != nil {
			return 0, fmt.Errorf("disk usage of %s: %w", dir, err)
		}
		ratio = max(ratio, usage.UsedRatio())
	}
	rules := l.retention.Load()
	level := rules.DiskWarningLevelRatio
	l.usedPercent.Store(math.Float64bits(ratio))
	// Full above the warning level, not full again until the usage is
	// down to the clean-forcibly ratio, as RocketMQ's isSpaceToDelete
	// flips its disk-full flag: between the two the state stays, so sends
	// do not flap on and off around one line. A warning level raised
	// since the refusal began (100 turns it off) ends it at once: the
	// operator's way out when retention cannot free the disk.
	wasFull := l.storeFull.Load()
	full := ratio > level
	if !full && wasFull && ratio > rules.DiskForceCleanRatio && level <= math.Float64frombits(l.warningLevel.Load()) {
		full = true
	}
	if !full || !wasFull {
		// While refused, warningLevel keeps the level the refusal began
		// at (what the error names).
		l.warningLevel.Store(math.Float64bits(level))
	}
	if l.storeFull.Swap(full) != full {
		if full {
			l.log.Error().Float64("usedPercent", ratio).Float64("warningLevel", level).Str("dir", l.cfg.Dir).
				Float64("resumeAt", rules.DiskForceCleanRatio).
				Msg("disk almost full: appends are refused until retention brings the usage down to the clean-forcibly ratio")
		} else {
			l.log.Info().Float64("usedPercent", ratio).Float64("warningLevel", level).Str("dir", l.cfg.Dir).
				Msg("disk usage back down: appends resume")
		}
	}
	return ratio, nil
}

// storeFullError is the error of an append refused while storeFull is set.
func (l *Log) storeFullError() error {
	return fmt.Errorf("append: %w: %.1f%% of the disk holding %s is used; appends are refused from above the warning level of %.0f%% until it is down to %.0f%%",
		ErrStoreFull, math.Float64frombits(l.usedPercent.Load()), l.cfg.Dir, math.Float64frombits(l.warningLevel.Load()),
		l.retention.Load().DiskForceCleanRatio)
}
