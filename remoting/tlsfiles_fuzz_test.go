package remoting

import (
	"crypto"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadKeyPair feeds arbitrary bytes as the files of tls.server.certPath
// and tls.server.keyPath (with a password) to LoadKeyPair, and the
// certificate file as tls.server.trustCertPath to loadCertPool. A pair that
// loads holds the first certificate block, parsed, as its leaf and the key
// of that certificate; every refusal names the setting whose file is at
// fault.
func FuzzLoadKeyPair(f *testing.F) {
	crt, err := os.ReadFile(filepath.Join("testdata", "tls", "server.crt"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range []string{"server-pkcs8.key", "server-pkcs8-aes256.key", "server-pkcs8-des3.key", "server-legacy-aes128.key"} {
		key, err := os.ReadFile(filepath.Join("testdata", "tls", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(crt, key, "rocketkv")
		f.Add(append(append([]byte("junk\n"), crt...), crt...), key, "rocketkv")
	}
	f.Add(crt, crt, "")
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), []byte{}, "")
	dir := f.TempDir()
	certPath, keyPath := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	f.Fuzz(func(t *testing.T, certPEM, keyPEM []byte, password string) {
		if err := os.WriteFile(certPath, certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		cert, err := LoadKeyPair(certPath, keyPath, password)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "tls.server.certPath") && !strings.HasPrefix(msg, "tls.server.keyPath") {
				t.Fatalf("error names no setting: %v", err)
			}
		} else {
			if cert.Leaf == nil || len(cert.Certificate) == 0 || string(cert.Leaf.Raw) != string(cert.Certificate[0]) {
				t.Fatalf("loaded a pair whose leaf is not its first certificate: %+v", cert)
			}
			pub, ok := cert.PrivateKey.(interface{ Public() crypto.PublicKey })
			if !ok || !publicKeysEqual(pub.Public(), cert.Leaf.PublicKey) {
				t.Fatalf("loaded a %T key that is not the certificate's", cert.PrivateKey)
			}
		}
		if _, err := loadCertPool(serverKeys.trust, certPath); err != nil && !strings.HasPrefix(err.Error(), "tls.server.trustCertPath") {
			t.Fatalf("trust file error names no setting: %v", err)
		}
	})
}
