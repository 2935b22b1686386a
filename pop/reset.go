package pop

import (
	"fmt"

	"github.com/rocketkv/rocketkv/kvindex"
)

// resetPopTime is the pop time of the empty batch an offset reset leaves
// on an orderly queue: no pop has it (pop times are the broker's clock in
// ms), so no ack matches it.
const resetPopTime = -1

// ResetOffsets moves a group's pops of a topic's queues to the offsets
// targets gives by queue id, as an administrator's offset reset
// (INVOKE_BROKER_TO_RESET_OFFSET) asks: the pop position and the committed
// offset become the target, and an orderly queue's in-flight batch no
// longer blocks it; the acks of that batch still to come commit nothing
// (RocketMQ's hasOffsetReset until the queue's next pop), so they cannot
// move the offset back past the target. Messages in flight stay in
// flight: one not acknowledged is re-delivered after its deadline, as
// RocketMQ keeps its in-flight records over a reset too. A queue the group never popped gets
// no pop state; popped reports the queues that had some. It returns once
// the changes are durable (one sync for all of them).
func (s *Service) ResetOffsets(group, topic string, targets map[int32]int64) (popped map[int32]bool, err error) {
	popped = make(map[int32]bool)
	for q, off := range targets {
		ok, err := s.resetQueue(group, topic, q, off)
		if err != nil {
			return popped, err
		}
		if ok {
			popped[q] = true
		}
	}
	if len(popped) > 0 {
		return popped, s.sync()
	}
	return popped, nil
}

// resetQueue moves one queue (see ResetOffsets) without syncing.
func (s *Service) resetQueue(group, topic string, queueID int32, offset int64) (bool, error) {
	if offset < 0 {
		return false, fmt.Errorf("reset pop offset of %s on %s/%d: negative offset %d", group, topic, queueID, offset)
	}
	unlock := s.lock(group, topic, queueID)
	defer unlock()
	// The state read is not deleted with the topic before it is written.
	hold := s.store.HoldTopic(topic)
	defer hold.Release()
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
	s.readState()
	b := s.store.NewBatch()
	defer b.Close()
	if positioned {
		if err := b.SetPosition(group, topic, queueID, offset); err != nil {
			return false, err
		}
	}
	if ordered {
		// An empty batch of a pop time no ack carries: it locks nothing,
		// every ack of the queue skips its commit, and the next orderly
		// pop replaces it.
		reset := kvindex.OrderState{Group: group, Topic: topic, QueueID: queueID, PopTime: resetPopTime}
		if err := b.SetOrder(&reset); err != nil {
			return false, err
		}
	}
	if err := b.SetCommitted(group, topic, queueID, offset); err != nil {
		return false, err
	}
	if err := b.Commit(false); err != nil {
		return false, fmt.Errorf("reset pop offset of %s on %s/%d: %w", group, topic, queueID, err)
	}
	return true, nil
}
