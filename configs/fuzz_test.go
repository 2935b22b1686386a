package configs

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzLoadProxy feeds arbitrary file contents to the proxy loader as
// rmq-proxy.json, a properties file and YAML: it never panics, and a
// configuration that loads reloads from its own settings (which leave the
// secrets out) to the same configuration.
func FuzzLoadProxy(f *testing.F) {
	f.Add([]byte(`{"rocketMQClusterName": "DefaultCluster"}`), uint8(0))
	f.Add([]byte(`{"grpcServerPort": 8081, "namesrvAddr": "127.0.0.1:9876;127.0.0.2:9876", "remotingListenPort": 1e6}`), uint8(0))
	f.Add([]byte(`{"innerClientAuthenticationCredentials": "{\"accessKey\":\"a\",\"secretKey\":\"b\"}"}`), uint8(0))
	f.Add([]byte("grpcServerPort=8081\nnamesrvAddr=127.0.0.1:9876\n"), uint8(1))
	f.Add([]byte("grpcServerPort: 8081\nproxyProtocolTrustedNetworks: 10.0.0.0/8\n"), uint8(2))
	f.Add([]byte(`{"a":[1,{"b":null}],"":""}`), uint8(0))
	names := []string{"rmq-proxy.json", "proxy.conf", "proxy.yaml"}
	dir := f.TempDir() // see writeFuzzConfig
	f.Fuzz(func(t *testing.T, content []byte, format uint8) {
		p := filepath.Join(dir, names[int(format)%len(names)])
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		loaded, err := LoadProxy(p, nil)
		if err != nil {
			return
		}
		again, err := LoadProxy("", loaded.Proxy.Settings())
		if err != nil {
			t.Fatalf("%s %q: settings %v do not load: %v", names[int(format)%len(names)], content, loaded.Proxy.Settings(), err)
		}
		// Settings leaves the secrets out (they are not written back).
		want := loaded.Proxy
		want.InnerClientAuthenticationCredentials, want.TLS.KeyPassword = again.Proxy.InnerClientAuthenticationCredentials, again.Proxy.TLS.KeyPassword
		if !reflect.DeepEqual(again.Proxy, want) {
			t.Fatalf("%s %q: settings load to %+v, want %+v", names[int(format)%len(names)], content, again.Proxy, want)
		}
	})
}

// FuzzAuthValues feeds arbitrary text to the decoders of the auth keys of
// a configuration file (initAuthenticationUser,
// innerClientAuthenticationCredentials, authenticationWhitelist): they
// never panic, and what they accept is what they said they found.
func FuzzAuthValues(f *testing.F) {
	f.Add(`{"username":"admin","password":"pw"}`)
	f.Add(`{"accessKey":"a","secretKey":"b"}`)
	f.Add("10, 11,-1 ,2147483648")
	f.Add(" 10,, 11,-1 ,+7,010,")
	f.Add("")
	f.Add("null")
	f.Fuzz(func(t *testing.T, raw string) {
		if u, ok, err := ParseInitUser(raw); err != nil && ok {
			t.Fatalf("ParseInitUser(%q) = %+v, ok and %v", raw, u, err)
		}
		if c, ok, err := ParseInnerCredentials(raw); err != nil && ok {
			t.Fatalf("ParseInnerCredentials(%q) = %+v, ok and %v", raw, c, err)
		}
		codes, err := ParseCodeList(raw)
		if err != nil {
			if codes != nil {
				t.Fatalf("ParseCodeList(%q) = %v with the error %v", raw, codes, err)
			}
			return
		}
		// Every part that is not blank is a code of the list, and the
		// codes written back as a list read as the same.
		var parts []string
		for _, p := range strings.Split(raw, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			v, err := strconv.ParseInt(p, 10, 32)
			if err != nil || !codes[int32(v)] {
				t.Fatalf("ParseCodeList(%q) = %v: part %q is not one of them (%v)", raw, codes, p, err)
			}
			parts = append(parts, strconv.FormatInt(v, 10))
		}
		if len(codes) > len(parts) {
			t.Fatalf("ParseCodeList(%q) = %v: more codes than the %d parts", raw, codes, len(parts))
		}
		if again, err := ParseCodeList(strings.Join(parts, " , ")); err != nil || !maps.Equal(again, codes) {
			t.Fatalf("ParseCodeList(%q) = %v; written back as %q, read as %v, %v", raw, codes, parts, again, err)
		}
	})
}

// FuzzTLSConfigFile feeds arbitrary contents of a tls.config.file to the
// reader that applies it over a server's TLS keys: it never panics; what
// it accepts changes only the keys it reports, sorted and once each,
// never tls.server.mode or tls.config.file, and leaves the two key
// choices among their allowed values; applying the same file again
// changes nothing; and a certificate path and client-auth choice written
// in a file read back as written (the last of two entries of a key wins,
// as in java.util.Properties).
func FuzzTLSConfigFile(f *testing.F) {
	f.Add([]byte("tls.server.need.client.auth=require\ntls.server.certPath=/etc/rocketmq/server.pem\ntls.server.keyPath=/etc/rocketmq/server.key\n"), "a.pem", uint8(0))
	f.Add([]byte("tls.server.keyPassword=******\ntls.server.authClient=FALSE\ntls.test.mode.enable = false\n"), "/tmp/x y.pem", uint8(1))
	f.Add([]byte("tls.server.mode=disabled\ntls.config.file=/other\ntls.client.keyPath=c.key\ntls.enable=true\n"), "", uint8(2))
	f.Add([]byte("tls.server.need.client.auth: OPTIONAL\r\ntls.server.trustCertPath=ca\\\n  .pem\n# tls.server.certPath=no\n"), "c:\\x", uint8(3))
	f.Add([]byte("tls.server.need.client.auth=maybe\n"), "p", uint8(0))
	f.Add([]byte("\\u00"), "\x00", uint8(0))
	base := TLS{Mode: TLSModeEnforcing, TestModeEnable: true, ConfigFile: "/etc/rocketmq/tls.properties", CertPath: "base.pem",
		KeyPath: "base.key", KeyPassword: "pw", NeedClientAuth: "optional", AuthClient: true, TrustCertPath: "ca.pem"}
	auths := []string{"none", "optional", "require", "REQUIRE"}
	valueOf := func(fl field[TLS], t *TLS) string {
		if fl.value != nil {
			return fl.value(t)
		}
		return fl.get(t)
	}
	f.Fuzz(func(t *testing.T, raw []byte, certPath string, auth uint8) {
		// Java reads the file as ISO-8859-1 with escapes: a path of plain
		// ASCII without backslashes is written as it is.
		plain := !strings.ContainsFunc(certPath, func(r rune) bool { return r < ' ' || r > '~' || r == '\\' })
		if plain && strings.TrimSpace(certPath) == certPath {
			file := "tls.server.certPath=decoy.pem\ntls.server.certPath=" + certPath + "\ntls.server.need.client.auth=" + auths[int(auth)%len(auths)] + "\n"
			out, set, err := base.applyConfigFile([]byte(file))
			if err != nil || out.CertPath != certPath || !strings.EqualFold(out.NeedClientAuth, auths[int(auth)%len(auths)]) || len(set) != 2 {
				t.Fatalf("%q read as %+v, set %v, %v", file, out, set, err)
			}
		}
		out, set, err := base.applyConfigFile(raw)
		if err != nil {
			return
		}
		if !slices.IsSorted(set) || len(slices.Compact(slices.Clone(set))) != len(set) {
			t.Fatalf("%q: keys set %v not sorted once each", raw, set)
		}
		if out.Mode != base.Mode || out.ConfigFile != base.ConfigFile {
			t.Fatalf("%q changed the mode or the file itself: %+v", raw, out)
		}
		for _, fl := range tlsFileFields {
			if !slices.Contains(set, fl.key) && valueOf(fl, &out) != valueOf(fl, &base) {
				t.Fatalf("%q changed %s without reporting it: %q to %q", raw, fl.key, valueOf(fl, &base), valueOf(fl, &out))
			}
		}
		for _, k := range set {
			if !slices.ContainsFunc(tlsFileFields, func(fl field[TLS]) bool { return fl.key == k }) {
				t.Fatalf("%q: reported key %s is no key of the file", raw, k)
			}
		}
		if !slices.Contains([]string{"none", "optional", "require"}, out.NeedClientAuth) {
			t.Fatalf("%q: need.client.auth %q", raw, out.NeedClientAuth)
		}
		again, set2, err := out.applyConfigFile(raw)
		if err != nil || again != out || !slices.Equal(set, set2) {
			t.Fatalf("%q applied twice: %+v %v, then %+v %v, %v", raw, out, set, again, set2, err)
		}
	})
}
