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
		pool, err := loadCertPool(serverKeys.trust, o.TrustCertPath)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
	}
	return cfg, nil
}

// ClientTLSOptions are the TLS settings of a process's client connections
// under RocketMQ's meaning (the tls.client.* properties of
// TlsSystemConfig). NewClientTLSConfig turns them into a tls.Config.
type ClientTLSOptions struct {
	// CertPath is tls.client.certPath: the certificate chain presented
	// to servers that ask for one, PEM, leaf first. Empty presents none.
	CertPath string
	// KeyPath is tls.client.keyPath: the certificate's private key, PEM,
	// in the formats TLSOptions.KeyPath takes.
	KeyPath string
	// KeyPassword is tls.client.keyPassword: the password of an
	// encrypted KeyPath.
	KeyPassword string
	// AuthServer is tls.client.authServer: verify the servers'
	// certificates against TrustCertPath. Without it any certificate is
	// accepted unverified, RocketMQ's default.
	AuthServer bool
	// TrustCertPath is tls.client.trustCertPath: the PEM certificates of
	// the authorities server certificates must chain to; empty uses the
	// system's roots.
	TrustCertPath string
}

// NewClientTLSConfig builds the TLS configuration of a process's client
// connections from RocketMQ's settings; errors name the setting at fault.
//
// With AuthServer the server's chain must lead to a trusted authority and
// the certificate be fit for server authentication, but its names are
// not matched against the address dialed: RocketMQ's Netty client makes
// its TLS engine without the peer's host, so it checks no host name
// either (brokers and name servers are mostly dialed by IP address). The
// client certificate is presented whenever the server asks for one, even
// when its issuer is not among the authorities the server names, and the
// server decides.
func NewClientTLSConfig(o ClientTLSOptions) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is verified by VerifyConnection under AuthServer
		// (without the host name check crypto/tls would add); without
		// it, not at all, as RocketMQ's client.
		InsecureSkipVerify: true, //nolint:gosec // see above
	}
	if o.CertPath != "" || o.KeyPath != "" {
		if o.CertPath == "" || o.KeyPath == "" {
			return nil, errors.New("tls.client.certPath and tls.client.keyPath must be set together")
		}
		cert, err := loadKeyPair(clientKeys, o.CertPath, o.KeyPath, o.KeyPassword)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	if o.AuthServer {
		var roots *x509.CertPool // nil: the system's roots
		if o.TrustCertPath != "" {
			pool, err := loadCertPool(clientKeys.trust, o.TrustCertPath)
			if err != nil {
				return nil, err
			}
			roots = pool
		}
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return verifyServerChain(cs.PeerCertificates, roots) }
	}
	return cfg, nil
}

// verifyServerChain checks a server's certificate chain, leaf first,
// against roots (nil: the system's), as tls.client.authServer asks.
func verifyServerChain(chain []*x509.Certificate, roots *x509.CertPool) error {
	if len(chain) == 0 {
		return errors.New("tls.client.authServer: the server sent no certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := chain[0].Verify(opts); err != nil {
		return fmt.Errorf("tls.client.authServer: server certificate %q is not trusted: %w", chain[0].Subject.String(), err)
	}
	return nil
}

// DescribeClientTLS summarises a client TLS configuration that
// NewClientTLSConfig built, for a log line.
func DescribeClientTLS(cfg *tls.Config) string {
	if cfg == nil {
		return "plaintext"
	}
	cert := "no client certificate"
	if cfg.GetClientCertificate != nil {
		if c, err := cfg.GetClientCertificate(nil); err == nil && c != nil && c.Leaf != nil {
			cert = fmt.Sprintf("client certificate %q (issuer %q, expires %s)",
				c.Leaf.Subject.String(), c.Leaf.Issuer.String(), c.Leaf.NotAfter.Format(time.DateOnly))
		}
	}
	verify := "server certificates not verified"
	if cfg.VerifyConnection != nil {
		verify = "server certificates verified"
	}
	return cert + ", " + verify
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
	return loadKeyPair(serverKeys, certPath, keyPath, password)
}

// keyNames are the names of the keys a certificate and its private key
// are read from, for errors: tls.server.* or tls.client.*.
type keyNames struct {
	cert, key, password, trust string
}

var (
	serverKeys = keyNames{cert: "tls.server.certPath", key: "tls.server.keyPath",
		password: "tls.server.keyPassword", trust: "tls.server.trustCertPath"}
	clientKeys = keyNames{cert: "tls.client.certPath", key: "tls.client.keyPath",
		password: "tls.client.keyPassword", trust: "tls.client.trustCertPath"}
)

// loadKeyPair is LoadKeyPair with errors naming the keys of names.
func loadKeyPair(names keyNames, certPath, keyPath, password string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %w", names.cert, err)
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
		return tls.Certificate{}, fmt.Errorf("%s %s: no PEM CERTIFICATE block", names.cert, certPath)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s %s: %w", names.cert, certPath, err)
	}
	cert.Leaf = leaf
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %w", names.key, err)
	}
	key, err := parsePrivateKeyPEM(keyPEM, password, names.password)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s %s: %w", names.key, keyPath, err)
	}
	pub, ok := key.(interface{ Public() crypto.PublicKey })
	if !ok {
		return tls.Certificate{}, fmt.Errorf("%s %s: unsupported key type %T", names.key, keyPath, key)
	}
	if !publicKeysEqual(pub.Public(), leaf.PublicKey) {
		return tls.Certificate{}, fmt.Errorf("%s %s is not the key of the certificate in %s %s", names.key, keyPath, names.cert, certPath)
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
// in a legacy encrypted PEM block. password, the value of the key named
// passwordKey, decrypts an encrypted key.
func parsePrivateKeyPEM(data []byte, password, passwordKey string) (crypto.PrivateKey, error) {
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
				return nil, fmt.Errorf("the key is encrypted and %s is empty", passwordKey)
			}
			plain, err := decryptPKCS8(der, []byte(password))
			if err != nil {
				return nil, fmt.Errorf("decrypt with %s: %w", passwordKey, err)
			}
			key, err := parseKeyDER("PRIVATE KEY", plain)
			if err != nil {
				return nil, fmt.Errorf("%s is wrong or the key is corrupt: %w", passwordKey, err)
			}
			return key, nil
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			//nolint:staticcheck // legacy encrypted PEM keys are still met
			if x509.IsEncryptedPEMBlock(b) {
				if password == "" {
					return nil, fmt.Errorf("the key is encrypted and %s is empty", passwordKey)
				}
				plain, err := x509.DecryptPEMBlock(b, []byte(password)) //nolint:staticcheck // as above
				if err != nil {
					return nil, fmt.Errorf("decrypt with %s: %w", passwordKey, err)
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

// loadCertPool reads the PEM certificates of a trustCertPath key, named
// key.
func loadCertPool(key, path string) (*x509.CertPool, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return nil, fmt.Errorf("%s %s: no PEM certificate", key, path)
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
