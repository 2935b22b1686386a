package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/meta"
)

// kvdump users masks the passwords unless asked; acls prints one entry a
// row; summary counts both keyspaces.
func TestUsersAndACLs(t *testing.T) {
	root := t.TempDir()
	s := openTestStore(t, root, 1<<20)
	users, err := s.db.Users(0)
	if err != nil {
		t.Fatal(err)
	}
	acls, err := s.db.ACLs(0)
	if err != nil {
		t.Fatal(err)
	}
	alice := meta.UserInfo{Username: "alice", Password: "alice-secret", UserType: "Normal", UserStatus: "enable"}
	root1 := meta.UserInfo{Username: "root", Password: "root-secret", UserType: "Super", UserStatus: "enable"}
	if err := users.Put(alice, root1); err != nil {
		t.Fatal(err)
	}
	acl := meta.AclInfo{Subject: "User:alice", Policies: []meta.PolicyInfo{
		{PolicyType: "Custom", Entries: []meta.PolicyEntryInfo{
			{Resource: "Topic:orders", Actions: []string{"Pub", "Sub"}, SourceIps: []string{"10.0.0.0/8"}, Decision: "Allow"},
			{Resource: "Group:g*", Actions: []string{"Sub"}, Decision: "Allow"}}},
		{PolicyType: "Default", Entries: []meta.PolicyEntryInfo{{Resource: "Topic:*", Actions: []string{"All"}, Decision: "Deny"}}}}}
	if err := acls.Put(acl); err != nil {
		t.Fatal(err)
	}
	s.close(t)

	rows := [][]string{{"USER", "PASSWORD", "TYPE", "STATUS"},
		{"alice", "******", "Normal", "enable"},
		{"root", "******", "Super", "enable"}}
	if got, want := mustKvdump(t, "--store", root, "users"), alignRows(rows...); got != want {
		t.Errorf("users:\n%s\nwant:\n%s", got, want)
	}
	if got := mustKvdump(t, "--store", root, "users", "--show-passwords"); !strings.Contains(got, "alice-secret") || !strings.Contains(got, "root-secret") {
		t.Errorf("users --show-passwords hides them:\n%s", got)
	}
	masked := alice
	masked.Password = "******"
	checkJSON(t, "users --json", jsonLines(t, mustKvdump(t, "--store", root, "--json", "users")), asJSON(t, masked), asJSON(t, meta.UserInfo{Username: "root", Password: "******", UserType: "Super", UserStatus: "enable"}))
	if out := mustKvdump(t, "--store", root, "raw"); strings.Contains(out, "secret") {
		t.Errorf("raw shows a password:\n%s", out)
	}

	rows = [][]string{{"SUBJECT", "POLICY", "RESOURCE", "ACTIONS", "SOURCEIPS", "DECISION"},
		{"User:alice", "Custom", "Topic:orders", "Pub,Sub", "10.0.0.0/8", "Allow"},
		{"User:alice", "Custom", "Group:g*", "Sub", "-", "Allow"},
		{"User:alice", "Default", "Topic:*", "All", "-", "Deny"}}
	if got, want := mustKvdump(t, "--store", root, "acls"), alignRows(rows...); got != want {
		t.Errorf("acls:\n%s\nwant:\n%s", got, want)
	}
	checkJSON(t, "acls --json", jsonLines(t, mustKvdump(t, "--store", root, "--json", "acls")), asJSON(t, acl))

	sum := jsonLines(t, mustKvdump(t, "--store", root, "--json", "summary"))
	last := sum[len(sum)-1]
	if fmt.Sprint(last["users"]) != "2" || fmt.Sprint(last["acls"]) != "1" {
		t.Errorf("summary counts users %v acls %v, want 2 and 1", last["users"], last["acls"])
	}
}
