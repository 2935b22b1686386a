package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a test certificate authority whose certificate and key live in a
// test directory, for tests of TLS with certificates that verify (mutual
// TLS, tls.client.authServer).
type PKI struct {
	// CAPath is the PEM file of the authority's certificate, what a
	// trustCertPath key names.
	CAPath string
	dir    string
	ca     *x509.Certificate
	key    *ecdsa.PrivateKey
}

// NewPKI makes a certificate authority in a directory of t's.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{dir: t.TempDir()}
	p.key = newKey(t)
	p.ca = createCert(t, "rocketkv test CA", true, &p.key.PublicKey, nil, p.key)
	p.CAPath = writePEMFile(t, filepath.Join(p.dir, "ca.pem"), "CERTIFICATE", p.ca.Raw)
	return p
}

// Issue makes a certificate signed by the authority, fit for servers and
// clients alike, for "localhost" and the loopback addresses, and returns
// the paths of its PEM certificate and its PEM PKCS#8 key (the files of
// certPath and keyPath keys).
func (p *PKI) Issue(t testing.TB, name string) (certPath, keyPath string) {
	t.Helper()
	key := newKey(t)
	return p.write(t, name, createCert(t, name, false, &key.PublicKey, p.ca, p.key), key)
}

// SelfSigned makes a certificate like Issue's that the authority did not
// sign: a stranger to anyone trusting CAPath.
func (p *PKI) SelfSigned(t testing.TB, name string) (certPath, keyPath string) {
	t.Helper()
	key := newKey(t)
	return p.write(t, name, createCert(t, name, false, &key.PublicKey, nil, key), key)
}

// Reissue makes a new certificate like Issue's for the key in keyPath
// (a renewal that keeps the key) and returns its PEM file's path.
func (p *PKI) Reissue(t testing.TB, name, keyPath string) string {
	t.Helper()
	raw, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatalf("%s holds no PEM block", keyPath)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		t.Fatalf("%s holds a %T, want an ECDSA key", keyPath, parsed)
	}
	cert := createCert(t, name, false, &key.PublicKey, p.ca, p.key)
	return writePEMFile(t, filepath.Join(p.dir, name+".pem"), "CERTIFICATE", cert.Raw)
}

func (p *PKI) write(t testing.TB, name string, cert *x509.Certificate, key *ecdsa.PrivateKey) (string, string) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEMFile(t, filepath.Join(p.dir, name+".pem"), "CERTIFICATE", cert.Raw),
		writePEMFile(t, filepath.Join(p.dir, name+".key"), "PRIVATE KEY", der)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// createCert makes a certificate for pub signed by parent and parentKey;
// a nil parent makes it self-signed.
func createCert(t testing.TB, cn string, ca bool, pub *ecdsa.PublicKey, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if ca {
		tmpl.IsCA, tmpl.KeyUsage, tmpl.ExtKeyUsage = true, x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature, nil
		tmpl.DNSNames, tmpl.IPAddresses = nil, nil
	}
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func writePEMFile(t testing.TB, path, typ string, der []byte) string {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
