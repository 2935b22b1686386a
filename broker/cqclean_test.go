package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/remoting"
)

// putStray writes one ConsumeQueue entry straight into both layouts (what
// a RocketMQ store's index can hold that no config or record explains).
func putStray(t *testing.T, b *testBroker, topic string, phy int64) {
	t.Helper()
	err := b.disp.QuiescedMinima(func() error {
		for _, s := range []cq.Store{b.cqs, b.cqMirror} {
			if s == nil {
				continue
			}
			if err := s.Put([]cq.Dispatch{{Topic: topic, QueueID: 0, Entry: cq.Entry{QueueOffset: 0, PhyOffset: phy, Size: 100, StoreTimestamp: 1}}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// queueBounds is GET_MIN_OFFSET and GET_MAX_OFFSET of queue 0 of topic.
func queueBounds(t *testing.T, c *remoting.Client, topic string) (lo, hi int64) {
	t.Helper()
	get := func(code int32) int64 {
		r := call(t, c, code, map[string]string{"topic": topic, "queueId": "0"}, nil)
		v, err := strconv.ParseInt(r.ExtFields["offset"], 10, 64)
		if r.Code != remoting.Success || err != nil {
			t.Fatalf("offset of %s: %d %s %v", topic, r.Code, r.Remark, err)
		}
		return v
	}
	return get(remoting.GetMinOffset), get(remoting.GetMaxOffset)
}

// mqadmin cleanUnusedTopic drops the queues, in both layouts, of topics
// the broker has no config for; configured, system and LMQ topics keep
// theirs, and so do the consumer offsets, as in RocketMQ.
func TestCleanUnusedTopic(t *testing.T) {
	b := startTestBroker(t, map[string]string{"rocksdbCQDoubleWriteEnable": "true"})
	c := b.client(nil)
	for _, topic := range []string{"Gone", "Kept"} {
		mustSend(t, c, topic, 0, "m", "")
	}
	b.caughtUp()
	commit(t, c, "cg", "Gone", 0, 1)
	// What a RocketMQ store leaves: records of a topic topics.json no
	// longer names, queues of system and LMQ topics.
	if err := b.topics.table.Delete("Gone"); err != nil {
		t.Fatal(err)
	}
	putStray(t, b, "rmq_sys_stray", 0)
	putStray(t, b, "%LMQ%stray", 0)

	if r := call(t, c, remoting.CleanUnusedTopic, nil, nil); r.Code != remoting.Success {
		t.Fatalf("CLEAN_UNUSED_TOPIC: %d %s", r.Code, r.Remark)
	}
	if lo, hi := queueBounds(t, c, "Gone"); lo != 0 || hi != 0 {
		t.Errorf("topic without a config: queue [%d, %d), want dropped", lo, hi)
	}
	if hi, err := b.cqMirror.MaxOffset("Gone", 0); err != nil || hi != 0 {
		t.Errorf("topic without a config in the other layout: max %d %v, want dropped", hi, err)
	}
	for _, topic := range []string{"Kept", "rmq_sys_stray", "%LMQ%stray"} {
		if _, hi := queueBounds(t, c, topic); hi != 1 {
			t.Errorf("%s: max offset %d after the clean, want its entry kept", topic, hi)
		}
		if hi, err := b.cqMirror.MaxOffset(topic, 0); err != nil || hi != 1 {
			t.Errorf("%s in the other layout: max %d %v, want its entry kept", topic, hi, err)
		}
	}
	if off := committedOffset(t, c, "cg", "Gone", 0); off != 1 {
		t.Errorf("consumer offset on the dropped topic: %d, want kept (1)", off)
	}
	// Nothing left to drop: a second clean changes nothing.
	if r := call(t, c, remoting.CleanUnusedTopic, nil, nil); r.Code != remoting.Success {
		t.Fatalf("second CLEAN_UNUSED_TOPIC: %d %s", r.Code, r.Remark)
	}
	if _, hi := queueBounds(t, c, "Kept"); hi != 1 {
		t.Errorf("Kept after a second clean: max %d", hi)
	}
}

// mqadmin cleanExpiredCQ applies the CommitLog's minimum to the
// ConsumeQueues again: entries left pointing below it go, and the queue
// keeps its numbering.
func TestCleanExpiredConsumeQueue(t *testing.T) {
	b, c := startExpiringBroker(t, map[string]string{"rocksdbCQDoubleWriteEnable": "true"})
	if r := call(t, c, remoting.DeleteExpiredCommitLog, nil, nil); r.Code != remoting.Success {
		t.Fatalf("DELETE_EXPIRED_COMMITLOG: %d %s", r.Code, r.Remark)
	}
	// Every segment but the one written goes (65536 bytes each, see
	// startExpiringBroker), and retention applies the new minimum to the
	// queues after the CommitLog moved it: wait for both, so that no pass
	// is left to apply it again.
	last := b.clog.MaxOffset() / 65536 * 65536
	deadline := time.Now().Add(10 * time.Second)
	for b.clog.MinOffset() != last {
		if time.Now().After(deadline) {
			t.Fatalf("CommitLog minimum %d, want %d (only the segment written left)", b.clog.MinOffset(), last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for lo, _ := queueBounds(t, c, "ExpireT"); lo == 0; lo, _ = queueBounds(t, c, "ExpireT") {
		if time.Now().After(deadline) {
			t.Fatal("the CommitLog minimum was not applied to ExpireT")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// An entry the index holds below the new minimum: retention has
	// already applied it (putStray waits out a pass in progress), so only
	// the clean removes the entry.
	putStray(t, b, "StrayT", 0)
	if lo, hi := queueBounds(t, c, "StrayT"); lo != 0 || hi != 1 {
		t.Fatalf("stray queue before the clean: [%d, %d)", lo, hi)
	}
	if r := call(t, c, remoting.CleanExpiredConsumeQueue, nil, nil); r.Code != remoting.Success {
		t.Fatalf("CLEAN_EXPIRED_CONSUMEQUEUE: %d %s", r.Code, r.Remark)
	}
	if lo, hi := queueBounds(t, c, "StrayT"); lo != 1 || hi != 1 {
		t.Errorf("stray queue after the clean: [%d, %d), want empty at 1", lo, hi)
	}
	if lo, err := b.cqMirror.MinOffset("StrayT", 0); err != nil || lo != 1 {
		t.Errorf("stray queue in the other layout after the clean: min %d %v, want 1", lo, err)
	}
	if lo, hi := queueBounds(t, c, "ExpireT"); hi != 40 || lo == 0 {
		t.Errorf("ExpireT after the clean: [%d, %d), want its numbering and the retention's minimum", lo, hi)
	}
}
