package tlsconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

func TestListener(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	overrides := filepath.Join(dir, "tls.properties")
	if err := os.WriteFile(overrides, []byte("tls.server.certPath="+missing+"\ntls.server.keyPath="+missing+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		set      configs.TLS
		wantMode remoting.TLSMode
		wantCfg  bool
		wantErr  string
	}{
		{name: "self-signed in test mode", set: configs.TLS{Mode: "permissive", TestModeEnable: true},
			wantMode: remoting.TLSPermissive, wantCfg: true},
		{name: "disabled", set: configs.TLS{Mode: "disabled", TestModeEnable: true}, wantMode: remoting.TLSDisabled},
		{name: "a certificate that is not there", set: configs.TLS{Mode: "enforcing", CertPath: missing, KeyPath: missing},
			wantErr: "broker TLS"},
		{name: "tls.config.file wins over the keys", set: configs.TLS{Mode: "permissive", TestModeEnable: true, ConfigFile: overrides},
			wantErr: "broker TLS"},
		{name: "an absent tls.config.file is skipped", set: configs.TLS{Mode: "permissive", TestModeEnable: true,
			ConfigFile: filepath.Join(dir, "absent.properties")}, wantMode: remoting.TLSPermissive, wantCfg: true},
	} {
		mode, cfg, err := Listener("broker", tc.set, zerolog.Nop())
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case mode != tc.wantMode || (cfg != nil) != tc.wantCfg:
			t.Errorf("%s: mode %v, config %v; want %v, config %v", tc.name, mode, cfg != nil, tc.wantMode, tc.wantCfg)
		case cfg != nil && len(cfg.Certificates) == 0 && cfg.GetCertificate == nil:
			t.Errorf("%s: a TLS configuration without a certificate", tc.name)
		}
	}
}

// Client builds nothing unless the process dials with TLS, and otherwise
// reads tls.client.* with tls.config.file's keys winning, as Listener
// reads tls.server.*.
func TestClient(t *testing.T) {
	pki := testutil.NewPKI(t)
	cert, key := pki.Issue(t, "client")
	missing := filepath.Join(t.TempDir(), "missing.pem")
	fromFile := testutil.WriteFile(t, "tls.properties", "tls.client.certPath="+cert+"\ntls.client.keyPath="+key+
		"\ntls.client.authServer=true\ntls.client.trustCertPath="+pki.CAPath+"\n")
	badFile := testutil.WriteFile(t, "bad.properties", "tls.client.keyPath="+missing+"\n")
	for _, tc := range []struct {
		name       string
		dial       bool
		set        configs.TLS
		wantCfg    bool
		wantCert   bool
		wantVerify bool
		wantErr    string
	}{
		{name: "not dialing TLS", set: configs.TLS{ClientCertPath: missing, ClientKeyPath: missing}},
		{name: "RocketMQ's default", dial: true, wantCfg: true},
		{name: "keys", dial: true, set: configs.TLS{ClientCertPath: cert, ClientKeyPath: key}, wantCfg: true, wantCert: true},
		{name: "keys from tls.config.file", dial: true, set: configs.TLS{ConfigFile: fromFile},
			wantCfg: true, wantCert: true, wantVerify: true},
		{name: "tls.config.file wins", dial: true, set: configs.TLS{ClientCertPath: cert, ClientKeyPath: key, ConfigFile: badFile},
			wantErr: "tls.client.keyPath"},
		{name: "a key that is not there", dial: true, set: configs.TLS{ClientCertPath: cert, ClientKeyPath: missing},
			wantErr: "broker client TLS: tls.client.keyPath"},
	} {
		cfg, err := Client("broker", tc.dial, tc.set, zerolog.Nop())
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case (cfg != nil) != tc.wantCfg:
			t.Errorf("%s: config %v, want %v", tc.name, cfg != nil, tc.wantCfg)
		case cfg != nil && ((cfg.GetClientCertificate != nil) != tc.wantCert || (cfg.VerifyConnection != nil) != tc.wantVerify):
			t.Errorf("%s: %s; want certificate %v, verified %v", tc.name, remoting.DescribeClientTLS(cfg), tc.wantCert, tc.wantVerify)
		}
	}
}
