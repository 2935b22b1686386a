package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// A consumer offset commit whose topic was deleted after the request
// found it writes nothing: a topic created again under the name would
// otherwise start the group from the old offset, past its end. One under
// way when a deletion begins is written first and deleted with the rest
// of the topic's offsets. (RocketMQ has the race; its deletion can leave
// the offset.) An administrator's reset or clone of offsets is fenced the
// same way.
func TestOffsetCommitsAreFencedFromTheirTopicsDeletion(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	ensureGroup(t, c, "fg")
	for _, topic := range []string{"FencedA", "FencedB"} {
		mustSend(t, c, topic, 0, "m", "")
	}
	b.caughtUp()
	commitOf := func(topic string, off int64) func() error {
		return func() error { return b.offsets.Set("fg", topic, 0, off) }
	}

	t.Run("deleted between the check and the write", func(t *testing.T) {
		deletions := b.db.Pop().TopicDeletions()
		if _, ok, err := b.topicConfig("FencedA"); err != nil || !ok {
			t.Fatalf("topic FencedA: %v %v", ok, err)
		}
		if err := b.deleteTopic("FencedA"); err != nil {
			t.Fatal(err)
		}
		if err := b.commitOffsetHeld("FencedA", deletions, commitOf("FencedA", 1)); !errors.Is(err, errTopicDeletedSince) {
			t.Fatalf("commit after the deletion: %v, want errTopicDeletedSince", err)
		}
		if off, ok, err := b.offsets.Get("fg", "FencedA", 0); err != nil || ok {
			t.Fatalf("offset %d stored on the deleted topic (%v)", off, err)
		}
		// A deletion of another topic does not refuse the commit.
		if err := b.commitOffsetHeld("FencedB", deletions, commitOf("FencedB", 1)); err != nil {
			t.Fatalf("commit on a topic that was not deleted: %v", err)
		}
	})

	t.Run("deletion waits for a commit under way", func(t *testing.T) {
		inCommit, release := make(chan struct{}), make(chan struct{})
		committed := make(chan error, 1)
		go func() {
			committed <- b.commitOffsetHeld("FencedB", b.db.Pop().TopicDeletions(), func() error {
				close(inCommit)
				<-release
				return commitOf("FencedB", 2)()
			})
		}()
		<-inCommit
		deleted := make(chan error, 1)
		go func() { deleted <- b.deleteTopic("FencedB") }()
		select {
		case err := <-deleted:
			t.Fatalf("the deletion returned (%v) while a commit of its topic was under way", err)
		case <-time.After(100 * time.Millisecond):
		}
		close(release)
		if err := <-committed; err != nil {
			t.Fatal(err)
		}
		if err := <-deleted; err != nil {
			t.Fatal(err)
		}
		if off, ok, err := b.offsets.Get("fg", "FencedB", 0); err != nil || ok {
			t.Fatalf("offset %d left on the deleted topic (%v)", off, err)
		}
	})

	// An administrator's reset or clone of offsets holds the topics it
	// writes as a consumer's commit does.
	t.Run("reset of a topic deleted since its check", func(t *testing.T) {
		mustSend(t, c, "FencedR", 0, "m", "")
		b.caughtUp()
		deletions := b.db.Pop().TopicDeletions()
		if err := b.deleteTopic("FencedR"); err != nil {
			t.Fatal(err)
		}
		err := b.resetQueues("fg", "FencedR", map[int32]int64{0: 1}, deletions)
		if !errors.Is(err, errTopicDeletedSince) {
			t.Fatalf("reset after the deletion: %v, want errTopicDeletedSince", err)
		}
		if off, ok, err := b.offsets.Get("fg", "FencedR", 0); err != nil || ok {
			t.Fatalf("reset offset %d stored on the deleted topic (%v)", off, err)
		}
	})

	t.Run("clone onto a topic deleted since its check", func(t *testing.T) {
		for _, topic := range []string{"FencedC", "FencedD"} {
			mustSend(t, c, topic, 0, "m", "")
		}
		b.caughtUp()
		deletions := b.db.Pop().TopicDeletions()
		if err := b.deleteTopic("FencedC"); err != nil {
			t.Fatal(err)
		}
		err := b.cloneOffsets([]kvindex.OffsetUpdate{
			{Group: "fg", Topic: "FencedC", QueueID: 0, Offset: 1},
			{Group: "fg", Topic: "FencedD", QueueID: 0, Offset: 1},
		}, deletions)
		if err != nil {
			t.Fatal(err)
		}
		if off, ok, err := b.offsets.Get("fg", "FencedC", 0); err != nil || ok {
			t.Fatalf("cloned offset %d stored on the deleted topic (%v)", off, err)
		}
		if off, ok, err := b.offsets.Get("fg", "FencedD", 0); err != nil || !ok || off != 1 {
			t.Fatalf("cloned offset of the topic not deleted: %d %v %v, want 1", off, ok, err)
		}
	})

	t.Run("UPDATE_CONSUMER_OFFSET of a deleted topic", func(t *testing.T) {
		r := call(t, c, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": "fg", "topic": "FencedA", "queueId": "0", "commitOffset": "1"}, nil)
		if r.Code != remoting.TopicNotExist {
			t.Fatalf("commit on a deleted topic: %d %s", r.Code, r.Remark)
		}
	})
}
