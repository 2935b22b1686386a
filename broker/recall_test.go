package broker

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// Handles worked out by hand (Python's base64.urlsafe_b64encode of the
// five fields), as RocketMQ's Base64.getUrlEncoder writes them.
func TestRecallHandleFormat(t *testing.T) {
	h := recallHandle{topic: "RecallT", brokerName: "broker-a", deliverMs: "1700000001001", uniqKey: "AC1100FF000178E3B6C4"}
	const want = "djEgUmVjYWxsVCBicm9rZXItYSAxNzAwMDAwMDAxMDAxIEFDMTEwMEZGMDAwMTc4RTNCNkM0"
	if got := h.encode(); got != want {
		t.Fatalf("encode = %s, want %s", got, want)
	}
	for _, s := range []string{want, "djEgVCBiIDEgeD8-", strings.TrimRight(base64.URLEncoding.EncodeToString([]byte("v1 T b 1 x extra")), "=")} {
		if _, err := parseRecallHandle(s); err != nil {
			t.Errorf("parseRecallHandle(%q): %v", s, err)
		}
	}
	if got, _ := parseRecallHandle("djEgVCBiIDEgeD8-"); got != (recallHandle{"T", "b", "1", "x?>"}) {
		t.Errorf("URL-safe alphabet decoded to %+v", got)
	}
	for _, s := range []string{"", "!!", base64.URLEncoding.EncodeToString([]byte("v2 T b 1 x")),
		base64.URLEncoding.EncodeToString([]byte("v1 T b 1 ")), "djEgVCBiIDE\ngeD8-",
		base64.URLEncoding.EncodeToString([]byte("v1 T b 1")), base64.StdEncoding.EncodeToString([]byte("v1 T b 1 x?>")),
		"djEgVCBiICB4IHk=" /* "v1 T b  x y": an empty time, the fields after it shifted */} {
		if _, err := parseRecallHandle(s); err != errBadRecallHandle {
			t.Errorf("parseRecallHandle(%q) = %v, want %v", s, err, errBadRecallHandle)
		}
	}
}

func FuzzParseRecallHandle(f *testing.F) {
	f.Add("djEgVCBiIDEgeD8-")
	f.Add("")
	f.Add("djEg")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := parseRecallHandle(s)
		if err != nil {
			return
		}
		if again, err := parseRecallHandle(h.encode()); err != nil || again != h {
			t.Fatalf("%q: %+v re-encoded decodes to %+v, %v", s, h, again, err)
		}
	})
}

func recallReq(topic, handle string) map[string]string {
	return map[string]string{"producerGroup": "pg", "topic": topic, "recallHandle": handle}
}

// A timer message's send response carries its recall handle; RECALL_MESSAGE
// with it stores a cancel, and the message is never delivered, while its
// neighbour is. Without recallMessageEnable the recall is refused.
func TestRecallTimerMessage(t *testing.T) {
	b := startTestBroker(t, map[string]string{"timerPrecisionMs": "100", "recallMessageEnable": "true"})
	c := b.client(nil)
	sent := mustSend(t, c, "RecallT", 0, "recalled", "UNIQ_KEY\x01RC-1\x02TIMER_DELAY_MS\x011500\x02")
	mustSend(t, c, "RecallT", 0, "kept", "UNIQ_KEY\x01RC-2\x02TIMER_DELAY_MS\x011500\x02")
	plain := mustSend(t, c, "RecallT", 1, "plain", "")
	if _, ok := plain.ExtFields["recallHandle"]; ok {
		t.Fatalf("a message sent without a timer got a recall handle")
	}
	parked := pullAll(t, b, c, meta.TimerTopic, 0)
	if len(parked) != 2 {
		t.Fatalf("%d parked messages, want 2", len(parked))
	}
	out, _ := commitlog.LookupProperty(parked[0].Properties, "TIMER_OUT_MS")
	outMs, _ := strconv.ParseInt(out, 10, 64)
	raw, err := base64.URLEncoding.DecodeString(sent.ExtFields["recallHandle"])
	if want := "v1 RecallT " + b.cfg.BrokerName + " " + strconv.FormatInt(outMs+1, 10) + " RC-1"; err != nil || string(raw) != want {
		t.Fatalf("recall handle %q decodes to %q (%v), want %q", sent.ExtFields["recallHandle"], raw, err, want)
	}

	handle := sent.ExtFields["recallHandle"]
	for _, tc := range []struct {
		name   string
		req    map[string]string
		code   int32
		remark string
	}{
		{"another topic", recallReq("Other", handle), remoting.TopicNotExist, "recall failed, the topic[Other] not exist"},
		{"bad handle", recallReq("RecallT", "not base64!"), remoting.IllegalOperation, "recall handle is invalid"},
		{"no handle", map[string]string{"producerGroup": "pg", "topic": "RecallT"}, remoting.SystemError,
			`bad RECALL_MESSAGE header: header field "recallHandle": missing`},
		{"topic mismatch", recallReq("RecallT", recallHandle{"X", b.cfg.BrokerName, out, "RC-1"}.encode()), remoting.IllegalOperation, "recall failed, topic not match"},
		{"other broker", recallReq("RecallT", recallHandle{"RecallT", "elsewhere", out, "RC-1"}.encode()), remoting.IllegalOperation, "recall failed, broker service not available"},
		{"past", recallReq("RecallT", recallHandle{"RecallT", b.cfg.BrokerName, "1000", "RC-1"}.encode()), remoting.IllegalOperation, "recall failed, timestamp invalid"},
	} {
		if r := call(t, c, remoting.RecallMessage, tc.req, nil); r.Code != tc.code || r.Remark != tc.remark {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.Code, r.Remark, tc.code, tc.remark)
		}
	}
	off := startTestBroker(t, nil)
	if r := call(t, off.client(nil), remoting.RecallMessage, recallReq("RecallT", handle), nil); r.Code != remoting.NoPermission ||
		r.Remark != "recall failed, operation is forbidden" {
		t.Errorf("recall without recallMessageEnable: %d %q", r.Code, r.Remark)
	}

	r := call(t, c, remoting.RecallMessage, recallReq("RecallT", handle), nil)
	if r.Code != remoting.Success || r.ExtFields["msgId"] != "RC-1" {
		t.Fatalf("recall: %d %q %v", r.Code, r.Remark, r.ExtFields)
	}
	waitDelivered(t, b, c, "RecallT", 0, 1)
	time.Sleep(500 * time.Millisecond) // five timer ticks past the due time
	got := pullAll(t, b, c, "RecallT", 0)
	if len(got) != 1 || string(got[0].Body) != "kept" {
		var bodies []string
		for _, m := range got {
			bodies = append(bodies, string(m.Body))
		}
		t.Fatalf("delivered %v after the recall of RC-1, want [kept]", bodies)
	}
}

// A recall whose cancel cannot be parked (the timer is off) is answered
// as RocketMQ answers a put it could not make.
func TestRecallWhenTheCancelCannotBeParked(t *testing.T) {
	b := startTestBroker(t, map[string]string{"recallMessageEnable": "true", "timerWheelEnable": "false"})
	c := b.client(nil)
	mustSend(t, c, "RecallOff", 0, "x", "")
	due := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
	handle := recallHandle{topic: "RecallOff", brokerName: b.cfg.BrokerName, deliverMs: due, uniqKey: "U1"}.encode()
	r := call(t, c, remoting.RecallMessage, recallReq("RecallOff", handle), nil)
	if r.Code != remoting.SystemError || r.Remark != "recall failed, execute error" || r.ExtFields["MSG_REGION"] != b.cfg.RegionID {
		t.Fatalf("recall with the timer off: %d %q %v", r.Code, r.Remark, r.ExtFields)
	}
}
