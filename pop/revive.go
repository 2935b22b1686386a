package pop

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// reviveBackoff is how far a failed revive pushes a record's deadline, by
// attempt (RocketMQ's REWRITE_INTERVALS_IN_SECONDS); past the last entry
// the last one repeats: a record is never dropped, unless
// Config.DropExhaustedRevives drops it after maxReviveAttempts.
var reviveBackoff = []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute,
	3 * time.Minute, 4 * time.Minute, 5 * time.Minute, 6 * time.Minute, 7 * time.Minute, 8 * time.Minute,
	9 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour}

// maxReviveAttempts is how many failed revives of a message
// Config.DropExhaustedRevives allows: as many as RocketMQ re-puts a
// checkpoint (its 17 rewrite intervals), about 6.5 hours of retries.
const maxReviveAttempts = 17

// exhausted reports whether a message whose revive failed attempts times
// before is dropped at its next failure.
func (s *Service) exhausted(attempts int32) bool {
	return s.cfg.DropExhaustedRevives && attempts >= maxReviveAttempts
}

// reviveLoop revives due records until ctx ends: a round handles up to
// ReviveBatch records in deadline order; when fewer were due it sleeps
// until the next deadline, ReviveIdle, or a kick, whichever comes first.
//
// Revive batches left behind are settled before the rounds: at start
// those of a crash (waiting for the dispatcher as long as it takes), and
// after a failed round those whose put could not tell what it stored
// (waiting at most settleWait before each round until it succeeds).
func (s *Service) reviveLoop(ctx context.Context) {
	var left leftovers
	if _, err := s.reviveIntents(ctx, false); err != nil && ctx.Err() == nil {
		s.log.Error().Err(err).Msg("revive: messages whose revive a crash cut short not settled yet; tried again before each round")
		left.pending = true
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.wake:
		}
		if left.pending {
			s.settleLeft(ctx, &left)
		}
		t0 := time.Now()
		n, err := s.ReviveOnce(ctx)
		if n > 0 {
			took := time.Since(t0)
			s.stage.noteRate(n, took)
			s.log.Debug().Int("records", n).Dur("took", took).Msg("revive round")
		}
		if err != nil && ctx.Err() == nil {
			s.log.Error().Err(err).Msg("revive round failed")
			// The round may have left revive batches (a put that failed
			// before the dispatcher could tell what it stored).
			left.pending, left.afterFailure = true, true
		}
		// What is due comes first; staging ahead uses the time left.
		staged := 0
		if err == nil && n < s.cfg.ReviveBatch {
			staged, err = s.StageOnce(ctx)
			if err != nil && ctx.Err() == nil {
				s.log.Error().Err(err).Msg("revive: staging ahead failed")
				left.pending, left.afterFailure = true, true
			}
		}
		wait := s.cfg.ReviveIdle
		if (n >= s.cfg.ReviveBatch || staged > 0) && err == nil {
			wait = 0
		} else if at, ok, err := s.store.NextDue(s.cursor, s.now()+wait.Milliseconds()); err == nil && ok {
			wait = min(wait, max(time.Duration(at-s.now()+1)*time.Millisecond, 0))
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// settleWait bounds how long the revive loop waits for the dispatcher
// before a round when revive batches are left to settle; a round goes on
// without them when it is not enough.
const settleWait = 100 * time.Millisecond

// leftovers is the revive loop's record of revive batches left to settle.
type leftovers struct {
	// pending: a crash's settle or a revive round failed, and batches may
	// be left.
	pending bool
	// afterFailure: a round failed, so the messages not stored go back to
	// their checkpoints after reviveBackoff, as after any failed put (a
	// crash's come back at once).
	afterFailure bool
	// logged: the current streak of failed settles was logged.
	logged bool
}

// settleLeft settles the revive batches left over, waiting at most
// settleWait for the dispatcher, and clears left.pending when none is
// left. It runs between rounds, so every batch it finds is left over. A
// failure other than the wait is logged once a streak.
func (s *Service) settleLeft(ctx context.Context, left *leftovers) {
	wctx, cancel := context.WithTimeout(ctx, settleWait)
	defer cancel()
	switch _, err := s.reviveIntents(wctx, left.afterFailure); {
	case err == nil:
		left.pending, left.logged = false, false
	case !left.logged && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded):
		s.log.Error().Err(err).Msg("revive: revive batches left not settled; tried again before each round")
		left.logged = true
	}
}

// reviveWorkers is how many queues a revive round handles at once.
const reviveWorkers = 4

// queueKey names one group's queue.
type queueKey struct {
	group, topic string
	queueID      int32
}

// ReviveOnce re-delivers the messages of the checkpoints due now (at
// least ReviveBatch messages when that many are due) and returns how many
// messages it handled. It runs on the revive goroutine only (or in tests,
// instead of it). For each queue, under its lock: the messages of
// checkpoints still current (not acknowledged or changed meanwhile) are
// re-put to the group's pop-retry topic with reconsumeTimes + 1 and
// 1ST_POP_TIME, or to %DLQ%<group> once the message was consumed
// retryMaxTimes times, and the committed offset moves. The checkpoints
// are replaced by revive batches in one durable commit before the put,
// and the batches deleted after it, so a crash anywhere neither loses a
// message nor puts it twice (reviveIntents settles the batches a crash
// leaves at the next start, and those of a failed put that could not yet
// tell what it stored before a later round). A message that could not be
// read, or whose put failed, goes back to a checkpoint due after
// reviveBackoff. The checkpoints of a topic that no longer exists are
// dropped with a warning.
func (s *Service) ReviveOnce(ctx context.Context) (int, error) {
	now := s.now()
	s.lowerCursor()
	r, err := s.dueRound(s.cursor, now)
	if err != nil {
		return 0, err
	}
	scanned, lastDue, order := r.scanned, r.lastDue, r.order
	n, err := s.eachQueue(ctx, order, func(k queueKey) (int, error) {
		m, err := s.reviveQueue(ctx, k, r.byQueue[k], now)
		if err == nil {
			s.cfg.OnQueueReady(k.topic, k.group, k.queueID)
		}
		return m, err
	})
	if err != nil {
		return n, err
	}
	if len(order) > 0 {
		if err := s.sync(); err != nil {
			return n, err
		}
	}
	if scanned < s.cfg.ReviveBatch {
		// Everything due up to now is handled; a deadline committed
		// behind the cursor from now on is reported by noteDeadline.
		s.cursor = max(s.cursor, now+1-reviveCursorMargin)
	} else {
		// A full round: everything due before the last deadline it saw
		// is handled (RocketMQ's KV revive moves its cursor the same way).
		s.cursor = max(s.cursor, min(lastDue, now-reviveCursorMargin))
	}
	s.scanFrom.Store(s.cursor)
	return n, nil
}

// lowerCursor moves the revive cursor down to the lowest deadline written
// since the last round, if that is below it.
func (s *Service) lowerCursor() {
	if low := s.lowDeadline.Swap(math.MaxInt64); low < s.cursor {
		s.cursor = low
	}
	s.scanFrom.Store(s.cursor)
}

// reviveCursorMargin keeps the revive cursor a little behind the clock,
// for a small step back of the wall clock. Late writes need no margin
// (noteDeadline reports them); every round scans the tombstones of the
// records revived or acknowledged within it, so it is kept short (it was
// 3 s, and walking 3 s of tombstones was 14 % of the broker's CPU while
// a burst of records expired).
const reviveCursorMargin = 250

// dueRound is the deadline entries of one round, by queue.
type dueRound struct {
	byQueue map[queueKey][]kvindex.DueEntry
	// order lists the queues in the order of their first entry.
	order []queueKey
	// scanned counts the messages of the entries, and lastDue is the
	// last entry's deadline.
	scanned int
	lastDue int64
}

// dueRound reads the deadline entries in [from, before], up to
// ReviveBatch messages, by queue.
func (s *Service) dueRound(from, before int64) (dueRound, error) {
	r := dueRound{byQueue: map[queueKey][]kvindex.DueEntry{}}
	err := s.store.DueEntries(from, before, s.cfg.ReviveBatch, func(d kvindex.DueEntry) bool {
		r.lastDue = d.VisibleAt
		k := queueKey{d.Group, d.Topic, d.QueueID}
		if _, ok := r.byQueue[k]; !ok {
			r.order = append(r.order, k)
		}
		r.byQueue[k] = append(r.byQueue[k], d)
		r.scanned += d.Count
		return true
	})
	return r, err
}

// eachQueue runs do for each queue of order, reviveWorkers queues at once
// (each holds its own lock, and the waits, a pop holding the lock or the
// CommitLog append, overlap), and returns the sum of what do returned and
// the first error, or ctx's when it ended before every queue was done.
func (s *Service) eachQueue(ctx context.Context, order []queueKey, do func(queueKey) (int, error)) (int, error) {
	work := make(chan queueKey)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	var total atomic.Int64
	for w := 0; w < min(reviveWorkers, len(order)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				n, err := do(k)
				total.Add(int64(n))
				if err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
				}
			}
		}()
	}
	for _, k := range order {
		if ctx.Err() != nil {
			break
		}
		work <- k
	}
	close(work)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return int(total.Load()), firstErr
}

// dueNames returns the names of the checkpoints of due entries.
func dueNames(due []kvindex.DueEntry) []kvindex.CheckpointName {
	names := make([]kvindex.CheckpointName, len(due))
	for i, d := range due {
		names[i] = kvindex.CheckpointName{CKOffset: d.CKOffset, PopTime: d.PopTime}
	}
	return names
}

// entriesOf reads the ConsumeQueue entries of a queue from first to last
// in one range read, when the span is at most maxReviveSpan (an empty map
// otherwise: readEntry then reads each message's entry on its own).
func (s *Service) entriesOf(topic string, queueID int32, first, last int64) (map[int64]cq.Entry, error) {
	entries := map[int64]cq.Entry{}
	if span := last - first + 1; span <= maxReviveSpan {
		es, err := s.cfg.CQ.Get(topic, queueID, first, int(span))
		if err != nil {
			return nil, fmt.Errorf("revive: read %s/%d@%d: %w", topic, queueID, first, err)
		}
		for _, e := range es {
			entries[e.QueueOffset] = e
		}
	}
	return entries, nil
}

func (s *Service) reviveQueue(ctx context.Context, k queueKey, due []kvindex.DueEntry, now int64) (int, error) {
	unlock := s.lock(k.group, k.topic, k.queueID)
	defer unlock()
	// A deletion of the topic comes before the checkpoints are read or
	// after all that comes of them is written (the put included).
	hold := s.store.HoldTopic(k.topic)
	defer hold.Release()
	b := s.store.NewBatch()
	defer b.Close()
	// The checkpoints as they are now: acks since the scan removed
	// offsets or the whole checkpoint. An entry whose checkpoint is gone
	// or has another deadline is deleted: checkpoints and their entries
	// change together, so that is mostly an ack between the scan and this
	// read (the entry is then deleted already), and otherwise an entry a
	// damaged store left behind, which every round would meet again.
	cks := make([]kvindex.Checkpoint, 0, len(due))
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	err := s.store.ReadCheckpoints(k.group, k.topic, k.queueID, dueNames(due), func(i int, c kvindex.Checkpoint, ok bool) error {
		if !ok || c.VisibleAt != due[i].VisibleAt {
			return b.DeleteOrphanDue(&due[i].Checkpoint)
		}
		cks = append(cks, c)
		first, last = min(first, c.Offsets[0]), max(last, c.Offsets[len(c.Offsets)-1])
		return nil
	})
	if err != nil {
		return 0, err
	}
	for range cks {
		s.noteGot(k.group, k.topic)
	}
	if len(cks) == 0 {
		return 0, b.Commit(false)
	}
	// As RocketMQ's PopReviveService.mergeAndRevive: the checkpoints of a
	// topic that no longer exists (the one popped, or the one a pop-retry
	// topic retries) are dropped, not revived.
	if gone, err := s.topicGone(originalTopic(k.topic, k.group)); err != nil {
		return 0, fmt.Errorf("revive: %w", err)
	} else if gone {
		return s.dropCheckpoints(b, cks, "the topic no longer exists")
	}
	// And those of a group that does not exist and is not created
	// (autoCreateSubscriptionGroup off), as mergeAndRevive skips a
	// checkpoint whose group findSubscriptionGroupConfig does not find.
	maxTimes, groupExists, err := s.cfg.Broker.RetryMaxTimes(k.group)
	if err != nil {
		return 0, fmt.Errorf("revive: group %s: %w", k.group, err)
	}
	if !groupExists {
		return s.dropCheckpoints(b, cks, "the consumer group does not exist")
	}
	entries, err := s.entriesOf(k.topic, k.queueID, first, last)
	if err != nil {
		return 0, err
	}
	// The revived messages' bodies alias these views until they are put.
	var views []*commitlog.View
	defer releaseViews(&views)
	failed := make([][]int64, len(cks)) // offsets of cks[i] to retry later
	var out []revived
	var batches []kvindex.ReviveBatch
	done := 0
	floors, err := s.floors(k.group, k.topic)
	if err != nil {
		return 0, err
	}
	for i := range cks {
		c := &cks[i]
		batch := kvindex.ReviveBatch{Checkpoint: *c, Floors: floors}
		batch.Offsets = nil
		for _, off := range c.Offsets {
			m, v, ok, err := s.readEntry(c.Topic, c.QueueID, off, entries)
			if errors.Is(err, errUndecodable) {
				// Reading it again decodes the same bytes: as RocketMQ's
				// revive does with a message it cannot get from its own
				// store, it is dropped instead of retried for ever.
				s.log.Error().Err(err).Str("group", c.Group).Str("topic", c.Topic).Int32("queue", c.QueueID).
					Int64("offset", off).Msg("revive: message cannot be decoded; dropped, not re-delivered")
				s.undecodable.Add(1)
				err, ok = nil, false
			}
			if err != nil {
				s.log.Warn().Err(err).Str("group", c.Group).Str("topic", c.Topic).Int32("queue", c.QueueID).
					Int64("offset", off).Msg("revive: read failed; retrying later")
				failed[i] = append(failed[i], off)
				continue
			}
			done++
			if !ok {
				continue // deleted by retention or undecodable: nothing to re-deliver
			}
			views = append(views, v)
			in := kvindex.IntentOf(c, off)
			out = append(out, revived{msg: s.reviveMessage(&m, maxTimes, &in, 0), intent: in})
			batch.Offsets = append(batch.Offsets, off)
		}
		if len(batch.Offsets) > 0 {
			batches = append(batches, batch)
		}
	}
	// The checkpoints go and the revive batches come in one durable commit
	// before the put: after a crash, a batch left names each of its
	// messages the put stored (found above its floors by their property)
	// and those it did not, revived again when the service starts; never
	// both, never neither.
	for i := range cks {
		c := &cks[i]
		if len(failed[i]) == 0 || s.exhausted(c.Attempts) {
			if len(failed[i]) > 0 {
				s.log.Warn().Str("group", c.Group).Str("topic", c.Topic).Int32("queue", c.QueueID).Ints64("offsets", failed[i]).
					Int32("attempts", c.Attempts+1).Msg("revive: read failed too many times; dropped, not re-delivered (skipWhenCKRePutReachMaxTimes)")
			}
			if err := b.DeleteCheckpoint(c); err != nil {
				return 0, err
			}
		} else {
			moved := *c
			moved.Offsets = failed[i]
			moved.VisibleAt = retryAt(now, c.Attempts)
			moved.Attempts++
			if err := b.MoveCheckpoint(c, &moved); err != nil {
				return 0, err
			}
		}
		s.lateness.addN(now-c.VisibleAt, len(c.Offsets)-len(failed[i]))
	}
	for i := range batches {
		if err := b.PutReviveBatch(&batches[i]); err != nil {
			return 0, err
		}
	}
	if err := commitDurable(b); err != nil {
		return 0, err
	}
	if _, err := s.putIntents(ctx, k, out, batches, now); err != nil {
		return 0, err
	}
	handled := 0
	for i := range cks {
		handled += len(cks[i].Offsets)
	}
	if done > 0 {
		return handled, s.moveCommitted(k.group, k.topic, k.queueID)
	}
	return handled, nil
}

// dropCheckpoints deletes, in b, checkpoints that are not revived (their
// topic or group is gone), with a warning for each that gives why,
// commits b and returns how many messages they held.
func (s *Service) dropCheckpoints(b *kvindex.PopBatch, cks []kvindex.Checkpoint, why string) (int, error) {
	n := 0
	for i := range cks {
		c := &cks[i]
		s.log.Warn().Str("group", c.Group).Str("topic", c.Topic).Int32("queue", c.QueueID).Ints64("offsets", c.Offsets).
			Msg("revive: " + why + "; checkpoint dropped, its messages not re-delivered")
		if err := b.DeleteCheckpoint(c); err != nil {
			return 0, err
		}
		n += len(c.Offsets)
	}
	return n, b.Commit(false)
}

// revived is a message a revive puts and the intent it carries out.
type revived struct {
	msg    *commitlog.Message
	intent kvindex.ReviveIntent
}

// commitDurable commits b and waits until it is as durable as the index's
// WAL sync mode makes an answered request.
func commitDurable(b *kvindex.PopBatch) error {
	wait, err := b.CommitDurable()
	if err != nil {
		return err
	}
	return wait()
}

// putIntents puts the revived messages (their revive batches already
// durable) to the pop-retry topic and the DLQ, and deletes the batches.
// When a put fails, once the dispatcher has indexed what did reach the
// CommitLog, the messages not stored go back to their checkpoints, due
// again after reviveBackoff (those of a staged revive, to their deadline);
// put is then false.
func (s *Service) putIntents(ctx context.Context, k queueKey, out []revived, batches []kvindex.ReviveBatch, now int64) (put bool, err error) {
	var retry, dlq []*commitlog.Message
	for i := range out {
		if out[i].msg.Topic == meta.DLQTopic(out[i].intent.Group) {
			dlq = append(dlq, out[i].msg)
		} else {
			retry = append(retry, out[i].msg)
		}
	}
	b := s.store.NewBatch()
	defer b.Close()
	stored, ok := s.putRevived(ctx, k, retry, dlq)
	if ok {
		s.revived.Add(int64(len(retry)))
		s.dlq.Add(int64(len(dlq)))
		// Not waited for: a batch a crash keeps finds its messages stored.
		for i := range batches {
			if err := b.DeleteReviveBatch(&batches[i]); err != nil {
				return false, err
			}
		}
		return true, b.Commit(false)
	}
	// Some may have been put; the dispatcher tells which. Past a shutdown
	// too: a batch left then is only settled at the next start.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.GiveBackWait)
	defer cancel()
	if err := s.cfg.Broker.WaitDispatched(wctx); err != nil {
		return false, fmt.Errorf("revive: wait for the dispatch of a failed put (its revive batches are settled once the dispatcher catches up): %w", err)
	}
	found, err := s.storedRevives(batches)
	if err != nil {
		return false, fmt.Errorf("revive: find what a failed put stored (its revive batches are settled before a later round): %w", err)
	}
	// What a put to another broker group (an acting master's) stored
	// is not in this CommitLog: the put says it.
	if len(stored) > 0 {
		intents := make(map[*commitlog.Message]*kvindex.ReviveIntent, len(out))
		for i := range out {
			intents[out[i].msg] = &out[i].intent
		}
		for _, m := range stored {
			found[reviveKeyOf(intents[m])] = true
			if m.Topic == meta.DLQTopic(k.group) {
				s.dlq.Add(1)
			} else {
				s.revived.Add(1)
			}
		}
	}
	_, err = s.settle(b, nil, batches, found, now, true)
	return false, err
}

// revivedKey names a message a revive re-delivers.
type revivedKey struct {
	group, topic string
	queueID      int32
	offset       int64
}

func reviveKeyOf(in *kvindex.ReviveIntent) revivedKey {
	return revivedKey{in.Group, in.Topic, in.QueueID, in.QueueOffset}
}

// floors returns the revive floors of group's messages of topic: the
// ConsumeQueue max offsets of the topics a revive can put them to.
func (s *Service) floors(group, topic string) (kvindex.ReviveFloors, error) {
	var f kvindex.ReviveFloors
	for _, d := range s.reviveDestinations(group, topic, &f) {
		max, err := s.cfg.CQ.MaxOffset(d.topic, 0)
		if err != nil {
			return f, fmt.Errorf("revive: max offset of %s: %w", d.topic, err)
		}
		*d.floor = max
	}
	return f, nil
}

// reviveDestination is a topic a revive can put to and its floor.
type reviveDestination struct {
	topic string
	floor *int64
}

// reviveDestinations lists the topics a revive can put group's messages of
// topic to (queue 0 of each), with the field of f that holds its floor.
func (s *Service) reviveDestinations(group, topic string, f *kvindex.ReviveFloors) []reviveDestination {
	origin := originalTopic(topic, group)
	return []reviveDestination{{RetryTopicV1(origin, group), &f.RetryV1}, {RetryTopicV2(origin, group), &f.RetryV2},
		{meta.DLQTopic(group), &f.DLQ}}
}

// storedRevives returns the messages of batches that a put stored: those
// named by the PropertyRevivedFrom of a record at or above a batch's floor
// of a topic it can put to. The caller waited for the dispatcher to reach
// the CommitLog's end.
func (s *Service) storedRevives(batches []kvindex.ReviveBatch) (map[revivedKey]bool, error) {
	from := map[string]int64{} // topic -> lowest floor
	for i := range batches {
		r := &batches[i]
		f := r.Floors
		for _, d := range s.reviveDestinations(r.Group, r.Topic, &f) {
			if low, ok := from[d.topic]; !ok || *d.floor < low {
				from[d.topic] = *d.floor
			}
		}
	}
	stored := map[revivedKey]bool{}
	for topic, floor := range from {
		if err := s.scanRevived(topic, floor, stored); err != nil {
			return nil, err
		}
	}
	return stored, nil
}

// scanRevived adds to stored the messages named by the records of queue 0
// of topic from offset from on. A record that cannot be decoded is
// skipped (and logged): it names no message, so a revive it might have
// stored is put again, at least once rather than never.
func (s *Service) scanRevived(topic string, from int64, stored map[revivedKey]bool) error {
	low, err := s.cfg.CQ.MinOffset(topic, 0)
	if err != nil {
		return fmt.Errorf("min offset of %s: %w", topic, err)
	}
	for off := max(from, low); ; {
		entries, err := s.cfg.CQ.Get(topic, 0, off, 256)
		if err != nil {
			return fmt.Errorf("read %s@%d: %w", topic, off, err)
		}
		if len(entries) == 0 {
			return nil
		}
		for _, e := range entries {
			m, v, ok, err := s.readAt(topic, 0, e)
			if errors.Is(err, errUndecodable) {
				s.log.Warn().Err(err).Msg("revive: a record that cannot be decoded is taken for no stored revive")
				continue
			}
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if p, found := commitlog.LookupProperty(m.Properties, kvindex.PropertyRevivedFrom); found {
				if in, err := kvindex.ParseRevivedFrom(p); err == nil {
					stored[reviveKeyOf(&in)] = true
				}
			}
			v.Release()
		}
		off = entries[len(entries)-1].QueueOffset + 1
	}
}

// giveBack gives the messages of intents back, in b, to the checkpoints
// they came from: merged into a checkpoint of the same name still there
// (one whose other messages could not be read), else one made anew. After
// a failed put (failed) they are due again after reviveBackoff, with one
// more attempt; otherwise (a revive a crash cut short) due at now. The
// caller holds the queue's lock and deletes the intents' records.
func (s *Service) giveBack(b *kvindex.PopBatch, intents []*kvindex.ReviveIntent, now int64, failed bool) error {
	byName := map[kvindex.CheckpointName][]*kvindex.ReviveIntent{}
	var names []kvindex.CheckpointName
	for _, in := range intents {
		name := kvindex.CheckpointName{CKOffset: in.CKOffset, PopTime: in.PopTime}
		if byName[name] == nil {
			names = append(names, name)
		}
		byName[name] = append(byName[name], in)
	}
	for _, name := range names {
		ins := byName[name]
		first := ins[0]
		if failed && s.exhausted(first.Attempts) {
			for _, in := range ins {
				s.log.Warn().Str("group", in.Group).Str("topic", in.Topic).Int32("queue", in.QueueID).Int64("offset", in.QueueOffset).
					Int32("attempts", first.Attempts+1).Msg("revive: put failed too many times; dropped, not re-delivered (skipWhenCKRePutReachMaxTimes)")
			}
			continue
		}
		c := first.Checkpoint()
		c.Offsets = nil
		c.VisibleAt = now
		if failed {
			c.VisibleAt = retryAt(now, first.Attempts)
			c.Attempts++
		}
		old, ok, err := s.store.Checkpoint(first.Group, first.Topic, first.QueueID, name.CKOffset, name.PopTime)
		if err != nil {
			return err
		}
		if ok {
			c.Offsets = slices.Clone(old.Offsets)
			c.VisibleAt = min(c.VisibleAt, old.VisibleAt)
			c.Attempts = max(c.Attempts, old.Attempts)
		}
		for _, in := range ins {
			if !slices.Contains(c.Offsets, in.QueueOffset) {
				c.Offsets = append(c.Offsets, in.QueueOffset)
			}
		}
		slices.Sort(c.Offsets)
		if ok {
			if err := b.MoveCheckpoint(&old, &c); err != nil {
				return err
			}
		} else if err := b.PutCheckpoint(&c); err != nil {
			return err
		}
	}
	return nil
}

// retryAt is when a revive that failed after attempts earlier failures
// is tried again (reviveBackoff).
func retryAt(now int64, attempts int32) int64 {
	return now + reviveBackoff[min(int(attempts), len(reviveBackoff)-1)].Milliseconds()
}

// reviveIntents settles the revives a crash or a failed round cut short:
// it runs between revive rounds (first when the service starts), after
// the dispatcher caught up with the CommitLog. The messages of revive
// batches left that a record above their floors names were stored and
// are done; the others, and the intents an earlier version left in
// keyspace 0x57 (those whose put reached the CommitLog were deleted by
// the dispatcher), go back to their checkpoints: due at once after a
// crash, after reviveBackoff after a failed put (afterFailure). The
// revive rounds that follow put them.
func (s *Service) reviveIntents(ctx context.Context, afterFailure bool) (int, error) {
	if err := s.cfg.Broker.WaitDispatched(ctx); err != nil {
		return 0, fmt.Errorf("revive: wait for the dispatch of the CommitLog: %w", err)
	}
	type queueLeft struct {
		legacy  []kvindex.ReviveIntent
		batches []kvindex.ReviveBatch
	}
	byQueue := map[queueKey]*queueLeft{}
	var order []queueKey
	of := func(k queueKey) *queueLeft {
		q := byQueue[k]
		if q == nil {
			q = &queueLeft{}
			byQueue[k] = q
			order = append(order, k)
		}
		return q
	}
	if err := s.store.LegacyReviveIntents(func(in kvindex.ReviveIntent) bool {
		q := of(queueKey{in.Group, in.Topic, in.QueueID})
		q.legacy = append(q.legacy, in)
		return true
	}); err != nil {
		return 0, err
	}
	var all []kvindex.ReviveBatch
	if err := s.store.ReviveBatches(func(r kvindex.ReviveBatch) bool {
		q := of(queueKey{r.Group, r.Topic, r.QueueID})
		q.batches = append(q.batches, r)
		all = append(all, r)
		return true
	}); err != nil {
		return 0, err
	}
	stored, err := s.storedRevives(all)
	if err != nil {
		return 0, fmt.Errorf("revive: find what the puts a crash cut short stored: %w", err)
	}
	n := 0
	for _, k := range order {
		q := byQueue[k]
		m, err := s.settleQueue(k, q.legacy, q.batches, stored, afterFailure)
		n += m
		if err != nil {
			return n, err
		}
	}
	s.store.LegacyReviveIntentsDone()
	if n > 0 {
		what := "revive: messages whose revive a crash cut short before their put are due again"
		if afterFailure {
			what = "revive: messages a failed revive put did not store are back in their checkpoints"
		}
		s.log.Warn().Int("messages", n).Msg(what)
	}
	return n, nil
}

// settleQueue deletes one queue's intents and revive batches left by a
// crash or a failed round and gives the messages not stored back to their
// checkpoints (giveBack); it returns how many it gave back. The intents
// and batches a deletion of the topic deleted since they were read are
// left out: their messages are not given back to a checkpoint of the
// deleted topic.
func (s *Service) settleQueue(k queueKey, legacy []kvindex.ReviveIntent, batches []kvindex.ReviveBatch, stored map[revivedKey]bool, afterFailure bool) (int, error) {
	unlock := s.lock(k.group, k.topic, k.queueID)
	defer unlock()
	hold := s.store.HoldTopic(k.topic)
	defer hold.Release()
	var err error
	if legacy, err = stillStored(legacy, s.store.HasLegacyReviveIntent); err != nil {
		return 0, err
	}
	if batches, err = stillStored(batches, s.store.HasReviveBatch); err != nil {
		return 0, err
	}
	b := s.store.NewBatch()
	defer b.Close()
	return s.settle(b, legacy, batches, stored, s.now(), afterFailure)
}

// stillStored returns those of items that stored (the store's
// HasLegacyReviveIntent or HasReviveBatch) finds still stored.
func stillStored[T any](items []T, stored func(*T) (bool, error)) ([]T, error) {
	kept := items[:0:0]
	for i := range items {
		ok, err := stored(&items[i])
		if err != nil {
			return nil, err
		}
		if ok {
			kept = append(kept, items[i])
		}
	}
	return kept, nil
}

// settle deletes, in b, one queue's 0x57 intents and revive batches,
// gives their messages not stored back to their checkpoints (giveBack:
// failed says whether after a failed put) and commits b durably; it
// returns how many it gave back. The caller holds the queue's lock.
func (s *Service) settle(b *kvindex.PopBatch, legacy []kvindex.ReviveIntent, batches []kvindex.ReviveBatch, stored map[revivedKey]bool, now int64, failed bool) (int, error) {
	var left []*kvindex.ReviveIntent
	for i := range legacy {
		if err := b.DeleteReviveIntent(&legacy[i]); err != nil {
			return 0, err
		}
		left = append(left, &legacy[i])
	}
	var staged []kvindex.ReviveBatch
	for i := range batches {
		if err := b.DeleteReviveBatch(&batches[i]); err != nil {
			return 0, err
		}
		if batches[i].Staged {
			staged = append(staged, batches[i])
			continue
		}
		for _, in := range batches[i].Intents() {
			if !stored[reviveKeyOf(&in)] {
				left = append(left, &in)
			}
		}
	}
	if err := s.giveBack(b, left, now, failed); err != nil {
		return 0, err
	}
	unstaged, deadlines, err := s.unstage(b, staged, stored)
	if err != nil {
		return 0, err
	}
	if err := commitDurable(b); err != nil {
		return 0, err
	}
	for _, at := range deadlines {
		s.noteDeadline(at)
	}
	return len(left) + unstaged, nil
}

// putRevived puts the revived messages of k to their pop-retry topic and
// DLQ and reports whether all were put; while an acting master's revive
// runs they go to another broker group (putRemote), which also returns
// those it stored before a failure (a put to this broker's CommitLog
// returns none: the caller finds them there). The puts to the pop-retry
// topic are told to the Observer (Retried), as RocketMQ counts its
// revive's puts there; those to the DLQ are counted as dead letters by
// the broker.
func (s *Service) putRevived(ctx context.Context, k queueKey, retry, dlq []*commitlog.Message) ([]*commitlog.Message, bool) {
	if a := s.acting.Load(); a != nil {
		return s.putRemote(ctx, k, a.put, retry, dlq)
	}
	for i, msgs := range [][]*commitlog.Message{retry, dlq} {
		if len(msgs) == 0 {
			continue
		}
		if err := s.cfg.Broker.EnsureTopic(msgs[0].Topic); err != nil {
			s.log.Warn().Err(err).Str("topic", msgs[0].Topic).Msg("revive: create topic failed; retrying later")
			return nil, false
		}
		for _, batch := range putBatches(msgs) {
			status, err := s.cfg.Broker.Put(ctx, batch)
			if i == 0 {
				s.noteRetried(k.group, k.topic, len(batch), status, err)
			}
			if err != nil {
				s.log.Warn().Err(err).Str("topic", batch[0].Topic).Int("messages", len(batch)).Msg("revive: put failed; retrying later")
				return nil, false
			}
		}
	}
	return nil, true
}

// Revive puts messages of one topic in batches of at most
// revivePutMessages messages and revivePutBytes body bytes (a CommitLog
// batch is bounded by maxMessageSize).
const (
	revivePutMessages = 256
	revivePutBytes    = 1 << 20
)

// putBatches splits msgs into batches within the put bounds.
func putBatches(msgs []*commitlog.Message) [][]*commitlog.Message {
	var out [][]*commitlog.Message
	start, bytes := 0, 0
	for i, m := range msgs {
		if i > start && (i-start >= revivePutMessages || bytes+len(m.Body) > revivePutBytes) {
			out = append(out, msgs[start:i])
			start, bytes = i, 0
		}
		bytes += len(m.Body)
	}
	return append(out, msgs[start:])
}

// releaseViews releases the CommitLog views *views holds.
func releaseViews(views *[]*commitlog.View) {
	for _, v := range *views {
		v.Release()
	}
}

// maxReviveSpan bounds the offsets one ConsumeQueue read of a revive
// covers.
const maxReviveSpan = 8192

// readEntry reads the message at offset through its entry in entries, or
// through the ConsumeQueue when entries lacks it; see readAt for the view.
func (s *Service) readEntry(topic string, queueID int32, offset int64, entries map[int64]cq.Entry) (commitlog.Message, *commitlog.View, bool, error) {
	var (
		m   commitlog.Message
		v   *commitlog.View
		ok  bool
		err error
	)
	if e, found := entries[offset]; found {
		m, v, ok, err = s.readAt(topic, queueID, e)
	} else {
		m, v, ok, err = s.readMessage(topic, queueID, offset)
	}
	if err == nil && !ok && s.cfg.Compaction.Compacts(topic) {
		return s.readCopy(topic, queueID, offset)
	}
	return m, v, ok, err
}

// readCopy returns the copy a compacted topic keeps of the message at a
// queue offset whose record retention deleted; ok is false when there is
// none (a newer message of its key superseded it). The message is a copy:
// no view to release.
func (s *Service) readCopy(topic string, queueID int32, offset int64) (commitlog.Message, *commitlog.View, bool, error) {
	var found bool
	var m commitlog.Message
	err := s.cfg.Compaction.Read(topic, queueID, offset, func(off int64, _ []byte, cm *commitlog.Message) bool {
		if off == offset {
			m, found = *cm, true
			m.Body = append([]byte(nil), cm.Body...) // the body must outlive the read
		}
		return false
	})
	if err != nil {
		return commitlog.Message{}, nil, false, fmt.Errorf("%w: %w", errUndecodable, err)
	}
	return m, nil, found, nil
}

// reviveMessage builds the message a revive puts for m, the message of
// intent in (its group popped it from its topic at its popTime): to the
// group's pop-retry topic of the original topic with reconsumeTimes + 1,
// or to the group's DLQ once the message was already consumed maxTimes
// times, with the property naming the intent.
//
// The DLQ copy is the one RocketMQ's consumerSendMsgBack stores when its
// proxy forwards there a popped message consumed too often (RocketMQ's
// revive never moves one): RETRY_TOPIC names the topic of the record
// copied unless it has one, ORIGIN_MESSAGE_ID the record's offset id
// unless it has one that is not blank, and WAIT=false and DELAY=0 are
// set. No DLQ_ORIGIN_TOPIC nor DLQ_ORIGIN_MESSAGE_ID: RocketMQ 5.3.3
// writes them nowhere.
//
// A staged revive (stage.go) passes the time its copy may be handed out
// as gate (0: at once); the copy carries it as PropertyVisibleAt. A
// staged copy of the message is never copied along.
func (s *Service) reviveMessage(m *commitlog.Message, maxTimes int32, in *kvindex.ReviveIntent, gate int64) *commitlog.Message {
	group := in.Group
	origin := originalTopic(in.Topic, group)
	out := &commitlog.Message{
		QueueID: 0, Flag: m.Flag, SysFlag: m.SysFlag &^ (commitlog.FlagBornHostV6 | commitlog.FlagStoreHostV6),
		BornTimestamp: m.BornTimestamp, BornHost: s.cfg.StoreHost, StoreHost: s.cfg.StoreHost,
		ReconsumeTimes: m.ReconsumeTimes + 1, Body: m.Body,
	}
	var set [][2]string
	if m.ReconsumeTimes >= maxTimes {
		out.Topic = meta.DLQTopic(group)
		set = append(meta.SendBackProperties(m), [2]string{propDelay, "0"})
	} else {
		out.Topic = s.reviveTopic(origin, group)
		if _, ok := commitlog.LookupProperty(m.Properties, PropertyFirstPopTime); !ok || m.ReconsumeTimes == 0 {
			set = [][2]string{{PropertyFirstPopTime, strconv.FormatInt(in.PopTime, 10)}}
		}
	}
	set = append(set, [2]string{kvindex.PropertyRevivedFrom, in.PropertyValue()})
	set = stagedSet(set, out.Topic, in, gate)
	out.Properties = commitlog.RewriteProperties(m.Properties, []string{PropertyPopCK, PropertyVisibleAt, propertyStagedFrom}, set...)
	return out
}

// originalTopic returns the topic a pop-retry topic of group retries, or
// topic itself.
func originalTopic(topic, group string) string {
	p := meta.RetryGroupTopicPrefix + group
	if len(topic) > len(p)+1 && topic[:len(p)] == p && (topic[len(p)] == '_' || topic[len(p)] == '+') {
		return topic[len(p)+1:]
	}
	return topic
}

// ReviveStats are counters of the revive loop.
type ReviveStats struct {
	// Retried and DLQ count messages re-put to pop-retry topics and DLQs.
	Retried, DLQ int64
	// Undecodable counts messages a revive dropped because their record
	// could not be decoded.
	Undecodable int64
	// LatenessMillis are samples of how late after their deadline records
	// were revived (the most recent ones, at most 65536).
	LatenessMillis []int64
}

// ReviveStats returns the revive counters.
func (s *Service) ReviveStats() ReviveStats {
	return ReviveStats{Retried: s.revived.Load(), DLQ: s.dlq.Load(), Undecodable: s.undecodable.Load(), LatenessMillis: s.lateness.samples()}
}

// lateness keeps the most recent revive lateness samples.
type lateness struct {
	mu   sync.Mutex
	buf  []int64
	next int
}

const latenessSamples = 1 << 16

// addN adds n samples of ms.
func (l *lateness) addN(ms int64, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for range n {
		if len(l.buf) < latenessSamples {
			l.buf = append(l.buf, ms)
			continue
		}
		l.buf[l.next] = ms
		l.next = (l.next + 1) % latenessSamples
	}
}

func (l *lateness) samples() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.buf...)
}
