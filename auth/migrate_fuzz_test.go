package auth

import (
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/acl"
)

// FuzzFromV1 reads arbitrary plain_acl.yml bytes as the broker's
// migrateAuthFromV1Enabled start does: a file that parses maps every
// account either to a user that AUTH_CREATE_USER would accept, with an
// access list that compiles or none, or to a refusal that says why; so
// the import never writes into the store what the broker cannot check
// with, and never drops an account without a reason.
func FuzzFromV1(f *testing.F) {
	f.Add([]byte("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    admin: false\n    defaultTopicPerm: DENY\n" +
		"    defaultGroupPerm: SUB\n    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]\n    groupPerms: [groupA=DENY, groupB=PUB|SUB]\n" +
		"  - accessKey: rocketmq2\n    secretKey: 87654321\n    whiteRemoteAddress: 192.168.1.*\n    admin: true\n"))
	f.Add([]byte("accounts:\n  - {accessKey: fuzzuser1, secretKey: fuzzsecret1, topicPerms: ['t*=PUB', '*=SUB', 'a:b=DENY']}\n"))
	f.Add([]byte("accounts:\n  - {accessKey: '       ', secretKey: '12345678'}\n"))
	f.Add([]byte("accounts:\n  - {accessKey: 'ab:cdefg', secretKey: ' x y z ', groupPerms: ['%DLQ%g=SUB']}\n"))
	f.Add([]byte("accounts:\n  - {accessKey: abcdefg, secretKey: hijklmn, topicPerms: ['%RETRY%=SUB', 'a=PUB']}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := acl.Parse(data)
		if err != nil {
			return
		}
		out := FromV1(cfg)
		if len(out) != len(cfg.Accounts) {
			t.Fatalf("%q: %d accounts, %d migrated", data, len(cfg.Accounts), len(out))
		}
		for _, m := range out {
			_, userErr := NewUser(m.User)
			if (userErr != nil) != (m.Refused != nil) {
				t.Fatalf("%q: user %q: refused %v, yet the create check says %v", data, m.User.Username, m.Refused, userErr)
			}
			if m.Refused != nil || m.ACL == nil {
				continue
			}
			if m.ACLRefused != nil {
				t.Fatalf("%q: %q has an access list and a refusal of it: %v", data, m.User.Username, m.ACLRefused)
			}
			if _, err := Compile(*m.ACL); err != nil {
				t.Fatalf("%q: the access list migrated for %q does not compile: %v", data, m.User.Username, err)
			}
		}
	})
}

// TestFromV1Refusals: an account whose keys are blank (plain_acl.yml takes
// seven spaces) is refused with the create check's reason, and one whose
// topic permission on "%RETRY%" alone names no group keeps its user but
// not the access list, with the reason.
func TestFromV1Refusals(t *testing.T) {
	cfg, err := acl.Parse([]byte("accounts:\n  - {accessKey: '       ', secretKey: '12345678'}\n" +
		"  - {accessKey: abcdefg, secretKey: hijklmn, topicPerms: ['%RETRY%=SUB', 'a=PUB']}\n" +
		"  - {accessKey: goodkey, secretKey: '       '}\n"))
	if err != nil {
		t.Fatal(err)
	}
	out := FromV1(cfg)
	if len(out) != 3 {
		t.Fatalf("%d migrated, want 3", len(out))
	}
	blank, retry, blankSecret := out[0], out[1], out[2]
	if blank.Refused == nil || !strings.Contains(blank.Refused.Error(), "username can not be blank") {
		t.Errorf("blank access key: refused %v", blank.Refused)
	}
	if blankSecret.Refused == nil || !strings.Contains(blankSecret.Refused.Error(), "password can not be blank") {
		t.Errorf("blank secret key: refused %v", blankSecret.Refused)
	}
	if retry.Refused != nil || retry.ACL != nil || retry.ACLRefused == nil || !strings.Contains(retry.ACLRefused.Error(), "no name") {
		t.Errorf("%%RETRY%% topic: refused %v, access list %+v, its refusal %v", retry.Refused, retry.ACL, retry.ACLRefused)
	}
}
