package filecq

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/vfs"
)

// load finds every queue under the root and recovers it.
func (s *Store) load() error {
	topics, err := s.fs.ReadDir(s.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", s.root, err)
	}
	for _, te := range topics {
		topicDir := filepath.Join(s.root, te.Name())
		if !s.isDir(topicDir, te) {
			continue // RocksDB ConsumeQueue files share the directory
		}
		ids, err := s.fs.ReadDir(topicDir)
		if err != nil {
			return fmt.Errorf("list %s: %w", topicDir, err)
		}
		for _, qe := range ids {
			dir := filepath.Join(topicDir, qe.Name())
			if !s.isDir(dir, qe) {
				continue
			}
			id, ok := parseQueueID(qe.Name())
			if !ok {
				s.log.Debug().Str("dir", dir).Msg("skipping a directory that is not a queue id")
				continue
			}
			q := newQueue(queueKey{te.Name(), id}, dir)
			if err := s.recoverQueue(q); err != nil {
				return fmt.Errorf("recover queue %s: %w", q, err)
			}
			s.queues[q.key] = q
		}
	}
	return nil
}

func (s *Store) isDir(path string, e fs.DirEntry) bool {
	if e.Type()&fs.ModeSymlink != 0 {
		fi, err := s.fs.Stat(path)
		return err == nil && fi.IsDir()
	}
	return e.IsDir()
}

// parseQueueID accepts the canonical decimal form of a non-negative int32,
// the only one Put would create.
func parseQueueID(name string) (int32, bool) {
	v, err := strconv.ParseInt(name, 10, 32)
	if err != nil || v < 0 || strconv.FormatInt(v, 10) != name {
		return 0, false
	}
	return int32(v), true
}

// recoverQueue lists q's files, checks them, and finds q's bounds.
func (s *Store) recoverQueue(q *queue) error {
	ents, err := s.fs.ReadDir(q.dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", q.dir, err)
	}
	var starts []int64
	var empty []int64 // files of 0 bytes: a creation a crash cut short
	for _, e := range ents {
		path := filepath.Join(q.dir, e.Name())
		start, ok := parseFileName(e.Name())
		if !ok && !s.readOnly && strings.HasSuffix(e.Name(), refillSuffix) {
			if _, ok := parseFileName(strings.TrimSuffix(e.Name(), refillSuffix)); ok {
				// A refill a crash cut short (refillGaps): written again.
				if err := s.fs.Remove(path); err != nil {
					return fmt.Errorf("delete %s: %w", path, err)
				}
				continue
			}
		}
		if !ok || s.isDir(path, e) {
			s.log.Warn().Str("path", path).Msg("skipping an entry of a queue directory that is not a consume queue file")
			continue
		}
		fi, err := s.fs.Stat(path)
		if err != nil {
			return fmt.Errorf("stat %s: %w", path, err)
		}
		if start%s.fileSize != 0 || start/UnitSize > maxQueueOffset-s.units {
			return fmt.Errorf("%s: name is not a multiple of the file size %d: %w", path, s.fileSize, ErrCorrupt)
		}
		if fi.Size() == 0 {
			empty = append(empty, start)
			continue
		}
		if fi.Size() != s.fileSize {
			return fmt.Errorf("%s has %d bytes, want %d (UnitsPerFile %d): %w", path, fi.Size(), s.fileSize, s.units, ErrCorrupt)
		}
		starts = append(starts, start)
	}
	slices.Sort(starts)
	if err := s.dropCutCreation(q, starts, empty); err != nil {
		return err
	}
	if !s.readOnly && s.opts.RefillGap != nil {
		var err error
		if starts, err = s.refillGaps(q, starts); err != nil {
			return err
		}
	}
	for i := 1; i < len(starts) && !s.readOnly; i++ {
		if starts[i] != starts[i-1]+s.fileSize {
			return fmt.Errorf("%s: file %s does not follow %s (the files of queue offsets %d to %d are missing, and the CommitLog did not give them again; a read-only open reads the queue around them): %w",
				q.dir, FileName(starts[i]), FileName(starts[i-1]), (starts[i-1]+s.fileSize)/UnitSize, starts[i]/UnitSize-1, ErrCorrupt)
		}
	}
	if len(starts) == 0 {
		return nil
	}

	files := &fileCache{s: s, dir: q.dir}
	defer files.close()

	// RocketMQ's recover: from the third-last file, read units while they
	// are valid; the first invalid one (normally the zero tail) ends the
	// queue. Earlier files are taken as full.
	from := max(0, len(starts)-3)
	end := starts[from]
	for i := from; i < len(starts); i++ {
		n, err := s.validPrefix(files, starts[i])
		if err != nil {
			return err
		}
		end = starts[i] + n
		if n < s.fileSize {
			break
		}
	}
	keep := 0
	for keep < len(starts) && starts[keep] <= end {
		keep++
	}
	for _, start := range starts[keep:] {
		path := filepath.Join(q.dir, FileName(start))
		if s.readOnly {
			s.log.Warn().Str("path", path).Msg("ignoring a consume queue file past the queue's recovered end")
			continue
		}
		s.log.Warn().Str("path", path).Msg("deleting a consume queue file past the queue's recovered end")
		if err := s.fs.Remove(path); err != nil {
			return fmt.Errorf("delete dirty file %s: %w", path, err)
		}
		s.dirtyDirs[q.dir] = struct{}{}
	}
	q.files = starts[:keep]
	q.max = end / UnitSize
	if err := s.findGaps(files, q); err != nil {
		return err
	}

	// The minimum: the first unit that is not a blank pre-fill unit.
	q.min = q.max
	if err := s.scanFiles(files, q, q.firstOffset(), q.max, func(off int64, u unit) bool {
		if _, gap := q.gapAt(off); gap || u.blank() {
			return true
		}
		q.min = off
		return false
	}); err != nil {
		return err
	}
	if q.max > q.firstOffset() {
		if err := s.scanFiles(files, q, q.max-1, q.max, func(_ int64, u unit) bool {
			q.lastPhy, q.lastEnd = u.phy, u.end()
			return false
		}); err != nil {
			return err
		}
	}
	return nil
}

// findGaps records the runs of files missing between q's files (only a
// read-only store keeps a queue with such runs: recoverQueue refuses them
// otherwise) and warns about each. RocketMQ's MappedFileQueue.checkSelf
// only logs such a queue too, and reads around the missing files. It
// refuses (ErrCorrupt) what is no such run, as refillGaps does not
// write one: a file before the run that is not full (the queue ended in
// it) or a file after it whose records lie below those before it (left
// from an older queue).
func (s *Store) findGaps(files *fileCache, q *queue) error {
	for i := 1; i < len(q.files); i++ {
		prev, next := q.files[i-1], q.files[i]
		if next == prev+s.fileSize {
			continue
		}
		g := fileGap{from: (prev + s.fileSize) / UnitSize, to: next / UnitSize, unit: unit{phy: math.MaxInt64}}
		last, after, err := s.aroundRun(files, prev, next)
		if err != nil {
			return err
		}
		if !last.valid() {
			// The queue ended in that file (a crash, or files left from an
			// older queue after it): no run of files missing in the middle.
			return fmt.Errorf("%s: file %s is not full and file %s follows it after missing files: %w",
				q.dir, FileName(prev), FileName(next), ErrCorrupt)
		}
		if !last.blank() {
			g.phyFrom = last.end()
		}
		if u := after; u.valid() && !u.blank() {
			if g.phyFrom > 0 && u.phy < g.phyFrom {
				// A queue's records grow with its offsets: the file after
				// the run is left from an older queue.
				return fmt.Errorf("%s: file %s after missing files holds records (from %d) below those of file %s before them (to %d): %w",
					q.dir, FileName(next), u.phy, FileName(prev), g.phyFrom, ErrCorrupt)
			}
			if u.phy > 0 && g.to < q.max {
				g.unit.phy = u.phy - 1 // the missing records end before it
			}
		}
		q.gaps = append(q.gaps, g)
		s.log.Warn().Str("queue", q.String()).Int64("from", g.from).Int64("to", g.to).
			Str("missing", FileName(prev+s.fileSize)+".."+FileName(next-s.fileSize)).
			Msg("consume queue files are missing in the middle of the queue; reading around them")
	}
	return nil
}

// aroundRun reads the units around a run of files missing between the
// files starting at byte offsets prev and next: the last unit of prev and
// the first of next.
func (s *Store) aroundRun(files *fileCache, prev, next int64) (last, first unit, err error) {
	var b [UnitSize]byte
	f, path, err := files.get(prev)
	if err != nil {
		return unit{}, unit{}, err
	}
	if err := readFull(f, path, b[:], s.fileSize-UnitSize); err != nil {
		return unit{}, unit{}, err
	}
	last = decodeUnit(b[:])
	if f, path, err = files.get(next); err != nil {
		return unit{}, unit{}, err
	}
	if err := readFull(f, path, b[:], 0); err != nil {
		return unit{}, unit{}, err
	}
	return last, decodeUnit(b[:]), nil
}

// refillSuffix names the file a refill writes before renaming it into
// place.
const refillSuffix = ".refill"

// refillGaps writes again, from the entries Options.RefillGap gives, the
// files missing between the files of q (starts, sorted), and returns the
// starts with theirs. A run whose entries it does not get all of (those
// of a prefix whose records retention deleted excepted: their units are
// blank, below the minimum CorrectMin finds) is left missing, for the
// check of recoverQueue to refuse; so is a run after a file whose last
// unit is not valid (the queue ended there: what follows is stale, and
// the blank units the refill would write past the end would make the
// zero tail entries), before a file whose first record lies below
// the end of the last one before the run, or before a file that begins
// with blank units (a queue's first file). A run before a file with
// nothing written yet is refilled up to that file (Gap.PhyTo -1). Each file is written whole under
// another name, synced and renamed into place, so a crash leaves it
// missing or complete.
func (s *Store) refillGaps(q *queue, starts []int64) ([]int64, error) {
	files := &fileCache{s: s, dir: q.dir}
	defer files.close()
	var added []int64
	for i := 1; i < len(starts); i++ {
		prev, next := starts[i-1], starts[i]
		if next == prev+s.fileSize {
			continue
		}
		g := Gap{Topic: q.key.topic, QueueID: q.key.id, From: (prev + s.fileSize) / UnitSize, To: next / UnitSize, PhyTo: -1}
		before, after, err := s.aroundRun(files, prev, next)
		if err != nil {
			return nil, err
		}
		if !before.valid() {
			// The file before the run is not full: the queue ended in
			// it, and the files after the run are left from before, not
			// the run's neighbours. Not written: the queue is refused.
			s.log.Error().Str("queue", q.String()).Int64("from", g.From).Int64("to", g.To).
				Msg("the consume queue file before the missing ones is not full; not rebuilding them")
			continue
		}
		if !before.blank() {
			g.PhyFrom = before.end()
		}
		if after.valid() && !after.blank() {
			g.PhyTo = after.phy
		}
		if g.PhyTo < 0 && after != (unit{}) {
			// A blank unit after them: the file was a queue's first
			// (RocketMQ fills the units below a first entry so), not the
			// run's neighbour.
			continue
		}
		// A file after them with nothing written yet: RocketMQ creates a
		// queue's next file once the one before is full, so the run's
		// offsets were all written and their records reach to the
		// CommitLog's end (PhyTo -1).
		if g.PhyTo >= 0 && g.PhyTo < g.PhyFrom {
			// A queue's records grow with its offsets: the files after
			// the run hold older records than the one before, left from
			// another queue. Not written: the queue is refused.
			s.log.Error().Str("queue", q.String()).Int64("from", g.From).Int64("to", g.To).Int64("fromPhy", g.PhyFrom).Int64("toPhy", g.PhyTo).
				Msg("the consume queue file after the missing ones holds records older than the one before them; not rebuilding them")
			continue
		}
		if limit := cmp.Or(s.opts.MaxRefillEntries, DefaultMaxRefillEntries); g.To-g.From > limit {
			s.log.Error().Str("queue", q.String()).Int64("from", g.From).Int64("to", g.To).Int64("limit", limit).
				Msg("too many consume queue entries are missing in the middle of the queue to write them again")
			continue
		}
		es, err := s.opts.RefillGap(g)
		if err != nil {
			return nil, fmt.Errorf("rebuild the missing files of %s, queue offsets %d to %d: %w", q.dir, g.From, g.To-1, err)
		}
		if !gapEntries(g, es) {
			s.log.Error().Str("queue", q.String()).Int64("from", g.From).Int64("to", g.To).Int("entries", len(es)).
				Msg("the CommitLog does not hold every entry of the consume queue files missing in the middle of the queue; not rebuilding them")
			continue
		}
		first := g.To - int64(len(es)) // the offsets before it are blank
		buf := make([]byte, s.fileSize)
		for start := prev + s.fileSize; start < next; start += s.fileSize {
			for i := range s.units {
				u := blankUnit
				if off := start/UnitSize + i; off >= first {
					e := es[off-first]
					u = unit{phy: e.PhyOffset, size: e.Size, tags: e.TagsCode}
				}
				encodeUnit(buf[i*UnitSize:], u)
			}
			if err := s.writeWhole(q, start, buf); err != nil {
				return nil, err
			}
			added = append(added, start)
		}
		s.log.Warn().Str("queue", q.String()).Int64("from", g.From).Int64("to", g.To).Int("entries", len(es)).
			Msg("consume queue files were missing in the middle of the queue; wrote them again from the CommitLog")
	}
	if len(added) == 0 {
		return starts, nil
	}
	return slices.Sorted(slices.Values(append(starts, added...))), nil
}

// gapEntries reports whether es can fill the run g: entries of
// consecutive offsets ending at g.To-1 (the offsets before the first are
// written blank: records retention deleted), records inside
// [g.PhyFrom, g.PhyTo) (past g.PhyFrom when PhyTo is -1) and in order. Whether offsets may be missing
// before the first is RefillGap's to judge: it knows the CommitLog's
// minimum.
func gapEntries(g Gap, es []cq.Entry) bool {
	if int64(len(es)) > g.To-g.From {
		return false
	}
	first := g.To - int64(len(es))
	for i, e := range es {
		if e.QueueOffset != first+int64(i) || e.Size <= 0 || e.PhyOffset < g.PhyFrom || (g.PhyTo >= 0 && e.PhyOffset >= g.PhyTo) ||
			(i > 0 && e.PhyOffset <= es[i-1].PhyOffset) {
			return false
		}
	}
	return true
}

// writeWhole writes the file of q starting at byte offset start with
// data (a whole file) under a temporary name, syncs it, renames it into
// place and syncs the directory.
func (s *Store) writeWhole(q *queue, start int64, data []byte) error {
	path := s.filePath(q, start)
	tmp := path + refillSuffix
	f, err := s.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, path)
	}
	if err != nil {
		_ = s.fs.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := s.syncPath(q.dir); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// dropCutCreation deals with the empty files of a queue. A file is
// created empty and then sized (createFile), so a crash in between leaves
// one of 0 bytes after the queue's other files; it never held a unit and
// is removed (ignored by a read-only store). An empty file anywhere else
// is damage recovery cannot explain.
func (s *Store) dropCutCreation(q *queue, starts, empty []int64) error {
	for _, start := range empty {
		path := filepath.Join(q.dir, FileName(start))
		if len(empty) > 1 || (len(starts) > 0 && start < starts[len(starts)-1]) {
			return fmt.Errorf("%s has 0 bytes, want %d (UnitsPerFile %d): %w", path, s.fileSize, s.units, ErrCorrupt)
		}
		if s.readOnly {
			s.log.Warn().Str("path", path).Msg("ignoring an empty consume queue file (its creation was cut short)")
			continue
		}
		s.log.Warn().Str("path", path).Msg("deleting an empty consume queue file (its creation was cut short)")
		if err := s.fs.Remove(path); err != nil {
			return fmt.Errorf("delete empty file %s: %w", path, err)
		}
		s.dirtyDirs[q.dir] = struct{}{}
	}
	return nil
}

// fileCache keeps the files recovery opened, so that each is opened once.
type fileCache struct {
	s     *Store
	dir   string
	files map[int64]vfs.File
}

func (c *fileCache) get(start int64) (vfs.File, string, error) {
	path := filepath.Join(c.dir, FileName(start))
	if f, ok := c.files[start]; ok {
		return f, path, nil
	}
	f, err := c.s.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, path, fmt.Errorf("open %s: %w", path, err)
	}
	if c.files == nil {
		c.files = make(map[int64]vfs.File)
	}
	c.files[start] = f
	return f, path, nil
}

func (c *fileCache) close() {
	for _, f := range c.files {
		f.Close()
	}
}

// readFull reads len(p) bytes at off or fails.
func readFull(f vfs.File, path string, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read %s at %d: %w", path, off, err)
}

// validPrefix returns the length of the run of valid units at the start of
// the file starting at byte offset start.
func (s *Store) validPrefix(files *fileCache, start int64) (int64, error) {
	f, path, err := files.get(start)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, min(s.fileSize, 3276*UnitSize))
	for pos := int64(0); pos < s.fileSize; {
		chunk := buf[:min(int64(len(buf)), s.fileSize-pos)]
		if err := readFull(f, path, chunk, pos); err != nil {
			return 0, err
		}
		for i := 0; i < len(chunk); i += UnitSize {
			if !decodeUnit(chunk[i:]).valid() {
				return pos + int64(i), nil
			}
		}
		pos += int64(len(chunk))
	}
	return s.fileSize, nil
}

// scanFiles reads units [from, to) of q straight from its files (no open
// segments: recovery runs before the store is shared) until fn returns
// false.
func (s *Store) scanFiles(files *fileCache, q *queue, from, to int64, fn func(off int64, u unit) bool) error {
	buf := make([]byte, min(s.fileSize, 3276*UnitSize))
	for from < to {
		if g, ok := q.gapAt(from); ok {
			for ; from < min(to, g.to); from++ {
				if !fn(from, g.unit) {
					return nil
				}
			}
			continue
		}
		idx, ok := s.fileIndex(q, from*UnitSize)
		if !ok {
			return fmt.Errorf("queue %s: offset %d outside its files", q, from)
		}
		start := q.files[idx]
		f, path, err := files.get(start)
		if err != nil {
			return err
		}
		fileEnd := start/UnitSize + s.units
		for from < to && from < fileEnd {
			n := min(to, fileEnd, from+int64(len(buf))/UnitSize) - from
			chunk := buf[:n*UnitSize]
			if err := readFull(f, path, chunk, from*UnitSize-start); err != nil {
				return err
			}
			for i := range n {
				if !fn(from+i, decodeUnit(chunk[i*UnitSize:])) {
					return nil
				}
			}
			from += n
		}
	}
	return nil
}

// HasQueueDirs reports whether consumequeueDir (a store's
// <root>/consumequeue) holds topic directories, the file ConsumeQueue's
// layout; RocketMQ's RocksDB ConsumeQueue, which may share the
// directory, keeps only plain files there.
func HasQueueDirs(consumequeueDir string) bool {
	entries, err := os.ReadDir(consumequeueDir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.IsDir() {
			return true
		}
	}
	return false
}

// DetectUnitsPerFile reads the units per file of the consumequeue
// directory under dir (Options.Dir) from the size of its first queue file:
// RocketMQ and this package create the files at full size. ok is false
// when there is no file of a plausible size. A nil fs is the operating
// system's.
func DetectUnitsPerFile(fsys vfs.FS, dir string) (units int, ok bool) {
	if fsys == nil {
		fsys = vfs.OS{}
	}
	root := filepath.Join(dir, "consumequeue")
	topics, err := fsys.ReadDir(root)
	if err != nil {
		return 0, false
	}
	for _, t := range topics {
		queues, err := fsys.ReadDir(filepath.Join(root, t.Name()))
		if err != nil {
			continue
		}
		for _, q := range queues {
			qdir := filepath.Join(root, t.Name(), q.Name())
			files, err := fsys.ReadDir(qdir)
			if err != nil {
				continue
			}
			for _, f := range files {
				if _, ok := parseFileName(f.Name()); !ok {
					continue
				}
				fi, err := fsys.Stat(filepath.Join(qdir, f.Name()))
				if err != nil || !fi.Mode().IsRegular() {
					continue
				}
				if size := fi.Size(); size > 0 && size%UnitSize == 0 && size/UnitSize <= maxUnitsPerFile {
					return int(size / UnitSize), true
				}
			}
		}
	}
	return 0, false
}
