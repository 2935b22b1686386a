package grpcproxy

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/certwatch"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// servedName is the common name of the certificate a new TLS connection
// to addr is served.
func servedName(t *testing.T, addr string) string {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) // #nosec G402 -- the test reads what is served
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// awaitPasses waits until the reloader has checked the files n more
// times.
func awaitPasses(t *testing.T, r *certwatch.Watcher, n int64) {
	t.Helper()
	want := r.Passes() + n
	deadline := time.Now().Add(10 * time.Second)
	for r.Passes() < want {
		if time.Now().After(deadline) {
			t.Fatalf("the certificate files were checked %d times in 10 s, want %d", r.Passes(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// As RocketMQ 5.3.4's proxy, the gRPC port takes a new certificate when
// its certificate and key files have both changed, for the connections
// that follow; a new certificate whose key is not written yet, or a pair
// that does not load, leaves the certificate served as it was (package
// certwatch's tests cover a renewal that keeps its key).
func TestGRPCPortReloadsItsCertificate(t *testing.T) {
	dir := t.TempDir()
	aCert, aKey := writeCertificate(t, dir, "a.example")
	bCert, bKey := writeCertificate(t, dir, "b.example")
	cCert, _ := writeCertificate(t, dir, "c.example")
	certPath, keyPath := filepath.Join(dir, "served.crt"), filepath.Join(dir, "served.key")
	testutil.CopyFile(t, aCert, certPath)
	testutil.CopyFile(t, aKey, keyPath)

	mode, tc, err := remoting.ServerTLS(configs.TLSModePermissive, remoting.TLSOptions{CertPath: certPath, KeyPath: keyPath})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Addr, cfg.NamesrvAddrs, cfg.RequestTimeout = "127.0.0.1:0", []string{"127.0.0.1:1"}, time.Second
	cfg.TLSMode, cfg.TLS = mode, tc
	cfg.CertWatch = CertWatch{Interval: 10 * time.Millisecond, CertPath: certPath, KeyPath: keyPath}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	addr := s.Addr().String()
	if got := servedName(t, addr); got != "a.example" {
		t.Fatalf("served %s at start, want a.example", got)
	}

	testutil.CopyFile(t, bCert, certPath)
	awaitPasses(t, s.certs, 3)
	if got := servedName(t, addr); got != "a.example" {
		t.Fatalf("served %s after the certificate file alone changed, want a.example still", got)
	}
	testutil.CopyFile(t, bKey, keyPath)
	awaitPasses(t, s.certs, 2)
	if got := servedName(t, addr); got != "b.example" {
		t.Fatalf("served %s after both files changed, want b.example", got)
	}

	// c's certificate with a's key: both files change, the pair does
	// not load, b stays.
	testutil.CopyFile(t, cCert, certPath)
	testutil.CopyFile(t, aKey, keyPath)
	awaitPasses(t, s.certs, 3)
	if got := servedName(t, addr); got != "b.example" {
		t.Fatalf("served %s after a pair that does not load, want b.example still", got)
	}
}

// tlsCertWatchIntervalMs reaches the proxy's Config with the certificate
// files in use; a self-signed certificate has none to watch.
func TestConfigFromCertWatch(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCertificate(t, dir, "w.example")
	loaded, err := configs.LoadProxy("", map[string]string{"tls.config.file": "", "tls.server.certPath": cert,
		"tls.server.keyPath": key, "tlsCertWatchIntervalMs": "1500"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := ConfigFrom(loaded.Proxy, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if want := (CertWatch{Interval: 1500 * time.Millisecond, CertPath: cert, KeyPath: key}); c.CertWatch != want {
		t.Errorf("CertWatch %+v, want %+v", c.CertWatch, want)
	}
	loaded, err = configs.LoadProxy("", map[string]string{"tls.config.file": ""})
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Proxy.TLSCertWatchInterval != time.Hour {
		t.Errorf("tlsCertWatchIntervalMs defaults to %v, RocketMQ's is 1 h", loaded.Proxy.TLSCertWatchInterval)
	}
	if c, err = ConfigFrom(loaded.Proxy, zerolog.Nop()); err != nil || c.CertWatch.enabled() {
		t.Errorf("self-signed: CertWatch %+v, %v; want none", c.CertWatch, err)
	}
}
