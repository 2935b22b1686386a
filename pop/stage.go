package pop

// Staged revive (Config.StageAhead): re-putting messages before their
// deadline so that a burst of deadlines does not wait for revive.
//
// Revive re-puts what is due at some 100,000 messages a second on two
// cores; a million pops made within a few seconds and left unacknowledged
// come due within those seconds, and the last of them would wait ten. The
// staged revive does that work ahead, while revive is idle: when the
// messages due in the next moments would take longer to re-put than the
// time left before their deadlines (plan), it copies them to the pop-retry
// topic in deadline order, each copy carrying PropertyVisibleAt, and marks
// their checkpoints staged (kvindex.Checkpoint.Staged: their deadline
// entry moves to a backstop stageBackstop past the copies' time, when
// revive re-delivers what no pop took the copy of). A pop of a pop-retry
// queue stops at the first
// copy whose PropertyVisibleAt lies ahead (the copies of a staging round
// all carry the round's last deadline, and rounds go forward in deadline
// order, so the queue's copies come in order of that time), and hands out
// a copy only while its message is still in its staged checkpoint,
// removing it there in the same commit: a message acknowledged, or given a
// new invisible time, before its deadline leaves its copy to be skipped.
//
//	deadlines:    |--- due now: revive ---|--- staged ahead ---|--- not yet ---|
//	                                   now            frontier      now+StageAhead
//
// Staging writes the same revive batches as revive (one durable commit of
// the staged checkpoints and their batches before the put), so a crash
// settles them the same way: the copies a put stored stay staged, and a
// checkpoint with a copy not stored is unstaged, to be revived at its
// deadline (its stored copies are then skipped).
//
// A checkpoint is staged only when all of its messages can be copied now
// to the pop-retry topic: not when one goes to the DLQ (a DLQ copy cannot
// wait), cannot be read, or the checkpoint failed a revive before; those
// are revived at their deadline. Nor while an acting master's revive runs.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// PropertyVisibleAt is the property of a staged revive's copy: when it
// may be handed out, in ms since the epoch (the last deadline of its
// staging round). Pops never hand the copy out before.
const PropertyVisibleAt = "RKV_VISIBLE_AT"

// propertyStagedFrom is the property of a staged revive's copy that names
// the checkpoint of its message: ckOffset/popTime (with the group, topic
// and queue of kvindex.PropertyRevivedFrom). Pops read it to find the
// checkpoint; it is not handed out.
const propertyStagedFrom = "RKV_STAGED_FROM"

// stager is the staged revive's state, used by the revive goroutine only.
type stager struct {
	// frontier is the deadline staging goes on from: every checkpoint
	// due before it that is still unstaged is left to revive. It only
	// goes forward, so the copies' PropertyVisibleAt do too.
	frontier int64
	// until is the last deadline the current plan stages to.
	until int64
	// nextPlan is when plan looks ahead again.
	nextPlan int64
	// rate estimates the messages a second revive re-puts.
	rate float64
}

const (
	// stageInitialRate is the re-put rate assumed before one is
	// measured: on the low side, so staging starts early rather than
	// late.
	stageInitialRate = 20000
	// stageSlack is how much earlier than the estimate a staging run
	// starts.
	stageSlack = time.Second
	// stagePlanEvery is how often plan looks ahead while no run goes on.
	stagePlanEvery = time.Second
	// stageSpan bounds the deadlines of one staging round: its copies
	// are handed out at its last deadline, so the earliest of them wait
	// at most this long past theirs.
	stageSpan = 50 * time.Millisecond
	// stagePlanScan bounds the deadline entries one plan reads (some
	// 10 ms a second): what lies past them is seen by the plans that
	// come as the entries before it fall due.
	stagePlanScan = 1 << 16
	// stageRateSample is the least number of messages a round must
	// handle for its rate to count.
	stageRateSample = 256
	// stageBackstop is how long after a staged copy's time revive
	// re-delivers its message itself when no pop took the copy (it was
	// filtered out, deleted by retention, passed by an offset reset or
	// never read): the staged checkpoint's deadline entry is there.
	stageBackstop = 5 * time.Minute
)

// startStager sets the frontier of a service starting where the copies an
// earlier run staged end (kvindex.PopStore.StageFrontier), so that their
// order holds. Without one (a store that never staged, or a slave promoted
// with its master's copies in its pop-retry queues but not the master's
// frontier) or when it cannot be read, staging starts past
// now+StageAhead, beyond any time an earlier run can have given.
func (s *Service) startStager() {
	s.stage = stager{rate: stageInitialRate}
	at, ok, err := s.store.StageFrontier()
	if err != nil {
		s.log.Error().Err(err).Msg("revive: the staged revive's frontier not read; staging starts past the look-ahead")
	}
	if err != nil || !ok {
		at = s.now() + s.cfg.StageAhead.Milliseconds()
	}
	s.stage.frontier = at
}

// noteRate folds a round's throughput into the re-put rate estimate.
func (st *stager) noteRate(messages int, took time.Duration) {
	if messages < stageRateSample || took <= 0 {
		return
	}
	r := float64(messages) / took.Seconds()
	st.rate = 0.7*st.rate + 0.3*r
}

// StageOnce runs one staging round when a plan calls for one and returns
// how many messages it staged. It runs on the revive goroutine only (or
// in tests, instead of it).
func (s *Service) StageOnce(ctx context.Context) (int, error) {
	if s.cfg.StageAhead <= 0 || s.acting.Load() != nil {
		return 0, nil
	}
	now := s.now()
	from := max(s.stage.frontier, now+1)
	if from > s.stage.until {
		if now < s.stage.nextPlan {
			return 0, nil
		}
		s.stage.nextPlan = now + stagePlanEvery.Milliseconds()
		until, err := s.plan(now, from)
		if err != nil || until == 0 {
			return 0, err
		}
		s.stage.until = until
	}
	next, ok, err := s.store.NextDue(from, s.stage.until)
	if err != nil {
		return 0, err
	}
	if !ok {
		s.stage.frontier = s.stage.until + 1
		return 0, nil
	}
	before := min(s.stage.until, next+stageSpan.Milliseconds())
	r, err := s.dueRound(next, before)
	if err != nil {
		return 0, err
	}
	// Every copy of the round is handed out from its last deadline.
	scanned, gate := r.scanned, r.lastDue
	t0 := time.Now()
	staged, err := s.stageQueues(ctx, r.order, r.byQueue, gate, now)
	if err != nil {
		return staged, err
	}
	s.stage.noteRate(staged, time.Since(t0))
	switch {
	case scanned < s.cfg.ReviveBatch:
		s.stage.frontier = before + 1
	case staged == 0:
		s.stage.frontier = gate + 1
	default:
		// A full round: entries at its last deadline may be left; they
		// are staged next with the same time, which keeps the order.
		s.stage.frontier = gate
	}
	if staged > 0 {
		s.log.Debug().Int("messages", staged).Int64("visibleAt", gate).Msg("revive: staged ahead of their deadline")
	}
	return staged, nil
}

// plan looks at the deadlines from from to now+StageAhead and returns the
// last one staging must start for now: one whose messages, with all due
// before it from from on, would take longer to re-put at the estimated
// rate than the time left before it (less stageSlack). 0: none.
func (s *Service) plan(now, from int64) (int64, error) {
	horizon := now + s.cfg.StageAhead.Milliseconds()
	if from > horizon {
		return 0, nil
	}
	perMessage := 1000 / s.stage.rate // ms
	slack := stageSlack.Milliseconds()
	var until int64
	messages, entries := 0, 0
	err := s.store.DueEntries(from, horizon, 0, func(d kvindex.DueEntry) bool {
		messages += d.Count
		entries++
		if float64(messages)*perMessage >= float64(d.VisibleAt-now-slack) {
			until = d.VisibleAt
		}
		return entries < stagePlanScan
	})
	return until, err
}

// stageQueues stages the due entries of each queue, a few queues at once
// as revive rounds do, and returns how many messages it staged.
func (s *Service) stageQueues(ctx context.Context, order []queueKey, byQueue map[queueKey][]kvindex.DueEntry, gate, now int64) (int, error) {
	return s.eachQueue(ctx, order, func(k queueKey) (int, error) {
		return s.stageQueue(ctx, k, byQueue[k], gate, now)
	})
}

// stageQueue copies the messages of one queue's checkpoints due in the
// round to the pop-retry topic with PropertyVisibleAt gate, marking the
// checkpoints staged; a checkpoint it cannot stage whole is left to
// revive. It returns how many messages it staged.
func (s *Service) stageQueue(ctx context.Context, k queueKey, due []kvindex.DueEntry, gate, now int64) (int, error) {
	unlock := s.lock(k.group, k.topic, k.queueID)
	defer unlock()
	hold := s.store.HoldTopic(k.topic)
	defer hold.Release()
	if gone, err := s.topicGone(originalTopic(k.topic, k.group)); err != nil || gone {
		return 0, err // revive drops its checkpoints at their deadline
	}
	maxTimes, groupExists, err := s.cfg.Broker.RetryMaxTimes(k.group)
	if err != nil || !groupExists {
		return 0, err
	}
	var cks []kvindex.Checkpoint
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	err = s.store.ReadCheckpoints(k.group, k.topic, k.queueID, dueNames(due), func(i int, c kvindex.Checkpoint, ok bool) error {
		// Acked or moved since the scan, or revived once already and
		// failed: left as it is.
		if ok && c.VisibleAt == due[i].VisibleAt && !c.Staged && c.Attempts == 0 {
			cks = append(cks, c)
			first, last = min(first, c.Offsets[0]), max(last, c.Offsets[len(c.Offsets)-1])
		}
		return nil
	})
	if err != nil || len(cks) == 0 {
		return 0, err
	}
	entries, err := s.entriesOf(k.topic, k.queueID, first, last)
	if err != nil {
		return 0, err
	}
	var views []*commitlog.View
	defer releaseViews(&views)
	floors, err := s.floors(k.group, k.topic)
	if err != nil {
		return 0, err
	}
	var out []revived
	var batches []kvindex.ReviveBatch // one per checkpoint staged, as it is stored
	for i := range cks {
		c := &cks[i]
		copies, ok := s.stageCopies(c, entries, maxTimes, gate, &views)
		if !ok {
			continue
		}
		out = append(out, copies...)
		batches = append(batches, kvindex.ReviveBatch{Checkpoint: *c, Floors: floors})
	}
	if len(batches) == 0 {
		return 0, nil
	}
	b := s.store.NewBatch()
	defer b.Close()
	backstop := gate + stageBackstop.Milliseconds()
	for i := range batches {
		if err := b.StageCheckpoint(&batches[i].Checkpoint, backstop); err != nil {
			return 0, err
		}
		// The batch carries the mark: settle unstages it when a copy
		// was not stored.
		batches[i].Staged = true
		if err := b.PutReviveBatch(&batches[i]); err != nil {
			return 0, err
		}
	}
	// Every round's time is at or past the last one's.
	if err := b.SetStageFrontier(gate); err != nil {
		return 0, err
	}
	if err := commitDurable(b); err != nil {
		return 0, err
	}
	if put, err := s.putIntents(ctx, k, out, batches, now); err != nil || !put {
		return 0, err
	}
	s.staged.Add(int64(len(out)))
	// Late by how long the copies wait past their deadline for the
	// round's last one, at most stageSpan.
	for i := range batches {
		s.lateness.addN(gate-batches[i].VisibleAt, len(batches[i].Offsets))
	}
	// Pops held on the pop-retry queue wake when the copies may be
	// handed out.
	s.gates.arm(queueKey{k.group, s.reviveTopic(originalTopic(k.topic, k.group), k.group), 0}, gate, s.now(), true)
	return len(out), nil
}

// stageCopies builds the copies of every message of c, each with
// PropertyVisibleAt gate, adding the views their bodies alias to views;
// ok is false when c is not to be staged: a message goes to the DLQ, or
// cannot be read (gone to retention included: revive drops it).
func (s *Service) stageCopies(c *kvindex.Checkpoint, entries map[int64]cq.Entry, maxTimes int32, gate int64, views *[]*commitlog.View) ([]revived, bool) {
	out := make([]revived, 0, len(c.Offsets))
	var mine []*commitlog.View
	for _, off := range c.Offsets {
		m, v, ok, err := s.readEntry(c.Topic, c.QueueID, off, entries)
		if err != nil || !ok || m.ReconsumeTimes >= maxTimes {
			if v != nil {
				v.Release()
			}
			for _, v := range mine {
				v.Release()
			}
			return nil, false
		}
		if v != nil {
			mine = append(mine, v)
		}
		in := kvindex.IntentOf(c, off)
		out = append(out, revived{msg: s.reviveMessage(&m, maxTimes, &in, gate), intent: in})
	}
	*views = append(*views, mine...)
	return out, true
}

// unstage takes the staged mark off the checkpoints of staged revive
// batches whose put did not store every copy, in b: revive then
// re-delivers their messages at their deadline, and a pop skips the copies
// that were stored (their checkpoint is no longer staged). The caller
// holds the queue's lock, and reports the deadlines it returns
// (noteDeadline) once b is committed: they may lie behind the revive
// cursor. It returns how many messages are due again.
func (s *Service) unstage(b *kvindex.PopBatch, batches []kvindex.ReviveBatch, stored map[revivedKey]bool) (n int, deadlines []int64, err error) {
	for i := range batches {
		r := &batches[i]
		whole := true
		for _, in := range r.Intents() {
			whole = whole && stored[reviveKeyOf(&in)]
		}
		if whole {
			continue
		}
		c, ok, err := s.store.Checkpoint(r.Group, r.Topic, r.QueueID, r.CKOffset, r.PopTime)
		if err != nil {
			return n, deadlines, err
		}
		if !ok || !c.Staged {
			continue // acknowledged meanwhile
		}
		if err := b.UnstageCheckpoint(&c); err != nil {
			return n, deadlines, err
		}
		n += len(c.Offsets)
		deadlines = append(deadlines, c.PopTime+c.InvisibleTime)
	}
	return n, deadlines, nil
}

// stagedCopy reads the staged-revive properties of a pop-retry record:
// when it may be handed out (staged false: it carries none, or one that
// is not a number) and the checkpoint of the message it copies (named
// false: none named).
func stagedCopy(rec []byte) (visibleAt int64, from stagedName, staged, named bool) {
	m, err := commitlog.Decode(rec)
	if err != nil {
		return 0, from, false, false
	}
	v, ok := commitlog.LookupProperty(m.Properties, PropertyVisibleAt)
	if !ok {
		return 0, from, false, false
	}
	visibleAt, err = strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, from, false, false
	}
	// Only a staged revive's copy, which names its checkpoint, waits: a
	// record of the topic put otherwise with the property does not.
	ck, ok := commitlog.LookupProperty(m.Properties, propertyStagedFrom)
	if !ok {
		return 0, from, false, false
	}
	p, ok := commitlog.LookupProperty(m.Properties, kvindex.PropertyRevivedFrom)
	if !ok {
		return visibleAt, from, true, false
	}
	in, err := kvindex.ParseRevivedFrom(p)
	if err != nil {
		return visibleAt, from, true, false
	}
	ckOffset, popTime, ok := strings.Cut(ck, "/")
	if !ok {
		return visibleAt, from, true, false
	}
	from = stagedName{queueKey: queueKey{in.Group, in.Topic, in.QueueID}, offset: in.QueueOffset}
	if from.ckOffset, err = strconv.ParseInt(ckOffset, 10, 64); err != nil {
		return visibleAt, from, true, false
	}
	if from.popTime, err = strconv.ParseInt(popTime, 10, 64); err != nil {
		return visibleAt, from, true, false
	}
	return visibleAt, from, true, true
}

// stagedFromValue is the propertyStagedFrom value of the copy of in.
func stagedFromValue(in *kvindex.ReviveIntent) string {
	return strconv.FormatInt(in.CKOffset, 10) + "/" + strconv.FormatInt(in.PopTime, 10)
}

// cutAtGate drops from r the staged copies not to be handed out before a
// later time than now, and all after the first of them; r.next becomes
// its offset. It returns that time (0: none).
func cutAtGate(r *readResult, now int64) int64 {
	for i, rec := range r.records {
		if rec == nil {
			continue
		}
		if at, _, staged, _ := stagedCopy(rec); staged && at > now {
			r.truncateKept(i, i)
			return at
		}
	}
	return 0
}

// admission is what a pop of a pop-retry queue holds for the staged copies
// it hands out: the checkpoints of their messages with those removed, to
// be rewritten in the pop's commit, and the locks and topic holds of
// their queues, released by finish.
type admission struct {
	s         *Service
	originals map[stagedName]*kvindex.Checkpoint
	order     []stagedName
	queues    []queueKey
	// lowest is the smallest offset taken of each queue.
	lowest  map[queueKey]int64
	release []func()
	// gateAt is the time of the first copy not to be handed out yet (0:
	// none met); busy is set when the lock of a copy's queue was taken.
	gateAt int64
	busy   bool
}

// stagedName names the message a staged copy copies: its queue and
// offset, and its checkpoint (ckOffset, popTime).
type stagedName struct {
	queueKey
	offset            int64
	ckOffset, popTime int64
}

// checkpoint is the name of n's checkpoint alone.
func (n stagedName) checkpoint() stagedName {
	n.offset = 0
	return n
}

// admitCopies takes out of r (a pop of group's pop-retry queue src, whose
// lock the caller holds) what a pop must not hand out: the staged copies
// not yet visible at now and everything after the first of them, and the
// copies whose message is no longer in its staged checkpoint (acked or
// given a new invisible time before its deadline, or unstaged after a
// put that failed), which are skipped. A copy whose queue's lock another
// goroutine holds ends the pop's read there. The caller writes the
// admission's checkpoints in the pop's commit and then calls finish.
func (s *Service) admitCopies(req PopRequest, src source, r *readResult, now int64) (*admission, error) {
	a := &admission{s: s, originals: map[stagedName]*kvindex.Checkpoint{}, lowest: map[queueKey]int64{}}
	own := s.stripeIndex(req.Group, src.topic, src.queueID)
	locked := map[int]bool{own: true}
	// Stripes above every one held are waited for; the others only taken
	// when free: every wait is then for a stripe above all its waiter
	// holds, so no two admissions wait for each other (other users of
	// the stripes hold one at a time). Once the admission holds another
	// topic against its deletion, it waits for no stripe: the holder of
	// that stripe could be waiting for the deletion, and the deletion for
	// the admission's hold.
	highest, holding := own, false
	held := map[string]bool{src.topic: true}
	gone := map[string]bool{}
	keep := 0
	n := len(r.offsets)
	for i := 0; i < n; i++ {
		rec := r.records[i]
		handOut := true
		if rec != nil {
			at, in, staged, named := stagedCopy(rec)
			if staged && at > now {
				a.gateAt = at
				r.truncateKept(keep, i)
				return a, nil
			}
			if staged && named && in.group == req.Group {
				if m := s.stripeIndex(in.group, in.topic, in.queueID); !locked[m] {
					mu := &s.locks[m]
					if m > highest && !holding {
						mu.Lock()
						highest = m
					} else if !mu.TryLock() {
						a.busy = true
						r.truncateKept(keep, i)
						return a, nil
					}
					locked[m] = true
					a.release = append(a.release, mu.Unlock)
				}
				if !held[in.topic] {
					release, live, err := s.holdLive(req, in.topic)
					a.release = append(a.release, release)
					if err != nil {
						a.finish()
						return nil, err
					}
					held[in.topic], gone[in.topic], holding = true, !live, true
				}
				var err error
				if handOut, err = a.take(in, gone[in.topic]); err != nil {
					a.finish()
					return nil, err
				}
			}
		}
		if handOut {
			r.offsets[keep], r.records[keep], r.entries[keep] = r.offsets[i], r.records[i], r.entries[i]
			keep++
		}
	}
	r.offsets, r.records, r.entries = r.offsets[:keep], r.records[:keep], r.entries[:keep]
	r.recount()
	return a, nil
}

// truncateKept ends r at the message at index cut, of which the first
// kept were kept.
func (r *readResult) truncateKept(kept, cut int) {
	r.next = r.entries[cut].QueueOffset
	r.offsets, r.records, r.entries = r.offsets[:kept], r.records[:kept], r.entries[:kept]
	r.recount()
}

// recount sets r.bytes from its messages.
func (r *readResult) recount() {
	r.bytes = 0
	for i, rec := range r.records {
		if rec != nil {
			r.bytes += len(rec)
		} else {
			r.bytes += int(r.entries[i].Size)
		}
	}
}

// take decides whether the staged copy of the message in names is handed
// out: only while the message is still in its staged checkpoint, from
// which it is removed. The caller holds the lock and a hold of its queue;
// gone says the topic was deleted since the pop began.
func (a *admission) take(in stagedName, gone bool) (bool, error) {
	if gone {
		return false, nil
	}
	name := in.checkpoint()
	c := a.originals[name]
	if c == nil {
		got, ok, err := a.s.store.Checkpoint(in.group, in.topic, in.queueID, in.ckOffset, in.popTime)
		if err != nil {
			return false, fmt.Errorf("staged copy of %s/%d@%d: %w", in.topic, in.queueID, in.offset, err)
		}
		if !ok || !got.Staged {
			return false, nil
		}
		c = &got
		a.originals[name] = c
		a.order = append(a.order, name)
		if !containsQueue(a.queues, name.queueKey) {
			a.queues = append(a.queues, name.queueKey)
		}
	}
	if len(c.Remove([]int64{in.offset})) == 0 {
		return false, nil
	}
	if low, ok := a.lowest[name.queueKey]; !ok || in.offset < low {
		a.lowest[name.queueKey] = in.offset
	}
	return true, nil
}

func containsQueue(qs []queueKey, k queueKey) bool {
	for _, q := range qs {
		if q == k {
			return true
		}
	}
	return false
}

// write rewrites, in b, the checkpoints whose copies the pop hands out.
func (a *admission) write(b *kvindex.PopBatch) error {
	if a == nil {
		return nil
	}
	for _, name := range a.order {
		if err := b.RewriteCheckpoint(a.originals[name]); err != nil {
			return err
		}
	}
	return nil
}

// committed moves the committed offsets of the queues whose staged
// checkpoints the pop's commit changed, once it is committed, and wakes
// pops the in-flight threshold held on them.
func (a *admission) committed() error {
	if a == nil {
		return nil
	}
	if len(a.queues) == 0 {
		return nil
	}
	// The pop's commit took the copies' messages out of their staged
	// checkpoints: pops the threshold held on those queues may go on,
	// whether the offsets move or not.
	defer func() {
		for _, k := range a.queues {
			a.s.wakeReleased(k.group, k.topic, k.queueID)
		}
	}()
	b := a.s.store.NewBatch()
	defer b.Close()
	for _, k := range a.queues {
		// The committed offset is the smallest offset in flight: it moves
		// only when that was among the messages taken.
		cur, has, err := a.s.cfg.Offsets.Get(k.group, k.topic, k.queueID)
		if err != nil {
			return err
		}
		if has && cur < a.lowest[k] {
			continue
		}
		pos, _, err := a.s.store.Position(k.group, k.topic, k.queueID)
		if err != nil {
			return err
		}
		if err := a.s.committedFrom(b, k.group, k.topic, k.queueID, pos, cur, has, nil); err != nil {
			return err
		}
	}
	if !b.Empty() {
		if err := b.Commit(false); err != nil {
			return err
		}
	}
	return nil
}

// finish releases the locks and holds of the admission.
func (a *admission) finish() {
	if a == nil {
		return
	}
	for i := len(a.release) - 1; i >= 0; i-- {
		a.release[i]()
	}
	a.release = nil
}

// stageBusyRetry is how soon the pops held on a pop-retry queue wake again
// when a pop stopped at a staged copy whose message's queue another
// goroutine held.
const stageBusyRetry = 5 * time.Millisecond

// waitForGate makes the pops held on a pop-retry queue whose read stopped
// at a staged copy wake when it may be handed out, or soon when the pop
// stopped at a busy lock.
func (s *Service) waitForGate(group string, src source, adm *admission) {
	k := queueKey{group, src.topic, src.queueID}
	now := s.now()
	switch {
	case adm.gateAt > 0:
		s.gates.arm(k, adm.gateAt, now, true)
	case adm.busy:
		s.gates.arm(k, now+stageBusyRetry.Milliseconds(), now, true)
	}
}

// headGated reports whether the message at pos of the pop-retry queue k
// is a staged copy not to be handed out yet, making the held pops of k
// wake when it may be.
func (s *Service) headGated(k queueKey, pos int64) (bool, error) {
	es, err := s.cfg.CQ.Get(k.topic, k.queueID, pos, 1)
	if err != nil || len(es) == 0 {
		return false, err
	}
	v, err := s.cfg.Log.Read(es[0].PhyOffset, es[0].Size)
	if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s/%d@%d: %w", k.topic, k.queueID, pos, err)
	}
	defer v.Release()
	now := s.now()
	if at, _, staged, _ := stagedCopy(v.Data); staged && at > now {
		s.gates.arm(k, at, now, true)
		return true, nil
	}
	return false, nil
}

// dropSettledCopies takes out of r, read by a slave's read-only pop (or a
// peek, with requireStaged) of one of group's pop-retry queues, the staged
// copies whose message the POP state does not hold in flight: acknowledged
// or given a new invisible time before its deadline, as far as that state
// knows. A peek, on the master's own state, also leaves out a copy whose
// checkpoint is no longer staged, as a pop skips it. A slave keeps a copy
// whose message its state holds, staged or not: its copy of the master's
// state may be older than the staging, and the master's own pops, once it
// is back, start from its own position, so a copy a slave skips is only
// delayed, one it hands out at most duplicated. Nothing of the state is
// changed.
func (s *Service) dropSettledCopies(group string, r *readResult, requireStaged bool) error {
	keep := 0
	for i, rec := range r.records {
		if rec != nil {
			if _, in, staged, named := stagedCopy(rec); staged && named && in.group == group {
				c, ok, err := s.store.Checkpoint(in.group, in.topic, in.queueID, in.ckOffset, in.popTime)
				if err != nil {
					return fmt.Errorf("staged copy of %s/%d@%d: %w", in.topic, in.queueID, in.offset, err)
				}
				if !ok || !c.Contains(in.offset) || (requireStaged && !c.Staged) {
					continue
				}
			}
		}
		r.offsets[keep], r.records[keep], r.entries[keep] = r.offsets[i], r.records[i], r.entries[i]
		keep++
	}
	r.offsets, r.records, r.entries = r.offsets[:keep], r.records[:keep], r.entries[:keep]
	r.recount()
	return nil
}

// StagedCount returns how many messages staged revives copied ahead of
// their deadline.
func (s *Service) StagedCount() int64 { return s.staged.Load() }

// stagedSet adds to set the properties of a staged copy of in's message
// to topic, when gate is set: a copy for the DLQ is never staged.
func stagedSet(set [][2]string, topic string, in *kvindex.ReviveIntent, gate int64) [][2]string {
	if gate > 0 && topic != meta.DLQTopic(in.Group) {
		set = append(set, [2]string{PropertyVisibleAt, strconv.FormatInt(gate, 10)},
			[2]string{propertyStagedFrom, stagedFromValue(in)})
	}
	return set
}
