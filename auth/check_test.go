package auth

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/meta"
)

type memStore struct {
	users map[string]meta.UserInfo
	acls  map[string]meta.AclInfo
}

func (m memStore) User(n string) (meta.UserInfo, bool, error) { u, ok := m.users[n]; return u, ok, nil }
func (m memStore) ACL(s string) (meta.AclInfo, bool, error)   { a, ok := m.acls[s]; return a, ok, nil }

func signed(user, password string, code int32, needs ...Need) *Request {
	f := map[string]string{"topic": "t"}
	if user != "" {
		f = acl.SignedFields(f, []byte("body"), 400, user, password)
	}
	return &Request{Code: code, Version: 400, Remote: netip.MustParseAddr("127.0.0.1"), Fields: f, Body: []byte("body"), Needs: needs}
}

func TestCheck(t *testing.T) {
	store := memStore{
		users: map[string]meta.UserInfo{
			"alice": {Username: "alice", Password: "alice-pw", UserType: UserNormal, UserStatus: UserEnable},
			"root":  {Username: "root", Password: "root-pw", UserType: UserSuper, UserStatus: UserEnable},
			"off":   {Username: "off", Password: "off-pw", UserType: UserSuper, UserStatus: UserDisable},
		},
		acls: map[string]meta.AclInfo{"User:alice": {Subject: "User:alice", Policies: []meta.PolicyInfo{{PolicyType: "Custom",
			Entries: []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "", "Allow")}}}}},
	}
	both := Config{Authentication: true, Authorization: true,
		AuthenticationWhitelist: map[int32]bool{105: true}, AuthorizationWhitelist: map[int32]bool{11: true}}
	pub := Need{Topic("t"), []Action{ActionPub}}
	sub := Need{Topic("t"), []Action{ActionSub}}
	tampered := signed("alice", "alice-pw", 10, pub)
	tampered.Body = []byte("other")
	for _, c := range []struct {
		name string
		cfg  Config
		req  *Request
		want string
	}{
		{"allowed", both, signed("alice", "alice-pw", 10, pub), ""},
		{"no access key", both, signed("", "", 10, pub), "username cannot be null."},
		{"unknown user", both, signed("bob", "x", 10, pub), "User:bob is not found."},
		{"wrong password", both, signed("alice", "guess", 10, pub), "check signature failed."},
		{"tampered body", both, tampered, "check signature failed."},
		{"disabled user", both, signed("off", "off-pw", 10, pub), "User:off is disabled."},
		{"no policy", both, signed("alice", "alice-pw", 11, sub), ""}, // 11 is authorization-whitelisted
		{"not allowed", both, signed("alice", "alice-pw", 10, sub), "User:alice has no permission to access Topic:t from 127.0.0.1, no matched policies."},
		{"super user", both, signed("root", "root-pw", 10, sub, Need{Cluster("c"), []Action{ActionUpdate}}), ""},
		{"authentication whitelist", both, signed("", "", 105), ""},
		{"needs nothing", both, signed("alice", "alice-pw", 26), ""},
		{"authorization only: unsigned", Config{Authorization: true}, signed("", "", 10, pub), "Authorization failed. Please verify your access rights and try again."},
		{"authorization only: unknown", Config{Authorization: true}, signed("bob", "x", 10, pub), "User:bob not found."},
		{"authorization only: bad signature passes", Config{Authorization: true}, signed("alice", "guess", 10, pub), ""},
		{"authentication only", Config{Authentication: true}, signed("alice", "alice-pw", 10, sub), ""},
		{"off", Config{}, signed("", "", 10, pub), ""},
	} {
		err := NewChecker(c.cfg, store).Check(c.req)
		var d *Denied
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (!errors.As(err, &d) || d.Reason != c.want):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

func TestUsers(t *testing.T) {
	u, err := NewUser(meta.UserInfo{Username: "a", Password: "p", UserType: "super"})
	if err != nil || u.UserType != UserSuper || u.UserStatus != UserEnable {
		t.Fatalf("NewUser: %+v %v", u, err)
	}
	for _, bad := range []meta.UserInfo{{Password: "p"}, {Username: "a"}, {Username: "a", Password: "p", UserType: "Admin"},
		{Username: "a", Password: "p", UserStatus: "locked"}} {
		if _, err := NewUser(bad); err == nil {
			t.Errorf("NewUser(%+v) accepted", bad)
		}
	}
	up, err := UpdateUser(u, meta.UserInfo{UserStatus: "DISABLE"})
	if err != nil || up.Password != "p" || up.UserStatus != UserDisable || up.UserType != UserSuper {
		t.Fatalf("UpdateUser: %+v %v", up, err)
	}
	if !IsDisabled(up) || !IsSuper(up) {
		t.Fatal("IsDisabled/IsSuper")
	}
}

func TestMergeAndDelete(t *testing.T) {
	old := meta.AclInfo{Subject: "User:u", Policies: []meta.PolicyInfo{{PolicyType: "Custom",
		Entries: []meta.PolicyEntryInfo{entry("Topic:a", "Pub", "", "Allow"), entry("Topic:b", "Sub", "", "Allow")}}}}
	upd := meta.AclInfo{Subject: "User:u", Policies: []meta.PolicyInfo{
		{Entries: []meta.PolicyEntryInfo{entry("topic:b", "Pub", "10.0.0.1", "Deny"), entry("Group:g", "Sub", "", "Allow")}},
		{PolicyType: "default", Entries: []meta.PolicyEntryInfo{entry("Topic:*", "All", "", "Deny")}}}}
	got, err := MergeACL(&old, upd)
	if err != nil {
		t.Fatal(err)
	}
	c := got.Policies[0]
	if len(got.Policies) != 2 || c.PolicyType != "Custom" || len(c.Entries) != 3 ||
		c.Entries[1].Resource != "Topic:b" || c.Entries[1].Decision != "Deny" || c.Entries[2].Resource != "Group:g" ||
		got.Policies[1].PolicyType != "Default" {
		t.Fatalf("merged %+v", got)
	}
	if old.Policies[0].Entries[1].Decision != "Allow" {
		t.Fatal("MergeACL changed its input")
	}
	d, empty := DeleteFromACL(got, Custom, Topic("b"))
	if empty || len(d.Policies[0].Entries) != 2 {
		t.Fatalf("after one delete %+v", d)
	}
	d, empty = DeleteFromACL(d, Default, Resource{Type: TypeTopic, Pattern: PatternAny})
	if empty || len(d.Policies) != 1 {
		t.Fatalf("the emptied policy stays: %+v", d)
	}
	f, ok := FilterACL(got, "Group")
	if !ok || len(f.Policies) != 1 || len(f.Policies[0].Entries) != 1 {
		t.Fatalf("filter: %+v", f)
	}
	if _, ok := FilterACL(got, "nothing"); ok {
		t.Fatal("a filter that matches nothing kept the list")
	}
}

func TestFromV1(t *testing.T) {
	cfg, err := acl.Parse([]byte(`accounts:
  - accessKey: adminKey1
    secretKey: admin-secret
    admin: true
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    topicPerms: [orders=PUB, audit=PUB|SUB, secret=DENY]
    groupPerms: [cg=SUB]
`))
	if err != nil {
		t.Fatal(err)
	}
	got := FromV1(cfg)
	if len(got) != 2 {
		t.Fatalf("%d migrated", len(got))
	}
	if got[0].User != (meta.UserInfo{Username: "adminKey1", Password: "admin-secret", UserType: UserSuper, UserStatus: UserEnable}) || got[0].ACL != nil {
		t.Fatalf("admin %+v %+v", got[0].User, got[0].ACL)
	}
	p := got[1]
	if p.User.UserType != UserNormal || p.ACL == nil || p.ACL.Subject != "User:producer1" || len(p.ACL.Policies) != 2 {
		t.Fatalf("producer %+v %+v", p.User, p.ACL)
	}
	var rows []string
	for _, pol := range p.ACL.Policies {
		for _, e := range pol.Entries {
			rows = append(rows, pol.PolicyType+" "+e.Resource+" "+strings.Join(e.Actions, ",")+" "+e.Decision)
		}
	}
	want := "Custom Group:cg Sub Allow|Custom Topic:audit Pub,Sub Allow|Custom Topic:orders Pub Allow|Custom Topic:secret All Deny|Default Topic:* All Deny"
	if strings.Join(rows, "|") != want {
		t.Fatalf("entries\n%s\nwant\n%s", strings.Join(rows, "|"), want)
	}
	if _, err := Compile(*p.ACL); err != nil {
		t.Fatalf("the migrated list does not compile: %v", err)
	}
}

// countingStore counts the reads of a memStore and fails them with err
// when it is set.
type countingStore struct {
	memStore
	users, acls int
	err         error
}

func (c *countingStore) User(n string) (meta.UserInfo, bool, error) {
	c.users++
	if c.err != nil {
		return meta.UserInfo{}, false, c.err
	}
	return c.memStore.User(n)
}

func (c *countingStore) ACL(s string) (meta.AclInfo, bool, error) {
	c.acls++
	if c.err != nil {
		return meta.AclInfo{}, false, c.err
	}
	return c.memStore.ACL(s)
}

// TestCheckReadsOnce: with both checks on, a request reads its signer
// once and its access list once; a store that fails, or an access list
// stored broken, is an error that is not a refusal.
func TestCheckReadsOnce(t *testing.T) {
	mem := memStore{
		users: map[string]meta.UserInfo{"alice": {Username: "alice", Password: "alice-pw", UserType: UserNormal, UserStatus: UserEnable}},
		acls: map[string]meta.AclInfo{"User:alice": {Subject: "User:alice", Policies: []meta.PolicyInfo{{PolicyType: "Custom",
			Entries: []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "", "Allow")}}}}},
	}
	both := Config{Authentication: true, Authorization: true}
	pub := Need{Topic("t"), []Action{ActionPub}}
	store := &countingStore{memStore: mem}
	if err := NewChecker(both, store).Check(signed("alice", "alice-pw", 10, pub)); err != nil {
		t.Fatal(err)
	}
	if store.users != 1 || store.acls != 1 {
		t.Errorf("read the user %d times and the access list %d times, want once each", store.users, store.acls)
	}
	store = &countingStore{memStore: mem}
	if err := NewChecker(Config{}, store).Check(signed("alice", "alice-pw", 10, pub)); err != nil || store.users+store.acls != 0 {
		t.Errorf("checks off: err %v, %d reads, want none", err, store.users+store.acls)
	}

	var d *Denied
	store = &countingStore{memStore: mem, err: errors.New("disk on fire")}
	for _, cfg := range []Config{both, {Authorization: true}} {
		err := NewChecker(cfg, store).Check(signed("alice", "alice-pw", 10, pub))
		if err == nil || errors.As(err, &d) || !strings.Contains(err.Error(), "disk on fire") {
			t.Errorf("%+v, store failing: got %v, want the store's error", cfg, err)
		}
	}
	broken := memStore{users: mem.users, acls: map[string]meta.AclInfo{"User:alice": {Subject: "User:alice"}}}
	err := NewChecker(both, broken).Check(signed("alice", "alice-pw", 10, pub))
	if err == nil || errors.As(err, &d) || !strings.Contains(err.Error(), "the stored access list of User:alice") {
		t.Errorf("broken access list: got %v, want an error that is not a refusal", err)
	}
}

// TestCompiledACLFollowsStore: the checker keeps compiled access lists,
// yet an access list edited in the store decides the next request.
func TestCompiledACLFollowsStore(t *testing.T) {
	mem := memStore{
		users: map[string]meta.UserInfo{"alice": {Username: "alice", Password: "pw", UserType: UserNormal, UserStatus: UserEnable}},
		acls: map[string]meta.AclInfo{"User:alice": {Subject: "User:alice", Policies: []meta.PolicyInfo{{PolicyType: "Custom",
			Entries: []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "", "Allow")}}}}},
	}
	c := NewChecker(Config{Authorization: true, CompiledACLs: 1}, mem)
	pub := Need{Topic("t"), []Action{ActionPub}}
	for i := 0; i < 2; i++ {
		if err := c.Check(signed("alice", "pw", 10, pub)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	// An edit in place of a slice the checker saw, then a new list.
	mem.acls["User:alice"].Policies[0].Entries[0].Decision = "Deny"
	if err := c.Check(signed("alice", "pw", 10, pub)); err == nil {
		t.Fatal("allowed after the entry became Deny")
	}
	mem.acls["User:alice"] = meta.AclInfo{Subject: "User:alice", Policies: []meta.PolicyInfo{{PolicyType: "Custom",
		Entries: []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "10.0.0.0/8", "Allow")}}}}
	if err := c.Check(signed("alice", "pw", 10, pub)); err == nil {
		t.Fatal("allowed from 127.0.0.1 after the entry was limited to 10.0.0.0/8")
	}
	delete(mem.acls, "User:alice")
	if err := c.Check(signed("alice", "pw", 10, pub)); err == nil {
		t.Fatal("allowed after the access list was deleted")
	}
}

// TestSameACLCoversEveryField: sameACL compares the fields of AclInfo,
// PolicyInfo and PolicyEntryInfo by name; a new field must be added to it.
func TestSameACLCoversEveryField(t *testing.T) {
	for _, c := range []struct {
		v    any
		want int
	}{{meta.AclInfo{}, 2}, {meta.PolicyInfo{}, 2}, {meta.PolicyEntryInfo{}, 4}} {
		if n := reflect.TypeOf(c.v).NumField(); n != c.want {
			t.Errorf("%T has %d fields, sameACL compares %d", c.v, n, c.want)
		}
	}
	base := meta.AclInfo{Subject: "User:a", Policies: []meta.PolicyInfo{{PolicyType: "Custom",
		Entries: []meta.PolicyEntryInfo{entry("Topic:t", "Pub", "10.0.0.0/8", "Allow")}}}}
	if !sameACL(base, cloneACL(base)) {
		t.Error("a clone differs")
	}
	for name, edit := range map[string]func(*meta.AclInfo){
		"subject":  func(a *meta.AclInfo) { a.Subject = "User:b" },
		"type":     func(a *meta.AclInfo) { a.Policies[0].PolicyType = "Default" },
		"resource": func(a *meta.AclInfo) { a.Policies[0].Entries[0].Resource = "Topic:u" },
		"actions":  func(a *meta.AclInfo) { a.Policies[0].Entries[0].Actions = []string{"Sub"} },
		"ips":      func(a *meta.AclInfo) { a.Policies[0].Entries[0].SourceIps = nil },
		"decision": func(a *meta.AclInfo) { a.Policies[0].Entries[0].Decision = "Deny" },
		"policies": func(a *meta.AclInfo) { a.Policies = append(a.Policies, meta.PolicyInfo{}) },
	} {
		a := cloneACL(base)
		edit(&a)
		if sameACL(base, a) {
			t.Errorf("%s: an edited access list compares the same", name)
		}
	}
}
