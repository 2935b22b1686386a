package filecq

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// DeleteQueue implements cq.Store: it deletes the queue's files and its
// directory (and the topic directory once empty).
func (s *Store) DeleteQueue(topic string, queueID int32) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if s.readOnly {
		return fmt.Errorf("delete queue %s/%d: %w", topic, queueID, ErrReadOnly)
	}
	return s.deleteQueue(queueKey{topic, queueID})
}

func (s *Store) deleteQueue(k queueKey) error {
	q := s.acquire(k, false)
	if q == nil {
		return nil
	}
	defer s.release(q)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return nil
	}
	rerr := s.removeFiles(q, 0)
	defer func() {
		// Even half deleted (the first files stay on an I/O error), the
		// queue is gone from the store's view.
		q.deleted = true
		q.files, q.times = nil, nil
		q.min, q.max, q.lastPhy, q.lastEnd = 0, 0, -1, 0
		s.forget(q)
	}()
	if rerr != nil {
		return fmt.Errorf("delete queue %s: %w", q, rerr)
	}
	s.dirMu.Lock()
	err := s.fs.Remove(q.dir)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		err = nil
		// The topic directory goes once its last queue has gone.
		if s.fs.Remove(filepath.Dir(q.dir)) == nil {
			s.markDirty(s.root)
		}
	}
	s.dirMu.Unlock()
	if err != nil {
		// Something that is not ours is left in the directory.
		s.log.Warn().Err(err).Str("dir", q.dir).Msg("queue deleted, its directory kept")
	}
	s.markDirty(filepath.Dir(q.dir))
	return nil
}

// DeleteTopic implements cq.Store.
func (s *Store) DeleteTopic(topic string) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if s.readOnly {
		return fmt.Errorf("delete topic %s: %w", topic, ErrReadOnly)
	}
	s.mu.Lock()
	var keys []queueKey
	for k := range s.queues {
		if k.topic == topic {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, k := range keys {
		errs = append(errs, s.deleteQueue(k))
	}
	return errors.Join(errs...)
}

// forEach runs fn on every live queue, locked and pinned, and joins the
// errors.
func (s *Store) forEach(fn func(q *queue) error) error {
	var errs []error
	for _, q := range s.pinAll() {
		q.mu.Lock()
		if !q.deleted {
			if err := fn(q); err != nil {
				errs = append(errs, fmt.Errorf("queue %s: %w", q, err))
			}
		}
		q.mu.Unlock()
		s.release(q)
	}
	return errors.Join(errs...)
}

// CorrectMin implements cq.Store as RocketMQ's CleanConsumeQueueService and
// correctMinOffset (spec 3.7): per queue, every file but the last whose
// last unit's record starts below minPhyOffset is deleted (stopping at the
// first file kept), then the minimum moves to the first unit at or after it
// whose PhyOffset is >= minPhyOffset (binary search), or to the end when the
// newest unit is below minPhyOffset. A read-only store deletes nothing and
// only moves the minimum it reports.
func (s *Store) CorrectMin(minPhyOffset int64) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if err := s.forEach(func(q *queue) error { return s.correctMin(q, minPhyOffset) }); err != nil {
		return fmt.Errorf("correct min offsets to %d: %w", minPhyOffset, err)
	}
	return nil
}

func (s *Store) correctMin(q *queue, minPhy int64) error {
	if len(q.files) == 0 || minPhy <= q.correctedTo {
		return nil
	}
	if !s.readOnly {
		n := 0
		for n < len(q.files)-1 {
			lastUnit := (q.files[n]+s.fileSize)/UnitSize - 1
			u, err := s.unitAt(q, lastUnit, false)
			if err != nil {
				return err
			}
			if u.phy >= minPhy {
				break
			}
			n++
		}
		if err := s.removeHead(q, n); err != nil {
			return err
		}
	}
	if q.max > q.min {
		if q.lastPhy < minPhy {
			q.min = q.max
		} else {
			// First unit with phy >= minPhy; the one at max-1 has it, and
			// usually the current minimum already does.
			lo, hi := max(q.min, q.firstOffset()), q.max-1
			if u, err := s.unitAt(q, lo, false); err != nil {
				return err
			} else if u.phy >= minPhy {
				hi = lo
			}
			for lo < hi {
				mid := lo + (hi-lo)/2
				u, err := s.unitAt(q, mid, false)
				if err != nil {
					return err
				}
				if u.phy >= minPhy {
					hi = mid
				} else {
					lo = mid + 1
				}
			}
			q.min = lo
		}
	}
	q.correctedTo = minPhy
	return nil
}

// Truncate implements cq.Store as RocketMQ's truncateDirtyLogicFiles (spec
// 3.6): per queue whose newest record starts at or after phyOffset, the end
// moves back to the first unit in [min, max) whose PhyOffset is >= phyOffset
// (binary search; never below the minimum), files past it are deleted, and
// the cut units of the last file kept are zeroed, so that a reopen does not
// find them again. The first file is kept even when it ends up empty: it
// keeps the queue's position. A read-only store deletes and writes nothing
// and only moves the end it reports.
func (s *Store) Truncate(phyOffset int64) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if err := s.forEach(func(q *queue) error { return s.truncate(q, phyOffset) }); err != nil {
		return fmt.Errorf("truncate at %d: %w", phyOffset, err)
	}
	return nil
}

func (s *Store) truncate(q *queue, p int64) error {
	if q.max <= q.min || q.lastPhy < p {
		return nil
	}
	lo, hi := q.min, q.max-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		u, err := s.unitAt(q, mid, false)
		if err != nil {
			return err
		}
		if u.phy >= p {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	cut, oldMax := lo, q.max
	q.times = nil
	if !s.readOnly {
		// Keep the files holding units below cut, and always the first.
		keep := 1
		for keep < len(q.files) && q.files[keep] < cut*UnitSize {
			keep++
		}
		if err := s.removeFiles(q, keep); err != nil {
			return err
		}
		lastFileEnd := q.files[len(q.files)-1]/UnitSize + s.units
		if err := s.zero(q, cut, min(oldMax, lastFileEnd)); err != nil {
			return err
		}
	}
	q.max = cut
	if p < q.correctedTo {
		q.correctedTo = 0 // later units may start below the corrected minimum
	}
	return s.refreshLast(q)
}
