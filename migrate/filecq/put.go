package filecq

import (
	"fmt"
	"strings"

	"github.com/rocketkv/rocketkv/cq"
)

// Put implements cq.Store, writing units the way RocketMQ's
// putMessagePositionInfo does:
//
//   - an entry whose record ends at or before the end of the queue's newest
//     record (maxPhysicOffset) is already there and skipped;
//   - the first entry of a queue without files creates the file holding its
//     offset and, if the offset is not the file's first, fills the units
//     below it with blank units (phy 0, size 0x7FFFFFFF, tags 0); the
//     queue's minimum becomes that offset;
//   - an entry below the queue's end is a repeat and skipped;
//   - an entry above the end is logged as "[BUG] logic queue order" and
//     appended at the end anyway;
//   - a unit that reaches the end of a file goes to a new file named by the
//     byte offset of its first unit.
//
// Units go to the files with pwrite (RocketMQ's default FileChannel path);
// Flush makes them durable. Nothing of the call is written if an entry or a
// name is invalid (ErrInvalidEntry, ErrInvalidName); on an I/O error the
// entries before the failed write stay written.
func (s *Store) Put(entries []cq.Dispatch) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if s.readOnly {
		return fmt.Errorf("put: %w", ErrReadOnly)
	}
	for _, d := range entries {
		if err := validateDispatch(d, maxQueueOffset-s.units); err != nil {
			return fmt.Errorf("put: %w", err)
		}
	}
	for i := 0; i < len(entries); {
		j := i + 1
		for j < len(entries) && entries[j].Topic == entries[i].Topic && entries[j].QueueID == entries[i].QueueID {
			j++
		}
		k := queueKey{entries[i].Topic, entries[i].QueueID}
		if err := s.putRun(k, entries[i:j]); err != nil {
			return fmt.Errorf("put to %s/%d: %w", k.topic, k.id, err)
		}
		i = j
	}
	return nil
}

// validateDispatch checks that d names a directory and fits a unit; maxOff
// keeps the byte offsets of its file inside int64.
func validateDispatch(d cq.Dispatch, maxOff int64) error {
	if err := validateQueue(d.Topic, d.QueueID); err != nil {
		return err
	}
	if d.QueueOffset < 0 || d.QueueOffset > maxOff || d.PhyOffset < 0 || d.Size <= 0 {
		return fmt.Errorf("%s/%d offset %d (phy %d, size %d): %w", d.Topic, d.QueueID, d.QueueOffset, d.PhyOffset, d.Size, ErrInvalidEntry)
	}
	return nil
}

// validateQueue checks that topic and queueID can name a queue directory.
func validateQueue(topic string, queueID int32) error {
	if topic == "" || topic == "." || topic == ".." || strings.ContainsAny(topic, "/\x00") || queueID < 0 {
		return fmt.Errorf("topic %q queue %d: %w", topic, queueID, ErrInvalidName)
	}
	return nil
}

// putRun puts entries of one queue.
func (s *Store) putRun(k queueKey, ds []cq.Dispatch) error {
	return s.writeQueue(k, func(q *queue) error { return s.putQueue(q, ds) })
}

// writeQueue runs fn on queue k, created if it is not in the table, with
// q.mu held and q pinned. A queue that fn leaves failed and without files
// (its first file could not be created) is dropped from the table again.
func (s *Store) writeQueue(k queueKey, fn func(q *queue) error) error {
	for {
		q := s.acquire(k, true)
		q.mu.Lock()
		if q.deleted { // deleted meanwhile: it is out of the table now
			q.mu.Unlock()
			s.release(q)
			continue
		}
		err := fn(q)
		if err != nil && len(q.files) == 0 {
			q.deleted = true
			s.forget(q)
		}
		q.mu.Unlock()
		s.release(q)
		return err
	}
}

// putQueue writes the units of ds to q (q.mu held, q pinned). Consecutive
// units of one file go out in one write.
func (s *Store) putQueue(q *queue, ds []cq.Dispatch) error {
	w := unitWriter{s: s, q: q}
	for _, d := range ds {
		if q.lastEnd > 0 && d.End() <= q.lastEnd {
			continue
		}
		if d.PhyOffset < q.correctedTo {
			q.correctedTo = 0 // a record below the corrected minimum: correct again next time
		}
		if len(q.files) == 0 {
			if err := s.startQueue(q, d.QueueOffset); err != nil {
				return err
			}
		}
		end := w.end()
		if d.QueueOffset < end {
			continue
		}
		if d.QueueOffset > end {
			s.log.Warn().Str("queue", q.String()).Int64("expected", end).Int64("got", d.QueueOffset).
				Int64("phy", d.PhyOffset).Msg("[BUG] logic queue order maybe wrong; appending at the end")
		}
		if err := w.add(unit{phy: d.PhyOffset, size: d.Size, tags: d.TagsCode}); err != nil {
			return err
		}
	}
	return w.flush()
}

// startQueue creates the first file of a queue whose first entry is at off,
// pre-filling the units below off with blank units.
func (s *Store) startQueue(q *queue, off int64) error {
	start := off*UnitSize - (off*UnitSize)%s.fileSize
	sg, err := s.createFile(q, start)
	if err != nil {
		return err
	}
	q.files = []int64{start}
	s.addSegment(q, sg)
	q.min, q.max, q.lastPhy, q.lastEnd, q.correctedTo = off, off, -1, 0, 0
	q.times = nil
	if off == q.firstOffset() {
		return nil
	}
	blank := make([]byte, min(off-q.firstOffset(), 4096)*UnitSize)
	for i := 0; i < len(blank); i += UnitSize {
		encodeUnit(blank[i:], blankUnit)
	}
	for pos := int64(0); pos < (off-q.firstOffset())*UnitSize; {
		n := min(int64(len(blank)), (off-q.firstOffset())*UnitSize-pos)
		if err := sg.write(blank[:n], pos); err != nil {
			if rerr := s.removeFiles(q, 0); rerr != nil {
				s.log.Error().Err(rerr).Str("queue", q.String()).Msg("removing a half-written first file")
			}
			return err
		}
		pos += n
	}
	q.lastPhy = 0
	return nil
}

// unitWriter collects consecutive units of one file and writes them with
// one pwrite, moving the queue's end only once they are written.
type unitWriter struct {
	s    *Store
	q    *queue
	buf  []byte
	from int64 // queue offset of the first buffered unit
	last unit  // the newest buffered unit
}

// end is the queue's end counting the buffered units.
func (w *unitWriter) end() int64 { return w.q.max + int64(len(w.buf))/UnitSize }

func (w *unitWriter) add(u unit) error {
	s, q := w.s, w.q
	next := w.end()
	if len(w.buf) > 0 && (next*UnitSize%s.fileSize == 0 || len(w.buf) >= 64<<10) {
		if err := w.flush(); err != nil {
			return err
		}
	}
	if len(w.buf) == 0 {
		w.from = q.max
	}
	var b [UnitSize]byte
	encodeUnit(b[:], u)
	w.buf = append(w.buf, b[:]...)
	w.last = u
	// Keep the skip test of putQueue current for the rest of the call.
	q.lastEnd = u.end()
	return nil
}

func (w *unitWriter) flush() error {
	s, q := w.s, w.q
	if len(w.buf) == 0 {
		return nil
	}
	n := int64(len(w.buf)) / UnitSize
	b := w.from * UnitSize
	if idx := (b - q.files[0]) / s.fileSize; idx == int64(len(q.files)) {
		sg, err := s.createFile(q, b)
		if err != nil {
			return w.fail(err)
		}
		q.files = append(q.files, b)
		s.addSegment(q, sg)
	}
	sg, err := s.segment(q, w.from, false)
	if err != nil {
		return w.fail(err)
	}
	if err := sg.write(w.buf, b-sg.start); err != nil {
		return w.fail(err)
	}
	q.max += n
	q.lastPhy, q.lastEnd = w.last.phy, w.last.end()
	w.buf = w.buf[:0]
	return nil
}

// fail restores the skip state of the written part after a failed write.
func (w *unitWriter) fail(err error) error {
	if rerr := w.s.refreshLast(w.q); rerr != nil {
		w.s.log.Error().Err(rerr).Str("queue", w.q.String()).Msg("re-reading the newest unit after a failed write")
	}
	w.buf = w.buf[:0]
	return err
}
