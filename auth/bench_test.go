package auth

import (
	"net/netip"
	"testing"

	"github.com/rocketkv/rocketkv/meta"
)

// BenchmarkCheck is the authorization of one send by a Normal user whose
// access list has a handful of entries: what every request pays.
func BenchmarkCheck(b *testing.B) {
	store := memStore{
		users: map[string]meta.UserInfo{"alice": {Username: "alice", Password: "pw", UserType: UserNormal, UserStatus: UserEnable}},
		acls: map[string]meta.AclInfo{"User:alice": {Subject: "User:alice", Policies: []meta.PolicyInfo{{PolicyType: "Custom",
			Entries: []meta.PolicyEntryInfo{entry("Topic:orders", "Pub,Sub", "10.0.0.0/8", "Allow"), entry("Group:g*", "Sub", "", "Allow"),
				entry("Topic:audit*", "Get", "", "Deny"), entry("Topic:t", "Pub", "", "Allow")}}}}},
	}
	c := NewChecker(Config{Authorization: true}, store)
	r := &Request{Code: 10, Remote: netip.MustParseAddr("127.0.0.1"), Fields: map[string]string{"AccessKey": "alice"},
		Needs: []Need{{Topic("t"), []Action{ActionPub}}}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := c.Check(r); err != nil {
			b.Fatal(err)
		}
	}
}
