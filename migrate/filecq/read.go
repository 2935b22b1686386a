package filecq

import (
	"fmt"

	"github.com/rocketkv/rocketkv/cq"
)

// Get implements cq.Store. Entries come from the file mappings (pread in a
// read-only store); StoreTimestamp is always 0, the layout keeps none.
// The units of files missing in the middle of a queue of a read-only
// store (Gaps) are left out: the entries returned may skip offsets there.
func (s *Store) Get(topic string, queueID int32, from int64, max int) ([]cq.Entry, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	q := s.acquire(queueKey{topic, queueID}, false)
	if q == nil {
		return nil, nil
	}
	defer s.release(q)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted || max <= 0 || from < q.min || from >= q.max {
		return nil, nil
	}
	n := min(int64(max), q.max-from)
	out := make([]cq.Entry, 0, n)
	err := s.scan(q, from, n, true, func(off int64, u unit) {
		if len(q.gaps) > 0 {
			if _, ok := q.gapAt(off); ok {
				return // a missing file's unit (Gaps) is no entry
			}
		}
		out = append(out, cq.Entry{QueueOffset: off, PhyOffset: u.phy, Size: u.size, TagsCode: u.tags})
	})
	if err != nil {
		return nil, fmt.Errorf("get %s from %d: %w", q, from, err)
	}
	return out, nil
}

// bounds returns a queue's [min, max), zeros for an unknown one.
func (s *Store) bounds(topic string, queueID int32) (int64, int64, error) {
	if err := s.enter(); err != nil {
		return 0, 0, err
	}
	defer s.exit()
	q := s.lookup(queueKey{topic, queueID})
	if q == nil {
		return 0, 0, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return 0, 0, nil
	}
	return q.min, q.max, nil
}

// MaxOffset implements cq.Store.
func (s *Store) MaxOffset(topic string, queueID int32) (int64, error) {
	_, hi, err := s.bounds(topic, queueID)
	return hi, err
}

// MinOffset implements cq.Store.
func (s *Store) MinOffset(topic string, queueID int32) (int64, error) {
	lo, _, err := s.bounds(topic, queueID)
	return lo, err
}

// OffsetByTime implements cq.Store as RocketMQ's getOffsetInQueueByTime
// (spec 3.8): it takes each file's start and stop time from the CommitLog
// (Options.StoreTime on the file's first and last unit inside [min, max)),
// picks for Lower the first file whose stop time is >= ts (else the last)
// and for Upper the last file whose start time is <= ts, then binary-searches
// that file's units. Units below the minimum (their records may be gone
// from the CommitLog) are never looked up. It returns ErrNoStoreTime if
// Options.StoreTime is nil.
func (s *Store) OffsetByTime(topic string, queueID int32, ts int64, b cq.Boundary) (int64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.exit()
	if b != cq.Lower && b != cq.Upper {
		return 0, fmt.Errorf("offset by time: unknown boundary %d", b)
	}
	q := s.acquire(queueKey{topic, queueID}, false)
	if q == nil {
		return 0, nil
	}
	defer s.release(q)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return 0, nil
	}
	if q.max <= q.min {
		return q.min, nil
	}
	if s.opts.StoreTime == nil {
		return 0, fmt.Errorf("offset by time in %s: %w", q, ErrNoStoreTime)
	}
	if len(q.gaps) > 0 {
		return 0, fmt.Errorf("offset by time in %s: files are missing in the middle of the queue: %w", q, ErrCorrupt)
	}
	off, err := s.searchTime(q, ts, b)
	if err != nil {
		return 0, fmt.Errorf("offset by time %d in %s: %w", ts, q, err)
	}
	return max(q.min, min(off, q.max)), nil
}

// timeAt returns the store time of the record of the unit at off. With
// cache set, the answer is remembered (file boundaries: a unit does not
// change until Truncate, which clears the cache).
func (s *Store) timeAt(q *queue, off int64, cache bool) (int64, error) {
	if t, ok := q.times[off]; ok {
		return t, nil
	}
	u, err := s.unitAt(q, off, true)
	if err != nil {
		return 0, err
	}
	t, err := s.opts.StoreTime(u.phy, u.size)
	if err != nil {
		return 0, fmt.Errorf("store time of unit %d (phy %d, size %d): %w", off, u.phy, u.size, err)
	}
	if cache {
		if q.times == nil || len(q.times) > 4*len(q.files)+16 {
			q.times = make(map[int64]int64)
		}
		q.times[off] = t
	}
	return t, nil
}

func (s *Store) searchTime(q *queue, ts int64, b cq.Boundary) (int64, error) {
	first := int((q.min*UnitSize - q.files[0]) / s.fileSize)
	last := int(((q.max-1)*UnitSize - q.files[0]) / s.fileSize)
	// The units of file i inside [min, max).
	span := func(i int) (int64, int64) {
		lo := q.files[i] / UnitSize
		return max(lo, q.min), min(lo+s.units, q.max)
	}
	if b == cq.Lower {
		pick := last
		for i := first; i < last; i++ {
			_, hi := span(i)
			stop, err := s.timeAt(q, hi-1, true)
			if err != nil {
				return 0, err
			}
			if stop >= ts {
				pick = i
				break
			}
		}
		// The first unit at or after ts, or the file's end.
		lo, hi := span(pick)
		for lo < hi {
			mid := lo + (hi-lo)/2
			t, err := s.timeAt(q, mid, false)
			if err != nil {
				return 0, err
			}
			if t >= ts {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		return lo, nil
	}
	pick := -1
	for i := last; i >= first; i-- {
		lo, _ := span(i)
		start, err := s.timeAt(q, lo, true)
		if err != nil {
			return 0, err
		}
		if start <= ts {
			pick = i
			break
		}
	}
	if pick < 0 {
		return 0, nil // RocketMQ's answer before the start; clamped to min
	}
	// The last unit at or before ts: one before the first after it.
	lo, hi := span(pick)
	for lo < hi {
		mid := lo + (hi-lo)/2
		t, err := s.timeAt(q, mid, false)
		if err != nil {
			return 0, err
		}
		if t > ts {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo - 1, nil
}
