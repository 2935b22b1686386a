package configs

import (
	"os"
	"path/filepath"
	"reflect"
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
	f.Fuzz(func(t *testing.T, content []byte, format uint8) {
		p := filepath.Join(t.TempDir(), names[int(format)%len(names)])
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
	f.Add("")
	f.Add("null")
	f.Fuzz(func(t *testing.T, raw string) {
		if u, ok, err := ParseInitUser(raw); err != nil && ok {
			t.Fatalf("ParseInitUser(%q) = %+v, ok and %v", raw, u, err)
		}
		if c, ok, err := ParseInnerCredentials(raw); err != nil && ok {
			t.Fatalf("ParseInnerCredentials(%q) = %+v, ok and %v", raw, c, err)
		}
		_, _ = ParseCodeList(raw)
	})
}
