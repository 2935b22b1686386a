package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// With consumequeue/ moved aside (as the refusal of an unreadable one
// says), the first open cannot tell a topic RocketMQ deleted (the long
// topic here: its config gone, its records left in the CommitLog) from
// one whose config topics.json lost: it keeps the queues rebuilt from the
// CommitLog, unrouted, and the warning naming the topic says it may be a
// deleted one and that mqadmin cleanUnusedTopic drops it (which RocketMQ's
// RocksDB ConsumeQueue does by itself, within the hour). Dropping them at
// the first open would lose for good the messages of a topic whose config
// was merely lost. cleanUnusedTopic drops them, and the other topics keep
// every message.
func TestOpenRocketMQStoreWithoutConsumeQueueKeepsDeletedTopicsUnrouted(t *testing.T) {
	const long = "LongTopic_klmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvw"
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	if err := os.Rename(filepath.Join(store, "consumequeue"), filepath.Join(store, "consumequeue.aside")); err != nil {
		t.Fatal(err)
	}
	removeTopicFromConfig(t, store, long)
	logs := &testutil.SyncBuffer{}
	b := startTestBrokerWith(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "autoCreateTopicEnable": "false"}, func(b *Broker) {
		b.root = zerolog.New(logs)
	})
	b.caughtUp()
	for q := range int32(2) {
		if hi, err := b.cqs.MaxOffset(long, q); err != nil || hi == 0 {
			t.Errorf("%s/%d: max offset %d %v, want its records rebuilt from the CommitLog", long, q, hi, err)
		}
	}
	c := b.client(nil)
	if r := call(t, c, remoting.PullMessage, pullReq("GroupA", long, 0, 0, 0, 0, "*"), nil); r.Code == remoting.Success {
		t.Errorf("a pull of the deleted topic succeeded; want it refused while the topic has no config")
	}
	out := logs.String()
	if !strings.Contains(out, "no topic config: "+long) {
		t.Errorf("no warning names %s as lacking a config:\n%s", long, out)
	}
	if !strings.Contains(out, "no consumequeue/") || !strings.Contains(out, "cleanUnusedTopic") {
		t.Errorf("the warning does not say the topics may be deleted ones that cleanUnusedTopic drops:\n%s", out)
	}
	if r := call(t, c, remoting.CleanUnusedTopic, nil, nil); r.Code != remoting.Success {
		t.Fatalf("cleanUnusedTopic: %d %s", r.Code, r.Remark)
	}
	for q := range int32(2) {
		if hi, err := b.cqs.MaxOffset(long, q); err != nil || hi != 0 {
			t.Errorf("%s/%d after cleanUnusedTopic: max offset %d %v, want 0", long, q, hi, err)
		}
	}
	for q, want := range []int64{16, 16, 18, 19} {
		if hi, err := b.cqs.MaxOffset("TopicA", int32(q)); err != nil || hi != want {
			t.Errorf("TopicA/%d max offset %d %v, want %d", q, hi, err, want)
		}
	}
}

// Without consumequeue/, a topic RocketMQ deleted and created again
// (TopicB: 9 messages in queue 0, deleted, then 3 new ones numbered from
// 0 again) cannot be told from one numbered once: dispatch meets the
// deleted topic's records first, and the new ones at offsets 0..2 come
// as repeats and are left out, as RocketMQ's file ConsumeQueue rebuilt
// from the CommitLog leaves them out ("build consume queue repeatedly").
// The queue serves the deleted messages; the new ones stay in the
// CommitLog only. README says so: move consumequeue/ aside only when it
// cannot be read.
func TestOpenRocketMQStoreWithoutConsumeQueueServesATopicNumberedAgainFromItsFirstRecords(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	settleFixtureDelay(t, store)
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "storeType": "file"})
	c := b.client(nil)
	if r := call(t, c, remoting.DeleteTopicInBroker, map[string]string{"topic": "TopicB"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete TopicB: %d %s", r.Code, r.Remark)
	}
	for i := range 3 {
		// Appended past the fixture's end, fixtureEnd.
		r := mustSend(t, c, "TopicB", 0, fmt.Sprintf("new TopicB #%d", i), "")
		if header(t, r, "queueOffset") != int64(i) {
			t.Fatalf("new message %d got queue offset %s", i, r.ExtFields["queueOffset"])
		}
	}
	b.caughtUp()
	b.stop()
	for _, dir := range []string{kvindex.DirName, "consumequeue"} {
		if err := os.RemoveAll(filepath.Join(store, dir)); err != nil {
			t.Fatal(err)
		}
	}
	b = startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384"})
	b.caughtUp()
	es, err := b.cqs.Get("TopicB", 0, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 9 {
		t.Fatalf("TopicB/0 holds %d entries, want the deleted topic's 9", len(es))
	}
	for _, e := range es {
		if e.PhyOffset >= fixtureEnd {
			t.Errorf("TopicB/0 offset %d holds the record at %d, want the deleted topic's (below %d)", e.QueueOffset, e.PhyOffset, fixtureEnd)
		}
	}
}
