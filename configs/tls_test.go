package configs

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// RocketMQ's TLS property names work as keys, dots and all, in properties
// files, flat YAML and nested YAML, for the broker, the name server and
// the controller: the listener's (tls.server.*) and the client
// connections' (tls.client.*).
func TestTLSKeysLoad(t *testing.T) {
	want := TLS{
		Mode: TLSModeEnforcing, TestModeEnable: false, ConfigFile: "",
		CertPath: "/c.pem", KeyPath: "/k.pem", KeyPassword: "pw",
		NeedClientAuth: "require", AuthClient: true, TrustCertPath: "/ca.pem",
		ClientCertPath: "/cc.pem", ClientKeyPath: "/ck.pem", ClientKeyPassword: "cpw",
		ClientAuthServer: true, ClientTrustCertPath: "/cca.pem",
	}
	props := `tls.server.mode=enforcing
tls.test.mode.enable=false
tls.config.file=
tls.server.certPath=/c.pem
tls.server.keyPath=/k.pem
tls.server.keyPassword=pw
tls.server.need.client.auth=require
tls.server.authClient=true
tls.server.trustCertPath=/ca.pem
tls.client.certPath=/cc.pem
tls.client.keyPath=/ck.pem
tls.client.keyPassword=cpw
tls.client.authServer=true
tls.client.trustCertPath=/cca.pem
`
	flat := strings.NewReplacer("=", ": ").Replace(props)
	flat = strings.Replace(flat, "tls.config.file: \n", "tls.config.file: \"\"\n", 1)
	nested := `tls:
  server:
    mode: ENFORCING
    certPath: /c.pem
    keyPath: /k.pem
    keyPassword: pw
    need:
      client:
        auth: require
    authClient: true
    trustCertPath: /ca.pem
  client:
    certPath: /cc.pem
    keyPath: /ck.pem
    keyPassword: cpw
    authServer: true
    trustCertPath: /cca.pem
  test:
    mode:
      enable: false
  config:
    file: ""
`
	for _, f := range []struct{ name, text string }{{"b.conf", props}, {"flat.yaml", flat}, {"nested.yml", nested}} {
		t.Run(f.name, func(t *testing.T) {
			// "key: value" is a properties line too.
			b, err := LoadBroker(testutil.WriteFile(t, f.name, f.text+"tls.enable: true\n"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.UnknownKeys) != 0 {
				t.Errorf("unknown keys %v", b.UnknownKeys)
			}
			if !reflect.DeepEqual(b.Broker.TLS, want) || !b.Broker.DialNamesrvTLS() {
				t.Errorf("broker TLS %+v (tls.enable %q), want %+v", b.Broker.TLS, b.Broker.TLSEnable, want)
			}
			n, err := LoadNamesrv(testutil.WriteFile(t, f.name, f.text), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(n.UnknownKeys) != 0 || !reflect.DeepEqual(n.Namesrv.TLS, want) {
				t.Errorf("name server TLS %+v (unknown %v), want %+v", n.Namesrv.TLS, n.UnknownKeys, want)
			}
			c, err := LoadControllerFrom(testutil.WriteFile(t, f.name, f.text), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.UnknownKeys) != 0 || !reflect.DeepEqual(c.Controller.TLS, want) {
				t.Errorf("controller TLS %+v (unknown %v), want %+v", c.Controller.TLS, c.UnknownKeys, want)
			}
		})
	}
}

func TestTLSDefaultsAreRocketMQs(t *testing.T) {
	want := TLS{Mode: TLSModePermissive, TestModeEnable: true, ConfigFile: "/etc/rocketmq/tls.properties", NeedClientAuth: "none"}
	b, n := DefaultBroker(), DefaultNamesrv()
	if !reflect.DeepEqual(b.TLS, want) || !reflect.DeepEqual(n.TLS, want) {
		t.Fatalf("defaults %+v / %+v, want %+v", b.TLS, n.TLS, want)
	}
	if b.DialNamesrvTLS() {
		t.Fatal("a permissive broker dials name servers with TLS by default")
	}
}

func TestTLSBadValuesNameTheKey(t *testing.T) {
	for _, line := range []string{"tls.server.mode=strict", "tls.server.need.client.auth=always", "tls.test.mode.enable=yes please", "tls.server.authClient=2", "tls.enable=maybe"} {
		_, err := LoadBroker(testutil.WriteFile(t, "b.conf", line+"\n"), nil)
		key, _, _ := strings.Cut(line, "=")
		if err == nil || !strings.Contains(err.Error(), "key "+key) {
			t.Errorf("%s: error %v, want one naming the key", line, err)
		}
	}
}

// tls.enable follows RocketMQ: empty means TLS towards the name servers
// exactly when the server side enforces it.
func TestDialNamesrvTLS(t *testing.T) {
	for _, tc := range []struct {
		mode, enable string
		want         bool
	}{
		{TLSModePermissive, "", false}, {TLSModeEnforcing, "", true}, {TLSModeDisabled, "", false},
		{TLSModePermissive, "true", true}, {TLSModeEnforcing, "false", false}, {TLSModeDisabled, "true", true},
	} {
		b := DefaultBroker()
		if _, err := b.Apply(map[string]string{"tls.server.mode": tc.mode, "tls.enable": tc.enable}); err != nil {
			t.Fatal(err)
		}
		if got := b.DialNamesrvTLS(); got != tc.want {
			t.Errorf("mode %s, tls.enable %q: %v, want %v", tc.mode, tc.enable, got, tc.want)
		}
	}
	// A RocketMQ broker.conf names it useTLS (NettyClientConfig).
	b := DefaultBroker()
	if _, err := b.Apply(map[string]string{"tls.server.mode": TLSModePermissive, "useTLS": "true"}); err != nil || !b.DialNamesrvTLS() {
		t.Errorf("useTLS=true: %v, dial with TLS %v", err, b.DialNamesrvTLS())
	}
}

// The key password is never reported, and the mask fed back (a report
// applied as a configuration) keeps it.
func TestKeyPasswordIsMasked(t *testing.T) {
	b := DefaultBroker()
	if s := b.Settings()["tls.server.keyPassword"]; s != "" {
		t.Fatalf("empty password reported as %q", s)
	}
	if _, err := b.Apply(map[string]string{"tls.server.keyPassword": "s3cret"}); err != nil {
		t.Fatal(err)
	}
	if s := b.Settings()["tls.server.keyPassword"]; s != maskedSecret {
		t.Fatalf("password reported as %q", s)
	}
	if strings.Contains(string(PropertiesText(b.Settings())), "s3cret") {
		t.Fatal("the password is in the report")
	}
	if _, err := b.Apply(b.Settings()); err != nil {
		t.Fatal(err)
	}
	if b.TLS.KeyPassword != "s3cret" {
		t.Fatalf("the report fed back changed the password to %q", b.TLS.KeyPassword)
	}
	n := DefaultNamesrv()
	if _, err := n.Apply(map[string]string{"tls.server.keyPassword": "s3cret"}); err != nil {
		t.Fatal(err)
	}
	if s := n.Settings()["tls.server.keyPassword"]; s != maskedSecret {
		t.Fatalf("name server password reported as %q", s)
	}
}

func TestTLSConfigFile(t *testing.T) {
	base := DefaultBroker().TLS
	base.CertPath, base.KeyPath = "/from/config.pem", "/from/config.key"

	t.Run("missing file is skipped", func(t *testing.T) {
		in := base
		in.ConfigFile = filepath.Join(t.TempDir(), "absent.properties")
		got, set, err := in.WithConfigFile()
		if err != nil || len(set) != 0 || !reflect.DeepEqual(got, in) {
			t.Fatalf("%+v %v %v", got, set, err)
		}
	})
	t.Run("no file named", func(t *testing.T) {
		in := base
		in.ConfigFile = ""
		got, set, err := in.WithConfigFile()
		if err != nil || len(set) != 0 || !reflect.DeepEqual(got, in) {
			t.Fatalf("%+v %v %v", got, set, err)
		}
	})
	t.Run("the file wins, but not for the mode", func(t *testing.T) {
		in := base
		in.ConfigFile = testutil.WriteFile(t, "tls.properties", `# RocketMQ tls.properties
tls.test.mode.enable=false
tls.server.need.client.auth=optional
tls.server.keyPath=/from/file.key
tls.server.keyPassword=pw
tls.server.certPath=/from/file.pem
tls.server.authClient=true
tls.server.trustCertPath=/from/ca.pem
tls.server.mode=disabled
tls.enable=true
tls.client.keyPath=/client.key
tls.client.certPath=/client.pem
tls.client.keyPassword=cpw
tls.client.authServer=true
tls.client.trustCertPath=/client-ca.pem
`)
		got, set, err := in.WithConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		want := TLS{Mode: TLSModePermissive, TestModeEnable: false, ConfigFile: in.ConfigFile,
			CertPath: "/from/file.pem", KeyPath: "/from/file.key", KeyPassword: "pw",
			NeedClientAuth: "optional", AuthClient: true, TrustCertPath: "/from/ca.pem",
			ClientCertPath: "/client.pem", ClientKeyPath: "/client.key", ClientKeyPassword: "cpw",
			ClientAuthServer: true, ClientTrustCertPath: "/client-ca.pem"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v\nwant %+v", got, want)
		}
		if len(set) != 12 {
			t.Fatalf("keys set %v", set)
		}
	})
	t.Run("a bad value names the file and the key", func(t *testing.T) {
		in := base
		in.ConfigFile = testutil.WriteFile(t, "tls.properties", "tls.server.need.client.auth=sometimes\n")
		_, _, err := in.WithConfigFile()
		if err == nil || !strings.Contains(err.Error(), in.ConfigFile) || !strings.Contains(err.Error(), "tls.server.need.client.auth") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("an unreadable file is an error", func(t *testing.T) {
		in := base
		in.ConfigFile = t.TempDir() // a directory
		if _, _, err := in.WithConfigFile(); err == nil || !strings.Contains(err.Error(), "tls.config.file") {
			t.Fatalf("error %v", err)
		}
	})
}

// The controller's file and the name server's read tls.enable (useTLS in
// RocketMQ's properties files, which fill a NettyClientConfig) for the
// notices they send brokers, with the broker's default: TLS exactly when
// the listener enforces it.
func TestControllerAndNamesrvDialTLS(t *testing.T) {
	for _, tc := range []struct {
		file string
		want bool
	}{
		{"", false},
		{"tls.server.mode=enforcing\n", true},
		{"tls.server.mode=enforcing\nuseTLS=false\n", false},
		{"useTLS=true\n", true},
		{"tls.enable=true\n", true},
	} {
		ctl, err := LoadControllerFrom(testutil.WriteFile(t, "controller.properties", "controllerDLegerPeers=n0-127.0.0.1:9878\n"+tc.file), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := ctl.Controller.DialTLS(); got != tc.want {
			t.Errorf("controller %q: DialTLS %v, want %v", tc.file, got, tc.want)
		}
		for _, k := range ctl.InertKeys {
			if k.Key == "useTLS" {
				t.Errorf("controller %q: useTLS reported inert", tc.file)
			}
		}
		ns, err := LoadNamesrvFrom(testutil.WriteFile(t, "namesrv.properties", tc.file), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := ns.Namesrv.DialTLS(); got != tc.want {
			t.Errorf("name server %q: DialTLS %v, want %v", tc.file, got, tc.want)
		}
		for _, k := range ns.InertKeys {
			if k.Key == "useTLS" {
				t.Errorf("name server %q: useTLS reported inert", tc.file)
			}
		}
	}
	if _, err := LoadControllerFrom(testutil.WriteFile(t, "controller.properties", "useTLS=maybe\n"), nil); err == nil || !strings.Contains(err.Error(), "tls.enable") {
		t.Errorf("useTLS=maybe: %v, want an error naming tls.enable", err)
	}
}
