package kvindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
)

// prefixPopRevive is keyspace 0x57: the messages an earlier version's
// revive was putting, one key each (see doc.go). Read, never written.
const prefixPopRevive byte = 0x57

// prefixPopReviveBatch is keyspace 0x58: the messages of one checkpoint a
// revive is putting (see doc.go).
const prefixPopReviveBatch byte = 0x58

// PropertyRevivedFrom is the property of a message put by a revive that
// names the delivery it re-delivers: ReviveIntent.PropertyValue. After a
// crash or a failed put it tells which messages of a ReviveBatch reached
// the CommitLog, so each is put exactly once.
const PropertyRevivedFrom = "RKV_REVIVED_FROM"

// ReviveIntent is one message a revive is re-delivering: a message of a
// ReviveBatch, or one key of keyspace 0x57, written by an earlier version
// (which the dispatcher deleted with the put message's ConsumeQueue entry).
//
// It is the message's in-flight view of its checkpoint, VisibleAt
// excepted (zero: the checkpoint's deadline is not kept); PopTime is also
// the re-delivery's 1ST_POP_TIME, and the other fields give the message
// back to its checkpoint when its put fails.
type ReviveIntent struct{ InFlight }

// ReviveFloors are the ConsumeQueue max offsets, read before a revive's
// put, of queue 0 of the topics it can put a group's messages to: the
// pop-retry topic of either naming and the group's DLQ. Every message the
// put stores is at or above them, so a scan from them finds what a put cut
// short did store.
type ReviveFloors struct {
	RetryV1 int64 `json:"retryV1"`
	RetryV2 int64 `json:"retryV2"`
	DLQ     int64 `json:"dlq"`
}

// ReviveBatch is the messages of one checkpoint a revive is putting
// (keyspace 0x58): the checkpoint as it was, Offsets the messages being
// put, and the floors read before the put. The revive deletes the
// checkpoint and writes the batch in one durable commit before the put,
// and deletes the batch once the put is done. A batch found when the POP
// service starts, or after a put failed, is a put a crash or an error cut
// short: the messages found above the floors with their PropertyRevivedFrom
// were stored; the others go back to their checkpoint, to be revived again.
type ReviveBatch struct {
	Checkpoint
	Floors ReviveFloors `json:"floors"`
}

// Intents returns the batch's messages one by one.
func (r *ReviveBatch) Intents() []ReviveIntent {
	out := make([]ReviveIntent, len(r.Offsets))
	for i, off := range r.Offsets {
		out[i] = IntentOf(&r.Checkpoint, off)
	}
	return out
}

// reviveBatchKey is 0x58 | the checkpoint's key | first offset: a message
// is in one batch at a time, so the first offset tells batches of one
// checkpoint apart.
func reviveBatchKey(dst []byte, r *ReviveBatch) []byte {
	start := len(dst)
	dst = checkpointKey(dst, r.Group, r.Topic, r.QueueID, r.CKOffset, r.PopTime)
	dst[start] = prefixPopReviveBatch
	return binary.BigEndian.AppendUint64(dst, uint64(r.Offsets[0]))
}

// reviveFloorsLen is the size of the floors at the start of a 0x58 value.
const reviveFloorsLen = 24

// reviveBatchValue is retryV1 | retryV2 | dlq floors (int64 each) | the
// checkpoint's value.
func reviveBatchValue(dst []byte, r *ReviveBatch) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.Floors.RetryV1))
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.Floors.RetryV2))
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.Floors.DLQ))
	return checkpointValue(dst, &r.Checkpoint)
}

func decodeReviveBatch(k, v []byte) (ReviveBatch, error) {
	var r ReviveBatch
	if len(k) < 9 || k[0] != prefixPopReviveBatch || len(v) < reviveFloorsLen {
		return r, ErrBadKey
	}
	ck := append([]byte{prefixPopCK}, k[1:len(k)-8]...)
	c, err := decodeCheckpoint(ck, v[reviveFloorsLen:])
	if err != nil || c.Offsets[0] != int64(binary.BigEndian.Uint64(k[len(k)-8:])) {
		return r, ErrBadKey
	}
	r.Checkpoint = c
	r.Floors = ReviveFloors{RetryV1: int64(binary.BigEndian.Uint64(v)), RetryV2: int64(binary.BigEndian.Uint64(v[8:])),
		DLQ: int64(binary.BigEndian.Uint64(v[16:]))}
	if r.Floors.RetryV1 < 0 || r.Floors.RetryV2 < 0 || r.Floors.DLQ < 0 {
		return r, ErrBadKey
	}
	return r, nil
}

// PutReviveBatch records in the batch that the messages of r are being
// re-delivered.
func (p *PopBatch) PutReviveBatch(r *ReviveBatch) error {
	if err := checkCheckpoint(&r.Checkpoint); err != nil {
		return fmt.Errorf("revive batch: %w", err)
	}
	p.key = reviveBatchKey(p.key[:0], r)
	p.val = reviveBatchValue(p.val[:0], r)
	if err := p.b.Set(p.key, p.val, nil); err != nil {
		return fmt.Errorf("revive batch of %s on %s/%d@%d: %w", r.Group, r.Topic, r.QueueID, r.Offsets[0], err)
	}
	return nil
}

// DeleteReviveBatch deletes a revive batch in the batch: its messages were
// put or given back to a checkpoint.
func (p *PopBatch) DeleteReviveBatch(r *ReviveBatch) error {
	p.key = reviveBatchKey(p.key[:0], r)
	if err := p.b.Delete(p.key, nil); err != nil {
		return fmt.Errorf("delete revive batch of %s on %s/%d@%d: %w", r.Group, r.Topic, r.QueueID, r.Offsets[0], err)
	}
	return nil
}

// ReviveBatches calls fn with every revive batch, in key order (by group,
// topic, queue and checkpoint), until fn returns false.
func (s *PopStore) ReviveBatches(fn func(ReviveBatch) bool) error {
	return scanDecoded(s, prefixPopReviveBatch, "revive batch", decodeReviveBatch, fn)
}

// scanDecoded calls fn with every key of one keyspace decoded, until fn
// returns false.
func scanDecoded[T any](s *PopStore, prefix byte, what string, decode func(k, v []byte) (T, error), fn func(T) bool) error {
	return s.scanKeyspace(prefix, what, func(k, v []byte) (bool, error) {
		r, err := decode(k, v)
		if err != nil {
			return false, err
		}
		return fn(r), nil
	})
}

// scanKeyspace calls fn with every key of one keyspace and its value until
// fn returns false or an error.
func (s *PopStore) scanKeyspace(prefix byte, what string, fn func(k, v []byte) (bool, error)) error {
	it, err := s.db.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		return fmt.Errorf("%ss: %w", what, err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		more, err := fn(it.Key(), it.Value())
		if err != nil {
			return fmt.Errorf("%s %x: %w", what, it.Key(), err)
		}
		if !more {
			break
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("%ss: %w", what, err)
	}
	return nil
}

// hasKeys reports whether a keyspace holds any key.
func (d *DB) hasKeys(prefix byte) (bool, error) {
	found := false
	err := (&PopStore{db: d}).scanKeyspace(prefix, fmt.Sprintf("keyspace %#x", prefix), func(k, v []byte) (bool, error) {
		found = true
		return false, nil
	})
	return found, err
}

// IntentOf returns the intent of re-delivering offset of checkpoint c.
func IntentOf(c *Checkpoint, offset int64) ReviveIntent {
	in := ReviveIntent{c.message(offset)}
	in.VisibleAt = 0
	return in
}

// Checkpoint returns the checkpoint that holds the intent's message alone
// as it was before the revive (VisibleAt is left to the caller).
func (i *ReviveIntent) Checkpoint() Checkpoint {
	return Checkpoint{Group: i.Group, Topic: i.Topic, QueueID: i.QueueID, CKOffset: i.CKOffset, PopTime: i.PopTime,
		InvisibleTime: i.InvisibleTime, RetryFlag: i.RetryFlag, Attempts: i.Attempts, Offsets: []int64{i.QueueOffset}}
}

func reviveKey(dst []byte, i *ReviveIntent) []byte {
	dst = groupTopicQueue(dst, prefixPopRevive, i.Group, i.Topic, i.QueueID)
	return binary.BigEndian.AppendUint64(dst, uint64(i.QueueOffset))
}

func decodeReviveIntent(k, v []byte) (ReviveIntent, error) {
	var r ReviveIntent
	g, t, q, rest, err := decodeGroupTopicQueue(k, prefixPopRevive)
	if err != nil || len(rest) != 8 || !decodeInFlightValue(&r.InFlight, v) {
		return r, ErrBadKey
	}
	r.Group, r.Topic, r.QueueID = g, t, q
	r.QueueOffset = int64(binary.BigEndian.Uint64(rest))
	return r, nil
}

// PropertyValue is the PropertyRevivedFrom value naming the intent:
//
//	queueId "/" queueOffset "/" len(group) "/" group topic
//
// (decimal numbers; group and topic as they are, the length telling them
// apart).
func (i *ReviveIntent) PropertyValue() string {
	return strconv.FormatInt(int64(i.QueueID), 10) + "/" + strconv.FormatInt(i.QueueOffset, 10) + "/" +
		strconv.Itoa(len(i.Group)) + "/" + i.Group + i.Topic
}

// errBadRevivedFrom is returned for a PropertyRevivedFrom value that does
// not follow PropertyValue's form.
var errBadRevivedFrom = errors.New("malformed " + PropertyRevivedFrom + " value")

// ParseRevivedFrom parses a PropertyRevivedFrom value into the intent's
// key fields (the others are left zero). Any string is accepted without a
// panic.
func ParseRevivedFrom(v string) (ReviveIntent, error) {
	var r ReviveIntent
	fields := strings.SplitN(v, "/", 4)
	if len(fields) != 4 {
		return r, fmt.Errorf("%w: %q", errBadRevivedFrom, v)
	}
	q, err1 := strconv.ParseInt(fields[0], 10, 32)
	off, err2 := strconv.ParseInt(fields[1], 10, 64)
	n, err3 := strconv.Atoi(fields[2])
	if err := errors.Join(err1, err2, err3); err != nil || n <= 0 || n >= len(fields[3]) || off < 0 {
		return r, fmt.Errorf("%w: %q", errBadRevivedFrom, v)
	}
	r.QueueID, r.QueueOffset, r.Group, r.Topic = int32(q), off, fields[3][:n], fields[3][n:]
	if err := checkGroupTopic(r.Group, r.Topic); err != nil {
		return r, fmt.Errorf("%w: %q: %w", errBadRevivedFrom, v, err)
	}
	return r, nil
}

// PutReviveIntent writes i in keyspace 0x57 as an earlier version did
// (tests of the upgrade path), and makes the dispatcher delete it.
func (p *PopBatch) PutReviveIntent(i *ReviveIntent) error {
	if err := checkGroupTopic(i.Group, i.Topic); err != nil {
		return fmt.Errorf("revive intent: %w", err)
	}
	p.db.legacyIntents.Store(true)
	p.key = reviveKey(p.key[:0], i)
	p.val = popInFlightValue(p.val[:0], &i.InFlight)
	if err := p.b.Set(p.key, p.val, nil); err != nil {
		return fmt.Errorf("revive intent of %s on %s/%d@%d: %w", i.Group, i.Topic, i.QueueID, i.QueueOffset, err)
	}
	return nil
}

// DeleteReviveIntent deletes a 0x57 intent in the batch.
func (p *PopBatch) DeleteReviveIntent(i *ReviveIntent) error {
	p.key = reviveKey(p.key[:0], i)
	if err := p.b.Delete(p.key, nil); err != nil {
		return fmt.Errorf("delete revive intent of %s on %s/%d@%d: %w", i.Group, i.Topic, i.QueueID, i.QueueOffset, err)
	}
	return nil
}

// LegacyReviveIntents calls fn with every intent of keyspace 0x57 (an
// earlier version's), in key order, until fn returns false.
func (s *PopStore) LegacyReviveIntents(fn func(ReviveIntent) bool) error {
	return scanDecoded(s, prefixPopRevive, "revive intent", decodeReviveIntent, fn)
}

// LegacyReviveIntentsDone tells the dispatcher that keyspace 0x57 is empty
// and stays so: it no longer looks for intents to delete.
func (s *PopStore) LegacyReviveIntentsDone() { s.db.legacyIntents.Store(false) }

// ReviveIntents calls fn with every message being re-delivered, those of
// revive batches and those of keyspace 0x57, until fn returns false.
func (s *PopStore) ReviveIntents(fn func(ReviveIntent) bool) error {
	more := true
	err := s.LegacyReviveIntents(func(r ReviveIntent) bool {
		more = fn(r)
		return more
	})
	if err != nil || !more {
		return err
	}
	return s.ReviveBatches(func(r ReviveBatch) bool {
		for _, in := range r.Intents() {
			if more = fn(in); !more {
				break
			}
		}
		return more
	})
}

// CountReviveIntents returns how many messages are being re-delivered.
func (s *PopStore) CountReviveIntents() (int64, error) {
	var n int64
	err := s.ReviveIntents(func(ReviveIntent) bool { n++; return true })
	return n, err
}

// revivedTopic reports whether a topic can hold messages put by a revive:
// a pop-retry topic (%RETRY%) or a dead-letter queue (%DLQ%).
func revivedTopic(topic string) bool { return meta.IsRetryTopic(topic) || meta.IsDLQTopic(topic) }

// HoldsRevived reports whether records of topic may carry
// PropertyRevivedFrom, which AppendShown leaves out: a retry topic or a
// dead-letter queue.
func HoldsRevived(topic string) bool { return revivedTopic(topic) }

// revivedFromPair is how PropertyRevivedFrom starts in a record's
// properties.
var revivedFromPair = []byte(PropertyRevivedFrom + string(commitlog.NameValueSeparator))

// AppendShown appends to dst the record rec (one whole record) as a reader of the
// message is shown it (a Remoting pull, pop, query or view): a record of
// a retry topic or a dead-letter queue without PropertyRevivedFrom, every
// other byte as stored; any other record as stored. The property is the
// revive's own: its recovery reads it from the CommitLog, it is no
// property of the message, and a client that sent the message on with it
// would be refused (ClaimsRevive). A record that does not parse is
// appended as stored, for its reader to report.
func AppendShown(dst, rec []byte) []byte {
	topic, props, err := commitlog.TopicAndProperties(rec)
	if err != nil {
		return append(dst, rec...)
	}
	revived := bytes.HasPrefix(topic, []byte(meta.RetryGroupTopicPrefix)) || bytes.HasPrefix(topic, []byte(meta.DLQGroupTopicPrefix))
	if !revived || !bytes.Contains(props, revivedFromPair) {
		return append(dst, rec...)
	}
	kept := commitlog.RewriteProperties(string(props), []string{PropertyRevivedFrom})
	out, err := commitlog.AppendWithProperties(dst, rec, kept)
	if err != nil {
		return append(dst, rec...)
	}
	return out
}

// ClaimsRevive reports whether a message of topic with props would pass
// for one put by a revive: the broker refuses such a message from a
// client, which could otherwise make a revive cut short by a crash or a
// failed put take an unstored message for stored (and lose it), or delete
// an earlier version's intent.
func ClaimsRevive(topic, props string) bool {
	if !revivedTopic(topic) {
		return false
	}
	_, ok := commitlog.LookupProperty(props, PropertyRevivedFrom)
	return ok
}

// dispatchRevived deletes, in the dispatch batch w, the 0x57 revive intent
// the record names, if it names one and such intents may exist (written by
// an earlier version and not yet put). A malformed value is logged by the
// caller's logger and otherwise ignored: the record is indexed all the
// same.
func dispatchRevived(db *DB, w *pebble.Batch, m *commitlog.Message) error {
	if !db.legacyIntents.Load() || !revivedTopic(m.Topic) {
		return nil
	}
	v, ok := commitlog.LookupProperty(m.Properties, PropertyRevivedFrom)
	if !ok {
		return nil
	}
	i, err := ParseRevivedFrom(v)
	if err != nil {
		return err
	}
	if err := w.Delete(reviveKey(nil, &i), nil); err != nil {
		return fmt.Errorf("delete revive intent: %w", err)
	}
	return nil
}
