package broker

import (
	"strconv"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// A send-back of a message whose ORIGIN_MESSAGE_ID is blank (white space
// only) names the record it copied in the copy's ORIGIN_MESSAGE_ID, as
// RocketMQ's consumerSendMsgBack does for any id UtilAll.isBlank takes;
// a non-blank one is kept.
func TestSendBackReplacesABlankOriginMessageID(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	ensureGroup(t, c, "g-blank")
	for i, tc := range []struct{ origin, want string }{
		{" \t", ""}, // "" stands for the record's offset id
		{"\u3000", ""},
		{"ORIG-1", "ORIG-1"},
	} {
		mustSend(t, c, "BlankT", 0, "m"+strconv.Itoa(i), "ORIGIN_MESSAGE_ID\x01"+tc.origin+"\x02")
		b.caughtUp()
		m := pullAll(t, b, c, "BlankT", 0)[i]
		if r := call(t, c, remoting.ConsumerSendMsgBack, map[string]string{
			"offset": strconv.FormatInt(m.PhyOffset, 10), "group": "g-blank", "delayLevel": "-1"}, nil); r.Code != remoting.Success {
			t.Fatalf("send back: %d %s", r.Code, r.Remark)
		}
		dlq := pullAll(t, b, c, "%DLQ%g-blank", 0)
		if len(dlq) != i+1 {
			t.Fatalf("DLQ holds %d messages, want %d", len(dlq), i+1)
		}
		want := tc.want
		if want == "" {
			want = commitlog.MessageID(m.StoreHost, m.PhyOffset)
		}
		if got := commitlog.ParseProperties(dlq[i].Properties)["ORIGIN_MESSAGE_ID"]; got != want {
			t.Errorf("send-back of a message with ORIGIN_MESSAGE_ID %q: the copy's is %q, want %q", tc.origin, got, want)
		}
	}
}
