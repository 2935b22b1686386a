package main

import (
	"context"
	"fmt"
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

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/internal/clustertest"
	"github.com/rocketkv/rocketkv/internal/testutil"
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
