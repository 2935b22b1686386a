package msgtrace

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// rec joins fields with 0x01 and ends the record with 0x02, as RocketMQ's
// TraceDataEncoder writes one.
func rec(fields ...string) string { return strings.Join(fields, "\x01") + "\x02" }

// Each type is read field by field as RocketMQ's decoder reads it: a Pub
// of 14 fields (what RocketMQ's encoder writes), a SubAfter with and
// without its time and group, the optional tails; unknown types and empty
// records are skipped.
func TestDecode(t *testing.T) {
	body := rec("Pub", "1700000000000", "region", "PG", "TopicA", "MSGID", "TagA", "k1 k2", "10.0.0.1:10911", "12", "7", "0", "OFFSETID", "true") +
		rec("SubBefore", "1700000000100", "region", "CG", "REQ", "MSGID", "2", "k1") +
		rec("SubAfter", "REQ", "MSGID", "30", "false", "k1", "0", "1700000000200", "CG") +
		rec("SubAfter", "REQ2", "MSGID", "5", "TRUE", "k1") +
		rec("EndTransaction", "1700000000300", "region", "PG", "TopicA", "MSGID", "", "", "10.0.0.1:10911", "1", "TX", "COMMIT_MESSAGE", "false") +
		rec("Recall", "1700000000400", "region", "PG", "TopicA", "MSGID", "false") +
		rec("Other", "x") + "\x02" +
		rec("Pub", "1", "r", "PG", "T", "M2", "", "", "h", "1", "2", "4", "false") +
		rec("Pub", "1", "r", "PG", "T", "M3", "", "", "h", "1", "2", "3", "OFF", "true", "10.0.0.9")
	got, err := Decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{
		{Type: Pub, TimeStamp: 1700000000000, HasTimeStamp: true, RegionID: "region", GroupName: "PG", Topic: "TopicA", MsgID: "MSGID", Tags: "TagA", Keys: "k1 k2",
			StoreHost: "10.0.0.1:10911", BodyLength: 12, CostTime: 7, MsgType: 0, OffsetMsgID: "OFFSETID", Success: true},
		{Type: SubBefore, TimeStamp: 1700000000100, HasTimeStamp: true, RegionID: "region", GroupName: "CG", RequestID: "REQ", MsgID: "MSGID", RetryTimes: 2, Keys: "k1", Success: true},
		{Type: SubAfter, RequestID: "REQ", MsgID: "MSGID", CostTime: 30, Success: false, Keys: "k1", TimeStamp: 1700000000200, HasTimeStamp: true, GroupName: "CG"},
		{Type: SubAfter, RequestID: "REQ2", MsgID: "MSGID", CostTime: 5, Success: true, Keys: "k1"},
		{Type: EndTransaction, TimeStamp: 1700000000300, HasTimeStamp: true, RegionID: "region", GroupName: "PG", Topic: "TopicA", MsgID: "MSGID", StoreHost: "10.0.0.1:10911",
			MsgType: 1, TransactionID: "TX", TransactionState: "COMMIT_MESSAGE", Success: true},
		{Type: Recall, TimeStamp: 1700000000400, HasTimeStamp: true, RegionID: "region", GroupName: "PG", Topic: "TopicA", MsgID: "MSGID"},
		{Type: Pub, TimeStamp: 1, HasTimeStamp: true, RegionID: "r", GroupName: "PG", Topic: "T", MsgID: "M2", StoreHost: "h", BodyLength: 1, CostTime: 2, MsgType: 4},
		{Type: Pub, TimeStamp: 1, HasTimeStamp: true, RegionID: "r", GroupName: "PG", Topic: "T", MsgID: "M3", StoreHost: "h", BodyLength: 1, CostTime: 2, MsgType: 3,
			OffsetMsgID: "OFF", Success: true, ClientHost: "10.0.0.9"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
	if got, err := Decode(nil); err != nil || len(got) != 0 {
		t.Fatalf("empty body: %v %v", got, err)
	}
}

// A record of a known type that lacks a field, or holds what Java cannot
// parse, is an error naming the record (RocketMQ's decoder throws).
func TestDecodeMalformed(t *testing.T) {
	for _, body := range []string{
		rec("Pub", "1", "r", "PG", "T", "M"),
		rec("Pub", "soon", "r", "PG", "T", "M", "", "", "h", "1", "2", "0", "OFF", "true"),
		rec("Pub", "1", "r", "PG", "T", "M", "", "", "h", "1", "2", "5", "OFF", "true"),
		rec("Pub", "1", "r", "PG", "T", "M", "", "", "h", "99999999999", "2", "0", "OFF", "true"),
		rec("SubAfter", "REQ", "M", "x", "true", "k"),
		rec("SubAfter", "REQ", "M", "1", "true", "k", "0", "later", "CG"),
		rec("EndTransaction", "1", "r", "PG", "T", "M", "", "", "h", "0", "TX", "MAYBE", "false"),
		rec("Recall", "1"),
		"\x01\x01\x02",
	} {
		if _, err := Decode([]byte(body)); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode(%q): %v, want ErrMalformed", body, err)
		}
	}
}

// FuzzDecode: any bytes decode to records or an error, never a panic, and
// every record has a known type and a MsgType in range.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(rec("Pub", "1700000000000", "region", "PG", "TopicA", "MSGID", "TagA", "k1", "h", "12", "7", "0", "OFF", "true")))
	f.Add([]byte(rec("SubAfter", "REQ", "MSGID", "30", "false", "k1", "0", "1700000000200", "CG")))
	f.Add([]byte(rec("EndTransaction", "1", "r", "PG", "T", "M", "", "", "h", "1", "TX", "UNKNOW", "true")))
	f.Add([]byte("\x01\x02\x02\xff"))
	f.Fuzz(func(t *testing.T, body []byte) {
		recs, err := Decode(body)
		if err != nil {
			return
		}
		for _, r := range recs {
			switch r.Type {
			case Pub, SubBefore, SubAfter, EndTransaction, Recall:
			default:
				t.Fatalf("record of type %q", r.Type)
			}
			if r.MsgType < 0 || r.MsgType >= len(MessageTypes) {
				t.Fatalf("msgType %d", r.MsgType)
			}
		}
	})
}
