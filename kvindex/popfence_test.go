package kvindex

import (
	"math"
	"testing"
	"time"
)

// DeleteTopic waits for the holds of its topic (a revive under way) and
// deletes the checkpoint a hold wrote meanwhile; a hold taken
// while the deletion runs waits for it to return; holds of another topic
// neither wait nor are waited for.
func TestDeleteTopicWaitsForTheTopicsHolds(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	hold := s.HoldTopic("T")
	other := s.HoldTopic("U")
	deleted := make(chan error, 1)
	go func() { deleted <- s.DeleteTopic("T") }()
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
	held := make(chan TopicHold, 1)
	go func() { held <- s.HoldTopic("U") }()
	select {
	case h := <-held:
		h.Release()
	case <-time.After(5 * time.Second):
		t.Fatal("a hold of another topic waited for the deletion")
	}
	other.Release()
	hold.Release()
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
	s.HoldTopic("T").Release()
	TopicHold{}.Release() // holds nothing
}

// A hold of a topic taken while its deletion runs waits for the deletion
// to return.
func TestHoldTopicWaitsForTheDeletion(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	end := db.topicFence.exclude("T")
	held := make(chan TopicHold, 1)
	go func() { held <- s.HoldTopic("T") }()
	select {
	case <-held:
		t.Fatal("a hold of the topic was taken during its deletion")
	case <-time.After(100 * time.Millisecond):
	}
	end()
	select {
	case h := <-held:
		h.Release()
	case <-time.After(5 * time.Second):
		t.Fatal("the hold never came once the deletion ended")
	}
}

// A hold tells a writer whether a deletion ended since it read
// TopicDeletions: not for a hold taken before the deletion began nor for
// a count read after it ended, and so for a hold taken after it.
func TestTopicHoldDeletedSince(t *testing.T) {
	db := openTestDB(t)
	s := db.Pop()
	before := s.TopicDeletions()
	early := s.HoldTopic("T")
	if early.DeletedSince(before) {
		t.Error("a hold taken before any deletion reports one")
	}
	early.Release()
	if err := s.DeleteTopic("T"); err != nil {
		t.Fatal(err)
	}
	late := s.HoldTopic("T")
	defer late.Release()
	if !late.DeletedSince(before) {
		t.Error("a hold taken after a deletion ended does not report it to a writer that read the count before")
	}
	if after := s.TopicDeletions(); late.DeletedSince(after) {
		t.Error("a hold reports a deletion that ended before the count was read")
	}
	// GoneSince asks the caller's topic table only after a deletion.
	asked := 0
	gone := func(topic string) (bool, error) { asked++; return topic == "T", nil }
	if g, err := late.GoneSince(s.TopicDeletions(), gone); err != nil || g || asked != 0 {
		t.Errorf("GoneSince without a deletion since: %v %v, table asked %d times", g, err, asked)
	}
	if g, err := late.GoneSince(before, gone); err != nil || !g || asked != 1 {
		t.Errorf("GoneSince after a deletion of the held topic: %v %v, table asked %d times", g, err, asked)
	}
}

// BenchmarkHoldTopic takes and releases holds of a few topics from every
// processor at once, as concurrent pops and acks do.
func BenchmarkHoldTopic(b *testing.B) {
	db := openTestDB(b)
	s := db.Pop()
	topics := []string{"BenchPopTopic_0", "BenchPopTopic_1", "BenchPopTopic_2", "BenchPopTopic_3"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s.HoldTopic(topics[i%len(topics)]).Release()
			i++
		}
	})
}
