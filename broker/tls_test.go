package broker

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

func insecureTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // as the RocketMQ Go client's WithTls
}

// canSend reports whether a send over a new connection to the broker,
// TLS or not, is stored.
func canSend(t *testing.T, tb *testBroker, secure bool) bool {
	t.Helper()
	opts := remoting.ClientOptions{}
	if secure {
		opts.TLS = insecureTLS()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := remoting.Dial(ctx, tb.Addr(), opts)
	if err != nil {
		return false
	}
	defer c.Close()
	resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.SendMessageV2, map[string]string{
		"a": "PG", "b": "TlsTopic", "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "",
	}, []byte("over the wire")))
	return err == nil && resp.Code == remoting.Success
}

// The broker's listener follows tls.server.mode; by default (permissive,
// self-signed) TLS and plaintext producers both send.
func TestBrokerTLSModes(t *testing.T) {
	for _, tc := range []struct {
		mode              string
		plainOK, secureOK bool
	}{
		{"", true, true}, // the default: permissive
		{"enforcing", false, true},
		{"disabled", true, false},
	} {
		t.Run("mode="+tc.mode, func(t *testing.T) {
			o := map[string]string{"tls.config.file": ""}
			if tc.mode != "" {
				o["tls.server.mode"] = tc.mode
			}
			tb := startTestBroker(t, o)
			if got := canSend(t, tb, false); got != tc.plainOK {
				t.Errorf("plaintext send %v, want %v", got, tc.plainOK)
			}
			if got := canSend(t, tb, true); got != tc.secureOK {
				t.Errorf("TLS send %v, want %v", got, tc.secureOK)
			}
		})
	}
}

// A broker that cannot load its certificate does not start, and says
// which key is wrong.
func TestBrokerTLSStartErrors(t *testing.T) {
	for _, tc := range []struct {
		settings map[string]string
		want     string
	}{
		{map[string]string{"tls.server.certPath": "/nonexistent/c.pem", "tls.server.keyPath": "/nonexistent/k.pem"}, "tls.server.certPath"},
		{map[string]string{"tls.test.mode.enable": "false"}, "tls.server.certPath"},
		{map[string]string{"tls.config.file": "/"}, "tls.config.file"},
		// The keys of the broker's own TLS connections (tls.enable).
		{map[string]string{"tls.enable": "true", "tls.client.certPath": "/nonexistent/c.pem", "tls.client.keyPath": "/nonexistent/k.pem"}, "tls.client.certPath"},
		{map[string]string{"tls.enable": "true", "tls.client.authServer": "true", "tls.client.trustCertPath": "/nonexistent/ca.pem"}, "tls.client.trustCertPath"},
	} {
		tc.settings["storePathRootDir"] = t.TempDir()
		tc.settings["listenPort"] = "0"
		if _, ok := tc.settings["tls.config.file"]; !ok {
			tc.settings["tls.config.file"] = ""
		}
		err := startError(t, tc.settings)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %s", tc.settings, err, tc.want)
		}
	}
}

// With the name server enforcing TLS, a broker enforcing it too registers
// over TLS (tls.enable follows the mode, as RocketMQ); one told
// tls.enable=false cannot register.
func TestBrokerRegistersWithATLSNameServer(t *testing.T) {
	cfg := namesrv.DefaultConfig()
	cfg.Remoting.Addr = "127.0.0.1:0"
	cfg.Remoting.EventLoops = 1
	cfg.TLS.Mode = "enforcing"
	cfg.TLS.ConfigFile = ""
	ns := startNameServerWith(t, cfg, zerolog.Nop())

	startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String(), "tls.server.mode": "enforcing",
		"tls.config.file": "", "brokerName": "broker-tls"})
	waitFor(t, "the TLS registration", func() bool { return len(ns.Registry().MemberGroup("broker-tls")) == 1 })

	startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String(), "tls.server.mode": "enforcing",
		"tls.enable": "false", "tls.config.file": "", "brokerName": "broker-plain"})
	time.Sleep(500 * time.Millisecond)
	if len(ns.Registry().MemberGroup("broker-plain")) != 0 {
		t.Fatal("a plaintext registration reached an enforcing name server")
	}
}

// As RocketMQ's broker (FileWatchService over tls.server.*), a
// certificate renewed on disk is served to new connections without a
// restart, by a broker of its own and behind a controller-mode
// Supervisor's servers alike.
func TestBrokerReloadsItsCertificate(t *testing.T) {
	pki := testutil.NewPKI(t)
	aCert, aKey := pki.Issue(t, "broker-a")
	bCert, bKey := pki.Issue(t, "broker-b")
	files := func(t *testing.T) (cert, key string) {
		dir := t.TempDir()
		cert, key = filepath.Join(dir, "broker.pem"), filepath.Join(dir, "broker.key")
		testutil.CopyFile(t, aCert, cert)
		testutil.CopyFile(t, aKey, key)
		return cert, key
	}
	renew := func(t *testing.T, addr, cert, key string) {
		if got := testutil.ServedCertName(t, addr); got != "broker-a" {
			t.Fatalf("served %q at start, want broker-a", got)
		}
		testutil.CopyFile(t, bCert, cert)
		testutil.CopyFile(t, bKey, key)
		testutil.AwaitServedCert(t, addr, "broker-b")
	}
	t.Run("broker", func(t *testing.T) {
		cert, key := files(t)
		tb := startTestBroker(t, map[string]string{"tls.server.mode": "enforcing", "tls.config.file": "",
			"tls.server.certPath": cert, "tls.server.keyPath": key})
		renew(t, tb.Addr(), cert, key)
		if !canSend(t, tb, true) {
			t.Fatal("no send over TLS after the reload")
		}
	})
	t.Run("controller mode", func(t *testing.T) {
		cert, key := files(t)
		c := newCtlBroker(t, startTestController(t, false, true), "")
		c.settings["tls.server.mode"] = "enforcing"
		c.settings["tls.config.file"] = ""
		c.settings["tls.server.certPath"] = cert
		c.settings["tls.server.keyPath"] = key
		c.settings["tls.enable"] = "false" // the test's controller is plaintext
		c.start()
		renew(t, c.addr(), cert, key)
	})
}
