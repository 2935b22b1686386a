package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/clustertest"
	"github.com/rocketkv/rocketkv/meta"
)

// copyUser and copyAcl read from one broker and create, or update, on
// another, as mqadmin's: the target then has the source's users with
// their passwords and types, and the source's access lists; a broker that
// refuses (an access list whose user the target lacks) fails the command.
func TestCopyUserAndAcl(t *testing.T) {
	settings := map[string]string{"authenticationEnabled": "true", "authorizationEnabled": "true",
		"initAuthenticationUser":               `{"username":"root","password":"root-password"}`,
		"innerClientAuthenticationCredentials": `{"accessKey":"inner","secretKey":"inner-password"}`}
	ns, src := startClusterWith(t, settings)
	dst, _ := clustertest.StartBroker(t, "", settings)
	from, to := src.Addr(), dst.Addr()
	signed := []string{"-n", ns, "--access-key", "root", "--secret-key", "root-password"}
	admin := func(args ...string) (string, error) {
		t.Helper()
		return run(t, append(append([]string{}, args...), signed...)...)
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := admin(args...)
		if err != nil {
			t.Fatalf("admin %v: %v\n%s", args, err, out)
		}
		return out
	}
	g := &globals{timeout: 20 * time.Second, accessKey: "root", secretKey: "root-password"}
	ctx := context.Background()
	userOn := func(addr, name string) (meta.UserInfo, bool) {
		t.Helper()
		u, found, err := g.getUser(ctx, addr, name)
		if err != nil {
			t.Fatal(err)
		}
		return u, found
	}
	aclOn := func(addr, subject string) []string {
		t.Helper()
		a, _, err := g.getACL(ctx, addr, subject)
		if err != nil {
			t.Fatal(err)
		}
		var res []string
		for _, p := range a.Policies {
			for _, e := range p.Entries {
				res = append(res, e.Resource+"="+strings.Join(e.Actions, ",")+":"+e.Decision)
			}
		}
		slices.Sort(res)
		return res
	}

	must("createUser", "-b", from, "-u", "alice", "-p", "alice-password")
	must("createUser", "-b", from, "-u", "bob", "-p", "bob-password", "-t", "Super")
	must("createAcl", "-b", from, "-s", "User:alice", "-r", "Topic:orders,Group:billing", "-a", "Pub,Sub", "-d", "Allow")

	// An access list whose user the target does not have: the target
	// refuses to look it up (AUTH_GET_ACL, as RocketMQ's "The subject is
	// not exist."), and the command says so.
	if out, err := admin("copyAcl", "-f", from, "-t", to, "-s", "User:alice"); err == nil || !strings.Contains(err.Error(), "code 16: The subject is not exist.") {
		t.Fatalf("copyAcl before its user: %v\n%s", err, out)
	}

	// The users named: alice is created with her password and type; a name
	// the source does not have is passed over, as mqadmin's.
	out := must("copyUser", "-f", from, "-t", to, "-u", "alice, ghost")
	if out != "copy user of alice from "+from+" to "+to+" success.\n" {
		t.Fatalf("copyUser -u alice,ghost printed %q", out)
	}
	if u, ok := userOn(to, "alice"); !ok || u.Password != "alice-password" || u.UserType != "Normal" {
		t.Fatalf("alice on the target after copyUser: %+v (found %v)", u, ok)
	}
	if _, ok := userOn(to, "bob"); ok {
		t.Fatal("copyUser -u alice copied bob too")
	}
	if got := aclOn(to, "User:alice"); len(got) != 0 {
		t.Fatalf("copyUser copied alice's acl, or the refused copyAcl left it: %v", got)
	}
	// Every user: bob is created, root and inner, which the target has,
	// are updated; an update changes what the target has.
	must("updateUser", "-b", from, "-u", "alice", "-p", "alice-new", "-s", "disable")
	out = must("copyUser", "-f", from, "-t", to)
	for _, u := range []string{"alice", "bob", "root", "inner"} {
		if !strings.Contains(out, "copy user of "+u+" from "+from+" to "+to+" success.") {
			t.Fatalf("copyUser misses %s:\n%s", u, out)
		}
	}
	if u, ok := userOn(to, "bob"); !ok || u.UserType != "Super" || u.Password != "bob-password" {
		t.Fatalf("bob on the target: %+v (found %v)", u, ok)
	}
	if u, _ := userOn(to, "alice"); u.Password != "alice-new" || u.UserStatus != "disable" {
		t.Fatalf("alice on the target after her update was copied: %+v", u)
	}

	out = must("copyAcl", "-f", from, "-t", to, "-s", "User:alice")
	if out != "copy acl of User:alice from "+from+" to "+to+" success.\n" {
		t.Fatalf("copyAcl printed %q", out)
	}
	want := []string{"Group:billing=Pub,Sub:Allow", "Topic:orders=Pub,Sub:Allow"}
	if got := aclOn(to, "User:alice"); !slices.Equal(got, want) {
		t.Fatalf("alice's acl on the target: %v, want %v", got, want)
	}
	// Again, every access list, after a change on the source: the target's
	// is updated.
	must("updateAcl", "-b", from, "-s", "User:alice", "-r", "Topic:audit*", "-a", "Get", "-d", "Deny")
	must("createAcl", "-b", from, "-s", "User:bob", "-r", "Topic:*", "-a", "All", "-d", "Allow")
	out = must("copyAcl", "-f", from, "-t", to)
	if !strings.Contains(out, "copy acl of User:bob from") || !strings.Contains(out, "copy acl of User:alice from") {
		t.Fatalf("copyAcl of every acl:\n%s", out)
	}
	want = []string{"Group:billing=Pub,Sub:Allow", "Topic:audit*=Get:Deny", "Topic:orders=Pub,Sub:Allow"}
	if got := aclOn(to, "User:alice"); !slices.Equal(got, want) {
		t.Fatalf("alice's acl on the target after the second copy: %v, want %v", got, want)
	}
	if got := aclOn(to, "User:bob"); !slices.Equal(got, []string{"Topic:*=All:Allow"}) {
		t.Fatalf("bob's acl on the target: %v", got)
	}

	for _, args := range [][]string{{"copyUser", "-f", from}, {"copyAcl", "-t", to}} {
		if _, err := admin(args...); err == nil || !strings.Contains(err.Error(), "required flag") {
			t.Errorf("%v: %v, want a missing flag", args, err)
		}
	}
	// Unsigned, the source refuses to list its users.
	if out, err := run(t, "copyUser", "-f", from, "-t", to); err == nil || !strings.Contains(err.Error(), "list the users of "+from) {
		t.Fatalf("unsigned copyUser: %v\n%s", err, out)
	}
}
