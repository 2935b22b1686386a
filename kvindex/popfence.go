package kvindex

import (
	"fmt"
	"sync"
)

// topicFence orders the deletion of a topic's checkpoints
// (PopStore.DeleteTopicCheckpoints) with the revives of the topic
// (PopStore.HoldTopic): a deletion waits for the holds under way and
// keeps new ones waiting until it returned. Topics are independent.
type topicFence struct {
	mu      sync.Mutex
	changed sync.Cond
	// holds counts the holds of each topic; deleting marks the topics
	// whose deletion has begun.
	holds    map[string]int
	deleting map[string]bool
}

func newTopicFence() *topicFence {
	f := &topicFence{holds: map[string]int{}, deleting: map[string]bool{}}
	f.changed.L = &f.mu
	return f
}

// hold waits until no deletion of topic is under way and holds the topic
// until the returned release is called (once or more).
func (f *topicFence) hold(topic string) (release func()) {
	f.mu.Lock()
	for f.deleting[topic] {
		f.changed.Wait()
	}
	f.holds[topic]++
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			if f.holds[topic]--; f.holds[topic] == 0 {
				delete(f.holds, topic)
			}
			f.mu.Unlock()
			f.changed.Broadcast()
		})
	}
}

// exclude begins a deletion of topic once any other one has ended, waits
// for the holds of topic under way to be released, and keeps new ones
// waiting until the returned end is called.
func (f *topicFence) exclude(topic string) (end func()) {
	f.mu.Lock()
	for f.deleting[topic] {
		f.changed.Wait()
	}
	f.deleting[topic] = true
	for f.holds[topic] > 0 {
		f.changed.Wait()
	}
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.deleting, topic)
		f.mu.Unlock()
		f.changed.Broadcast()
	}
}

// HoldTopic keeps DeleteTopicCheckpoints of topic from deleting anything
// until release is called, and first waits for one under way to return.
// A revive holds the topic of the checkpoints it reads until it has
// written what comes of them (the revive batch, the put, a checkpoint
// given back), so that a deletion of the topic never falls between its
// read and its writes: once the deletion returned, nothing the revive
// read before it is put or written back. The caller must not wait for a
// deletion of topic while it holds it.
func (s *PopStore) HoldTopic(topic string) (release func()) {
	return s.db.topicFence.hold(topic)
}

// HasReviveBatch reports whether the revive batch r is still stored: a
// deletion of its topic (DeleteTopicCheckpoints) may have deleted it
// since it was read.
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
