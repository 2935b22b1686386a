package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// TestMain lets the test binary act as the namesrv command, so the signal
// test runs the real main in a child process.
func TestMain(m *testing.M) {
	testutil.RunAsMainOr(m, "NAMESRV_TEST_AS_MAIN", main)
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

func TestServesAndStopsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			addr := freeAddr(t)
			p := testutil.StartMain(t, "NAMESRV_TEST_AS_MAIN=1", "--listen", addr, "--log-format", "json", "--log-level", "info")
			logs := p.Stderr

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var c *remoting.Client
			for c == nil {
				var err error
				if c, err = remoting.Dial(ctx, addr, remoting.ClientOptions{}); err != nil {
					if ctx.Err() != nil {
						t.Fatalf("name server never listened: %v\n%s", err, logs)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil))
			if err != nil || resp.Code != remoting.TopicNotExist {
				t.Fatalf("route: %v %v", resp, err)
			}

			p.Stop(ctx, t, sig)
			<-c.Done() // the server closed our connection on its way out
			_ = c.Close()
			if !strings.Contains(logs.String(), "remoting server stopped") {
				t.Fatalf("no clean shutdown in the log:\n%s", logs)
			}
		})
	}
}

// execute runs the namesrv command with args in this process, as main
// runs it.
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newCommand()
	cmd.SetArgs(rocketmqArgs(args))
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	return out.String(), err
}

func TestBadFlags(t *testing.T) {
	// An error in a flag's value names the flag, one in a file the
	// file's line.
	if _, err := execute(t, "--listen", "127.0.0.1:0", "--log-level", "loud", "--log-format", "json"); err == nil ||
		!strings.HasPrefix(err.Error(), "flag --log-level: ") || !strings.Contains(err.Error(), "logLevel") {
		t.Fatalf("bad log level: %v", err)
	}
	if _, err := execute(t, "--listen", "127.0.0.1:99999"); err == nil || !strings.HasPrefix(err.Error(), "flag --listen: ") || !strings.Contains(err.Error(), "listenPort") {
		t.Fatalf("listen port out of range: %v", err)
	}
	if _, err := execute(t, "--set", "logFormat=fancy"); err == nil || !strings.HasPrefix(err.Error(), "flag --set: ") || !strings.Contains(err.Error(), "logFormat") {
		t.Fatalf("bad --set value: %v", err)
	}
	if _, err := execute(t, "extra"); err == nil {
		t.Fatal("positional argument accepted")
	}
	if _, err := execute(t, "--listen", "nowhere"); err == nil || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("listen address without a port: %v", err)
	}
	if _, err := execute(t, "-c", filepath.Join(t.TempDir(), "missing.properties")); err == nil || !strings.Contains(err.Error(), "missing.properties") {
		t.Fatalf("missing config file: %v", err)
	}
	bad := testutil.WriteFile(t, "namesrv.properties", "listenPort=99999\n")
	if _, err := execute(t, "-c", bad); err == nil || !strings.Contains(err.Error(), "listenPort") {
		t.Fatalf("bad listenPort: %v", err)
	}
	busy := freeAddr(t)
	ln, err := net.Listen("tcp", busy)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := execute(t, "--listen", busy, "--log-level", "error", "--log-format", "json"); err == nil {
		t.Fatal("listening on a busy address succeeded")
	}
}

// -p prints what would run: the file's keys, with flags given on the
// command line winning, and the defaults for the rest.
func TestPrintConfig(t *testing.T) {
	file := testutil.WriteFile(t, "namesrv.properties", "listenPort=19876\norderMessageEnable=true\nlogLevel=warn\nserverWorkerThreads=8\n")
	out, err := execute(t, "-c", file, "-p", "--log-level", "debug", "--kv-config", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"listenPort=19876\n", "bindAddress=0.0.0.0\n", "orderMessageEnable=true\n",
		"logLevel=debug\n", "kvConfigPath=\n", "enableAllTopicList=true\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("printed configuration lacks %q:\n%s", want, out)
		}
	}
	out, err = execute(t, "-c", file, "-p", "--listen", "127.0.0.1:9999")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "listenPort=9999\n") || !strings.Contains(out, "bindAddress=127.0.0.1\n") {
		t.Errorf("--listen did not win over the file:\n%s", out)
	}
	// A key the name server does not know is warned of, as at start.
	file = testutil.WriteFile(t, "namesrv.properties", "listenPort=19876\nnoSuchNamesrvKey=1\n")
	out, err = execute(t, "-c", file, "-p")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "noSuchNamesrvKey") || !strings.Contains(out, "unknown configuration key") {
		t.Errorf("-p did not warn of the unknown key noSuchNamesrvKey:\n%s", out)
	}
}

// A name server started with -c serves on the file's port, and an
// UPDATE_NAMESRV_CONFIG is written back into the file.
func TestServesFromConfigFile(t *testing.T) {
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	file := testutil.WriteFile(t, "namesrv.properties", "# RocketMQ's\nlistenPort="+port+"\nbindAddress=127.0.0.1\nkvConfigPath=\nenableAllTopicList=true\n")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, options{config: file, shutdownWait: 5 * time.Second}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	var c *remoting.Client
	for c == nil {
		var err error
		if c, err = remoting.Dial(dctx, addr, remoting.ClientOptions{}); err != nil {
			if dctx.Err() != nil {
				t.Fatalf("name server never listened on the file's port: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	defer c.Close()
	resp, err := c.Invoke(dctx, remoting.NewRequest(remoting.UpdateNamesrvConfig, nil, []byte("enableAllTopicList=false")))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("update: %v %v", resp, err)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "enableAllTopicList=false\n") || !strings.HasPrefix(string(raw), "# RocketMQ's\n") {
		t.Fatalf("file after the update:\n%s", raw)
	}
}

// --set sets any key (the TLS keys, which have no flag of their own),
// winning over the file but not over the dedicated flags.
func TestSetFlag(t *testing.T) {
	file := testutil.WriteFile(t, "namesrv.properties", "tls.server.mode=disabled\nlogLevel=warn\n")
	out, err := execute(t, "-c", file, "-p", "--set", "tls.server.mode=enforcing", "--set", "tls.server.keyPassword=pw",
		"--set", "logLevel=error", "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tls.server.mode=enforcing\n", "tls.server.keyPassword=******\n", "logLevel=debug\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("printed configuration lacks %q:\n%s", want, out)
		}
	}
	if _, err := execute(t, "-p", "--set", "tls.server.mode"); err == nil || !strings.Contains(err.Error(), "key=value") {
		t.Errorf("--set without '=': %v", err)
	}
	if _, err := execute(t, "-p", "--set", "tls.server.mode=strict"); err == nil || !strings.Contains(err.Error(), "tls.server.mode") {
		t.Errorf("bad --set value: %v", err)
	}
}

// TestPrintConfigRefusesATLSCertificateItCannotLoad: -p prints the
// configuration that would run; a TLS certificate or key the name server
// cannot load stops its start, and -p refuses it with the same error.
func TestPrintConfigRefusesATLSCertificateItCannotLoad(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing-cert.pem")
	if _, err := execute(t, "-p", "--set", "tls.server.certPath="+missing, "--set", "tls.server.keyPath="+missing); err == nil || !strings.Contains(err.Error(), "missing-cert.pem") {
		t.Fatalf("-p with a missing certificate: %v, want an error naming it", err)
	}
	if _, err := execute(t, "-p", "--set", "tls.server.mode=enforcing"); err != nil {
		t.Fatalf("-p with the test mode's certificate: %v", err)
	}
	// The client certificate of the connections it dials with TLS too.
	if _, err := execute(t, "-p", "--set", "tls.enable=true", "--set", "tls.config.file=", "--set", "tls.client.certPath="+missing,
		"--set", "tls.client.keyPath="+missing); err == nil || !strings.Contains(err.Error(), "tls.client.certPath") {
		t.Fatalf("-p with a missing client certificate: %v, want an error naming tls.client.certPath", err)
	}
}

// mqnamesrv's command line works unchanged: its long option names, and
// its -n, which it accepts and ignores.
func TestTakesMqnamesrvsCommandLine(t *testing.T) {
	file := testutil.WriteFile(t, "namesrv.properties", "listenPort=19876\n")
	for _, args := range [][]string{
		{"--configFile", file, "--printConfigItem", "-n", "127.0.0.1:9876"},
		{"--configFile=" + file, "--printConfigItem", "--namesrvAddr=127.0.0.1:9876;127.0.0.2:9876"},
	} {
		out, err := execute(t, args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if !strings.Contains(out, "listenPort=19876\n") {
			t.Errorf("%q: the file was not read:\n%s", args, out)
		}
		if !strings.Contains(out, "--namesrvAddr) is ignored") || strings.Contains(out, "namesrvAddr=") {
			t.Errorf("%q: -n not reported as ignored, or printed as a key:\n%s", args, out)
		}
	}
}

// TestControllerInNamesrv: with enableControllerInNamesrv the name server
// also serves a controller, on the port of its controllerDLegerPeers entry,
// and the controller's metrics with the file's metricsExporterType=PROM
// (RocketMQ's name server has none of its own), and all stop on SIGTERM.
func TestControllerInNamesrv(t *testing.T) {
	addr := freeAddr(t)
	ctlAddr := freeAddr(t)
	metricsAddr := freeAddr(t)
	_, metricsPort, _ := net.SplitHostPort(metricsAddr)
	p := testutil.StartMain(t, "NAMESRV_TEST_AS_MAIN=1", "--listen", addr, "--log-format", "json",
		"--set", "enableControllerInNamesrv=true", "--set", "controllerDLegerPeers=n0-"+ctlAddr,
		"--set", "controllerDLegerSelfId=n0", "--set", "controllerStorePath="+filepath.Join(t.TempDir(), "ctl"),
		"--set", "metricsExporterType=PROM", "--set", "metricsPromExporterHost=127.0.0.1", "--set", "metricsPromExporterPort="+metricsPort)
	logs := p.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var c *remoting.Client
	for {
		var err error
		if c, err = remoting.Dial(ctx, ctlAddr, remoting.ClientOptions{}); err == nil {
			resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.ControllerGetMetadataInfo, nil, nil))
			if err == nil && resp.ExtFields["isLeader"] == "true" {
				break
			}
			_ = c.Close()
		}
		if ctx.Err() != nil {
			t.Fatalf("the embedded controller never led on %s\n%s", ctlAddr, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer c.Close()
	resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.ControllerApplyBrokerID, map[string]string{
		"clusterName": "c1", "brokerName": "broker-a", "appliedBrokerId": "1", "registerCheckCode": "10.0.0.1:30911;1",
	}, nil))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("apply broker id: %v %v", resp, err)
	}
	// UPDATE_CONTROLLER_CONFIG takes the controller's keys of the name
	// server's configuration and refuses the name server's own.
	if resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.UpdateControllerConfig, nil, []byte("orderMessageEnable=true\n"))); err != nil ||
		resp.Code != remoting.InvalidParameter || !strings.Contains(resp.Remark, "UPDATE_NAMESRV_CONFIG") {
		t.Errorf("a name server key through the controller: %v %v", resp, err)
	}
	if resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.UpdateControllerConfig, nil, []byte("electMasterMaxRetryCount=5\ncontrollerDLegerGroup=g2\n"))); err != nil ||
		resp.Code != remoting.Success || !strings.Contains(resp.Remark, "in force from the next start: controllerDLegerGroup") {
		t.Errorf("controller keys: %v %v", resp, err)
	}
	if resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.GetControllerConfig, nil, nil)); err != nil ||
		!strings.Contains(string(resp.Body), "electMasterMaxRetryCount=5\n") || !strings.Contains(string(resp.Body), "controllerDLegerGroup=g2\n") {
		t.Errorf("controller config after the update: %v %v", resp, err)
	}
	text := testutil.Scrape(t, metricsAddr)
	for _, want := range []string{
		`request_total{address="` + ctlAddr + `",group="",peer_id="n0",request_handle_status="success",request_type="CONTROLLER_APPLY_BROKER_ID"} 1`,
		`role{address="` + ctlAddr + `",group="",peer_id="n0"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("the embedded controller's scrape lacks %s:\n%s", want, text)
		}
	}
	ns, err := remoting.Dial(ctx, addr, remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if resp, err := ns.Invoke(ctx, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil)); err != nil || resp.Code != remoting.TopicNotExist {
		t.Fatalf("route: %v %v", resp, err)
	}
	p.Stop(ctx, t, syscall.SIGTERM)

	// Without peers the name server does not start, naming the key.
	if _, err := execute(t, "--listen", "127.0.0.1:0", "--log-level", "error", "--set", "enableControllerInNamesrv=true"); err == nil ||
		!strings.Contains(err.Error(), "controllerDLegerPeers") {
		t.Fatalf("controller without peers: %v", err)
	}
}
