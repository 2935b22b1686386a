package configs

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
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

// Each case is a properties file, the settings persisted into it, and the
// file after: an entry is found, replaced and kept as Properties.load reads
// it, so the file then reads with the settings' values and every other
// entry as before (checkPersisted).
func TestPersistSettingsAsPropertiesLoadReads(t *testing.T) {
	for _, tc := range []struct {
		name, before, after string
		settings            map[string]string // brokerPermission=4 when nil
	}{{
		name:   "an entry of empty key continued at the end does not take in the keys appended",
		before: "brokerName=b\n=x\\",
		after:  "brokerName=b\n=x\\\n\nbrokerPermission=4\n",
	}, {
		name:   "a separator alone continued at the end does not take in the keys appended",
		before: "brokerName=b\n:\\\n",
		after:  "brokerName=b\n:\\\n\nbrokerPermission=4\n",
	}, {
		name:   "a line of a backslash alone continues into nothing: the entry after it is replaced",
		before: "brokerName=b\nbrokerPermission=6\n\\\nbrokerPermission=2\n",
		after:  "brokerName=b\nbrokerPermission=4\n\\\nbrokerPermission=4\n",
	}, {
		name:   "a line of a backslash alone at the end is an entry of empty key, kept when keys are appended",
		before: "brokerName=b\n\\",
		after:  "brokerName=b\n\\\n=\nbrokerPermission=4\n",
	}, {
		name:   "a comment ending in a backslash does not continue",
		before: "brokerName=b\n# c \\",
		after:  "brokerName=b\n# c \\\nbrokerPermission=4\n",
	}, {
		name:   "an escaped key is the key it reads as, and keeps its spelling",
		before: "brokerName=b\n\\brokerPermission=2\nbroker\\u0050ermission=3\n",
		after:  "brokerName=b\n\\brokerPermission=4\nbroker\\u0050ermission=4\n",
	}, {
		name:   "a key continued onto the next line is replaced with its continuation lines",
		before: "broker\\\n  Permission = 2 \\\r\n  3\r\nbrokerName=b\r\n",
		after:  "brokerPermission=4\r\nbrokerName=b\r\n",
	}, {
		name:     "every entry of the key is replaced, in any case and by alias",
		before:   "BrokerPermission=6\nbrokerpermission 2\nmapedFileSizeCommitLog:1\nmappedFileSizeCommitLog=2\n",
		settings: map[string]string{"brokerPermission": "4", "mappedFileSizeCommitLog": "4096"},
		after:    "BrokerPermission=4\nbrokerpermission=4\nmapedFileSizeCommitLog=4096\nmappedFileSizeCommitLog=4096\n",
	}, {
		name:     "an entry continued at the end is replaced and ends with the file's line break",
		before:   "brokerName=b\rbrokerPermission=6\\",
		settings: map[string]string{"brokerPermission": "4", "fileReservedTime": "12"},
		after:    "brokerName=b\rbrokerPermission=4\rfileReservedTime=12\r",
	}, {
		name:   "bytes beyond ASCII, UTF-8 or not, are kept",
		before: "# caf\u00e9\nbrokerName=\xe9t\xe9\nbrokerPermission=6\n\xff=1\n",
		after:  "# caf\u00e9\nbrokerName=\xe9t\xe9\nbrokerPermission=4\n\xff=1\n",
	}, {
		name:     "a value read back as written: escapes, leading blank, separators",
		before:   "brokerName=b\n",
		settings: map[string]string{"brokerPermission": " =a\\b\n\tc: #"},
		after:    "brokerName=b\nbrokerPermission=\\ =a\\\\b\\n\\tc: #\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			settings := tc.settings
			if settings == nil {
				settings = map[string]string{"brokerPermission": "4"}
			}
			path := filepath.Join(t.TempDir(), "broker.conf")
			if err := os.WriteFile(path, []byte(tc.before), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := PersistSettings(path, settings); err != nil {
				t.Fatal(err)
			}
			got := mustRead(t, path)
			if got != tc.after {
				t.Errorf("file after:\n%q\nwant:\n%q", got, tc.after)
			}
			if settings["brokerPermission"] == "4" {
				loaded, err := LoadBroker(path, nil)
				if err != nil {
					t.Fatal(err)
				}
				if loaded.Broker.BrokerPermission != 4 {
					t.Errorf("loads brokerPermission=%d, want 4", loaded.Broker.BrokerPermission)
				}
			}
			checkPersisted(t, []byte(tc.before), []byte(got), settings)
		})
	}
}

// checkPersisted checks that the properties text after, written by
// PersistSettings into before, reads with every entry of a persisted key
// (by canonical name or alias, any case) at its new value, at least one
// such entry for each key, and every other entry as in before, in the
// same order. When before sets none of the keys, it is kept byte for byte
// at the start of after.
func checkPersisted(t *testing.T, before, after []byte, settings map[string]string) {
	t.Helper()
	was, err := parseProperties(before)
	if err != nil {
		t.Fatalf("the text before does not parse: %v", err)
	}
	is, err := parseProperties(after)
	if err != nil {
		t.Fatalf("the text after does not parse: %v\nbefore:\n%q\nafter:\n%q", err, before, after)
	}
	others := func(entries []property) (rest [][2]string, targeted int) {
		for _, e := range entries {
			if name, ok := brokerSchema.canonical(e.key); ok {
				if _, set := settings[name]; set {
					targeted++
					continue
				}
			}
			rest = append(rest, [2]string{e.key, e.value})
		}
		return rest, targeted
	}
	wasRest, wasTargeted := others(was)
	isRest, _ := others(is)
	if !slices.Equal(wasRest, isRest) {
		t.Errorf("the other entries changed:\n%q\nwant:\n%q", isRest, wasRest)
	}
	found := make(map[string]bool, len(settings))
	for _, e := range is {
		name, ok := brokerSchema.canonical(e.key)
		v, set := settings[name]
		if !ok || !set {
			continue
		}
		found[name] = true
		if e.value != v {
			t.Errorf("line %d: %s=%q, want %q", e.line, e.key, e.value, v)
		}
	}
	for k := range settings {
		if !found[k] {
			t.Errorf("no entry sets %s", k)
		}
	}
	if wasTargeted == 0 && !bytes.HasPrefix(after, before) {
		t.Errorf("the text before is not kept at the start of the text after")
	}
	if t.Failed() {
		t.Fatalf("before:\n%q\nafter:\n%q", before, after)
	}
}

// FuzzPersistSettings rewrites arbitrary files of both formats: it never
// panics; a properties text that parsed before reads after with the keys
// persisted at the values written and every other entry unchanged
// (checkPersisted); and when a file loaded before, it loads after with the
// settings written and every other key it had unchanged.
func FuzzPersistSettings(f *testing.F) {
	f.Add([]byte("brokerName=a\nbrokerPermission=6\n"), false, "4", "12")
	f.Add([]byte("brokerPermission: 6 # rw\nlistenPort: 1\n"), true, "2", "0")
	f.Add([]byte("deleteWhen=01;\\\n 02\n!c\n#d"), false, "6", "48")
	f.Add([]byte(""), true, "4", "1")
	f.Add([]byte("brokerName=b\n=x\\"), false, "4", "12")
	f.Add([]byte("brokerName=b\nbrokerPermission=6\n\\\nbrokerPermission=2\n"), false, "4", "12")
	f.Add([]byte("brokerName=b\n:\\\n"), false, "4", "12")
	f.Add([]byte("\\brokerPermission=2\r\nfile\\\r\n ReservedTime 3\\\r\n\r\n\\"), false, "4", "12")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content []byte, yaml bool, perm, reserved string) {
		p := writeFuzzConfig(t, dir, content, yaml)
		before, loadErr := LoadBroker(p, nil)
		settings := map[string]string{"brokerPermission": perm, "fileReservedTime": reserved}
		want := before.Broker
		_, applyErr := want.Apply(settings)
		if err := PersistSettings(p, settings); err != nil {
			if yaml {
				t.Skipf("not rewritable: %v", err) // e.g. a YAML document that is not a mapping
			}
			t.Fatalf("persist into a properties file: %v", err)
		}
		if _, err := parseProperties(content); err == nil && !yaml && utf8.ValidString(perm) && utf8.ValidString(reserved) {
			// Values reach PersistSettings as strings, valid UTF-8.
			checkPersisted(t, content, []byte(mustRead(t, p)), settings)
		}
		if loadErr != nil || applyErr != nil {
			return
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

// A JSON configuration file (LoadBroker reads .json) is written back as
// JSON: a key present keeps its place and, for a number or a boolean, its
// kind; a key added goes last. The write-back used to append a properties
// line after the object, and the broker did not start again.
func TestPersistIntoAJSONFileReadsBack(t *testing.T) {
	p := filepath.Join(t.TempDir(), "broker.json")
	if err := os.WriteFile(p, []byte(`{"brokerName": "broker-a", "brokerPermission": 6, "autoCreateTopicEnable": true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := PersistSettings(p, map[string]string{"brokerPermission": "4", "autoCreateTopicEnable": "false", "deleteWhen": "05"}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	want := "{\n  \"brokerName\": \"broker-a\",\n  \"brokerPermission\": 4,\n  \"autoCreateTopicEnable\": false,\n  \"deleteWhen\": \"05\"\n}\n"
	if string(raw) != want {
		t.Errorf("file after the write-back:\n%s\nwant:\n%s", raw, want)
	}
	got, err := LoadBroker(p, nil)
	if err != nil {
		t.Fatalf("the file no longer loads: %v", err)
	}
	if got.Broker.BrokerPermission != 4 || got.Broker.BrokerName != "broker-a" || got.Broker.AutoCreateTopicEnable {
		t.Errorf("read back: permission %d, name %q, autoCreateTopicEnable %v", got.Broker.BrokerPermission, got.Broker.BrokerName, got.Broker.AutoCreateTopicEnable)
	}
	p2 := filepath.Join(t.TempDir(), "namesrv.json")
	if err := os.WriteFile(p2, []byte(`{"enableTopicList": true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := PersistNamesrvSettings(p2, map[string]string{"enableTopicList": "false"}); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadNamesrv(p2, nil); err != nil || got.Namesrv.EnableTopicList {
		t.Fatalf("name server file after the write-back: %v (enableTopicList %v)", err, got.Namesrv.EnableTopicList)
	}
}

// A key accepted without effect is written back like any other (a
// configuration update hands it over as given): an entry of the file that
// sets it is rewritten in place, in any spelling the loader accepts,
// rather than followed by a second one, and a key not in the file yet is
// added.
func TestPersistSettingsWritesInertKeysInPlace(t *testing.T) {
	for _, tc := range []struct{ name, original, want string }{
		{"broker.conf", "useReentrantLockWhenPutMessage=false\nbrokerPermission=6\n",
			"useReentrantLockWhenPutMessage=true\nbrokerPermission=6\npullMessageThreadPoolNums=64\n"},
		{"broker.yaml", "UseReentrantLockWhenPutMessage: false\nbrokerPermission: 6\n",
			"UseReentrantLockWhenPutMessage: true\nbrokerPermission: 6\npullMessageThreadPoolNums: 64\n"},
		{"broker.json", `{"useReentrantLockWhenPutMessage": false}`,
			"{\n  \"useReentrantLockWhenPutMessage\": true,\n  \"pullMessageThreadPoolNums\": \"64\"\n}\n"},
	} {
		p := filepath.Join(t.TempDir(), tc.name)
		if err := os.WriteFile(p, []byte(tc.original), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := PersistSettings(p, map[string]string{"useReentrantLockWhenPutMessage": "true", "pullMessageThreadPoolNums": "64"}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if raw, _ := os.ReadFile(p); string(raw) != tc.want {
			t.Errorf("%s after the write-back:\n%s\nwant:\n%s", tc.name, raw, tc.want)
		}
		got, err := LoadBroker(p, nil)
		if err != nil {
			t.Fatalf("%s no longer loads: %v", tc.name, err)
		}
		values := map[string]string{}
		for _, k := range got.InertKeys {
			values[k.Key] = k.Value
		}
		if values["useReentrantLockWhenPutMessage"] != "true" || values["pullMessageThreadPoolNums"] != "64" {
			t.Errorf("%s reads back inert keys %v", tc.name, values)
		}
	}
}
