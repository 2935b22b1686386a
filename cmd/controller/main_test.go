package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// TestMain lets the test binary act as the controller command.
func TestMain(m *testing.M) {
	testutil.RunAsMainOr(m, "CONTROLLER_TEST_AS_MAIN", main)
}

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

// TestServesOnPeerPortAndKeepsState: the controller, started from a
// RocketMQ controller.properties, serves on its controllerDLegerPeers port
// (and its metrics on metricsPromExporterPort), hands out an id, stops on
// SIGTERM and has the id after a restart.
func TestServesOnPeerPortAndKeepsState(t *testing.T) {
	port, metricsPort := testutil.FreePort(t), testutil.FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	store := filepath.Join(t.TempDir(), "store")
	conf := testutil.WriteFile(t, "controller.properties", "controllerDLegerGroup = group1\n"+
		"controllerDLegerPeers = n0-"+addr+"\ncontrollerDLegerSelfId = n0\ncontrollerStorePath = "+store+
		"\nenableElectUncleanMaster = false\nnotifyBrokerRoleChanged = true\ncontrollerThreadPoolNums = 16\n"+
		"metricsExporterType = PROM\nmetricsPromExporterHost = 127.0.0.1\nmetricsPromExporterPort = "+strconv.Itoa(metricsPort)+
		"\nmetricsLabel = instance_id:i1\n")

	start := func() (*remoting.Client, func()) {
		p := testutil.StartMain(t, "CONTROLLER_TEST_AS_MAIN=1", "--configFile", conf, "--log-format", "json")
		logs := p.Stderr
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		t.Cleanup(cancel)
		var c *remoting.Client
		for {
			var err error
			if c, err = remoting.Dial(ctx, addr, remoting.ClientOptions{}); err == nil {
				resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.ControllerGetMetadataInfo, nil, nil))
				if err == nil && resp.ExtFields["isLeader"] == "true" {
					break
				}
				_ = c.Close()
			}
			if ctx.Err() != nil {
				t.Fatalf("controller never led on %s\n%s", addr, logs)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !strings.Contains(logs.String(), "controllerThreadPoolNums") {
			t.Errorf("the inert key is not reported:\n%s", logs)
		}
		stop := func() {
			_ = c.Close()
			p.Stop(ctx, t, syscall.SIGTERM)
		}
		return c, stop
	}

	c, stop := start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.ControllerApplyBrokerID, map[string]string{
		"clusterName": "c1", "brokerName": "broker-a", "appliedBrokerId": "1", "registerCheckCode": "10.0.0.1:30911;1",
	}, nil))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("apply: %v %v", resp, err)
	}
	stop()

	c, stop = start()
	defer stop()
	// tls.server.mode is permissive by default: a broker with tls.enable
	// reaches the same port over TLS.
	tc, err := remoting.Dial(ctx, addr, remoting.ClientOptions{TLS: &tls.Config{InsecureSkipVerify: true}})
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	defer tc.Close()
	if resp, err := tc.Invoke(ctx, remoting.NewRequest(remoting.ControllerGetMetadataInfo, nil, nil)); err != nil || resp.ExtFields["isLeader"] != "true" {
		t.Fatalf("metadata over TLS: %v %v", resp, err)
	}
	// The metrics of the controller restarted from its store: the leader's
	// role, the store's size, the requests it answered.
	text := testutil.Scrape(t, "127.0.0.1:"+strconv.Itoa(metricsPort))
	labels := `address="` + addr + `",group="group1",instance_id="i1",peer_id="n0"`
	for _, want := range []string{
		"role{" + labels + "} 1\n",
		"dledger_disk_usage_bytes{" + labels + "} ",
		"request_total{" + labels + `,request_handle_status="success",request_type="CONTROLLER_GET_METADATA_INFO"} `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s:\n%s", want, text)
		}
	}
	// GET_CONTROLLER_CONFIG lists the metrics keys; UPDATE_CONTROLLER_CONFIG
	// keeps a new metrics port for the next start, written back.
	if resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.GetControllerConfig, nil, nil)); err != nil || !strings.Contains(string(resp.Body), "metricsExporterType=PROM") {
		t.Errorf("controller config: %v %v", resp, err)
	}
	newPort := strconv.Itoa(metricsPort + 1)
	if resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.UpdateControllerConfig, nil, []byte("metricsPromExporterPort="+newPort+"\n"))); err != nil ||
		resp.Code != remoting.Success || !strings.Contains(resp.Remark, "in force from the next start: metricsPromExporterPort") {
		t.Errorf("update metricsPromExporterPort: %v %v", resp, err)
	}
	if raw, err := os.ReadFile(conf); err != nil || !strings.Contains(string(raw), "metricsPromExporterPort="+newPort) {
		t.Errorf("metricsPromExporterPort not written back (%v):\n%s", err, raw)
	}
	// A run-time update is written back into the -c file.
	resp, err = c.Invoke(ctx, remoting.NewRequest(remoting.UpdateControllerConfig, nil, []byte("enableElectUncleanMaster=true\nisProcessReadEvent=true\n")))
	if err != nil || resp.Code != remoting.Success || resp.Remark != "" {
		t.Fatalf("update: %v %v", resp, err)
	}
	raw, err := os.ReadFile(conf)
	if err != nil || !strings.Contains(string(raw), "enableElectUncleanMaster") || strings.Contains(string(raw), "enableElectUncleanMaster = false") ||
		!strings.Contains(string(raw), "processReadEvent") {
		t.Fatalf("the file after the update (%v):\n%s", err, raw)
	}
	resp, err = c.Invoke(ctx, remoting.NewRequest(remoting.ControllerGetNextBrokerID, map[string]string{"clusterName": "c1", "brokerName": "broker-a"}, nil))
	if err != nil || resp.Code != remoting.Success || resp.ExtFields["nextBrokerId"] != "2" {
		t.Fatalf("next id after restart: %v %v", resp, err)
	}
}

func TestPrintAndBadConfig(t *testing.T) {
	out, err := execute(t, "-p", "--set", "controllerDLegerPeers=n0-127.0.0.1:9878", "--self-id", "n0")
	if err != nil || !strings.Contains(out, "controllerDLegerPeers=n0-127.0.0.1:9878") || !strings.Contains(out, "controllerDLegerSelfId=n0") {
		t.Fatalf("print: %v\n%s", err, out)
	}
	if _, err := execute(t, "--set", "controllerType=jRaft"); err == nil || !strings.Contains(err.Error(), "controllerType") {
		t.Fatalf("jRaft accepted: %v", err)
	}
	// Without peers the controller does not start, naming the key.
	if _, err := execute(t, "--log-level", "error", "--store", t.TempDir()); err == nil || !strings.Contains(err.Error(), "controllerDLegerPeers") {
		t.Fatalf("no peers: %v", err)
	}
	if _, err := execute(t, "--set", "electMasterMaxRetryCount=0"); err == nil || !strings.Contains(err.Error(), "electMasterMaxRetryCount") {
		t.Fatalf("bad retry count: %v", err)
	}
	// The client certificate of its notices and raft connections, dialed
	// with TLS (tls.enable), is loaded at start: -p refuses one missing.
	missing := t.TempDir() + "/missing.pem"
	if _, err := execute(t, "-p", "--set", "controllerDLegerPeers=n0-127.0.0.1:9878", "--self-id", "n0", "--set", "tls.enable=true",
		"--set", "tls.config.file=", "--set", "tls.client.certPath="+missing, "--set", "tls.client.keyPath="+missing); err == nil || !strings.Contains(err.Error(), "tls.client.certPath") {
		t.Fatalf("a missing client certificate: %v, want an error naming tls.client.certPath", err)
	}
}
