package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// A query answers its records oldest first, as RocketMQ sorts the offsets
// it found: the Java client's queryMessageByUniqKey (mqadmin queryMsgById
// with a client id, viewMessage) takes the first, so a message stored
// twice by a producer's retry is shown as its first copy.
func TestQueryAnswersOldestFirst(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for _, body := range []string{"first", "second", "third"} {
		mustSend(t, c, "QOrder", 0, body, "UNIQ_KEY\x01DUPKEY\x02KEYS\x01k\x02")
	}
	b.caughtUp()
	for _, unique := range []bool{true, false} {
		key := "k"
		if unique {
			key = "DUPKEY"
		}
		resp := call(t, c, remoting.QueryMessage, map[string]string{"topic": "QOrder", "key": key, "maxNum": "32",
			"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10),
			"_UNIQUE_KEY_QUERY": strconv.FormatBool(unique)}, nil)
		if resp.Code != remoting.Success {
			t.Fatalf("query %q: %d %s", key, resp.Code, resp.Remark)
		}
		var got []string
		for _, m := range decodeRecords(t, resp.Body) {
			got = append(got, string(m.Body))
		}
		if len(got) != 3 || got[0] != "first" || got[1] != "second" || got[2] != "third" {
			t.Errorf("query of %q (unique %v) answered %q, want oldest first", key, unique, got)
		}
	}
}
