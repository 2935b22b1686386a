package namesrv

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// dialTLS connects as the Go client does with WithTls(true).
func dialTLS(t *testing.T, s *Server) (*remoting.Client, error) {
	t.Helper()
	c, err := remoting.Dial(testCtx(t), s.Addr().String(), remoting.ClientOptions{
		TLS: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the Go client
	})
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// servedBy reports whether a route request on c gets an answer.
func servedBy(t *testing.T, c *remoting.Client) bool {
	t.Helper()
	_, err := c.Invoke(testCtx(t), remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil))
	return err == nil
}

// A default name server serves TLS (self-signed) and plaintext clients on
// its one port, as RocketMQ's permissive default.
func TestDefaultNameServerServesTLSAndPlaintext(t *testing.T) {
	s, logs := startNameServer(t, nil)
	secure, err := dialTLS(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if !servedBy(t, secure) || !servedBy(t, dial(t, s)) {
		t.Fatal("a client was not answered")
	}
	if !strings.Contains(logs.String(), `"selfSigned":true`) {
		t.Errorf("no TLS log line: %s", logs)
	}
	resp := invoke(t, dial(t, s), remoting.GetNamesrvConfig, nil, nil)
	if !strings.Contains(string(resp.Body), "tls.server.mode=permissive") {
		t.Errorf("GET_NAMESRV_CONFIG does not report the TLS mode:\n%s", resp.Body)
	}
}

// tls.server.mode from the configuration file: enforcing refuses
// plaintext, disabled refuses TLS.
func TestNameServerTLSModes(t *testing.T) {
	for _, tc := range []struct {
		mode              string
		plainOK, secureOK bool
	}{
		{configs.TLSModeEnforcing, false, true},
		{configs.TLSModeDisabled, true, false},
		{configs.TLSModePermissive, true, true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			set := configs.DefaultNamesrv()
			if _, err := set.Apply(map[string]string{"tls.server.mode": tc.mode, "tls.config.file": ""}); err != nil {
				t.Fatal(err)
			}
			s, _ := startNameServer(t, func(c *Config) {
				addr := c.Remoting.Addr
				*c = ConfigFrom(set, "")
				c.Remoting.Addr, c.Remoting.EventLoops = addr, 1
			})
			if got := servedBy(t, dial(t, s)); got != tc.plainOK {
				t.Errorf("plaintext served %v, want %v", got, tc.plainOK)
			}
			secure, err := dialTLS(t, s)
			if got := err == nil && servedBy(t, secure); got != tc.secureOK {
				t.Errorf("TLS served %v (%v), want %v", got, err, tc.secureOK)
			}
			if got := configLines(t, mustDial(t, s, tc.plainOK))["tls.server.mode"]; got != tc.mode {
				t.Errorf("reported mode %q, want %s", got, tc.mode)
			}
		})
	}
}

// mustDial returns a client the server answers: plaintext when plain.
func mustDial(t *testing.T, s *Server, plain bool) *remoting.Client {
	t.Helper()
	if plain {
		return dial(t, s)
	}
	c, err := dialTLS(t, s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A certificate that cannot be loaded stops the start with an error
// naming the key; so does enforcing without any certificate.
func TestNameServerTLSStartErrors(t *testing.T) {
	for _, tc := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"tls.server.certPath": "/nonexistent/c.pem", "tls.server.keyPath": "/nonexistent/k.pem"}, "tls.server.certPath"},
		{map[string]string{"tls.server.mode": "enforcing", "tls.test.mode.enable": "false"}, "tls.server.certPath"},
		{map[string]string{"tls.server.need.client.auth": "require", "tls.server.authClient": "true", "tls.server.trustCertPath": "/nonexistent/ca.pem"}, "tls.server.trustCertPath"},
		// The client keys of the notices to brokers, dialed with TLS.
		{map[string]string{"tls.enable": "true", "tls.client.certPath": "/nonexistent/c.pem", "tls.client.keyPath": "/nonexistent/k.pem"}, "tls.client.certPath"},
		{map[string]string{"tls.enable": "true", "tls.client.authServer": "true", "tls.client.trustCertPath": "/nonexistent/ca.pem"}, "tls.client.trustCertPath"},
	} {
		set := configs.DefaultNamesrv()
		tc.props["tls.config.file"] = ""
		if _, err := set.Apply(tc.props); err != nil {
			t.Fatal(err)
		}
		cfg := ConfigFrom(set, "")
		cfg.Remoting.Addr = "127.0.0.1:0"
		_, err := NewServer(cfg, zerolog.Nop())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %s", tc.props, err, tc.want)
		}
	}
}

// As RocketMQ's name server (FileWatchService), a certificate renewed on
// disk is served to new connections without a restart.
func TestNameServerReloadsItsCertificate(t *testing.T) {
	pki := testutil.NewPKI(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "ns.pem"), filepath.Join(dir, "ns.key")
	aCert, aKey := pki.Issue(t, "ns-a")
	bCert, bKey := pki.Issue(t, "ns-b")
	testutil.CopyFile(t, aCert, cert)
	testutil.CopyFile(t, aKey, key)
	set := configs.DefaultNamesrv()
	if _, err := set.Apply(map[string]string{"tls.server.mode": configs.TLSModeEnforcing, "tls.config.file": "",
		"tls.server.certPath": cert, "tls.server.keyPath": key}); err != nil {
		t.Fatal(err)
	}
	s, _ := startNameServer(t, func(c *Config) {
		addr := c.Remoting.Addr
		*c = ConfigFrom(set, "")
		c.Remoting.Addr, c.Remoting.EventLoops = addr, 1
	})
	addr := s.Addr().String()
	if got := testutil.ServedCertName(t, addr); got != "ns-a" {
		t.Fatalf("served %q at start, want ns-a", got)
	}
	open, err := dialTLS(t, s)
	if err != nil {
		t.Fatal(err)
	}
	testutil.CopyFile(t, bCert, cert)
	testutil.CopyFile(t, bKey, key)
	testutil.AwaitServedCert(t, addr, "ns-b")
	if !servedBy(t, open) {
		t.Fatal("the connection made before the reload is not served")
	}
}
