package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/internal/clustertest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/namesrv"
)

// RocketMQ's "-pc FILE" reaches the proxy-config flag instead of being
// read as -p -c; other arguments pass unchanged.
func TestRocketMQArgs(t *testing.T) {
	got := rocketmqArgs([]string{"-c", "broker.conf", "--enable-proxy", "-pc", "rmq-proxy.json", "-pc=x.json", "-p"})
	want := []string{"-c", "broker.conf", "--enable-proxy", "--proxy-config", "rmq-proxy.json", "--proxy-config=x.json", "-p"}
	if !slices.Equal(got, want) {
		t.Fatalf("rocketmqArgs = %q, want %q", got, want)
	}
}

// --enable-proxy serves gRPC clients from the broker's process, on the
// port of the proxy's configuration file, with the broker's name server:
// a route query answers the broker's queues; the proxy stops with the
// broker.
func TestEnableProxy(t *testing.T) {
	nsAddr := clustertest.StartNamesrv(t)
	runWithProxy(t, nsAddr)
}

// A broker that asks an address server for its name servers
// (fetchNamesrvAddrByAddressServer, no namesrvAddr) gives --enable-proxy's
// proxy that address server: routes come from the name server it names,
// and the proxy asks it too, at the broker's path.
func TestEnableProxyFollowsTheBrokersAddressServer(t *testing.T) {
	nsAddr := clustertest.StartNamesrv(t)
	var mu sync.Mutex
	var paths []string
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		_, _ = w.Write([]byte(nsAddr + "\n"))
	}))
	defer as.Close()
	runWithProxy(t, "", "fetchNamesrvAddrByAddressServer=true",
		"rmqAddressServerDomain="+strings.TrimPrefix(as.URL, "http://"), "rmqAddressServerSubGroup=nsaddr")
	mu.Lock()
	defer mu.Unlock()
	// The broker asks once at start, the proxy once at its start: the
	// route was found within 10 s, before either asks again.
	if len(paths) < 2 {
		t.Fatalf("address server asked %d times (%q), want by the broker and by its proxy", len(paths), paths)
	}
	for _, p := range paths {
		if p != "/rocketmq/nsaddr" {
			t.Errorf("address server asked for %q, want /rocketmq/nsaddr", p)
		}
	}
}

// runWithProxy runs a broker with --enable-proxy, its name servers
// nsAddr (-n, none when empty) and the settings sets added, until a route
// query through its proxy answers its queues, then stops it.
func runWithProxy(t *testing.T, nsAddr string, sets ...string) {
	t.Helper()
	port := testutil.FreePort(t)
	pc := filepath.Join(t.TempDir(), "rmq-proxy.json")
	if err := os.WriteFile(pc, fmt.Appendf(nil, `{"rocketMQClusterName":"DefaultCluster","grpcServerPort":%d,"bindAddress":"127.0.0.1"}`, port), 0o644); err != nil {
		t.Fatal(err)
	}
	o := options{enableProxy: true, proxyConfig: pc, shutdownWait: 10 * time.Second, namesrv: nsAddr,
		store: t.TempDir(), sets: append([]string{"listenPort=0", "brokerIP1=127.0.0.1", "mappedFileSizeCommitLog=4194304",
			"logLevel=error", "fastListenPort=0", "haListenPort=0"}, sets...)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, o) }()
	t.Cleanup(cancel)

	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rmqpb.NewMessagingServiceClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, ccancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", "enable-proxy-test"), 2*time.Second)
		// The broker routes the topic named after its cluster (TBW102, a
		// system topic, is not routed to gRPC clients).
		resp, err := client.QueryRoute(cctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "DefaultCluster"}})
		ccancel()
		if err == nil && resp.GetStatus().GetCode() == rmqpb.Code_OK && len(resp.GetMessageQueues()) > 0 {
			if b := resp.GetMessageQueues()[0].GetBroker().GetName(); b != "broker-a" {
				t.Fatalf("the route names broker %q, want the broker of this process, broker-a", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no route through the broker's proxy after 30 s: %v %v", resp.GetStatus(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("broker with proxy stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("broker with proxy did not stop within 30 s")
	}
	if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
		t.Errorf("the proxy's port is still taken after the stop: %v", err)
	} else {
		_ = l.Close()
	}
}

// --enable-proxy's proxy dials the brokers and name servers as the broker
// dials them, as RocketMQ's proxy sharing the broker's JVM (and so its
// TLS system properties) does: a broker whose listener enforces TLS
// (tls.enable unset) and that presents a certificate (tls.client.*) gets
// a proxy that routes through a name server enforcing TLS and requiring
// client certificates.
func TestEnableProxyDialsWithTheBrokersTLS(t *testing.T) {
	pki := testutil.NewPKI(t)
	nsCert, nsKey := pki.Issue(t, "namesrv")
	brokerCert, brokerKey := pki.Issue(t, "broker")
	nsAddr := clustertest.StartNamesrvWith(t, func(cfg *namesrv.Config) {
		cfg.TLS.Mode, cfg.TLS.ConfigFile = "enforcing", ""
		cfg.TLS.CertPath, cfg.TLS.KeyPath = nsCert, nsKey
		cfg.TLS.NeedClientAuth, cfg.TLS.AuthClient, cfg.TLS.TrustCertPath = "require", true, pki.CAPath
	})
	runWithProxy(t, nsAddr, "tls.server.mode=enforcing", "tls.config.file=",
		"tls.client.certPath="+brokerCert, "tls.client.keyPath="+brokerKey)
}

// The embedded proxy's tls.enable and tls.client.* default to the
// broker's: its tls.enable (or, unset, its tls.server.mode) and its
// client keys with its tls.config.file applied; the proxy's file wins
// for the keys it sets.
func TestEmbeddedProxyTakesTheBrokersDialTLS(t *testing.T) {
	brokerOf := func(settings map[string]string) configs.Broker {
		t.Helper()
		o := map[string]string{"tls.config.file": ""}
		maps.Copy(o, settings)
		loaded, err := configs.LoadBroker("", o)
		if err != nil {
			t.Fatal(err)
		}
		return loaded.Broker
	}
	proxyOf := func(file string, b configs.Broker) configs.Proxy {
		t.Helper()
		path := ""
		if file != "" {
			path = filepath.Join(t.TempDir(), "rmq-proxy.json")
			if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		loaded, err := loadProxyConfig(path, b)
		if err != nil {
			t.Fatal(err)
		}
		return loaded.Proxy
	}
	if p := proxyOf("", brokerOf(nil)); p.DialTLS() {
		t.Errorf("a permissive broker's proxy dials with TLS (tls.enable %q)", p.TLSEnable)
	}
	if p := proxyOf("", brokerOf(map[string]string{"tls.server.mode": "enforcing"})); !p.DialTLS() {
		t.Errorf("an enforcing broker's proxy dials in plaintext (tls.enable %q)", p.TLSEnable)
	}
	if p := proxyOf("", brokerOf(map[string]string{"useTLS": "true"})); !p.DialTLS() {
		t.Errorf("the proxy of a broker with useTLS=true dials in plaintext (tls.enable %q)", p.TLSEnable)
	}
	if p := proxyOf(`{"tls.enable":"false"}`, brokerOf(map[string]string{"tls.enable": "true"})); p.DialTLS() {
		t.Error("the proxy file's tls.enable=false does not win over the broker's")
	}
	tlsFile := testutil.WriteFile(t, "tls.properties", "tls.client.authServer=true\ntls.client.trustCertPath=/ca.pem\n")
	p := proxyOf(`{"tls.client.keyPath":"/proxy.key"}`, brokerOf(map[string]string{"tls.enable": "true",
		"tls.client.certPath": "/broker.pem", "tls.client.keyPath": "/broker.key", "tls.config.file": tlsFile}))
	if p.TLS.ClientCertPath != "/broker.pem" || p.TLS.ClientKeyPath != "/proxy.key" || !p.TLS.ClientAuthServer || p.TLS.ClientTrustCertPath != "/ca.pem" {
		t.Errorf("proxy client TLS %+v, want the broker's keys (its tls.config.file's too) under the proxy file's", p.TLS)
	}
}
