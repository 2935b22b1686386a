package rmqpop

import (
	"errors"
	"reflect"
	"testing"
)

// What EncodeCheckpoint writes is RocketMQ's layout, and Merger reads it
// back as the same check-point.
func TestEncodeCheckpoint(t *testing.T) {
	ck := Checkpoint{Group: "cg", Topic: "Orders", QueueID: 2, StartOffset: 10, PopTime: 1700000000000,
		InvisibleTime: 60000, BrokerName: "broker-a", RePuts: 1, Offsets: []int64{10, 11, 13}}
	body, err := EncodeCheckpoint(ck)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"bm":0,"bn":"broker-a","c":"cg","d":[0,1,3],"it":60000,"n":3,"pt":1700000000000,"q":2,"rp":"1","so":10,"t":"Orders"}`
	if string(body) != want {
		t.Fatalf("body\n got %s\nwant %s", body, want)
	}
	m := NewMerger()
	if err := m.Add(TagCheckpoint, body); err != nil {
		t.Fatal(err)
	}
	if got := m.InFlight(); len(got) != 1 || !reflect.DeepEqual(got[0], ck) {
		t.Fatalf("read back %+v, want %+v", got, ck)
	}
	if got := CheckpointUniqKey(ck); got != "Orders@2@10@cg@1700000000000@broker-a@ck" {
		t.Fatalf("unique key %s", got)
	}
	ck.Offsets = make([]int64, 200)
	if _, err := EncodeCheckpoint(ck); !errors.Is(err, ErrCheckpointTooLarge) {
		t.Fatalf("200 messages: %v", err)
	}
}
