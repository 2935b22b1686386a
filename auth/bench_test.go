package auth

import (
	"net/netip"
	"strconv"
	"testing"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/meta"
)

// BenchmarkCheck is what ACL 2.0 costs every request of a Normal user
// whose access list has a handful of entries: "authorize" the decision
// alone (authorizationEnabled), "signed" the signature check and the
// decision (both switches) of a SEND_MESSAGE_V2 with its 13 header fields
// and a 1 KiB body, and "hmac-only" the baseline: HMAC-SHA1 of the same
// bytes, which no signature check can skip.
func BenchmarkCheck(b *testing.B) {
	store := memStore{
		users: map[string]meta.UserInfo{"alice": {Username: "alice", Password: "pw", UserType: UserNormal, UserStatus: UserEnable}},
		acls: map[string]meta.AclInfo{"User:alice": {Subject: "User:alice", Policies: []meta.PolicyInfo{{PolicyType: "Custom",
			Entries: []meta.PolicyEntryInfo{entry("Topic:orders", "Pub,Sub", "10.0.0.0/8", "Allow"), entry("Group:g*", "Sub", "", "Allow"),
				entry("Topic:audit*", "Get", "", "Deny"), entry("Topic:t", "Pub", "", "Allow")}}}}},
	}
	needs := []Need{{Topic("t"), []Action{ActionPub}}}
	run := func(b *testing.B, c *Checker, r *Request) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := c.Check(r); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("authorize", func(b *testing.B) {
		run(b, NewChecker(Config{Authorization: true}, store), &Request{Code: 10, Remote: netip.MustParseAddr("127.0.0.1"),
			Fields: map[string]string{"AccessKey": "alice"}, Needs: needs})
	})
	body := make([]byte, 1024)
	fields := map[string]string{}
	for i, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"} {
		fields[k] = "value-" + strconv.Itoa(i)
	}
	fields["b"] = "t"
	fields = acl.SignedFields(fields, body, 479, "alice", "pw")
	b.Run("signed", func(b *testing.B) {
		run(b, NewChecker(Config{Authentication: true, Authorization: true}, store), &Request{Code: 310, Version: 479,
			Remote: netip.MustParseAddr("127.0.0.1"), Fields: fields, Body: body, Needs: needs})
	})
	testutil.HMACBaseline(b, fields, body, "pw")
}
