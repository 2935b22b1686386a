package kvindex

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// MaxCheckpointSpan bounds the offsets one checkpoint covers: every offset
// of a checkpoint lies in [CKOffset, CKOffset+MaxCheckpointSpan). A pop
// reads at most this many entries of a queue, so its checkpoint fits; the
// bound lets MinInFlight start its seek close to the committed offset
// instead of walking the tombstones of every checkpoint acknowledged
// since the queue began.
const MaxCheckpointSpan = 4096

// ErrBadCheckpoint is returned by PutCheckpoint for a checkpoint that
// breaks the layout's rules (names, offsets ascending and within
// MaxCheckpointSpan of CKOffset): nothing is written.
var ErrBadCheckpoint = errors.New("kvindex: checkpoint breaks the layout's rules")

// Checkpoint is one pop of one queue with messages still in flight
// (keyspaces 0x55 and 0x56): RocketMQ's PopCheckPoint with the
// acknowledged messages removed from its offset list instead of marked in
// a bit map. A pop of n messages of a queue costs one checkpoint, and an
// ack of them one rewrite or delete of it, not n records.
type Checkpoint struct {
	// Group is the consumer group that popped the messages.
	Group string `json:"group"`
	// Topic is the topic they were read from: the pop-retry topic for
	// retried messages.
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	// CKOffset is the first offset the pop read on the queue (the
	// handle's ckQueueOffset), PopTime and InvisibleTime the handle's
	// fields (ms). With Group, Topic and QueueID they name the
	// checkpoint: an ack finds it from the handle alone.
	CKOffset      int64 `json:"ckOffset"`
	PopTime       int64 `json:"popTime"`
	InvisibleTime int64 `json:"invisibleTime"`
	// VisibleAt is the visibility deadline in ms since the epoch:
	// PopTime + InvisibleTime, or the revive retry time after a failed
	// revive.
	VisibleAt int64 `json:"visibleAt"`
	// RetryFlag is 0 for a normal topic, 1 for a V1 pop-retry topic and 2
	// for a V2 one.
	RetryFlag uint8 `json:"retryFlag"`
	// Attempts counts failed revives of this checkpoint.
	Attempts int32 `json:"attempts"`
	// Staged marks a checkpoint whose messages a staged revive already
	// copied to the pop-retry topic ahead of their deadline, PopTime +
	// InvisibleTime (see StageCheckpoint): each copy is handed out only
	// while its offset is still here, and VisibleAt is the checkpoint's
	// backstop, when revive re-delivers what no pop took the copy of.
	Staged bool `json:"staged,omitempty"`
	// Offsets are the queue offsets still in flight, ascending.
	Offsets []int64 `json:"offsets"`
}

// message returns the in-flight view of one offset of c.
func (c *Checkpoint) message(off int64) InFlight {
	return InFlight{Group: c.Group, Topic: c.Topic, QueueID: c.QueueID, QueueOffset: off, VisibleAt: c.VisibleAt,
		PopTime: c.PopTime, InvisibleTime: c.InvisibleTime, CKOffset: c.CKOffset, RetryFlag: c.RetryFlag, Attempts: c.Attempts, Staged: c.Staged}
}

// Remove drops the given offsets (ascending) from c.Offsets and returns
// those it held.
func (c *Checkpoint) Remove(sorted []int64) []int64 {
	var removed []int64
	kept := c.Offsets[:0]
	i := 0
	for _, off := range c.Offsets {
		for i < len(sorted) && sorted[i] < off {
			i++
		}
		if i < len(sorted) && sorted[i] == off {
			removed = append(removed, off)
			continue
		}
		kept = append(kept, off)
	}
	c.Offsets = kept
	return removed
}

// Contains reports whether offset is still in flight in c.
func (c *Checkpoint) Contains(offset int64) bool {
	_, ok := slices.BinarySearch(c.Offsets, offset)
	return ok
}

// checkpointKey is 0x56 | group | topic | queueId | ckOffset | popTime.
func checkpointKey(dst []byte, group, topic string, queueID int32, ckOffset, popTime int64) []byte {
	dst = groupTopicQueue(dst, prefixPopCK, group, topic, queueID)
	dst = binary.BigEndian.AppendUint64(dst, uint64(ckOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(popTime))
}

// checkpointDueKey is 0x55 | visibleAt | group | topic | queueId |
// ckOffset | popTime.
func checkpointDueKey(dst []byte, c *Checkpoint) []byte {
	dst = deadlineKey(dst, prefixPopCKDue, c.VisibleAt, c.Group, c.Topic, c.QueueID)
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.CKOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(c.PopTime))
}

// checkpointValueFixed is the fixed part of a checkpoint value: visibleAt,
// invisibleTime, retryFlag, attempts.
const checkpointValueFixed = 8 + 8 + 1 + 4

// checkCheckpoint reports a checkpoint that cannot be stored.
func checkCheckpoint(c *Checkpoint) error {
	if err := checkGroupTopic(c.Group, c.Topic); err != nil {
		return err
	}
	if len(c.Offsets) == 0 {
		return fmt.Errorf("checkpoint %s/%s/%d@%d: no offsets", c.Group, c.Topic, c.QueueID, c.CKOffset)
	}
	if c.RetryFlag&stagedBit != 0 {
		return fmt.Errorf("checkpoint %s/%s/%d@%d: retry flag %d out of range", c.Group, c.Topic, c.QueueID, c.CKOffset, c.RetryFlag)
	}
	if c.CKOffset < 0 || c.Offsets[0] < c.CKOffset || c.Offsets[len(c.Offsets)-1]-c.CKOffset >= MaxCheckpointSpan {
		return fmt.Errorf("checkpoint %s/%s/%d@%d: offsets %d..%d outside [ckOffset, ckOffset+%d)",
			c.Group, c.Topic, c.QueueID, c.CKOffset, c.Offsets[0], c.Offsets[len(c.Offsets)-1], MaxCheckpointSpan)
	}
	for i := 1; i < len(c.Offsets); i++ {
		if c.Offsets[i] <= c.Offsets[i-1] {
			return fmt.Errorf("checkpoint %s/%s/%d@%d: offsets not ascending at %d", c.Group, c.Topic, c.QueueID, c.CKOffset, c.Offsets[i])
		}
	}
	return nil
}

// stagedBit is the bit of a checkpoint value's retryFlag byte that marks
// a staged checkpoint (Checkpoint.Staged); retry flags are 0, 1 or 2.
const stagedBit = 0x80

// checkpointValue is visibleAt | invisibleTime | retryFlag (its top bit:
// staged) | attempts | count uvarint | offset deltas uvarint (the first
// from ckOffset, each next from the one before).
func checkpointValue(dst []byte, c *Checkpoint) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.VisibleAt))
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.InvisibleTime))
	flag := c.RetryFlag
	if c.Staged {
		flag |= stagedBit
	}
	dst = append(dst, flag)
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Attempts))
	dst = binary.AppendUvarint(dst, uint64(len(c.Offsets)))
	prev := c.CKOffset
	for _, off := range c.Offsets {
		dst = binary.AppendUvarint(dst, uint64(off-prev))
		prev = off
	}
	return dst
}

// uvarint reads a varint as checkpointValue writes it: binary.Uvarint,
// refused (n == 0) when not in its shortest form, which ends in a zero
// byte and which this package never writes, so that every value decoded
// encodes back to the same bytes.
func uvarint(b []byte) (uint64, int) {
	x, n := binary.Uvarint(b)
	if n > 1 && b[n-1] == 0 {
		return 0, 0
	}
	return x, n
}

// decodeCheckpoint decodes a 0x56 key and its value.
func decodeCheckpoint(k, v []byte) (Checkpoint, error) {
	var c Checkpoint
	g, t, q, rest, err := decodeGroupTopicQueue(k, prefixPopCK)
	if err != nil || len(rest) != 16 || len(v) < checkpointValueFixed {
		return c, ErrBadKey
	}
	c.Group, c.Topic, c.QueueID = g, t, q
	c.CKOffset = int64(binary.BigEndian.Uint64(rest))
	c.PopTime = int64(binary.BigEndian.Uint64(rest[8:]))
	c.VisibleAt = int64(binary.BigEndian.Uint64(v))
	c.InvisibleTime = int64(binary.BigEndian.Uint64(v[8:]))
	c.RetryFlag, c.Staged = v[16]&^stagedBit, v[16]&stagedBit != 0
	c.Attempts = int32(binary.BigEndian.Uint32(v[17:]))
	v = v[checkpointValueFixed:]
	n, w := uvarint(v)
	if w <= 0 || n == 0 || n > MaxCheckpointSpan || c.CKOffset < 0 {
		return c, ErrBadKey
	}
	v = v[w:]
	c.Offsets = make([]int64, 0, n)
	prev := c.CKOffset
	for i := uint64(0); i < n; i++ {
		d, w := uvarint(v)
		if w <= 0 || (i > 0 && d == 0) || d >= MaxCheckpointSpan {
			return c, ErrBadKey
		}
		v = v[w:]
		prev += int64(d)
		c.Offsets = append(c.Offsets, prev)
	}
	if len(v) != 0 || prev-c.CKOffset >= MaxCheckpointSpan {
		return c, ErrBadKey
	}
	return c, nil
}

// decodeCheckpointDue decodes a 0x55 key into the fields it holds, and its
// value, the offset count the checkpoint had when the entry was written.
func decodeCheckpointDue(k, v []byte) (Checkpoint, int, error) {
	c, err := decodeCheckpointDueKey(k)
	if err != nil {
		return c, 0, err
	}
	n, w := uvarint(v)
	if w <= 0 || w != len(v) || n == 0 || n > MaxCheckpointSpan {
		return c, 0, ErrBadKey
	}
	return c, int(n), nil
}

func decodeCheckpointDueKey(k []byte) (Checkpoint, error) {
	var c Checkpoint
	at, g, t, q, rest, err := decodeDeadlineKey(k, prefixPopCKDue)
	if err != nil || len(rest) != 16 {
		return c, ErrBadKey
	}
	c.VisibleAt, c.Group, c.Topic, c.QueueID = at, g, t, q
	c.CKOffset = int64(binary.BigEndian.Uint64(rest))
	c.PopTime = int64(binary.BigEndian.Uint64(rest[8:]))
	return c, nil
}

// PutCheckpoint records a checkpoint: its record (0x56) and its deadline
// entry (0x55). It replaces a checkpoint of the same name, whose deadline
// entry the caller deletes when its VisibleAt differs.
func (p *PopBatch) PutCheckpoint(c *Checkpoint) error {
	if err := checkCheckpoint(c); err != nil {
		return fmt.Errorf("put checkpoint: %w: %w", ErrBadCheckpoint, err)
	}
	p.key = groupTopicQueue(p.key[:0], prefixPopCK, c.Group, c.Topic, c.QueueID)
	p.floors.lower(p.key, c.CKOffset)
	p.key = binary.BigEndian.AppendUint64(p.key, uint64(c.CKOffset))
	p.key = binary.BigEndian.AppendUint64(p.key, uint64(c.PopTime))
	p.val = checkpointValue(p.val[:0], c)
	if err := p.b.Set(p.key, p.val, nil); err != nil {
		return fmt.Errorf("put checkpoint %s/%s/%d@%d: %w", c.Group, c.Topic, c.QueueID, c.CKOffset, err)
	}
	p.key = checkpointDueKey(p.key[:0], c)
	p.val = binary.AppendUvarint(p.val[:0], uint64(len(c.Offsets)))
	if err := p.b.Set(p.key, p.val, nil); err != nil {
		return fmt.Errorf("put checkpoint deadline %s/%s/%d@%d: %w", c.Group, c.Topic, c.QueueID, c.CKOffset, err)
	}
	p.noteCheckpoint(c, false)
	return nil
}

// noteCheckpoint remembers a checkpoint write for the checkpoint cache,
// which Commit brings up to date once the batch is in the database.
func (p *PopBatch) noteCheckpoint(c *Checkpoint, deleted bool) {
	held := *c
	held.Offsets = nil
	if !deleted {
		held.Offsets = slices.Clone(c.Offsets)
	}
	p.key = groupTopicQueue(p.key[:0], prefixPopCK, c.Group, c.Topic, c.QueueID)
	p.ckUpdates = append(p.ckUpdates, ckUpdate{queue: string(p.key), c: &held, deleted: deleted})
}

// RewriteCheckpoint stores a checkpoint whose offsets changed but whose
// VisibleAt did not: only its record is written, or, when no offset is
// left, the checkpoint is deleted with its deadline entry.
func (p *PopBatch) RewriteCheckpoint(c *Checkpoint) error {
	if len(c.Offsets) == 0 {
		return p.DeleteCheckpoint(c)
	}
	if err := checkCheckpoint(c); err != nil {
		return fmt.Errorf("rewrite checkpoint: %w", err)
	}
	p.key = checkpointKey(p.key[:0], c.Group, c.Topic, c.QueueID, c.CKOffset, c.PopTime)
	p.val = checkpointValue(p.val[:0], c)
	if err := p.b.Set(p.key, p.val, nil); err != nil {
		return fmt.Errorf("rewrite checkpoint %s/%s/%d@%d: %w", c.Group, c.Topic, c.QueueID, c.CKOffset, err)
	}
	p.noteCheckpoint(c, false)
	return nil
}

// DeleteCheckpoint removes a checkpoint's record and its deadline entry
// (at c.VisibleAt).
func (p *PopBatch) DeleteCheckpoint(c *Checkpoint) error {
	p.key = checkpointKey(p.key[:0], c.Group, c.Topic, c.QueueID, c.CKOffset, c.PopTime)
	if err := p.b.Delete(p.key, nil); err != nil {
		return fmt.Errorf("delete checkpoint: %w", err)
	}
	if err := p.deleteDue(c); err != nil {
		return err
	}
	p.noteCheckpoint(c, true)
	return nil
}

// deleteDue removes a checkpoint's deadline entry at c.VisibleAt.
func (p *PopBatch) deleteDue(c *Checkpoint) error {
	p.key = checkpointDueKey(p.key[:0], c)
	if err := p.b.Delete(p.key, nil); err != nil {
		return fmt.Errorf("delete checkpoint deadline: %w", err)
	}
	return nil
}

// MoveCheckpoint gives a stored checkpoint (at old's VisibleAt) the fields
// of c, which names the same checkpoint: a failed revive's new deadline
// and attempt count, with the offsets still to revive.
func (p *PopBatch) MoveCheckpoint(old, c *Checkpoint) error {
	if old.VisibleAt != c.VisibleAt {
		if err := p.deleteDue(old); err != nil {
			return err
		}
	}
	return p.PutCheckpoint(c)
}

// StageCheckpoint marks a stored checkpoint staged (Checkpoint.Staged):
// its record is rewritten with the mark and its deadline entry moved to
// backstop, when revive re-delivers what no pop took the copy of. c is the
// checkpoint as stored (not staged, never failed a revive: its deadline
// is PopTime + InvisibleTime); it is left unchanged.
func (p *PopBatch) StageCheckpoint(c *Checkpoint, backstop int64) error {
	if c.Staged || c.Attempts != 0 {
		return fmt.Errorf("stage checkpoint %s/%s/%d@%d: staged already or revived before", c.Group, c.Topic, c.QueueID, c.CKOffset)
	}
	staged := *c
	staged.Staged, staged.VisibleAt = true, backstop
	return p.MoveCheckpoint(c, &staged)
}

// UnstageCheckpoint takes the staged mark off a stored checkpoint: its
// record is rewritten and its deadline entry moved back to its messages'
// deadline, PopTime + InvisibleTime, so revive re-delivers them then (at
// once when that has passed). c is the checkpoint as stored (staged); it
// is left unchanged.
func (p *PopBatch) UnstageCheckpoint(c *Checkpoint) error {
	if !c.Staged {
		return fmt.Errorf("unstage checkpoint %s/%s/%d@%d: not staged", c.Group, c.Topic, c.QueueID, c.CKOffset)
	}
	plain := *c
	plain.Staged, plain.VisibleAt = false, c.PopTime+c.InvisibleTime
	return p.MoveCheckpoint(c, &plain)
}

// Checkpoint returns the checkpoint a handle names; ok is false when there
// is none (all its messages acknowledged or revived, or an unknown
// handle).
func (s *PopStore) Checkpoint(group, topic string, queueID int32, ckOffset, popTime int64) (Checkpoint, bool, error) {
	k := checkpointKey(nil, group, topic, queueID, ckOffset, popTime)
	var held Checkpoint
	if s.db.cks.get(k[:len(k)-16], ckOffset, popTime, &held) {
		return held, true, nil
	}
	v, err := s.db.get(k)
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("read checkpoint %s/%s/%d@%d: %w", group, topic, queueID, ckOffset, err)
	}
	if v == nil {
		return Checkpoint{}, false, nil
	}
	c, err := decodeCheckpoint(k, v)
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("checkpoint %s/%s/%d@%d: %w", group, topic, queueID, ckOffset, err)
	}
	return c, true, nil
}

// CheckpointName names one checkpoint of a queue: with the group, topic
// and queue id, its CKOffset and PopTime.
type CheckpointName struct {
	CKOffset, PopTime int64
}

// compareNames orders checkpoint names as their 0x56 keys do: CKOffset,
// then PopTime, each stored as an unsigned 64-bit integer.
func compareNames(a, b CheckpointName) int {
	return cmp.Or(cmp.Compare(uint64(a.CKOffset), uint64(b.CKOffset)), cmp.Compare(uint64(a.PopTime), uint64(b.PopTime)))
}

// ReadCheckpoints reads the checkpoints names lists, all of one group's
// queue, through one iterator seeking forward in key order, and calls fn
// for each with its index in names, the checkpoint and whether it exists.
// A revive round reads tens of checkpoints of a queue: one point read each
// probed the bloom filter of every table overlapping its key, and while
// compactions keep writing new tables most of those probes read a filter
// block from the file. fn sees the names in key order, not in the order
// of names; an error of fn stops the reads and is returned.
func (s *PopStore) ReadCheckpoints(group, topic string, queueID int32, names []CheckpointName, fn func(i int, c Checkpoint, ok bool) error) error {
	if len(names) == 0 {
		return nil
	}
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return compareNames(names[a], names[b]) })
	first, last := names[order[0]], names[order[len(order)-1]]
	lower := checkpointKey(nil, group, topic, queueID, first.CKOffset, first.PopTime)
	upper := append(checkpointKey(nil, group, topic, queueID, last.CKOffset, last.PopTime), 0)
	it, err := s.db.pdb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("read checkpoints of %s/%s/%d: %w", group, topic, queueID, err)
	}
	var k []byte
	for _, i := range order {
		k = checkpointKey(k[:0], group, topic, queueID, names[i].CKOffset, names[i].PopTime)
		var c Checkpoint
		found := it.SeekGE(k) && bytes.Equal(it.Key(), k)
		if found {
			v, err := it.ValueAndErr()
			if err == nil {
				c, err = decodeCheckpoint(it.Key(), v)
			}
			if err != nil {
				_ = it.Close()
				return fmt.Errorf("read checkpoint %s/%s/%d@%d: %w", group, topic, queueID, names[i].CKOffset, err)
			}
		}
		if err := fn(i, c, found); err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("read checkpoints of %s/%s/%d: %w", group, topic, queueID, err)
	}
	return nil
}

// queueCheckpoints calls fn with the checkpoints of a group's queue whose
// CKOffset is at least from, in CKOffset order, until fn returns false.
func (s *PopStore) queueCheckpoints(group, topic string, queueID int32, from int64, fn func(Checkpoint) bool) error {
	p := groupTopicQueue(nil, prefixPopCK, group, topic, queueID)
	lower := binary.BigEndian.AppendUint64(append([]byte(nil), p...), uint64(max(from, 0)))
	it, err := s.db.pdb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(p)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return err
		}
		c, err := decodeCheckpoint(it.Key(), v)
		if err != nil {
			key := append([]byte(nil), it.Key()...) // Close invalidates it
			_ = it.Close()
			return fmt.Errorf("checkpoint key %x: %w", key, err)
		}
		if !fn(c) {
			break
		}
	}
	return it.Close()
}

// MinInFlight returns the smallest offset of a queue still in flight for a
// group; ok is false when none is. from is a bound at or below every
// offset in flight (the committed offset). The seek starts at the queue's
// checkpoint floor (popfloor.go), else MaxCheckpointSpan below from, not
// at the start of the queue's keyspace, so it does not walk the
// tombstones of long acknowledged checkpoints. The caller holds the POP
// service's lock of the queue.
func (s *PopStore) MinInFlight(group, topic string, queueID int32, from int64) (offset int64, ok bool, err error) {
	return s.MinInFlightReplacing(group, topic, queueID, from, nil)
}

// MinInFlightReplacing is MinInFlight as it will be once a batch that
// rewrites (or, with no offsets left, deletes) the checkpoint replaced is
// committed: an ack moves the committed offset in the batch that removes
// the acknowledged offsets. The checkpoint floor still counts replaced as
// present, so a batch that is never committed leaves it correct.
func (s *PopStore) MinInFlightReplacing(group, topic string, queueID int32, from int64, replaced *Checkpoint) (offset int64, ok bool, err error) {
	prefix := groupTopicQueue(nil, prefixPopCK, group, topic, queueID)
	bound := max(from-MaxCheckpointSpan+1, 0)
	best, handled, load := s.db.cks.minInFlight(prefix, bound, replaced)
	if handled {
		return best, best != noCheckpoint, nil
	}
	if load && s.db.cks.startLoad(prefix) {
		best, held, err := s.loadQueue(prefix, group, topic, queueID, bound, replaced)
		if err != nil || held {
			return best, best != noCheckpoint, err
		}
	}
	lower := bound
	if floor, known := s.db.floors.get(prefix); known {
		if floor == noCheckpoint {
			return 0, false, nil
		}
		lower = max(lower, floor)
	}
	best, first := int64(noCheckpoint), int64(noCheckpoint)
	err = s.queueCheckpoints(group, topic, queueID, lower, func(c Checkpoint) bool {
		var done bool
		if best, done = minStep(best, &c, replaced); done {
			return false
		}
		first = min(first, c.CKOffset)
		return true
	})
	if err != nil {
		return 0, false, fmt.Errorf("min in-flight of %s on %s/%d: %w", group, topic, queueID, err)
	}
	s.db.floors.set(prefix, first)
	return best, best != noCheckpoint, nil
}

// InFlightCount returns how many messages of a group's queue are in
// flight (the offsets of its checkpoints), counted no further than past
// limit: a caller comparing the count with a threshold gets threshold+1
// at most. from is the committed offset, as for MinInFlight: the
// checkpoints that can hold an offset at or above it (CKOffset above
// from - MaxCheckpointSpan) are counted; those wholly below it, which only
// an offset moved forward past messages in flight leaves, are not. A
// queue the checkpoint cache holds is counted in memory; the others are
// loaded into it, or, when too large to hold, counted with one scan from
// the queue's checkpoint floor. The caller holds the POP service's lock
// of the queue for an exact count (without it, the count is one a commit
// may have changed since).
func (s *PopStore) InFlightCount(group, topic string, queueID int32, from, limit int64) (int64, error) {
	prefix := groupTopicQueue(nil, prefixPopCK, group, topic, queueID)
	bound := max(from-MaxCheckpointSpan+1, 0)
	if n, ok := s.db.cks.inFlight(prefix, bound, limit); ok {
		return n, nil
	}
	// MinInFlight loads the queue into the cache when it fits there.
	if _, _, err := s.MinInFlight(group, topic, queueID, from); err != nil {
		return 0, fmt.Errorf("count in flight of %s on %s/%d: %w", group, topic, queueID, err)
	}
	if n, ok := s.db.cks.inFlight(prefix, bound, limit); ok {
		return n, nil
	}
	lower := bound
	if floor, known := s.db.floors.get(prefix); known {
		if floor == noCheckpoint {
			return 0, nil
		}
		lower = max(lower, floor)
	}
	var n int64
	err := s.queueCheckpoints(group, topic, queueID, lower, func(c Checkpoint) bool {
		n += int64(len(c.Offsets))
		return n <= limit
	})
	if err != nil {
		return 0, fmt.Errorf("count in flight of %s on %s/%d: %w", group, topic, queueID, err)
	}
	return n, nil
}

// minStep is one step of the walk for a queue's smallest offset in flight
// over its checkpoints in key order: best lowered by c's first offset (by
// replaced's when c is the checkpoint replaced names); done once c, and so
// every later checkpoint, starts at or above best.
func minStep(best int64, c, replaced *Checkpoint) (int64, bool) {
	if c.CKOffset >= best {
		return best, true
	}
	offs := c.Offsets
	if replaced != nil && c.CKOffset == replaced.CKOffset && c.PopTime == replaced.PopTime {
		offs = replaced.Offsets
	}
	if len(offs) > 0 {
		best = min(best, offs[0])
	}
	return best, false
}

// loadQueue reads every checkpoint of a queue from bound on into the
// checkpoint cache with one scan and answers MinInFlightReplacing from
// them. held is false when the queue has more than the cache holds of one
// queue: it is marked oversized and the caller seeks as before. The
// caller has called startLoad.
func (s *PopStore) loadQueue(prefix []byte, group, topic string, queueID int32, bound int64, replaced *Checkpoint) (best int64, held bool, err error) {
	lower := bound
	floor, known := s.db.floors.get(prefix)
	if known && floor == noCheckpoint {
		s.db.cks.finishLoad(prefix, bound, nil, true)
		return noCheckpoint, true, nil
	}
	if known {
		lower = max(lower, floor)
	}
	var cks []*Checkpoint
	err = s.queueCheckpoints(group, topic, queueID, lower, func(c Checkpoint) bool {
		c.Group, c.Topic = group, topic
		cks = append(cks, &c)
		return len(cks) <= s.db.cks.maxQueue
	})
	if err != nil {
		s.db.cks.abortLoad(prefix)
		return 0, false, fmt.Errorf("min in-flight of %s on %s/%d: %w", group, topic, queueID, err)
	}
	if len(cks) > s.db.cks.maxQueue {
		s.db.cks.finishLoad(prefix, bound, nil, false)
		return 0, false, nil
	}
	s.db.cks.finishLoad(prefix, bound, cks, true)
	first := int64(noCheckpoint)
	if len(cks) > 0 {
		first = cks[0].CKOffset
	}
	s.db.floors.set(prefix, first)
	return scanMin(cks, bound, replaced), true, nil
}

// InFlightAt returns the in-flight view of one message of a group's queue,
// from the checkpoint holding it; ok is false when none does. With
// several (a changed invisible time moves a message to a checkpoint of
// its own), the one with the latest PopTime is returned.
func (s *PopStore) InFlightAt(group, topic string, queueID int32, offset int64) (InFlight, bool, error) {
	var r InFlight
	found := false
	err := s.queueCheckpoints(group, topic, queueID, offset-MaxCheckpointSpan+1, func(c Checkpoint) bool {
		if c.CKOffset > offset {
			return false
		}
		if c.Contains(offset) && (!found || c.PopTime > r.PopTime) {
			r, found = c.message(offset), true
		}
		return true
	})
	if err != nil {
		return r, false, fmt.Errorf("look up in-flight %s/%s/%d@%d: %w", group, topic, queueID, offset, err)
	}
	return r, found, nil
}

// DueCheckpoints calls fn with the checkpoints whose VisibleAt lies in
// [from, before], in deadline order, until fn returns false or max
// messages were passed (max <= 0: no limit). A deadline entry whose
// record is missing or has another deadline (which a consistent store
// never holds) is passed with no Offsets, so that the caller can delete
// it. It reads each checkpoint as it goes, for kvdump and tests; revive
// uses DueEntries and reads them under the queue's lock.
func (s *PopStore) DueCheckpoints(from, before int64, max int, fn func(Checkpoint) bool) error {
	n := 0
	var rerr error
	err := s.DueEntries(from, before, 0, func(d DueEntry) bool {
		c, ok, err := s.Checkpoint(d.Group, d.Topic, d.QueueID, d.CKOffset, d.PopTime)
		if err != nil {
			rerr = err
			return false
		}
		if !ok || c.VisibleAt != d.VisibleAt {
			c = d.Checkpoint
		}
		n += len(c.Offsets)
		return fn(c) && (max <= 0 || n < max)
	})
	if err == nil {
		err = rerr
	}
	return err
}

// DeleteOrphanDue removes a deadline entry passed by DueCheckpoints
// without Offsets, or by DueEntries for a checkpoint that is gone or has
// another deadline.
func (p *PopBatch) DeleteOrphanDue(due *Checkpoint) error { return p.deleteDue(due) }

// DueEntry is a checkpoint deadline entry (0x55): the checkpoint's name and
// VisibleAt, without its offsets.
type DueEntry struct {
	Checkpoint
	// Count is how many offsets the checkpoint held when this deadline was
	// written; acks since may have removed some. It sizes revive rounds.
	Count int
}

// DueEntries calls fn with the deadline entries whose VisibleAt lies in
// [from, before], in deadline order, until fn returns false or their
// counts reach max (max <= 0: no limit). It reads no checkpoint: the
// caller reads each one under the lock that orders it against acks, and
// deletes an entry whose checkpoint is gone or has another deadline.
func (s *PopStore) DueEntries(from, before int64, max int, fn func(DueEntry) bool) error {
	it, err := s.dueIter(from, before)
	if err != nil {
		return fmt.Errorf("scan checkpoint deadlines: %w", err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("scan checkpoint deadlines: %w", err)
		}
		due, count, err := decodeCheckpointDue(it.Key(), v)
		if err != nil {
			key := append([]byte(nil), it.Key()...) // Close invalidates it
			_ = it.Close()
			return fmt.Errorf("checkpoint deadline %x: %w", key, err)
		}
		n += count
		if !fn(DueEntry{due, count}) || (max > 0 && n >= max) {
			break
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("scan checkpoint deadlines: %w", err)
	}
	return nil
}

// Due calls fn for in-flight messages whose VisibleAt is at most before,
// in deadline order, until fn returns false or max messages were passed
// (max <= 0: no limit).
func (s *PopStore) Due(before int64, max int, fn func(InFlight) bool) error {
	n := 0
	stop := false
	return s.DueCheckpoints(0, before, 0, func(c Checkpoint) bool {
		for _, off := range c.Offsets {
			n++
			if !fn(c.message(off)) || (max > 0 && n >= max) {
				stop = true
				return false
			}
		}
		return !stop
	})
}

// EachInFlight calls fn for every in-flight message of a checkpoint with
// a deadline entry (not staged: see Checkpoint.Staged) in deadline order
// until fn returns false.
func (s *PopStore) EachInFlight(fn func(InFlight) bool) error {
	return s.Due(math.MaxInt64, 0, fn)
}

// NextDue returns the earliest VisibleAt in [from, before] of the
// checkpoints; ok is false when none is due in that span. The bound
// matters: handled checkpoints leave tombstones at their deadlines, and a
// scan to the end of time would step over every one of them until
// compaction.
func (s *PopStore) NextDue(from, before int64) (int64, bool, error) {
	it, err := s.dueIter(from, before)
	if err != nil {
		return 0, false, fmt.Errorf("next checkpoint deadline: %w", err)
	}
	defer it.Close()
	if !it.First() {
		return 0, false, it.Error()
	}
	due, err := decodeCheckpointDueKey(it.Key())
	if err != nil {
		return 0, false, fmt.Errorf("checkpoint deadline %x: %w", it.Key(), err)
	}
	return due.VisibleAt, true, nil
}

// CheckpointCounts is what the stored checkpoints (0x56) hold.
type CheckpointCounts struct {
	// Checkpoints and Messages count every checkpoint and the offsets
	// they hold in flight, staged ones included.
	Checkpoints, Messages int64
	// Staged and StagedMessages count the staged checkpoints
	// (Checkpoint.Staged) among them and their offsets: messages whose
	// copies already wait in a pop-retry topic.
	Staged, StagedMessages int64
}

// CountCheckpoints counts the stored checkpoints, staged ones apart too,
// with one scan of their records.
func (s *PopStore) CountCheckpoints() (CheckpointCounts, error) {
	var n CheckpointCounts
	var derr error
	err := s.db.Scan([]byte{prefixPopCK}, func(k, v []byte) bool {
		c, err := decodeCheckpoint(k, v)
		if err != nil {
			derr = fmt.Errorf("checkpoint key %x: %w", k, err)
			return false
		}
		n.Checkpoints++
		n.Messages += int64(len(c.Offsets))
		if c.Staged {
			n.Staged++
			n.StagedMessages += int64(len(c.Offsets))
		}
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return CheckpointCounts{}, fmt.Errorf("count in-flight messages: %w", err)
	}
	return n, nil
}

// CountInFlight returns how many checkpoints are stored and how many
// messages they hold in flight, staged ones included.
func (s *PopStore) CountInFlight() (checkpoints, messages int64, err error) {
	n, err := s.CountCheckpoints()
	return n.Checkpoints, n.Messages, err
}

// dueIter iterates the deadline entries (0x55) with VisibleAt in [from,
// before].
func (s *PopStore) dueIter(from, before int64) (*pebble.Iterator, error) {
	lower := binary.BigEndian.AppendUint64([]byte{prefixPopCKDue}, uint64(max(from, 0)))
	upper := []byte{prefixPopCKDue + 1}
	if before < math.MaxInt64 && before >= 0 {
		upper = binary.BigEndian.AppendUint64([]byte{prefixPopCKDue}, uint64(before+1))
	}
	return s.db.pdb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
}
