package rmqconfig

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/kvindex"
)

// orderInfoFile is consumerOrderInfo.json in the shape fastjson gives
// RocketMQ 5.3's ConsumerOrderInfoManager: short field names, bare integer
// keys, null fields left out. Queue 1 of TopicA is a batch of offsets 7, 8
// and 10 (filtered: 9 did not match) popped twice before, 7 acknowledged,
// 8 given a later deadline; queue 0 of %RETRY%... is a retry topic's batch
// without attempt id or counts.
const orderInfoFile = `{
	"table":{
		"TopicA@GroupA":{
			1:{"a":"attempt-7","cm":1,"i":30000,"l":1700000005000,"o":[7,1,3],"oc":{7:2,8:2,10:1},"ot":{8:1700000090000},"popTime":1700000000000}
		},
		"%RETRY%GroupB_TopicB@GroupB":{
			0:{"cm":0,"i":60000,"l":1700000001000,"o":[42],"popTime":1700000001000}
		}
	}
}`

// sampleOrderInfos is what orderInfoFile holds.
func sampleOrderInfos() []OrderInfo {
	return []OrderInfo{
		{Topic: "TopicA", Group: "GroupA", QueueID: 1, PopTime: 1700000000000, InvisibleTime: 30000,
			Offsets: []int64{7, 8, 10}, NextVisible: map[int64]int64{8: 1700000090000}, Consumed: map[int64]int32{7: 2, 8: 2, 10: 1},
			LastConsume: 1700000005000, Acked: 1, AttemptID: "attempt-7"},
		{Topic: "%RETRY%GroupB_TopicB", Group: "GroupB", QueueID: 0, PopTime: 1700000001000, InvisibleTime: 60000,
			Offsets: []int64{42}, LastConsume: 1700000001000},
	}
}

func TestReadOrderInfos(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "consumerOrderInfo.json"), []byte(orderInfoFile), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	want := sampleOrderInfos()
	if !reflect.DeepEqual(c.OrderInfos, want) {
		t.Fatalf("order infos\n got %+v\nwant %+v", c.OrderInfos, want)
	}
	if len(c.Files) != 1 || filepath.Base(c.Files[0]) != "consumerOrderInfo.json" {
		t.Fatalf("files read: %v", c.Files)
	}
}

func TestParseOrderInfoErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		bad        bool // the OrderInfo itself is refused (errBadOrderInfo)
	}{
		{"key without @", `{"table":{"TopicA":{0:{"o":[1]}}}}`, false},
		{"queue not a number", `{"table":{"T@G":{q:{"o":[1]}}}}`, false},
		{"offsets not ascending", `{"table":{"T@G":{0:{"o":[5,2,1]}}}}`, true},
		{"negative first offset", `{"table":{"T@G":{0:{"o":[-3]}}}}`, true},
		{"pop time a string", `{"table":{"T@G":{0:{"popTime":"soon","o":[1]}}}}`, true},
		{"count key not an offset", `{"table":{"T@G":{0:{"o":[1],"oc":{"x":1}}}}}`, true},
		{"too many offsets", `{"table":{"T@G":{0:{"o":[` + ascending(65) + `]}}}}`, true},
		{"too many counts outside the batch", `{"table":{"T@G":{0:{"o":[100],"oc":{` + countsOf(65) + `}}}}}`, true},
		{"not an object", `[1]`, false},
	} {
		var c Config
		err := c.parseOrderInfos([]byte(tc.data))
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if got := errors.Is(err, errBadOrderInfo); got != tc.bad {
			t.Errorf("%s: %v; errBadOrderInfo %v, want %v", tc.name, err, got, tc.bad)
		}
	}
	// A negative queue id is no queue's: skipped with a note, as in
	// consumerOffset.json.
	var c Config
	if err := c.parseOrderInfos([]byte(`{"table":{"T@G":{-1:{"o":[1]},0:{"o":[4]}}}}`)); err != nil || len(c.OrderInfos) != 1 ||
		c.OrderInfos[0].QueueID != 0 || len(c.NotCarried) != 1 || !strings.Contains(c.NotCarried[0], "T@G queue -1") {
		t.Errorf("order infos with a negative queue: %v, %+v, notes %q", err, c.OrderInfos, c.NotCarried)
	}
}

// ascending returns "0,1,...,n-1".
func ascending(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = strconv.Itoa(i)
	}
	return strings.Join(parts, ",")
}

// countsOf returns "0:1,1:1,...,n-1:1": counts of offsets 0 to n-1.
func countsOf(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = strconv.Itoa(i) + ":1"
	}
	return strings.Join(parts, ",")
}

// An orderly batch whose pops repeated its attemptId keeps the counts of
// offsets it no longer holds (kvindex.OrderState.Carried); the way back
// to RocketMQ writes them into "oc" with the batch's own counts, as
// RocketMQ's OrderInfo.offsetConsumedCount holds them, so a retry of the
// same attempt there still finds them.
func TestStoreOrderInfosWritesCarriedCounts(t *testing.T) {
	db, err := kvindex.Open(kvindex.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b := db.Pop().NewBatch()
	defer b.Close()
	for _, st := range []kvindex.OrderState{
		{Group: "G", Topic: "T", QueueID: 0, PopTime: 1700000000000, InvisibleTime: 30000, AttemptID: "att",
			Messages: []kvindex.OrderMessage{{QueueOffset: 5, Consumed: 2}, {QueueOffset: 6, NextVisibleAt: 1700000060000}},
			Carried:  []kvindex.OrderCount{{QueueOffset: 7, Consumed: 1}, {QueueOffset: 9, Consumed: 3}}},
		// An offset reset's mark: nothing for RocketMQ.
		{Group: "G", Topic: "T", QueueID: 1, PopTime: -1},
	} {
		if err := b.SetOrder(&st); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	infos, err := StoreOrderInfos(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	want := []OrderInfo{{Topic: "T", Group: "G", QueueID: 0, PopTime: 1700000000000, InvisibleTime: 30000,
		Offsets: []int64{5, 6}, NextVisible: map[int64]int64{6: 1700000060000}, Consumed: map[int64]int32{5: 2, 7: 1, 9: 3},
		LastConsume: 1700000000000, AttemptID: "att"}}
	if !reflect.DeepEqual(infos, want) {
		t.Fatalf("order infos of the store\n got %+v\nwant %+v", infos, want)
	}
	data, err := EncodeOrderInfos(infos)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"oc":{5:2,7:1,9:3}`) {
		t.Fatalf("consumerOrderInfo.json lacks the carried counts in oc:\n%s", data)
	}
}

// queueEndsAt answers every queue's maximum offset as max.
type queueEndsAt struct{ max int64 }

func (q queueEndsAt) MaxOffset(string, int32) (int64, error) { return q.max, nil }
func (q queueEndsAt) MinOffset(string, int32) (int64, error) { return 0, nil }
func (q queueEndsAt) Get(string, int32, int64, int) ([]cq.Entry, error) {
	return nil, errors.New("not read by mergeSlaveOwn")
}

// A slave's own offsets go over the copied ones in the export as the
// running slave serves them: one within its queue replaces the copy, one
// for a pair without a copy is added, and one past its queue's end is
// left out (the slave drops it), keeping the copy.
func TestMergeSlaveOwnLeavesOutOffsetsPastTheEnd(t *testing.T) {
	db, err := kvindex.Open(kvindex.Options{Dir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b := db.Pop().NewBatch()
	defer b.Close()
	for _, o := range []kvindex.SlaveOwn{
		{Group: "G", Topic: "T", QueueID: 0, Committed: 7},
		{Group: "G", Topic: "T", QueueID: 1, Committed: 11},
		{Group: "H", Topic: "T", QueueID: 0, Committed: 3},
	} {
		if err := b.SetSlaveOwn(&o); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	c := Config{Offsets: []Offset{{Group: "G", Topic: "T", QueueID: 0, Offset: 2}, {Group: "G", Topic: "T", QueueID: 1, Offset: 4}}}
	if err := mergeSlaveOwn(context.Background(), db, queueEndsAt{max: 10}, &c); err != nil {
		t.Fatal(err)
	}
	want := []Offset{{Group: "G", Topic: "T", QueueID: 0, Offset: 7}, {Group: "G", Topic: "T", QueueID: 1, Offset: 4}, {Group: "H", Topic: "T", QueueID: 0, Offset: 3}}
	if !reflect.DeepEqual(c.Offsets, want) {
		t.Fatalf("offsets after the merge\n got %+v\nwant %+v", c.Offsets, want)
	}
}
