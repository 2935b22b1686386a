package testutil

import (
	"crypto/tls"
	"net"
	"os"
	"testing"
	"time"
)

// ServedCertName is the common name of the certificate a TLS server at
// addr presents to a new connection now.
func ServedCertName(t testing.TB, addr string) string {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test reads what is served
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// AwaitServedCert waits until the server at addr presents the
// certificate named want to new connections (a hang guard of 20 s: a
// reload runs within a second or two).
func AwaitServedCert(t testing.TB, addr, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := ServedCertName(t, addr)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still presents %q, want %q", addr, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// CopyFile replaces dst's content with src's.
func CopyFile(t testing.TB, src, dst string) {
	t.Helper()
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}
