package remoting

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The fixtures in testdata/tls were made with OpenSSL 3 from one P-256
// key: server.crt (self-signed, valid for 100 years), the key as plain
// PKCS#8, as PKCS#8 encrypted with PBES2 (AES-256-CBC with
// HMAC-SHA256, and DES-EDE3-CBC with HMAC-SHA1, OpenSSL's
// `pkcs8 -topk8 -v2`) and as a legacy encrypted SEC 1 PEM block
// (`ec -aes128`). The password is "rocketkv".
const fixturePassword = "rocketkv"

func fixture(name string) string { return filepath.Join("testdata", "tls", name) }

func TestNewServerTLSConfigFromFiles(t *testing.T) {
	tests := []struct {
		name     string
		key      string
		password string
		wantErr  string // empty: loads
	}{
		{"plain PKCS#8", "server-pkcs8.key", "", ""},
		{"PKCS#8 AES-256 PBES2", "server-pkcs8-aes256.key", fixturePassword, ""},
		{"PKCS#8 3DES PBES2", "server-pkcs8-des3.key", fixturePassword, ""},
		{"legacy encrypted SEC 1", "server-legacy-aes128.key", fixturePassword, ""},
		{"PKCS#8 wrong password", "server-pkcs8-aes256.key", "wrong", "tls.server.keyPassword"},
		{"legacy wrong password", "server-legacy-aes128.key", "wrong", "tls.server.keyPassword"},
		{"encrypted without password", "server-pkcs8-aes256.key", "", "tls.server.keyPassword is empty"},
		{"certificate as key", "server.crt", "", "no PEM private key"},
		{"missing key", "absent.key", "", "tls.server.keyPath"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := NewServerTLSConfig(TLSOptions{CertPath: fixture("server.crt"), KeyPath: fixture(tc.key), KeyPassword: tc.password})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ClientAuth != tls.NoClientCert || len(cfg.Certificates) != 1 || cfg.Certificates[0].Leaf.Subject.CommonName != "localhost" {
				t.Fatalf("config %+v", cfg)
			}
			// The loaded pair serves a handshake.
			s, _ := startTLSServer(t, TLSEnforcing, ServerConfig{TLS: cfg}, echoMux())
			c := dialServer(t, s, ClientOptions{TLS: clientTLS()})
			if _, err := c.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// writePEM writes PEM blocks into a file of a test directory.
func writePEM(t *testing.T, name string, blocks ...*pem.Block) string {
	t.Helper()
	var out []byte
	for _, b := range blocks {
		out = append(out, pem.EncodeToMemory(b)...)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue makes a certificate for key, signed by parent/parentKey (self-signed
// when parent is nil).
func issue(t *testing.T, cn string, key crypto.Signer, parent *x509.Certificate, parentKey crypto.Signer, ca bool) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  ca,
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func certBlock(c *x509.Certificate) *pem.Block { return &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw} }

// Key encodings RocketMQ users meet, and the mistakes that must be start
// errors naming the setting.
func TestNewServerTLSConfigKeyFormatsAndErrors(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaCert := writePEM(t, "rsa.crt", certBlock(issue(t, "rsa", rsaKey, nil, nil, false)))
	ecCert := writePEM(t, "ec.crt", certBlock(issue(t, "ec", ecKey, nil, nil, false)))
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	sec1, _ := x509.MarshalECPrivateKey(ecKey)
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    TLSOptions
		wantErr string
	}{
		{"RSA PKCS#8", TLSOptions{CertPath: rsaCert, KeyPath: writePEM(t, "a.key", &pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})}, ""},
		{"RSA PKCS#1", TLSOptions{CertPath: rsaCert, KeyPath: writePEM(t, "b.key", &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)})}, ""},
		{"EC SEC 1", TLSOptions{CertPath: ecCert, KeyPath: writePEM(t, "c.key", &pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})}, ""},
		{"certificate beats test mode", TLSOptions{TestMode: true, CertPath: ecCert, KeyPath: writePEM(t, "d.key", &pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})}, ""},
		{"key of another certificate", TLSOptions{CertPath: ecCert, KeyPath: writePEM(t, "e.key", &pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})}, "is not the key of the certificate in tls.server.certPath"},
		{"no certificate, no test mode", TLSOptions{}, "tls.server.certPath"},
		{"certificate without key", TLSOptions{CertPath: ecCert}, "tls.server.keyPath must be set together"},
		{"missing certificate", TLSOptions{CertPath: "/nonexistent/cert.pem", KeyPath: garbage}, "tls.server.certPath"},
		{"certificate file not PEM", TLSOptions{CertPath: garbage, KeyPath: garbage}, "tls.server.certPath"},
		{"key file not PEM", TLSOptions{CertPath: ecCert, KeyPath: garbage}, "tls.server.keyPath"},
		{"unknown client auth", TLSOptions{TestMode: true, NeedClientAuth: "always"}, "tls.server.need.client.auth"},
		{"missing trust file", TLSOptions{TestMode: true, NeedClientAuth: "require", AuthClient: true, TrustCertPath: "/nonexistent/ca.pem"}, "tls.server.trustCertPath"},
		{"trust file not PEM", TLSOptions{TestMode: true, NeedClientAuth: "require", AuthClient: true, TrustCertPath: garbage}, "tls.server.trustCertPath"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := NewServerTLSConfig(tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Certificates[0].Leaf.Subject.CommonName; got == "localhost" {
				t.Fatalf("the configured certificate was not used (got %q)", got)
			}
		})
	}
}

func TestSelfSignedCertificate(t *testing.T) {
	cfg, err := NewServerTLSConfig(TLSOptions{TestMode: true})
	if err != nil {
		t.Fatal(err)
	}
	leaf := cfg.Certificates[0].Leaf
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("key %T", leaf.PublicKey)
	}
	if now := time.Now(); now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		t.Fatalf("not valid now: %v - %v", leaf.NotBefore, leaf.NotAfter)
	}
	if err := leaf.VerifyHostname("localhost"); err != nil {
		t.Fatal(err)
	}
	other, err := NewServerTLSConfig(TLSOptions{TestMode: true})
	if err != nil {
		t.Fatal(err)
	}
	if other.Certificates[0].Leaf.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
		t.Fatal("two starts generated the same certificate")
	}
}

// tls.server.need.client.auth with and without tls.server.authClient.
func TestClientAuthentication(t *testing.T) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := issue(t, "test CA", caKey, nil, nil, true)
	trust := writePEM(t, "ca.pem", certBlock(ca))
	clientKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	trusted := tls.Certificate{Certificate: [][]byte{issue(t, "client", clientKey, ca, caKey, false).Raw}, PrivateKey: clientKey}
	strangerKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	stranger := tls.Certificate{Certificate: [][]byte{issue(t, "stranger", strangerKey, nil, nil, false).Raw}, PrivateKey: strangerKey}

	type client struct {
		name   string
		cert   *tls.Certificate
		served bool
	}
	tests := []struct {
		need       string
		authClient bool
		want       tls.ClientAuthType
		clients    []client
	}{
		{"none", false, tls.NoClientCert, []client{{"no cert", nil, true}, {"stranger", &stranger, true}}},
		{"optional", false, tls.RequestClientCert, []client{{"no cert", nil, true}, {"stranger", &stranger, true}}},
		{"optional", true, tls.VerifyClientCertIfGiven, []client{{"no cert", nil, true}, {"trusted", &trusted, true}, {"stranger", &stranger, false}}},
		{"require", false, tls.RequireAnyClientCert, []client{{"no cert", nil, false}, {"stranger", &stranger, true}}},
		{"require", true, tls.RequireAndVerifyClientCert, []client{{"no cert", nil, false}, {"trusted", &trusted, true}, {"stranger", &stranger, false}}},
	}
	for _, tc := range tests {
		t.Run(tc.need+"/authClient="+map[bool]string{true: "true", false: "false"}[tc.authClient], func(t *testing.T) {
			cfg, err := NewServerTLSConfig(TLSOptions{TestMode: true, NeedClientAuth: tc.need, AuthClient: tc.authClient, TrustCertPath: trust})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ClientAuth != tc.want {
				t.Fatalf("ClientAuth %v, want %v", cfg.ClientAuth, tc.want)
			}
			s, _ := startTLSServer(t, TLSEnforcing, ServerConfig{TLS: cfg}, echoMux())
			for _, cl := range tc.clients {
				ct := clientTLS()
				if cert := cl.cert; cert != nil {
					// Sent even when its issuer is not among the
					// authorities the server names.
					ct.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
				}
				c, err := Dial(testCtx(t), s.Addr().String(), ClientOptions{TLS: ct})
				if err == nil {
					// TLS 1.3 reports a refused client certificate on the
					// first read.
					_, err = c.Invoke(testCtx(t), NewRequest(SendMessage, nil, nil))
					_ = c.Close()
				}
				if served := err == nil; served != cl.served {
					t.Errorf("%s: served %v (%v), want %v", cl.name, served, err, cl.served)
				}
			}
		})
	}
}
