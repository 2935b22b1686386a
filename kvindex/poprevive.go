package kvindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
)

// prefixPopRevive is keyspace 0x57: the messages a revive is putting to
// their pop-retry topic or DLQ (see doc.go).
const prefixPopRevive byte = 0x57

// PropertyRevivedFrom is the property of a message put by a revive that
// names the delivery it re-delivers: ReviveIntent.PropertyValue. The
// dispatcher deletes that intent when it indexes the message, in the same
// batch, so the message is put exactly once whatever a crash interrupts.
const PropertyRevivedFrom = "RKV_REVIVED_FROM"

// ReviveIntent is one message a revive is re-delivering (keyspace 0x57):
// the revive deleted its checkpoint and wrote this intent in one durable
// batch before putting the message, and the dispatcher deletes it with the
// put message's ConsumeQueue entry. An intent found when the POP service
// starts, after the dispatcher caught up with the CommitLog, is a message
// whose put never reached the CommitLog: it is put then.
//
// It is the message's in-flight view of its checkpoint, VisibleAt
// excepted (zero: the checkpoint's deadline is not kept); PopTime is also
// the re-delivery's 1ST_POP_TIME, and the other fields give the message
// back to its checkpoint when its put fails.
type ReviveIntent struct{ InFlight }

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

// PutReviveIntent records in the batch that the message of i is being
// re-delivered.
func (p *PopBatch) PutReviveIntent(i *ReviveIntent) error {
	if err := checkGroupTopic(i.Group, i.Topic); err != nil {
		return fmt.Errorf("revive intent: %w", err)
	}
	p.key = reviveKey(p.key[:0], i)
	p.val = popInFlightValue(p.val[:0], &i.InFlight)
	if err := p.b.Set(p.key, p.val, nil); err != nil {
		return fmt.Errorf("revive intent of %s on %s/%d@%d: %w", i.Group, i.Topic, i.QueueID, i.QueueOffset, err)
	}
	return nil
}

// DeleteReviveIntent deletes an intent in the batch: its message is given
// back to a checkpoint instead.
func (p *PopBatch) DeleteReviveIntent(i *ReviveIntent) error {
	p.key = reviveKey(p.key[:0], i)
	if err := p.b.Delete(p.key, nil); err != nil {
		return fmt.Errorf("delete revive intent of %s on %s/%d@%d: %w", i.Group, i.Topic, i.QueueID, i.QueueOffset, err)
	}
	return nil
}

// ReviveIntents calls fn with every intent, in key order (by group, topic,
// queue and offset), until fn returns false.
func (s *PopStore) ReviveIntents(fn func(ReviveIntent) bool) error {
	it, err := s.db.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixPopRevive}, UpperBound: []byte{prefixPopRevive + 1}})
	if err != nil {
		return fmt.Errorf("revive intents: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		r, err := decodeReviveIntent(it.Key(), it.Value())
		if err != nil {
			return fmt.Errorf("revive intent %x: %w", it.Key(), err)
		}
		if !fn(r) {
			break
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("revive intents: %w", err)
	}
	return nil
}

// CountReviveIntents returns how many intents there are.
func (s *PopStore) CountReviveIntents() (int64, error) {
	var n int64
	err := s.ReviveIntents(func(ReviveIntent) bool { n++; return true })
	return n, err
}

// ReviveIntentExists reports whether the intent for i's message is still
// there.
func (s *PopStore) ReviveIntentExists(i *ReviveIntent) (bool, error) {
	_, closer, err := s.db.pdb.Get(reviveKey(nil, i))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("revive intent of %s on %s/%d@%d: %w", i.Group, i.Topic, i.QueueID, i.QueueOffset, err)
	}
	return true, closer.Close()
}

// revivedTopic reports whether a topic can hold messages put by a revive:
// a pop-retry topic (%RETRY%) or a dead-letter queue (%DLQ%).
func revivedTopic(topic string) bool { return meta.IsRetryTopic(topic) || meta.IsDLQTopic(topic) }

// ClaimsRevive reports whether a message of topic with props would be
// taken by the dispatcher for one put by a revive: the broker refuses such
// a message from a client, which could otherwise cancel a revive.
func ClaimsRevive(topic, props string) bool {
	if !revivedTopic(topic) {
		return false
	}
	_, ok := commitlog.LookupProperty(props, PropertyRevivedFrom)
	return ok
}

// dispatchRevived deletes, in the dispatch batch w, the revive intent the
// record names, if it names one. A malformed value is logged by the
// caller's logger and otherwise ignored: the record is indexed all the
// same.
func dispatchRevived(w *pebble.Batch, m *commitlog.Message) error {
	if !revivedTopic(m.Topic) {
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
