package kvindex

import (
	"math"
	"testing"
	"time"
)

// DeleteTopicCheckpoints waits for the holds of its topic (a revive under
// way) and deletes the checkpoint a hold wrote meanwhile; a hold taken
// while the deletion runs waits for it to return; holds of another topic
// neither wait nor are waited for.
func TestDeleteTopicCheckpointsWaitsForTheTopicsHolds(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	release := s.HoldTopic("T")
	otherRelease := s.HoldTopic("U")
	deleted := make(chan error, 1)
	go func() { deleted <- s.DeleteTopicCheckpoints("T") }()
	select {
	case err := <-deleted:
		t.Fatalf("the deletion returned (%v) while a revive of the topic held it", err)
	case <-time.After(100 * time.Millisecond):
	}
	// The revive under way gives a message back to a checkpoint of the
	// topic, then lets go.
	b := s.NewBatch()
	ck := Checkpoint{Group: "G", Topic: "T", CKOffset: 3, PopTime: 1000, InvisibleTime: 10, VisibleAt: 1010, Offsets: []int64{3}}
	if err := b.PutCheckpoint(&ck); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// Another topic is not held up by the deletion.
	held := make(chan func(), 1)
	go func() { held <- s.HoldTopic("U") }()
	select {
	case r := <-held:
		r()
	case <-time.After(5 * time.Second):
		t.Fatal("a hold of another topic waited for the deletion")
	}
	otherRelease()
	release()
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatalf("delete checkpoints: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the deletion never returned once the hold was released")
	}
	err := s.DueCheckpoints(0, math.MaxInt64, 0, func(c Checkpoint) bool {
		t.Errorf("checkpoint left after the deletion: %+v", c)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	release() // a second release changes nothing
	s.HoldTopic("T")()
}

// A hold of a topic taken while its deletion runs waits for the deletion
// to return.
func TestHoldTopicWaitsForTheDeletion(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	end := db.topicFence.exclude("T")
	held := make(chan func(), 1)
	go func() { held <- s.HoldTopic("T") }()
	select {
	case <-held:
		t.Fatal("a hold of the topic was taken during its deletion")
	case <-time.After(100 * time.Millisecond):
	}
	end()
	select {
	case r := <-held:
		r()
	case <-time.After(5 * time.Second):
		t.Fatal("the hold never came once the deletion ended")
	}
}
