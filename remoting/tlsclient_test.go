package remoting

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// serveOnce dials s with the client TLS ct and sends one request; the
// error is the handshake's or the request's (TLS 1.3 reports a refused
// client certificate on the first read).
func serveOnce(t *testing.T, s *Server, ct *tls.Config) error {
	t.Helper()
	c, err := Dial(testCtx(t), s.Addr().String(), ClientOptions{TLS: ct})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil))
	return err
}

// tls.client.authServer checks the server's chain against
// tls.client.trustCertPath (not the host name, as RocketMQ's client);
// without it any certificate is taken.
func TestClientAuthServer(t *testing.T) {
	pki := testutil.NewPKI(t)
	goodCert, goodKey := pki.Issue(t, "good server")
	badCert, badKey := pki.SelfSigned(t, "stranger")
	serve := func(certPath, keyPath string) *Server {
		cfg, err := NewServerTLSConfig(TLSOptions{CertPath: certPath, KeyPath: keyPath})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := startTLSServer(t, TLSEnforcing, ServerConfig{TLS: cfg}, echoMux())
		return s
	}
	good, bad := serve(goodCert, goodKey), serve(badCert, badKey)
	for _, tc := range []struct {
		name    string
		o       ClientTLSOptions
		server  *Server
		wantErr string // empty: served
	}{
		{"verified, signed by the trusted CA", ClientTLSOptions{AuthServer: true, TrustCertPath: pki.CAPath}, good, ""},
		{"verified, a stranger", ClientTLSOptions{AuthServer: true, TrustCertPath: pki.CAPath}, bad, "tls.client.authServer"},
		{"verified against the system's roots", ClientTLSOptions{AuthServer: true}, good, "tls.client.authServer"},
		{"not verified, a stranger", ClientTLSOptions{TrustCertPath: pki.CAPath}, bad, ""},
	} {
		ct, err := NewClientTLSConfig(tc.o)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err = serveOnce(t, tc.server, ct)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.wantErr)
		}
	}
}

// tls.client.certPath and keyPath are presented to a server that requires
// and verifies client certificates; without them it refuses the client.
func TestClientCertificate(t *testing.T) {
	pki := testutil.NewPKI(t)
	serverCert, serverKey := pki.Issue(t, "server")
	clientCert, clientKey := pki.Issue(t, "client")
	strangerCert, strangerKey := pki.SelfSigned(t, "stranger")
	cfg, err := NewServerTLSConfig(TLSOptions{CertPath: serverCert, KeyPath: serverKey,
		NeedClientAuth: ClientAuthRequire, AuthClient: true, TrustCertPath: pki.CAPath})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := startTLSServer(t, TLSEnforcing, ServerConfig{TLS: cfg}, echoMux())
	for _, tc := range []struct {
		name   string
		o      ClientTLSOptions
		served bool
	}{
		{"the CA's client certificate", ClientTLSOptions{CertPath: clientCert, KeyPath: clientKey}, true},
		{"and the server verified", ClientTLSOptions{CertPath: clientCert, KeyPath: clientKey, AuthServer: true, TrustCertPath: pki.CAPath}, true},
		{"no certificate", ClientTLSOptions{}, false},
		{"a stranger's certificate", ClientTLSOptions{CertPath: strangerCert, KeyPath: strangerKey}, false},
	} {
		ct, err := NewClientTLSConfig(tc.o)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := serveOnce(t, s, ct); (err == nil) != tc.served {
			t.Errorf("%s: served %v (%v), want %v", tc.name, err == nil, err, tc.served)
		}
	}
}

// The client keys load as the server's do, encrypted PKCS#8 included, and
// a key that cannot be read is an error naming it.
func TestNewClientTLSConfigFiles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       ClientTLSOptions
		wantErr string // empty: loads
	}{
		{"plain PKCS#8", ClientTLSOptions{CertPath: fixture("server.crt"), KeyPath: fixture("server-pkcs8.key")}, ""},
		{"PKCS#8 AES-256 PBES2", ClientTLSOptions{CertPath: fixture("server.crt"), KeyPath: fixture("server-pkcs8-aes256.key"), KeyPassword: fixturePassword}, ""},
		{"wrong password", ClientTLSOptions{CertPath: fixture("server.crt"), KeyPath: fixture("server-pkcs8-aes256.key"), KeyPassword: "wrong"}, "tls.client.keyPassword"},
		{"encrypted without password", ClientTLSOptions{CertPath: fixture("server.crt"), KeyPath: fixture("server-pkcs8-aes256.key")}, "tls.client.keyPassword is empty"},
		{"missing key", ClientTLSOptions{CertPath: fixture("server.crt"), KeyPath: fixture("absent.key")}, "tls.client.keyPath"},
		{"missing certificate", ClientTLSOptions{CertPath: fixture("absent.crt"), KeyPath: fixture("server-pkcs8.key")}, "tls.client.certPath"},
		{"key without certificate", ClientTLSOptions{KeyPath: fixture("server-pkcs8.key")}, "tls.client.certPath and tls.client.keyPath"},
		{"missing trust", ClientTLSOptions{AuthServer: true, TrustCertPath: fixture("absent.pem")}, "tls.client.trustCertPath"},
		{"trust not PEM", ClientTLSOptions{AuthServer: true, TrustCertPath: fixture("server-pkcs8.key")}, "tls.client.trustCertPath"},
	} {
		cfg, err := NewClientTLSConfig(tc.o)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr == "" && (cfg.GetClientCertificate == nil || !strings.Contains(DescribeClientTLS(cfg), "localhost")):
			t.Errorf("%s: no client certificate in %s", tc.name, DescribeClientTLS(cfg))
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.wantErr)
		}
	}
}
