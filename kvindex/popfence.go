package kvindex

import (
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// fenceShards is how many independent parts the topic fence has: holds of
// topics of different parts never wait for one lock.
const fenceShards = 64

// topicFence orders the deletion of a topic's consumer state
// (PopStore.DeleteTopic) with the writes of the topic's queue state
// (PopStore.HoldTopic): a deletion waits for the holds under way and
// keeps new ones waiting until it returned. Topics are independent, and
// spread over shards so that holds of different topics seldom share a
// lock.
type topicFence struct {
	seed maphash.Seed
	// ended counts the deletions that ended, of any topic.
	ended  atomic.Uint64
	shards [fenceShards]fenceShard
}

// fenceShard is the part of the fence of the topics whose names hash to
// it.
type fenceShard struct {
	mu      sync.Mutex
	changed sync.Cond
	// holds counts the holds of each topic; deleting marks the topics
	// whose deletion has begun.
	holds    map[string]int
	deleting map[string]bool
	_        [64]byte // keeps neighbouring shards' locks off one cache line
}

func newTopicFence() *topicFence {
	f := &topicFence{seed: maphash.MakeSeed()}
	for i := range f.shards {
		sh := &f.shards[i]
		sh.holds, sh.deleting = map[string]int{}, map[string]bool{}
		sh.changed.L = &sh.mu
	}
	return f
}

func (f *topicFence) shard(topic string) *fenceShard {
	return &f.shards[maphash.String(f.seed, topic)%fenceShards]
}

// TopicHold is a hold of a topic (PopStore.HoldTopic); the zero value
// holds nothing.
type TopicHold struct {
	sh    *fenceShard
	topic string
	// ended is topicFence.ended when the hold was taken.
	ended uint64
}

// hold waits until no deletion of topic is under way and holds the topic
// until the hold is released.
func (f *topicFence) hold(topic string) TopicHold {
	sh := f.shard(topic)
	sh.mu.Lock()
	for sh.deleting[topic] {
		sh.changed.Wait()
	}
	sh.holds[topic]++
	// Read under the lock: a deletion of topic that ended before the
	// hold counted itself before it let go of the lock.
	ended := f.ended.Load()
	sh.mu.Unlock()
	return TopicHold{sh: sh, topic: topic, ended: ended}
}

// Release ends the hold. It must be called once (a zero TopicHold's does
// nothing).
func (h TopicHold) Release() {
	sh := h.sh
	if sh == nil {
		return
	}
	sh.mu.Lock()
	n := sh.holds[h.topic] - 1
	if n <= 0 {
		delete(sh.holds, h.topic)
	} else {
		sh.holds[h.topic] = n
	}
	sh.mu.Unlock()
	if n <= 0 {
		sh.changed.Broadcast()
	}
}

// DeletedSince reports whether a deletion of a topic (this one or any
// other) ended between the moment TopicDeletions returned deletions and
// the hold. A writer that checked that its topic exists after it read
// TopicDeletions, and gets false, knows that the topic was not deleted
// since the check: the deletion of the topic's consumer state comes
// after that of its config, and would have ended before the hold.
func (h TopicHold) DeletedSince(deletions uint64) bool { return h.ended != deletions }

// GoneSince reports whether the held topic, which existed when
// TopicDeletions returned deletions, no longer does: gone (the caller's
// look at its topic table) is asked only when a deletion ended since
// (DeletedSince), so a hold of a topic no deletion came near costs no
// lookup.
func (h TopicHold) GoneSince(deletions uint64, gone func(topic string) (bool, error)) (bool, error) {
	if !h.DeletedSince(deletions) {
		return false, nil
	}
	return gone(h.topic)
}

// exclude begins a deletion of topic once any other one has ended, waits
// for the holds of topic under way to be released, and keeps new ones
// waiting until the returned end is called.
func (f *topicFence) exclude(topic string) (end func()) {
	sh := f.shard(topic)
	sh.mu.Lock()
	for sh.deleting[topic] {
		sh.changed.Wait()
	}
	sh.deleting[topic] = true
	for sh.holds[topic] > 0 {
		sh.changed.Wait()
	}
	sh.mu.Unlock()
	return func() {
		sh.mu.Lock()
		delete(sh.deleting, topic)
		f.ended.Add(1)
		sh.mu.Unlock()
		sh.changed.Broadcast()
	}
}

// HoldTopic keeps DeleteTopic of topic from deleting anything until the
// hold is released, and first waits for one under way to return. Every
// write of a topic's queue state that depends on what it read of it (a
// pop, an ack, a change of invisible time, an offset reset, a revive)
// holds the topic from before its reads until its writes are committed,
// so that a deletion of the topic never falls between them: once the
// deletion returned, nothing a write read before it is written. A write
// that does not read the state it replaces (a pop of a queue the group
// never popped) checks that the topic still exists when a deletion ended
// since it last checked (TopicHold.DeletedSince). The holder must not
// wait for a deletion of topic.
//
// Cost: one lock of the topic's shard to take the hold and one to
// release it.
func (s *PopStore) HoldTopic(topic string) TopicHold {
	return s.db.topicFence.hold(topic)
}

// TopicDeletions returns how many deletions of a topic's consumer state
// (DeleteTopic) have ended, for TopicHold.DeletedSince. It takes no lock.
func (s *PopStore) TopicDeletions() uint64 { return s.db.topicFence.ended.Load() }

// HasLegacyReviveIntent reports whether the revive intent in of keyspace
// 0x57 (LegacyReviveIntents) is still stored: the dispatcher or a
// deletion of its topic (DeleteTopic) may have deleted it since it was
// read.
func (s *PopStore) HasLegacyReviveIntent(in *ReviveIntent) (bool, error) {
	v, err := s.db.get(reviveKey(nil, in))
	if err != nil {
		return false, fmt.Errorf("read revive intent of %s on %s/%d@%d: %w", in.Group, in.Topic, in.QueueID, in.QueueOffset, err)
	}
	return v != nil, nil
}

// HasReviveBatch reports whether the revive batch r is still stored: a
// deletion of its topic (DeleteTopic) may have deleted it since it was
// read.
func (s *PopStore) HasReviveBatch(r *ReviveBatch) (bool, error) {
	if len(r.Offsets) == 0 {
		return false, fmt.Errorf("revive batch of %s on %s/%d@%d: %w", r.Group, r.Topic, r.QueueID, r.CKOffset, ErrBadCheckpoint)
	}
	v, err := s.db.get(reviveBatchKey(nil, r))
	if err != nil {
		return false, fmt.Errorf("read revive batch of %s on %s/%d@%d: %w", r.Group, r.Topic, r.QueueID, r.CKOffset, err)
	}
	return v != nil, nil
}
