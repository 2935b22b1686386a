package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/internal/clustertest"
	"github.com/rocketkv/rocketkv/internal/testutil"
)

// TestMain lets the test binary act as the proxy command, so the signal
// test runs the real main in a child process.
func TestMain(m *testing.M) {
	testutil.RunAsMainOr(m, "PROXY_TEST_AS_MAIN", main)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// execute runs the proxy command with args in this process.
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newCommand()
	cmd.SetArgs(args)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	return out.String(), err
}

// checkPrinted fails the test for each line of want missing from the
// printed configuration out.
func checkPrinted(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains("\n"+out, "\n"+w+"\n") {
			t.Errorf("printed configuration lacks %q:\n%s", w, out)
		}
	}
}

// -p prints what would run: --listen's address and port, -n's name
// servers, a --set key, and the defaults for the rest.
func TestPrintConfig(t *testing.T) {
	out, err := execute(t, "-p", "--listen", "127.0.0.1:18081", "-n", "10.0.0.1:9876;10.0.0.2:9876", "--set", "maxMessageSize=1048576")
	if err != nil {
		t.Fatal(err)
	}
	checkPrinted(t, out, "grpcServerPort=18081", "bindAddress=127.0.0.1", "namesrvAddr=10.0.0.1:9876;10.0.0.2:9876",
		"maxMessageSize=1048576", "proxyMode=cluster", "grpcClientConsumerLongPollingBatchSize=32")
	out, err = execute(t, "-p", "--listen", ":18082")
	if err != nil {
		t.Fatal(err)
	}
	checkPrinted(t, out, "grpcServerPort=18082", "bindAddress=0.0.0.0")
	// A key the proxy does not know is warned of, as at start.
	out, err = execute(t, "-p", "-c", testutil.WriteFile(t, "proxy.properties", "grpcServerPort=18083\nnoSuchProxyKey=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	checkPrinted(t, out, "grpcServerPort=18083")
	if !strings.Contains(out, "noSuchProxyKey") || !strings.Contains(out, "unknown configuration key") {
		t.Errorf("-p did not warn of the unknown key noSuchProxyKey:\n%s", out)
	}
}

// namesrvDomain is a key like any other: -p prints it with its subgroup
// (empty by default, as in RocketMQ) and no inert-key warning, and a
// domain that makes no URL is refused as the start would refuse it.
func TestPrintConfigNamesrvDomain(t *testing.T) {
	out, err := execute(t, "-p", "--set", "namesrvDomain=addr.example:8081")
	if err != nil {
		t.Fatal(err)
	}
	checkPrinted(t, out, "namesrvDomain=addr.example:8081", "namesrvDomainSubgroup=")
	if strings.Contains(out, "inert") || strings.Contains(out, "not used") {
		t.Errorf("-p warned about namesrvDomain:\n%s", out)
	}
	if _, err := execute(t, "-p", "--set", "namesrvDomain=:8081"); err == nil || !strings.Contains(err.Error(), "namesrvDomain") {
		t.Errorf("namesrvDomain=:8081: %v, want an error naming the key", err)
	}
}

// An rmq-proxy.json given with -c is read, and the flags given on the
// command line win over it.
func TestPrintConfigFromRMQProxyJSON(t *testing.T) {
	file := testutil.WriteFile(t, "rmq-proxy.json", `{"rocketMQClusterName": "DefaultCluster", "namesrvAddr": "10.0.0.1:9876",
 "grpcServerPort": 19081, "maxMessageSize": 2097152, "logLevel": "warn"}`)
	out, err := execute(t, "-c", file, "-p")
	if err != nil {
		t.Fatal(err)
	}
	checkPrinted(t, out, "grpcServerPort=19081", "namesrvAddr=10.0.0.1:9876", "maxMessageSize=2097152", "logLevel=warn")
	out, err = execute(t, "-c", file, "-p", "--listen", "127.0.0.1:18081", "-n", "10.0.0.9:9876", "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	checkPrinted(t, out, "grpcServerPort=18081", "namesrvAddr=10.0.0.9:9876", "logLevel=debug", "maxMessageSize=2097152")
}

// --set sets any key, winning over the file but not over the dedicated
// flags; one without '=' or with a bad value is an error.
func TestSetFlag(t *testing.T) {
	file := testutil.WriteFile(t, "rmq-proxy.json", `{"renewAheadTimeMillis": 20000, "defaultInvisibleTimeMills": 90000}`)
	out, err := execute(t, "-c", file, "-p", "--set", "renewAheadTimeMillis=5000", "--set", "grpcServerPort=1",
		"--listen", "127.0.0.1:18081")
	if err != nil {
		t.Fatal(err)
	}
	checkPrinted(t, out, "renewAheadTimeMillis=5000", "defaultInvisibleTimeMills=90000", "grpcServerPort=18081")
	for _, c := range []struct {
		set, want string
	}{
		{"maxMessageSize", "key=value"},
		{"=1", "key=value"},
		{"maxMessageSize=big", "maxMessageSize"},
		{"proxyMode=local", "proxyMode"},
		{"noSuchKey=1", "noSuchKey"},
	} {
		if _, err := execute(t, "-p", "--set", c.set); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: error %v, want one naming %q", c.set, err, c.want)
		}
	}
}

// NAMESRV_ADDR names the name servers when neither -n nor the file given
// with -c does, as RocketMQ's proxy starts from it; -n wins over both, and
// a file's namesrvAddr over the environment. A variable that a file or -n
// overrides is not read: one that is not host:port is no error then.
func TestNamesrvAddrEnv(t *testing.T) {
	file := testutil.WriteFile(t, "rmq-proxy.json", `{"namesrvAddr": "10.2.2.2:9876"}`)
	t.Setenv("NAMESRV_ADDR", "10.0.0.3")
	for _, args := range [][]string{{"-c", file}, {"-n", "10.3.3.3:9876"}} {
		if _, err := execute(t, append([]string{"-p"}, args...)...); err != nil {
			t.Errorf("%v with a NAMESRV_ADDR that is not host:port: %v", args, err)
		}
	}

	t.Setenv("NAMESRV_ADDR", "10.1.1.1:9876")
	silent := testutil.WriteFile(t, "rmq-proxy-no-namesrv.json", `{"grpcServerPort": 18081}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "namesrvAddr=10.1.1.1:9876"},
		{[]string{"-n", "10.3.3.3:9876"}, "namesrvAddr=10.3.3.3:9876"},
		{[]string{"-c", file}, "namesrvAddr=10.2.2.2:9876"},
		{[]string{"-c", silent}, "namesrvAddr=10.1.1.1:9876"},
		{[]string{"-c", file, "-n", "10.3.3.3:9876"}, "namesrvAddr=10.3.3.3:9876"},
	} {
		out, err := execute(t, append([]string{"-p"}, c.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		checkPrinted(t, out, c.want)
	}
}

func TestBadFlags(t *testing.T) {
	if _, err := execute(t, "-p", "extra"); err == nil {
		t.Error("positional argument accepted")
	}
	if _, err := execute(t, "-p", "--listen", "nowhere"); err == nil || !strings.Contains(err.Error(), "--listen") {
		t.Errorf("listen address without a port: %v", err)
	}
	if _, err := execute(t, "-p", "--log-level", "loud"); err == nil || !strings.Contains(err.Error(), "logLevel") {
		t.Errorf("bad log level: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "missing.json")
	if _, err := execute(t, "-p", "-c", missing); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing config file: %v", err)
	}
	bad := testutil.WriteFile(t, "rmq-proxy.json", `{"grpcServerPort": 99999}`)
	if _, err := execute(t, "-p", "-c", bad); err == nil || !strings.Contains(err.Error(), "grpcServerPort") {
		t.Errorf("bad grpcServerPort: %v", err)
	}
}

// A namesrvAddr that is not a list of host:port addresses stops the
// proxy at start with an error naming the key and where it came from
// (-n, --set, the file, NAMESRV_ADDR: the flags and the variable used to
// be "override" and "default"), as the broker's namesrvAddr does; the
// proxy used to start and fail each route request instead. Run without
// -p, under a deadline: a proxy that starts serves until it ends, and
// returns no error.
func TestBadNamesrvAddrStopsTheStart(t *testing.T) {
	file := testutil.WriteFile(t, "rmq-proxy.json", `{"namesrvAddr": "10.0.0.1:9876;10.0.0.2"}`)
	for _, c := range []struct {
		name   string
		env    string
		args   []string
		source string // how the error starts
	}{
		{"flag without a port", "", []string{"-n", "10.0.0.1"}, "flag -n (--namesrv): key namesrvAddr"},
		{"flag with a port out of range", "", []string{"-n", "10.0.0.1:98760"}, "flag -n (--namesrv): key namesrvAddr"},
		{"flag with port 0", "", []string{"--namesrv", "10.0.0.1:0"}, "flag -n (--namesrv): key namesrvAddr"},
		{"set with a port that is not a number", "", []string{"--set", "namesrvAddr=10.0.0.1:ninety"}, "flag --set: key namesrvAddr"},
		{"file's second address without a port", "", []string{"-c", file}, "config " + file + ": key namesrvAddr"},
		{"NAMESRV_ADDR without a port", "10.0.0.3", nil, "environment variable NAMESRV_ADDR: key namesrvAddr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("NAMESRV_ADDR", c.env)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			cmd := newCommand()
			cmd.SetArgs(append([]string{"--listen", freeAddr(t), "--log-level", "error"}, c.args...))
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.ExecuteContext(ctx)
			if err == nil || !strings.HasPrefix(err.Error(), c.source) || !strings.Contains(err.Error(), "not host:port") {
				t.Fatalf("error %v, want one starting %q and saying the address is not host:port", err, c.source)
			}
			if ctx.Err() != nil {
				t.Fatal("the proxy ran until the deadline before failing")
			}
		})
	}
	// The separators the proxy reads: ';' as RocketMQ's proxy, and ','.
	out, err := execute(t, "-p", "-n", "10.0.0.1:9876 ;10.0.0.2:9876,host.example:9876;")
	if err != nil {
		t.Fatalf("a good list refused: %v", err)
	}
	checkPrinted(t, out, "namesrvAddr=10.0.0.1:9876 ;10.0.0.2:9876,host.example:9876;")
}

// startNamesrv runs a name server in process and returns its address.
func startNamesrv(t *testing.T) string { return clustertest.StartNamesrv(t) }

// A proxy started with -c serves gRPC on the file's port, asks the file's
// name servers for routes, and releases its port when its context ends.
func TestServesFromConfigFile(t *testing.T) {
	ns := startNamesrv(t)
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	file := testutil.WriteFile(t, "rmq-proxy.json", `{"rocketMQClusterName": "DefaultCluster", "bindAddress": "127.0.0.1",
 "grpcServerPort": `+port+`, "namesrvAddr": "`+ns+`", "logLevel": "warn"}`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, options{config: file, shutdownWait: 5 * time.Second}) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}
	defer stop()

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rmqpb.NewMessagingServiceClient(conn)
	// Every call names its client, as RocketMQ's proxy requires.
	qctx, qcancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", "proxy-main-test"), 10*time.Second)
	defer qcancel()
	// WaitForReady: the proxy may not listen yet.
	resp, err := client.QueryRoute(qctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "NoSuchTopic"}}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("query route: %v", err)
	}
	if code := resp.GetStatus().GetCode(); code != rmqpb.Code_TOPIC_NOT_FOUND {
		t.Fatalf("route of a topic the name server does not know: %v, want TOPIC_NOT_FOUND", resp.GetStatus())
	}

	stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port still held after run returned: %v", err)
	}
	_ = ln.Close()
}

// main serves until SIGTERM or SIGINT, then shuts down and exits 0.
func TestServesAndStopsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			addr := freeAddr(t)
			p := testutil.StartMain(t, "PROXY_TEST_AS_MAIN=1", "--listen", addr, "-n", freeAddr(t), "--log-format", "json", "--log-level", "info")
			logs := p.Stderr

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var d net.Dialer
			for {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err == nil {
					_ = c.Close()
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("proxy never listened: %v\n%s", err, logs)
				}
				time.Sleep(10 * time.Millisecond)
			}

			p.Stop(ctx, t, sig)
			if !strings.Contains(logs.String(), "shutting down") {
				t.Fatalf("no shutdown in the log:\n%s", logs)
			}
		})
	}
}

// TestPrintConfigRefusesWhatStartRefuses: -p prints the configuration that
// would run; one the proxy refuses at start (the ACL hook without the
// account to sign with, a TLS certificate that cannot be loaded, a renewal
// the invisible times leave no room for) is refused by -p with the same
// error.
func TestPrintConfigRefusesWhatStartRefuses(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "enableAclRpcHookForClusterMode=true"}, "needs innerClientAuthenticationCredentials"},
		{[]string{"--set", "tls.server.certPath=" + missing, "--set", "tls.server.keyPath=" + missing}, "missing.pem"},
		{[]string{"--set", "renewAheadTimeMillis=60000"}, "auto-renewal"},
	} {
		if _, err := execute(t, append([]string{"-p"}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("-p %v: error %v, want one saying %q", c.args, err, c.want)
		}
	}
	out, err := execute(t, "-p", "--set", "enableAclRpcHookForClusterMode=true",
		"--set", `innerClientAuthenticationCredentials={"accessKey":"rocketmq","secretKey":"12345678"}`)
	if err != nil {
		t.Fatalf("-p with the ACL hook and its account: %v", err)
	}
	checkPrinted(t, out, "enableAclRpcHookForClusterMode=true")
}
