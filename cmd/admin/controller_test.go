package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/controller"
	"github.com/rocketkv/rocketkv/internal/remotingtest"
	"github.com/rocketkv/rocketkv/remoting"
)

// startController runs a one-peer controller whose peer address is the
// address it is served on, and waits until it leads.
func startController(t *testing.T) (string, *controller.Controller) {
	t.Helper()
	cfg := controller.DefaultConfig()
	cfg.Group = "group1"
	cfg.SelfID = "n0"
	cfg.RaftTimeout = 200 * time.Millisecond
	// The peer address must be the served one (the leader's address is
	// taken from it), known only once the server listens: the handler is
	// swapped in after.
	mux := remoting.NewMux()
	srv := remotingtest.StartServer(t, mux)
	return serveController(t, cfg, srv, mux)
}

// serveController starts the controller of cfg, its peer address srv's,
// on mux, and waits until it leads.
func serveController(t *testing.T, cfg controller.Config, srv *remoting.Server, mux *remoting.Mux) (string, *controller.Controller) {
	t.Helper()
	cfg.Peers = "n0-" + srv.Addr().String()
	c, err := controller.New(controller.Options{Config: cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	c.Register(mux)
	deadline := time.Now().Add(15 * time.Second)
	for !c.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("the controller never led")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return srv.Addr().String(), c
}

func mustInvoke(t *testing.T, cl *remoting.Client, code int32, ext map[string]string) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, remoting.NewRequest(code, ext, nil))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestControllerCommands runs mqadmin's controller commands against a
// controller holding a group of two brokers.
func TestControllerCommands(t *testing.T) {
	addr, c := startController(t)
	cl, err := remoting.Dial(context.Background(), addr, remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for id, baddr := range map[string]string{"1": "10.0.0.1:30911", "2": "10.0.0.2:30911"} {
		if resp := mustInvoke(t, cl, remoting.ControllerApplyBrokerID, map[string]string{
			"clusterName": "C", "brokerName": "broker-a", "appliedBrokerId": id, "registerCheckCode": baddr + ";1",
		}); resp.Code != remoting.Success && id == "1" {
			t.Fatalf("apply %s: %d %s", id, resp.Code, resp.Remark)
		}
	}
	// Id 2 may only be applied once 1 made the group: apply it again.
	mustInvoke(t, cl, remoting.ControllerApplyBrokerID, map[string]string{
		"clusterName": "C", "brokerName": "broker-a", "appliedBrokerId": "2", "registerCheckCode": "10.0.0.2:30911;1",
	})
	for _, id := range []string{"1", "2"} {
		mustInvoke(t, cl, remoting.BrokerHeartbeat, map[string]string{"clusterName": "C", "brokerName": "broker-a",
			"brokerAddr": "10.0.0." + id + ":30911", "brokerId": id, "heartbeatTimeoutMills": "60000"})
	}
	if resp := mustInvoke(t, cl, remoting.ControllerElectMaster, map[string]string{"clusterName": "C", "brokerName": "broker-a",
		"brokerId": "1", "designateElect": "false"}); resp.Code != remoting.Success {
		t.Fatalf("first election: %d %s", resp.Code, resp.Remark)
	}

	out, err := run(t, "getControllerMetaData", "-a", addr)
	if err != nil || !strings.Contains(out, "#ControllerGroup\tgroup1") || !strings.Contains(out, "#ControllerLeaderId\tn0") ||
		!strings.Contains(out, "#ControllerLeaderAddress\t"+addr) || !strings.Contains(out, "#Peer:\tn0:"+addr) {
		t.Fatalf("getControllerMetaData: %v\n%s", err, out)
	}

	out, err = run(t, "getSyncStateSet", "-a", addr, "-b", "broker-a")
	if err != nil || !strings.Contains(out, "#brokerName\tbroker-a\n#MasterBrokerId\t1\n#MasterAddr\t10.0.0.1:30911\n#MasterEpoch\t1\n#SyncStateSetEpoch\t1\n#SyncStateSetNums\t1\n") ||
		!strings.Contains(out, "InSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=1, brokerAddress='10.0.0.1:30911', alive=true}") ||
		!strings.Contains(out, "NotInSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=2, brokerAddress='10.0.0.2:30911', alive=true}") {
		t.Fatalf("getSyncStateSet: %v\n%s", err, out)
	}

	// Broker 2 joins the sync state set (a designated broker must be in
	// it, enableElectUncleanMaster being off), then the admin designates
	// it, with mqadmin's -bn.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, remoting.NewRequest(remoting.ControllerAlterSyncStateSet, map[string]string{
		"brokerName": "broker-a", "masterBrokerId": "1", "masterEpoch": "1"}, []byte(`{"syncStateSet":[1,2],"syncStateSetEpoch":1}`)))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("alter: %v %v", resp, err)
	}
	out, err = run(t, mqadminArgs([]string{"electMaster", "-a", addr, "-b", "2", "-bn", "broker-a", "-c", "C"})...)
	if err != nil || !strings.Contains(out, "#BrokerMasterAddr\t10.0.0.2:30911") || !strings.Contains(out, "#MasterEpoch\t2") ||
		!strings.Contains(out, "\t#Broker\t1\t10.0.0.1:30911\n") {
		t.Fatalf("electMaster: %v\n%s", err, out)
	}
	if ss := c.State().SyncStates["broker-a"]; !ss.HasMaster || ss.MasterID != 2 {
		t.Fatalf("after electMaster: %+v", ss)
	}
	// Designating a broker that is not alive fails with the controller's code.
	if _, err := run(t, "electMaster", "-a", addr, "-b", "7", "--brokerName", "broker-a", "-c", "C"); err == nil || !strings.Contains(err.Error(), "2012") {
		t.Fatalf("electMaster of an unknown broker: %v", err)
	}

	out, err = run(t, "updateControllerConfig", "-a", addr, "-k", "enableElectUncleanMaster", "-v", "true")
	if err != nil || !strings.Contains(out, "update controller config success!") {
		t.Fatalf("updateControllerConfig: %v\n%s", err, out)
	}
	out, err = run(t, "getControllerConfig", "-a", addr)
	if err != nil || !strings.Contains(out, "============"+addr+"============") || !strings.Contains(out, "enableElectUncleanMaster") ||
		!strings.Contains(out, "=  true\n") {
		t.Fatalf("getControllerConfig: %v\n%s", err, out)
	}
	if _, err := run(t, "updateControllerConfig", "-a", addr, "-k", "configStorePath", "-v", "/x"); err == nil || !strings.Contains(err.Error(), "black list") {
		t.Fatalf("black-listed key: %v", err)
	}

	// Cleaning: refused without -c (mqadmin's check), refused for a live
	// group, done with -l.
	if _, err := run(t, mqadminArgs([]string{"cleanBrokerMetadata", "-a", addr, "-bn", "broker-a"})...); err == nil || !strings.Contains(err.Error(), "clusterName") {
		t.Fatalf("clean without -c: %v", err)
	}
	if _, err := run(t, mqadminArgs([]string{"cleanBrokerMetadata", "-a", addr, "-bn", "broker-a", "-c", "C"})...); err == nil || !strings.Contains(err.Error(), "2009") {
		t.Fatalf("clean of a live group: %v", err)
	}
	out, err = run(t, mqadminArgs([]string{"cleanBrokerMetadata", "-a", addr, "-bn", "broker-a", "-l"})...)
	if err != nil || !strings.Contains(out, "clear broker broker-a metadata from controller success!") {
		t.Fatalf("clean -l: %v\n%s", err, out)
	}
	if _, ok := c.State().Replicas["broker-a"]; ok {
		t.Fatal("the group is still there after the clean")
	}
}

// The controller commands follow --tls as the others do: a controller
// whose listener enforces TLS answers them with it, and closes the
// connection of one without, which fails (no hang) with the error.
func TestControllerCommandsOverTLS(t *testing.T) {
	cfg := controller.DefaultConfig()
	cfg.Group = "group1"
	cfg.SelfID = "n0"
	cfg.RaftTimeout = 200 * time.Millisecond
	mode, tc, err := remoting.ServerTLS("enforcing", remoting.TLSOptions{TestMode: true})
	if err != nil {
		t.Fatal(err)
	}
	mux := remoting.NewMux()
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0", TLSMode: mode, TLS: tc}, mux, zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	addr, _ := serveController(t, cfg, srv, mux)

	out, err := run(t, "--tls", "getControllerMetaData", "-a", addr)
	if err != nil || !strings.Contains(out, "#ControllerGroup\tgroup1") {
		t.Fatalf("getControllerMetaData --tls: %v\n%s", err, out)
	}
	out, err = run(t, "--tls", "updateControllerConfig", "-a", addr, "-k", "enableElectUncleanMaster", "-v", "true")
	if err != nil || !strings.Contains(out, "update controller config success!") {
		t.Fatalf("updateControllerConfig --tls: %v\n%s", err, out)
	}
	out, err = run(t, "--tls", "getControllerConfig", "-a", addr)
	if err != nil || !strings.Contains(out, "enableElectUncleanMaster") {
		t.Fatalf("getControllerConfig --tls: %v\n%s", err, out)
	}
	start := time.Now()
	_, err = run(t, "--timeout", "10s", "getControllerMetaData", "-a", addr)
	if err == nil || !strings.Contains(err.Error(), "try --tls") {
		t.Fatalf("a plaintext getControllerMetaData to a controller enforcing TLS: %v, want an error that says try --tls", err)
	}
	if waited := time.Since(start); waited > 9*time.Second {
		t.Fatalf("the plaintext request waited %v for an answer", waited)
	}
}
