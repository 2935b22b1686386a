package filecq

import "fmt"

// SeedStart makes a queue that has no files stand at offset: MinOffset and
// MaxOffset answer offset, and the queue's next Put is stored at offset.
//
// It is for rebuilding the layout from the CommitLog: a queue whose
// records retention has all deleted gets no entry from the rebuild, and
// without its start it would number new messages from 0 again, below the
// offsets consumers and the other layout already hold.
//
// The queue is laid out as RocketMQ lays out a queue whose first entry
// does not start a file: the file holding offset is created and the units
// below offset in it are blank units. Recovery counts blank units toward
// the end and skips them for the minimum, so a reopened store answers the
// same bounds. An offset that starts a file leaves that file all zeros:
// recovery's scan stops at its first unit, which puts the end (and the
// minimum, with no unit to look at) at the file's start, that is at offset
// again.
//
// A queue that has files is left as it is, whatever its bounds; an offset
// <= 0 does nothing. Like Put, SeedStart returns ErrReadOnly on a
// read-only store, ErrInvalidName for a topic or queue id Put refuses and
// ErrInvalidEntry for an offset whose byte position overflows; what it
// writes is durable after the next Flush.
func (s *Store) SeedStart(topic string, queueID int32, offset int64) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if err := s.checkSeed(topic, queueID, offset); err != nil {
		return fmt.Errorf("seed %s/%d at %d: %w", topic, queueID, offset, err)
	}
	if offset <= 0 {
		return nil
	}
	err := s.writeQueue(queueKey{topic, queueID}, func(q *queue) error {
		if len(q.files) > 0 {
			return nil
		}
		return s.startQueue(q, offset)
	})
	if err != nil {
		return fmt.Errorf("seed %s/%d at %d: %w", topic, queueID, offset, err)
	}
	return nil
}

// checkSeed refuses what Put would refuse: a read-only store, a name that
// cannot be a directory, an offset past the largest storable one.
func (s *Store) checkSeed(topic string, queueID int32, offset int64) error {
	if s.readOnly {
		return ErrReadOnly
	}
	if err := validateQueue(topic, queueID); err != nil {
		return err
	}
	if offset > maxQueueOffset-s.units {
		return fmt.Errorf("offset %d past %d: %w", offset, maxQueueOffset-s.units, ErrInvalidEntry)
	}
	return nil
}
