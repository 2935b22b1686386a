package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/popclient"
)

// pullOffsetStore writes a RocketMQ store of config v2 whose groups
// popped with KV POP (migrate/rmqconfig/testdata/rocksdb-v2-lmq, written
// by ldb): ten messages on TopicL/0 at offsets 0 to 9, each dispatched to
// the light message queue %LMQ%p1 at the same offset. Every group's last
// pop read 3 to 5 and acked them: its consumer offset is 3, and its pull
// offset 6 where RocketMQ wrote one (%LMQ%pg on %LMQ%p1, GroupN on
// TopicL; %LMQ%qg has none).
func pullOffsetStore(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	clog, err := commitlog.Open(commitlog.Config{Dir: root, SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		m := &commitlog.Message{Topic: "TopicL", QueueID: 0, QueueOffset: int64(i), Body: []byte(fmt.Sprint("m", i)),
			BornTimestamp: time.Now().UnixMilli(), StoreTimestamp: time.Now().UnixMilli(),
			Properties: commitlog.FormatProperties(map[string]string{
				commitlog.PropertyMultiDispatch:    "%LMQ%p1",
				commitlog.PropertyMultiQueueOffset: fmt.Sprint(i),
			})}
		if _, err := clog.Append(context.Background(), commitlog.AppendRequest{Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	if err := clog.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(root, "config"), os.DirFS(filepath.Join("..", "migrate", "rmqconfig", "testdata", "rocksdb-v2-lmq", "config"))); err != nil {
		t.Fatal(err)
	}
	return root
}

// popAllOffsets pops a group's queue until a pop comes back empty, acking
// nothing, and returns the offsets it got.
func popAllOffsets(t *testing.T, pc *popclient.Client, group, topic string) []int64 {
	t.Helper()
	var got []int64
	for {
		res := mustPop(t, pc, popclient.PopRequest{Group: group, Topic: topic, QueueID: 0, MaxMsgNums: 32, InvisibleTime: 10 * time.Minute})
		if len(res.Messages) == 0 {
			return got
		}
		for _, m := range res.Messages {
			got = append(got, m.QueueOffset)
		}
	}
}

// A config v2 store's pull offset of a light message queue is where
// RocketMQ starts the group's next pop of it (it reads it back from the
// database): imported as the group's pop position, so the batch RocketMQ
// had popped and acked (3 to 5) is not delivered again: %LMQ%pg pops 6 to
// 9. A group without a pull offset (%LMQ%qg), and an ordinary topic's
// group (GroupN, whose pull offset RocketMQ never reads back: its own
// restart pops from the committed offset), pop from their committed
// offsets, 3 to 9.
func TestOpenRocketMQStoreImportsLMQPullOffsets(t *testing.T) {
	store := pullOffsetStore(t)
	b := startTestBrokerAt(t, store, map[string]string{"enableLmq": "true", "enableMultiDispatch": "true", "mappedFileSizeCommitLog": "1048576"})
	b.caughtUp()
	if pos, ok, err := b.db.Pop().Position("%LMQ%pg", "%LMQ%p1", 0); err != nil || !ok || pos != 6 {
		t.Fatalf("%%LMQ%%pg's pop position on %%LMQ%%p1/0: %d %v %v, want the pull offset 6", pos, ok, err)
	}
	pc, c := popClient(b)
	cases := []struct {
		group, topic string
		want         string
	}{
		{"%LMQ%pg", "%LMQ%p1", "[6 7 8 9]"},
		{"%LMQ%qg", "%LMQ%p1", "[3 4 5 6 7 8 9]"},
		{"GroupN", "TopicL", "[3 4 5 6 7 8 9]"},
	}
	for _, tc := range cases {
		if off := committedOffset(t, c, tc.group, tc.topic, 0); off != 3 {
			t.Errorf("%s's committed offset of %s/0: %d, want RocketMQ's 3", tc.group, tc.topic, off)
		}
	}
	for _, tc := range cases {
		if got := fmt.Sprint(popAllOffsets(t, pc, tc.group, tc.topic)); got != tc.want {
			t.Errorf("%s popped %s/0 at %s, want %s", tc.group, tc.topic, got, tc.want)
		}
	}
}
