package main

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -p prints the configuration that would run: the file's keys with the
// flags winning, every other key at its default; an unknown key is
// refused as it would be at start.
func TestPrintConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(file, []byte("brokerName=broker-x\nlistenPort=10921\nsomeRocketMQKey=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := newCommand()
	var out, warnings bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&warnings)
	cmd.SetArgs([]string{"-c", file, "-p", "-n", "10.0.0.9:9876", "--set", "flushDiskType=SYNC_FLUSH"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"brokerName=broker-x\n", "listenPort=10921\n", "namesrvAddr=10.0.0.9:9876\n",
		"flushDiskType=SYNC_FLUSH\n", "brokerClusterName=DefaultCluster\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed configuration lacks %q:\n%s", want, out.String())
		}
	}
	// The file's unknown key is warned of, as at start, and only there:
	// what is printed stays a configuration file.
	if w := warnings.String(); !strings.Contains(w, "someRocketMQKey") || !strings.Contains(w, "unknown configuration key") {
		t.Errorf("-p warned %q, want the unknown key someRocketMQKey", w)
	}
	if strings.Contains(out.String(), "someRocketMQKey") {
		t.Errorf("the unknown key is in the printed configuration:\n%s", out.String())
	}
	cmd = newCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{"-p", "--set", "noSuchKey=1"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "noSuchKey") {
		t.Fatalf("unknown --set key: %v", err)
	}
}

// printed runs broker -p with args and NAMESRV_ADDR set to env (unset
// when empty) and returns what it printed and its error.
func printed(t *testing.T, env string, args ...string) (string, error) {
	t.Helper()
	t.Setenv("NAMESRV_ADDR", env)
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs(append([]string{"-p"}, args...))
	err := cmd.Execute()
	return out.String(), err
}

// RocketMQ's broker takes namesrvAddr from NAMESRV_ADDR unless its file
// or -n names one (BrokerConfig's namesrvAddr defaults to the variable,
// the file and then the command line are applied over it).
func TestNamesrvAddrEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "broker.conf")
	silent := filepath.Join(dir, "silent.conf")
	if err := os.WriteFile(file, []byte("namesrvAddr=10.2.2.2:9876\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(silent, []byte("brokerName=broker-x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  string
		args []string
		want string
	}{
		{"", nil, "namesrvAddr=\n"},
		{"10.1.1.1:9876", nil, "namesrvAddr=10.1.1.1:9876\n"},
		{"10.1.1.1:9876", []string{"-c", silent}, "namesrvAddr=10.1.1.1:9876\n"},
		{"10.1.1.1:9876", []string{"-c", file}, "namesrvAddr=10.2.2.2:9876\n"},
		{"10.1.1.1:9876", []string{"-n", "10.3.3.3:9876"}, "namesrvAddr=10.3.3.3:9876\n"},
		{"10.1.1.1:9876", []string{"-c", file, "-n", "10.3.3.3:9876"}, "namesrvAddr=10.3.3.3:9876\n"},
		{"10.1.1.1:9876", []string{"--set", "namesrvAddr=10.4.4.4:9876"}, "namesrvAddr=10.4.4.4:9876\n"},
		{"", []string{"--set", "namesrvAddr=10.4.4.4:9876", "-n", "10.3.3.3:9876"}, "namesrvAddr=10.3.3.3:9876\n"},
	} {
		out, err := printed(t, c.env, c.args...)
		if err != nil || !strings.Contains(out, c.want) {
			t.Errorf("NAMESRV_ADDR=%q %v: %v, want %q printed:\n%s", c.env, c.args, err, c.want, out)
		}
	}
}

// A namesrvAddr that is not a list of host:port addresses is refused with
// an error that says where it came from: -n, --set, NAMESRV_ADDR or the
// file's line (the error used to say "override" for both flags).
func TestBadNamesrvAddrNamesItsSource(t *testing.T) {
	dir := t.TempDir()
	file, good := filepath.Join(dir, "broker.conf"), filepath.Join(dir, "good.conf")
	if err := os.WriteFile(file, []byte("brokerName=broker-x\nnamesrvAddr=10.0.0.1:9876;10.0.0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, []byte("namesrvAddr=10.0.0.1:9876\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		env    string
		args   []string
		source string
	}{
		{"-n without a port", "", []string{"-n", "10.0.0.1"}, "flag -n (--namesrv-addr): key namesrvAddr"},
		{"-n with ','", "", []string{"-n", "10.0.0.1:9876,10.0.0.2:9876"}, "flag -n (--namesrv-addr): key namesrvAddr"},
		{"--namesrv-addr with port 0", "", []string{"--namesrv-addr", "10.0.0.1:0"}, "flag -n (--namesrv-addr): key namesrvAddr"},
		{"--set", "", []string{"--set", "namesrvAddr=10.0.0.1:ninety"}, "flag --set: key namesrvAddr"},
		{"NAMESRV_ADDR", "10.0.0.3", nil, "environment variable NAMESRV_ADDR: key namesrvAddr"},
		{"file", "", []string{"-c", file}, "config " + file + " line 2: key namesrvAddr"},
		{"bad NAMESRV_ADDR under a good -n", "10.0.0.3", []string{"-n", "10.0.0.1:9876"}, ""},
		{"bad NAMESRV_ADDR under a good file", "10.0.0.3", []string{"-c", good}, ""},
		{"bad NAMESRV_ADDR under a good --set", "10.0.0.3", []string{"--set", "NAMESRVADDR=10.0.0.1:9876"}, ""},
		{"bad -n over a good NAMESRV_ADDR", "10.0.0.3:9876", []string{"-n", "10.0.0.1"}, "flag -n (--namesrv-addr): key namesrvAddr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := printed(t, c.env, c.args...)
			switch {
			case c.source == "" && err != nil:
				t.Fatalf("error %v, want none: NAMESRV_ADDR is not read when the file or a flag names the name servers", err)
			case c.source != "" && (err == nil || !strings.HasPrefix(err.Error(), c.source) || !strings.Contains(err.Error(), "not host:port")):
				t.Fatalf("error %v, want one starting %q and saying the address is not host:port", err, c.source)
			}
		})
	}
}

// TestPrintConfigRefusesWhatStartRefuses: README has -p check a file
// without starting anything; a configuration the broker refuses at start
// for what it says alone is refused by -p too, with the same error, not
// printed as one that would run.
func TestPrintConfigRefusesWhatStartRefuses(t *testing.T) {
	dir := t.TempDir()
	plainACL, badACL, badProxy := filepath.Join(dir, "plain_acl.yml"), filepath.Join(dir, "bad_acl.yml"), filepath.Join(dir, "rmq-proxy.json")
	for file, content := range map[string]string{
		plainACL: "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    admin: true\n",
		badACL:   "accounts:\n  - accessKey: short\n    secretKey: 12345678\n",
		badProxy: `{"enableAclRpcHookForClusterMode": true}`,
	} {
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("ROCKETMQ_HOME", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "aclEnable=true", "--set", "authenticationEnabled=true"}, "are both on"},
		{[]string{"--set", "aclEnable=true", "--set", "authorizationEnabled=true"}, "are both on"},
		{[]string{"--set", "brokerRole=SYNC_MASTER", "--set", "inSyncReplicas=2", "--set", "haListenPort=-1"}, "haListenPort=-1 opens no port"},
		{[]string{"--set", "brokerRole=SLAVE"}, "brokerRole=SLAVE needs a brokerId above 0"},
		{[]string{"--set", "tls.server.certPath=/nonexistent/hdoc-cert.pem", "--set", "tls.server.keyPath=/nonexistent/hdoc-key.pem"}, "hdoc-cert.pem"},
		// The plain ACL file the start loads (or imports into ACL 2.0).
		{[]string{"--set", "aclEnable=true"}, "set plainAclFile, or ROCKETMQ_HOME"},
		{[]string{"--set", "aclEnable=true", "--set", "plainAclFile=" + filepath.Join(dir, "missing.yml")}, "missing.yml"},
		{[]string{"--set", "aclEnable=true", "--set", "plainAclFile=" + badACL}, "longer than 6"},
		{[]string{"--set", "migrateAuthFromV1Enabled=true", "--set", "plainAclFile=" + filepath.Join(dir, "missing.yml")}, "migrateAuthFromV1Enabled"},
		// A brokerIP1 host name the start cannot resolve.
		{[]string{"--set", "brokerIP1=no-such-host.invalid"}, `brokerIP1 "no-such-host.invalid"`},
		// A Prometheus exporter whose metrics could hold nothing.
		{[]string{"--set", "metricsExporterType=PROM", "--set", "metricsOtelCardinalityLimit=0"}, "metricsOtelCardinalityLimit 0"},
		// The proxy --enable-proxy would start.
		{[]string{"--enable-proxy", "--proxy-config", badProxy}, "needs innerClientAuthenticationCredentials"},
	} {
		out, err := printed(t, "", c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("-p %v: error %v, want one saying %q (printed %d bytes)", c.args, err, c.want, len(out))
		}
	}
	// Their valid neighbours still print.
	for _, args := range [][]string{
		{"--set", "aclEnable=true", "--set", "plainAclFile=" + plainACL},
		{"--set", "authenticationEnabled=true", "--set", "authorizationEnabled=true"},
		{"--set", "brokerRole=SYNC_MASTER", "--set", "inSyncReplicas=2"},
		{"--set", "brokerRole=SLAVE", "--set", "brokerId=1"},
		{"--set", "migrateAuthFromV1Enabled=true", "--set", "plainAclFile=" + plainACL},
		{"--set", "brokerIP1=localhost"},
		{"--set", "metricsOtelCardinalityLimit=0"},
		{"--enable-proxy"},
	} {
		if out, err := printed(t, "", args...); err != nil || !strings.Contains(out, "brokerName=") {
			t.Errorf("-p %v: %v", args, err)
		}
	}
}

// -p prints the values the start derives, as mqbroker -p prints them:
// haListenPort listenPort+1 (and the fast channel's port listenPort-2)
// when 0, brokerId 0 on a master, brokerIP1 the host's address when
// empty (a host name as given), brokerIP2 brokerIP1 when empty.
func TestPrintConfigPrintsEffectiveValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"haListenPort=10912\n", "fastListenPort=10909\n", "brokerId=0\n"}},
		{[]string{"--set", "listenPort=10921"}, []string{"haListenPort=10922\n", "fastListenPort=10919\n"}},
		{[]string{"--set", "haListenPort=20000", "--set", "fastListenPort=-1"}, []string{"haListenPort=20000\n", "fastListenPort=-1\n"}},
		{[]string{"--set", "haListenPort=-1"}, []string{"haListenPort=-1\n"}},
		// Picked at start: nothing to derive.
		{[]string{"--set", "listenPort=0"}, []string{"haListenPort=0\n", "fastListenPort=0\n"}},
		{[]string{"--set", "brokerId=3"}, []string{"brokerId=0\n"}},
		{[]string{"--set", "brokerRole=SYNC_MASTER", "--set", "brokerId=3"}, []string{"brokerId=0\n"}},
		{[]string{"--set", "brokerRole=SLAVE", "--set", "brokerId=2"}, []string{"brokerId=2\n", "accessMessageInMemoryMaxRatio=30\n"}},
		{[]string{"--set", "brokerRole=SLAVE", "--set", "brokerId=2", "--set", "accessMessageInMemoryMaxRatio=5"}, []string{"accessMessageInMemoryMaxRatio=0\n"}},
		{[]string{"--set", "brokerRole=ASYNC_MASTER"}, []string{"accessMessageInMemoryMaxRatio=40\n"}},
		{[]string{"--set", "brokerIP1=10.1.2.3"}, []string{"brokerIP1=10.1.2.3\n", "brokerIP2=10.1.2.3\n"}},
		{[]string{"--set", "brokerIP1=localhost", "--set", "brokerIP2=10.9.9.9"}, []string{"brokerIP1=localhost\n", "brokerIP2=10.9.9.9\n"}},
	} {
		out, err := printed(t, "", c.args...)
		if err != nil {
			t.Errorf("-p %v: %v", c.args, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("-p %v printed no %q", c.args, w)
			}
		}
	}
	// An empty brokerIP1 is the address the broker would store and
	// register, also as brokerIP2.
	out, err := printed(t, "")
	if err != nil {
		t.Fatal(err)
	}
	ip1, ip2 := printedValue(out, "brokerIP1"), printedValue(out, "brokerIP2")
	if _, err := netip.ParseAddr(ip1); err != nil || ip2 != ip1 {
		t.Errorf("-p printed brokerIP1=%q brokerIP2=%q, want an address, twice", ip1, ip2)
	}
}

// printedValue is key's value in -p's output ("" when absent).
func printedValue(out, key string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return v
		}
	}
	return ""
}

// mqbroker's long option names (--configFile, --namesrvAddr,
// --printConfigItem, --printImportantConfig) and -m, which prints only
// the keys RocketMQ marks important, are taken as mqbroker takes them.
func TestRocketMQFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(file, []byte("brokerName=broker-x\nlistenPort=10921\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		t.Helper()
		t.Setenv("NAMESRV_ADDR", "")
		cmd := newCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(rocketmqArgs(args))
		err := cmd.Execute()
		return out.String(), err
	}
	for _, args := range [][]string{
		{"--configFile", file, "--namesrvAddr", "10.0.0.9:9876", "--printConfigItem"},
		{"--configFile=" + file, "--namesrvAddr=10.0.0.9:9876", "-p"},
	} {
		out, err := run(args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for _, want := range []string{"brokerName=broker-x\n", "listenPort=10921\n", "namesrvAddr=10.0.0.9:9876\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v printed no %q", args, want)
			}
		}
	}
	for _, args := range [][]string{{"-c", file, "-m"}, {"-c", file, "--printImportantConfig"}} {
		out, err := run(args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		// listenPort and haListenPort are important, brokerName is not
		// (RocketMQ's BrokerConfig does not mark it).
		if !strings.Contains(out, "listenPort=10921\n") || !strings.Contains(out, "haListenPort=10922\n") ||
			strings.Contains(out, "brokerName=") || strings.Contains(out, "logLevel=") {
			t.Errorf("%v printed:\n%s\nwant the important keys only", args, out)
		}
	}
	// What -p refuses, -m refuses.
	if _, err := run("-m", "--set", "brokerRole=SLAVE"); err == nil || !strings.Contains(err.Error(), "brokerId above 0") {
		t.Errorf("-m of a SLAVE without a brokerId: %v", err)
	}
}
