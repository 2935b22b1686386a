package txn

import (
	"net/netip"
	"strconv"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
)

// FuzzHalfMessage reads arbitrary properties of a stored half message (a
// record read back from the CommitLog file) the way a commit, a check and
// a give-up do: nothing panics; a commit's message keeps the half's
// properties as they were; a check body decodes back to the
// half's real destination with its check count.
func FuzzHalfMessage(f *testing.F) {
	f.Add("REAL_TOPIC\x01T\x02REAL_QID\x013\x02TRAN_MSG\x01true\x02UNIQ_KEY\x01u\x02", int32(2))
	f.Add("REAL_TOPIC\x01T\x02REAL_QID\x01-1\x02", int32(0))
	f.Add("REAL_QID\x012147483648\x02REAL_TOPIC\x01\x01\x02\x02", int32(-1))
	f.Add("REAL_TOPIC\x01T\x02REAL_QID\x010\x02TRANSACTION_CHECK_TIMES\x01x\x02REAL_TOPIC\x01U", int32(15))
	f.Add("", int32(1))
	f.Fuzz(func(t *testing.T, props string, checks int32) {
		half := &commitlog.Message{Topic: "RMQ_SYS_TRANS_HALF_TOPIC", Properties: props, Body: []byte("b"), PhyOffset: 4096,
			QueueOffset: 7, BornHost: netip.MustParseAddrPort("127.0.0.1:1"), StoreHost: netip.MustParseAddrPort("127.0.0.1:2")}
		_ = IsHalfSend(props, 0)
		c, err := committedMessage(half)
		if err == nil && c.Properties != props {
			t.Fatalf("half properties %q: the commit stores %q", props, c.Properties)
		}
		_ = discardedMessage(half, checks)
		body, err := checkBody(half, checks)
		if err != nil {
			return
		}
		m, err := commitlog.Decode(body)
		if err != nil {
			t.Fatalf("half properties %q: the check body does not decode: %v", props, err)
		}
		topic, qid, _ := realDestination(half)
		if m.Topic != topic || m.QueueID != qid {
			t.Fatalf("half properties %q: the check names %s/%d, not %s/%d", props, m.Topic, m.QueueID, topic, qid)
		}
		if v, ok := commitlog.LookupProperty(m.Properties, PropCheckTimes); ok && v != strconv.Itoa(int(checks)) {
			t.Fatalf("half properties %q: check count %q, want %d", props, v, checks)
		}
	})
}
