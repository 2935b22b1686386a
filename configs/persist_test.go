package configs

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestApplySetsKnownKeysAndRefusesTheRest(t *testing.T) {
	b := DefaultBroker()
	set, err := b.Apply(map[string]string{"BrokerPermission": " 4 ", "mapedFileSizeCommitLog": "4096"})
	if err != nil {
		t.Fatal(err)
	}
	if b.BrokerPermission != 4 || b.MappedFileSizeCommitLog != 4096 {
		t.Fatalf("applied: permission %d, segment size %d", b.BrokerPermission, b.MappedFileSizeCommitLog)
	}
	if strings.Join(set, ",") != "brokerPermission,mappedFileSizeCommitLog" {
		t.Fatalf("reported keys %v, want the canonical names", set)
	}
	before := b
	for props, want := range map[string]map[string]string{
		"unknown key secretKnob":       {"brokerPermission": "2", "secretKnob": "1"},
		"key brokerPermission":         {"brokerPermission": "16"},
		"key autoCreateTopicEnable":    {"autoCreateTopicEnable": "maybe"},
		"key deleteWhen":               {"deleteWhen": "04;25"},
		"key diskMaxUsedSpaceRatio":    {"diskMaxUsedSpaceRatio": "abc"},
		"key transactionCheckInterval": {"transactionCheckInterval": "0"},
	} {
		if _, err := b.Apply(want); err == nil || !strings.Contains(err.Error(), props) {
			t.Errorf("Apply(%v): error %v, want one naming %q", want, err, props)
		}
	}
	if b.BrokerPermission != before.BrokerPermission || b.TransactionCheckInterval != before.TransactionCheckInterval {
		t.Fatal("a refused Apply changed the configuration")
	}
}

func TestPersistSettings(t *testing.T) {
	for _, tc := range []struct {
		name, file, before, after string
		extra                     map[string]string
	}{{
		name: "properties: replaced in place, spelling and comments kept, new keys appended",
		file: "broker.conf",
		before: "# the cluster\nbrokerClusterName = DefaultCluster\nBrokerPermission=6\n" +
			"fileReservedTime: 48\nnotOurs=1\n",
		after: "# the cluster\nbrokerClusterName = DefaultCluster\nBrokerPermission=4\n" +
			"fileReservedTime=12\nnotOurs=1\ndeleteWhen=01;13\n",
	}, {
		name:   "properties: continuation lines of a replaced value dropped",
		file:   "broker.properties",
		before: "deleteWhen=01;\\\n  02\nbrokerName=b\n",
		after:  "deleteWhen=01;13\nbrokerName=b\nbrokerPermission=4\nfileReservedTime=12\n",
	}, {
		name:   "properties: a continuation line of an entry kept is not taken for a key",
		file:   "cont.conf",
		before: "storePathRootDir=/data/a\\\n  brokerPermission=6\nbrokerName=b\n",
		after:  "storePathRootDir=/data/a\\\n  brokerPermission=6\nbrokerName=b\nbrokerPermission=4\ndeleteWhen=01;13\nfileReservedTime=12\n",
	}, {
		name:   "properties: an alias is the same key",
		file:   "alias.conf",
		before: "mapedFileSizeCommitLog=1073741824\n",
		extra:  map[string]string{"mappedFileSizeCommitLog": "4096"},
		after:  "mapedFileSizeCommitLog=4096\nbrokerPermission=4\ndeleteWhen=01;13\nfileReservedTime=12\n",
	}, {
		name:   "properties: CRLF line breaks kept, and used for the lines written",
		file:   "crlf.conf",
		before: "# windows\r\nbrokerPermission=6\r\nbrokerName=b\r\n",
		after:  "# windows\r\nbrokerPermission=4\r\nbrokerName=b\r\ndeleteWhen=01;13\r\nfileReservedTime=12\r\n",
	}, {
		name:   "properties: lone CR line breaks cut lines, as Java cuts them",
		file:   "cr.conf",
		before: "brokerPermission=6\rlistenPort=1\rdeleteWhen=01;\\\r  02\rbrokerName=b",
		after:  "brokerPermission=4\rlistenPort=1\rdeleteWhen=01;13\rbrokerName=b\rfileReservedTime=12\r",
	}, {
		name:   "properties: a file ending inside a continued value is closed before keys are added",
		file:   "open.conf",
		before: "brokerName=b\\",
		after:  "brokerName=b\\\n\nbrokerPermission=4\ndeleteWhen=01;13\nfileReservedTime=12\n",
	}, {
		name:   "properties: a last line without a line break",
		file:   "noeol.conf",
		before: "brokerName=b\nbrokerPermission=6",
		after:  "brokerName=b\nbrokerPermission=4\ndeleteWhen=01;13\nfileReservedTime=12\n",
	}, {
		name:   "yaml: replaced in place with its comment, new keys appended",
		file:   "broker.yaml",
		before: "# rocketkv\nbrokerName: broker-a\nbrokerPermission: 6 # read and write\n",
		after:  "# rocketkv\nbrokerName: broker-a\nbrokerPermission: 4 # read and write\ndeleteWhen: \"01;13\"\nfileReservedTime: 12\n",
	}, {
		name:   "yaml: empty file",
		file:   "empty.yml",
		before: "",
		after:  "brokerPermission: 4\ndeleteWhen: \"01;13\"\nfileReservedTime: 12\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			if err := os.WriteFile(path, []byte(tc.before), 0o640); err != nil {
				t.Fatal(err)
			}
			settings := map[string]string{"brokerPermission": "4", "fileReservedTime": "12", "deleteWhen": "01;13"}
			for k, v := range tc.extra {
				settings[k] = v
			}
			if err := PersistSettings(path, settings); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.after {
				t.Fatalf("file after:\n%s\nwant:\n%s", got, tc.after)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm() != 0o640 {
				t.Fatalf("permissions %v, want 0640 kept", info.Mode().Perm())
			}
			loaded, err := LoadBroker(path, nil)
			if err != nil {
				t.Fatalf("the rewritten file does not load: %v", err)
			}
			if loaded.Broker.BrokerPermission != 4 || loaded.Broker.FileReservedTime.Hours() != 12 {
				t.Fatalf("the rewritten file loads permission %d, reserved %s", loaded.Broker.BrokerPermission, loaded.Broker.FileReservedTime)
			}
			entries, _ := os.ReadDir(filepath.Dir(path))
			if len(entries) != 1 {
				t.Fatalf("directory holds %d files, want the configuration alone (no temporary file left)", len(entries))
			}
		})
	}
	if err := PersistSettings(filepath.Join(t.TempDir(), "missing.conf"), map[string]string{"brokerPermission": "4"}); err == nil {
		t.Fatal("persisting into a missing file succeeded")
	}
	bad := filepath.Join(t.TempDir(), "list.yaml")
	if err := os.WriteFile(bad, []byte("- a\n- b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := PersistSettings(bad, map[string]string{"brokerPermission": "4"}); err == nil || !strings.Contains(err.Error(), "not a mapping") {
		t.Fatalf("persisting into a YAML list: %v, want an error saying it is not a mapping", err)
	}
}

// The ACL 2.0 keys: RocketMQ's names and defaults; a plug-in class, a
// credential that is not the JSON RocketMQ reads, or a whitelist entry that
// is not a request code stops the load with an error naming the key.
func TestAuthKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broker.conf")
	good := "authenticationEnabled=true\nauthorizationEnabled=true\n" +
		"authenticationMetadataProvider=" + LocalAuthenticationMetadataProvider + "\n" +
		"authorizationStrategy=" + StatefulAuthorizationStrategy + "\n" +
		`initAuthenticationUser={"username":"root","password":"root-pw"}` + "\n" +
		`innerClientAuthenticationCredentials={"accessKey":"inner","secretKey":"inner-pw"}` + "\n" +
		"authenticationWhitelist=105, 34\nmigrateAuthFromV1Enabled=true\nuserCacheMaxNum=5\n"
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadBroker(path, nil)
	if err != nil || len(loaded.UnknownKeys) != 0 {
		t.Fatalf("%v, unknown %v", err, loaded.UnknownKeys)
	}
	a := loaded.Broker.Auth
	if !a.AuthenticationEnabled || !a.AuthorizationEnabled || !a.MigrateAuthFromV1Enabled || a.UserCacheMaxNum != 5 || a.AclCacheMaxNum != 1000 {
		t.Fatalf("auth %+v", a)
	}
	if u, ok, err := ParseInitUser(a.InitAuthenticationUser); err != nil || !ok || u.Username != "root" {
		t.Fatalf("init user %+v %v %v", u, ok, err)
	}
	if codes, err := ParseCodeList(a.AuthenticationWhitelist); err != nil || !codes[105] || !codes[34] || len(codes) != 2 {
		t.Fatalf("whitelist %v %v", codes, err)
	}
	if got := loaded.Broker.Settings()["innerClientAuthenticationCredentials"]; got != maskedSecret {
		t.Errorf("the inner credentials are reported as %q, want them masked", got)
	}
	for key, bad := range map[string]string{
		"authenticationProvider":               "com.example.MyProvider",
		"authorizationMetadataProvider":        "org.apache.rocketmq.auth.authorization.provider.Other",
		"authenticationStrategy":               "Stateless",
		"initAuthenticationUser":               `{"username":"root"}`,
		"innerClientAuthenticationCredentials": "inner:secret",
		"authorizationWhitelist":               "105,SEND_MESSAGE",
	} {
		if err := os.WriteFile(path, []byte(key+"="+bad+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadBroker(path, nil); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s=%s: %v, want an error naming the key", key, bad, err)
		}
	}
}

// FuzzPersistSettings rewrites arbitrary files of both formats: it never
// panics, and when a file loaded before, it loads after with the settings
// written and every other key it had unchanged.
func FuzzPersistSettings(f *testing.F) {
	f.Add([]byte("brokerName=a\nbrokerPermission=6\n"), false, "4", "12")
	f.Add([]byte("brokerPermission: 6 # rw\nlistenPort: 1\n"), true, "2", "0")
	f.Add([]byte("deleteWhen=01;\\\n 02\n!c\n#d"), false, "6", "48")
	f.Add([]byte(""), true, "4", "1")
	f.Fuzz(func(t *testing.T, content []byte, yaml bool, perm, reserved string) {
		p := writeFuzzConfig(t, content, yaml)
		before, loadErr := LoadBroker(p, nil)
		settings := map[string]string{"brokerPermission": perm, "fileReservedTime": reserved}
		want := before.Broker
		if _, err := want.Apply(settings); err != nil || loadErr != nil {
			_ = PersistSettings(p, settings) // only: no panic
			return
		}
		if err := PersistSettings(p, settings); err != nil {
			t.Skipf("not rewritable: %v", err) // e.g. a YAML document that is not a mapping
		}
		after, err := LoadBroker(p, nil)
		if err != nil {
			t.Fatalf("file loaded before the rewrite, not after: %v\nbefore:\n%q\nafter:\n%q", err, content, mustRead(t, p))
		}
		if got, wantS := after.Broker.Settings(), want.Settings(); !maps.Equal(got, wantS) {
			for k := range wantS {
				if got[k] != wantS[k] {
					t.Errorf("%s = %q after the rewrite, want %q", k, got[k], wantS[k])
				}
			}
			t.Fatalf("before:\n%q\nafter:\n%q", content, mustRead(t, p))
		}
	})
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A configuration reached through a symbolic link is rewritten where the
// link points, and the link stays a link.
func TestPersistSettingsFollowsASymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.conf")
	if err := os.WriteFile(real, []byte("brokerPermission=6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "broker.conf")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := PersistSettings(link, map[string]string{"brokerPermission": "4"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced by a file: %v %v", fi, err)
	}
	if got, _ := os.ReadFile(real); string(got) != "brokerPermission=4\n" {
		t.Fatalf("the linked file holds %q", got)
	}
}
