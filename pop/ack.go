package pop

import (
	"errors"
	"fmt"
	"sort"

	"github.com/rocketkv/rocketkv/kvindex"
)

// ErrIllegalOffset is returned by an orderly ack or change of invisible
// time for an offset that is not part of the queue's in-flight batch
// (RocketMQ answers MESSAGE_ILLEGAL).
var ErrIllegalOffset = errors.New("pop: offset is not in the orderly batch")

// AckResult tells what an ack did.
type AckResult struct {
	// Deleted counts the in-flight records removed (0 for an unknown,
	// stale or expired handle: RocketMQ answers those SUCCESS too).
	Deleted int
}

// Ack acknowledges one message of topic (the topic it was read from: the
// pop-retry topic for retried messages) with its handle. A handle that
// does not match the message's in-flight record (already acknowledged,
// revived, or made stale by a change of invisible time) changes nothing.
// The group's committed offset advances over the acknowledged prefix. It
// returns once the change is durable.
func (s *Service) Ack(group, topic string, queueID int32, offset int64, h Handle) (AckResult, error) {
	if h.Orderly() {
		return s.ackOrder(group, topic, queueID, []int64{offset}, h.PopTime)
	}
	return s.ackQueue(group, topic, queueID, []int64{offset}, h.PopTime, h.InvisibleTime)
}

// AckMany acknowledges several messages of one queue popped together
// (a batch ack entry: one popTime and invisibleTime).
func (s *Service) AckMany(group, topic string, queueID int32, offsets []int64, popTime, invisibleTime int64, orderly bool) (AckResult, error) {
	if orderly {
		return s.ackOrder(group, topic, queueID, offsets, popTime)
	}
	return s.ackQueue(group, topic, queueID, offsets, popTime, invisibleTime)
}

func (s *Service) ackQueue(group, topic string, queueID int32, offsets []int64, popTime, invisibleTime int64) (AckResult, error) {
	var res AckResult
	if len(offsets) == 0 {
		return res, nil
	}
	sorted := offsets
	if !sort.SliceIsSorted(sorted, func(i, j int) bool { return sorted[i] < sorted[j] }) {
		sorted = append([]int64(nil), offsets...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	}
	unlock := s.lock(group, topic, queueID)
	b := s.store.NewBatch()
	err := func() error {
		defer unlock()
		defer b.Close()
		cur, has, err := s.cfg.Offsets.Get(group, topic, queueID)
		if err != nil {
			return err
		}
		// The new committed offset is the smallest offset left in flight.
		// Below the first acked offset nothing changes: one seek from the
		// committed offset finds whether something is in flight there (a
		// message left unacked keeps the committed offset; walking from it
		// would cross the deletions of everything acked since). Then one
		// pass from the first acked offset deletes the matching records
		// and, when nothing was below, finds the smallest one left.
		committedFrom := int64(0)
		if has {
			committedFrom = max(cur, 0)
		}
		newMin, found := int64(0), false
		if committedFrom < sorted[0] {
			m, ok, err := s.store.MinInFlight(group, topic, queueID, committedFrom)
			if err != nil {
				return err
			}
			if ok && m < sorted[0] {
				newMin, found = m, true
			}
		}
		last := sorted[len(sorted)-1]
		i := 0
		var ferr error
		err = s.store.EachInQueue(group, topic, queueID, sorted[0], func(r kvindex.InFlight) bool {
			for i < len(sorted) && sorted[i] < r.QueueOffset {
				i++
			}
			if i < len(sorted) && sorted[i] == r.QueueOffset && r.PopTime == popTime && r.InvisibleTime == invisibleTime {
				if ferr = b.DeleteInFlight(&r); ferr != nil {
					return false
				}
				res.Deleted++
				// Past the last acked offset only the new minimum is
				// still wanted.
				return !found || r.QueueOffset < last
			}
			if !found {
				newMin, found = r.QueueOffset, true
			}
			return r.QueueOffset < last
		})
		if err == nil {
			err = ferr
		}
		if err != nil || res.Deleted == 0 {
			return err
		}
		if !found {
			pos, _, err := s.store.Position(group, topic, queueID)
			if err != nil {
				return err
			}
			newMin = pos
		}
		if !has || cur != newMin {
			if err := b.SetCommitted(group, topic, queueID, newMin); err != nil {
				return err
			}
		}
		return b.Commit(false)
	}()
	if err != nil {
		return res, fmt.Errorf("ack %s on %s/%d: %w", group, topic, queueID, err)
	}
	if res.Deleted > 0 {
		return res, s.sync()
	}
	return res, nil
}

// moveCommitted moves the committed offset of a queue after records were
// deleted. The caller holds the queue's lock.
func (s *Service) moveCommitted(group, topic string, queueID int32) error {
	pos, _, err := s.store.Position(group, topic, queueID)
	if err != nil {
		return err
	}
	b := s.store.NewBatch()
	defer b.Close()
	if err := s.committed(b, group, topic, queueID, pos); err != nil {
		return err
	}
	if b.Empty() {
		return nil
	}
	return b.Commit(false)
}

// ChangeResult is the answer to a change of invisible time: the fields of
// the message's new handle.
type ChangeResult struct {
	PopTime       int64
	InvisibleTime int64
	ReviveQID     int32
	// Changed is false when the handle matched no in-flight record
	// (RocketMQ answers SUCCESS with new fields all the same).
	Changed bool
}

// ChangeInvisibleTime makes a popped message invisible for invisibleTime
// ms from now. Its old handle becomes stale; the new one has popTime now,
// the new invisibleTime and ckQueueOffset = offset. A handle matching no
// in-flight record changes nothing: the message was acknowledged or is
// already being re-delivered.
func (s *Service) ChangeInvisibleTime(group, topic string, queueID int32, offset int64, h Handle, invisibleTime int64) (ChangeResult, error) {
	if h.Orderly() {
		return s.changeOrder(group, topic, queueID, offset, h, invisibleTime)
	}
	now := s.now()
	res := ChangeResult{PopTime: now, InvisibleTime: invisibleTime, ReviveQID: h.ReviveQID}
	unlock := s.lock(group, topic, queueID)
	err := func() error {
		defer unlock()
		r, ok, err := s.store.Lookup(group, topic, queueID, offset)
		if err != nil || !ok || r.PopTime != h.PopTime || r.InvisibleTime != h.InvisibleTime {
			return err
		}
		full, ok, err := s.store.Record(r)
		if err != nil || !ok {
			return err
		}
		b := s.store.NewBatch()
		defer b.Close()
		if err := b.DeleteInFlight(&full); err != nil {
			return err
		}
		next := full
		next.PopTime, next.InvisibleTime, next.VisibleAt = now, invisibleTime, now+invisibleTime
		next.CKOffset, next.Attempts = offset, 0
		if err := b.AddInFlight(&next); err != nil {
			return err
		}
		if err := b.Commit(false); err != nil {
			return err
		}
		s.noteDeadline(next.VisibleAt)
		res.Changed = true
		return nil
	}()
	if err != nil {
		return res, fmt.Errorf("change invisible time of %s on %s/%d@%d: %w", group, topic, queueID, offset, err)
	}
	if res.Changed {
		s.kick()
		return res, s.sync()
	}
	return res, nil
}

// InFlight returns the in-flight record of a message, for tests and tools.
func (s *Service) InFlight(group, topic string, queueID int32, offset int64) (kvindex.InFlight, bool, error) {
	r, ok, err := s.store.Lookup(group, topic, queueID, offset)
	if err != nil || !ok {
		return r, ok, err
	}
	return s.store.Record(r)
}
