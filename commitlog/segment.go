package commitlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/edsrzf/mmap-go"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/rocketkv/rocketkv/internal/vfs"
)

// pageSize is the unit of dirty-page accounting (RocketMQ's OS_PAGE_SIZE).
const pageSize = 4096

// osPageSize is the kernel's page size, to which the addresses given to
// msync and madvise are aligned (64 KiB on some arm64 kernels, where an
// address aligned to 4 KiB only is EINVAL).
var osPageSize = int64(os.Getpagesize())

// segmentNameLen is the length of a segment file name: the start offset,
// zero-padded to 20 decimal digits.
const segmentNameLen = 20

// SegmentName returns the file name of the segment starting at offset.
func SegmentName(offset int64) string { return fmt.Sprintf("%020d", offset) }

// parseSegmentName returns the start offset a segment file name encodes.
func parseSegmentName(name string) (int64, bool) {
	if len(name) != segmentNameLen {
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

// segment is one mapped CommitLog file.
//
// A segment is reference counted: the Log's segment list holds one
// reference, and every View, Reader position and flush holds one while it
// uses data. The mapping is unmapped and the file closed when the count
// drops to zero; a segment removed by retention also has its file deleted
// then, so live views keep it readable.
type segment struct {
	start int64
	size  int64
	path  string
	f     vfs.File
	data  mmap.MMap
	fs    vfs.FS
	log   *zerolog.Logger

	refs    atomic.Int32
	deleted atomic.Bool // remove the file on the last release
}

// end returns the offset just past the segment.
func (s *segment) end() int64 { return s.start + s.size }

// acquire adds a reference. The caller must already hold one, directly or
// through the Log's list (under segsMu).
func (s *segment) acquire() { s.refs.Add(1) }

// release drops a reference, destroying the segment on the last one.
func (s *segment) release() {
	if n := s.refs.Add(-1); n == 0 {
		s.destroy()
	} else if n < 0 {
		panic("commitlog: segment released more often than acquired")
	}
}

// destroy unmaps and closes the segment and, if it was deleted, removes its
// file.
func (s *segment) destroy() {
	if err := s.data.Unmap(); err != nil {
		s.log.Error().Err(err).Str("segment", s.path).Msg("unmap segment")
	}
	if err := s.f.Close(); err != nil {
		s.log.Error().Err(err).Str("segment", s.path).Msg("close segment")
	}
	if s.deleted.Load() {
		if err := s.fs.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Error().Err(err).Str("segment", s.path).Msg("remove deleted segment")
		} else {
			s.log.Info().Str("segment", s.path).Msg("segment file removed")
		}
	}
}

// flushRange writes [from, to) (relative positions) to stable storage
// with msync(MS_SYNC), which on Linux is a ranged fdatasync.
func (s *segment) flushRange(from, to int64) error {
	if to <= from {
		return nil
	}
	from &^= osPageSize - 1
	if err := s.fs.SyncMapped(s.data[from:to]); err != nil {
		return fmt.Errorf("sync [%d, %d) of segment %s: %w", s.start+from, s.start+to, s.path, err)
	}
	return nil
}

// adviseSmallPages asks the kernel to cache [from, size) of the mapping in
// single pages (MADV_RANDOM) instead of the large folios it builds for a
// sequential mapping. A group commit flushes a few KiB at a time and the
// next append dirties the page the flush just cleaned; with a 2 MiB folio
// that re-dirties, and the next msync writes, the whole folio, so a sync
// flush log wrote 10-40 times its record bytes (see docs/BENCHMARKS.md,
// "Small pages for the sync-flush segment"). The advice only matters while
// pages enter the page cache, which for the active segment is while it is
// written.
func (s *segment) adviseSmallPages(from int64) error {
	from = max(from, 0) &^ (osPageSize - 1)
	if from >= s.size {
		return nil
	}
	if err := unix.Madvise(s.data[from:], unix.MADV_RANDOM); err != nil {
		return fmt.Errorf("advise small pages for segment %s: %w", s.path, err)
	}
	return nil
}

// adviseNormal restores the kernel's default read-ahead for the whole
// mapping, so that reading a full segment back from disk later (a consumer
// catching up) is not done a page at a time.
func (s *segment) adviseNormal() error {
	if err := unix.Madvise(s.data, unix.MADV_NORMAL); err != nil {
		return fmt.Errorf("advise normal paging for segment %s: %w", s.path, err)
	}
	return nil
}

// openSegment opens and maps an existing segment file of the given size.
func openSegment(fs vfs.FS, log *zerolog.Logger, path string, start, size int64) (*segment, error) {
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", path, err)
	}
	data, err := fs.Map(f, int(size))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open segment %s: %w: %w", path, ErrMapFailed, err)
	}
	s := &segment{start: start, size: size, path: path, f: f, data: data, fs: fs, log: log}
	s.refs.Store(1)
	return s, nil
}

// createSegment creates, allocates (every block, so that writes through the
// mapping cannot hit ENOSPC and raise SIGBUS) and maps a new segment file.
// On failure nothing is left behind; a full disk gives ErrDiskFull.
func createSegment(fs vfs.FS, log *zerolog.Logger, dir string, start, size int64) (*segment, error) {
	path := filepath.Join(dir, SegmentName(start))
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return nil, fmt.Errorf("create segment %s: %w: %w", path, ErrDiskFull, err)
		}
		return nil, fmt.Errorf("create segment %s: %w", path, err)
	}
	fail := func(wrapped error) (*segment, error) {
		f.Close()
		if rerr := fs.Remove(path); rerr != nil {
			log.Error().Err(rerr).Str("segment", path).Msg("remove half-created segment")
		}
		return nil, wrapped
	}
	if err := fs.Allocate(f, 0, size); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return fail(fmt.Errorf("allocate segment %s: %w: %w", path, ErrDiskFull, err))
		}
		return fail(fmt.Errorf("allocate segment %s: %w", path, err))
	}
	data, err := fs.Map(f, int(size))
	if err != nil {
		return fail(fmt.Errorf("map segment %s: %w: %w", path, ErrMapFailed, err))
	}
	if err := syncDir(fs, dir); err != nil {
		data.Unmap()
		return fail(err)
	}
	s := &segment{start: start, size: size, path: path, f: f, data: data, fs: fs, log: log}
	s.refs.Store(1)
	return s, nil
}

// syncDir fsyncs a directory so that a created or removed entry survives a
// power loss.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	err = d.Sync()
	cerr := d.Close()
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	if cerr != nil {
		return fmt.Errorf("sync dir %s: %w", dir, cerr)
	}
	return nil
}
