package meta

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// A detail is written with RocketMQ's field names in fastjson's order,
// as a RocketMQ broker answers GET_TOPIC_CONFIG with one.
func TestTopicQueueMappingDetailJSONHasRocketMQsFieldNames(t *testing.T) {
	d := NewTopicQueueMappingDetail("static-topic", 2, "broker-a", 1700000000000)
	item := NewLogicQueueMappingItem()
	item.Bname, item.QueueID = "broker-a", 1
	d.HostedQueues[1] = []LogicQueueMappingItem{item}
	got, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"bname":"broker-a","currIdMap":{},"dirty":false,"epoch":1700000000000,` +
		`"hostedQueues":{"1":[{"bname":"broker-a","endOffset":-1,"gen":0,"logicOffset":0,"queueId":1,` +
		`"startOffset":0,"timeOfEnd":-1,"timeOfStart":-1}]},"scope":"__global__","topic":"static-topic","totalQueues":2}`
	if string(got) != want {
		t.Fatalf("detail JSON\n got %s\nwant %s", got, want)
	}
	info, err := d.MappingInfoJSON()
	if err != nil {
		t.Fatal(err)
	}
	const wantInfo = `{"bname":"broker-a","currIdMap":{"1":1},"dirty":false,"epoch":1700000000000,` +
		`"scope":"__global__","topic":"static-topic","totalQueues":2}`
	if string(info) != wantInfo {
		t.Fatalf("mapping info JSON\n got %s\nwant %s", info, wantInfo)
	}
}

// mqadmin's body (fastjson: integer keys bare, fields it leaves out at
// their Java defaults) reads back as the detail it describes.
func TestDecodeTopicQueueMappingDetailReadsFastjson(t *testing.T) {
	body := `{"bname":"broker-a","currIdMap":{},"dirty":false,"epoch":5,"hostedQueues":{0:[{"bname":"broker-a","gen":0,"logicOffset":0,"queueId":0,"startOffset":0}],` +
		`1:[{"bname":"broker-b","endOffset":10,"gen":0,"logicOffset":0,"queueId":3,"startOffset":0,"timeOfEnd":-1,"timeOfStart":-1},` +
		`{"bname":"broker-a","endOffset":-1,"gen":1,"logicOffset":10,"queueId":1,"startOffset":0,"timeOfEnd":-1,"timeOfStart":-1}]},"topic":"S","totalQueues":2}`
	d, err := DecodeTopicQueueMappingDetail([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if d.Scope != MetadataScopeGlobal || d.Epoch != 5 || d.TotalQueues != 2 || d.Topic != "S" || d.Bname != "broker-a" {
		t.Fatalf("detail %+v", d)
	}
	if it := d.HostedQueues[0][0]; it.EndOffset != -1 || it.TimeOfStart != -1 || it.TimeOfEnd != -1 {
		t.Fatalf("left-out item fields not at RocketMQ's defaults: %+v", it)
	}
	if leader, _ := d.Leader(1); leader.Gen != 1 || leader.QueueID != 1 {
		t.Fatalf("leader of queue 1: %+v", leader)
	}
	if got, want := d.LeaderIDMap(), map[int32]int32{0: 0, 1: 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("leader id map %v, want %v", got, want)
	}
	if _, err := DecodeTopicQueueMappingDetail([]byte(`{"hostedQueues":[1]}`)); !errors.Is(err, ErrBadMapping) {
		t.Fatalf("a malformed body: %v, want ErrBadMapping", err)
	}
}

// The offset arithmetic of an item that starts at logic offset 100 on a
// physical queue from 20 on, ended at physical 50.
func TestLogicQueueMappingItemOffsets(t *testing.T) {
	it := LogicQueueMappingItem{LogicOffset: 100, StartOffset: 20, EndOffset: 50}
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"loosely below start", it.StaticOffsetLoosely(5), 100},
		{"loosely inside", it.StaticOffsetLoosely(30), 110},
		{"loosely past end", it.StaticOffsetLoosely(70), 130},
		{"strictly past end", it.StaticOffsetStrictly(70), 150},
		{"physical", it.PhysicalOffset(110), 30},
		{"max", it.MaxStaticOffset(), 130},
		{"delta", it.OffsetDelta(), 80},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
	undecided := LogicQueueMappingItem{LogicOffset: -1}
	if undecided.StaticOffsetLoosely(3) != -1 {
		t.Error("an undecided item's loose offset is not -1")
	}
	items := []LogicQueueMappingItem{{Gen: 0, LogicOffset: 0, EndOffset: 10}, {Gen: 1, LogicOffset: 10}, {Gen: 2, LogicOffset: -1}}
	if got, _ := FindLogicQueueMappingItem(items, 12, true); got.Gen != 1 {
		t.Errorf("offset 12 found in gen %d", got.Gen)
	}
	if got, _ := FindLogicQueueMappingItem(items, -5, true); got.Gen != 0 {
		t.Errorf("offset -5 found in gen %d, want the oldest", got.Gen)
	}
	if got, ok := FindNextItem(items, 0, true); !ok || got.Gen != 1 {
		t.Errorf("next of gen 0: %+v %v", got, ok)
	}
	if _, ok := FindNextItem(items, 1, true); ok {
		t.Error("next of gen 1 is undecided, yet found")
	}
}

// RocketMQ's checks of an update refuse what they refuse, keep what an
// update leaves out, and let force through.
func TestMergeTopicQueueMapping(t *testing.T) {
	item := func(gen int32, bname string, q int32, logic int64) LogicQueueMappingItem {
		it := NewLogicQueueMappingItem()
		it.Gen, it.Bname, it.QueueID, it.LogicOffset = gen, bname, q, logic
		return it
	}
	old := NewTopicQueueMappingDetail("S", 2, "a", 10)
	old.HostedQueues[0] = []LogicQueueMappingItem{item(0, "a", 0, 0)}
	old.HostedQueues[1] = []LogicQueueMappingItem{item(0, "a", 1, 0)}

	withQueue0 := func(epoch int64, items ...LogicQueueMappingItem) TopicQueueMappingDetail {
		d := NewTopicQueueMappingDetail("S", 2, "a", epoch)
		d.HostedQueues[0] = items
		return d
	}
	for _, c := range []struct {
		name  string
		next  TopicQueueMappingDetail
		force bool
		want  string // "" accepted
	}{
		{"smaller epoch", withQueue0(9, item(0, "a", 0, 0)), false, "small epoch"},
		{"equal epoch leaving a queue out", withQueue0(10, item(0, "a", 0, 0)), false, "equal epoch with null data"},
		{"moved physical queue", withQueue0(11, item(0, "a", 5, 0)), false, "changed its broker"},
		{"gen not increasing", withQueue0(11, item(1, "b", 0, 0), item(1, "a", 0, 10)), false, "gen does not increase"},
		{"negative queue id", withQueue0(11, item(0, "a", -1, 0)), false, "should not be negative"},
		{"newer epoch", withQueue0(11, item(0, "a", 0, 0)), false, ""},
		{"forced smaller epoch", withQueue0(1, item(0, "a", 0, 0)), true, ""},
	} {
		got, err := MergeTopicQueueMapping(&old, c.next, c.force)
		if c.want != "" {
			if !errors.Is(err, ErrBadMapping) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want a refusal naming %q", c.name, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if len(got.HostedQueues[1]) != 1 {
			t.Errorf("%s: the queue the update left out was not kept: %v", c.name, got.HostedQueues)
		}
	}
	scoped := withQueue0(11, item(0, "a", 0, 0))
	scoped.Scope = "other"
	if _, err := MergeTopicQueueMapping(&old, scoped, false); err == nil || !strings.Contains(err.Error(), "scope") {
		t.Errorf("a changed scope: %v", err)
	}
}

// FuzzDecodeTopicQueueMappingDetail feeds arbitrary bodies of
// UPDATE_AND_CREATE_STATIC_TOPIC to the decoder: an error or a detail,
// never a panic, and a detail that encodes and reads back the same.
func FuzzDecodeTopicQueueMappingDetail(f *testing.F) {
	f.Add([]byte(`{"bname":"a","epoch":1,"hostedQueues":{0:[{"bname":"a","gen":0,"logicOffset":0,"queueId":0,"startOffset":0}]},"topic":"S","totalQueues":1}`))
	f.Add([]byte(`{"bname":"a","currIdMap":{"0":0},"hostedQueues":{"1":null},"scope":null}`))
	f.Add([]byte(`{"hostedQueues":{"-1":[{"endOffset":"x"}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := DecodeTopicQueueMappingDetail(body)
		if err != nil {
			return
		}
		for id, items := range d.HostedQueues {
			_ = CheckItemOffsets(items)
			_ = d.MaxOffsetFromMapping(id)
		}
		_, _ = MergeTopicQueueMapping(&d, d, false)
		enc, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("encode %+v: %v", d, err)
		}
		back, err := DecodeTopicQueueMappingDetail(enc)
		if err != nil || !reflect.DeepEqual(back, d) {
			t.Fatalf("round trip of %s: %+v, %v", enc, back, err)
		}
	})
}
