package pop

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rocketkv/rocketkv/kvindex"
)

// ErrIllegalOffset is returned by an orderly ack or change of invisible
// time for an offset that is not part of the queue's in-flight batch
// (RocketMQ answers MESSAGE_ILLEGAL).
var ErrIllegalOffset = errors.New("pop: offset is not in the orderly batch")

// AckResult tells what an ack did.
type AckResult struct {
	// Deleted counts the messages removed from their checkpoint (0 for an
	// unknown, stale or expired handle: RocketMQ answers those SUCCESS
	// too).
	Deleted int
}

// Ack acknowledges one message of topic (the topic it was read from: the
// pop-retry topic for retried messages) with its handle. A handle that
// does not match the message's checkpoint (already acknowledged, revived,
// or made stale by a change of invisible time) changes nothing. The
// group's committed offset advances over the acknowledged prefix. It
// returns once the change is durable.
func (s *Service) Ack(group, topic string, queueID int32, offset int64, h Handle) (AckResult, error) {
	if h.Orderly() {
		return s.ackOrder(group, topic, queueID, []int64{offset}, h.PopTime)
	}
	return s.ackQueue(group, topic, queueID, h.CKOffset, []int64{offset}, h.PopTime, h.InvisibleTime)
}

// AckMany acknowledges several messages of one queue popped together
// (a batch ack entry: one ckOffset, popTime and invisibleTime).
func (s *Service) AckMany(group, topic string, queueID int32, ckOffset int64, offsets []int64, popTime, invisibleTime int64, orderly bool) (AckResult, error) {
	if orderly {
		return s.ackOrder(group, topic, queueID, offsets, popTime)
	}
	return s.ackQueue(group, topic, queueID, ckOffset, offsets, popTime, invisibleTime)
}

// AckEntry is one entry of a batch ack: messages of one queue popped
// together (one ckOffset, popTime and invisibleTime), as AckMany takes
// them.
type AckEntry struct {
	Group, Topic  string
	QueueID       int32
	CKOffset      int64
	Offsets       []int64
	PopTime       int64
	InvisibleTime int64
	Orderly       bool
}

// AckBatch acknowledges the entries of a batch ack in order, as AckMany
// each, and makes them durable with one sync rather than one per entry.
// An orderly entry with offsets outside its batch does not stop the
// others (RocketMQ's AckMessageProcessor goes on after marking the
// response MESSAGE_ILLEGAL): every entry is acknowledged, and the error
// returned wraps ErrIllegalOffset. At the first entry that fails
// otherwise it stops; what the entries before it changed is made durable
// all the same, and the error is returned with their results.
func (s *Service) AckBatch(entries []AckEntry) ([]AckResult, error) {
	results := make([]AckResult, 0, len(entries))
	var dur durability
	defer dur.release()
	var err error
	var illegal []error
	for i, e := range entries {
		var r AckResult
		last := i == len(entries)-1
		if e.Orderly {
			r, err = s.ackOrderUnsynced(e.Group, e.Topic, e.QueueID, e.Offsets, e.PopTime, last, &dur)
			if errors.Is(err, ErrIllegalOffset) {
				illegal, err = append(illegal, err), nil
			}
		} else {
			r, err = s.ackQueueUnsynced(e.Group, e.Topic, e.QueueID, e.CKOffset, e.Offsets, e.PopTime, e.InvisibleTime, last, &dur)
		}
		if err != nil {
			break
		}
		results = append(results, r)
	}
	if serr := dur.finish(s); serr != nil {
		return results, errors.Join(err, serr)
	}
	if err == nil {
		err = errors.Join(illegal...)
	}
	// Orderly queues whose batches were acknowledged can be popped again
	// now that the acks are durable.
	// So can non-orderly queues the in-flight threshold stopped, once
	// back at it.
	for i, e := range entries[:len(results)] {
		if e.Orderly {
			s.cfg.OnQueueReady(e.Topic, e.Group, e.QueueID)
		} else if results[i].Deleted > 0 {
			s.wakeReleased(e.Group, e.Topic, e.QueueID)
		}
	}
	return results, err
}

// ackQueue removes offsets from the checkpoint the handle fields name:
// one read and one rewrite (or delete) for the whole batch. When the
// group's committed offset was among them, it moves to the smallest
// offset left in flight in the same commit.
func (s *Service) ackQueue(group, topic string, queueID int32, ckOffset int64, offsets []int64, popTime, invisibleTime int64) (AckResult, error) {
	var dur durability
	defer dur.release()
	res, err := s.ackQueueUnsynced(group, topic, queueID, ckOffset, offsets, popTime, invisibleTime, true, &dur)
	if err == nil {
		err = dur.finish(s)
	}
	if err == nil && res.Deleted > 0 {
		s.wakeReleased(group, topic, queueID)
	}
	return res, err
}

// ackQueueUnsynced is ackQueue leaving what its commit needs to be
// durable to dur (the caller's finish): with last set the commit is made
// with CommitDurable, else without a wait.
func (s *Service) ackQueueUnsynced(group, topic string, queueID int32, ckOffset int64, offsets []int64, popTime, invisibleTime int64, last bool, dur *durability) (AckResult, error) {
	var res AckResult
	if len(offsets) == 0 {
		return res, nil
	}
	sorted := offsets
	if !slices.IsSorted(sorted) {
		sorted = slices.Sorted(slices.Values(offsets))
	}
	unlock := s.lock(group, topic, queueID)
	err := func() error {
		defer unlock()
		// No deletion of the topic between the read of the checkpoint
		// and its rewrite; once the topic is deleted there is none.
		hold := s.store.HoldTopic(topic)
		defer hold.Release()
		ck, ok, err := s.store.Checkpoint(group, topic, queueID, ckOffset, popTime)
		if err != nil || !ok || ck.InvisibleTime != invisibleTime {
			s.traceAck(group, topic, queueID, ckOffset, popTime, sorted, ok, false, 0)
			return err
		}
		removed := ck.Remove(sorted)
		s.traceAck(group, topic, queueID, ckOffset, popTime, sorted, true, true, len(removed))
		if len(removed) == 0 {
			return nil
		}
		s.readState()
		b := s.store.NewBatch()
		defer b.Close()
		if err := b.RewriteCheckpoint(&ck); err != nil {
			return err
		}
		cur, has, err := s.cfg.Offsets.Get(group, topic, queueID)
		if err != nil {
			return err
		}
		if !has || cur >= removed[0] {
			// The committed offset was among the acknowledged ones: it
			// moves in the same batch, to what is left in flight.
			pos, _, err := s.store.Position(group, topic, queueID)
			if err != nil {
				return err
			}
			if err := s.committedFrom(b, group, topic, queueID, pos, cur, has, &ck); err != nil {
				return err
			}
		}
		if err := dur.commit(b, last); err != nil {
			return err
		}
		res.Deleted = len(removed)
		return nil
	}()
	s.notePut(group, topic, ReviveAck, err)
	if err != nil {
		return res, fmt.Errorf("ack %s on %s/%d: %w", group, topic, queueID, err)
	}
	return res, nil
}

// traceAck logs, at debug level, an ack of a plain pop's messages: whether
// the checkpoint its handle names exists (found; an ack of messages already
// revived or acknowledged meets none), whether the handle matched it
// (matched; a handle made stale by a change of invisible time finds the
// checkpoint but does not match it, and changes nothing), and how many of
// the offsets were still in flight there.
func (s *Service) traceAck(group, topic string, queueID int32, ckOffset, popTime int64, offsets []int64, found, matched bool, removed int) {
	e := s.log.Debug()
	if !e.Enabled() {
		return
	}
	e.Str("group", group).Str("topic", topic).Int32("queue", queueID).Int64("ckOffset", ckOffset).Int64("popTime", popTime).
		Int("offsets", len(offsets)).Int64("first", offsets[0]).Int64("last", offsets[len(offsets)-1]).
		Bool("found", found).Bool("matched", matched).Int("removed", removed).Msg("pop: ack")
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
	// Changed is false when the handle named no checkpoint holding the
	// message (RocketMQ answers SUCCESS with new fields all the same).
	Changed bool
}

// ChangeInvisibleTime makes a popped message invisible for invisibleTime
// ms from now. Its old handle becomes stale; the new one has popTime now,
// the new invisibleTime and ckQueueOffset = offset. A handle naming no
// checkpoint that holds the message changes nothing: the message was
// acknowledged or is already being re-delivered.
func (s *Service) ChangeInvisibleTime(group, topic string, queueID int32, offset int64, h Handle, invisibleTime int64) (ChangeResult, error) {
	if h.Orderly() {
		return s.changeOrder(group, topic, queueID, offset, h, invisibleTime)
	}
	now := s.now()
	res := ChangeResult{PopTime: now, InvisibleTime: invisibleTime, ReviveQID: h.ReviveQID}
	var dur durability
	defer dur.release()
	unlock := s.lock(group, topic, queueID)
	err := func() error {
		defer unlock()
		hold := s.store.HoldTopic(topic)
		defer hold.Release()
		ck, ok, err := s.store.Checkpoint(group, topic, queueID, h.CKOffset, h.PopTime)
		if err != nil || !ok || ck.InvisibleTime != h.InvisibleTime || !ck.Contains(offset) {
			return err
		}
		s.readState()
		if offset == ck.CKOffset && now == ck.PopTime {
			// The new checkpoint would have the old one's name.
			now++
			res.PopTime = now
		}
		b := s.store.NewBatch()
		defer b.Close()
		next := kvindex.Checkpoint{Group: group, Topic: topic, QueueID: queueID, CKOffset: offset, PopTime: now,
			InvisibleTime: invisibleTime, VisibleAt: now + invisibleTime, RetryFlag: ck.RetryFlag, Offsets: []int64{offset}}
		ck.Remove([]int64{offset})
		if err := b.RewriteCheckpoint(&ck); err != nil {
			return err
		}
		if err := b.PutCheckpoint(&next); err != nil {
			return err
		}
		if err := dur.commit(b, true); err != nil {
			return err
		}
		s.noteDeadline(next.VisibleAt)
		res.Changed = true
		return nil
	}()
	// RocketMQ puts a checkpoint of the message under its new deadline,
	// then an ack of its old one.
	s.notePut(group, topic, ReviveCheckpoint, err)
	s.notePut(group, topic, ReviveAck, err)
	if err != nil {
		return res, fmt.Errorf("change invisible time of %s on %s/%d@%d: %w", group, topic, queueID, offset, err)
	}
	if res.Changed {
		s.kick()
	}
	return res, dur.finish(s)
}

// InFlight returns the in-flight view of a message, for tests and tools.
func (s *Service) InFlight(group, topic string, queueID int32, offset int64) (kvindex.InFlight, bool, error) {
	return s.store.InFlightAt(group, topic, queueID, offset)
}
