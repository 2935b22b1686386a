package acl

import (
	"net/netip"
	"strconv"
	"testing"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// BenchmarkCheckSend is the ACL's cost per send: the check of a
// SEND_MESSAGE_V2 request (its 13 header fields, AccessKey and Signature)
// with a 1 KiB body, allowed by a listed topic permission.
func BenchmarkCheckSend(b *testing.B) {
	cfg, err := Parse([]byte(sampleFile))
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	fields := map[string]string{FieldAccessKey: "RocketMQ"}
	for i, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"} {
		fields[k] = "value-" + strconv.Itoa(i)
	}
	fields["b"] = "topicB"
	req := &Request{Code: 310, Version: 479, Remote: netip.MustParseAddr("127.0.0.1"),
		Fields: signed("12345678", body, fields), Body: body, Resources: []Resource{{"topicB", Pub}}}
	b.Run("check", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := cfg.Check(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The baseline: HMAC-SHA1 of the same bytes, which no check can skip.
	testutil.HMACBaseline(b, fields, body, "12345678")
}
