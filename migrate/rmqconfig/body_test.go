package rmqconfig

import (
	"maps"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rocketkv/rocketkv/meta"
)

// A RocketMQ 5.3 master's GET_ALL_TOPIC_CONFIG answer
// (TopicConfigAndMappingSerializeWrapper, fastjson, not pretty): the
// mapping fields are ignored, the dataVersion is read.
const topicWrapper53 = `{"dataVersion":{"counter":7,"stateVersion":0,"timestamp":1733000000123},` +
	`"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1733000000000},` +
	`"topicConfigTable":{"TopicB":{"attributes":{},"order":false,"perm":6,"readQueueNums":2,"topicFilterType":"SINGLE_TAG","topicName":"TopicB","topicSysFlag":0,"writeQueueNums":2},` +
	`"TopicA":{"attributes":{"+message.type":"NORMAL"},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicA","topicSysFlag":0,"writeQueueNums":4}},` +
	`"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}`

func TestParseTopicWrapper(t *testing.T) {
	topics, v, err := ParseTopics([]byte(topicWrapper53))
	if err != nil {
		t.Fatal(err)
	}
	if want := (meta.DataVersion{Counter: 7, Timestamp: 1733000000123}); v != want {
		t.Errorf("dataVersion %+v, want %+v", v, want)
	}
	if len(topics) != 2 || topics[0].TopicName != "TopicA" || topics[0].ReadQueueNums != 4 ||
		topics[0].Attributes["+message.type"] != "NORMAL" || topics[1].TopicName != "TopicB" {
		t.Errorf("topics %+v", topics)
	}
	if _, v, err := ParseTopics([]byte(`{"topicConfigTable":{}}`)); err != nil || v != (meta.DataVersion{}) {
		t.Errorf("a body without dataVersion: %+v %v", v, err)
	}
}

func TestParseGroupWrapper(t *testing.T) {
	groups, v, err := ParseGroups([]byte(`{"dataVersion":{"counter":3,"stateVersion":2,"timestamp":9},"forbiddenTable":{},` +
		`"subscriptionGroupTable":{"G1":{"groupName":"G1","retryMaxTimes":5}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if v != (meta.DataVersion{Counter: 3, StateVersion: 2, Timestamp: 9}) || len(groups) != 1 ||
		groups[0].GroupName != "G1" || groups[0].RetryMaxTimes != 5 || !groups[0].ConsumeEnable {
		t.Errorf("groups %+v version %+v", groups, v)
	}
}

// The offsets EncodeOffsets writes parse back to themselves: the body a
// rocketkv master answers is the body a rocketkv slave reads.
func TestOffsetsRoundTrip(t *testing.T) {
	in := []Offset{{Group: "G1", Topic: "T", QueueID: 0, Offset: 5}, {Group: "G1", Topic: "T", QueueID: 3, Offset: 9},
		{Group: "G2", Topic: "a@b", QueueID: 1, Offset: 1 << 40}}
	body, err := EncodeOffsets(in, meta.DataVersion{Counter: 1, Timestamp: 2})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseOffsets(body)
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("%s parsed to %+v (%v), want %+v", body, out, err, in)
	}
	levels := map[int]int64{1: 4, 18: 0}
	body, err = EncodeDelayOffsets(levels, meta.DataVersion{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ParseDelayOffsets(body); err != nil || !reflect.DeepEqual(got, levels) {
		t.Fatalf("%s parsed to %v (%v)", body, got, err)
	}
}

// FuzzParseBodies: arbitrary bytes in a GET_ALL_* answer never panic the
// parsers, and an accepted offset or delay offset body encodes to one that
// parses back to the same offsets.
func FuzzParseBodies(f *testing.F) {
	f.Add([]byte(topicWrapper53))
	f.Add([]byte(`{"offsetTable":{"TopicA@GroupA":{0:5,1:6}},"dataVersion":{"counter":1}}`))
	f.Add([]byte(`{"offsetTable":{1:1,"2":3},"dataVersion":{"counter":1,"timestamp":5}}`))
	f.Add([]byte(`{"subscriptionGroupTable":{"G":{"groupName":"G"}},"dataVersion":null}`))
	f.Add([]byte(`{"messageRequestModeMap":{"T":{"G":{"topic":"T","consumerGroup":"G","mode":"POP","popShareQueueNum":1}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, _ = ParseTopics(data)
		_, _, _ = ParseGroups(data)
		if levels, err := ParseDelayOffsets(data); err == nil {
			body, err := EncodeDelayOffsets(levels, meta.DataVersion{})
			if err != nil {
				t.Fatalf("encode delay offsets %v: %v", levels, err)
			}
			if again, err := ParseDelayOffsets(body); err != nil || !maps.Equal(again, levels) {
				t.Fatalf("%q: delay offsets %v written as %s, read back as %v, %v", data, levels, body, again, err)
			}
		}
		_, _ = ParseRequestModes(data)
		offsets, err := ParseOffsets(data)
		if err != nil {
			return
		}
		body, err := EncodeOffsets(offsets, meta.DataVersion{})
		if err != nil {
			t.Fatalf("encode %+v: %v", offsets, err)
		}
		again, err := ParseOffsets(body)
		if err != nil {
			t.Fatalf("re-parse %s: %v", body, err)
		}
		if !sameOffsets(offsets, again) {
			t.Fatalf("%+v came back as %+v", offsets, again)
		}
	})
}

// sameOffsets compares offset lists as tables. A queue given twice in a
// (a key repeated in the JSON) has no one right offset, so any is taken.
func sameOffsets(a, b []Offset) bool {
	table := func(os []Offset) (map[Offset]int64, bool) {
		m := map[Offset]int64{}
		for _, o := range os {
			k := o
			k.Offset = 0
			if _, dup := m[k]; dup {
				return nil, false
			}
			m[k] = o.Offset
		}
		return m, true
	}
	ta, unique := table(a)
	if !unique {
		return true
	}
	tb, _ := table(b)
	return reflect.DeepEqual(ta, tb)
}

// A RocketMQ 5 group with its own retry policies and static
// subscriptions, as subscriptionGroup.json holds it, keeps them through
// the import and the export: the proxy tells gRPC consumers those pauses.
func TestGroupRetryPolicyCarried(t *testing.T) {
	const table = `{"dataVersion":{"counter":1,"stateVersion":0,"timestamp":5},"subscriptionGroupTable":{"G":{"groupName":"G",` +
		`"groupRetryPolicy":{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":2000,"max":600000,"multiplier":4},` +
		`"customizedRetryPolicy":{"next":[1000,3000]}},` +
		`"subscriptionDataSet":[{"expression":"tagA","expressionType":"TAG","topic":"T","version":3}]}}}`
	groups, _, err := ParseGroups([]byte(table))
	if err != nil {
		t.Fatal(err)
	}
	want := meta.GroupRetryPolicy{Type: "EXPONENTIAL", Exponential: &meta.ExponentialRetryPolicy{Initial: 2000, Max: 600000, Multiplier: 4},
		Customized: &meta.CustomizedRetryPolicy{Next: []int64{1000, 3000}}}
	if len(groups) != 1 || groups[0].GroupRetryPolicy == nil || !reflect.DeepEqual(*groups[0].GroupRetryPolicy, want) {
		t.Fatalf("groups %+v, want the retry policy %+v", groups, want)
	}
	subs := []meta.SimpleSubscriptionData{{Topic: "T", ExpressionType: "TAG", Expression: "tagA", Version: 3}}
	if !reflect.DeepEqual(groups[0].SubscriptionDataSet, subs) {
		t.Fatalf("subscriptionDataSet %+v, want %+v", groups[0].SubscriptionDataSet, subs)
	}
	root := t.TempDir()
	if err := Write(filepath.Join(root, "config"), Config{Groups: groups}, meta.DataVersion{Counter: 2}); err != nil {
		t.Fatal(err)
	}
	back, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Groups, groups) {
		t.Fatalf("exported and read again:\n got %+v\nwant %+v", back.Groups, groups)
	}
}
