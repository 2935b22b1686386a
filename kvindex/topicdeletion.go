package kvindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/cq"
)

// deletedTopics is the set of topic deletions dispatch has not passed:
// for each topic, the CommitLog offset it was deleted at. A record of the
// topic below that offset was appended before the deletion and is left
// out of the index when dispatch reaches it later; the records from it on
// belong to the topic created again. It is never changed once published
// (a change publishes a new one), so the dispatch loop reads it without a
// lock.
type deletedTopics struct {
	at  map[string]int64
	low int64 // the lowest offset of at dispatch has not passed
	// offs are the offsets of at, ascending. Passing some of them only
	// moves low; the set is built again without them once half are
	// passed, so that dispatch passing the many deletions a first open
	// of a RocketMQ store records (one per topic) costs no rebuild per
	// batch.
	offs []int64
	// queues refines, for the topics of at a first open of an Apache
	// RocketMQ store recorded (RecordRocketMQConsumeQueue), which of their
	// records below at are left out, queue by queue (nil: none).
	queues map[string]topicBegin
}

// QueueBegin is where a queue of an Apache RocketMQ store's consumequeue/
// begins: the CommitLog offset Phy of its first entry (or of the first
// record of a run of its files missing in the middle, when lower) and the
// queue offset of that entry.
type QueueBegin struct {
	Phy, Offset int64
}

// QueueBounds is a queue's minimum and maximum offsets in one of a RocketMQ
// store's ConsumeQueues, over its CommitLog, as RocketMQ's start would
// serve them.
type QueueBounds struct {
	Min, Max int64
}

// FileQueueBehind is a queue of a RocketMQ store's file ConsumeQueue left
// behind by the RocksDB one beside it (FileQueuesBehind): its files end
// at FilesEnd, the RocksDB one at RocksEnd, and the first record of the
// queue the CommitLog still holds is at RocksMin.
type FileQueueBehind struct {
	Topic                        string
	QueueID                      int32
	FilesEnd, RocksEnd, RocksMin int64
}

// FileQueuesBehind lists, by topic and queue id, the queues whose files
// (files) end below both the RocksDB ConsumeQueue's end and its minimum
// (rocks): the CommitLog no longer holds the records between, so a file
// layout serving the files as they are would number the queue's next
// message from the files' end, below the offsets RocketMQ gave, and put
// the records still there at the files' end, not at their offsets. The
// first open refuses the file layout over such a store, and kvdump's
// check says so. Queues without files are not listed: they start at
// their first record, or where the RocksDB one says.
func FileQueuesBehind(files, rocks map[string]map[int32]QueueBounds) []FileQueueBehind {
	var behind []FileQueueBehind
	for _, topic := range slices.Sorted(maps.Keys(rocks)) {
		qs := rocks[topic]
		for _, qid := range slices.Sorted(maps.Keys(qs)) {
			r := qs[qid]
			f, ok := files[topic][qid]
			if !ok || r.Max <= f.Max || r.Min <= f.Max {
				continue
			}
			behind = append(behind, FileQueueBehind{Topic: topic, QueueID: qid, FilesEnd: f.Max, RocksEnd: r.Max, RocksMin: r.Min})
		}
	}
	return behind
}

// String names the queue and its offsets, for a refusal or a report.
func (b FileQueueBehind) String() string {
	return fmt.Sprintf("%s/%d (files end at %d, RocksDB ConsumeQueue at %d, CommitLog records from %d)", b.Topic, b.QueueID, b.FilesEnd, b.RocksEnd, b.RocksMin)
}

// KeepEarlierBeginnings adds to firsts (topic -> CommitLog offset of its
// first record) and begins (each queue's QueueBegin), read from one of a
// RocketMQ store's ConsumeQueues, those of its other one, keeping the
// earlier of each: with both ConsumeQueues, the records either holds are
// kept. begins must not be nil.
func KeepEarlierBeginnings(firsts map[string]int64, begins map[string]map[int32]QueueBegin, otherFirsts map[string]int64, otherBegins map[string]map[int32]QueueBegin) {
	for topic, at := range otherFirsts {
		if cur, ok := firsts[topic]; !ok || at < cur {
			firsts[topic] = at
		}
	}
	for topic, qs := range otherBegins {
		if begins[topic] == nil {
			begins[topic] = map[int32]QueueBegin{}
		}
		for qid, b := range qs {
			if cur, ok := begins[topic][qid]; !ok || b.Offset < cur.Offset {
				begins[topic][qid] = b
			}
		}
	}
}

// topicBegin is what a first open of a RocketMQ store recorded of where a
// topic's queues begin: a record of a queue of queues below the queue's
// Phy whose queue offset is its Offset or above takes the place of an
// entry the consumequeue/ holds (an earlier numbering of the queue: the
// topic deleted and created again, or the queue's files lost and
// RocketMQ numbering it from 0 again) and is left out; one below
// Offset continues the numbering below the consumequeue's first files
// (lost, or cut by RocketMQ) and is kept. A record of a queue
// consumequeue/ lacks is left out below base, the topic's first entry.
type topicBegin struct {
	base   int64
	queues map[int32]QueueBegin
}

// withQueues returns t with the per-queue starts of queues attached for
// the topics t holds.
func (t *deletedTopics) withQueues(queues map[string]topicBegin) *deletedTopics {
	if t == nil || len(queues) == 0 {
		return t
	}
	out := *t
	out.queues = map[string]topicBegin{}
	for topic, b := range queues {
		if _, ok := t.at[topic]; ok {
			out.queues[topic] = b
		}
	}
	return &out
}

// newDeletedTopics returns the set of the deletions of at that lie past
// passed (nil when none does).
func newDeletedTopics(at map[string]int64, passed int64) *deletedTopics {
	var t *deletedTopics
	for topic, off := range at {
		if off <= passed {
			continue
		}
		if t == nil {
			t = &deletedTopics{at: map[string]int64{}}
		}
		t.at[topic] = off
		t.offs = append(t.offs, off)
	}
	if t != nil {
		slices.Sort(t.offs)
		t.low = t.offs[0]
	}
	return t
}

// passed returns the set without the deletions at or below end, nil when
// none is left.
func (t *deletedTopics) passed(end int64) *deletedTopics {
	n, _ := slices.BinarySearch(t.offs, end+1)
	switch {
	case n == len(t.offs):
		return nil
	case 2*n >= len(t.offs):
		return newDeletedTopics(t.at, end).withQueues(t.queues)
	}
	return &deletedTopics{at: t.at, low: t.offs[n], offs: t.offs, queues: t.queues}
}

// covers reports whether the entry at queue offset off of queue queueID
// of topic, of the record at CommitLog offset phy, was appended before
// the topic's deletion (for a topic of a RocketMQ store's first open:
// before the queue's numbering that store's consumequeue/ holds,
// topicBegin).
func (t *deletedTopics) covers(topic string, queueID int32, phy, off int64) bool {
	if t == nil {
		return false
	}
	at, ok := t.at[topic]
	if !ok || phy >= at {
		return false
	}
	b, ok := t.queues[topic]
	if !ok {
		return true
	}
	if q, ok := b.queues[queueID]; ok {
		return phy < q.Phy && off >= q.Offset
	}
	return phy < b.base
}

// with returns the set with topic deleted at offset at added (a later
// deletion of the same topic replaces an earlier one).
func (t *deletedTopics) with(topic string, at int64) *deletedTopics {
	out := map[string]int64{topic: at}
	var queues map[string]topicBegin
	if t != nil {
		for k, v := range t.at {
			if k != topic && v >= t.low {
				out[k] = v
			}
		}
		// A deletion replaces what a first open recorded of the topic's
		// queues: every record of it below at goes.
		queues = maps.Clone(t.queues)
		delete(queues, topic)
	}
	return newDeletedTopics(out, -1).withQueues(queues)
}

// filter drops from entries[from:] the entries of deleted topics below
// their deletion (a record's own entry and its light message queue ones
// alike) and returns what is left of entries.
func (t *deletedTopics) filter(entries []cq.Dispatch, from int) []cq.Dispatch {
	if t == nil {
		return entries
	}
	kept := entries[:from]
	for _, e := range entries[from:] {
		if !t.covers(e.Topic, e.QueueID, e.Entry.PhyOffset, e.Entry.QueueOffset) {
			kept = append(kept, e)
		}
	}
	clear(entries[len(kept):])
	return kept
}

// offset returns the offset topic was deleted at, 0 when it is not in
// the set.
func (t *deletedTopics) offset(topic string) int64 {
	if t == nil {
		return 0
	}
	return t.at[topic]
}

// errDeletedMidBatch is returned by dispatchBatch when a topic it has
// records of was deleted after it began reading them: they were read
// without that deletion, so the batch is written nowhere and read again.
var errDeletedMidBatch = errors.New("a topic was deleted while the dispatch batch was read")

// mustReread reports whether a batch that read its records with the
// deletions gone must read them again, the deletions being cur when it
// is about to be written: a topic it has entries of (queues) was deleted
// meanwhile, or it indexed a record without an entry of its own
// (unqueued), whose topic queues do not tell. A batch whose records are
// all of other topics is written as it is, so that a run of deletions
// does not hold dispatch back.
func mustReread(gone, cur *deletedTopics, queues []pendingQueue, unqueued bool) bool {
	if cur == gone {
		return false
	}
	if unqueued {
		return true
	}
	for _, q := range queues {
		if cur.offset(q.topic) != gone.offset(q.topic) {
			return true
		}
	}
	return false
}

// DeleteTopic records that topic is deleted at the CommitLog's current
// end and runs drop (which drops the topic's queues from the ConsumeQueue
// layouts) while no dispatch batch is written. Records of the topic
// appended before that end that dispatch has not indexed yet, now or
// after a restart that dispatches from an earlier point, are left out of
// the ConsumeQueue, the key index and the compacted copies: a topic
// created again under the name shows none of the deleted topic's
// messages. Hooks still see those records: the system topics they serve
// are not deleted, and the transaction a committed record ends is ended
// all the same. The record is synced before drop runs.
func (d *Dispatcher) DeleteTopic(topic string, drop func() error) error {
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	return d.deleteTopicAt(topic, d.opts.Log.MaxOffset(), drop)
}

// deleteTopicAt is DeleteTopic with the deletion at CommitLog offset end
// (at most the log's end). The caller holds writeMu.
func (d *Dispatcher) deleteTopicAt(topic string, end int64, drop func() error) error {
	if err := d.opts.DB.recordTopicDeleted(topic, end); err != nil {
		return err
	}
	if end > d.next.Load() {
		// Dispatch has records of the topic still to read; the batch
		// reading them now, if any, sees the change and reads again.
		d.deleted.Store(d.deleted.Load().with(topic, end))
		d.log.Info().Str("topic", topic).Int64("deletedAt", end).Int64("dispatched", d.next.Load()).
			Msg("topic deleted ahead of dispatch; its records below the deletion will not be indexed")
	}
	if drop == nil {
		return nil
	}
	// drop's error is the caller's own, returned as it is.
	return drop()
}

// passDeleted forgets the deletions dispatch has passed at end: every
// record below them is indexed or left out already. The caller holds
// writeMu.
func (d *Dispatcher) passDeleted(end int64) {
	if t := d.deleted.Load(); t != nil && t.low <= end {
		d.deleted.Store(t.passed(end))
	}
}

// recordTopicDeleted notes, durably, that topic was deleted when the
// CommitLog ended at end. Dispatch leaves the topic's records below end
// out of the index (a topic created again under that name numbers its
// messages from 0), and a ConsumeQueue layout that was not written at the
// time drops the topic when it next catches up, without putting those
// records back.
//
// What a first open of a RocketMQ store recorded of the topic's queues
// goes with it: every record of the topic below end is left out.
func (d *DB) recordTopicDeleted(topic string, end int64) error {
	b := d.pdb.NewBatch()
	defer b.Close()
	lo := queueBeginPrefix(topic)
	err := errors.Join(b.Set(metaKey(metaTopicDeleted+topic), putInt64(end), nil), b.DeleteRange(lo, prefixEnd(lo), nil))
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("record the deletion of topic %s: %w", topic, err)
	}
	return nil
}

// queueBeginPrefix is the prefix of the keys of what a first open of a
// RocketMQ store recorded of topic's queues (metaQueueBegin). A topic
// of a consumequeue/ directory holds no '/'.
func queueBeginPrefix(topic string) []byte {
	return metaKey(metaQueueBegin + topic + "/")
}

// badQueueBegin closes it, positioned on a stored queue start that does
// not decode, and returns the error naming its key (read before the
// close, which invalidates it).
func badQueueBegin(it *pebble.Iterator) error {
	key := string(it.Key())
	_ = it.Close()
	return fmt.Errorf("read where the RocketMQ queues begin: key %q: %w", key, ErrBadKey)
}

// queueBegins returns what a first open of a RocketMQ store recorded of
// the queues of the topics of deleted (RecordRocketMQConsumeQueue) and
// removes what it recorded of other topics (their deletion record was
// dropped: retention passed it).
func (d *DB) queueBegins(deleted map[string]int64) (map[string]topicBegin, error) {
	lo := metaKey(metaQueueBegin)
	it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return nil, fmt.Errorf("read where the RocketMQ queues begin: %w", err)
	}
	out := map[string]topicBegin{}
	b := d.pdb.NewBatch()
	defer b.Close()
	for it.First(); it.Valid(); it.Next() {
		name := string(it.Key()[len(lo):])
		i := strings.LastIndexByte(name, '/')
		v := it.Value()
		if i < 0 || len(v) != 16 {
			return nil, badQueueBegin(it)
		}
		topic := name[:i]
		if _, ok := deleted[topic]; !ok {
			if err := b.Delete(append([]byte(nil), it.Key()...), nil); err != nil {
				_ = it.Close()
				return nil, fmt.Errorf("forget where old RocketMQ queue %s began: %w", name, err)
			}
			continue
		}
		tb := out[topic]
		if tb.queues == nil {
			tb.queues = map[int32]QueueBegin{}
		}
		q := QueueBegin{Phy: int64(binary.BigEndian.Uint64(v)), Offset: int64(binary.BigEndian.Uint64(v[8:]))}
		if i == len(name)-1 {
			tb.base = q.Phy
		} else {
			qid, err := strconv.ParseInt(name[i+1:], 10, 32)
			if err != nil {
				return nil, badQueueBegin(it)
			}
			tb.queues[int32(qid)] = q
		}
		out[topic] = tb
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("read where the RocketMQ queues begin: %w", err)
	}
	if !b.Empty() {
		if err := b.Commit(pebble.Sync); err != nil {
			return nil, fmt.Errorf("forget where old RocketMQ queues began: %w", err)
		}
	}
	return out, nil
}

// RecordRocketMQConsumeQueue records, for the first open of an Apache
// RocketMQ store whose consumequeue/ was read, what the CommitLog does not
// tell of the topics RocketMQ deleted (its DeleteTopic drops a topic's
// ConsumeQueue and queue offsets, and leaves its records in the CommitLog
// until retention; RocketMQ never dispatches them again):
//
//   - starts maps each topic of the consumequeue/ to the CommitLog offset
//     where its records begin there (its first entry), and queues maps it
//     to where each of its queues there begins (QueueBegin), recorded as
//     a deletion of the topic (at the highest of them): dispatch leaves
//     out of the index a record of such a queue below its first entry
//     whose queue offset is that entry's or above, and a record of a
//     queue of the topic the consumequeue/ lacks below the topic's first
//     entry. They are those of a topic RocketMQ deleted and created
//     again, or of a queue whose files it lost and then numbered from 0
//     again: indexed, the older messages would take the places of the
//     ones its consumequeue/ serves. A record of a queue below its first
//     entry and below that entry's queue offset continues the numbering
//     of the queue below its first files (deleted by hand, or by
//     RocketMQ once retention deleted their records) and is kept.
//   - topics lists every topic of the consumequeue/, and complete is the
//     CommitLog offset below which it held an entry of every record of
//     them (RocketMQTopics): a topic dispatch indexes below it that is
//     not among them was deleted and not created again.
//
// It writes nothing when the index has dispatched already (the store's
// first open is over) and keeps a deletion recorded before; the writes
// are one synced batch.
func (d *DB) RecordRocketMQConsumeQueue(starts map[string]int64, queues map[string]map[int32]QueueBegin, topics []string, complete int64) error {
	if _, dispatched, err := d.metaInt64(metaDispatched); err != nil || dispatched {
		return err
	}
	b := d.pdb.NewBatch()
	defer b.Close()
	for topic, at := range starts {
		if err := checkName("topic", topic); err != nil {
			return fmt.Errorf("record where the RocketMQ topics begin: %w", err)
		}
		key := metaKey(metaTopicDeleted + topic)
		v, err := d.get(key)
		if err != nil {
			return fmt.Errorf("record where RocketMQ topic %s begins: %w", topic, err)
		}
		if v != nil {
			continue
		}
		qs := queues[topic]
		if len(qs) > 0 {
			// The queues' own starts, and the topic's for the queues
			// without one.
			if err := b.Set(queueBeginPrefix(topic), putQueueBegin(QueueBegin{Phy: at}), nil); err != nil {
				return fmt.Errorf("record where RocketMQ topic %s begins: %w", topic, err)
			}
		}
		for qid, q := range qs {
			at = max(at, q.Phy)
			k := append(queueBeginPrefix(topic), strconv.Itoa(int(qid))...)
			if err := b.Set(k, putQueueBegin(q), nil); err != nil {
				return fmt.Errorf("record where RocketMQ queue %s/%d begins: %w", topic, qid, err)
			}
		}
		if err := b.Set(key, putInt64(at), nil); err != nil {
			return fmt.Errorf("record where RocketMQ topic %s begins: %w", topic, err)
		}
	}
	for _, topic := range topics {
		if err := checkName("topic", topic); err != nil {
			return fmt.Errorf("record the RocketMQ topics: %w", err)
		}
		if err := b.Set(metaKey(metaRocketMQTopic+topic), nil, nil); err != nil {
			return fmt.Errorf("record RocketMQ topic %s: %w", topic, err)
		}
	}
	if err := b.Set(metaKey(metaRocketMQComplete), putInt64(complete), nil); err != nil {
		return fmt.Errorf("record the RocketMQ topics: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("record the RocketMQ topics: %w", err)
	}
	return nil
}

// RocketMQTopics returns what RecordRocketMQConsumeQueue recorded of the
// topics of a RocketMQ store's consumequeue/ until EndRocketMQTopics: the
// offset below which it was complete and its topics; ok is false when
// nothing is recorded.
func (d *DB) RocketMQTopics() (complete int64, topics map[string]bool, ok bool, err error) {
	if complete, ok, err = d.metaInt64(metaRocketMQComplete); err != nil || !ok {
		return 0, nil, false, err
	}
	lo := metaKey(metaRocketMQTopic)
	it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return 0, nil, false, fmt.Errorf("read the RocketMQ topics: %w", err)
	}
	topics = map[string]bool{}
	for it.First(); it.Valid(); it.Next() {
		topics[string(it.Key()[len(lo):])] = true
	}
	if err := it.Close(); err != nil {
		return 0, nil, false, fmt.Errorf("read the RocketMQ topics: %w", err)
	}
	return complete, topics, true, nil
}

// EndRocketMQTopics removes what RecordRocketMQConsumeQueue recorded of
// the RocketMQ topics, in one synced batch.
func (d *DB) EndRocketMQTopics() error {
	b := d.pdb.NewBatch()
	defer b.Close()
	lo := metaKey(metaRocketMQTopic)
	err := errors.Join(b.DeleteRange(lo, prefixEnd(lo), nil), b.Delete(metaKey(metaRocketMQComplete), nil))
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("forget the RocketMQ topics: %w", err)
	}
	return nil
}

// BeginTopicDeletion records, durably, that a deletion of topic (its
// config, its queues and its consumers' state, in several commits) begins:
// until EndTopicDeletion, PendingTopicDeletions names the topic, so that a
// start after a crash half way through can complete the deletion instead
// of leaving what it had not reached yet to a topic created again under
// the name.
func (d *DB) BeginTopicDeletion(topic string) error {
	if err := checkName("topic", topic); err != nil {
		return fmt.Errorf("begin the deletion of a topic: %w", err)
	}
	if err := d.pdb.Set(metaKey(metaDeletingTopic+topic), nil, pebble.Sync); err != nil {
		return fmt.Errorf("begin the deletion of topic %s: %w", topic, err)
	}
	return nil
}

// EndTopicDeletion records that the deletion of topic begun with
// BeginTopicDeletion is complete. It is not synced: a crash that loses it
// only makes the next start run the deletion again, which finds nothing
// left to delete.
func (d *DB) EndTopicDeletion(topic string) error {
	if err := d.pdb.Delete(metaKey(metaDeletingTopic+topic), pebble.NoSync); err != nil {
		return fmt.Errorf("end the deletion of topic %s: %w", topic, err)
	}
	return nil
}

// PendingTopicDeletions returns the topics whose deletion began and did
// not end, in name order.
func (d *DB) PendingTopicDeletions() ([]string, error) {
	lo := metaKey(metaDeletingTopic)
	it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return nil, fmt.Errorf("read the pending topic deletions: %w", err)
	}
	var topics []string
	for it.First(); it.Valid(); it.Next() {
		topics = append(topics, string(it.Key()[len(lo):]))
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("read the pending topic deletions: %w", err)
	}
	return topics, nil
}

// putQueueBegin encodes q as a value: Phy and Offset, 8 bytes each, big
// endian.
func putQueueBegin(q QueueBegin) []byte {
	return binary.BigEndian.AppendUint64(putInt64(q.Phy), uint64(q.Offset))
}
