package main

import (
	"strings"
	"testing"
)

// The ACL 2.0 commands against a broker with both checks on: a Super user
// manages users and access lists, by broker and by cluster, and what they
// print is mqadmin's.
func TestAuthCommands(t *testing.T) {
	ns, b := startClusterWith(t, map[string]string{"authenticationEnabled": "true", "authorizationEnabled": "true",
		"initAuthenticationUser": `{"username":"root","password":"root-password"}`,
		// The broker signs its registration with these (a Super user).
		"innerClientAuthenticationCredentials": `{"accessKey":"inner","secretKey":"inner-password"}`})
	root := []string{"-b", b.Addr(), "-n", ns, "--access-key", "root", "--secret-key", "root-password"}
	admin := func(args ...string) string {
		t.Helper()
		out, err := run(t, append(append([]string{}, args...), root...)...)
		if err != nil {
			t.Fatalf("admin %v: %v\n%s", args, err, out)
		}
		return out
	}
	if out := admin("createUser", "-u", "alice", "-p", "alice-password"); !strings.Contains(out, "create user to "+b.Addr()+" success.") {
		t.Fatalf("createUser: %q", out)
	}
	admin("updateUser", "-u", "alice", "-s", "disable")
	out := admin("getUser", "-u", "alice")
	if !strings.Contains(out, "#UserName") || !strings.Contains(out, "alice") || !strings.Contains(out, "disable") || !strings.Contains(out, "Normal") {
		t.Fatalf("getUser:\n%s", out)
	}
	out = admin("listUser")
	for _, u := range []string{"alice", "root", "inner"} {
		if !strings.Contains(out, u) {
			t.Fatalf("listUser misses %s:\n%s", u, out)
		}
	}
	// -c reaches the brokers of the cluster through the name server.
	if out := admin("createAcl", "-c", "DefaultCluster", "-s", "User:alice", "-r", "Topic:orders, Group:billing", "-a", "Pub,Sub", "-i", "10.0.0.0/8", "-d", "Allow"); !strings.Contains(out, "create acl to "+b.Addr()+" success.") {
		t.Fatalf("createAcl -c: %q", out)
	}
	admin("updateAcl", "-s", "User:alice", "-r", "Topic:audit*", "-a", "Get", "-d", "Deny")
	out = admin("getAcl", "-s", "User:alice")
	for _, want := range []string{"#Subject", "Topic:orders", "Pub,Sub", "10.0.0.0/8", "Group:billing", "Topic:audit*", "Deny"} {
		if !strings.Contains(out, want) {
			t.Fatalf("getAcl misses %q:\n%s", want, out)
		}
	}
	out = admin("listAcl", "-r", "Group")
	if !strings.Contains(out, "Group:billing") || strings.Contains(out, "Topic:orders") {
		t.Fatalf("listAcl -r Group:\n%s", out)
	}
	admin("deleteAcl", "-s", "User:alice", "-r", "Topic:orders,Topic:audit*")
	if out := admin("getAcl", "-s", "User:alice"); strings.Contains(out, "Topic:orders") || !strings.Contains(out, "Group:billing") {
		t.Fatalf("after deleteAcl:\n%s", out)
	}
	admin("deleteUser", "-u", "alice")
	if out, err := run(t, append([]string{"getUser", "-u", "alice"}, root...)...); err == nil {
		t.Fatalf("getUser of a deleted user: %s", out)
	}
	// Without the Super user's signature the broker refuses.
	out, err := run(t, "createUser", "-b", b.Addr(), "-u", "x", "-p", "y")
	if err == nil || !strings.Contains(err.Error(), "code 16") || !strings.Contains(err.Error(), "username cannot be null.") {
		t.Fatalf("unsigned createUser: %v %s", err, out)
	}
}
