package acl

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// The signature of a request whose sorted field values are "RocketMQ",
// "pg", "TopicTest" and whose body is "hello", with the secret "12345678",
// worked out apart from this package:
//
//	printf 'RocketMQpgTopicTesthello' | openssl dgst -sha1 -hmac 12345678 -binary | base64
const helloSignature = "e21Mq5EP8w3haf5w9e70ZDHi1jw="

func TestSignMatchesOpenSSL(t *testing.T) {
	fields := map[string]string{"b": "TopicTest", "AccessKey": "RocketMQ", "a": "pg", FieldSignature: "ignored"}
	got := base64.StdEncoding.EncodeToString(Sign(fields, []byte("hello"), "12345678", 400, false))
	if got != helloSignature {
		t.Fatalf("signature %s, want %s", got, helloSignature)
	}
}

func TestSignedFieldsAddsTheOpenSSLSignature(t *testing.T) {
	in := map[string]string{"b": "TopicTest", "a": "pg"}
	out := SignedFields(in, []byte("hello"), 400, "RocketMQ", "12345678")
	if out[FieldSignature] != helloSignature || out[FieldAccessKey] != "RocketMQ" || len(out) != 4 {
		t.Fatalf("signed fields %v, want the openssl signature %s", out, helloSignature)
	}
	if len(in) != 2 {
		t.Fatalf("the caller's fields were changed: %v", in)
	}
}

// A client that signs without _UNIQUE_KEY_QUERY while reporting a newer
// version (or with it while reporting an older one) is accepted.
func TestUniqueKeyQuerySignedEitherWay(t *testing.T) {
	cfg, err := Parse([]byte(sampleFile))
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]string{FieldAccessKey: "RocketMQ", "topic": "topicB", fieldUniqueKeyQuery: "true"}
	for _, tc := range []struct {
		reported, signedAs int32
	}{{479, 479}, {479, versionV4_9_3}, {versionV4_9_3, 479}, {317, 317}} {
		f := map[string]string{}
		for k, v := range base {
			f[k] = v
		}
		f[FieldSignature] = base64.StdEncoding.EncodeToString(Sign(base, nil, "12345678", tc.signedAs, false))
		err := cfg.Check(&Request{Code: 12, Version: tc.reported, Remote: netip.MustParseAddr("127.0.0.1"), Fields: f})
		if err != nil {
			t.Errorf("version %d signed as %d: %v", tc.reported, tc.signedAs, err)
		}
	}
}

func TestSignLeavesOutUniqueKeyQueryForOldClients(t *testing.T) {
	fields := map[string]string{"AccessKey": "RocketMQ", "a": "pg", "b": "TopicTest", fieldUniqueKeyQuery: "true"}
	if got := base64.StdEncoding.EncodeToString(Sign(fields, []byte("hello"), "12345678", versionV4_9_3, false)); got != helloSignature {
		t.Fatalf("a V4_9_3 client's signature %s, want %s (without _UNIQUE_KEY_QUERY)", got, helloSignature)
	}
	if got := base64.StdEncoding.EncodeToString(Sign(fields, []byte("hello"), "12345678", versionV4_9_3+1, false)); got == helloSignature {
		t.Fatal("a newer client's _UNIQUE_KEY_QUERY was left out of the signed text")
	}
}

const sampleFile = `
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.{1,2}

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 87654321
    whiteRemoteAddress: 192.168.1.*
    admin: true
dataVersion:
  - counter: 3
    timestamp: 1700000000000
`

// signed returns the fields of a request signed with secret.
func signed(secret string, body []byte, fields map[string]string) map[string]string {
	fields[FieldSignature] = base64.StdEncoding.EncodeToString(Sign(fields, body, secret, 400, false))
	return fields
}

func TestCheck(t *testing.T) {
	cfg, err := Parse([]byte(sampleFile))
	if err != nil {
		t.Fatal(err)
	}
	client := netip.MustParseAddr("127.0.0.1")
	user := func(extra map[string]string) map[string]string {
		f := map[string]string{FieldAccessKey: "RocketMQ"}
		for k, v := range extra {
			f[k] = v
		}
		return signed("12345678", []byte("body"), f)
	}
	admin := signed("87654321", []byte("body"), map[string]string{FieldAccessKey: "rocketmq2"})
	for _, tc := range []struct {
		name   string
		code   int32
		remote string
		fields map[string]string
		res    []Resource
		want   string // "" allowed, else the refusal
	}{
		{"global white list, no fields", 10, "10.10.103.7", nil, []Resource{{"topicA", Pub}}, ""},
		{"global white list in braces", 10, "192.168.0.2", nil, nil, ""},
		{"outside the global white list", 10, "192.168.0.3", nil, nil, "No accessKey is configured"},
		{"unknown access key", 10, "127.0.0.1", map[string]string{FieldAccessKey: "nobody12"}, nil, "No acl config for nobody12"},
		{"bad signature", 10, "127.0.0.1", map[string]string{FieldAccessKey: "RocketMQ", FieldSignature: helloSignature}, nil,
			"Check signature failed for accessKey=RocketMQ"},
		{"signature not base64", 10, "127.0.0.1", map[string]string{FieldAccessKey: "RocketMQ", FieldSignature: "%%%"}, nil,
			"Check signature failed for accessKey=RocketMQ"},
		{"listed topic PUB|SUB", 10, "127.0.0.1", user(nil), []Resource{{"topicB", Pub}}, ""},
		{"listed topic SUB, send", 10, "127.0.0.1", user(nil), []Resource{{"topicC", Pub}}, "No permission for topic:topicC"},
		{"listed topic DENY", 11, "127.0.0.1", user(nil), []Resource{{"topicA", Sub}}, "No permission for topic:topicA"},
		{"default topic DENY", 11, "127.0.0.1", user(nil), []Resource{{"other", Sub}}, "No default permission for topic:other"},
		{"default group SUB", 11, "127.0.0.1", user(nil), []Resource{{"topicB", Sub}, GroupResource("any", Sub)}, ""},
		{"listed group DENY", 11, "127.0.0.1", user(nil), []Resource{{"topicB", Sub}, GroupResource("groupA", Sub)},
			"No permission for group:groupA"},
		{"a group's retry topic is the group", 11, "127.0.0.1", user(nil), []Resource{{"%RETRY%groupA", Sub}},
			"No permission for group:groupA"},
		{"ANY met by SUB", 11, "127.0.0.1", user(nil), []Resource{{"topicC", Any}}, ""},
		{"trace topic needs no permission", 10, "127.0.0.1", user(nil), []Resource{{TraceTopic, Pub}}, ""},
		{"admin code refused", 17, "127.0.0.1", user(nil), nil, "Need admin permission for request code=17, but accessKey=RocketMQ is not"},
		{"topic list creation is admin-only", 18, "127.0.0.1", user(nil), nil, "Need admin permission for request code=18, but accessKey=RocketMQ is not"},
		{"group list creation is admin-only", 225, "127.0.0.1", user(nil), nil, "Need admin permission for request code=225, but accessKey=RocketMQ is not"},
		{"offset reset is admin-only", 222, "127.0.0.1", user(nil), nil, "Need admin permission for request code=222, but accessKey=RocketMQ is not"},
		{"an ACL edit from the global white list needs a signature", 50, "10.10.103.7", nil, nil, "No accessKey is configured"},
		{"an ACL edit from an account's white list needs its signature", 53, "192.168.1.9",
			map[string]string{FieldAccessKey: "rocketmq2"}, nil, "Check signature failed for accessKey=rocketmq2"},
		{"an ACL edit by a signed admin", 51, "192.168.1.9", admin, nil, ""},
		{"request without resources", 34, "127.0.0.1", user(nil), nil, ""},
		{"admin may do anything", 17, "127.0.0.1", admin, []Resource{{"topicA", Pub}}, ""},
		{"account white list skips the signature", 10, "192.168.1.9", map[string]string{FieldAccessKey: "rocketmq2"}, nil, ""},
		{"IPv4-mapped IPv6 client", 10, "::ffff:10.10.103.1", nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remote := client
			if tc.remote != "" {
				remote = netip.MustParseAddr(tc.remote)
			}
			fields := tc.fields
			if fields == nil {
				fields = map[string]string{}
			}
			err := cfg.Check(&Request{Code: tc.code, Version: 400, Remote: remote, Fields: fields, Body: []byte("body"), Resources: tc.res})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("allowed, want %q", tc.want)
			case tc.want != "":
				var d *Denied
				if !errors.As(err, &d) || d.Reason != tc.want {
					t.Fatalf("refused with %q, want %q", err, tc.want)
				}
			}
		})
	}
}

func TestSecurityTokenSignedEitherWay(t *testing.T) {
	cfg, err := Parse([]byte(sampleFile))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("x")
	base := map[string]string{FieldAccessKey: "RocketMQ", FieldSecurityToken: "tok", "topic": "topicB"}
	java := Sign(base, body, "12345678", 400, false) // the token in the signed text
	goClient := Sign(base, body, "12345678", 400, true)
	wrong := Sign(base, body, "wrongsecret", 400, true)
	for name, sig := range map[string][]byte{"java": java, "go": goClient, "wrong secret": wrong} {
		f := map[string]string{FieldSignature: base64.StdEncoding.EncodeToString(sig)}
		for k, v := range base {
			f[k] = v
		}
		err := cfg.Check(&Request{Code: 10, Version: 400, Remote: netip.MustParseAddr("127.0.0.1"), Fields: f, Body: body})
		if (err == nil) != (name != "wrong secret") {
			t.Errorf("%s signature: %v", name, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "accessKey and secretKey must be longer than 6"},
		{"accounts:\n  - accessKey: RocketMQ\n    secretKey: 123456\n", "must be longer than 6"},
		{"accounts:\n  - {accessKey: RocketMQ, secretKey: 12345678}\n  - {accessKey: RocketMQ, secretKey: 12345679}\n", "listed twice"},
		{"accounts:\n  - {accessKey: RocketMQ, secretKey: 12345678, defaultTopicPerm: pub}\n", `defaultTopicPerm: permission "pub"`},
		{"accounts:\n  - {accessKey: RocketMQ, secretKey: 12345678, topicPerms: [topicA]}\n", `topicPerms: "topicA" is not name=PERM`},
		{"accounts:\n  - {accessKey: RocketMQ, secretKey: 12345678, groupPerms: [g=]}\n", `groupPerms: "g=" is not name=PERM`},
		{"accounts:\n  - {accessKey: RocketMQ, secretKey: 12345678, whiteRemoteAddress: 300.1.1.1}\n", "whiteRemoteAddress"},
		{"accounts:\n  - {accessKey: RocketMQ, secretKey: 12345678, topicPerm: [a=SUB]}\n", "topicPerm"},
		{"globalWhiteRemoteAddresses: [1.2.3]\n", "globalWhiteRemoteAddresses"},
		{"accounts: [", "parse ACL file"},
	} {
		_, err := Parse([]byte(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.file, err, tc.want)
		}
	}
	if cfg, err := Parse(nil); err != nil || len(cfg.Accounts) != 0 {
		t.Errorf("an empty file: %v %v", cfg, err)
	}
}

func TestAddressPatterns(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		in, out []string
	}{
		{"", nil, []string{"127.0.0.1", "::1"}},
		{"*", []string{"127.0.0.1", "::1"}, nil},
		{"*.*.*.*", []string{"8.8.8.8"}, nil},
		{"192.168.0.1", []string{"192.168.0.1", "::ffff:192.168.0.1"}, []string{"192.168.0.2"}},
		{"192.168.0.1, 10.0.0.1", []string{"192.168.0.1", "10.0.0.1"}, []string{"10.0.0.2"}},
		{"192.168.1.{1,3}", []string{"192.168.1.1", "192.168.1.3"}, []string{"192.168.1.2"}},
		{"192.168.*.*", []string{"192.168.0.0", "192.168.255.255"}, []string{"192.169.0.1", "::1"}},
		{"192.168.1.*", []string{"192.168.1.77"}, []string{"192.168.2.77"}},
		{"192.168.1-10.*", []string{"192.168.1.5", "192.168.10.255"}, []string{"192.168.0.5", "192.168.11.1"}},
		{"192.168.1.100-200", []string{"192.168.1.100", "192.168.1.200"}, []string{"192.168.1.99", "192.168.1.201"}},
		{"1050::5:600:300c:1", []string{"1050:0:0:0:5:600:300c:1"}, []string{"1050::5:600:300c:2"}},
		{"1050:0000:0000:0000:0005:0600:300c:*", []string{"1050::5:600:300c:ffff"}, []string{"1050::5:600:300d:1", "10.0.0.1"}},
		{"1050::5:600:a-f:*", []string{"1050::5:600:c:1"}, []string{"1050::5:600:10:1"}},
		{"1050::5:600:300c:{1,2}", []string{"1050::5:600:300c:2"}, []string{"1050::5:600:300c:3"}},
	} {
		p, err := ParseAddressPattern(tc.pattern)
		if err != nil {
			t.Errorf("%q: %v", tc.pattern, err)
			continue
		}
		for _, a := range tc.in {
			if !p.Match(netip.MustParseAddr(a)) {
				t.Errorf("%q does not admit %s", tc.pattern, a)
			}
		}
		for _, a := range tc.out {
			if p.Match(netip.MustParseAddr(a)) {
				t.Errorf("%q admits %s", tc.pattern, a)
			}
		}
		if p.Match(netip.Addr{}) && tc.pattern != "*" && tc.pattern != "*.*.*.*" {
			t.Errorf("%q admits an unknown address", tc.pattern)
		}
	}
	for _, bad := range []string{"*.1.1.1", "1.*.1.1.1", "1.2.*.4", "1.2.3.300-400", "1.2.3.9-2", "1.2.3.{", "a.b.c.d", "1.2.3.4,x", "1.2.3.{1,x}", "1::2::*", "fe80::1%eth0"} {
		if _, err := ParseAddressPattern(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestGuardReloadsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("accounts:\n  - {accessKey: RocketMQ, secretKey: 12345678, defaultTopicPerm: DENY}\n")
	if _, err := Open(filepath.Join(t.TempDir(), "missing.yml"), zerolog.Nop()); err == nil {
		t.Fatal("a missing file opened")
	}
	g, err := Open(path, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	req := func() *Request {
		return &Request{Code: 10, Version: 400, Remote: netip.MustParseAddr("127.0.0.1"),
			Fields: signed("12345678", nil, map[string]string{FieldAccessKey: "RocketMQ"}), Resources: []Resource{{"T", Pub}}}
	}
	if err := g.Check(req()); err == nil {
		t.Fatal("DENY allowed a send")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx, 5*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	waitAllowed := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for (g.Check(req()) == nil) != want {
			if time.Now().After(deadline) {
				t.Fatalf("the edit never took effect (want allowed=%v)", want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	write("accounts:\n  - {accessKey: RocketMQ, secretKey: 12345678, defaultTopicPerm: PUB}\n")
	waitAllowed(true)
	// A broken edit keeps the accounts in force.
	write("accounts:\n  - {accessKey: RocketMQ, secretKey: 123}\n")
	if _, err := g.Reload(); err == nil {
		t.Fatal("a broken file reloaded")
	}
	if err := g.Check(req()); err != nil {
		t.Fatalf("after a broken edit: %v", err)
	}
	write("accounts:\n  - {accessKey: RocketMQ, secretKey: 12345678, topicPerms: [T=SUB], defaultTopicPerm: PUB}\n")
	waitAllowed(false)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(sampleFile))
	f.Add([]byte("accounts:\n  - {accessKey: RocketMQ, secretKey: 12345678, topicPerms: [a=PUB|SUB]}\n"))
	f.Add([]byte("globalWhiteRemoteAddresses: ['1050::5:600:a-f:*', '1.2.3.{4,5}']\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			return
		}
		for _, a := range cfg.Accounts {
			if len(a.AccessKey) <= minKeyLength || len(a.SecretKey) <= minKeyLength {
				t.Fatalf("account %q parsed with a short key", a.AccessKey)
			}
		}
		_ = cfg.Check(&Request{Remote: netip.MustParseAddr("::1"), Fields: map[string]string{FieldAccessKey: "RocketMQ"}})
	})
}

// FuzzAddressPattern: any pattern either fails to parse or matches
// without panicking; and against patterns built from the fuzzer's numbers
// Match agrees with the documented semantics: one address admits only
// itself, a list only its members, and a part given as a range lo-hi (or
// *) followed by wildcards admits the IPv4 addresses that equal the
// earlier parts and whose part there lies in [lo, hi].
func FuzzAddressPattern(f *testing.F) {
	for _, s := range []string{"*", "192.168.1-10.*", "1.2.3.{4,5}", "1050::5:600:a-f:*", "1.2.3.4,::1"} {
		f.Add(s, "192.168.5.1", uint32(0xc0a80501), uint32(0xc0a80a01), uint8(5), uint8(10), uint8(2))
	}
	f.Add("", "::ffff:1.2.3.4", uint32(0x01020304), uint32(0x01020304), uint8(0), uint8(255), uint8(1))
	f.Fuzz(func(t *testing.T, pattern, addr string, x, y uint32, lo, hi, at uint8) {
		if p, err := ParseAddressPattern(pattern); err == nil {
			a, err := netip.ParseAddr(addr)
			if err != nil {
				a = netip.Addr{}
			}
			_ = p.Match(a)
		}
		ax, ay := netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)}), netip.AddrFrom4([4]byte{byte(y >> 24), byte(y >> 16), byte(y >> 8), byte(y)})
		for _, a := range []netip.Addr{ax, netip.AddrFrom16(ax.As16()), netip.AddrFrom16([16]byte{0x20, 0x01, 15: byte(x)})} {
			one, err := ParseAddressPattern(a.String())
			if err != nil || !one.Match(a) || one.Match(ay) != (ay == a.Unmap()) {
				t.Fatalf("pattern %q: matches itself %v, %s %v (%v)", a, err == nil && one.Match(a), ay, one.Match(ay), err)
			}
		}
		list, err := ParseAddressPattern(ax.String() + "," + ay.String())
		if err != nil || !list.Match(ax) || !list.Match(ay) || list.Match(netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x) ^ 1})) != (x^1 == y) {
			t.Fatalf("list %s,%s: %v", ax, ay, err)
		}
		// A range (or *) at part 1, 2 or 3 of an IPv4 pattern.
		i := 1 + int(at)%3
		octets := ax.As4()
		parts := make([]string, 4)
		for j := range 4 {
			switch {
			case j < i:
				parts[j] = strconv.Itoa(int(octets[j]))
			case j == i && lo == 0 && hi == 255 && at%2 == 0:
				parts[j] = "*"
			case j == i:
				parts[j] = fmt.Sprintf("%d-%d", lo, hi)
			default:
				parts[j] = "*"
			}
		}
		text := strings.Join(parts, ".")
		rp, err := ParseAddressPattern(text)
		if lo > hi {
			if err == nil {
				t.Fatalf("pattern %q parsed with its range upside down", text)
			}
			return
		}
		if err != nil {
			t.Fatalf("pattern %q: %v", text, err)
		}
		oy := ay.As4()
		want := oy[i] >= lo && oy[i] <= hi
		for j := range i {
			want = want && oy[j] == octets[j]
		}
		if rp.Match(ay) != want || rp.Match(netip.AddrFrom16(ay.As16())) != want {
			t.Fatalf("pattern %q matches %s: %v, want %v", text, ay, rp.Match(ay), want)
		}
	})
}

// The watcher puts an edit in force only once two reads agree: a file
// caught while being written (here: emptied, as a truncating editor
// leaves it for a moment) does not lock everybody out.
func TestWatcherWaitsForTheFileToSettle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(path, []byte("accounts:\n  - {accessKey: RocketMQ, secretKey: 12345678}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := Open(path, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("accounts: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := g.reload(true); changed || err != nil || len(g.cur.Load().Accounts) != 1 {
		t.Fatalf("the first look at a changed file put it in force: %v %v", changed, err)
	}
	if changed, err := g.reload(true); !changed || err != nil || len(g.cur.Load().Accounts) != 0 {
		t.Fatalf("the second look at the same bytes: %v %v", changed, err)
	}
}

// The watcher never puts an empty file in force: a file an editor has
// truncated to rewrite is empty, and were the rewrite then not to parse,
// "no accounts" would stay in force. An administrator's Reload takes it.
func TestGuardWatcherSkipsAnEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(path, []byte("accounts:\n  - {accessKey: RocketMQ, secretKey: 12345678, defaultTopicPerm: PUB}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := Open(path, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	req := &Request{Code: 10, Version: 400, Remote: netip.MustParseAddr("127.0.0.1"),
		Fields: signed("12345678", nil, map[string]string{FieldAccessKey: "RocketMQ"}), Resources: []Resource{{"T", Pub}}}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 3 { // three watcher passes: each read finds the same empty file
		if _, err := g.reload(true); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Check(req); err != nil {
		t.Fatalf("the watcher put an empty file in force: %v", err)
	}
	if changed, err := g.Reload(); err != nil || !changed {
		t.Fatalf("Reload of the empty file: changed %v, %v", changed, err)
	}
	if err := g.Check(req); err == nil {
		t.Fatal("a send allowed with no accounts after Reload of the empty file")
	}
}
