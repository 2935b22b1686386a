package msgtrace

import (
	"reflect"
	"testing"
)

// AppendPub writes the bytes RocketMQ's TraceDataEncoder writes for a
// Java producer's send (14 fields, a missing tag as "null"), and Decode
// reads them back.
func TestAppendPub(t *testing.T) {
	r := Record{Type: Pub, TimeStamp: 1700000000000, HasTimeStamp: true, RegionID: "DefaultRegion", GroupName: "1700000000000",
		Topic: "TopicA", MsgID: "7F0000010001", Tags: "null", Keys: "k1 k2", StoreHost: "10.0.0.1:10911",
		BodyLength: 5, CostTime: 3, MsgType: 0, OffsetMsgID: "0A00000100002A9F0000000000000400", Success: true}
	want := "Pub\x011700000000000\x01DefaultRegion\x011700000000000\x01TopicA\x017F0000010001\x01null\x01k1 k2\x01" +
		"10.0.0.1:10911\x015\x013\x010\x010A00000100002A9F0000000000000400\x01true\x02"
	got := AppendPub([]byte("prefix"), &r)
	if string(got) != "prefix"+want {
		t.Fatalf("AppendPub:\n%q\nwant\n%q", got, "prefix"+want)
	}
	back, err := Decode(got[len("prefix"):])
	if err != nil || len(back) != 1 || !reflect.DeepEqual(back[0], r) {
		t.Fatalf("decoded %+v %v, want %+v", back, err, r)
	}
	r.Success = false
	if back, err := Decode(AppendPub(nil, &r)); err != nil || back[0].Success {
		t.Fatalf("a failed send decoded as %+v %v", back, err)
	}
}

func TestTransKeys(t *testing.T) {
	for _, c := range []struct {
		keys string
		want []string
	}{
		{"k1 k2 k1", []string{"ID", "k1", "k2"}},
		{"null", []string{"ID"}},
		{"", []string{"ID"}},
		{"ID", []string{"ID"}},
	} {
		if got := TransKeys(&Record{MsgID: "ID", Keys: c.keys}); !reflect.DeepEqual(got, c.want) {
			t.Errorf("keys %q: %v, want %v", c.keys, got, c.want)
		}
	}
}
