package pop

import (
	"fmt"
)

// ResetOffset moves a group's pop of one queue to offset, as an
// administrator's offset reset (INVOKE_BROKER_TO_RESET_OFFSET) asks: the
// pop position and the committed offset become offset, and an orderly
// queue's in-flight batch no longer blocks it. Messages in flight stay in
// flight: one not acknowledged is re-delivered after its deadline, as
// RocketMQ keeps its in-flight records over a reset too. A group that never
// popped the queue gets no pop state; it reports whether there was some.
// It returns once the change is durable.
func (s *Service) ResetOffset(group, topic string, queueID int32, offset int64) (bool, error) {
	if offset < 0 {
		return false, fmt.Errorf("reset pop offset of %s on %s/%d: negative offset %d", group, topic, queueID, offset)
	}
	unlock := s.lock(group, topic, queueID)
	defer unlock()
	// A non-orderly pop keeps a position; an orderly one its batch (it
	// starts from the committed offset).
	_, positioned, err := s.store.Position(group, topic, queueID)
	if err != nil {
		return false, err
	}
	_, ordered, err := s.store.Order(group, topic, queueID)
	if err != nil || !positioned && !ordered {
		return false, err
	}
	b := s.store.NewBatch()
	defer b.Close()
	if positioned {
		if err := b.SetPosition(group, topic, queueID, offset); err != nil {
			return false, err
		}
	}
	if ordered {
		if err := b.DeleteOrder(group, topic, queueID); err != nil {
			return false, err
		}
	}
	if err := b.SetCommitted(group, topic, queueID, offset); err != nil {
		return false, err
	}
	if err := b.Commit(true); err != nil {
		return false, fmt.Errorf("reset pop offset of %s on %s/%d: %w", group, topic, queueID, err)
	}
	return true, nil
}
