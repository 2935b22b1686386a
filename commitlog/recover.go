package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"github.com/rocketkv/rocketkv/internal/vfs"
)

// loadSegments lists, checks and maps the segment files (spec 2.2):
// 20-digit names sorted by offset; a zero-length last file is removed; the
// segment size is taken from the files; a file of another size is an
// error, unless it is the last one and holds only zeros (a preallocated
// file interrupted by a crash), which is removed.
func (l *Log) loadSegments() error {
	entries, err := l.fs.ReadDir(l.segDir)
	if err != nil {
		return fmt.Errorf("list segments in %s: %w", l.segDir, err)
	}
	type file struct {
		name  string
		start int64
		size  int64
	}
	var files []file
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		start, ok := parseSegmentName(e.Name())
		if !ok {
			l.log.Warn().Str("file", e.Name()).Msg("ignoring file that is not a segment in the commitlog directory")
			continue
		}
		info, err := l.fs.Stat(filepath.Join(l.segDir, e.Name()))
		if err != nil {
			return fmt.Errorf("stat segment %s: %w", e.Name(), err)
		}
		files = append(files, file{e.Name(), start, info.Size()})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].start < files[j].start })
	removeLast := func(why string) error {
		f := files[len(files)-1]
		p := filepath.Join(l.segDir, f.name)
		l.log.Warn().Str("segment", f.name).Int64("size", f.size).Msg("removing " + why)
		if err := l.fs.Remove(p); err != nil {
			return fmt.Errorf("remove segment %s: %w", p, err)
		}
		files = files[:len(files)-1]
		return nil
	}
	if n := len(files); n > 0 && files[n-1].size == 0 {
		if err := removeLast("zero-length last segment"); err != nil {
			return err
		}
	}
	if len(files) == 0 {
		return nil
	}
	l.segSize = files[0].size
	if len(files) == 1 && l.segSize < minSegmentSize {
		return fmt.Errorf("segment %s: %w: size %d below %d", files[0].name, ErrBadSegment, l.segSize, minSegmentSize)
	}
	if n := len(files); n > 1 && files[n-1].size != l.segSize {
		zero, err := l.fileIsZero(files[n-1].name, files[n-1].size)
		if err != nil {
			return err
		}
		if !zero {
			return fmt.Errorf("segment %s: %w: size %d, the others have %d", files[n-1].name, ErrBadSegment, files[n-1].size, l.segSize)
		}
		if err := removeLast("all-zero preallocated last segment of the wrong size"); err != nil {
			return err
		}
	}
	for i, f := range files {
		if f.size != l.segSize {
			return fmt.Errorf("segment %s: %w: size %d, the others have %d", f.name, ErrBadSegment, f.size, l.segSize)
		}
		if i > 0 && files[i-1].start+l.segSize != f.start {
			l.log.Error().Str("segment", f.name).Int64("previousStart", files[i-1].start).Msg("gap or overlap between segments")
			if f.start < files[i-1].start+l.segSize {
				return fmt.Errorf("segment %s: %w: overlaps the previous one", f.name, ErrBadSegment)
			}
		}
	}
	for _, f := range files {
		s, err := openSegment(l.fs, &l.log, filepath.Join(l.segDir, f.name), f.start, f.size)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
	}
	return nil
}

// fileIsZero reports whether a segment file of size bytes holds only zero
// bytes.
func (l *Log) fileIsZero(name string, size int64) (bool, error) {
	f, err := l.fs.OpenFile(filepath.Join(l.segDir, name), 0, 0)
	if err != nil {
		return false, fmt.Errorf("open segment %s: %w", name, err)
	}
	defer f.Close()
	nz, err := lastNonZeroAt(f, 0, size)
	if err != nil {
		return false, fmt.Errorf("read segment %s: %w", name, err)
	}
	return nz == 0, nil
}

var zeroPage [pageSize]byte

// normalProbeBytes is how far past a zero header normal recovery looks for
// stray data before trusting that the log ends there.
const normalProbeBytes = 64 << 10

// allZero reports whether b holds only zeros.
func allZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), pageSize)
		if !bytes.Equal(b[:n], zeroPage[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// lastNonZero returns the index just past the last non-zero byte of b (0
// when b is all zero).
func lastNonZero(b []byte) int {
	for end := len(b); end > 0; {
		start := max(end-pageSize, 0)
		if !bytes.Equal(b[start:end], zeroPage[:end-start]) {
			for i := end - 1; i >= start; i-- {
				if b[i] != 0 {
					return i + 1
				}
			}
		}
		end = start
	}
	return 0
}

// tailReportWindow is how far past the recovered end (and into each
// segment deleted after it) recovery reads to report the bytes it cut.
const tailReportWindow = 8 << 20

// tailScanChunk is the read size of lastNonZeroAt.
const tailScanChunk = 1 << 20

// lastNonZeroAt returns how many bytes of f from from up to to run up to
// and including the last non-zero one (0 when all are zero), reading with
// pread: for a segment file that is not mapped.
func lastNonZeroAt(f vfs.File, from, to int64) (int64, error) {
	buf := make([]byte, tailScanChunk)
	last := int64(0)
	for off := from; off < to; {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), to-off)], off)
		if nz := lastNonZero(buf[:n]); nz > 0 {
			last = off + int64(nz) - from
		}
		off += int64(n)
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return last, nil
		}
		if err != nil {
			return 0, err
		}
	}
	return last, nil
}

// normalRecoverySegments is how many of the last segments a normal
// recovery scans (RocketMQ's recoverNormally).
const normalRecoverySegments = 3

// recoveryStart picks the segment index recovery scans from.
//
// Normal exit: the last three segments (the tail of a cleanly closed log is
// in the last one, or right after a filler in the one before).
// Abnormal exit: walking back from the last segment, the first one whose
// first record's store timestamp is at or before the checkpoint's
// MinTimestamp (spec 2.7), else segment 0.
// Either way a positive Config.RecoverFrom moves the start back to the
// segment holding it if that is earlier.
func (l *Log) recoveryStart(abnormal bool) int {
	n := len(l.segs)
	idx := max(n-normalRecoverySegments, 0)
	if abnormal {
		idx = 0
		minTS := l.ck.MinTimestamp()
		for i := n - 1; i >= 0; i-- {
			s := l.segs[i]
			m, err := Decode(s.data)
			if err == nil && m.PhyOffset == s.start && m.StoreTimestamp <= minTS && minTS > 0 {
				idx = i
				break
			}
		}
	}
	for _, h := range []int64{l.cfg.RecoverFrom, l.cfg.CutAt} {
		if h <= 0 {
			continue
		}
		for i, s := range l.segs {
			if h < s.end() {
				idx = min(idx, i)
				break
			}
		}
	}
	return idx
}

// recover finds the end of the log by scanning records forward from the
// chosen segment, cuts the tail at the first bad record, zeroes what lies
// after the cut in that segment and deletes later segments (spec 2.7/2.8).
// When the deletion would make the next normal recovery scan segments
// before the chosen one, a normal recovery scans again from the first of
// those, so that a bad record there is cut now rather than at the next
// start, with the records appended meanwhile.
func (l *Log) recover(abnormal bool) error {
	info := RecoveryInfo{Abnormal: abnormal}
	defer func() { l.recovery = info }()
	if len(l.segs) == 0 {
		if cut := l.cfg.CutAt; cut > 0 {
			return fmt.Errorf("cut the log at %d: %w: the log is empty", cut, ErrOffsetOutOfRange)
		}
		l.log.Info().Bool("abnormal", abnormal).Msg("empty commitlog")
		return nil
	}
	idx := l.recoveryStart(abnormal)
	var (
		cutSeg    int
		cutPos    int64
		cutReason error
		lastTS    int64
	)
rescan:
	info.FirstScanned, info.Records = l.segs[idx].start, 0
	cutSeg, cutPos, cutReason, lastTS = -1, 0, nil, 0
scan:
	for i := idx; i < len(l.segs); i++ {
		s := l.segs[i]
		for pos := int64(0); ; {
			if cut := l.cfg.CutAt; cut > 0 && s.start+pos == cut {
				cutSeg, cutPos = i, pos
				cutReason = fmt.Errorf("cut at %d as asked (Config.CutAt)", cut)
				break scan
			}
			if pos+blankFillerLength > s.size {
				break // no room for anything: move to the next segment
			}
			n, err := l.checkOnRecover(s.data[pos:])
			if err == nil && recordPhyOffset(s.data[pos:]) != s.start+pos {
				err = fmt.Errorf("%w: physical offset field %d at position %d", ErrCorrupt, recordPhyOffset(s.data[pos:]), s.start+pos)
			}
			if errors.Is(err, ErrBlank) {
				break
			}
			if err != nil {
				cutSeg, cutPos = i, pos
				if !allZero(s.data[pos : pos+blankFillerLength]) {
					cutReason = fmt.Errorf("record at %d: %w", s.start+pos, err)
				}
				break scan
			}
			lastTS = recordStoreTimestamp(s.data[pos:])
			info.Records++
			l.hints.note(s.start + pos)
			pos += int64(n)
		}
	}
	var end int64
	if cutSeg < 0 {
		// Every scanned segment ended with a filler: the log ends at the
		// end of the last one, and the next append opens a new segment.
		cutSeg = len(l.segs) - 1
		cutPos = l.segs[cutSeg].size
	}
	if next := max(cutSeg+1-normalRecoverySegments, 0); !abnormal && cutSeg < len(l.segs)-1 && next < idx {
		// Deleting the segments after the cut moves the window the next
		// normal recovery scans back over segments this one trusted
		// unread: scan them now, so that the next recovery finds the
		// end this one leaves, and does not cut the records appended
		// after it at a bad record found there. Not after a crash: its
		// scan starts where the checkpoint says everything before is
		// flushed (spec 2.7), and nearly every crash deletes a segment,
		// the one preallocated after the active one.
		l.log.Warn().Int64("from", l.segs[next].start).Int64("was", l.segs[idx].start).
			Msg("recovery cuts segments away: scanning the earlier segments the next recovery would scan")
		idx = next
		l.hints.reset()
		goto rescan
	}
	s := l.segs[cutSeg]
	end = s.start + cutPos
	if cut := l.cfg.CutAt; cut > 0 && cut != end {
		return fmt.Errorf("cut the log at %d: %w: not the start of a record between %d and the recovered end %d",
			cut, ErrOffsetOutOfRange, info.FirstScanned, end)
	}
	if !abnormal && cutReason == nil && cutPos < s.size {
		// A clean shutdown leaves zeros after the end. If the bytes right
		// after the zero header are not zero, the tail was damaged
		// (not by a crash): treat it as a cut and clean it.
		probe := s.data[cutPos:min(s.size, cutPos+normalProbeBytes)]
		if !allZero(probe) {
			cutReason = fmt.Errorf("record at %d: %w: zero header followed by data", end, ErrCorrupt)
		}
	}
	info.CutReason = cutReason
	if abnormal || cutReason != nil {
		if cutPos < s.size {
			// Zero the whole tail without reading it (reading a segment's
			// unwritten blocks costs seconds): whatever a crashed run left
			// past the end must never be taken for records by a later
			// recovery. Only the first tailReportWindow bytes are read,
			// for the report.
			info.CutBytes += int64(lastNonZero(s.data[cutPos:min(s.size, cutPos+tailReportWindow)]))
			if err := l.fs.ZeroRange(s.f, cutPos, s.size-cutPos); err != nil {
				return fmt.Errorf("zero tail of segment %s after %d: %w", s.path, cutPos, err)
			}
			if err := s.flushRange(cutPos, s.size); err != nil {
				return err
			}
		}
	}
	later := l.segs[cutSeg+1:]
	for _, ls := range later {
		info.CutBytes += int64(lastNonZero(ls.data[:min(ls.size, tailReportWindow)]))
		ls.deleted.Store(true)
		l.log.Warn().Str("segment", ls.path).Int64("end", end).Msg("deleting segment after the recovered end")
		ls.release()
	}
	l.segs = l.segs[:cutSeg+1]
	if len(later) > 0 {
		if err := syncDir(l.fs, l.segDir); err != nil {
			return err
		}
	}
	if abnormal {
		// The crashed run may have left scanned records in the page cache
		// only: make them durable before calling them flushed.
		for _, fs := range l.segs[idx:] {
			if err := fs.flushRange(0, min(fs.size, end-fs.start)); err != nil {
				return err
			}
		}
	}
	info.EndOffset = end
	l.writePos.Store(end)
	l.flushedPos.Store(end)
	l.minOffset.Store(l.segs[0].start)
	if lastTS > 0 {
		l.lastStoreTS.Store(lastTS)
	}
	ev := l.log.Info()
	if cutReason != nil || info.CutBytes > 0 {
		ev = l.log.Warn().AnErr("cutReason", cutReason)
	}
	ev.Bool("abnormal", abnormal).Int64("firstScanned", info.FirstScanned).Int("records", info.Records).
		Int64("end", end).Int64("cutBytes", info.CutBytes).Msg("commitlog recovered")
	return nil
}

// checkOnRecover checks the record at b[0] as recovery does: its
// structure, and with CheckCRCOnRecover its body CRC, or its CRC
// property in place of the body CRC under ForceVerifyPropCRC (as
// RocketMQ's checkMessageAndReturnSize).
func (l *Log) checkOnRecover(b []byte) (int32, error) {
	if l.cfg.CheckCRCOnRecover && l.cfg.ForceVerifyPropCRC {
		return CheckPropCRC(b)
	}
	return Check(b, l.cfg.CheckCRCOnRecover)
}
