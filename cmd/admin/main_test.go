package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/broker"
	"github.com/rocketkv/rocketkv/internal/clustertest"
	"github.com/rocketkv/rocketkv/internal/testutil"
)

// startCluster runs a name server and a broker in process.
func startCluster(t *testing.T) (nsAddr, brokerAddr string) {
	t.Helper()
	ns, b := startClusterWith(t, nil)
	return ns, b.Addr()
}

// startClusterWith is startCluster with broker settings added, returning
// the broker itself.
func startClusterWith(t *testing.T, settings map[string]string) (nsAddr string, b *broker.Broker) {
	t.Helper()
	return clustertest.Start(t, settings)
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRoot(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestBulkCreateAndInspect(t *testing.T) {
	ns, br := startCluster(t)
	out, err := run(t, "createTopics", "-b", br, "--prefix", "Bulk", "--count", "2500", "--queues", "100", "--batch", "1000")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "created 2500 topics x 100 queues (250000 queues)") {
		t.Fatalf("output %q", out)
	}
	out, err = run(t, "brokerStatus", "-b", br)
	if err != nil {
		t.Fatal(err)
	}
	// 2500 created plus the broker's system topics.
	var topics int
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "topicCount" {
			topics, _ = strconv.Atoi(f[1])
		}
	}
	if topics <= 2500 || topics > 2600 {
		t.Fatalf("topicCount %d, want 2500 and the system topics; status %q", topics, out)
	}
	// The bulk creation reaches the name server: every topic routes.
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err = run(t, "topicRoute", "-n", ns, "-t", "Bulk2499")
		if err == nil && strings.Contains(out, `"writeQueueNums":100`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("route of Bulk2499: %q %v", out, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err = run(t, "topicList", "-n", ns)
	if err != nil || strings.Count(out, "Bulk") != 2500 {
		t.Fatalf("topic list has %d Bulk topics (%v)", strings.Count(out, "Bulk"), err)
	}
	if _, err := run(t, "updateTopic", "-b", br, "-t", "Single", "-r", "3", "-w", "3"); err != nil {
		t.Fatal(err)
	}
	// Attribute modifications go to the broker as mqadmin sends them.
	if _, err := run(t, "updateTopic", "-b", br, "-t", "Single", "-r", "3", "-w", "3", "-a", "+message.type=FIFO"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "updateTopic", "-b", br, "-t", "Single", "-a", "+priority=1"); err == nil || !strings.Contains(err.Error(), "unsupported key: priority") {
		t.Fatalf("an unknown attribute: %v", err)
	}
	if _, err := run(t, "deleteTopic", "-b", br, "-n", ns, "-t", "Bulk7"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "topicRoute", "-n", ns, "-t", "Bulk7"); err == nil || !strings.Contains(err.Error(), "code 17") {
		t.Fatalf("deleted topic still routes: %v", err)
	}
	if _, err := run(t, "createTopics", "-b", br, "--prefix", "bad name", "--count", "1"); err == nil {
		t.Fatal("illegal topic name accepted")
	}
}

// The two ways of draining a broker: its own permission, and its routes'
// write permission on the name server.
func TestDrainCommands(t *testing.T) {
	ns, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "DrainT", "--read", "2", "--write", "2"); err != nil {
		t.Fatal(err)
	}
	waitRoutePerm := func(perm string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			out, err := run(t, "topicRoute", "-n", ns, "-t", "DrainT")
			if err == nil && strings.Contains(out, `"perm":`+perm) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("route of DrainT never had perm %s: %s %v", perm, out, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitRoutePerm("6")
	out, err := run(t, "updateBrokerConfig", "-b", br, "-k", "brokerPermission", "-v", "4")
	if err != nil || !strings.Contains(out, "success") {
		t.Fatalf("updateBrokerConfig: %q %v", out, err)
	}
	waitRoutePerm("4")
	out, err = run(t, "getBrokerConfig", "-b", br)
	if err != nil || !strings.Contains(out, "brokerPermission=4\n") {
		t.Fatalf("getBrokerConfig: %v\n%s", err, out)
	}
	if _, err := run(t, "updateBrokerConfig", "-b", br, "--set", "brokerPermission=6", "--set", "fileReservedTime=24"); err != nil {
		t.Fatal(err)
	}
	waitRoutePerm("6")
	if out, err := run(t, "exportPopRecord", "-b", br); err != nil || !strings.Contains(out, "success") {
		t.Fatalf("exportPopRecord: %q %v", out, err)
	}
	// The revive topic exportPopRecord writes to is routed: every start
	// creates it, so the rollback moved no topic data version (a new one
	// would be registered shortly, undoing a wipe the name server took
	// before that registration, as in RocketMQ).
	waitRoute(t, ns, "rmq_sys_REVIVE_LOG_DefaultCluster")
	if out, err := run(t, "deleteExpiredCommitLog", "-b", br); err != nil || !strings.Contains(out, "success") {
		t.Fatalf("deleteExpiredCommitLog: %q %v", out, err)
	}
	if out, err := run(t, "setCommitLogReadAheadMode", "-b", br, "-m", "1"); err != nil || out != br+": set commitlog readahead mode success, mode: 1\n" {
		t.Fatalf("setCommitLogReadAheadMode: %q %v", out, err)
	}
	if _, err := run(t, "setCommitLogReadAheadMode", "-b", br, "-m", "2"); err == nil {
		t.Fatal("setCommitLogReadAheadMode -m 2 accepted")
	}
	for _, action := range []string{"cleanUnusedTopic", "cleanExpiredCQ"} {
		if out, err := run(t, action, "-b", br); err != nil || out != "success: "+br+" "+map[string]string{
			"cleanUnusedTopic": "dropped the ConsumeQueues of topics without a config",
			"cleanExpiredCQ":   "dropped its expired ConsumeQueue entries"}[action]+"\n" {
			t.Fatalf("%s: %q %v", action, out, err)
		}
	}
	if _, err := run(t, "updateBrokerConfig", "-b", br, "-k", "listenPort", "-v", "1"); err == nil || !strings.Contains(err.Error(), "cannot change while the broker runs") {
		t.Fatalf("changing listenPort: %v", err)
	}

	out, err = run(t, "wipeWritePerm", "-n", ns, "-b", "broker-a") // mqadmin's -b: the broker name
	if err != nil || !strings.Contains(out, "wipe write perm of broker[broker-a] in name server["+ns+"] OK") {
		t.Fatalf("wipeWritePerm: %q %v", out, err)
	}
	waitRoutePerm("4")
	out, err = run(t, "addWritePerm", "-n", ns, "--broker-name", "broker-a")
	if err != nil || !strings.Contains(out, "OK") {
		t.Fatalf("addWritePerm: %q %v", out, err)
	}
	waitRoutePerm("6")
	if _, err := run(t, "wipeWritePerm", "-n", ns); err == nil {
		t.Fatal("wipeWritePerm without -b succeeded")
	}
	// Several name servers, each told.
	out, err = run(t, "addWritePerm", "-n", ns+";"+ns, "-b", "broker-a")
	if err != nil || strings.Count(out, "OK") != 2 {
		t.Fatalf("addWritePerm on two name servers: %q %v", out, err)
	}
}

func TestNamesrvConfig(t *testing.T) {
	ns, _ := startCluster(t)
	out, err := run(t, "getNamesrvConfig", "-n", ns)
	if err != nil || !strings.Contains(out, "============"+ns+"============\n") || !strings.Contains(out, "enableAllTopicList=true\n") {
		t.Fatalf("getNamesrvConfig: %v\n%s", err, out)
	}
	out, err = run(t, "updateNamesrvConfig", "-n", ns, "-k", "enableAllTopicList", "-v", "false")
	if err != nil || !strings.Contains(out, "update name server config success, "+ns) {
		t.Fatalf("updateNamesrvConfig: %q %v", out, err)
	}
	if out, err := run(t, "getNamesrvConfig", "-n", ns); err != nil || !strings.Contains(out, "enableAllTopicList=false\n") {
		t.Fatalf("getNamesrvConfig after the update: %v\n%s", err, out)
	}
	if _, err := run(t, "topicList", "-n", ns); err == nil || !strings.Contains(err.Error(), "disable") {
		t.Fatalf("topicList with the list disabled: %v", err)
	}
	if _, err := run(t, "updateNamesrvConfig", "-n", ns, "-k", "kvConfigPath", "-v", "/x"); err == nil || !strings.Contains(err.Error(), ns) {
		t.Fatalf("black-listed key: %v", err)
	}
	if _, err := run(t, "updateNamesrvConfig", "-n", ns); err == nil || !strings.Contains(err.Error(), "nothing to set") {
		t.Fatalf("nothing to set: %v", err)
	}
}

func TestQueryCq(t *testing.T) {
	_, br := startCluster(t)
	if _, err := run(t, "updateTopic", "-b", br, "-t", "CqT", "--read", "1", "--write", "1"); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "queryCq", "-b", br, "-t", "CqT", "-q", "0", "-i", "0")
	if err != nil || !strings.Contains(out, "Index 0 of 0@CqT is not exist!") {
		t.Fatalf("empty queue: %q %v", out, err)
	}
	if _, err := run(t, "queryCq", "-b", br, "-t", "NoSuchTopic"); err == nil || !strings.Contains(err.Error(), "0@NoSuchTopic is not exist!") {
		t.Fatalf("unknown topic: %v", err)
	}
}

// checkRocksdbCqWriteProgress waits for the broker's comparison of its
// two ConsumeQueue layouts and prints it; a broker that does not
// double-write while reading the file layout fails the check (exit 1).
func TestCheckRocksdbCqWriteProgress(t *testing.T) {
	ns, b := startClusterWith(t, map[string]string{"rocksdbCQDoubleWriteEnable": "true"})
	if _, err := run(t, "updateTopic", "-b", b.Addr(), "-t", "CheckT", "--read", "3", "--write", "3"); err != nil {
		t.Fatal(err)
	}
	c := client(t, b.Addr())
	for q := 0; q < 3; q++ {
		send(t, c, "CheckT", q)
	}
	// The comparison covers what is dispatched; a send is answered before.
	for q := 0; q < 3; q++ {
		waitIndexed(t, c, "CheckT", q, 1)
	}
	// mqadmin's spelling: -cf, and the long name --checkFrom.
	out, err := run(t, mqadminArgs([]string{"checkRocksdbCqWriteProgress", "-b", b.Addr(), "-cf", "0"})...)
	if err != nil || !strings.Contains(out, "kv and file agree") || !strings.Contains(out, "3 entries compared") {
		t.Fatalf("double-writing broker: %q %v", out, err)
	}
	// mqadmin's -c: every master of the cluster.
	waitClusterMember(t, ns, b.Addr())
	out, err = run(t, "checkRocksdbCqWriteProgress", "-n", ns, "-c", "DefaultCluster", "--checkFrom", "0")
	if err != nil || !strings.Contains(out, "kv and file agree") {
		t.Fatalf("double-writing cluster: %q %v", out, err)
	}
	_, single := startClusterWith(t, map[string]string{"storeType": "file"})
	out, err = run(t, "checkRocksdbCqWriteProgress", "-b", single.Addr())
	if err != nil || !strings.Contains(out, "no need check") {
		t.Fatalf("file layout alone: %q %v", out, err)
	}
}

// Against a broker with the ACL on, the tool signs its requests as the
// account given by --access-key and --secret-key (or the environment).
func TestSignedRequestsForACL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(file, []byte("accounts:\n  - {accessKey: opsadmin1, secretKey: ops-secret, admin: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, b := startClusterWith(t, map[string]string{"aclEnable": "true", "plainAclFile": file})
	t.Setenv("ROCKETKV_ACCESS_KEY", "")
	t.Setenv("ROCKETKV_SECRET_KEY", "")
	if _, err := run(t, "brokerStatus", "-b", b.Addr()); err == nil || !strings.Contains(err.Error(), "No accessKey is configured") {
		t.Fatalf("unsigned: %v", err)
	}
	if _, err := run(t, "updateTopic", "-b", b.Addr(), "-t", "AclAdminT", "--access-key", "opsadmin1", "--secret-key", "wrong-secret"); err == nil ||
		!strings.Contains(err.Error(), "Check signature failed") {
		t.Fatalf("wrong secret: %v", err)
	}
	out, err := run(t, "updateTopic", "-b", b.Addr(), "-t", "AclAdminT", "--access-key", "opsadmin1", "--secret-key", "ops-secret")
	if err != nil {
		t.Fatalf("signed admin request: %v\n%s", err, out)
	}
	t.Setenv("ROCKETKV_ACCESS_KEY", "opsadmin1")
	t.Setenv("ROCKETKV_SECRET_KEY", "ops-secret")
	if out, err := run(t, "topicStatus", "-b", b.Addr(), "-t", "AclAdminT"); err != nil {
		t.Fatalf("signed from the environment: %v\n%s", err, out)
	}
}

// A broker that enforces TLS is reached with --tls.
func TestTLSFlag(t *testing.T) {
	_, b := startClusterWith(t, map[string]string{"tls.server.mode": "enforcing"})
	if _, err := run(t, "brokerStatus", "-b", b.Addr(), "--timeout", "5s"); err == nil {
		t.Fatal("a plaintext request to an enforcing broker succeeded")
	}
	if out, err := run(t, "brokerStatus", "-b", b.Addr(), "--tls"); err != nil || !strings.Contains(out, "brokerVersion") {
		t.Fatalf("with --tls: %v\n%s", err, out)
	}
}

// --tls-config-file gives --tls the tls.client.* keys of a tls.config.file:
// the certificate a broker requiring client certificates wants, and
// tls.client.authServer's check of the broker's own.
func TestTLSConfigFileFlag(t *testing.T) {
	pki := testutil.NewPKI(t)
	brokerCert, brokerKey := pki.Issue(t, "broker")
	adminCert, adminKey := pki.Issue(t, "admin")
	_, b := startClusterWith(t, map[string]string{"tls.server.mode": "enforcing", "tls.config.file": "",
		"tls.server.certPath": brokerCert, "tls.server.keyPath": brokerKey,
		"tls.server.need.client.auth": "require", "tls.server.authClient": "true", "tls.server.trustCertPath": pki.CAPath})
	file := func(lines string) string { return testutil.WriteFile(t, "tls.properties", lines) }
	keys := "tls.client.certPath=" + adminCert + "\ntls.client.keyPath=" + adminKey + "\n"
	for _, tc := range []struct {
		name    string
		file    string
		wantErr string // empty: served
	}{
		{"the CA's certificate", file(keys), ""},
		{"and the broker's verified", file(keys + "tls.client.authServer=true\ntls.client.trustCertPath=" + pki.CAPath + "\n"), ""},
		{"no file, no certificate", filepath.Join(t.TempDir(), "absent.properties"), "certificate required"},
		{"the broker's certificate not trusted", file(keys + "tls.client.authServer=true\ntls.client.trustCertPath=" + testutil.NewPKI(t).CAPath + "\n"),
			"tls.client.authServer"},
		{"a certificate that is not there", file("tls.client.certPath=/nonexistent/c.pem\ntls.client.keyPath=" + adminKey + "\n"), "tls.client.certPath"},
	} {
		out, err := run(t, "brokerStatus", "-b", b.Addr(), "--tls", "--tls-config-file", tc.file, "--timeout", "5s")
		switch {
		case tc.wantErr == "" && (err != nil || !strings.Contains(out, "brokerVersion")):
			t.Errorf("%s: %v\n%s", tc.name, err, out)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.wantErr)
		}
	}
}

// haStatus on a master and on the slave that found it through the name
// server.
func TestHAStatus(t *testing.T) {
	fast := map[string]string{"haSendHeartbeatInterval": "50", "registerNameServerPeriod": "200"}
	ns, master := startClusterWith(t, fast)
	slaveSettings := map[string]string{"brokerRole": "SLAVE", "brokerId": "1"}
	maps.Copy(slaveSettings, fast)
	slave, _ := clustertest.StartBroker(t, ns, slaveSettings)
	if _, err := run(t, "updateTopic", "-b", master.Addr(), "-t", "HaT", "--read", "1", "--write", "1"); err != nil {
		t.Fatal(err)
	}
	var out string
	var err error
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err = run(t, "haStatus", "-b", master.Addr())
		if err == nil && fieldOf(out, "#InSyncSlaveNum") == "1" && strings.Contains(out, "OK") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("master's haStatus never showed the slave in sync: %q %v", out, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, err = run(t, "haStatus", "-b", slave.Addr())
	masterEnd := fieldOf(out0(t, "haStatus", "-b", master.Addr()), "#MasterCommitLogMaxOffset")
	if err != nil || fieldOf(out, "#MasterAddr") == "" || fieldOf(out, "#LastReadTime") == "-" ||
		fieldOf(out, "#CommitLogMaxOffset") != masterEnd {
		t.Fatalf("slave's haStatus: %q %v (master at %s)", out, err, masterEnd)
	}
}

// out0 runs the tool and fails the test on an error.
func out0(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fieldOf returns the first value after key at the start of a line of
// out ("" when absent).
func fieldOf(out, key string) string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			return f[1]
		}
	}
	return ""
}

// TestConfigUpdatesPrintTheAnswersRemark: the servers answer an update of
// a key that has no effect in rocketkv (or one they could not write back
// to their configuration file) with a success whose remark says so, as
// README promises ("whose answer names them too"); bin/admin prints that
// remark under its success line, for one broker, every master of a
// cluster and the name servers, so the operator learns it.
func TestConfigUpdatesPrintTheAnswersRemark(t *testing.T) {
	ns, br := startCluster(t)
	waitClusterMember(t, ns, br)
	want := "useReentrantLockWhenPutMessage has no effect in rocketkv: "
	out, err := run(t, "updateBrokerConfig", "-b", br, "-k", "useReentrantLockWhenPutMessage", "-v", "true")
	if err != nil || !strings.HasPrefix(out, "update broker config success, "+br+"\n") || !strings.Contains(out, want) {
		t.Fatalf("updateBrokerConfig -b of an inert key: %q %v", out, err)
	}
	out, err = run(t, "updateBrokerConfig", "-n", ns, "-c", "DefaultCluster", "-k", "useReentrantLockWhenPutMessage", "-v", "true")
	if err != nil || !strings.HasPrefix(out, "update broker config success, "+br+"\n") || !strings.Contains(out, want) {
		t.Fatalf("updateBrokerConfig -c of an inert key: %q %v", out, err)
	}
	out, err = run(t, "updateNamesrvConfig", "-n", ns, "-k", "serverWorkerThreads", "-v", "8")
	if err != nil || !strings.HasPrefix(out, "update name server config success, "+ns+"\n") || !strings.Contains(out, "serverWorkerThreads has no effect in rocketkv: ") {
		t.Fatalf("updateNamesrvConfig of an inert key: %q %v", out, err)
	}
	// A key in force without remark prints the success line alone.
	out, err = run(t, "updateBrokerConfig", "-b", br, "-k", "fileReservedTime", "-v", "48")
	if err != nil || out != "update broker config success, "+br+"\n" {
		t.Fatalf("updateBrokerConfig of a runtime key: %q %v", out, err)
	}
}

// resetMasterFlushOffset records the offset on a slave, where haStatus
// then shows it as mqadmin's #MasterFlushOffset; a master answers success
// and keeps nothing; -o is required and an unreachable broker fails.
func TestResetMasterFlushOffset(t *testing.T) {
	fast := map[string]string{"haSendHeartbeatInterval": "50", "registerNameServerPeriod": "200"}
	ns, master := startClusterWith(t, fast)
	slaveSettings := map[string]string{"brokerRole": "SLAVE", "brokerId": "1"}
	maps.Copy(slaveSettings, fast)
	slave, _ := clustertest.StartBroker(t, ns, slaveSettings)

	if got := fieldOf(out0(t, "haStatus", "-b", slave.Addr()), "#MasterFlushOffset"); got != "0" {
		t.Fatalf("a new slave's #MasterFlushOffset %q, want 0", got)
	}
	out, err := run(t, "resetMasterFlushOffset", "--brokerAddr", slave.Addr(), "--offset", "8192")
	if err != nil || out != "reset master flush offset to 8192 success\n" {
		t.Fatalf("resetMasterFlushOffset on the slave: %v\n%q", err, out)
	}
	if got := fieldOf(out0(t, "haStatus", "-b", slave.Addr()), "#MasterFlushOffset"); got != "8192" {
		t.Fatalf("after the reset the slave's #MasterFlushOffset is %q, want 8192", got)
	}
	out, err = run(t, "resetMasterFlushOffset", "-b", master.Addr(), "-o", "4096")
	if err != nil || out != "reset master flush offset to 4096 success\n" {
		t.Fatalf("resetMasterFlushOffset on the master: %v\n%q", err, out)
	}
	if _, err := run(t, "resetMasterFlushOffset", "-b", slave.Addr()); err == nil || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("without -o: %v, want a required-flag error", err)
	}
	if _, err := run(t, "resetMasterFlushOffset", "-b", deadAddr(t), "-o", "1", "--timeout", "2s"); err == nil {
		t.Fatal("an unreachable broker: no error")
	}
}
