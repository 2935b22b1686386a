package grpcproxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/internal/clustertest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// startTLSNamesrv starts a name server on a loopback port whose listener
// runs mode, with the certificate of certPath and keyPath, requiring
// client certificates signed by the CA of caPath unless that is empty.
func startTLSNamesrv(t *testing.T, mode, certPath, keyPath, caPath string) string {
	t.Helper()
	return clustertest.StartNamesrvWith(t, func(cfg *namesrv.Config) {
		cfg.Remoting.EventLoops = 1
		cfg.TLS.Mode, cfg.TLS.ConfigFile = mode, ""
		cfg.TLS.CertPath, cfg.TLS.KeyPath = certPath, keyPath
		if caPath != "" {
			cfg.TLS.NeedClientAuth, cfg.TLS.AuthClient, cfg.TLS.TrustCertPath = "require", true, caPath
		}
	})
}

// startProxyOf starts a proxy of the configuration keys settings (with
// the machine's tls.config.file out of the way) and returns a gRPC client
// of it.
func startProxyOf(t *testing.T, settings map[string]string) rmqpb.MessagingServiceClient {
	t.Helper()
	o := map[string]string{"bindAddress": "127.0.0.1", "grpcServerPort": "0", "tls.config.file": ""}
	for k, v := range settings {
		o[k] = v
	}
	loaded, err := configs.LoadProxy("", o)
	if err != nil {
		t.Fatalf("proxy configuration: %v", err)
	}
	cfg, err := ConfigFrom(loaded.Proxy, zerolog.Nop())
	if err != nil {
		t.Fatalf("proxy configuration: %v", err)
	}
	cfg.RequestTimeout = 3 * time.Second
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("start proxy: %v", err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Shutdown(sctx); err != nil {
			t.Errorf("proxy shutdown: %v", err)
		}
	})
	conn, err := grpc.NewClient(p.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial proxy: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return rmqpb.NewMessagingServiceClient(conn)
}

// A proxy with tls.enable dials the brokers and name servers with TLS,
// presenting its tls.client.* certificate and verifying theirs: it
// serves a SendMessage end to end through a name server and a broker
// whose listeners enforce TLS and require client certificates, and
// without the certificate the name server refuses it. Without
// tls.enable (RocketMQ's default under a permissive tls.server.mode) it
// dials them in plaintext: the send fails, its status naming the broker
// (or the name server) that closed the connection and tls.enable.
func TestProxyDialsEnforcingBrokersWithTLSEnable(t *testing.T) {
	pki := testutil.NewPKI(t)
	nsCert, nsKey := pki.Issue(t, "namesrv")
	brokerCert, brokerKey := pki.Issue(t, "broker")
	proxyCert, proxyKey := pki.Issue(t, "proxy")
	// The TLS-only name server, and a permissive one the plaintext proxy
	// can ask for routes, so that its send reaches the broker.
	strictNS := startTLSNamesrv(t, configs.TLSModeEnforcing, nsCert, nsKey, pki.CAPath)
	openNS := startTLSNamesrv(t, configs.TLSModePermissive, "", "", "")
	b, bcfg := clustertest.StartBroker(t, strictNS+";"+openNS, map[string]string{
		"tls.server.mode": "enforcing", "tls.config.file": "", "tls.enable": "true",
		"tls.server.certPath": brokerCert, "tls.server.keyPath": brokerKey,
		"tls.server.need.client.auth": "require", "tls.server.authClient": "true", "tls.server.trustCertPath": pki.CAPath,
		"tls.client.certPath": brokerCert, "tls.client.keyPath": brokerKey,
	})
	ct, err := remoting.NewClientTLSConfig(remoting.ClientTLSOptions{CertPath: proxyCert, KeyPath: proxyKey})
	if err != nil {
		t.Fatal(err)
	}
	pool := remoting.NewClientPool(remoting.ClientOptions{TLS: ct})
	t.Cleanup(func() { _ = pool.Close() })
	c := &testCluster{pool: pool, nsAddr: strictNS, brokerAddr: b.Addr(), brokerName: bcfg.BrokerName, broker: b}
	const topic = "ProxyTLSTopic"
	c.createTopic(t, topic, 1, "")
	(&testCluster{pool: pool, nsAddr: openNS, brokerAddr: b.Addr()}).createTopic(t, topic, 1, "")

	t.Run("tls.enable with the client keys", func(t *testing.T) {
		c.rpc = startProxyOf(t, map[string]string{"namesrvAddr": strictNS, "tls.enable": "true",
			"tls.client.certPath": proxyCert, "tls.client.keyPath": proxyKey,
			"tls.client.authServer": "true", "tls.client.trustCertPath": pki.CAPath})
		before := c.maxOffsets(t, topic, 1)
		c.send(t, "tls-producer", newMessage(topic, "over TLS"))
		c.waitMaxOffsets(t, topic, []int64{before[0] + 1})
	})
	t.Run("useTLS, its NettyClientConfig name", func(t *testing.T) {
		c.rpc = startProxyOf(t, map[string]string{"namesrvAddr": strictNS, "useTLS": "true",
			"tls.client.certPath": proxyCert, "tls.client.keyPath": proxyKey})
		c.send(t, "usetls-producer", newMessage(topic, "over TLS too"))
	})
	t.Run("tls.enable without the client keys", func(t *testing.T) {
		rpc := startProxyOf(t, map[string]string{"namesrvAddr": strictNS, "tls.enable": "true"})
		resp, err := rpc.SendMessage(callCtx(t, "nocert-producer", 10*time.Second),
			&rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{newMessage(topic, "no certificate")}})
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		if st := resp.GetStatus(); st.GetCode() == rmqpb.Code_OK || !strings.Contains(st.GetMessage(), strictNS) ||
			strings.Contains(st.GetMessage(), "tls.enable") {
			t.Fatalf("a send through a name server requiring client certificates, with none, answered %v, want a failure naming it (not tls.enable)", st)
		}
	})
	t.Run("without tls.enable", func(t *testing.T) {
		rpc := startProxyOf(t, map[string]string{"namesrvAddr": openNS,
			"tls.client.certPath": proxyCert, "tls.client.keyPath": proxyKey})
		resp, err := rpc.SendMessage(callCtx(t, "plain-producer", 10*time.Second),
			&rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{newMessage(topic, "in plaintext")}})
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		st := resp.GetStatus()
		if st.GetCode() == rmqpb.Code_OK || !strings.Contains(st.GetMessage(), b.Addr()) ||
			!strings.Contains(st.GetMessage(), "tls.enable") {
			t.Fatalf("a plaintext send to a TLS-only broker answered %v, want a failure naming the broker and tls.enable", st)
		}
		rpc = startProxyOf(t, map[string]string{"namesrvAddr": strictNS})
		resp, err = rpc.SendMessage(callCtx(t, "plain-producer", 10*time.Second),
			&rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{newMessage(topic, "in plaintext")}})
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		if st := resp.GetStatus(); st.GetCode() == rmqpb.Code_OK || !strings.Contains(st.GetMessage(), strictNS) ||
			!strings.Contains(st.GetMessage(), "tls.enable") {
			t.Fatalf("a plaintext route lookup on a TLS-only name server answered %v, want a failure naming it and tls.enable", st)
		}
	})
}

// The proxy dials with TLS as RocketMQ's proxy does: with tls.enable, or
// when it is not set, when tls.server.mode is enforcing; tls.enable=false
// dials in plaintext whatever the mode. A tls.client.* file that cannot be
// read stops ConfigFrom with an error naming the key.
func TestConfigFromDialTLS(t *testing.T) {
	for _, tc := range []struct {
		settings map[string]string
		tls      bool
	}{
		{nil, false},
		{map[string]string{"tls.enable": "true"}, true},
		{map[string]string{"tls.server.mode": "enforcing"}, true},
		{map[string]string{"tls.server.mode": "enforcing", "useTLS": "false"}, false},
	} {
		o := map[string]string{"tls.config.file": ""}
		for k, v := range tc.settings {
			o[k] = v
		}
		loaded, err := configs.LoadProxy("", o)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ConfigFrom(loaded.Proxy, zerolog.Nop())
		if err != nil {
			t.Fatalf("%v: %v", tc.settings, err)
		}
		if got := c.Remoting.TLS != nil; got != tc.tls {
			t.Errorf("%v: dials with TLS %v, want %v", tc.settings, got, tc.tls)
		}
	}
	loaded, err := configs.LoadProxy("", map[string]string{"tls.config.file": "", "tls.enable": "true",
		"tls.client.certPath": t.TempDir() + "/missing.pem", "tls.client.keyPath": t.TempDir() + "/missing.key"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ConfigFrom(loaded.Proxy, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "tls.client.certPath") {
		t.Fatalf("a tls.client.certPath that is not there: %v, want an error naming it", err)
	}
}
