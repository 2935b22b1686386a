package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// offsetResets are the offset resets a group's pull consumers have not
// seen yet, RocketMQ 5's server-side reset (useServerSideResetOffset, its
// default): a reset sets the committed offset at once (for a light
// message queue's group, only one it has: resetQueues), and the next pull
// of each reset queue is answered PULL_OFFSET_MOVED with the new offset,
// which a client takes as its own; until then the client's offset commits
// for that queue are ignored, so a client still holding the old offset in
// memory cannot undo the reset. Like RocketMQ's table it lives in memory
// only: a reset not yet seen by a pull is lost with a restart of the
// broker (the committed offset it set stays).
type offsetResets struct {
	// pending counts entries, so the pull path skips the lock when none
	// is waiting (the common case).
	pending atomic.Int64
	mu      sync.Mutex
	byQueue map[resetKey]int64
	// gate orders resets against offset commits: a commit checks for a
	// waiting reset and writes under the shared lock (commitUnlessReset),
	// a reset is assigned under the exclusive one, so no reset lands
	// between a commit's check and its write.
	gate sync.RWMutex
}

type resetKey struct {
	group, topic string
	queueID      int32
}

// assign records a reset of one queue, replacing an earlier one, once
// the offset commits under way are written.
func (r *offsetResets) assign(group, topic string, queueID int32, offset int64) {
	r.gate.Lock()
	defer r.gate.Unlock()
	r.put(group, topic, queueID, offset, true)
}

// restore puts back a reset take removed, unless a newer one was assigned
// since.
func (r *offsetResets) restore(group, topic string, queueID int32, offset int64) {
	r.put(group, topic, queueID, offset, false)
}

func (r *offsetResets) put(group, topic string, queueID int32, offset int64, replace bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byQueue == nil {
		r.byQueue = make(map[resetKey]int64)
	}
	k := resetKey{group, topic, queueID}
	if _, ok := r.byQueue[k]; ok && !replace {
		return
	} else if !ok {
		r.pending.Add(1)
	}
	r.byQueue[k] = offset
}

// commitUnlessReset runs commit, a write of the queue's committed offset
// by its client, unless a reset of the queue waits for the client's next
// pull: the client's offset is the one the reset replaced.
func (r *offsetResets) commitUnlessReset(group, topic string, queueID int32, commit func() error) (reset bool, err error) {
	r.gate.RLock()
	defer r.gate.RUnlock()
	if r.has(group, topic, queueID) {
		return true, nil
	}
	return false, commit()
}

// has reports whether a reset of the queue waits for its next pull.
func (r *offsetResets) has(group, topic string, queueID int32) bool {
	if r.pending.Load() == 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.byQueue[resetKey{group, topic, queueID}]
	return ok
}

// take removes and returns the queue's waiting reset.
func (r *offsetResets) take(group, topic string, queueID int32) (int64, bool) {
	if r.pending.Load() == 0 {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := resetKey{group, topic, queueID}
	off, ok := r.byQueue[k]
	if ok {
		delete(r.byQueue, k)
		r.pending.Add(-1)
	}
	return off, ok
}

// takePopped drops the waiting resets a pop of a group's queue (queueID
// -1: of every queue of the topic) ends.
func (r *offsetResets) takePopped(group, topic string, queueID int32) {
	if queueID >= 0 {
		r.take(group, topic, queueID)
		return
	}
	r.forget(func(k resetKey) bool { return k.group == group && k.topic == topic })
}

// forgetGroup drops a deleted group's waiting resets.
func (r *offsetResets) forgetGroup(group string) {
	r.forget(func(k resetKey) bool { return k.group == group })
}

// forgetTopic drops the waiting resets of a deleted topic.
func (r *offsetResets) forgetTopic(topic string) {
	r.forget(func(k resetKey) bool { return k.topic == topic })
}

func (r *offsetResets) forget(match func(resetKey) bool) {
	if r.pending.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.byQueue {
		if match(k) {
			delete(r.byQueue, k)
			r.pending.Add(-1)
		}
	}
}

// resetRequest is an INVOKE_BROKER_TO_RESET_OFFSET header.
type resetRequest struct {
	topic, group string
	// queueID is -1 for every queue of the topic.
	queueID int32
	// offset, when >= 0 with a queueID, is the target itself; otherwise
	// the target is found by timestamp (-1 or any negative: the end of
	// the queue).
	offset    int64
	timestamp int64
}

func parseResetRequest(req *remoting.Command) (resetRequest, error) {
	h := remoting.Header(req.ExtFields)
	var r resetRequest
	var err error
	if r.topic, err = h.String("topic"); err != nil {
		return r, err
	}
	if r.group, err = h.String("group"); err != nil {
		return r, err
	}
	if r.queueID, err = h.OptInt32("queueId", -1); err != nil {
		return r, err
	}
	if r.offset, err = h.OptInt64("offset", -1); err != nil {
		return r, err
	}
	// isForce is read by RocketMQ's older client-side reset only; the
	// server-side reset moves every queue to the target either way.
	if r.queueID >= 0 && r.offset >= 0 {
		r.timestamp, err = h.OptInt64("timestamp", -1)
	} else {
		r.timestamp, err = h.Int64("timestamp")
	}
	return r, err
}

// processResetOffset answers INVOKE_BROKER_TO_RESET_OFFSET (mqadmin
// resetOffsetByTime, resetOffsetByQueueId): the group's committed offsets
// of the topic's queues (or of one queue) move to the offset of a store
// time, the end of the queue (timestamp -1) or a given offset, its pop
// positions with them; live pull consumers learn it from their next pull
// (see offsetResets). The body lists the queues and their new offsets.
// With useServerSideResetOffset=false (read by each request, as RocketMQ
// reads it) the reset is RocketMQ 4's instead: resetOffsetThroughClients.
func (b *Broker) processResetOffset(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if !b.current().UseServerSideResetOffset {
		return b.resetOffsetThroughClients(conn, req)
	}
	refuse := func(code int32, remark string) *remoting.Command {
		b.log.Warn().Int32("code", code).Str("remark", remark).Stringer("by", conn.RemoteAddr()).Msg("consumer offset reset refused")
		return remoting.NewResponse(req, code, remark)
	}
	if b.isSlave() {
		// A slave's offsets are its master's, copied every sync: a
		// reset here would be undone (RocketMQ refuses it too).
		return refuse(remoting.SystemError, "Can not reset offset in slave broker")
	}
	r, err := parseResetRequest(req)
	if err != nil {
		return refuse(remoting.SystemError, "bad reset offset request header: "+err.Error())
	}
	deletions := b.db.Pop().TopicDeletions() // before the topic check: see resetQueues
	tc, ok, err := b.topicConfig(r.topic)
	if err != nil {
		return refuse(remoting.SystemError, err.Error())
	}
	if !ok {
		return refuse(remoting.TopicNotExist, "Topic "+r.topic+" does not exist")
	}
	gc, err := b.groupConfig(r.group, false)
	if err != nil {
		return refuse(remoting.SystemError, err.Error())
	}
	if gc.GroupName == "" {
		return refuse(remoting.SubscriptionGroupNotExist, "Group "+r.group+" does not exist")
	}
	if r.queueID >= int32(tc.ReadQueueNums) {
		return refuse(remoting.InvalidParameter,
			fmt.Sprintf("queueId %d is not a queue of %s (%d queues)", r.queueID, r.topic, tc.ReadQueueNums))
	}
	targets, err := b.resetTargets(r, tc.ReadQueueNums)
	var outside *resetOutOfRange
	if errors.As(err, &outside) {
		return refuse(remoting.SystemError, outside.Error())
	}
	if err != nil {
		return refuse(remoting.SystemError, fmt.Sprintf("reset %s of %s: %v", r.topic, r.group, err))
	}
	if err := b.resetQueues(r.group, r.topic, targets, deletions); errors.Is(err, errTopicDeletedSince) {
		return refuse(remoting.TopicNotExist, "Topic "+r.topic+" does not exist")
	} else if err != nil {
		b.log.Error().Err(err).Str("group", r.group).Str("topic", r.topic).Msg("reset offset failed")
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	table := make(map[adminbody.MessageQueue]int64, len(targets))
	for q, off := range targets {
		table[adminbody.MessageQueue{BrokerName: b.cfg.BrokerName, QueueID: q, Topic: r.topic}] = off
	}
	b.log.Info().Str("group", r.group).Str("topic", r.topic).Int32("queue", r.queueID).Int64("timestamp", r.timestamp).
		Int64("offset", r.offset).Stringer("by", conn.RemoteAddr()).Int("queues", len(targets)).Msg("consumer offsets reset")
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = adminbody.EncodeResetOffset(table)
	return resp
}

// resetOutOfRange is an explicit reset target outside the queue; its
// message is RocketMQ's remark for it.
type resetOutOfRange struct{ offset, min, max int64 }

func (e *resetOutOfRange) Error() string {
	return fmt.Sprintf("Target offset %d not in consume queue range [%d-%d]", e.offset, e.min, e.max)
}

// resetTargets computes the new offset of each queue a reset names.
func (b *Broker) resetTargets(r resetRequest, queues int) (map[int32]int64, error) {
	out := make(map[int32]int64)
	if r.queueID >= 0 && r.offset >= 0 {
		lo, hi, err := b.queueRange(r.topic, r.queueID)
		if err != nil {
			return nil, err
		}
		// RocketMQ's bounds (resetOffsetInner): up to one past the
		// queue's end.
		if r.offset < lo || r.offset > hi+1 {
			return nil, &resetOutOfRange{offset: r.offset, min: lo, max: hi}
		}
		out[r.queueID] = r.offset
		return out, nil
	}
	first, last := int32(0), int32(queues-1)
	if r.queueID >= 0 {
		first, last = r.queueID, r.queueID
	}
	for q := first; q <= last; q++ {
		var off int64
		var err error
		if r.timestamp < 0 {
			off, err = b.cqs.MaxOffset(r.topic, q)
		} else {
			off, err = b.cqs.OffsetByTime(r.topic, q, r.timestamp, cq.Lower)
		}
		if err != nil {
			return nil, fmt.Errorf("offset of %s/%d at %d: %w", r.topic, q, r.timestamp, err)
		}
		out[q] = max(off, 0)
	}
	return out, nil
}

// resetQueues moves queues of a group: resets waiting for the next pull
// first (so a pull racing the reset cannot commit the old offset over the
// new one), then the committed offsets in one durable batch, then each
// queue's pop position when the group pops it (it does not pull it then:
// no reset waits). Held pulls of the queues are woken to answer now. The
// offsets are written under a hold of the topic, as a consumer's commit
// (commitOffsetHeld): deletions is the store's TopicDeletions read before
// the caller found the topic, and a topic deleted since gets nothing
// (errTopicDeletedSince).
//
// A light message queue reset for a light message queue's group (both
// named %LMQ%... under enableLmq) moves only a committed offset the group
// has: RocketMQ's broker keeps their offsets in its LmqConsumerOffsetManager
// (its default with enableLmq), whose reset updates an offset present and
// otherwise only waits for the next pull (ConsumerOffsetManagerV2, of
// configManagerVersion v2, would write it).
func (b *Broker) resetQueues(group, topic string, targets map[int32]int64, deletions uint64) error {
	onlyPresent := b.lmqName(topic) && b.lmqName(group)
	err := b.commitOffsetHeld(topic, deletions, func() error {
		for q, off := range targets {
			b.resets.assign(group, topic, q, off)
		}
		// After the assignments: a commit of these queues is ignored from
		// here, so an offset found absent stays absent.
		updates := make([]kvindex.OffsetUpdate, 0, len(targets))
		for q, off := range targets {
			if onlyPresent {
				if _, ok, err := b.offsets.Get(group, topic, q); err != nil {
					b.dropResets(group, topic, targets)
					return err
				} else if !ok {
					continue
				}
			}
			updates = append(updates, kvindex.OffsetUpdate{Group: group, Topic: topic, QueueID: q, Offset: off})
		}
		if len(updates) == 0 {
			return nil
		}
		if err := b.offsets.SetMany(updates, true); err != nil {
			b.dropResets(group, topic, targets)
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("commit reset offsets of %s on %s: %w", group, topic, err)
	}
	popped, err := b.popSvc.ResetOffsets(group, topic, targets)
	for q := range targets {
		if popped[q] {
			b.resets.take(group, topic, q)
		} else {
			b.notifier.Notify(topic, q)
		}
	}
	return err
}

// dropResets takes back the resets a failed resetQueues assigned.
func (b *Broker) dropResets(group, topic string, targets map[int32]int64) {
	for q := range targets {
		b.resets.take(group, topic, q)
	}
}

// commitUnlessReset is offsetResets.commitUnlessReset while
// useServerSideResetOffset is on. Off, a client's commit is written
// whatever reset waits for the queue's next pull (one assigned while it
// was on), as RocketMQ's commit consults its reset table only then: a
// reset through the clients relies on their commits.
func (b *Broker) commitUnlessReset(group, topic string, queueID int32, commit func() error) (reset bool, err error) {
	if !b.current().UseServerSideResetOffset {
		return false, commit()
	}
	return b.resets.commitUnlessReset(group, topic, queueID, commit)
}
