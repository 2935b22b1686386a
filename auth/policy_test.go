package auth

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/meta"
)

func entry(res, actions, ips, decision string) meta.PolicyEntryInfo {
	e := meta.PolicyEntryInfo{Resource: res, Actions: strings.Split(actions, ","), Decision: decision}
	if ips != "" {
		e.SourceIps = strings.Split(ips, ",")
	}
	return e
}

func TestParseResource(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Resource
		key  string
	}{
		{"*", Resource{Type: TypeAny, Pattern: PatternAny}, "*"},
		{"Topic:*", Resource{Type: TypeTopic, Pattern: PatternAny}, "Topic:*"},
		{"topic:orders", Resource{Type: TypeTopic, Name: "orders", Pattern: PatternLiteral}, "Topic:orders"},
		{"Group:g-*", Resource{Type: TypeGroup, Name: "g-", Pattern: PatternPrefixed}, "Group:g-*"},
		// As RocketMQ's Resource.of: the prefix before the first '*' of
		// a name ending in one; an empty prefix is every name.
		{"Topic:ab*c*", Resource{Type: TypeTopic, Name: "ab", Pattern: PatternPrefixed}, "Topic:ab*"},
		{"Topic:*secret*", Resource{Type: TypeTopic, Pattern: PatternAny}, "Topic:*"},
		{"Cluster:DefaultCluster", Resource{Type: TypeCluster, Name: "DefaultCluster", Pattern: PatternLiteral}, "Cluster:DefaultCluster"},
		{"Namespace:ns", Resource{Type: TypeNamespace, Name: "ns", Pattern: PatternLiteral}, "Namespace:ns"},
	} {
		got, err := ParseResource(c.in)
		if err != nil || got != c.want || got.Key() != c.key {
			t.Errorf("ParseResource(%q) = %+v %v, key %q; want %+v %q", c.in, got, err, got.Key(), c.want, c.key)
		}
	}
	for _, bad := range []string{"", " ", "Queue:q", "orders", "Topic:", "Any:x"} {
		if r, err := ParseResource(bad); err == nil {
			t.Errorf("ParseResource(%q) = %+v, want an error", bad, r)
		}
	}
	if g := Group("%RETRY%cg"); g.Name != "cg" || g.Type != TypeGroup {
		t.Errorf("a retry topic names its group: %+v", g)
	}
	if g := Group("%DLQ%cg"); g.Name != "cg" {
		t.Errorf("a DLQ topic names its group: %+v", g)
	}
}

func TestDecide(t *testing.T) {
	lan := netip.MustParseAddr("192.168.0.7")
	wan := netip.MustParseAddr("8.8.8.8")
	for _, c := range []struct {
		name     string
		custom   []meta.PolicyEntryInfo
		defaults []meta.PolicyEntryInfo
		need     Need
		from     netip.Addr
		refusal  string // "" when allowed
	}{
		{"exact allow", []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "", "Allow")}, nil,
			Need{Topic("t"), []Action{ActionPub}}, lan, ""},
		{"exact, other action", []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "", "Allow")}, nil,
			Need{Topic("t"), []Action{ActionSub}}, lan, "no matched policies."},
		{"one of the needed actions is enough", []meta.PolicyEntryInfo{entry("Topic:t", "Get", "", "Allow")}, nil,
			Need{Topic("t"), []Action{ActionSub, ActionGet}}, lan, ""},
		{"All covers every action", []meta.PolicyEntryInfo{entry("Topic:t", "All", "", "Allow")}, nil,
			Need{Topic("t"), []Action{ActionDelete}}, lan, ""},
		{"exact, other topic", []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "", "Allow")}, nil,
			Need{Topic("t2"), []Action{ActionPub}}, lan, "no matched policies."},
		{"prefix", []meta.PolicyEntryInfo{entry("Topic:order*", "Pub", "", "Allow")}, nil,
			Need{Topic("orders"), []Action{ActionPub}}, lan, ""},
		{"prefix, no match", []meta.PolicyEntryInfo{entry("Topic:order*", "Pub", "", "Allow")}, nil,
			Need{Topic("ord"), []Action{ActionPub}}, lan, "no matched policies."},
		{"type any", []meta.PolicyEntryInfo{entry("Topic:*", "Pub", "", "Allow")}, nil,
			Need{Topic("x"), []Action{ActionPub}}, lan, ""},
		{"type any does not cover groups", []meta.PolicyEntryInfo{entry("Topic:*", "Sub", "", "Allow")}, nil,
			Need{Group("g"), []Action{ActionSub}}, lan, "no matched policies."},
		{"star covers everything", []meta.PolicyEntryInfo{entry("*", "Sub", "", "Allow")}, nil,
			Need{Group("g"), []Action{ActionSub}}, lan, ""},
		{"deny on the same resource wins", []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "", "Allow"), entry("Topic:t", "Pub", "", "Deny")}, nil,
			Need{Topic("t"), []Action{ActionPub}}, lan, "the decision is deny."},
		{"deny of a wider pattern, allow of the literal", []meta.PolicyEntryInfo{entry("Topic:*", "All", "", "Deny"), entry("Topic:t", "Pub", "", "Allow")}, nil,
			Need{Topic("t"), []Action{ActionPub}}, lan, ""},
		{"literal deny beats a prefix allow", []meta.PolicyEntryInfo{entry("Topic:te*", "Pub", "", "Allow"), entry("Topic:test_001", "Pub", "", "Deny")}, nil,
			Need{Topic("test_001"), []Action{ActionPub}}, lan, "the decision is deny."},
		{"longer prefix decides", []meta.PolicyEntryInfo{entry("Topic:test*", "Pub", "", "Allow"), entry("Topic:test_*", "Pub", "", "Deny")}, nil,
			Need{Topic("test_002"), []Action{ActionPub}}, lan, "the decision is deny."},
		{"longer prefix allows", []meta.PolicyEntryInfo{entry("Topic:test*", "Pub", "", "Deny"), entry("Topic:test_*", "Pub", "", "Allow")}, nil,
			Need{Topic("test_002"), []Action{ActionPub}}, lan, ""},
		{"prefix beats star", []meta.PolicyEntryInfo{entry("*", "All", "", "Deny"), entry("Topic:t*", "Pub", "", "Allow")}, nil,
			Need{Topic("t1"), []Action{ActionPub}}, lan, ""},
		{"source ip inside the block", []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "192.168.0.0/24", "Allow")}, nil,
			Need{Topic("t"), []Action{ActionPub}}, lan, ""},
		{"source ip outside the block", []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "192.168.0.0/24", "Allow")}, nil,
			Need{Topic("t"), []Action{ActionPub}}, wan, "no matched policies."},
		{"single source ip", []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "10.0.0.1,192.168.0.7", "Allow")}, nil,
			Need{Topic("t"), []Action{ActionPub}}, lan, ""},
		{"deny from one block only", []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "", "Allow"), entry("Topic:t", "Pub", "8.8.0.0/16", "Deny")}, nil,
			Need{Topic("t"), []Action{ActionPub}}, lan, ""},
		{"deny from that block", []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "", "Allow"), entry("Topic:t", "Pub", "8.8.0.0/16", "Deny")}, nil,
			Need{Topic("t"), []Action{ActionPub}}, wan, "the decision is deny."},
		{"default when no custom entry matches", []meta.PolicyEntryInfo{entry("Topic:a", "Pub", "", "Allow")}, []meta.PolicyEntryInfo{entry("Topic:*", "Pub", "", "Allow")},
			Need{Topic("b"), []Action{ActionPub}}, lan, ""},
		{"custom over default", []meta.PolicyEntryInfo{entry("Topic:*", "Pub", "", "Deny")}, []meta.PolicyEntryInfo{entry("Topic:b", "Pub", "", "Allow")},
			Need{Topic("b"), []Action{ActionPub}}, lan, "the decision is deny."},
		{"default deny", nil, []meta.PolicyEntryInfo{entry("Group:*", "All", "", "Deny")},
			Need{Group("g"), []Action{ActionSub}}, lan, "the decision is deny."},
		{"nothing", nil, nil, Need{Topic("t"), []Action{ActionPub}}, lan, "no matched policies."},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := meta.AclInfo{Subject: "User:u"}
			if c.custom != nil {
				a.Policies = append(a.Policies, meta.PolicyInfo{PolicyType: "Custom", Entries: c.custom})
			}
			if c.defaults != nil {
				a.Policies = append(a.Policies, meta.PolicyInfo{PolicyType: "Default", Entries: c.defaults})
			}
			var compiled *ACL
			if len(a.Policies) > 0 {
				var err error
				if compiled, err = Compile(a); err != nil {
					t.Fatal(err)
				}
			} else {
				compiled = &ACL{Subject: "User:u"}
			}
			err := compiled.Decide(c.need, c.from)
			if c.refusal == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var d *Denied
			want := "User:u has no permission to access " + c.need.Resource.Key() + " from " + c.from.String() + ", " + c.refusal
			if !errors.As(err, &d) || d.Reason != want {
				t.Fatalf("got %v, want %q", err, want)
			}
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	ok := entry("Topic:t", "Pub", "", "Allow")
	for _, c := range []struct {
		name string
		acl  meta.AclInfo
		want string
	}{
		{"subject", meta.AclInfo{Subject: "Role:x", Policies: []meta.PolicyInfo{{Entries: []meta.PolicyEntryInfo{ok}}}}, "not User:"},
		{"no policy", meta.AclInfo{Subject: "User:u"}, "the policies is empty"},
		{"no entry", meta.AclInfo{Subject: "User:u", Policies: []meta.PolicyInfo{{}}}, "the policy entries is empty"},
		{"policy type", meta.AclInfo{Subject: "User:u", Policies: []meta.PolicyInfo{{PolicyType: "Other", Entries: []meta.PolicyEntryInfo{ok}}}}, "policy type"},
		{"action Any", meta.AclInfo{Subject: "User:u", Policies: []meta.PolicyInfo{{Entries: []meta.PolicyEntryInfo{entry("Topic:t", "Any", "", "Allow")}}}}, "can not be Any"},
		{"unknown action", meta.AclInfo{Subject: "User:u", Policies: []meta.PolicyInfo{{Entries: []meta.PolicyEntryInfo{entry("Topic:t", "Write", "", "Allow")}}}}, "action"},
		{"no action", meta.AclInfo{Subject: "User:u", Policies: []meta.PolicyInfo{{Entries: []meta.PolicyEntryInfo{{Resource: "Topic:t", Decision: "Allow"}}}}}, "the actions is empty"},
		{"source ip", meta.AclInfo{Subject: "User:u", Policies: []meta.PolicyInfo{{Entries: []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "10.0.0.300", "Allow")}}}}, "source ip"},
		{"decision", meta.AclInfo{Subject: "User:u", Policies: []meta.PolicyInfo{{Entries: []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "", "Maybe")}}}}, "decision"},
		{"resource", meta.AclInfo{Subject: "User:u", Policies: []meta.PolicyInfo{{Entries: []meta.PolicyEntryInfo{entry("Queue:t", "Pub", "", "Allow")}}}}, "type"},
	} {
		if _, err := Compile(c.acl); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

func FuzzCompile(f *testing.F) {
	f.Add("User:u", "Custom", "Topic:t*", "Pub,Sub", "10.0.0.0/8", "Allow", "t1", "10.1.2.3")
	f.Add("User:u", "Default", "*", "All", "::1", "Deny", "x", "::1")
	f.Add("user:", "", "Group:*", "Any", "", "", "", "")
	f.Fuzz(func(t *testing.T, subject, typ, res, actions, ips, decision, topic, from string) {
		e := meta.PolicyEntryInfo{Resource: res, Actions: strings.Split(actions, ","), Decision: decision}
		if ips != "" {
			e.SourceIps = strings.Split(ips, ",")
		}
		a, err := Compile(meta.AclInfo{Subject: subject, Policies: []meta.PolicyInfo{{PolicyType: typ, Entries: []meta.PolicyEntryInfo{e}}}})
		if err != nil {
			return
		}
		r, err := ParseResource(res)
		if err != nil {
			t.Fatalf("compiled with a resource that does not parse: %v", err)
		}
		if again, err := ParseResource(r.Key()); err != nil || again != r {
			t.Fatalf("resource %q: key %q reads back as %+v %v", res, r.Key(), again, err)
		}
		addr, _ := netip.ParseAddr(from)
		_ = a.Decide(Need{Topic(topic), []Action{ActionPub}}, addr)
		_ = a.Decide(Need{Group(topic), []Action{ActionAny}}, addr)
	})
}

// FuzzACLBody reads arbitrary AUTH_CREATE_ACL bodies as the broker does:
// an access list that compiles merges into another, loses an entry and is
// filtered without a panic, and what the merge writes compiles again.
func FuzzACLBody(f *testing.F) {
	f.Add([]byte(`{"subject":"User:u","policies":[{"policyType":"Custom","entries":[{"resource":"Topic:t*","actions":["Pub","Sub"],"sourceIps":["10.0.0.0/8","::1"],"decision":"Allow"}]},{"policyType":"Default","entries":[{"resource":"*","actions":["All"],"decision":"Deny"}]}]}`), "Topic:t*")
	f.Add([]byte(`{"subject":"user:u","policies":[{"entries":[{"resource":"group:g","actions":["sub"],"decision":"deny"}]}]}`), "Group:g")
	f.Add([]byte(`{"policies":null}`), "")
	f.Fuzz(func(t *testing.T, body []byte, resource string) {
		var a meta.AclInfo
		if json.Unmarshal(body, &a) != nil {
			return
		}
		if _, err := Compile(a); err != nil {
			return
		}
		merged, err := MergeACL(&a, a)
		if err != nil {
			t.Fatalf("merge of a compiled list: %v", err)
		}
		if _, err := Compile(merged); err != nil {
			t.Fatalf("the merge of a compiled list does not compile: %v\n%+v", err, merged)
		}
		if r, err := ParseResource(resource); err == nil {
			_, _ = DeleteFromACL(merged, Custom, r)
		}
		_, _ = FilterACL(merged, resource)
	})
}

// TestSourceIPMapped: a client's address is compared unmapped, so an
// IPv4-mapped source, address or block, must admit the IPv4 client.
func TestSourceIPMapped(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"10.0.0.1", "10.0.0.1/32"},
		{"::ffff:10.0.0.1", "10.0.0.1/32"},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8"},
		{"::ffff:10.1.2.3/128", "10.1.2.3/32"},
		{"10.1.2.3/8", "10.0.0.0/8"},
		{"fe80::1/64", "fe80::/64"},
	} {
		p, err := ParseSourceIP(c.src)
		if err != nil || p.String() != c.want {
			t.Errorf("%s: got %s %v, want %s", c.src, p, err, c.want)
		}
	}
	e := Entry{Resource: Topic("t"), Actions: []Action{ActionPub}, Decision: Allow,
		Sources: []netip.Prefix{mustSource(t, "::ffff:10.0.0.0/104")}}
	for _, from := range []string{"10.9.9.9", "::ffff:10.9.9.9"} {
		if !e.matches(Need{Topic("t"), []Action{ActionPub}}, netip.MustParseAddr(from)) {
			t.Errorf("::ffff:10.0.0.0/104 does not admit %s", from)
		}
	}
}

func mustSource(t *testing.T, s string) netip.Prefix {
	t.Helper()
	p, err := ParseSourceIP(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
