package controller

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/internal/tlsconf"
	"github.com/rocketkv/rocketkv/remoting"
)

// TestStartHostFreePort: a single peer at port 0 is served on a free port,
// which GET_METADATA_INFO names as the leader's address.
func TestStartHostFreePort(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Peers = "n0-127.0.0.1:0"
	h := startTestHost(t, Options{Config: cfg, Log: zerolog.Nop()}, remoting.ServerConfig{})
	if err := h.Controller.WaitLeader(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	cl := dial(t, h.Addr())
	md := invoke(t, cl, remoting.ControllerGetMetadataInfo, nil, nil)
	if md.ExtFields["controllerLeaderAddress"] != h.Addr() || md.ExtFields["isLeader"] != "true" {
		t.Fatalf("metadata %v, served on %s", md.ExtFields, h.Addr())
	}
}

// StartHost serves the raft port with the listener's TLS: two hosts
// enforcing TLS that dial with it (tls.enable) say their raft port
// enforces it and elect a leader (a raft port left in plaintext would
// refuse their TLS dials).
func TestStartHostRaftTakesTheListenersTLS(t *testing.T) {
	peers := twoPeers(t)
	mode, tc, err := remoting.ServerTLS("enforcing", remoting.TLSOptions{TestMode: true})
	if err != nil {
		t.Fatal(err)
	}
	var hosts []*Host
	for _, id := range []string{"n0", "n1"} {
		cfg := testConfig(t.TempDir())
		cfg.Peers, cfg.SelfID = peers, id
		logs := &testutil.SyncBuffer{}
		h, err := StartHost(context.Background(), Options{Config: cfg, Log: zerolog.New(logs), ClientTLS: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // a self-signed test certificate
			remoting.ServerConfig{Addr: "127.0.0.1:0", TLSMode: mode, TLS: tc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = h.Shutdown(ctx)
		})
		if !strings.Contains(logs.String(), `"tlsMode":"enforcing"`) {
			t.Fatalf("%s: no log line of the raft transport's TLS:\n%s", id, logs)
		}
		hosts = append(hosts, h)
	}
	for _, h := range hosts {
		if err := h.Controller.WaitLeader(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// A host given a TLS watcher (tlsconf.WatchedListener, which bin/controller
// and the name server's embedded controller use) serves a certificate
// renewed on disk to new connections without a restart.
func TestStartHostReloadsItsCertificate(t *testing.T) {
	pki := testutil.NewPKI(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "ctl.pem"), filepath.Join(dir, "ctl.key")
	aCert, aKey := pki.Issue(t, "ctl-a")
	bCert, bKey := pki.Issue(t, "ctl-b")
	testutil.CopyFile(t, aCert, cert)
	testutil.CopyFile(t, aKey, key)
	set := configs.TLS{Mode: configs.TLSModeEnforcing, CertPath: cert, KeyPath: key}
	mode, tc, w, err := tlsconf.WatchedListener("controller", set, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if w == nil {
		t.Fatal("no watcher for a listener with certificate files")
	}
	cfg := testConfig(t.TempDir())
	cfg.Peers = "n0-127.0.0.1:0"
	h := startTestHost(t, Options{Config: cfg, Log: zerolog.Nop(), TLSWatch: w}, remoting.ServerConfig{TLSMode: mode, TLS: tc})
	if got := testutil.ServedCertName(t, h.Addr()); got != "ctl-a" {
		t.Fatalf("served %q at start, want ctl-a", got)
	}
	testutil.CopyFile(t, bCert, cert)
	testutil.CopyFile(t, bKey, key)
	testutil.AwaitServedCert(t, h.Addr(), "ctl-b")
}

// startTestHost starts a Host of opts on scfg, shut down when the test
// ends.
func startTestHost(t *testing.T, opts Options, scfg remoting.ServerConfig) *Host {
	t.Helper()
	h, err := StartHost(context.Background(), opts, scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return h
}
