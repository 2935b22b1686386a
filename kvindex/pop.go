package kvindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// POP keyspaces (0x50-0x5F are reserved for POP); see doc.go.
const (
	prefixPopInFlight  byte = 0x50 // schema 2 only: migrated to 0x55/0x56
	prefixPopAckIndex  byte = 0x51 // schema 2 only: migrated to 0x55/0x56
	prefixPopPosition  byte = 0x52
	prefixPopOrder     byte = 0x53
	prefixPopRequestMd byte = 0x54
	prefixPopCKDue     byte = 0x55
	prefixPopCK        byte = 0x56
)

// popInFlightValueLen is the size of an in-flight record's value.
const popInFlightValueLen = 8 + 8 + 8 + 1 + 4

// popAckValueLen is the size of an ack-index value.
const popAckValueLen = 24

// InFlight is one popped, not yet acknowledged message: the view of one
// offset of a Checkpoint, a delivery that becomes visible again at
// VisibleAt unless it is acknowledged. Schema-2 stores kept one record of
// this form per message (keyspaces 0x50 and 0x51); opening one for
// writing migrates them to checkpoints.
type InFlight struct {
	// Group is the consumer group that popped the message.
	Group string `json:"group"`
	// Topic is the topic the message was read from: the pop-retry topic
	// for retried messages.
	Topic string `json:"topic"`
	// QueueID and QueueOffset locate the message in Topic.
	QueueID     int32 `json:"queueId"`
	QueueOffset int64 `json:"queueOffset"`
	// VisibleAt is the visibility deadline in ms since the epoch:
	// PopTime + InvisibleTime, or the revive retry time after a failed
	// revive.
	VisibleAt int64 `json:"visibleAt"`
	// PopTime and InvisibleTime are the handle's fields (ms).
	PopTime       int64 `json:"popTime"`
	InvisibleTime int64 `json:"invisibleTime"`
	// CKOffset is the first offset the pop read on this queue (the
	// handle's ckQueueOffset).
	CKOffset int64 `json:"ckOffset"`
	// RetryFlag is 0 for a normal topic, 1 for a V1 pop-retry topic and 2
	// for a V2 one.
	RetryFlag uint8 `json:"retryFlag"`
	// Attempts counts failed revives of this record.
	Attempts int32 `json:"attempts"`
	// Staged is set when a staged revive already copied the message to
	// the pop-retry topic (Checkpoint.Staged).
	Staged bool `json:"staged,omitempty"`
}

// PopPosition is a group's next pop offset on one queue (keyspace 0x52).
type PopPosition struct {
	Group   string `json:"group"`
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	Offset  int64  `json:"offset"`
}

// OrderMessage is one message of an orderly pop batch.
type OrderMessage struct {
	// QueueOffset is the message's offset in the queue.
	QueueOffset int64 `json:"queueOffset"`
	// Consumed is how many earlier pops delivered it (the orderly
	// reconsume count).
	Consumed int32 `json:"consumed"`
	// NextVisibleAt is the deadline set by a change of invisible time, 0
	// for PopTime + InvisibleTime.
	NextVisibleAt int64 `json:"nextVisibleAt"`
}

// OrderState is the in-flight batch of an orderly pop on one queue
// (keyspace 0x53): while a message of it is neither acknowledged nor past
// its deadline, the queue is locked for the group.
type OrderState struct {
	Group   string `json:"group"`
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	// PopTime and InvisibleTime of the batch.
	PopTime       int64 `json:"popTime"`
	InvisibleTime int64 `json:"invisibleTime"`
	// Acked has bit i set when Messages[i] is acknowledged.
	Acked uint64 `json:"acked"`
	// AttemptID is the client's attempt id of the pop ("" when none).
	AttemptID string `json:"attemptId"`
	// Messages are the batch in queue-offset order (at most 64).
	Messages []OrderMessage `json:"messages"`
	// Carried are consumption counts of offsets outside Messages, in
	// queue-offset order (at most 64): a pop repeating the attemptId of
	// the batch it replaces keeps that batch's whole count table, as
	// RocketMQ's OrderInfo.mergeOffsetConsumedCount does, including the
	// counts of offsets the new batch no longer holds.
	Carried []OrderCount `json:"carried,omitempty"`
}

// OrderCount is the consumption count of an offset outside an orderly
// batch (see OrderState.Carried).
type OrderCount struct {
	// QueueOffset is the message's offset in the queue.
	QueueOffset int64 `json:"queueOffset"`
	// Consumed is how many pops delivered it before.
	Consumed int32 `json:"consumed"`
}

// MaxOrderBatch is the largest orderly batch OrderState can hold.
const MaxOrderBatch = 64

// RequestMode is a topic and group's message request mode (keyspace
// 0x54): the body of SET_MESSAGE_REQUEST_MODE, kept as JSON.
type RequestMode struct {
	Topic string `json:"topic"`
	Group string `json:"group"`
	// JSON is RocketMQ's SetMessageRequestModeRequestBody.
	JSON []byte `json:"json"`
}

// PopStore is the POP state of the database: checkpoints of in-flight
// messages, pop positions, orderly batches and request modes. Reads see every
// committed batch; writes go through PopBatch. It is safe for concurrent
// use; callers order conflicting writes themselves (the POP service locks
// per queue).
type PopStore struct {
	db *DB
}

// Pop returns the POP state store.
func (d *DB) Pop() *PopStore { return &PopStore{db: d} }

// groupTopicQueue is prefix | groupLen | group | topicLen | topic | queueId.
// It grows dst once, with room for the two offsets the checkpoint keys
// append: every pop and ack builds several of these keys, and growing
// them field by field took three allocations (BenchmarkPopPosition: 4 ->
// 2 allocations, 260 -> 200 ns).
func groupTopicQueue(dst []byte, prefix byte, group, topic string, queueID int32) []byte {
	dst = slices.Grow(dst, 1+2+len(group)+2+len(topic)+4+16)
	dst = append(dst, prefix)
	dst = appendString16(dst, group)
	dst = appendString16(dst, topic)
	return binary.BigEndian.AppendUint32(dst, uint32(queueID))
}

func decodePopInFlight(k, v []byte) (InFlight, error) {
	var r InFlight
	at, g, t, q, rest, err := decodeDeadlineKey(k, prefixPopInFlight)
	if err != nil || len(rest) != 8 || !decodeInFlightValue(&r, v) {
		return r, ErrBadKey
	}
	r.VisibleAt, r.Group, r.Topic, r.QueueID = at, g, t, q
	r.QueueOffset = int64(binary.BigEndian.Uint64(rest))
	return r, nil
}

// popInFlightValue is the value of an in-flight record (0x50) and of a
// revive intent (0x57): popTime | invisibleTime | ckOffset | retryFlag |
// attempts.
func popInFlightValue(dst []byte, r *InFlight) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.PopTime))
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.InvisibleTime))
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.CKOffset))
	dst = append(dst, r.RetryFlag)
	return binary.BigEndian.AppendUint32(dst, uint32(r.Attempts))
}

// decodeInFlightValue sets the fields of r that popInFlightValue holds,
// reporting false when v is not of its size.
func decodeInFlightValue(r *InFlight, v []byte) bool {
	if len(v) != popInFlightValueLen {
		return false
	}
	r.PopTime = int64(binary.BigEndian.Uint64(v))
	r.InvisibleTime = int64(binary.BigEndian.Uint64(v[8:]))
	r.CKOffset = int64(binary.BigEndian.Uint64(v[16:]))
	r.RetryFlag = v[24]
	r.Attempts = int32(binary.BigEndian.Uint32(v[25:]))
	return true
}

// deadlineKey is prefix | visibleAt | groupLen | group | topicLen | topic |
// queueId: the start of a key ordered by deadline (0x50, 0x55).
func deadlineKey(dst []byte, prefix byte, visibleAt int64, group, topic string, queueID int32) []byte {
	dst = append(dst, prefix)
	dst = binary.BigEndian.AppendUint64(dst, uint64(visibleAt))
	dst = appendString16(dst, group)
	dst = appendString16(dst, topic)
	return binary.BigEndian.AppendUint32(dst, uint32(queueID))
}

// decodeDeadlineKey splits a deadlineKey and returns what follows.
func decodeDeadlineKey(k []byte, prefix byte) (visibleAt int64, group, topic string, queueID int32, rest []byte, err error) {
	if len(k) < 9 || k[0] != prefix {
		return 0, "", "", 0, nil, ErrBadKey
	}
	visibleAt = int64(binary.BigEndian.Uint64(k[1:]))
	if group, rest, err = readString16(k[9:]); err != nil {
		return 0, "", "", 0, nil, err
	}
	if topic, rest, err = readString16(rest); err != nil || len(rest) < 4 {
		return 0, "", "", 0, nil, ErrBadKey
	}
	return visibleAt, group, topic, int32(binary.BigEndian.Uint32(rest)), rest[4:], nil
}

// decodeGroupTopicQueue splits prefix | group | topic | queueId and returns
// what follows.
func decodeGroupTopicQueue(k []byte, prefix byte) (group, topic string, queueID int32, rest []byte, err error) {
	if len(k) < 1 || k[0] != prefix {
		return "", "", 0, nil, ErrBadKey
	}
	if group, rest, err = readString16(k[1:]); err != nil {
		return "", "", 0, nil, err
	}
	if topic, rest, err = readString16(rest); err != nil || len(rest) < 4 {
		return "", "", 0, nil, ErrBadKey
	}
	return group, topic, int32(binary.BigEndian.Uint32(rest)), rest[4:], nil
}

// decodePopAck decodes an ack-index key and value into the fields they
// hold (CKOffset, RetryFlag and Attempts live only in the in-flight
// record).
func decodePopAck(k, v []byte) (InFlight, error) {
	var r InFlight
	g, t, q, rest, err := decodeGroupTopicQueue(k, prefixPopAckIndex)
	if err != nil || len(rest) != 8 || len(v) != popAckValueLen {
		return r, ErrBadKey
	}
	r.Group, r.Topic, r.QueueID = g, t, q
	r.QueueOffset = int64(binary.BigEndian.Uint64(rest))
	r.VisibleAt = int64(binary.BigEndian.Uint64(v))
	r.PopTime = int64(binary.BigEndian.Uint64(v[8:]))
	r.InvisibleTime = int64(binary.BigEndian.Uint64(v[16:]))
	return r, nil
}

func encodeOrderState(s *OrderState) []byte {
	b := make([]byte, 0, 8+8+8+2+len(s.AttemptID)+2+20*len(s.Messages)+2+12*len(s.Carried))
	b = binary.BigEndian.AppendUint64(b, uint64(s.PopTime))
	b = binary.BigEndian.AppendUint64(b, uint64(s.InvisibleTime))
	b = binary.BigEndian.AppendUint64(b, s.Acked)
	b = appendString16(b, s.AttemptID)
	b = binary.BigEndian.AppendUint16(b, uint16(len(s.Messages)))
	for _, m := range s.Messages {
		b = binary.BigEndian.AppendUint64(b, uint64(m.QueueOffset))
		b = binary.BigEndian.AppendUint32(b, uint32(m.Consumed))
		b = binary.BigEndian.AppendUint64(b, uint64(m.NextVisibleAt))
	}
	if len(s.Carried) == 0 {
		return b // the form of a batch without carried counts, as before they existed
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(s.Carried)))
	for _, c := range s.Carried {
		b = binary.BigEndian.AppendUint64(b, uint64(c.QueueOffset))
		b = binary.BigEndian.AppendUint32(b, uint32(c.Consumed))
	}
	return b
}

func decodeOrderState(k, v []byte) (OrderState, error) {
	var s OrderState
	g, t, q, rest, err := decodeGroupTopicQueue(k, prefixPopOrder)
	if err != nil || len(rest) != 0 {
		return s, ErrBadKey
	}
	s.Group, s.Topic, s.QueueID = g, t, q
	return s, decodeOrderValue(&s, v)
}

// decodeOrderValue decodes the value of an orderly batch (the 0x53
// layout) into s, whose group, topic and queue the key gave.
func decodeOrderValue(s *OrderState, v []byte) error {
	if len(v) < 24 {
		return ErrBadKey
	}
	s.PopTime = int64(binary.BigEndian.Uint64(v))
	s.InvisibleTime = int64(binary.BigEndian.Uint64(v[8:]))
	s.Acked = binary.BigEndian.Uint64(v[16:])
	var rest []byte
	var err error
	if s.AttemptID, rest, err = readString16(v[24:]); err != nil || len(rest) < 2 {
		return ErrBadKey
	}
	n := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if n > MaxOrderBatch || len(rest) < 20*n {
		return ErrBadKey
	}
	s.Messages = make([]OrderMessage, n)
	for i := range s.Messages {
		s.Messages[i] = OrderMessage{
			QueueOffset:   int64(binary.BigEndian.Uint64(rest)),
			Consumed:      int32(binary.BigEndian.Uint32(rest[8:])),
			NextVisibleAt: int64(binary.BigEndian.Uint64(rest[12:])),
		}
		rest = rest[20:]
	}
	if len(rest) == 0 {
		return nil
	}
	// Carried counts: present only when there are some.
	if len(rest) < 2 {
		return ErrBadKey
	}
	m := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if m == 0 || m > MaxOrderBatch || len(rest) != 12*m {
		return ErrBadKey
	}
	s.Carried = make([]OrderCount, m)
	for i := range s.Carried {
		s.Carried[i] = OrderCount{QueueOffset: int64(binary.BigEndian.Uint64(rest)), Consumed: int32(binary.BigEndian.Uint32(rest[8:]))}
		rest = rest[12:]
	}
	return nil
}

func requestModeKey(topic, group string) []byte {
	b := make([]byte, 0, 5+len(topic)+len(group))
	b = append(b, prefixPopRequestMd)
	b = appendString16(b, topic)
	return appendString16(b, group)
}

func decodeRequestMode(k, v []byte) (RequestMode, error) {
	if len(k) < 1 || k[0] != prefixPopRequestMd {
		return RequestMode{}, ErrBadKey
	}
	topic, rest, err := readString16(k[1:])
	if err != nil {
		return RequestMode{}, err
	}
	group, rest, err := readString16(rest)
	if err != nil || len(rest) != 0 {
		return RequestMode{}, ErrBadKey
	}
	return RequestMode{Topic: topic, Group: group, JSON: append([]byte(nil), v...)}, nil
}

// PopBatch collects POP state changes that commit atomically.
type PopBatch struct {
	b         *pebble.Batch
	db        *DB
	key       []byte
	val       []byte
	cache     *positionCache
	offsets   *positionCache
	floors    *checkpointFloors
	cks       *checkpointCache
	positions []positionUpdate // set in the batch, cached once committed
	committed []positionUpdate // likewise, committed offsets
	ckUpdates []ckUpdate       // likewise, checkpoint writes
	// unwaited is set by CommitDurable until its wait ran: a Close
	// meanwhile is left to the wait (Pebble's batch must not be closed
	// before it), which releases the batch.
	unwaited, closed bool
}

// NewBatch returns an empty batch; Close releases it.
func (s *PopStore) NewBatch() *PopBatch {
	return &PopBatch{b: s.db.pdb.NewBatch(), db: s.db, cache: s.db.positions, offsets: s.db.committed, floors: s.db.floors, cks: s.db.cks}
}

func checkGroupTopic(group, topic string) error {
	if err := checkName("group", group); err != nil {
		return err
	}
	return checkName("topic", topic)
}

// SetPosition records a group's next pop offset on a queue.
func (p *PopBatch) SetPosition(group, topic string, queueID int32, next int64) error {
	if err := checkGroupTopic(group, topic); err != nil {
		return fmt.Errorf("set pop position: %w", err)
	}
	if next < 0 {
		return fmt.Errorf("set pop position of %s on %s/%d: negative offset %d", group, topic, queueID, next)
	}
	p.key = groupTopicQueue(p.key[:0], prefixPopPosition, group, topic, queueID)
	if err := p.b.Set(p.key, putInt64(next), nil); err != nil {
		return fmt.Errorf("set pop position of %s on %s/%d: %w", group, topic, queueID, err)
	}
	p.positions = append(p.positions, positionUpdate{string(p.key), next})
	return nil
}

// SetCommitted records a committed consumer offset (keyspace 0x30, the
// table of ConsumerOffsets) in the batch.
func (p *PopBatch) SetCommitted(group, topic string, queueID int32, offset int64) error {
	if err := checkGroupTopic(group, topic); err != nil {
		return fmt.Errorf("commit offset: %w", err)
	}
	k := consumerOffsetKey(group, topic, queueID)
	if err := p.b.Set(k, putInt64(offset), nil); err != nil {
		return fmt.Errorf("commit offset of %s on %s/%d: %w", group, topic, queueID, err)
	}
	p.committed = append(p.committed, positionUpdate{string(k), offset})
	return nil
}

// SetOrder records (or replaces) the orderly batch of a queue.
func (p *PopBatch) SetOrder(s *OrderState) error {
	if err := checkGroupTopic(s.Group, s.Topic); err != nil {
		return fmt.Errorf("set order state: %w", err)
	}
	if len(s.Messages) > MaxOrderBatch || len(s.Carried) > MaxOrderBatch || len(s.AttemptID) > maxKeyLen {
		return fmt.Errorf("set order state of %s on %s/%d: %d messages and %d carried counts (max %d each), attemptId of %d bytes",
			s.Group, s.Topic, s.QueueID, len(s.Messages), len(s.Carried), MaxOrderBatch, len(s.AttemptID))
	}
	p.key = groupTopicQueue(p.key[:0], prefixPopOrder, s.Group, s.Topic, s.QueueID)
	if err := p.b.Set(p.key, encodeOrderState(s), nil); err != nil {
		return fmt.Errorf("set order state of %s on %s/%d: %w", s.Group, s.Topic, s.QueueID, err)
	}
	return nil
}

// DeleteOrder removes the orderly batch of a queue.
func (p *PopBatch) DeleteOrder(group, topic string, queueID int32) error {
	p.key = groupTopicQueue(p.key[:0], prefixPopOrder, group, topic, queueID)
	if err := p.b.Delete(p.key, nil); err != nil {
		return fmt.Errorf("delete order state of %s on %s/%d: %w", group, topic, queueID, err)
	}
	return nil
}

// Empty reports whether the batch holds no change.
func (p *PopBatch) Empty() bool { return p.b.Empty() }

// Commit applies the batch. With sync it returns once the batch is durable
// (concurrent synced commits share one WAL sync); without, once it is
// visible to readers: a later synced commit or Sync makes it durable, and
// since the WAL is replayed in order, a crash keeps a prefix of the
// commits.
func (p *PopBatch) Commit(sync bool) error {
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	defer p.lockOffsets()()
	return p.settle(p.b.Commit(opts))
}

// lockOffsets holds the database's offsetsMu when the batch commits
// offsets (0x30), so that their cache takes them in the order the
// database does, as ConsumerOffsets.SetMany's; it returns the unlock.
func (p *PopBatch) lockOffsets() func() {
	if len(p.committed) == 0 {
		return func() {}
	}
	p.db.offsetsMu.Lock()
	return p.db.offsetsMu.Unlock
}

// CommitDurable commits the batch as Commit(true) does, in one pass
// through the database's commit pipeline, but returns as soon as its
// writes are applied and visible: wait, which the caller must call (from
// the goroutine that committed; later calls return nil), returns when
// they are also as durable as Options.WALSync says (under
// WALSyncInterval, handed to the operating system). A caller commits
// under a lock and waits after releasing it, so a slow log write or
// fdatasync does not hold the lock, and needs no separate Flush, a second
// pass through the pipeline, to make the batch durable. The write-ahead
// log is written in order, so the wait covers every commit made before
// this one as well. Close may come before the wait (a deferred Close
// under the lock): the batch is then released by the wait.
//
// It uses Pebble's ApplyNoSyncWait, which Pebble marks experimental
// (CockroachDB applies its raft writes this way).
func (p *PopBatch) CommitDurable() (wait func() error, err error) {
	if p.db.readOnly {
		return nil, fmt.Errorf("commit pop state: %w", pebble.ErrReadOnly)
	}
	unlock := p.lockOffsets()
	err = p.settle(p.db.pdb.ApplyNoSyncWait(p.b, pebble.Sync))
	unlock()
	if err != nil {
		return nil, err
	}
	p.unwaited = true
	p.db.flushes.Add(1)
	return func() error {
		if !p.unwaited {
			return nil
		}
		p.unwaited = false
		err := p.b.SyncWait()
		p.Close() // nothing uses a committed batch again
		if err != nil {
			return fmt.Errorf("sync pop state: %w", err)
		}
		return nil
	}, nil
}

// settle brings the caches up to date with a batch whose commit
// returned err: the batch's writes when it succeeded, the checkpoints it
// touched forgotten when it failed.
func (p *PopBatch) settle(err error) error {
	if err != nil {
		p.cks.forget(p.ckUpdates)
		clear(p.ckUpdates)
		p.ckUpdates = p.ckUpdates[:0]
		return fmt.Errorf("commit pop state: %w", err)
	}
	p.traceCheckpoints()
	p.cks.apply(p.ckUpdates)
	clear(p.ckUpdates)
	p.ckUpdates = p.ckUpdates[:0]
	p.cache.apply(p.positions)
	p.positions = p.positions[:0]
	p.offsets.apply(p.committed)
	p.committed = p.committed[:0]
	return nil
}

// traceCheckpoints logs, at debug level, each checkpoint write of a
// committed batch: which checkpoint and how many offsets it holds after
// the write (none: deleted). With the pop and ack traces of the POP
// service it tells the story of a message's in-flight record.
func (p *PopBatch) traceCheckpoints() {
	for _, u := range p.ckUpdates {
		e := p.db.log.Debug()
		if !e.Enabled() {
			return
		}
		c := u.c
		first, last := int64(-1), int64(-1)
		if len(c.Offsets) > 0 {
			first, last = c.Offsets[0], c.Offsets[len(c.Offsets)-1]
		}
		e.Str("group", c.Group).Str("topic", c.Topic).Int32("queue", c.QueueID).
			Int64("ckOffset", c.CKOffset).Int64("popTime", c.PopTime).Bool("deleted", u.deleted).
			Int("offsets", len(c.Offsets)).Int64("first", first).Int64("last", last).
			Int64("visibleAt", c.VisibleAt).Bool("staged", c.Staged).Msg("pop state: checkpoint written")
	}
}

// Close releases the batch; after a CommitDurable whose wait has not run
// yet, the wait releases it. Closing twice is harmless.
func (p *PopBatch) Close() {
	if p.closed {
		return
	}
	if p.unwaited {
		return
	}
	p.closed = true
	_ = p.b.Close()
}

// ForgetTimers adds the deletion of timer entries to the batch: an import
// that takes parked messages out of the timer commits that with what it
// made of them, so a crash cannot keep the one without the other.
func (p *PopBatch) ForgetTimers(entries []TimerEntry) error {
	for _, e := range entries {
		if err := p.b.Delete(timerKey(e.DeliverMs, e.PhyOffset), nil); err != nil {
			return fmt.Errorf("forget timer at %d: %w", e.PhyOffset, err)
		}
	}
	return nil
}

// MarkRocketMQPopImported adds DB.MarkRocketMQPopImported to the batch.
func (p *PopBatch) MarkRocketMQPopImported(at int64) error {
	if err := p.b.Set(metaKey(metaPopImported), putInt64(at), nil); err != nil {
		return fmt.Errorf("mark the RocketMQ POP import: %w", err)
	}
	return nil
}

// SetStageFrontier records, in the batch, the latest time a staged
// revive's copies are handed out from (PopStore.StageFrontier).
func (p *PopBatch) SetStageFrontier(at int64) error {
	if err := p.b.Set(metaKey(metaPopStageFrontier), putInt64(at), nil); err != nil {
		return fmt.Errorf("record the staged revive's frontier: %w", err)
	}
	return nil
}

// StageFrontier returns the time SetStageFrontier last recorded; ok is
// false when none was.
func (s *PopStore) StageFrontier() (at int64, ok bool, err error) {
	return s.db.metaInt64(metaPopStageFrontier)
}

// Sync makes every commit so far durable.
func (s *PopStore) Sync() error { return s.db.Flush() }

// Position returns a group's next pop offset on a queue; ok is false when
// the group never popped there.
func (s *PopStore) Position(group, topic string, queueID int32) (int64, bool, error) {
	k := groupTopicQueue(nil, prefixPopPosition, group, topic, queueID)
	pos, hit, gen := s.db.positions.get(k)
	if hit {
		return max(pos, 0), pos != noPosition, nil
	}
	v, err := s.db.get(k)
	if err != nil {
		return 0, false, fmt.Errorf("read pop position of %s on %s/%d: %w", group, topic, queueID, err)
	}
	if v == nil {
		s.db.positions.fill(k, noPosition, gen)
		return 0, false, nil
	}
	off, err := getInt64(v)
	if err != nil {
		return 0, false, fmt.Errorf("read pop position of %s on %s/%d: %w", group, topic, queueID, err)
	}
	if off >= 0 {
		s.db.positions.fill(k, off, gen)
	}
	return off, true, nil
}

// Order returns the orderly batch of a queue; ok is false when there is
// none.
func (s *PopStore) Order(group, topic string, queueID int32) (OrderState, bool, error) {
	k := groupTopicQueue(nil, prefixPopOrder, group, topic, queueID)
	v, err := s.db.get(k)
	if err != nil {
		return OrderState{}, false, fmt.Errorf("read order state of %s on %s/%d: %w", group, topic, queueID, err)
	}
	if v == nil {
		return OrderState{}, false, nil
	}
	st, err := decodeOrderState(k, v)
	if err != nil {
		return OrderState{}, false, fmt.Errorf("order state of %s on %s/%d: %w", group, topic, queueID, err)
	}
	return st, true, nil
}

// EachOrder calls fn for every orderly batch in flight, in key order
// (group, topic, queue), until fn returns false.
func (s *PopStore) EachOrder(fn func(OrderState) bool) error {
	var derr error
	err := s.db.Scan([]byte{prefixPopOrder}, func(k, v []byte) bool {
		st, err := decodeOrderState(k, v)
		if err != nil {
			derr = fmt.Errorf("order state key %x: %w", k, err)
			return false
		}
		return fn(st)
	})
	if err != nil {
		return err
	}
	return derr
}

// SetRequestMode stores a topic and group's request mode JSON durably.
func (s *PopStore) SetRequestMode(topic, group string, body []byte) error {
	if err := checkGroupTopic(group, topic); err != nil {
		return fmt.Errorf("set request mode: %w", err)
	}
	if err := s.db.pdb.Set(requestModeKey(topic, group), body, pebble.Sync); err != nil {
		return fmt.Errorf("set request mode of %s on %s: %w", group, topic, err)
	}
	return nil
}

// DeleteRequestMode removes a topic and group's request mode durably (the
// group then pulls); an absent one is ignored.
func (s *PopStore) DeleteRequestMode(topic, group string) error {
	if err := s.db.pdb.Delete(requestModeKey(topic, group), pebble.Sync); err != nil {
		return fmt.Errorf("delete the request mode of %s on %s: %w", group, topic, err)
	}
	return nil
}

// RequestMode returns the request mode JSON of a topic and group, nil when
// none was set.
func (s *PopStore) RequestMode(topic, group string) ([]byte, error) {
	v, err := s.db.get(requestModeKey(topic, group))
	if err != nil {
		return nil, fmt.Errorf("read request mode of %s on %s: %w", group, topic, err)
	}
	return v, nil
}

// EachRequestMode calls fn for every stored request mode in key order
// until fn returns false.
func (s *PopStore) EachRequestMode(fn func(RequestMode) bool) error {
	var derr error
	err := s.db.Scan([]byte{prefixPopRequestMd}, func(k, v []byte) bool {
		m, err := decodeRequestMode(k, v)
		if err != nil {
			derr = fmt.Errorf("request mode key %x: %w", k, err)
			return false
		}
		return fn(m)
	})
	if err != nil {
		return err
	}
	return derr
}

// DeleteTopic deletes what the consumers of a deleted topic left in the
// database, of every group: committed offsets (0x30, as RocketMQ's
// ConsumerOffsetManager.cleanOffsetByTopic), pop positions and orderly
// batches (0x52, 0x53), checkpoints with their deadlines (0x55, 0x56),
// revive batches (0x58), a slave's own pop state (0x59) and the revive
// intents an earlier version left (0x57), which the POP service's start
// would give back to checkpoints.
// Left, a topic created again under the same name would number its
// queues from 0 while a stale position or offset skips its messages, and
// revive would read it at the checkpoints' offsets and deliver its
// messages a second time.
//
// It first waits for the holds of the topic under way (HoldTopic: the
// revives, pops, acks, changes of invisible time and offset resets of
// its queues) and keeps new ones waiting until it returns, so that
// nothing a hold wrote survives it: a revive that read a checkpoint
// before the topic's queues were dropped would otherwise put its
// messages to the pop-retry topic, move the group's committed offset or
// give them back to a checkpoint after the deletion returned, and an ack
// would write back the checkpoint it read. A revive's put can take a
// while (a failed one waits for the dispatcher), and so can this wait.
// The caller deletes the topic's config first (see HoldTopic).
func (s *PopStore) DeleteTopic(topic string) error {
	if err := s.deleteConsumerState(topic, nil); err != nil {
		return fmt.Errorf("delete the consumer state of %q: %w", topic, err)
	}
	return nil
}

// DeleteQueueState is DeleteTopic for one queue of topic: what every
// group left of it, waiting for the topic's holds as DeleteTopic does.
// A slave calls it when a replicated record starts the queue anew (its
// master deleted the topic and created it again, deleting the topic's
// consumer state with it, kvindex.DispatcherOptions.QueueRestarted):
// the offsets and positions it kept number the old queue, and once
// promoted it would skip the new topic's messages below them.
func (s *PopStore) DeleteQueueState(topic string, queueID int32) error {
	if err := s.deleteConsumerState(topic, binary.BigEndian.AppendUint32(nil, uint32(queueID))); err != nil {
		return fmt.Errorf("delete the consumer state of %s/%d: %w", topic, queueID, err)
	}
	return nil
}

// deleteConsumerState deletes the consumer state of topic, of every
// group, in one durable batch: of every queue when queue is nil, else of
// the queue whose big-endian queueId it holds (keys continue group |
// topic with the queue id in every keyspace it deletes from).
func (s *PopStore) deleteConsumerState(topic string, queue []byte) error {
	end := s.db.topicFence.exclude(topic)
	defer end()
	b := s.NewBatch()
	defer b.Close()
	err := s.eachGroupOfTopic(prefixPopCK, topic, func(it *pebble.Iterator, lo []byte) error {
		lo = append(lo, queue...)
		for ok := it.SeekGE(lo); ok && bytes.HasPrefix(it.Key(), lo); ok = it.Next() {
			c, err := decodeCheckpoint(it.Key(), it.Value())
			if err != nil {
				continue // kvdump check reports it
			}
			if err := b.DeleteCheckpoint(&c); err != nil {
				return err
			}
		}
		return nil
	})
	for _, p := range []byte{prefixConsumerOf, prefixPopPosition, prefixPopOrder, prefixPopRevive, prefixPopReviveBatch, prefixPopSlaveOwn} {
		if err != nil {
			break
		}
		// Only groups that hold keys of the topic get a range deletion:
		// a broker sees thousands of groups come and go, and a
		// tombstone for each on every deletion would fill the memtable
		// with fragments Pebble rebuilds for every read.
		err = s.eachGroupOfTopic(p, topic, func(it *pebble.Iterator, lo []byte) error {
			lo = append(lo, queue...)
			if !it.SeekGE(lo) || !bytes.HasPrefix(it.Key(), lo) {
				return nil
			}
			return b.b.DeleteRange(lo, prefixEnd(lo), nil)
		})
	}
	if err == nil {
		err = b.Commit(true)
	}
	// Reads since the cache entries were filled may have been of keys
	// deleted now.
	s.db.positions.purge()
	s.db.committed.purge()
	return err
}

// eachGroupOfTopic calls fn with the key prefix of each group's part of
// topic in a keyspace keyed by group, then topic (prefix | groupLen |
// group | topicLen | topic ...): one seek per group. fn may move it
// within that part.
func (s *PopStore) eachGroupOfTopic(prefix byte, topic string, fn func(it *pebble.Iterator, lo []byte) error) error {
	it, err := s.db.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; {
		g, _, err := readString16(it.Key()[1:])
		if err != nil {
			break // not ours to judge here; kvdump check reports it
		}
		if err := fn(it, appendString16(topicPrefix(prefix, g), topic)); err != nil {
			return errors.Join(err, it.Close())
		}
		ok = it.SeekGE(prefixEnd(topicPrefix(prefix, g)))
	}
	return it.Close()
}

// DeleteGroupPositions deletes the pop positions (0x52), orderly batches
// (0x53) and a slave's own pop state (0x59) of group on every topic (a
// group deleted with its offsets). A group popping again then starts from its committed offset
// or its init mode, as RocketMQ's pops do once the offsets are cleaned.
// A deleted topic's go with the rest of its consumer state (DeleteTopic).
func (s *PopStore) DeleteGroupPositions(group string) error {
	b := s.db.pdb.NewBatch()
	defer b.Close()
	for _, p := range []byte{prefixPopPosition, prefixPopOrder, prefixPopSlaveOwn} {
		lo := topicPrefix(p, group)
		if err := b.DeleteRange(lo, prefixEnd(lo), nil); err != nil {
			return fmt.Errorf("delete pop positions of %q: %w", group, err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("delete pop positions of %q: %w", group, err)
	}
	s.db.positions.purge()
	return nil
}
