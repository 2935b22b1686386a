package testutil

import (
	"crypto/hmac"
	"crypto/sha1"
	"testing"
)

// signedFieldOrder is the order in which RocketMQ's ACL signs a
// SEND_MESSAGE_V2 request's fields: AccessKey, then the letter fields.
var signedFieldOrder = []string{"AccessKey", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"}

// HMACBaseline runs, as sub-benchmark "hmac-only", the
// HMAC-SHA1 of a signed request's field values and body with secret: the
// work no signature check can skip, which the access-control benchmarks
// report their checks against.
func HMACBaseline(b *testing.B, fields map[string]string, body []byte, secret string) {
	text := []byte{}
	for _, k := range signedFieldOrder {
		text = append(text, fields[k]...)
	}
	b.Run("hmac-only", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			mac := hmac.New(sha1.New, []byte(secret))
			mac.Write(text)
			mac.Write(body)
			_ = mac.Sum(nil)
		}
	})
}
