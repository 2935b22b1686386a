package commitlog

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// prefaultAhead is how far past the write position the prefaulter keeps
// the active segment's pages faulted in for writing.
const prefaultAhead = 16 << 20

// populate faults the pages of [from, to) (relative positions) in for
// writing with madvise(MADV_POPULATE_WRITE), so that appends copying into
// them do not take page faults (for a shared file mapping each first write
// to a page runs the file system's page_mkwrite). The pages hold zeros, so
// their becoming dirty changes nothing on disk.
func (s *segment) populate(from, to int64) error {
	from &^= osPageSize - 1
	if to > s.size {
		to = s.size
	}
	if to <= from {
		return nil
	}
	if err := unix.Madvise(s.data[from:to], unix.MADV_POPULATE_WRITE); err != nil {
		return fmt.Errorf("prefault segment %s: %w", s.path, err)
	}
	return nil
}

// kickPrefaulter wakes the prefaulter when the write position came within
// three quarters of prefaultAhead of what is already faulted in, so that
// it works in chunks of at least a quarter. It does not block.
func (l *Log) kickPrefaulter(end int64) {
	if end+prefaultAhead*3/4 < l.prefaulted.Load() {
		return
	}
	select {
	case l.prefaultKick <- struct{}{}:
	default:
	}
}

// prefaulter is the goroutine that keeps prefaultAhead bytes past the write
// position of the active segment faulted in, off the append path. It stops
// for good if the kernel lacks MADV_POPULATE_WRITE (Linux < 5.14).
func (l *Log) prefaulter() {
	defer l.wg.Done()
	for {
		select {
		case <-l.stop:
			return
		case <-l.prefaultKick:
		}
		pos := l.writePos.Load()
		s := l.acquireSegment(pos)
		if s == nil {
			continue
		}
		from := max(l.prefaulted.Load(), pos)
		to := min(pos+prefaultAhead, s.end())
		err := s.populate(from-s.start, to-s.start)
		s.release()
		if err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
				l.log.Info().Err(err).Msg("kernel cannot prefault mappings; appends will fault pages in themselves")
				return
			}
			l.log.Warn().Err(err).Msg("prefault failed")
			continue
		}
		l.prefaulted.Store(to)
	}
}
