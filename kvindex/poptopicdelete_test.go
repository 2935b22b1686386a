package kvindex

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// consumerKeyspaces are the keyspaces of what consumers leave of a topic,
// which DeleteTopic deletes.
var consumerKeyspaces = []byte{prefixConsumerOf, prefixPopPosition, prefixPopOrder, prefixPopCKDue, prefixPopCK,
	prefixPopRevive, prefixPopReviveBatch, prefixPopSlaveOwn}

// keysByTopic counts the keys of each consumer keyspace by topic.
func keysByTopic(t *testing.T, db *DB) map[string]int {
	return consumerKeys(t, db, func(topic string, _ int32) string { return topic })
}

// keysByQueue counts the keys of each consumer keyspace by topic and
// queue.
func keysByQueue(t *testing.T, db *DB) map[string]int {
	return consumerKeys(t, db, func(topic string, queueID int32) string { return fmt.Sprintf("%s/%d", topic, queueID) })
}

// consumerKeys counts the keys of each consumer keyspace by the name of
// their topic and queue.
func consumerKeys(t *testing.T, db *DB, name func(topic string, queueID int32) string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, p := range consumerKeyspaces {
		err := db.Scan([]byte{p}, func(k, _ []byte) bool {
			var topic string
			var queueID int32
			var err error
			if p == prefixPopCKDue {
				_, _, topic, queueID, _, err = decodeDeadlineKey(k, p)
			} else {
				_, topic, queueID, _, err = decodeGroupTopicQueue(k, p)
			}
			if err != nil {
				t.Fatalf("key %x: %v", k, err)
			}
			n[fmt.Sprintf("%#x %s", p, name(topic, queueID))]++
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// putConsumerState stores, for group on one queue of topic, one key of
// each consumer keyspace.
func putConsumerState(t *testing.T, db *DB, group, topic string, queueID int32) {
	t.Helper()
	b := db.Pop().NewBatch()
	defer b.Close()
	ck := Checkpoint{Group: group, Topic: topic, QueueID: queueID, CKOffset: 3, PopTime: 1000, InvisibleTime: 10, VisibleAt: 1010, Offsets: []int64{3, 4}}
	gone := ck
	gone.PopTime, gone.Offsets = 900, []int64{3}
	in := IntentOf(&gone, 3)
	for _, err := range []error{
		b.SetCommitted(group, topic, queueID, 3),
		b.SetPosition(group, topic, queueID, 5),
		b.SetOrder(&OrderState{Group: group, Topic: topic, QueueID: queueID, PopTime: 1000, InvisibleTime: 10, Messages: []OrderMessage{{QueueOffset: 7}}}),
		b.PutCheckpoint(&ck),
		b.PutReviveBatch(&ReviveBatch{Checkpoint: gone}),
		b.PutReviveIntent(&in),
		b.SetSlaveOwn(&SlaveOwn{Group: group, Topic: topic, QueueID: queueID, Committed: 2}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
}

// DeleteTopic deletes every group's committed offsets, pop positions,
// orderly batches, checkpoints, revive batches, earlier versions' revive
// intents and a slave's own pop state of the topic, and nothing of another topic, one whose
// name starts with the deleted one's included.
func TestDeleteTopicDeletesWhatItsConsumersLeft(t *testing.T) {
	db := openTestDB(t)
	for _, g := range []string{"G", "H"} {
		for _, topic := range []string{"T", "TT", "U"} {
			putConsumerState(t, db, g, topic, 1)
		}
	}
	before := keysByTopic(t, db)
	s := db.Pop()
	for _, read := range []func() (bool, error){
		func() (bool, error) { _, ok, err := s.Position("G", "T", 1); return ok, err },
		func() (bool, error) { _, ok, err := db.ConsumerOffsets().Get("H", "T", 1); return ok, err },
	} {
		if ok, err := read(); err != nil || !ok {
			t.Fatalf("state of T not stored before the deletion: %v %v", ok, err)
		}
	}
	if err := s.DeleteTopic("T"); err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	after := keysByTopic(t, db)
	for _, p := range consumerKeyspaces {
		for _, topic := range []string{"T", "TT", "U"} {
			k := fmt.Sprintf("%#x %s", p, topic)
			want := before[k]
			if topic == "T" {
				want = 0
			}
			if before[k] == 0 {
				t.Errorf("keyspace %#x held no key of %s before the deletion", p, topic)
			}
			if after[k] != want {
				t.Errorf("keyspace %#x: %d keys of %s after the deletion of T, want %d", p, after[k], topic, want)
			}
		}
	}
	// The caches forget the deleted keys.
	if pos, ok, err := s.Position("G", "T", 1); err != nil || ok {
		t.Errorf("pop position of T after its deletion: %d %v %v", pos, ok, err)
	}
	if off, ok, err := db.ConsumerOffsets().Get("H", "T", 1); err != nil || ok {
		t.Errorf("committed offset of T after its deletion: %d %v %v", off, ok, err)
	}
}

// DeleteQueueState deletes what every group left of one queue of a topic
// in each consumer keyspace, and nothing of the topic's other queues (one
// whose id shares its low byte included) or of another topic.
func TestDeleteQueueStateDeletesOneQueue(t *testing.T) {
	db := openTestDB(t)
	queues := []struct {
		topic   string
		queueID int32
	}{{"T", 0}, {"T", 1}, {"T", 257}, {"TT", 1}}
	for _, g := range []string{"G", "H"} {
		for _, q := range queues {
			putConsumerState(t, db, g, q.topic, q.queueID)
		}
	}
	s := db.Pop()
	if _, ok, err := db.ConsumerOffsets().Get("H", "T", 1); err != nil || !ok {
		t.Fatalf("offset of T/1 not stored before the deletion: %v %v", ok, err)
	}
	before := keysByQueue(t, db)
	if err := s.DeleteQueueState("T", 1); err != nil {
		t.Fatalf("delete the state of T/1: %v", err)
	}
	after := keysByQueue(t, db)
	for _, p := range consumerKeyspaces {
		for _, q := range queues {
			k := fmt.Sprintf("%#x %s/%d", p, q.topic, q.queueID)
			want := before[k]
			if want == 0 {
				t.Errorf("keyspace %#x held no key of %s/%d before the deletion", p, q.topic, q.queueID)
			}
			if q.topic == "T" && q.queueID == 1 {
				want = 0
			}
			if after[k] != want {
				t.Errorf("keyspace %#x: %d keys of %s/%d after the deletion of T/1, want %d", p, after[k], q.topic, q.queueID, want)
			}
		}
	}
	// The caches forget the deleted keys.
	if pos, ok, err := s.Position("G", "T", 1); err != nil || ok {
		t.Errorf("pop position of T/1 after its deletion: %d %v %v", pos, ok, err)
	}
	if off, ok, err := db.ConsumerOffsets().Get("H", "T", 1); err != nil || ok {
		t.Errorf("committed offset of T/1 after its deletion: %d %v %v", off, ok, err)
	}
	if off, ok, err := db.ConsumerOffsets().Get("H", "T", 257); err != nil || !ok || off != 3 {
		t.Errorf("committed offset of T/257 after the deletion of T/1: %d %v %v, want 3", off, ok, err)
	}
}

// rangeDeletionsOnDisk flushes the memtable and counts the range
// deletions its sstables hold.
func rangeDeletionsOnDisk(t *testing.T, db *DB) uint64 {
	t.Helper()
	if err := db.pdb.Flush(); err != nil {
		t.Fatal(err)
	}
	levels, err := db.pdb.SSTables(pebble.WithProperties())
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, l := range levels {
		for _, s := range l {
			if s.Properties != nil {
				n += s.Properties.NumRangeDeletions
			}
		}
	}
	return n
}

// A topic deletion writes range deletions for the groups that left state
// of the topic, not for every group the broker ever saw: with groups
// coming and going, a tombstone per group on every deletion made each
// deletion take seconds and grew the broker's memory by hundreds of MiB
// (Pebble keeps the fragments of a memtable's range deletions for reads).
func TestDeleteTopicTombstonesOnlyGroupsOfTheTopic(t *testing.T) {
	db := openTestDB(t)
	const groups = 500
	updates := make([]OffsetUpdate, 0, groups)
	for g := 0; g < groups; g++ {
		updates = append(updates, OffsetUpdate{Group: fmt.Sprintf("G%d", g), Topic: "Live", QueueID: 0, Offset: 1})
	}
	if err := db.ConsumerOffsets().SetMany(updates, true); err != nil {
		t.Fatal(err)
	}
	putConsumerState(t, db, "G7", "T", 1)
	before := rangeDeletionsOnDisk(t, db)
	if err := db.Pop().DeleteTopic("Unconsumed"); err != nil {
		t.Fatal(err)
	}
	if n := rangeDeletionsOnDisk(t, db) - before; n != 0 {
		t.Errorf("deleting a topic no group consumed wrote %d range deletions among %d groups of another topic", n, groups)
	}
	before = rangeDeletionsOnDisk(t, db)
	if err := db.Pop().DeleteTopic("T"); err != nil {
		t.Fatal(err)
	}
	// One group's committed offsets, pop positions, orderly batches,
	// revive intents and batches and a slave's own state (its checkpoints
	// are deleted key by key).
	if n := rangeDeletionsOnDisk(t, db) - before; n == 0 || n > 6 {
		t.Errorf("deleting a topic one group consumed wrote %d range deletions, want 1-6", n)
	}
	if after := keysByTopic(t, db); after[fmt.Sprintf("%#x T", prefixConsumerOf)] != 0 || after[fmt.Sprintf("%#x Live", prefixConsumerOf)] != groups {
		t.Errorf("after the deletion of T: %v", after)
	}
}
