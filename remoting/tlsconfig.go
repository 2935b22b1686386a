package remoting

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"
	"time"
)

// Client authentication settings of tls.server.need.client.auth.
const (
	// ClientAuthNone asks no certificate of the client (the default).
	ClientAuthNone = "none"
	// ClientAuthOptional asks for a certificate the client may withhold.
	ClientAuthOptional = "optional"
	// ClientAuthRequire closes connections whose client sends none.
	ClientAuthRequire = "require"
)

// TLSOptions are a server's TLS settings under RocketMQ's meaning (the
// tls.* properties of TlsSystemConfig). NewServerTLSConfig turns them into
// a tls.Config.
type TLSOptions struct {
	// TestMode is tls.test.mode.enable: when no certificate is given, a
	// self-signed one is generated at start, so that clients that do not
	// verify the server (the Go client's WithTls, Java's default) connect
	// out of the box. Without it a certificate is required.
	TestMode bool
	// CertPath is tls.server.certPath: the server's certificate chain,
	// PEM, leaf first.
	CertPath string
	// KeyPath is tls.server.keyPath: the certificate's private key, PEM
	// (PKCS#8 as RocketMQ requires, or PKCS#1 / SEC 1).
	KeyPath string
	// KeyPassword is tls.server.keyPassword: the password of an encrypted
	// key (PKCS#8 "ENCRYPTED PRIVATE KEY" with PBES2, or a legacy
	// encrypted PEM block).
	KeyPassword string
	// NeedClientAuth is tls.server.need.client.auth: ClientAuthNone,
	// ClientAuthOptional or ClientAuthRequire ("" is none).
	NeedClientAuth string
	// AuthClient is tls.server.authClient: verify the certificates
	// clients send against TrustCertPath. Without it any certificate is
	// accepted unverified.
	AuthClient bool
	// TrustCertPath is tls.server.trustCertPath: the PEM certificates of
	// the authorities client certificates must chain to; empty uses the
	// system's roots.
	TrustCertPath string
}

// NewServerTLSConfig builds the TLS configuration of a server from
// RocketMQ's settings. Errors name the setting at fault.
func NewServerTLSConfig(o TLSOptions) (*tls.Config, error) {
	var cert tls.Certificate
	var err error
	switch {
	case o.CertPath != "" || o.KeyPath != "":
		if o.CertPath == "" || o.KeyPath == "" {
			return nil, errors.New("tls.server.certPath and tls.server.keyPath must be set together")
		}
		cert, err = LoadKeyPair(o.CertPath, o.KeyPath, o.KeyPassword)
	case o.TestMode:
		cert, err = SelfSignedCertificate()
	default:
		return nil, errors.New("TLS needs a certificate: set tls.server.certPath and tls.server.keyPath, or tls.test.mode.enable=true for a self-signed one")
	}
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}
	switch strings.ToLower(strings.TrimSpace(o.NeedClientAuth)) {
	case "", ClientAuthNone:
		cfg.ClientAuth = tls.NoClientCert
	case ClientAuthOptional:
		cfg.ClientAuth = tls.RequestClientCert
		if o.AuthClient {
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		}
	case ClientAuthRequire:
		cfg.ClientAuth = tls.RequireAnyClientCert
		if o.AuthClient {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	default:
		return nil, fmt.Errorf("tls.server.need.client.auth %q is not one of none, optional, require", o.NeedClientAuth)
	}
	if o.AuthClient && o.TrustCertPath != "" {
		pool, err := loadCertPool(o.TrustCertPath)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
	}
	return cfg, nil
}

// SelfSignedCertificate generates a self-signed ECDSA P-256 certificate
// for "localhost" and the loopback addresses, valid for a year. It is what
// a server in TLS test mode presents when no certificate is configured.
func SelfSignedCertificate() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate: serial number: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "localhost", Organization: []string{"rocketkv self-signed"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// LoadKeyPair loads a PEM certificate chain and its PEM private key
// (PKCS#8, or PKCS#1/SEC 1, encrypted with password when it is), as
// NewServerTLSConfig loads tls.server.certPath and tls.server.keyPath;
// errors name those keys.
func LoadKeyPair(certPath, keyPath, password string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls.server.certPath: %w", err)
	}
	var cert tls.Certificate
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			cert.Certificate = append(cert.Certificate, b.Bytes)
		}
	}
	if len(cert.Certificate) == 0 {
		return tls.Certificate{}, fmt.Errorf("tls.server.certPath %s: no PEM CERTIFICATE block", certPath)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls.server.certPath %s: %w", certPath, err)
	}
	cert.Leaf = leaf
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls.server.keyPath: %w", err)
	}
	key, err := parsePrivateKeyPEM(keyPEM, password)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls.server.keyPath %s: %w", keyPath, err)
	}
	pub, ok := key.(interface{ Public() crypto.PublicKey })
	if !ok {
		return tls.Certificate{}, fmt.Errorf("tls.server.keyPath %s: unsupported key type %T", keyPath, key)
	}
	if !publicKeysEqual(pub.Public(), leaf.PublicKey) {
		return tls.Certificate{}, fmt.Errorf("tls.server.keyPath %s is not the key of the certificate in tls.server.certPath %s", keyPath, certPath)
	}
	cert.PrivateKey = key
	return cert, nil
}

// publicKeysEqual compares two public keys of the types crypto/tls serves.
func publicKeysEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	switch k := a.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
		return k.(equaler).Equal(b)
	default:
		return false
	}
}

// parsePrivateKeyPEM reads the first private key of a PEM text: PKCS#8,
// encrypted PKCS#8 (PBES2), PKCS#1 RSA or SEC 1 EC, the last two possibly
// in a legacy encrypted PEM block. password decrypts an encrypted key.
func parsePrivateKeyPEM(data []byte, password string) (crypto.PrivateKey, error) {
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("no PEM private key block")
		}
		der := b.Bytes
		switch b.Type {
		case "ENCRYPTED PRIVATE KEY":
			if password == "" {
				return nil, errors.New("the key is encrypted and tls.server.keyPassword is empty")
			}
			plain, err := decryptPKCS8(der, []byte(password))
			if err != nil {
				return nil, fmt.Errorf("decrypt with tls.server.keyPassword: %w", err)
			}
			key, err := parseKeyDER("PRIVATE KEY", plain)
			if err != nil {
				return nil, fmt.Errorf("tls.server.keyPassword is wrong or the key is corrupt: %w", err)
			}
			return key, nil
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			//nolint:staticcheck // legacy encrypted PEM keys are still met
			if x509.IsEncryptedPEMBlock(b) {
				if password == "" {
					return nil, errors.New("the key is encrypted and tls.server.keyPassword is empty")
				}
				plain, err := x509.DecryptPEMBlock(b, []byte(password)) //nolint:staticcheck // as above
				if err != nil {
					return nil, fmt.Errorf("decrypt with tls.server.keyPassword: %w", err)
				}
				der = plain
			}
			return parseKeyDER(b.Type, der)
		}
	}
}

// parseKeyDER parses a private key of the given PEM type.
func parseKeyDER(typ string, der []byte) (crypto.PrivateKey, error) {
	var key crypto.PrivateKey
	var err error
	switch typ {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(der)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(der)
	default:
		key, err = x509.ParsePKCS8PrivateKey(der)
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", typ, err)
	}
	return key, nil
}

// loadCertPool reads the PEM certificates of tls.server.trustCertPath.
func loadCertPool(path string) (*x509.CertPool, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tls.server.trustCertPath: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return nil, fmt.Errorf("tls.server.trustCertPath %s: no PEM certificate", path)
	}
	return pool, nil
}

// ServerTLS reads a server's TLS mode (RocketMQ's tls.server.mode name)
// and, unless it is disabled, builds the TLS configuration from o: the two
// TLS fields of a ServerConfig.
func ServerTLS(mode string, o TLSOptions) (TLSMode, *tls.Config, error) {
	m, err := ParseTLSMode(mode)
	if err != nil {
		return 0, nil, fmt.Errorf("tls.server.mode: %w", err)
	}
	if m == TLSDisabled {
		return m, nil, nil
	}
	cfg, err := NewServerTLSConfig(o)
	if err != nil {
		return 0, nil, err
	}
	return m, cfg, nil
}

// DescribeTLS summarises a server TLS configuration for a log line: the
// certificate's subject and expiry and the client authentication.
func DescribeTLS(cfg *tls.Config) string {
	if cfg == nil || len(cfg.Certificates) == 0 || cfg.Certificates[0].Leaf == nil {
		return "no certificate"
	}
	leaf := cfg.Certificates[0].Leaf
	return fmt.Sprintf("certificate %q (issuer %q, expires %s), client auth %s",
		leaf.Subject.String(), leaf.Issuer.String(), leaf.NotAfter.Format(time.DateOnly), cfg.ClientAuth)
}
