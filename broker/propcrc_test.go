package broker

import (
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/remoting"
)

// With enabledAppendPropCRC every stored record ends with RocketMQ's
// __CRC32# property, which a consumer sees in what it pulls, as from
// RocketMQ (nothing strips it on the way out). A send's own __CRC32# is
// dropped, a batch's kept; with forceVerifyPropCRC the store recovers
// whole after a restart.
func TestAppendPropCRCSendPullAndRestart(t *testing.T) {
	store := t.TempDir()
	settings := map[string]string{"enabledAppendPropCRC": "true", "forceVerifyPropCRC": "true"}
	b := startTestBrokerAt(t, store, settings)
	c := b.client(nil)
	const clientCRC = "__CRC32#\x011234567890\x02"
	mustSend(t, c, "PropCRC", 0, "single", "TAGS\x01a\x02"+clientCRC)
	mustSendBatch(t, c, "PropCRC", []batchItem{{"batch-0", "TAGS\x01b\x02" + clientCRC}, {"batch-1", "TAGS\x01c"}})

	check := func(b *testBroker) {
		t.Helper()
		b.caughtUp()
		resp := call(t, c, remoting.PullMessage, pullReq("g", "PropCRC", 0, 0, 0, 0, "*"), nil)
		body := resp.Body
		var n int
		for len(body) > 0 {
			size, err := commitlog.CheckPropCRC(body)
			if err != nil {
				t.Fatalf("pulled record %d: %v", n, err)
			}
			m, err := commitlog.Decode(body)
			if err != nil {
				t.Fatal(err)
			}
			v, ok := commitlog.LookupProperty(m.Properties, commitlog.PropertyCRC32)
			if !ok || len(v) != 10 || v == "1234567890" {
				t.Errorf("record %d (%s): %s = %q, %v", n, m.Body, commitlog.PropertyCRC32, v, ok)
			}
			// A single send's own property is gone; a batch message's stays
			// before the broker's, as RocketMQ stores them.
			wantOwn := 0
			if string(m.Body) == "batch-0" {
				wantOwn = 1
			}
			if got := strings.Count(m.Properties, commitlog.PropertyCRC32) - 1; got != wantOwn {
				t.Errorf("record %d (%s): %d of the sender's %s kept, want %d: %q", n, m.Body, got, commitlog.PropertyCRC32, wantOwn, m.Properties)
			}
			if !strings.HasSuffix(m.Properties, "\x02"+commitlog.PropertyCRC32+"\x01"+v+"\x02") {
				t.Errorf("record %d (%s): the property is not last: %q", n, m.Body, m.Properties)
			}
			body = body[size:]
			n++
		}
		if n != 3 {
			t.Fatalf("pulled %d records, want 3", n)
		}
	}
	check(b)
	b.stop()

	b = startTestBrokerAt(t, store, settings)
	if info := b.clog.RecoveryInfo(); info.CutReason != nil || info.CutBytes != 0 {
		t.Fatalf("recovery with forceVerifyPropCRC cut the log: %+v", info)
	}
	c = b.client(nil)
	check(b)
}
