package rmqconfig

import (
	"bytes"
	"testing"
)

// FuzzDecodePopRecord: any key and value decode or are refused without a
// panic, and what decodes has the key RocketMQ builds from it and a
// deadline of popTime + invisibleTime.
func FuzzDecodePopRecord(f *testing.F) {
	r := PopRecord{Group: "GroupA", Topic: "TopicA", QueueID: 1, Offset: 7, PopTime: 1700000030000, InvisibleTime: 60000, VisibleAt: 1700000090000}
	f.Add(PopRecordKey(r), []byte(`{"attemptTimes":0,"groupId":"GroupA","invisibleTime":60000,"offset":7,"popTime":1700000030000,"queueId":1,"retryFlag":0,"topicId":"TopicA"}`))
	f.Add(PopRecordKey(r), []byte(`{"popTime":1700000030000,"groupId":"GroupA","topicId":"TopicA","queueId":1,"retryFlag":1,"invisibleTime":60000,"offset":7,"attemptTimes":2,"attemptId":"x"}`))
	f.Add([]byte{0, 1, '@'}, []byte(`{}`))
	f.Add([]byte{}, []byte(`null`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		got, err := DecodePopRecord(key, value)
		if err != nil {
			return
		}
		if !bytes.Equal(PopRecordKey(got), key) || got.VisibleAt != got.PopTime+got.InvisibleTime ||
			got.Group == "" || got.Topic == "" || got.Offset < 0 || got.QueueID < 0 {
			t.Fatalf("%x %q decoded to %+v", key, value, got)
		}
	})
}
