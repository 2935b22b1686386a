package filecq

import (
	"container/list"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

type queueKey struct {
	topic string
	id    int32
}

// queue is the in-memory state of one ConsumeQueue: its files, its bounds
// and the few files it holds open. Bounds are queue offsets (units), file
// starts are byte offsets, as in RocketMQ.
type queue struct {
	key queueKey
	dir string

	// Guarded by Store.mu.
	refs int           // pins: open files are not evicted while > 0
	elem *list.Element // in Store.lru while open is not empty

	mu sync.Mutex
	// open is guarded by mu while refs > 0 and by Store.mu while refs == 0
	// (eviction). Most recently used last.
	open []*segment
	// The rest is guarded by mu.
	deleted     bool
	files       []int64 // byte offsets of the files' first units, consecutive
	min, max    int64   // readable entries are [min, max)
	lastPhy     int64   // phy of the unit at max-1, -1 if there is none
	lastEnd     int64   // phy+size of the newest non-blank unit (RocketMQ's maxPhysicOffset), 0 if none
	correctedTo int64   // the largest minimum CorrectMin applied since the store was opened
	times       map[int64]int64
	// gaps are the runs of files missing between files (a read-only
	// store only; files then lists the present ones): their units read
	// as gap.unit and are never entries.
	gaps []fileGap
}

// fileGap is a run of files missing between two files of a queue: the
// units [from, to) they held are lost to the file layout. unit is what
// reads of them give: one below the CommitLog offset of the entry after
// them (their records lie below it; math.MaxInt64 when there is no
// entry after them) and size 0, so that the binary searches of Truncate
// and CorrectMin, which assume offsets that grow with the queue, take
// them for the newest records they may stand for. phyFrom is the end of
// the record of the entry before them (0 when the unit before is no
// entry): the missing entries' records lie in [phyFrom, unit.phy].
type fileGap struct {
	from, to int64
	phyFrom  int64
	unit     unit
}

// gapAt returns the gap holding unit offset off of q, if any.
func (q *queue) gapAt(off int64) (fileGap, bool) {
	for _, g := range q.gaps {
		if off >= g.from && off < g.to {
			return g, true
		}
	}
	return fileGap{}, false
}

func newQueue(k queueKey, dir string) *queue {
	return &queue{key: k, dir: dir, lastPhy: -1}
}

func (q *queue) String() string { return fmt.Sprintf("%s/%d", q.key.topic, q.key.id) }

// firstOffset is the queue offset of the first unit of the first file.
func (q *queue) firstOffset() int64 { return q.files[0] / UnitSize }

func (s *Store) filePath(q *queue, start int64) string {
	return filepath.Join(q.dir, FileName(start))
}

// segment returns the open file holding unit offset off of q, opening (and,
// if mapped is set and the store is writable, mapping) it as needed. q.mu
// is held and q pinned.
func (s *Store) segment(q *queue, off int64, mapped bool) (*segment, error) {
	idx, ok := s.fileIndex(q, off*UnitSize)
	if !ok {
		return nil, fmt.Errorf("queue %s: offset %d outside its files", q, off)
	}
	start := q.files[idx]
	mapped = mapped && !s.readOnly
	for i, sg := range q.open {
		if sg.start != start {
			continue
		}
		copy(q.open[i:], q.open[i+1:])
		q.open[len(q.open)-1] = sg
		if mapped && sg.m == nil {
			m, err := s.fs.Map(sg.f, int(s.fileSize))
			if err != nil {
				return nil, fmt.Errorf("map %s: %w", sg.path, err)
			}
			sg.m = m
			s.segmentsChanged(q, 1, 0, nil)
		}
		return sg, nil
	}
	flag := os.O_RDWR
	if s.readOnly {
		flag = os.O_RDONLY
	}
	path := s.filePath(q, start)
	f, err := s.fs.OpenFile(path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	sg := &segment{start: start, path: path, f: f}
	if mapped {
		m, err := s.fs.Map(f, int(s.fileSize))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("map %s: %w", path, err)
		}
		sg.m = m
	}
	s.addSegment(q, sg)
	return sg, nil
}

// addSegment makes sg one of q's open files, closing q's least recently
// used one beyond segmentsPerQueue.
func (s *Store) addSegment(q *queue, sg *segment) {
	dMaps, dFiles := 0, 1
	if sg.m != nil {
		dMaps++
	}
	var out *segment
	if len(q.open) >= segmentsPerQueue {
		out = q.open[0]
		q.open = append(q.open[:0], q.open[1:]...)
	}
	q.open = append(q.open, sg)
	var dirty []string
	if out != nil {
		dFiles--
		if out.m != nil {
			dMaps--
		}
		if out.dirty {
			dirty = append(dirty, out.path)
		}
	}
	s.segmentsChanged(q, dMaps, dFiles, dirty)
	if out != nil {
		if err := out.close(); err != nil {
			s.log.Error().Err(err).Str("queue", q.String()).Msg("closing a consume queue file")
		}
	}
}

// closeSegments closes q's open files whose start satisfies drop (files
// about to be deleted, or all of them).
func (s *Store) closeSegments(q *queue, drop func(start int64) bool) error {
	var keep, out []*segment
	dMaps, dFiles := 0, 0
	for _, sg := range q.open {
		if !drop(sg.start) {
			keep = append(keep, sg)
			continue
		}
		out = append(out, sg)
		dFiles--
		if sg.m != nil {
			dMaps--
		}
	}
	if len(out) == 0 {
		return nil
	}
	q.open = keep
	s.segmentsChanged(q, dMaps, dFiles, nil)
	var errs []error
	for _, sg := range out {
		errs = append(errs, sg.close())
	}
	return errors.Join(errs...)
}

// fileIndex returns the index in q.files of the file holding byte offset
// b of q, false when none does.
func (s *Store) fileIndex(q *queue, b int64) (int, bool) {
	if len(q.files) == 0 || b < q.files[0] {
		return 0, false
	}
	start := b - b%s.fileSize
	if len(q.gaps) == 0 {
		idx := int((start - q.files[0]) / s.fileSize)
		return idx, idx < len(q.files)
	}
	return slices.BinarySearch(q.files, start)
}

// scan calls fn for n units of q from offset off on, which must lie inside
// q's files. q.mu is held and q pinned.
func (s *Store) scan(q *queue, off, n int64, mapped bool, fn func(off int64, u unit)) error {
	var buf []byte
	for n > 0 {
		if g, ok := q.gapAt(off); ok {
			k := min(n, g.to-off)
			for i := range k {
				fn(off+i, g.unit)
			}
			off += k
			n -= k
			continue
		}
		sg, err := s.segment(q, off, mapped)
		if err != nil {
			return err
		}
		pos := off*UnitSize - sg.start
		k := min(n, (s.fileSize-pos)/UnitSize)
		if sg.m != nil {
			for i := range k {
				fn(off+i, decodeUnit(sg.m[pos+i*UnitSize:]))
			}
		} else {
			for done := int64(0); done < k; {
				c := min(k-done, 4096)
				if int64(len(buf)) < c*UnitSize {
					buf = make([]byte, c*UnitSize)
				}
				if err := sg.read(buf[:c*UnitSize], pos+done*UnitSize); err != nil {
					return err
				}
				for i := range c {
					fn(off+done+i, decodeUnit(buf[i*UnitSize:]))
				}
				done += c
			}
		}
		off += k
		n -= k
	}
	return nil
}

// unitAt reads the unit at offset off of q.
func (s *Store) unitAt(q *queue, off int64, mapped bool) (unit, error) {
	var u unit
	err := s.scan(q, off, 1, mapped, func(_ int64, v unit) { u = v })
	return u, err
}

// createFile creates the file of q starting at byte offset start, full
// size and sparse (like RocketMQ's preallocation), and opens it. An
// existing file of that name is stale (a crash between deleting and
// creating) and is replaced.
func (s *Store) createFile(q *queue, start int64) (*segment, error) {
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	if err := s.fs.MkdirAll(q.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", q.dir, err)
	}
	path := s.filePath(q, start)
	f, err := s.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Truncate(s.fileSize); err != nil {
		f.Close()
		s.fs.Remove(path)
		return nil, fmt.Errorf("size %s to %d bytes: %w", path, s.fileSize, err)
	}
	s.markDirty(q.dir, filepath.Dir(q.dir), s.root, s.opts.Dir)
	return &segment{start: start, path: path, f: f, dirty: true}, nil
}

func (s *Store) markDirty(dirs ...string) {
	s.mu.Lock()
	for _, d := range dirs {
		s.dirtyDirs[d] = struct{}{}
	}
	s.mu.Unlock()
}

// removeFiles deletes q's files from index i on (closing them first) and
// shortens q.files accordingly.
func (s *Store) removeFiles(q *queue, i int) error {
	if i >= len(q.files) {
		return nil
	}
	first := q.files[i]
	if err := s.closeSegments(q, func(start int64) bool { return start >= first }); err != nil {
		s.log.Error().Err(err).Str("queue", q.String()).Msg("closing consume queue files before deleting them")
	}
	for len(q.files) > i {
		last := q.files[len(q.files)-1]
		if err := s.fs.Remove(s.filePath(q, last)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete %s: %w", s.filePath(q, last), err)
		}
		q.files = q.files[:len(q.files)-1]
	}
	s.markDirty(q.dir)
	return nil
}

// removeHead deletes q's first n files (CommitLog retention).
func (s *Store) removeHead(q *queue, n int) error {
	if n == 0 {
		return nil
	}
	limit := q.files[n-1]
	if err := s.closeSegments(q, func(start int64) bool { return start <= limit }); err != nil {
		s.log.Error().Err(err).Str("queue", q.String()).Msg("closing consume queue files before deleting them")
	}
	for n > 0 {
		p := s.filePath(q, q.files[0])
		if err := s.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete %s: %w", p, err)
		}
		q.files = q.files[1:]
		n--
	}
	s.markDirty(q.dir)
	return nil
}

// zero overwrites units [from, to) of q with zeros, inside q's files.
func (s *Store) zero(q *queue, from, to int64) error {
	var buf []byte
	for from < to {
		sg, err := s.segment(q, from, false)
		if err != nil {
			return err
		}
		pos := from*UnitSize - sg.start
		k := min(to-from, (s.fileSize-pos)/UnitSize)
		for done := int64(0); done < k; {
			c := min(k-done, 4096)
			if int64(len(buf)) < c*UnitSize {
				buf = make([]byte, c*UnitSize)
			}
			if err := sg.write(buf[:c*UnitSize], pos+done*UnitSize); err != nil {
				return err
			}
			done += c
		}
		from += k
	}
	return nil
}

// refreshLast sets lastPhy and lastEnd from the unit at max-1.
func (s *Store) refreshLast(q *queue) error {
	q.lastPhy, q.lastEnd = -1, 0
	if len(q.files) == 0 || q.max <= q.firstOffset() {
		return nil
	}
	u, err := s.unitAt(q, q.max-1, false)
	if err != nil {
		return err
	}
	q.lastPhy, q.lastEnd = u.phy, u.end()
	return nil
}
