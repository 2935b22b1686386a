package kvindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
)

// Compaction keyspaces; see doc.go.
const (
	prefixCompacted     byte = 0x80
	prefixCompactKey    byte = 0x81
	prefixCompactExpiry byte = 0x82
)

// Compaction keeps the messages of compacted topics (cleanup.policy=
// COMPACTION) in the index, so they outlive CommitLog retention: for each
// message key of a queue the newest message, and, as long as their records
// are in the CommitLog, the messages without a key and the tombstones
// (empty bodies). The dispatcher copies each record of a compacted topic
// here in the batch that indexes it, and deletes the copy of the message
// it supersedes; a pull of a compacted topic reads the copies.
//
// It is safe for concurrent use; the copies are written under the
// dispatcher's writeMu, by its batches and by backfills (CopyRecords).
type Compaction struct {
	db     *DB
	topics atomic.Pointer[map[string]struct{}]

	// pending holds the keys the batch being written set, which a later
	// record of the same batch must see before the batch commits (under
	// the dispatcher's writeMu).
	pending map[compactKey]int64
	mu      sync.Mutex // serialises TopicChanged's read-modify-write
}

// compactKey names a message key in a queue.
type compactKey struct {
	topic string
	qid   int32
	key   string
}

// NewCompaction returns the compaction store of db, compacting the
// topics whose configs in topics ask for it.
func NewCompaction(db *DB, topics []meta.TopicConfig) *Compaction {
	c := &Compaction{db: db, pending: map[compactKey]int64{}}
	set := map[string]struct{}{}
	for _, tc := range topics {
		if tc.Compacted() {
			set[tc.TopicName] = struct{}{}
		}
	}
	c.topics.Store(&set)
	return c
}

// Compacts reports whether the topic is compacted.
func (c *Compaction) Compacts(topic string) bool {
	if c == nil {
		return false
	}
	set := *c.topics.Load()
	if len(set) == 0 {
		return false
	}
	_, ok := set[topic]
	return ok
}

// TopicChanged records that a topic was created, updated (compacted
// says whether it asks for compaction now) or deleted (compacted false).
// It reports whether the topic became compacted by it.
func (c *Compaction) TopicChanged(topic string, compacted bool) (became bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.topics.Load()
	if _, ok := old[topic]; ok == compacted {
		return false
	}
	set := make(map[string]struct{}, len(old)+1)
	for t := range old {
		set[t] = struct{}{}
	}
	if compacted {
		set[topic] = struct{}{}
	} else {
		delete(set, topic)
	}
	c.topics.Store(&set)
	return compacted
}

// CopyRecords copies records of a compacted topic, given in queue-offset
// order, as the dispatcher copies those it indexes: for the records it
// indexed before it knew the topic was compacted (a slave learns of its
// master's topics at its next sync). The dispatcher must be quiesced
// (Dispatcher.Quiesced).
func (c *Compaction) CopyRecords(recs [][]byte) error {
	b := c.db.pdb.NewBatch()
	defer b.Close()
	if err := c.addRecords(b, recs); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("compaction: copy %d records: %w", len(recs), err)
	}
	return nil
}

// addRecords adds to w the copies of records, in log order, of the topics
// compacted now: the dispatcher's batch or a backfill, which hold the
// dispatcher's writeMu. A topic deleted since the record was read is
// skipped.
func (c *Compaction) addRecords(w *pebble.Batch, recs [][]byte) error {
	clear(c.pending)
	defer clear(c.pending)
	for _, rec := range recs {
		m, err := commitlog.Decode(rec)
		if err != nil {
			return fmt.Errorf("compaction: copy a record: %w", err)
		}
		if !c.Compacts(m.Topic) {
			continue
		}
		if err := c.add(w, &m, rec); err != nil {
			return fmt.Errorf("compact %s at %d: %w", m.Topic, m.PhyOffset, err)
		}
	}
	return nil
}

func compactedKey(topic string, qid int32, off int64) []byte {
	return binary.BigEndian.AppendUint64(queuePrefix(prefixCompacted, topic, qid), uint64(off))
}

func compactKeyKey(topic string, qid int32, key string) []byte {
	return append(queuePrefix(prefixCompactKey, topic, qid), key...)
}

func compactExpiryKey(phy int64, topic string, qid int32, off int64) []byte {
	b := binary.BigEndian.AppendUint64([]byte{prefixCompactExpiry}, uint64(phy))
	return append(b, compactedKey(topic, qid, off)...)
}

// add copies the record of m, a message of a compacted topic, into w and
// deletes the copy of the message with the same key it supersedes. A
// message without a key, or with an empty body (a tombstone: the key's
// earlier message goes, the tombstone stays for consumers to see until a
// newer message of the key supersedes it), is kept only as long as its
// record is in the CommitLog. A record dispatched again after a newer
// message of its key changes nothing.
func (c *Compaction) add(w *pebble.Batch, m *commitlog.Message, rec []byte) error {
	key, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyKeys)
	self := compactedKey(m.Topic, m.QueueID, m.QueueOffset)
	if key != "" {
		ck := compactKey{m.Topic, m.QueueID, key}
		prev, ok := c.pending[ck]
		if !ok {
			v, err := c.db.get(compactKeyKey(m.Topic, m.QueueID, key))
			if err != nil {
				return fmt.Errorf("compaction: read key %q of %s/%d: %w", key, m.Topic, m.QueueID, err)
			}
			if len(v) == 8 {
				prev, ok = int64(binary.BigEndian.Uint64(v)), true
			}
		}
		if ok && prev > m.QueueOffset {
			return nil // superseded already: dispatched again
		}
		if ok && prev < m.QueueOffset {
			if err := w.Delete(compactedKey(m.Topic, m.QueueID, prev), nil); err != nil {
				return fmt.Errorf("compaction: drop %s/%d@%d: %w", m.Topic, m.QueueID, prev, err)
			}
		}
		c.pending[ck] = m.QueueOffset
		if err := w.Set(compactKeyKey(m.Topic, m.QueueID, key), binary.BigEndian.AppendUint64(nil, uint64(m.QueueOffset)), nil); err != nil {
			return fmt.Errorf("compaction: key %q of %s/%d: %w", key, m.Topic, m.QueueID, err)
		}
	}
	if key == "" || len(m.Body) == 0 {
		// The value names the key, whose entry goes with a tombstone.
		if err := w.Set(compactExpiryKey(m.PhyOffset, m.Topic, m.QueueID, m.QueueOffset), []byte(key), nil); err != nil {
			return fmt.Errorf("compaction: expiry of %s/%d@%d: %w", m.Topic, m.QueueID, m.QueueOffset, err)
		}
	}
	if err := w.Set(self, rec, nil); err != nil {
		return fmt.Errorf("compaction: copy %s/%d@%d: %w", m.Topic, m.QueueID, m.QueueOffset, err)
	}
	return nil
}

// Read calls fn with the copies of the queue's messages from queue offset
// from on, in offset order, each as its record and decoded, until fn
// returns false. rec and m's byte fields are valid only during the call.
// A copy that does not decode stops the read with an error.
func (c *Compaction) Read(topic string, qid int32, from int64, fn func(off int64, rec []byte, m *commitlog.Message) bool) error {
	var decodeErr error
	err := c.scan(topic, qid, from, func(off int64, rec []byte) bool {
		m, err := commitlog.Decode(rec)
		if err != nil {
			decodeErr = fmt.Errorf("compaction: copy of %s/%d@%d: %w", topic, qid, off, err)
			return false
		}
		return fn(off, rec, &m)
	})
	return errors.Join(err, decodeErr)
}

// scan is Read without the decoding.
func (c *Compaction) scan(topic string, qid int32, from int64, fn func(off int64, rec []byte) bool) error {
	p := queuePrefix(prefixCompacted, topic, qid)
	it, err := c.db.pdb.NewIter(&pebble.IterOptions{LowerBound: compactedKey(topic, qid, max(from, 0)), UpperBound: prefixEnd(p)})
	if err != nil {
		return fmt.Errorf("compaction: read %s/%d: %w", topic, qid, err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(p)+8 {
			return errors.Join(fmt.Errorf("compaction: key %x of %s/%d: %w", k, topic, qid, ErrBadKey), it.Close())
		}
		if !fn(int64(binary.BigEndian.Uint64(k[len(p):])), it.Value()) {
			break
		}
	}
	return it.Close()
}

// MinOffset returns the queue offset of the queue's first copy; ok is
// false when it holds none.
func (c *Compaction) MinOffset(topic string, qid int32) (off int64, ok bool, err error) {
	err = c.scan(topic, qid, 0, func(o int64, _ []byte) bool {
		off, ok = o, true
		return false
	})
	return off, ok, err
}

// Newest returns the copy of the newest message of key in a queue of a
// compacted topic, decoded, with its queue offset; ok is false when the
// queue has no message of the key (or only a tombstone's copy that
// retention dropped). m's byte fields alias the returned record.
func (c *Compaction) Newest(topic string, qid int32, key string) (rec []byte, m commitlog.Message, ok bool, err error) {
	v, err := c.db.get(compactKeyKey(topic, qid, key))
	if err != nil || len(v) != 8 {
		return nil, m, false, err
	}
	off := int64(binary.BigEndian.Uint64(v))
	if rec, err = c.db.get(compactedKey(topic, qid, off)); err != nil || rec == nil {
		return nil, m, false, err
	}
	if m, err = commitlog.Decode(rec); err != nil {
		return nil, m, false, fmt.Errorf("compaction: copy of %s/%d@%d: %w", topic, qid, off, err)
	}
	return rec, m, true, nil
}

// QueueMin is the first offset of a queue whose ConsumeQueue starts at
// cqMin: cqMin, or for a compacted topic its first copy's when lower
// (retention moved the ConsumeQueue past messages the copies keep).
func (c *Compaction) QueueMin(topic string, qid int32, cqMin int64) (int64, error) {
	if !c.Compacts(topic) {
		return cqMin, nil
	}
	first, ok, err := c.MinOffset(topic, qid)
	if err != nil || !ok {
		return cqMin, err
	}
	return min(cqMin, first), nil
}

// DropBelow deletes the copies kept only while their records are in the
// CommitLog (messages without a key, tombstones) whose records lie below
// the CommitLog's new minimum offset minPhy. The dispatcher must be
// quiesced (Dispatcher.Quiesced), as it reads a tombstone's key entry
// before deleting it.
func (c *Compaction) DropBelow(minPhy int64) error {
	if minPhy <= 0 {
		return nil
	}
	lower := []byte{prefixCompactExpiry}
	upper := binary.BigEndian.AppendUint64([]byte{prefixCompactExpiry}, uint64(minPhy))
	b := c.db.pdb.NewBatch()
	defer b.Close()
	it, err := c.db.pdb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("compaction: drop below %d: %w", minPhy, err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		if err := c.expire(b, it.Key(), it.Value()); err != nil {
			return errors.Join(fmt.Errorf("compaction: drop below %d: %w", minPhy, err), it.Close())
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("compaction: drop below %d: %w", minPhy, err)
	}
	if err := b.DeleteRange(lower, upper, nil); err != nil {
		return fmt.Errorf("compaction: drop below %d: %w", minPhy, err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("compaction: drop below %d: %w", minPhy, err)
	}
	return nil
}

// expire adds to b the deletion of the copy an expiry entry names and,
// for a tombstone still the newest message of its key, of the key's entry.
func (c *Compaction) expire(b *pebble.Batch, k, key []byte) error {
	if len(k) < 9 {
		return fmt.Errorf("expiry key %x: %w", k, ErrBadKey)
	}
	rec := k[9:]
	topic, qid, off, err := decodeCompactedKey(rec)
	if err != nil {
		return fmt.Errorf("expiry key %x: %w", k, err)
	}
	// The copy at the offset must be the record the entry names: a topic
	// deleted and created again numbers its queues from 0 again, and its
	// new copies sit at the offsets of the old ones, whose expiry entries
	// DropTopic leaves.
	cp, err := c.db.get(rec)
	if err != nil {
		return err
	}
	if phy, ok := commitlog.PhyOffsetOf(cp); !ok || phy != int64(binary.BigEndian.Uint64(k[1:9])) {
		return nil
	}
	if err := b.Delete(rec, nil); err != nil {
		return err
	}
	if len(key) == 0 {
		return nil
	}
	kk := compactKeyKey(topic, qid, string(key))
	v, err := c.db.get(kk)
	if err != nil || len(v) != 8 || int64(binary.BigEndian.Uint64(v)) != off {
		return err // a newer message of the key, or none
	}
	return b.Delete(kk, nil)
}

// CompactedTopics lists the topics that have copies, in name order
// (by key: length-prefixed names), one seek per topic.
func (d *DB) CompactedTopics() ([]string, error) {
	it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCompacted}, UpperBound: []byte{prefixCompacted + 1}})
	if err != nil {
		return nil, fmt.Errorf("compaction: list topics: %w", err)
	}
	var topics []string
	for ok := it.First(); ok; {
		topic, _, _, err := decodeCompactedKey(it.Key())
		if err != nil {
			return nil, errors.Join(fmt.Errorf("compaction: key %x: %w", it.Key(), err), it.Close())
		}
		topics = append(topics, topic)
		ok = it.SeekGE(prefixEnd(topicPrefix(prefixCompacted, topic)))
	}
	return topics, it.Close()
}

// DropTopic deletes the copies and keys of a deleted topic. Its expiry
// entries stay until retention passes them; the copies they name are
// gone by then.
func (c *Compaction) DropTopic(topic string) error {
	b := c.db.pdb.NewBatch()
	defer b.Close()
	for _, p := range []byte{prefixCompacted, prefixCompactKey} {
		tp := topicPrefix(p, topic)
		if err := b.DeleteRange(tp, prefixEnd(tp), nil); err != nil {
			return fmt.Errorf("compaction: drop topic %s: %w", topic, err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("compaction: drop topic %s: %w", topic, err)
	}
	return nil
}

// DropQueue deletes the copies and keys of one queue of topic, which a
// replica's log starts anew (restart.go): the old topic's copies would be
// read at the new topic's offsets, and its key entries, naming later
// offsets than the new messages of their keys, would keep those from
// being copied. The expiry entries stay, as DropTopic leaves them.
func (c *Compaction) DropQueue(topic string, queueID int32) error {
	b := c.db.pdb.NewBatch()
	defer b.Close()
	for _, p := range []byte{prefixCompacted, prefixCompactKey} {
		qp := queuePrefix(p, topic, queueID)
		if err := b.DeleteRange(qp, prefixEnd(qp), nil); err != nil {
			return fmt.Errorf("compaction: drop queue %s/%d: %w", topic, queueID, err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("compaction: drop queue %s/%d: %w", topic, queueID, err)
	}
	return nil
}

// CompactedKey names a key of a queue of a compacted topic.
type CompactedKey struct {
	Topic   string
	QueueID int32
	Key     string
}

// DropAbove deletes the copies of records at or past end, with their
// expiry entries and the key entries that name them: the CommitLog lost
// those records (a tail cut at recovery), and the queue offsets they held
// will be given to other messages, which the copies would shadow (a key
// entry naming a later offset makes the dispatcher skip the key's
// messages below it). It returns how many copies it dropped. A key whose
// entry named a dropped copy is marked instead (PendingRestores): its
// copy of the message before was dropped when the cut one was dispatched,
// and the caller copies that message again (CopyRecords) while its record
// is in the CommitLog, then clears what is left (ClearRestores). It scans
// every copy (recovery only).
func (c *Compaction) DropAbove(end int64) (int, error) {
	it, err := c.db.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCompacted}, UpperBound: []byte{prefixCompacted + 1}})
	if err != nil {
		return 0, fmt.Errorf("compaction: drop from %d: %w", end, err)
	}
	b := c.db.pdb.NewBatch()
	defer b.Close()
	fail := func(err error) (int, error) {
		return 0, errors.Join(fmt.Errorf("compaction: drop from %d: %w", end, err), it.Close())
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		rec, err := it.ValueAndErr()
		if err != nil {
			return fail(err)
		}
		m, err := commitlog.Decode(rec)
		if err != nil {
			return fail(fmt.Errorf("copy %x: %w", it.Key(), err))
		}
		if m.PhyOffset < end {
			continue
		}
		topic, qid, off, err := decodeCompactedKey(it.Key())
		if err != nil {
			return fail(err)
		}
		if err := b.Delete(it.Key(), nil); err != nil {
			return fail(err)
		}
		n++
		key, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyKeys)
		if key == "" {
			continue
		}
		kk := compactKeyKey(topic, qid, key)
		v, err := c.db.get(kk)
		if err != nil {
			return fail(err)
		}
		if len(v) == 8 && int64(binary.BigEndian.Uint64(v)) == off {
			// Marked, not deleted: a crash before the key's message
			// before is copied again leaves the marker for the next
			// recovery to find (PendingRestores).
			if err := b.Set(kk, restorePending, nil); err != nil {
				return fail(err)
			}
		}
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("compaction: drop from %d: %w", end, err)
	}
	lower := binary.BigEndian.AppendUint64([]byte{prefixCompactExpiry}, uint64(max(end, 0)))
	if err := b.DeleteRange(lower, []byte{prefixCompactExpiry + 1}, nil); err != nil {
		return 0, fmt.Errorf("compaction: drop from %d: %w", end, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, fmt.Errorf("compaction: drop from %d: %w", end, err)
	}
	return n, nil
}

// restorePending is the value of a key entry (0x81) whose newest message
// a recovery cut: every reader takes an entry of another length than 8
// as none.
var restorePending = []byte{0}

// PendingRestores lists the keys DropAbove marked whose messages before
// are not copied again yet. It scans every key entry (recovery only).
func (c *Compaction) PendingRestores() ([]CompactedKey, error) {
	var keys []CompactedKey
	err := c.db.Scan([]byte{prefixCompactKey}, func(k, v []byte) bool {
		if len(v) != len(restorePending) {
			return true
		}
		topic, rest, err := readString16(k[1:])
		if err != nil || len(rest) < 4 {
			return true // not ours to judge here; kvdump check reports it
		}
		keys = append(keys, CompactedKey{Topic: topic, QueueID: int32(binary.BigEndian.Uint32(rest)), Key: string(rest[4:])})
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("compaction: keys to restore: %w", err)
	}
	return keys, nil
}

// ClearRestores deletes the markers of keys still pending (a key whose
// message before was copied again has an entry naming it instead).
func (c *Compaction) ClearRestores(keys []CompactedKey) error {
	b := c.db.pdb.NewBatch()
	defer b.Close()
	for _, k := range keys {
		kk := compactKeyKey(k.Topic, k.QueueID, k.Key)
		v, err := c.db.get(kk)
		if err != nil {
			return fmt.Errorf("compaction: clear restore of %q: %w", k.Key, err)
		}
		if len(v) == len(restorePending) {
			if err := b.Delete(kk, nil); err != nil {
				return fmt.Errorf("compaction: clear restore of %q: %w", k.Key, err)
			}
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("compaction: clear restores: %w", err)
	}
	return nil
}
