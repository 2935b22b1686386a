package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/controller"
	"github.com/rocketkv/rocketkv/internal/controllertest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// startTLSController starts one controller whose listener enforces TLS
// (a self-signed certificate, tls.test.mode.enable) and whose notices go
// out over TLS, as bin/controller runs with tls.server.mode=enforcing
// (tls.enable then defaults to true).
func startTLSController(t *testing.T) *controllertest.Peer {
	t.Helper()
	port := testutil.FreePortPair(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg := controller.DefaultConfig()
	cfg.Group = "group1"
	cfg.Peers = "n0-" + addr
	cfg.SelfID = "n0"
	cfg.StorePath = t.TempDir()
	cfg.RaftTimeout = 200 * time.Millisecond
	cfg.ScanNotActiveBrokerInterval = 100 * time.Millisecond
	cfg.ScanInactiveMasterInterval = 100 * time.Millisecond
	cfg.EnableElectUncleanMaster = true
	cfg.NotifyBrokerRoleChanged = true
	c, err := controller.New(controller.Options{Config: cfg, Log: zerolog.Nop(), ClientTLS: insecureTLS()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	mode, tc, err := remoting.ServerTLS(configs.TLSModeEnforcing, remoting.TLSOptions{TestMode: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := remoting.NewServer(remoting.ServerConfig{Addr: addr, TLSMode: mode, TLS: tc}, c.Handler(), zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		_ = c.Close()
		t.Fatal(err)
	}
	p := &controllertest.Peer{Controller: c, Server: srv, Addr: addr}
	t.Cleanup(p.Stop)
	waitUntil(t, 20*time.Second, "the controller to lead", p.Controller.IsLeader)
	return p
}

// TestControllerModeOverTLS: brokers whose listeners enforce TLS, with
// tls.enable=true, register with a controller whose listener enforces TLS
// (their controller client dials TLS, as their name server client), the
// slave asks the master for its HA address over TLS and replicates (the
// AutoSwitch HA connection itself is plain TCP, as RocketMQ's), and when the master
// stops the controller's NOTIFY_BROKER_ROLE_CHANGED reaches the slave
// over TLS: the brokers poll the controller a minute apart, so the notice
// alone makes the slave master.
func TestControllerModeOverTLS(t *testing.T) {
	p := startTLSController(t)
	tlsOn := func(c *ctlBroker) {
		c.settings["tls.server.mode"] = configs.TLSModeEnforcing
		c.settings["tls.enable"] = "true"
		c.settings["tls.config.file"] = ""
		c.settings["syncBrokerMetadataPeriod"] = "60000"
	}
	a := newCtlBroker(t, p.Addr, "")
	b := newCtlBroker(t, p.Addr, "")
	tlsOn(a)
	tlsOn(b)
	a.start()
	if !a.isMaster() {
		t.Fatal("the first broker is not master")
	}
	b.start()
	if b.isMaster() {
		t.Fatal("the second broker is master too")
	}
	if got := b.sup.role().masterAddr; got != a.addr() {
		t.Fatalf("the slave follows %q, want %s", got, a.addr())
	}
	// With no name server, the slave has the master's HA address from
	// EXCHANGE_BROKER_HA_INFO alone, asked over TLS: it replicates.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := remoting.Dial(ctx, a.addr(), remoting.ClientOptions{TLS: insecureTLS()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 5 {
		mustSend(t, cl, "TopicTest", 0, fmt.Sprintf("over-tls-%d", i), "")
	}
	waitUntil(t, 20*time.Second, "the slave to replicate", func() bool { return b.end() == a.end() })
	a.stop()
	waitUntil(t, 30*time.Second, "the slave to become master on the controller's notice", b.isMaster)
}

// TestControllerModePlaintextToTLSController: a broker with tls.enable=false
// cannot reach a controller that enforces TLS; its start gives up when
// its context ends (no hang), and its log says the controller closed the
// plaintext connection and why that may be.
func TestControllerModePlaintextToTLSController(t *testing.T) {
	p := startTLSController(t)
	c := newCtlBroker(t, p.Addr, "")
	c.settings["tls.enable"] = "false"
	c.settings["tls.config.file"] = ""
	logs := &testutil.SyncBuffer{}
	s := c.newSupervisor(zerolog.New(logs))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	start := time.Now()
	err := s.Start(ctx)
	if err == nil {
		_ = s.Shutdown(context.Background())
		t.Fatal("a plaintext broker started against a controller enforcing TLS")
	}
	if waited := time.Since(start); waited > 15*time.Second {
		t.Fatalf("the start took %v past its context", waited)
	}
	const want = "closed the connection (a controller with tls.server.mode=enforcing closes plaintext ones"
	if !strings.Contains(err.Error(), want) || !strings.Contains(logs.String(), want) {
		t.Fatalf("start error %v, log:\n%s\nwant both to say %q", err, logs, want)
	}
}
