package acl

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func openEditable(t *testing.T, content string) (*Guard, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := Open(path, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return g, path
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func strPtr(s string) *string { return &s }

func TestUpdateAccountKeepsTheFileAndBumpsItsVersion(t *testing.T) {
	g, path := openEditable(t, sampleFile)
	if v := g.Version(); v.Counter != 3 || v.Timestamp != 1700000000000 {
		t.Fatalf("version %+v, want the file's counter 3", v)
	}
	// A new account.
	perms := []string{"T1=PUB", "T2=SUB"}
	if err := g.UpdateAccount(AccountUpdate{AccessKey: "newuser1", SecretKey: "newsecret1", TopicPerms: &perms,
		DefaultTopicPerm: strPtr("DENY")}); err != nil {
		t.Fatal(err)
	}
	// An existing one: only the fields given change.
	if err := g.UpdateAccount(AccountUpdate{AccessKey: "RocketMQ", SecretKey: "changed-secret", DefaultTopicPerm: strPtr("PUB")}); err != nil {
		t.Fatal(err)
	}
	text := readFile(t, path)
	for _, want := range []string{"10.10.103.*", "newuser1", "T1=PUB", "changed-secret", "topicB=PUB|SUB"} {
		if !strings.Contains(text, want) {
			t.Errorf("the file lost or lacks %q:\n%s", want, text)
		}
	}
	cfg, err := Parse([]byte(text))
	if err != nil {
		t.Fatalf("the written file does not parse: %v", err)
	}
	if cfg.Version.Counter != 5 || g.Version().Counter != 5 {
		t.Errorf("counter %d (in force %d), want 5 after two edits", cfg.Version.Counter, g.Version().Counter)
	}
	acc := cfg.Accounts["RocketMQ"]
	if acc.SecretKey != "changed-secret" || acc.DefaultTopicPerm != Pub || acc.Resources["topicA"] != Deny || acc.DefaultGroupPerm != Sub {
		t.Errorf("updated account %+v: the fields not given must stay", acc)
	}
	if n := cfg.Accounts["newuser1"]; n == nil || n.Resources["T1"] != Pub || n.Resources["T2"] != Sub {
		t.Errorf("new account %+v", n)
	}
	// The edit is in force at once.
	req := &Request{Code: 10, Version: 400, Remote: netip.MustParseAddr("127.0.0.1"),
		Fields: signed("newsecret1", nil, map[string]string{FieldAccessKey: "newuser1"}), Resources: []Resource{{"T1", Pub}}}
	if err := g.Check(req); err != nil {
		t.Fatalf("the new account is not in force: %v", err)
	}
}

func TestEditsThatWouldBreakTheFileAreRefused(t *testing.T) {
	g, path := openEditable(t, sampleFile)
	before := readFile(t, path)
	bad := []string{"T1=pub"}
	for name, u := range map[string]AccountUpdate{
		"bad perm":       {AccessKey: "newuser1", SecretKey: "newsecret1", TopicPerms: &bad},
		"short secret":   {AccessKey: "newuser1", SecretKey: "short"},
		"short key":      {AccessKey: "user", SecretKey: "newsecret1"},
		"bad white list": {AccessKey: "newuser1", SecretKey: "newsecret1", WhiteRemoteAddress: strPtr("1.2.3")},
	} {
		if err := g.UpdateAccount(u); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := g.SetGlobalWhite([]string{"not an address"}); err == nil {
		t.Error("a bad global white address was accepted")
	}
	if after := readFile(t, path); after != before {
		t.Fatalf("refused edits changed the file:\n%s", after)
	}
	if g.Version().Counter != 3 {
		t.Fatalf("refused edits moved the version to %d", g.Version().Counter)
	}
}

func TestDeleteAccountAndGlobalWhiteList(t *testing.T) {
	g, path := openEditable(t, "# operator's note\naccounts:\n  - accessKey: RocketMQ # the main user\n    secretKey: 12345678\n  - accessKey: another1\n    secretKey: 87654321\n")
	if found, err := g.DeleteAccount("missing1"); err != nil || found {
		t.Fatalf("deleting an unknown account: %v %v", found, err)
	}
	if found, err := g.DeleteAccount("another1"); err != nil || !found {
		t.Fatalf("deleting an account: %v %v", found, err)
	}
	if err := g.SetGlobalWhite([]string{"10.0.0.*", "192.168.1.{1,2}"}); err != nil {
		t.Fatal(err)
	}
	text := readFile(t, path)
	cfg, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Accounts["another1"]; ok || len(cfg.Accounts) != 1 || len(cfg.GlobalWhite) != 2 {
		t.Fatalf("after the edits: %d accounts, %d white addresses:\n%s", len(cfg.Accounts), len(cfg.GlobalWhite), text)
	}
	if !strings.Contains(text, "# operator's note") || !strings.Contains(text, "# the main user") {
		t.Fatalf("the edits dropped the file's comments:\n%s", text)
	}
	if cfg.Version.Counter != 2 {
		t.Fatalf("counter %d, want 2 (two edits of a file without a version)", cfg.Version.Counter)
	}
	// An empty file gets its first account.
	g2, path2 := openEditable(t, "")
	if err := g2.UpdateAccount(AccountUpdate{AccessKey: "first123", SecretKey: "secret123", Admin: true}); err != nil {
		t.Fatal(err)
	}
	if cfg, err := Parse([]byte(readFile(t, path2))); err != nil || !cfg.Accounts["first123"].Admin {
		t.Fatalf("first account in an empty file: %+v %v", cfg, err)
	}
}

// An edit keeps the file's permissions (it holds secret keys) and writes
// through a symbolic link instead of replacing it.
func TestEditKeepsModeAndSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real_acl.yml")
	if err := os.WriteFile(real, []byte(sampleFile), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "plain_acl.yml")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	g, err := Open(link, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetGlobalWhite([]string{"10.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi.Mode(), err)
	}
	fi, err := os.Stat(real)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the file's mode is %v after an edit, want 0600 (%v)", fi.Mode().Perm(), err)
	}
	if !strings.Contains(readFile(t, real), "10.0.0.1") {
		t.Fatal("the edit did not reach the linked file")
	}
}
