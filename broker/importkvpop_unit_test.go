package broker

import (
	"fmt"
	"testing"

	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
)

// The records of one pop become one checkpoint named by their smallest
// offset (the start offset of RocketMQ's receipt handles); a message with
// two records keeps the newer, one the revive topic's import holds
// already is left out, a retried message's checkpoint is flagged by its
// pop-retry topic's naming, and a checkpoint spans fewer than
// MaxCheckpointSpan offsets.
func TestKVPopCheckpoints(t *testing.T) {
	rec := func(topic string, q int32, off, popTime int64) rmqconfig.PopRecord {
		return rmqconfig.PopRecord{Group: "g", Topic: topic, QueueID: q, Offset: off, PopTime: popTime, InvisibleTime: 1000, VisibleAt: popTime + 1000}
	}
	changed := rec("T", 0, 4, 300) // 4's invisible time changed at 300: its record of the pop at 100 was left
	failed := rec("T", 1, 9, 100)
	failed.AttemptTimes = 2
	records := []rmqconfig.PopRecord{
		rec("T", 0, 3, 100), rec("T", 0, 4, 100), rec("T", 0, 6, 100), changed,
		rec("T", 0, 7, 200), // imported from the revive topic already
		failed,              // the same pop time, another attempt count: a checkpoint of its own
		rec("%RETRY%g+T", 0, 2, 100), rec("%RETRY%g_T", 0, 5, 100),
		rec("T", 2, 1, 100), rec("T", 2, 1+kvindex.MaxCheckpointSpan, 100),
	}
	cks, left := kvPopCheckpoints(records, map[popMessage]bool{{"g", "T", 0, 7}: true})
	var got []string
	for _, c := range cks {
		got = append(got, fmt.Sprintf("%s/%d@%d pt%d vis%d flag%d att%d %v", c.Topic, c.QueueID, c.CKOffset, c.PopTime, c.VisibleAt, c.RetryFlag, c.Attempts, c.Offsets))
	}
	want := []string{
		"%RETRY%g+T/0@2 pt100 vis1100 flag2 att0 [2]",
		"%RETRY%g_T/0@5 pt100 vis1100 flag1 att0 [5]",
		"T/0@3 pt100 vis1100 flag0 att0 [3 6]",
		"T/0@4 pt300 vis1300 flag0 att0 [4]",
		"T/1@9 pt100 vis1100 flag0 att2 [9]",
		"T/2@1 pt100 vis1100 flag0 att0 [1]",
		fmt.Sprintf("T/2@%d pt100 vis1100 flag0 att0 [%d]", 1+kvindex.MaxCheckpointSpan, 1+kvindex.MaxCheckpointSpan),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || left != 2 {
		t.Fatalf("checkpoints\n%v\nleft out %d; want\n%v\nleft out 2", got, left, want)
	}
}
