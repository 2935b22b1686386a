package commitlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"golang.org/x/sys/unix"
)

// ReadOnlyLog reads the CommitLog of a store without changing anything:
// unlike Open it takes no lock, creates no abort or checkpoint file and
// runs no recovery (nothing is truncated, zeroed or deleted). Segment files
// are read with plain reads (pread), never mapped, so a segment deleted or
// changed by a running broker gives an error, not a crash.
//
// The log's end is found when it is opened, by scanning the last segment
// that holds data, the way recovery does: records are checked for
// structure and for the physical-offset field, and the first header that
// is zero or bad ends the log. On a live broker's store, Clamp the log to
// an offset known to be complete (an index checkpoint's dispatched offset).
//
// A ReadOnlyLog and its Iterators are not safe for concurrent use. Data
// returned by ReadRecord and Iterator.Next is valid until the next call on
// the same ReadOnlyLog or Iterator.
type ReadOnlyLog struct {
	dir      string
	segs     []roSegment
	min, end int64
	files    fileCache
	rr       roReader // ReadRecord's window
}

// roSegment is one segment file: its first offset and its size.
type roSegment struct {
	start, size int64
	path        string
}

func (s roSegment) end() int64 { return s.start + s.size }

// ReadOnly read sizes.
const (
	// roWindow is how much ReadRecord reads around a record, so that
	// neighbours in the log cost no system call.
	roWindow = 64 << 10
	// roChunk is how much an Iterator reads at once.
	roChunk = 1 << 20
	// roMaxRecord bounds the size a record header may claim before the
	// record is read (a corrupt header must not make us allocate a whole
	// segment); RocketMQ's messages are 4 MiB by default.
	roMaxRecord = 256 << 20
	// roOpenFiles bounds the segment files kept open.
	roOpenFiles = 8
)

// OpenReadOnly opens the CommitLog under <root>/commitlog (the default
// segment directory, SegmentDirOf) for reading; see OpenReadOnlyDir.
func OpenReadOnly(root string) (*ReadOnlyLog, error) {
	return OpenReadOnlyDir(SegmentDirOf(root))
}

// OpenReadOnlyDir opens the CommitLog whose segment files are in dir
// (RocketMQ's storePathCommitLog) for reading. It lists the segment files
// (20-digit names; other files are ignored), finds the end of the log and
// opens nothing else. Errors: one wrapping os.ErrNotExist when dir does
// not exist, ErrBadSegment when segment files overlap.
func OpenReadOnlyDir(dir string) (*ReadOnlyLog, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open commitlog %s read-only: %w", dir, err)
	}
	l := &ReadOnlyLog{dir: dir}
	for _, e := range entries {
		start, ok := roSegmentStart(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("open commitlog %s read-only: %w", dir, err)
		}
		if info.Size() == 0 {
			continue
		}
		l.segs = append(l.segs, roSegment{start: start, size: info.Size(), path: filepath.Join(dir, e.Name())})
	}
	sort.Slice(l.segs, func(i, j int) bool { return l.segs[i].start < l.segs[j].start })
	for i := 1; i < len(l.segs); i++ {
		if l.segs[i].start < l.segs[i-1].end() {
			return nil, fmt.Errorf("open commitlog %s read-only: segment %s: %w: overlaps the previous one",
				dir, l.segs[i].path, ErrBadSegment)
		}
	}
	l.files.l = l
	l.rr.l = l
	if len(l.segs) > 0 {
		l.min = l.segs[0].start
		end, err := l.findEnd()
		if err != nil {
			_ = l.Close()
			return nil, err
		}
		l.end = end
	}
	return l, nil
}

// roSegmentStart parses a segment file name: 20 decimal digits.
func roSegmentStart(name string) (int64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(name, 10, 64)
	return v, err == nil
}

// findEnd scans the last segment whose first header is not zero (later
// ones are preallocated and empty) up to its first zero or bad header. A
// segment that ends with a blank filler ends the log at its own end.
func (l *ReadOnlyLog) findEnd() (int64, error) {
	last := -1
	var head [blankFillerLength]byte
	for i := len(l.segs) - 1; i >= 0 && last < 0; i-- {
		if l.segs[i].size < blankFillerLength {
			continue
		}
		if err := l.files.readAt(i, head[:], 0); err != nil {
			return 0, fmt.Errorf("open commitlog %s read-only: %w", l.dir, err)
		}
		if head != [blankFillerLength]byte{} {
			last = i
		}
	}
	if last < 0 {
		return l.segs[0].start, nil
	}
	s := l.segs[last]
	r := roReader{l: l}
	for pos := int64(0); ; {
		if pos+blankFillerLength > s.size {
			return s.end(), nil
		}
		if err := r.fill(last, pos, blankFillerLength, roChunk); err != nil {
			return 0, fmt.Errorf("open commitlog %s read-only: %w", l.dir, err)
		}
		size, err := RecordSize(r.at(pos, blankFillerLength))
		if errors.Is(err, ErrBlank) {
			return s.end(), nil
		}
		if err != nil || size <= 0 || int64(size) > s.size-pos || size > roMaxRecord {
			return s.start + pos, nil
		}
		if err := r.fill(last, pos, int64(size), roChunk); err != nil {
			return 0, fmt.Errorf("open commitlog %s read-only: %w", l.dir, err)
		}
		m, err := Decode(r.at(pos, int64(size)))
		if err != nil || m.PhyOffset != s.start+pos {
			return s.start + pos, nil
		}
		pos += int64(size)
	}
}

// SegmentSizes returns the sizes of the segment files that are not
// empty, in offset order.
func (l *ReadOnlyLog) SegmentSizes() []int64 {
	sizes := make([]int64, len(l.segs))
	for i, s := range l.segs {
		sizes[i] = s.size
	}
	return sizes
}

// MinOffset returns the first offset still stored: the start of the oldest
// segment.
func (l *ReadOnlyLog) MinOffset() int64 { return l.min }

// MaxOffset returns the end of the log found at open (or set by Clamp):
// every record before it is complete.
func (l *ReadOnlyLog) MaxOffset() int64 { return l.end }

// Clamp lowers the end of the log to end when end is below it: reads and
// iteration stop there. kvdump clamps a live broker's log to the dispatched
// offset of its index checkpoint, below which every record is complete.
func (l *ReadOnlyLog) Clamp(end int64) {
	if end < l.end {
		l.end = max(end, l.min)
	}
}

// Close closes the segment files. The ReadOnlyLog must not be used after.
func (l *ReadOnlyLog) Close() error { return l.files.closeAll() }

// segmentAt returns the index of the segment holding offset, or -1.
func (l *ReadOnlyLog) segmentAt(offset int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].end() > offset })
	if i < len(l.segs) && l.segs[i].start <= offset {
		return i
	}
	return -1
}

// ReadRecord returns the record starting at offset, checked for structure
// (Check without CRC). Errors: ErrOffsetOutOfRange when offset is below
// MinOffset, in no segment or the record would end past MaxOffset;
// ErrBlank at a blank filler; ErrBadMagic, ErrTruncated or ErrCorrupt when
// offset is not the start of a sound record. Entry.Data is valid until the
// next ReadRecord.
func (l *ReadOnlyLog) ReadRecord(offset int64) (Entry, error) {
	if offset < l.min || offset+blankFillerLength > l.end {
		return Entry{}, fmt.Errorf("read record at %d outside [%d, %d): %w", offset, l.min, l.end, ErrOffsetOutOfRange)
	}
	i := l.segmentAt(offset)
	if i < 0 {
		return Entry{}, fmt.Errorf("read record at %d: no segment holds it: %w", offset, ErrOffsetOutOfRange)
	}
	s := l.segs[i]
	rel := offset - s.start
	if rel+blankFillerLength > s.size {
		return Entry{}, fmt.Errorf("read record at %d: in the last %d bytes of segment %s: %w", offset, s.size-rel, s.path, ErrCorrupt)
	}
	if err := l.rr.fill(i, rel, blankFillerLength, roWindow); err != nil {
		return Entry{}, fmt.Errorf("read record at %d: %w", offset, err)
	}
	size, err := RecordSize(l.rr.at(rel, blankFillerLength))
	if err != nil {
		return Entry{}, fmt.Errorf("read record at %d: %w", offset, err)
	}
	if size <= 0 || int64(size) > s.size-rel || size > roMaxRecord {
		return Entry{}, fmt.Errorf("read record at %d: %w: size %d", offset, ErrCorrupt, size)
	}
	if offset+int64(size) > l.end {
		return Entry{}, fmt.Errorf("read record at %d: size %d ends past the end %d: %w", offset, size, l.end, ErrOffsetOutOfRange)
	}
	if err := l.rr.fill(i, rel, int64(size), roWindow); err != nil {
		return Entry{}, fmt.Errorf("read record at %d: %w", offset, err)
	}
	data := l.rr.at(rel, int64(size))
	if _, err := Check(data, false); err != nil {
		return Entry{}, fmt.Errorf("read record at %d: %w", offset, err)
	}
	return Entry{Offset: offset, Size: size, Data: data}, nil
}

// Iterator reads records in log order from a ReadOnlyLog, skipping blank
// fillers into the next segment, up to the log's MaxOffset.
type Iterator struct {
	l   *ReadOnlyLog
	off int64
	r   roReader
}

// NewIterator returns an Iterator positioned at from, which must be a
// record start (MinOffset, or an offset an Iterator or the index gave).
func (l *ReadOnlyLog) NewIterator(from int64) *Iterator {
	return &Iterator{l: l, off: from, r: roReader{l: l}}
}

// Offset returns the offset of the next record Next will return.
func (it *Iterator) Offset() int64 { return it.off }

// Next returns the next record. At MaxOffset it returns ErrNoMoreData.
// Below MinOffset or in a gap between segments it returns
// ErrOffsetOutOfRange; on a damaged record ErrBadMagic, ErrTruncated or
// ErrCorrupt (wrapped with the offset), and the Iterator stays there.
func (it *Iterator) Next() (Entry, error) {
	l := it.l
	for {
		if it.off >= l.end {
			return Entry{}, ErrNoMoreData
		}
		i := l.segmentAt(it.off)
		if i < 0 {
			return Entry{}, fmt.Errorf("iterator at %d: no segment holds it: %w", it.off, ErrOffsetOutOfRange)
		}
		s := l.segs[i]
		rel := it.off - s.start
		if rel+blankFillerLength > s.size {
			it.off = s.end()
			continue
		}
		if err := it.r.fill(i, rel, blankFillerLength, roChunk); err != nil {
			return Entry{}, fmt.Errorf("iterator at %d: %w", it.off, err)
		}
		size, err := RecordSize(it.r.at(rel, blankFillerLength))
		if errors.Is(err, ErrBlank) {
			it.off = s.end()
			continue
		}
		if err != nil {
			return Entry{}, fmt.Errorf("iterator at %d: %w", it.off, err)
		}
		if size <= 0 || int64(size) > s.size-rel || size > roMaxRecord {
			return Entry{}, fmt.Errorf("iterator at %d: %w: size %d", it.off, ErrCorrupt, size)
		}
		if it.off+int64(size) > l.end {
			return Entry{}, fmt.Errorf("iterator at %d: size %d ends past the end %d: %w", it.off, size, l.end, ErrOffsetOutOfRange)
		}
		if err := it.r.fill(i, rel, int64(size), roChunk); err != nil {
			return Entry{}, fmt.Errorf("iterator at %d: %w", it.off, err)
		}
		data := it.r.at(rel, int64(size))
		if _, err := Check(data, false); err != nil {
			return Entry{}, fmt.Errorf("iterator at %d: %w", it.off, err)
		}
		e := Entry{Offset: it.off, Size: size, Data: data}
		it.off += int64(size)
		return e, nil
	}
}

// roReader is a window of one segment's bytes: buf holds the segment
// positions [pos, pos+len(buf)).
type roReader struct {
	l   *ReadOnlyLog
	seg int
	pos int64
	buf []byte
}

// fill makes sure the window holds [rel, rel+n) of segment i, reading
// max(n, ahead) bytes (within the segment) when it does not. The caller
// has checked that rel+n is within the segment.
func (r *roReader) fill(i int, rel, n, ahead int64) error {
	if r.buf != nil && r.seg == i && rel >= r.pos && rel+n <= r.pos+int64(len(r.buf)) {
		return nil
	}
	want := min(max(n, ahead), r.l.segs[i].size-rel)
	if int64(cap(r.buf)) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	if err := r.l.files.readAt(i, r.buf, rel); err != nil {
		r.buf = r.buf[:0]
		return err
	}
	r.seg, r.pos = i, rel
	return nil
}

// at returns [rel, rel+n) of the window's segment; fill must have been
// called for it.
func (r *roReader) at(rel, n int64) []byte {
	a := rel - r.pos
	return r.buf[a : a+n : a+n]
}

// fileCache keeps up to roOpenFiles segment files open, evicting the least
// recently used.
type fileCache struct {
	l     *ReadOnlyLog
	open  map[int]*os.File
	order []int // segment indexes, least recently used first
}

// readAt fills b from segment i at position off.
func (c *fileCache) readAt(i int, b []byte, off int64) error {
	f, err := c.file(i)
	if err != nil {
		return err
	}
	if _, err := f.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("read %d bytes at %d of segment %s: %w", len(b), off, c.l.segs[i].path, err)
	}
	return nil
}

func (c *fileCache) file(i int) (*os.File, error) {
	if f, ok := c.open[i]; ok {
		for j, k := range c.order {
			if k == i {
				c.order = append(append(c.order[:j:j], c.order[j+1:]...), i)
				break
			}
		}
		return f, nil
	}
	f, err := os.Open(c.l.segs[i].path)
	if err != nil {
		return nil, fmt.Errorf("open segment: %w", err)
	}
	if c.open == nil {
		c.open = make(map[int]*os.File)
	}
	if len(c.order) >= roOpenFiles {
		old := c.order[0]
		c.order = c.order[1:]
		_ = c.open[old].Close()
		delete(c.open, old)
	}
	c.open[i] = f
	c.order = append(c.order, i)
	return f, nil
}

func (c *fileCache) closeAll() error {
	var errs []error
	for _, f := range c.open {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.open, c.order = nil, nil
	return errors.Join(errs...)
}

// LockShared takes a shared lock on the store's lock file (<root>/lock)
// without creating or changing anything, for readers of a stopped store:
// it fails with an error wrapping ErrLocked while a Log (a running broker)
// holds the store, and while it is held a Log cannot open the store.
// Several readers may hold it. When the store has no lock file (no Log
// ever opened it) there is nothing to lock and the returned Closer does
// nothing. Close the result to release the lock.
func LockShared(root string) (io.Closer, error) {
	path := filepath.Join(root, lockFileName)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nopCloser{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock store %s shared: %w", root, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock store %s shared: %w", root, ErrLocked)
		}
		return nil, fmt.Errorf("lock store %s shared: %w", root, err)
	}
	// Closing the descriptor releases the flock.
	return f, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
