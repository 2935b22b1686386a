package pop

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
)

// PopRequest is one POP_MESSAGE.
type PopRequest struct {
	Group string
	Topic string
	// QueueID is the queue to pop, or -1 for every readable queue.
	QueueID int32
	// MaxMsgNums is the most messages to return (0..MaxPopMessages; with
	// 0 the pop reads nothing, only pins the group's start on each queue
	// and counts what is left, as RocketMQ's pop of a full batch).
	MaxMsgNums int
	// InvisibleTime is how long the messages stay invisible (ms).
	InvisibleTime int64
	// InitMode places a group that has no position on a queue yet.
	InitMode int32
	// Order asks for an orderly pop.
	Order bool
	// AttemptID identifies a client's retries of one orderly pop.
	AttemptID string
	// Filter selects messages of Topic and of the group's pop-retry topics
	// (a revived message the group no longer selects is skipped, as
	// RocketMQ's pop reads its retry topic with the pop's filter).
	Filter Filter
	// Body, when set, is a buffer the result's Body is built in (from its
	// start; it grows by reallocation when too small), so that a caller
	// can recycle response bodies.
	Body []byte

	// deletions is the store's TopicDeletions before the pop checked
	// that its topics exist.
	deletions uint64
}

// PopResult is what a pop returns: the response body records and the
// response header fields.
type PopResult struct {
	// Records are the stored records to send back to back: raw for the
	// requested topic, re-encoded under the requested topic with POP_CK
	// for pop-retry messages. Each is a sub-slice of Body.
	Records [][]byte
	// Body is Records back to back: the response body, built by copying
	// each record once from the CommitLog.
	Body []byte
	// ends are the end offsets of the records in Body while they are
	// added; finish turns them into Records.
	ends []int

	// PopTime, InvisibleTime and ReviveQID are the response header's
	// fields, which every handle of the pop repeats.
	PopTime       int64
	InvisibleTime int64
	ReviveQID     int32
	// RestNum counts messages left behind in the queues read (not those
	// an orderly batch locks: no pop of the group gets them before the
	// batch is acknowledged or its lock runs out).
	RestNum int64
	// LowestPhy is the smallest of the CommitLog offsets of the last
	// entry each queue read, -1 when none was read: how far behind the
	// log's end the pop read (the broker's disableConsumeIfConsumerReadSlowly).
	LowestPhy       int64
	StartOffsetInfo string
	MsgOffsetInfo   string
	OrderCountInfo  string
}

// noteRead folds the CommitLog offset of a queue read's last entry (-1:
// none) into LowestPhy.
func (r *PopResult) noteRead(lastPhy int64) {
	if lastPhy >= 0 && (r.LowestPhy < 0 || lastPhy < r.LowestPhy) {
		r.LowestPhy = lastPhy
	}
}

// source is one queue a pop reads.
type source struct {
	topic   string
	queueID int32
	flag    string
	filter  Filter
}

// Pop pops messages: pop-retry topics first on Config.RetryFirstPercent of
// a group's requests of a topic (every fifth by default; otherwise after
// the requested queues while the batch is not full), each queue from the
// group's pop position, recording every delivered message in flight
// before returning. Orderly pops read from the committed offset and lock
// the queue instead (order.go).
func (s *Service) Pop(req PopRequest) (PopResult, error) {
	res, err := s.pop(req)
	res.finish()
	return res, err
}

// add appends one record of topic to the result, without a revive's own
// property (kvindex.AppendShown): a pop of a dead-letter queue reads the
// records a revive put there as they are stored. Records of other topics
// cannot hold it and are appended without being parsed.
func (res *PopResult) add(topic string, rec []byte) {
	if kvindex.HoldsRevived(topic) {
		res.Body = kvindex.AppendShown(res.Body, rec)
	} else {
		res.Body = append(res.Body, rec...)
	}
	res.ends = append(res.ends, len(res.Body))
}

// count is how many records were added.
func (res *PopResult) count() int { return len(res.ends) }

// finish slices Records out of Body.
func (res *PopResult) finish() {
	res.Records = make([][]byte, len(res.ends))
	start := 0
	for i, end := range res.ends {
		res.Records[i] = res.Body[start:end:end]
		start = end
	}
	res.ends = nil
}

func (s *Service) pop(req PopRequest) (PopResult, error) {
	res := PopResult{PopTime: s.now(), InvisibleTime: req.InvisibleTime, Body: req.Body[:0], LowestPhy: -1}
	if req.Order {
		res.ReviveQID = OrderReviveQueue
	}
	// Read before the topics are checked: a deletion that ends after the
	// checks makes the writes of the queues held after it check again.
	req.deletions = s.store.TopicDeletions()
	sources, err := s.popSources(req)
	if err != nil || sources == nil {
		return res, err
	}
	var info InfoBuilder
	var dur durability
	defer dur.release()
	var busy []source
	// First pass: skip queues another pop of the group is reading. When
	// that leaves the pop empty, wait for them in a second pass rather
	// than answer nothing while messages wait.
	for pass := 0; pass < 2; pass++ {
		for _, src := range sources {
			remain := req.MaxMsgNums - res.count()
			if res.count() > 0 && len(res.Body) >= maxPopBody {
				remain = 0 // the rest is counted, not read
			}
			var skipped bool
			var err error
			if req.Order {
				skipped, err = s.popOrderQueue(req, src, remain, pass == 1, &res, &info, &dur)
			} else {
				skipped, err = s.popQueue(req, src, remain, pass == 1, &res, &info, &dur)
			}
			if err != nil {
				return res, err
			}
			if skipped {
				busy = append(busy, src)
			}
		}
		if res.count() > 0 || len(busy) == 0 {
			break
		}
		sources, busy = busy, nil
	}
	// Queues skipped because another pop of the group held them, and not
	// waited for since this pop found messages elsewhere: their messages
	// are left behind too.
	for _, src := range busy {
		if err := s.addRest(req, src, &res); err != nil {
			return res, err
		}
	}
	res.StartOffsetInfo = info.StartOffsetInfo()
	res.MsgOffsetInfo = info.MsgOffsetInfo()
	res.OrderCountInfo = info.OrderCountInfo()
	if err := dur.finish(s); err != nil {
		return res, err
	}
	return res, nil
}

// popSources lists the queues a pop reads, in the order it reads them:
// the requested queue (or every readable queue of the topic, from a
// different one at each pop of the group) and, for non-orderly pops, the
// group's pop-retry queues, first on Config.RetryFirstPercent of the
// group's pops of the topic. It is nil when the topic does not exist.
func (s *Service) popSources(req PopRequest) ([]source, error) {
	n, ok, err := s.cfg.Broker.ReadQueueNums(req.Topic)
	if err != nil || !ok {
		return nil, err
	}
	count := s.nextRequest(req.Group, req.Topic)
	var normal []source
	if req.QueueID >= 0 {
		normal = append(normal, source{req.Topic, req.QueueID, FlagNormal, req.Filter})
	} else {
		for i := 0; i < n; i++ {
			normal = append(normal, source{req.Topic, int32((count + uint64(i)) % uint64(n)), FlagNormal, req.Filter})
		}
	}
	var retry []source
	if !req.Order {
		for _, rt := range s.retryTopics(req.Topic, req.Group) {
			rn, ok, err := s.cfg.Broker.ReadQueueNums(rt[0])
			if err != nil {
				return nil, err
			}
			for q := 0; ok && q < rn; q++ {
				retry = append(retry, source{rt[0], int32(q), rt[1], req.Filter})
			}
		}
	}
	if retryFirst(count, s.cfg.RetryFirstPercent) {
		return append(retry, normal...), nil
	}
	return append(normal, retry...), nil
}

// maxPopBody is the size of a pop's answer past which it reads no
// further queue: RocketMQ's clients refuse frames over 16 MiB, and each
// queue adds at most Config.MaxTransferBytes or one message (4 MiB by
// default). RocketMQ bounds only each queue's read.
const maxPopBody = 8 << 20

// startOffset returns where a group's pop of a queue starts: the later
// of its pop position and its committed offset (RocketMQ's getPopOffset
// takes the larger of its buffered pop offset and the committed one, so
// a commit ahead of the pops, by a pull consumer of the group or by
// UPDATE_CONSUMER_OFFSET, moves them on), else the queue's minimum
// (InitMin and pop-retry topics) or last message (InitMax; 0 while the
// queue's first message is in memory, see Config.InMemory).
func (s *Service) startOffset(group, topic string, queueID int32, initMode int32, usePosition bool) (int64, bool, error) {
	committed, known, err := s.cfg.Offsets.Get(group, topic, queueID)
	if err != nil {
		return 0, false, err
	}
	if usePosition {
		pos, ok, err := s.store.Position(group, topic, queueID)
		if err != nil {
			return 0, false, err
		}
		if ok {
			if known {
				return max(pos, committed), true, nil
			}
			return pos, true, nil
		}
	}
	if known {
		return committed, true, nil
	}
	off, err := s.initOffset(topic, queueID, initMode)
	return off, false, err
}

// initOffset is where a group without a position or a committed offset
// on a queue starts: the queue's minimum (InitMin and pop-retry topics)
// or last message (InitMax; 0 while the queue's first message is in
// memory, see Config.InMemory).
func (s *Service) initOffset(topic string, queueID int32, initMode int32) (int64, error) {
	if initMode == InitMin || RetryFlagOf(topic) != FlagNormal {
		return s.minOffset(topic, queueID)
	}
	if s.cfg.InMemory != nil {
		minOff, err := s.cfg.CQ.MinOffset(topic, queueID)
		if err != nil {
			return 0, err
		}
		if minOff <= 0 {
			first, err := s.cfg.CQ.Get(topic, queueID, 0, 1)
			if err != nil {
				return 0, err
			}
			if len(first) > 0 && s.cfg.InMemory(first[0].PhyOffset, first[0].Size) {
				return 0, nil
			}
		}
	}
	maxOff, err := s.cfg.CQ.MaxOffset(topic, queueID)
	return max(maxOff-1, 0), err
}

// popQueue pops up to remain messages of one queue into res, noting in
// dur what its commit still needs to be durable.
func (s *Service) popQueue(req PopRequest, src source, remain int, wait bool, res *PopResult, info *InfoBuilder, dur *durability) (skipped bool, err error) {
	if remain <= 0 {
		pos, err := s.pinStart(req, src, dur)
		if err != nil {
			return false, err
		}
		return false, s.addRestFrom(src, pos, res)
	}
	unlock, ok := s.queueLock(req.Group, src, wait)
	if !ok {
		return true, nil
	}
	r, err := s.popHeld(req, src, remain, res, dur)
	unlock()
	if err != nil || len(r.offsets) == 0 {
		return false, err
	}
	// The offsets are taken and recorded: the bodies are read outside
	// the lock, so the next pop of the queue need not wait for them (nor
	// for the log write of its record, which dur waits for at the end).
	return false, s.finishPop(req, src, r, res, info)
}

// pinStart records where a group starts on a queue that a pop full
// before it reaches the queue does not read, when the group has no start
// there yet: RocketMQ's popMsgFromQueue commits the initial offset of
// every queue it locks, full or not. Left undecided, the start would be
// worked out again at a later pop, and under InitMax that is the queue's
// last message by then (or no longer 0 once the queue's first message
// left memory): the messages sent in between would never reach the
// group. A queue another pop of the group holds is left as it is, as
// RocketMQ's. The write is synced before the pop is answered (dur). It
// returns the group's start on the queue, pinned or not.
func (s *Service) pinStart(req PopRequest, src source, dur *durability) (int64, error) {
	usePosition := !req.Order
	pos, known, err := s.startOffset(req.Group, src.topic, src.queueID, req.InitMode, usePosition)
	if err != nil || known {
		return pos, err
	}
	unlock, ok := s.tryLock(req.Group, src.topic, src.queueID)
	if !ok {
		return pos, nil
	}
	defer unlock()
	release, live, err := s.holdLive(req, src.topic)
	defer release()
	if err != nil || !live {
		return pos, err
	}
	if pos, known, err = s.startOffset(req.Group, src.topic, src.queueID, req.InitMode, usePosition); err != nil || known {
		return pos, err
	}
	b := s.store.NewBatch()
	defer b.Close()
	if req.Order {
		// An orderly pop starts from the committed offset.
		if err := b.SetCommitted(req.Group, src.topic, src.queueID, pos); err != nil {
			return pos, err
		}
	} else {
		if err := s.committed(b, req.Group, src.topic, src.queueID, pos); err != nil {
			return pos, err
		}
		if err := b.SetPosition(req.Group, src.topic, src.queueID, pos); err != nil {
			return pos, err
		}
	}
	return pos, dur.commit(b, false)
}

// queueLock locks a group's queue for a pop: waiting when wait is set,
// else only when it is free.
func (s *Service) queueLock(group string, src source, wait bool) (func(), bool) {
	if wait {
		return s.lock(group, src.topic, src.queueID), true
	}
	return s.tryLock(group, src.topic, src.queueID)
}

// popHeld is popLocked under a hold of the queue's topic, which keeps a
// deletion of the topic from falling between the pop's reads and its
// writes. A pop of a topic deleted since the pop checked it writes
// nothing and takes nothing.
func (s *Service) popHeld(req PopRequest, src source, remain int, res *PopResult, dur *durability) (readResult, error) {
	release, live, err := s.holdLive(req, src.topic)
	defer release()
	if err != nil || !live {
		return readResult{}, err
	}
	return s.popLocked(req, src, remain, res, dur)
}

// holdLive holds topic against its deletion for a pop's reads and writes
// (kvindex.PopStore.HoldTopic) and reports whether it still exists: a
// topic deleted since the pop checked it gets nothing written. release
// ends the hold; it is to be called whatever the answer.
func (s *Service) holdLive(req PopRequest, topic string) (release func(), live bool, err error) {
	hold := s.store.HoldTopic(topic)
	gone, err := hold.GoneSince(req.deletions, s.topicGone)
	return hold.Release, err == nil && !gone, err
}

// topicGone reports whether topic no longer exists.
func (s *Service) topicGone(topic string) (bool, error) {
	_, ok, err := s.cfg.Broker.ReadQueueNums(topic)
	if err != nil {
		return false, fmt.Errorf("check topic %s: %w", topic, err)
	}
	return !ok, nil
}

// popLocked takes up to remain messages of one queue whose lock the
// caller holds and records them in flight. Records are read here when the
// filter needs them and for every pop-retry queue (whose staged copies
// admitCopies looks into); finishPop reads the others. A queue the
// in-flight threshold stops (threshold.go) gives nothing and adds nothing
// to RestNum.
func (s *Service) popLocked(req PopRequest, src source, remain int, res *PopResult, dur *durability) (readResult, error) {
	if stopped, err := s.popStopped(req.Group, src.topic, src.queueID); err != nil || stopped {
		return readResult{}, err
	}
	pos, known, err := s.startOffset(req.Group, src.topic, src.queueID, req.InitMode, true)
	if err != nil {
		return readResult{}, err
	}
	// A pop-retry queue's records are read here: staged copies are
	// handed out from their time on only (stage.go).
	retry := src.flag != FlagNormal
	r, err := s.readQueue(src.topic, src.queueID, pos, remain, s.cfg.MaxTransferBytes, src.filter, !retry)
	if err != nil {
		return readResult{}, err
	}
	s.noteCutQueue(req.Group, src, pos, known, &r)
	var adm *admission
	if retry {
		if adm, err = s.admitCopies(req, src, &r, res.PopTime); err != nil {
			return readResult{}, err
		}
		defer adm.finish()
		s.waitForGate(req.Group, src, adm)
	}
	s.traceRead(req.Group, src, res.PopTime, pos, known, &r)
	res.RestNum += max(r.max-r.next, 0)
	res.noteRead(r.lastPhy)
	if r.next == pos && known {
		return readResult{}, nil // nothing new, nothing to record
	}
	// A queue that fills the pop is its last write: commit it durably,
	// waited for once the lock is released.
	last := len(r.offsets) >= remain
	if err := s.recordPop(req, src, r, res, last, dur, adm); err != nil {
		return readResult{}, err
	}
	if err := adm.committed(); err != nil {
		// The pop is recorded: its messages are in flight and go out.
		// Only the committed offsets of the staged copies' original
		// queues lag behind (a pop starts from the pop position, the
		// larger) until a later pop of each queue records something
		// there (TestStagedCopiesGoOutWhenTheirOriginalsOffsetCannotMove).
		s.log.Error().Err(err).Str("group", req.Group).Str("topic", src.topic).Int32("queue", src.queueID).
			Msg("pop: the committed offsets of staged copies' queues not moved")
	}
	return r, nil
}

// recordPop commits a pop of one queue: its checkpoint, position and
// committed offset in one batch, noted in dur, with the staged
// checkpoints whose copies it hands out (adm, nil for none). The caller
// holds the queue's lock; with last set the commit is durable, its wait
// left to dur.
func (s *Service) recordPop(req PopRequest, src source, r readResult, res *PopResult, last bool, dur *durability, adm *admission) error {
	b := s.store.NewBatch()
	defer b.Close()
	if err := adm.write(b); err != nil {
		return err
	}
	// The committed offset follows the smallest offset in flight: an
	// earlier pop's, else this pop's first, else the new position.
	fallback := r.next
	if len(r.offsets) > 0 {
		fallback = r.offsets[0]
	}
	if err := s.committed(b, req.Group, src.topic, src.queueID, fallback); err != nil {
		return err
	}
	if len(r.offsets) > 0 {
		ck := kvindex.Checkpoint{
			Group: req.Group, Topic: src.topic, QueueID: src.queueID, CKOffset: r.from,
			PopTime: res.PopTime, InvisibleTime: req.InvisibleTime, VisibleAt: res.PopTime + req.InvisibleTime,
			RetryFlag: src.flag[0] - '0', Offsets: r.offsets,
		}
		if err := b.PutCheckpoint(&ck); err != nil {
			return err
		}
	}
	if err := b.SetPosition(req.Group, src.topic, src.queueID, r.next); err != nil {
		return err
	}
	err := dur.commit(b, last)
	if len(r.offsets) > 0 {
		s.notePut(req.Group, src.topic, ReviveCheckpoint, err)
	}
	if err != nil {
		return err
	}
	if len(r.offsets) > 0 {
		s.noteDeadline(res.PopTime + req.InvisibleTime)
	}
	return nil
}

// finishPop adds the records of a queue's popped messages to res, reading
// from the CommitLog those readQueue left unread straight into the
// response body, and adds the queue's header entries.
func (s *Service) finishPop(req PopRequest, src source, r readResult, res *PopResult, info *InfoBuilder) error {
	need := 0
	for i, e := range r.entries {
		if r.records[i] == nil {
			need += int(e.Size)
		} else {
			need += len(r.records[i])
		}
	}
	res.Body = slices.Grow(res.Body, need)
	kept := r.offsets[:0]
	for i, e := range r.entries {
		rec, view := r.records[i], (*commitlog.View)(nil)
		if rec == nil {
			v, err := s.cfg.Log.Read(e.PhyOffset, e.Size)
			if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
				// Deleted by retention since it was recorded: left out of
				// the answer, as the eager read does; revive drops its
				// checkpoint offset when it finds the message gone.
				continue
			}
			if err != nil {
				return fmt.Errorf("read popped %s/%d@%d: %w", src.topic, src.queueID, e.QueueOffset, err)
			}
			rec, view = v.Data, v
		}
		if src.flag != FlagNormal {
			h := &Handle{CKOffset: r.from, PopTime: res.PopTime, InvisibleTime: req.InvisibleTime, ReviveQID: res.ReviveQID,
				RetryFlag: src.flag, BrokerName: s.cfg.BrokerName, QueueID: src.queueID, QueueOffset: r.offsets[i]}
			topic := req.Topic
			if s.cfg.ReturnActualRetryTopic {
				topic, h = "", nil
			}
			var err error
			if rec, err = reencodeRetry(rec, topic, h); err != nil {
				view.Release()
				// Skipped as RocketMQ's pop skips a record it cannot
				// decode: the rest of the pop stands, and the offset
				// stays in the checkpoint, which revive settles (it
				// cannot decode it either, and drops it). It is left out
				// of msgOffsetInfo as a message gone to retention is.
				s.log.Error().Err(err).Str("group", req.Group).Str("topic", src.topic).Int32("queue", src.queueID).
					Int64("offset", r.offsets[i]).Msg("pop: a pop-retry record cannot be decoded; left out of the answer")
				continue
			}
		}
		res.add(src.topic, rec)
		view.Release()
		kept = append(kept, r.offsets[i])
	}
	if len(kept) > 0 {
		// An entry without offsets fails the client's parse of the
		// whole header (RocketMQ's ExtraInfoUtil wants three fields).
		info.AddQueue(src.flag, src.queueID, r.from, kept)
	}
	return nil
}

// addRest counts the messages of a queue the pop did not read (full, or
// the queue busy with another pop of the group) into res.RestNum, without
// the queue's lock.
func (s *Service) addRest(req PopRequest, src source, res *PopResult) error {
	pos, _, err := s.startOffset(req.Group, src.topic, src.queueID, req.InitMode, !req.Order)
	if err != nil {
		return err
	}
	return s.addRestFrom(src, pos, res)
}

// addRestFrom is addRest for a group whose start on the queue is pos.
func (s *Service) addRestFrom(src source, pos int64, res *PopResult) error {
	maxOff, err := s.cfg.CQ.MaxOffset(src.topic, src.queueID)
	if err != nil {
		return err
	}
	res.RestNum += max(maxOff-pos, 0)
	return nil
}

// reencodeRetry rewrites a pop-retry record under the requested topic with
// a POP_CK property holding its handle (kept when already present), as
// RocketMQ does unless popResponseReturnActualRetryTopic is set, and
// without the revive's own properties (kvindex.PropertyRevivedFrom, and a
// staged copy's checkpoint name). An
// empty topic keeps the record's (the pop-retry topic), and a nil handle
// adds no POP_CK: the client builds the handle from the answer's header.
func reencodeRetry(rec []byte, topic string, h *Handle) ([]byte, error) {
	m, err := commitlog.Decode(rec)
	if err != nil {
		return nil, fmt.Errorf("decode retry record: %w", err)
	}
	if topic != "" {
		m.Topic = topic
	}
	var set [][2]string
	if _, ok := commitlog.LookupProperty(m.Properties, PropertyPopCK); !ok && h != nil {
		set = append(set, [2]string{PropertyPopCK, h.String()})
	}
	m.Properties = commitlog.RewriteProperties(m.Properties, []string{kvindex.PropertyRevivedFrom, propertyStagedFrom}, set...)
	out, err := commitlog.AppendRecord(nil, &m)
	if err != nil {
		return nil, fmt.Errorf("re-encode retry record: %w", err)
	}
	return out, nil
}

// Property names the POP service reads or writes (RocketMQ's
// MessageConst).
const (
	PropertyPopCK        = "POP_CK"
	PropertyFirstPopTime = "1ST_POP_TIME"
	propDelay            = "DELAY"
)

// Peek reads what a pop of one queue (or of every queue with -1) would
// return, from the group's pop positions, without changing anything. As
// RocketMQ's peek it reads the group's pop-retry topic revive writes to
// (V2 when enabled, the only one read) too: first on every fifth peek of
// a group's topic, else after the topic's queues while the batch is not
// full. Pop-retry records are returned as stored, under their own topic.
//
// maxNums bounds the whole answer only, as RocketMQ's peek, which takes
// any number (<= 0 reads nothing): each queue gives at most
// MaxPopMessages of it (RocketMQ's store hands out no more in one read)
// and Config.MaxTransferBytes, and once the answer passes maxPopBody no
// further queue is read, its messages only counted. A peek of every
// queue starts from a different one each time (RocketMQ's from a random
// one), as pops do, so that a small maxNums does not show the first
// queue's messages only.
func (s *Service) Peek(group, topic string, queueID int32, maxNums int, initMode int32) ([][]byte, int64, error) {
	n, ok, err := s.cfg.Broker.ReadQueueNums(topic)
	if err != nil || !ok {
		return nil, 0, err
	}
	count := s.nextRequest(peekCounter+group, topic)
	var normal []source
	if queueID >= 0 {
		normal = append(normal, source{topic: topic, queueID: queueID})
	} else {
		for i := 0; i < n; i++ {
			normal = append(normal, source{topic: topic, queueID: int32((count + uint64(i)) % uint64(n))})
		}
	}
	var retry []source
	rt := s.reviveTopic(topic, group)
	rn, ok, err := s.cfg.Broker.ReadQueueNums(rt)
	if err != nil {
		return nil, 0, err
	}
	for q := 0; ok && q < rn; q++ {
		retry = append(retry, source{topic: rt, queueID: int32((count + uint64(q)) % uint64(rn))})
	}
	var out [][]byte
	var rest int64
	size := 0
	peek := func(srcs []source) error {
		for _, src := range srcs {
			pos, _, err := s.startOffset(group, src.topic, src.queueID, initMode, true)
			if err != nil {
				return err
			}
			if len(out) >= maxNums || (len(out) > 0 && size >= maxPopBody) {
				maxOff, err := s.cfg.CQ.MaxOffset(src.topic, src.queueID)
				if err != nil {
					return err
				}
				rest += max(maxOff-pos, 0)
				continue
			}
			r, err := s.readQueue(src.topic, src.queueID, pos, min(maxNums-len(out), MaxPopMessages), s.cfg.MaxTransferBytes, nil, false)
			if err != nil {
				return err
			}
			if RetryFlagOf(src.topic) != FlagNormal {
				// What a pop would not hand out: staged copies before
				// their time, or of messages settled meanwhile.
				cutAtGate(&r, s.now())
				if err := s.dropSettledCopies(group, &r, true); err != nil {
					return err
				}
			}
			for _, rec := range r.records {
				size += len(rec)
			}
			out = append(out, r.records...)
			rest += max(r.max-r.next, 0)
		}
		return nil
	}
	first := retryFirst(count, peekRetryFirstPercent)
	if first {
		if err := peek(retry); err != nil {
			return nil, 0, err
		}
	}
	if err := peek(normal); err != nil {
		return nil, 0, err
	}
	if !first && len(out) < maxNums {
		if err := peek(retry); err != nil {
			return nil, 0, err
		}
	}
	return out, rest, nil
}

// peekCounter prefixes the group in the key of a group's peeks of a
// topic among the request counts (nextRequest), apart from its pops: no
// valid group name (^[%|a-zA-Z0-9_-]+$) holds a colon.
const peekCounter = "peek:"

// peekRetryFirstPercent is the share of peeks that read the pop-retry
// topic first: RocketMQ's peek reads it first on a fifth of its requests,
// whatever popFromRetryProbability says.
const peekRetryFirstPercent = 20

// HasMessage answers NOTIFICATION: whether a pop of the queue (or of any
// queue with -1, or of the group's pop-retry topics) would find a message
// now. An orderly queue locked by an in-flight batch has none, nor has a
// queue the in-flight threshold stops non-orderly pops of
// (threshold.go).
func (s *Service) HasMessage(group, topic string, queueID int32, order bool, attemptID string) (bool, error) {
	return s.hasMessage(group, topic, queueID, order, attemptID, false)
}

// HasMessageReadOnly is HasMessage on a slave: whether a PopReadOnly of
// the queue would find a message now (from where it would start; an
// orderly queue locked by the batch a pop on the slave handed out has
// none, nor has a queue the in-flight threshold stops by the slave's own
// count, readOnlyStopped, orderly or not).
func (s *Service) HasMessageReadOnly(group, topic string, queueID int32, order bool, attemptID string) (bool, error) {
	return s.hasMessage(group, topic, queueID, order, attemptID, true)
}

func (s *Service) hasMessage(group, topic string, queueID int32, order bool, attemptID string, readOnly bool) (bool, error) {
	n, ok, err := s.cfg.Broker.ReadQueueNums(topic)
	if err != nil || !ok {
		return false, err
	}
	check := func(t string, q int32) (bool, error) {
		if order && !readOnly {
			blocked, err := s.orderBlocked(group, t, q, attemptID)
			if err != nil || blocked {
				return false, err
			}
		}
		var pos int64
		var err error
		switch {
		case readOnly && order:
			var free bool
			pos, free, err = s.readOnlyOrderStart(queueKey{group, t, q}, attemptID)
			if err != nil || !free {
				return false, err
			}
		case readOnly:
			pos, err = s.readOnlyStart(queueKey{group, t, q}, InitMin, false)
		default:
			pos, _, err = s.startOffset(group, t, q, InitMin, !order && !readOnly)
		}
		if err != nil {
			return false, err
		}
		maxOff, err := s.cfg.CQ.MaxOffset(t, q)
		if err != nil || maxOff <= pos {
			return false, err
		}
		if !order && RetryFlagOf(t) != FlagNormal {
			if gated, err := s.headGated(queueKey{group, t, q}, pos); err != nil || gated {
				return false, err
			}
		}
		if limit, on := s.inFlightLimit(); on && (!order || readOnly) {
			if readOnly {
				n, _ := s.slaveFlight.count(queueKey{group, t, q}, s.now())
				return n <= limit, nil
			}
			over, err := s.overLimit(group, t, q, limit)
			return !over, err
		}
		return true, nil
	}
	var srcs []source
	if queueID >= 0 {
		srcs = append(srcs, source{topic: topic, queueID: queueID})
	} else {
		for i := 0; i < n; i++ {
			srcs = append(srcs, source{topic: topic, queueID: int32(i)})
		}
	}
	if !order {
		for _, rt := range s.retryTopics(topic, group) {
			rn, ok, err := s.cfg.Broker.ReadQueueNums(rt[0])
			if err != nil {
				return false, err
			}
			for q := 0; ok && q < rn; q++ {
				srcs = append(srcs, source{topic: rt[0], queueID: int32(q)})
			}
		}
	}
	for _, src := range srcs {
		has, err := check(src.topic, src.queueID)
		if err != nil || has {
			return has, err
		}
	}
	return false, nil
}

// retryFirst reports whether the count-th pop of a group's topic reads
// the pop-retry topics first, for percent of the pops spread evenly: at
// 20, every fifth.
func retryFirst(count uint64, percent int) bool {
	if percent <= 0 {
		return false
	}
	p := uint64(min(percent, 100))
	return (count%100)*p%100 < p
}
