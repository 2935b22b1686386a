package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/remotingtest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/metrics"
	"github.com/rocketkv/rocketkv/remoting"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testConfig is a one-peer controller with quick timers, its store in dir
// ("" keeps it in memory).
func testConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.Group = "group1"
	cfg.Peers = "n0-127.0.0.1:19878"
	cfg.SelfID = "n0"
	cfg.StorePath = dir
	cfg.RaftTimeout = 200 * time.Millisecond
	cfg.ScanNotActiveBrokerInterval = 50 * time.Millisecond
	cfg.ScanInactiveMasterInterval = 50 * time.Millisecond
	return cfg
}

type testController struct {
	*Controller
	srv  *remoting.Server
	logs *testutil.SyncBuffer
}

// startController starts a controller with cfg, served on a loopback
// port; waitLead waits until it leads.
func startController(t *testing.T, cfg Config, waitLead bool) *testController {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	c, err := New(Options{Config: cfg, Log: zerolog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close controller: %v", err)
		}
	})
	srv := remotingtest.StartServer(t, c.Handler())
	if waitLead {
		waitFor(t, "the controller to lead", c.IsLeader)
	}
	return &testController{Controller: c, srv: srv, logs: logs}
}

func dial(t *testing.T, addr string) *remoting.Client {
	t.Helper()
	cl, err := remoting.Dial(testCtx(t), addr, remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func invoke(t *testing.T, cl *remoting.Client, code int32, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	resp, err := cl.Invoke(testCtx(t), remoting.NewRequest(code, ext, body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func wantCode(t *testing.T, what string, resp *remoting.Command, code int32) {
	t.Helper()
	if resp.Code != code {
		t.Fatalf("%s: code %d (%s), want %d", what, resp.Code, resp.Remark, code)
	}
}

// broker plays a broker of group broker-a as RocketMQ's ReplicasManager
// talks to the controller.
type broker struct {
	t    *testing.T
	cl   *remoting.Client
	addr string
	id   int64
}

func (b *broker) applyID() {
	b.t.Helper()
	resp := invoke(b.t, b.cl, remoting.ControllerGetNextBrokerID, map[string]string{"clusterName": "c1", "brokerName": "broker-a"}, nil)
	wantCode(b.t, "get next broker id", resp, remoting.Success)
	id, err := strconv.ParseInt(resp.ExtFields["nextBrokerId"], 10, 64)
	if err != nil {
		b.t.Fatalf("nextBrokerId %q: %v", resp.ExtFields["nextBrokerId"], err)
	}
	resp = invoke(b.t, b.cl, remoting.ControllerApplyBrokerID, map[string]string{
		"clusterName": "c1", "brokerName": "broker-a", "appliedBrokerId": strconv.FormatInt(id, 10),
		"registerCheckCode": b.addr + ";1700000000000",
	}, nil)
	wantCode(b.t, "apply broker id", resp, remoting.Success)
	b.id = id
}

func (b *broker) register() *remoting.Command {
	b.t.Helper()
	return invoke(b.t, b.cl, remoting.ControllerRegisterBroker, map[string]string{
		"clusterName": "c1", "brokerName": "broker-a", "brokerId": strconv.FormatInt(b.id, 10), "brokerAddress": b.addr,
	}, nil)
}

func (b *broker) heartbeat(timeoutMs int64, epoch int32, maxOffset int64) {
	b.t.Helper()
	resp := invoke(b.t, b.cl, remoting.BrokerHeartbeat, map[string]string{
		"clusterName": "c1", "brokerName": "broker-a", "brokerAddr": b.addr, "brokerId": strconv.FormatInt(b.id, 10),
		"epoch": strconv.Itoa(int(epoch)), "maxOffset": strconv.FormatInt(maxOffset, 10), "confirmOffset": "0",
		"heartbeatTimeoutMills": strconv.FormatInt(timeoutMs, 10), "electionPriority": "1",
	}, nil)
	wantCode(b.t, "heartbeat", resp, remoting.Success)
}

func (b *broker) elect() *remoting.Command {
	b.t.Helper()
	return invoke(b.t, b.cl, remoting.ControllerElectMaster, map[string]string{
		"clusterName": "c1", "brokerName": "broker-a", "brokerId": strconv.FormatInt(b.id, 10), "designateElect": "false",
	}, nil)
}

func alter(t *testing.T, cl *remoting.Client, master int64, masterEpoch int32, set []int64, setEpoch int32) *remoting.Command {
	t.Helper()
	body := SyncStateSetBody{SyncStateSet: set, SyncStateSetEpoch: setEpoch}.Encode()
	return invoke(t, cl, remoting.ControllerAlterSyncStateSet, map[string]string{
		"brokerName": "broker-a", "masterBrokerId": strconv.FormatInt(master, 10), "masterEpoch": strconv.Itoa(int(masterEpoch)),
		"invokeTime": "1",
	}, body)
}

// TestBrokerLifecycle drives a group of two brokers through ids,
// registration, the first election and sync state set changes, each
// refusal with RocketMQ's code.
func TestBrokerLifecycle(t *testing.T) {
	c := startController(t, testConfig(t.TempDir()), true)
	b1 := &broker{t: t, cl: dial(t, c.srv.Addr().String()), addr: "10.0.0.1:30911"}
	b2 := &broker{t: t, cl: dial(t, c.srv.Addr().String()), addr: "10.0.0.2:30911"}

	b1.applyID()
	b2.applyID()
	if b1.id != 1 || b2.id != 2 {
		t.Fatalf("ids %d, %d; want 1, 2", b1.id, b2.id)
	}
	// Another broker may not take id 1 with its own check code; b1 may
	// take it again with its own.
	resp := invoke(t, b2.cl, remoting.ControllerApplyBrokerID, map[string]string{
		"clusterName": "c1", "brokerName": "broker-a", "appliedBrokerId": "1", "registerCheckCode": "10.0.0.9:30911;1",
	}, nil)
	wantCode(t, "apply a taken id", resp, remoting.ControllerBrokerIDInvalid)
	resp = invoke(t, b1.cl, remoting.ControllerApplyBrokerID, map[string]string{
		"clusterName": "c1", "brokerName": "broker-a", "appliedBrokerId": "1", "registerCheckCode": b1.addr + ";1700000000000",
	}, nil)
	wantCode(t, "re-apply own id", resp, remoting.Success)
	resp = invoke(t, b1.cl, remoting.ControllerApplyBrokerID, map[string]string{
		"clusterName": "c1", "brokerName": "broker-z", "appliedBrokerId": "2", "registerCheckCode": "x;1",
	}, nil)
	wantCode(t, "first id of a new group other than 1", resp, remoting.ControllerBrokerIDInvalid)

	resp = b1.register()
	wantCode(t, "register", resp, remoting.Success)
	if _, ok := resp.ExtFields["masterBrokerId"]; ok {
		t.Fatalf("register before any election names a master: %v", resp.ExtFields)
	}
	b1.heartbeat(10000, 0, 100)
	b2.heartbeat(10000, 0, 100)

	resp = b1.elect()
	wantCode(t, "first election", resp, remoting.Success)
	if resp.ExtFields["masterBrokerId"] != "1" || resp.ExtFields["masterAddress"] != b1.addr || resp.ExtFields["masterEpoch"] != "1" || resp.ExtFields["syncStateSetEpoch"] != "1" {
		t.Fatalf("election header %v", resp.ExtFields)
	}
	body, err := DecodeElectMasterResponseBody(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if body.BrokerMemberGroup == nil || body.BrokerMemberGroup.BrokerAddrs[2] != b2.addr || !slices.Equal(body.SyncStateSet, []int64{1}) {
		t.Fatalf("election body %s", resp.Body)
	}
	resp = b2.elect()
	wantCode(t, "election with a live master", resp, remoting.ControllerMasterStillExist)
	if resp.ExtFields["masterBrokerId"] != "1" {
		t.Fatalf("still-exist header %v", resp.ExtFields)
	}

	resp = invoke(t, b2.cl, remoting.ControllerGetReplicaInfo, map[string]string{"brokerName": "broker-a"}, nil)
	wantCode(t, "get replica info", resp, remoting.Success)
	if resp.ExtFields["masterBrokerId"] != "1" || resp.ExtFields["masterEpoch"] != "1" {
		t.Fatalf("replica info %v", resp.ExtFields)
	}
	resp = invoke(t, b2.cl, remoting.ControllerGetReplicaInfo, map[string]string{"brokerName": "nope"}, nil)
	wantCode(t, "replica info of an unknown group", resp, remoting.ControllerBrokerMetadataNotExist)

	// Alter the sync state set: refused ones first.
	wantCode(t, "alter by a non-master", alter(t, b1.cl, 2, 1, []int64{1, 2}, 1), remoting.ControllerInvalidMaster)
	wantCode(t, "alter with a stale master epoch", alter(t, b1.cl, 1, 0, []int64{1, 2}, 1), remoting.ControllerFencedMasterEpoch)
	wantCode(t, "alter with a stale set epoch", alter(t, b1.cl, 1, 1, []int64{1, 2}, 0), remoting.ControllerFencedSyncStateSetEpoch)
	wantCode(t, "alter with an unknown replica", alter(t, b1.cl, 1, 1, []int64{1, 7}, 1), remoting.ControllerInvalidReplicas)
	wantCode(t, "alter to the same set", alter(t, b1.cl, 1, 1, []int64{1}, 1), remoting.ControllerAlterSyncStateSetFailed)
	wantCode(t, "alter without the master", alter(t, b1.cl, 1, 1, []int64{2}, 1), remoting.ControllerAlterSyncStateSetFailed)
	resp = alter(t, b1.cl, 1, 1, []int64{1, 2}, 1)
	wantCode(t, "alter", resp, remoting.Success)
	if resp.ExtFields["newSyncStateSetEpoch"] != "2" {
		t.Fatalf("alter header %v", resp.ExtFields)
	}
	set, err := DecodeSyncStateSet(resp.Body)
	if err != nil || !slices.Equal(set.SyncStateSet, []int64{1, 2}) || set.SyncStateSetEpoch != 2 {
		t.Fatalf("alter body %s (%v)", resp.Body, err)
	}
	// A replica whose heartbeats are not current cannot join.
	b3 := &broker{t: t, cl: dial(t, c.srv.Addr().String()), addr: "10.0.0.3:30911"}
	b3.applyID()
	wantCode(t, "alter with a dead replica", alter(t, b1.cl, 1, 1, []int64{1, 2, b3.id}, 2), remoting.ControllerBrokerNotAlive)

	// The sync state data an admin reads.
	names, _ := json.Marshal([]string{"broker-a", "unknown"})
	resp = invoke(t, b1.cl, remoting.ControllerGetSyncStateData, nil, names)
	wantCode(t, "get sync state data", resp, remoting.Success)
	info, err := DecodeBrokerReplicasInfo(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	ri, ok := info.ReplicasInfoTable["broker-a"]
	if !ok || len(info.ReplicasInfoTable) != 1 || ri.MasterBrokerID == nil || *ri.MasterBrokerID != 1 || len(ri.InSyncReplicas) != 2 ||
		len(ri.NotInSyncReplicas) != 1 || ri.NotInSyncReplicas[0].Alive || !ri.InSyncReplicas[1].Alive {
		t.Fatalf("sync state data %s", resp.Body)
	}

	// Cleaning a group with a master is refused; dead ids may go.
	resp = invoke(t, b1.cl, remoting.CleanBrokerData, map[string]string{"clusterName": "c1", "brokerName": "broker-a"}, nil)
	wantCode(t, "clean a live group", resp, remoting.ControllerInvalidCleanBrokerMetadata)
	resp = invoke(t, b1.cl, remoting.CleanBrokerData, map[string]string{"clusterName": "c1", "brokerName": "broker-a", "brokerControllerIdsToClean": "2"}, nil)
	wantCode(t, "clean a live id", resp, remoting.ControllerInvalidCleanBrokerMetadata)
	resp = invoke(t, b1.cl, remoting.CleanBrokerData, map[string]string{"clusterName": "c1", "brokerName": "broker-a", "brokerControllerIdsToClean": strconv.FormatInt(b3.id, 10)}, nil)
	wantCode(t, "clean a dead id", resp, remoting.Success)
	if _, ok := c.State().Replicas["broker-a"].Brokers[b3.id]; ok {
		t.Fatal("the cleaned id is still there")
	}
}

// notifyRecorder is a broker's Remoting server that records
// NOTIFY_BROKER_ROLE_CHANGED.
type notifyRecorder struct {
	mu   sync.Mutex
	got  []*remoting.Command
	addr string
}

func startNotifyRecorder(t *testing.T) *notifyRecorder {
	r := &notifyRecorder{}
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.NotifyBrokerRoleChanged, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, req)
	})
	r.addr = remotingtest.StartServer(t, mux).Addr().String()
	return r
}

func (r *notifyRecorder) last() *remoting.Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		return nil
	}
	return r.got[len(r.got)-1]
}

// TestElectionWhenMasterHeartbeatsStop: the master stops heartbeating; the
// controller elects the in-sync replica and notifies it.
func TestElectionWhenMasterHeartbeatsStop(t *testing.T) {
	c := startController(t, testConfig(""), true)
	rec := startNotifyRecorder(t)
	b1 := &broker{t: t, cl: dial(t, c.srv.Addr().String()), addr: "127.0.0.1:1"}
	b2 := &broker{t: t, cl: dial(t, c.srv.Addr().String()), addr: rec.addr}
	b1.applyID()
	b2.applyID()
	wantCode(t, "register 1", b1.register(), remoting.Success)
	wantCode(t, "register 2", b2.register(), remoting.Success)
	b1.heartbeat(300, 0, 10)
	b2.heartbeat(60000, 0, 10)
	wantCode(t, "first election", b1.elect(), remoting.Success)
	waitFor(t, "the first notice", func() bool { return rec.last() != nil })
	wantCode(t, "alter", alter(t, b1.cl, 1, 1, []int64{1, 2}, 1), remoting.Success)

	// b1 sends no more heartbeats: after 300 ms it is gone and b2, in
	// sync, becomes master with epoch 2.
	waitFor(t, "a new master", func() bool {
		ss := c.State().SyncStates["broker-a"]
		return ss.HasMaster && ss.MasterID == 2
	})
	ss := c.State().SyncStates["broker-a"]
	if ss.MasterEpoch != 2 || !slices.Equal(ss.SyncStateSet, []int64{2}) || ss.SyncStateSetEpoch != 3 {
		t.Fatalf("state after the election %+v", ss)
	}
	waitFor(t, "the notice of the new master", func() bool {
		n := rec.last()
		return n != nil && n.ExtFields["masterBrokerId"] == "2"
	})
	n := rec.last()
	if n.ExtFields["masterEpoch"] != "2" || n.ExtFields["masterAddress"] != rec.addr || n.ExtFields["syncStateSetEpoch"] != "3" {
		t.Fatalf("notice header %v", n.ExtFields)
	}
	set, err := DecodeSyncStateSet(n.Body)
	if err != nil || !slices.Equal(set.SyncStateSet, []int64{2}) || set.SyncStateSetEpoch != 3 {
		t.Fatalf("notice body %s (%v)", n.Body, err)
	}
	resp := b2.register()
	wantCode(t, "register after the failover", resp, remoting.Success)
	if resp.ExtFields["masterBrokerId"] != "2" || resp.ExtFields["masterEpoch"] != "2" {
		t.Fatalf("register names %v", resp.ExtFields)
	}
}

// TestNoCandidateLeavesNoMaster: the master's connection closes and no
// in-sync replica is alive; the group is left without a master (epoch
// bumped), and enableElectUncleanMaster would have let the other take it.
func TestNoCandidateLeavesNoMaster(t *testing.T) {
	c := startController(t, testConfig(""), true)
	admin := dial(t, c.srv.Addr().String())
	b1cl, err := remoting.Dial(testCtx(t), c.srv.Addr().String(), remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b1 := &broker{t: t, cl: b1cl, addr: "127.0.0.1:1"}
	b2 := &broker{t: t, cl: dial(t, c.srv.Addr().String()), addr: "127.0.0.1:2"}
	b1.applyID()
	b2.applyID()
	b1.heartbeat(60000, 0, 10)
	b2.heartbeat(60000, 0, 10)
	wantCode(t, "first election", b1.elect(), remoting.Success)
	_ = b1cl.Close()
	// Each of the electMasterMaxRetryCount (3) tries finds no candidate
	// and records the group masterless, bumping the epoch, as RocketMQ.
	waitFor(t, "the master to be dropped", func() bool {
		ss := c.State().SyncStates["broker-a"]
		return !ss.HasMaster && ss.MasterEpoch == 4
	})
	time.Sleep(200 * time.Millisecond) // the scans run every 50 ms: nothing more happens
	if ss := c.State().SyncStates["broker-a"]; ss.HasMaster || ss.MasterEpoch != 4 {
		t.Fatalf("after the tries: %+v", ss)
	}
	// Broker 2 asks: not in sync, unclean elections off.
	wantCode(t, "election outside the set", b2.elect(), remoting.ControllerElectMasterFailed)
	resp := invoke(t, admin, remoting.UpdateControllerConfig, nil, []byte("enableElectUncleanMaster=true\n"))
	wantCode(t, "update config", resp, remoting.Success)
	if !strings.Contains(resp.Remark, "without a configuration file") {
		t.Errorf("an update without Options.Persist: remark %q", resp.Remark)
	}
	resp = b2.elect()
	wantCode(t, "unclean election", resp, remoting.Success)
	if resp.ExtFields["masterBrokerId"] != "2" || resp.ExtFields["masterEpoch"] != "5" {
		t.Fatalf("unclean election header %v", resp.ExtFields)
	}
}

// TestRestartKeepsState: ids, master and sync state set survive a restart
// from controllerStorePath, snapshots included.
// runSeeded starts a controller of cfg, gives brokers 10.0.0.1 and
// 10.0.0.2 of group broker-a ids 1 and 2 with heartbeats, elects 1, runs
// more (when set) with the controller and broker 1, and closes the
// controller: a store for a restart.
func runSeeded(t *testing.T, cfg Config, more func(c *Controller, b1 *broker)) {
	t.Helper()
	c, err := New(Options{Config: cfg, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	srv := remotingtest.StartServer(t, c.Handler())
	waitFor(t, "leadership", c.IsLeader)
	b1 := &broker{t: t, cl: dial(t, srv.Addr().String()), addr: "10.0.0.1:30911"}
	b2 := &broker{t: t, cl: dial(t, srv.Addr().String()), addr: "10.0.0.2:30911"}
	b1.applyID()
	b2.applyID()
	b1.heartbeat(60000, 0, 1)
	b2.heartbeat(60000, 0, 1)
	wantCode(t, "elect", b1.elect(), remoting.Success)
	if more != nil {
		more(c, b1)
	}
}

// TestRestartKeepsState: a controller restarted on its store (a snapshot
// and log after it) keeps the group's master, epochs, sync state set and
// next broker id.
func TestRestartKeepsState(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	runSeeded(t, cfg, func(c *Controller, b1 *broker) {
		// A snapshot in the middle, then more log.
		if err := c.node.raft.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
		wantCode(t, "alter", alter(t, b1.cl, 1, 1, []int64{1, 2}, 1), remoting.Success)
	})

	c := startController(t, cfg, true)
	cl := dial(t, c.srv.Addr().String())
	resp := invoke(t, cl, remoting.ControllerGetReplicaInfo, map[string]string{"brokerName": "broker-a"}, nil)
	wantCode(t, "replica info after restart", resp, remoting.Success)
	set, err := DecodeSyncStateSet(resp.Body)
	if resp.ExtFields["masterBrokerId"] != "1" || resp.ExtFields["masterEpoch"] != "1" || err != nil ||
		!slices.Equal(set.SyncStateSet, []int64{1, 2}) || set.SyncStateSetEpoch != 2 {
		t.Fatalf("after restart: %v %s (%v)", resp.ExtFields, resp.Body, err)
	}
	resp = invoke(t, cl, remoting.ControllerGetNextBrokerID, map[string]string{"clusterName": "c1", "brokerName": "broker-a"}, nil)
	if resp.ExtFields["nextBrokerId"] != "3" {
		t.Fatalf("next id after restart: %v", resp.ExtFields)
	}
}

// TestBadRequests: missing or malformed fields get SYSTEM_ERROR naming the
// field (RocketMQ's decoding failure), a heartbeat without brokerId
// CONTROLLER_INVALID_REQUEST, and the black-listed keys NO_PERMISSION.
func TestBadRequests(t *testing.T) {
	c := startController(t, testConfig(""), true)
	cl := dial(t, c.srv.Addr().String())
	for _, tc := range []struct {
		code  int32
		ext   map[string]string
		body  []byte
		want  int32
		field string
	}{
		{remoting.ControllerApplyBrokerID, map[string]string{"brokerName": "a", "appliedBrokerId": "1"}, nil, remoting.SystemError, "registerCheckCode"},
		{remoting.ControllerApplyBrokerID, map[string]string{"brokerName": "a", "appliedBrokerId": "x", "registerCheckCode": "a;1"}, nil, remoting.SystemError, "appliedBrokerId"},
		{remoting.ControllerElectMaster, map[string]string{"clusterName": "c", "brokerName": "a", "brokerId": "1"}, nil, remoting.SystemError, "designateElect"},
		{remoting.ControllerAlterSyncStateSet, map[string]string{"brokerName": "a", "masterBrokerId": "1", "masterEpoch": "1"}, nil, remoting.SystemError, "sync state set"},
		{remoting.ControllerAlterSyncStateSet, map[string]string{"brokerName": "a", "masterBrokerId": "1", "masterEpoch": "1"}, []byte(`{"syncStateSet":[1,`), remoting.SystemError, "sync state set"},
		{remoting.ControllerAlterSyncStateSet, map[string]string{"brokerName": "a", "masterBrokerId": "1"}, []byte(`{"syncStateSet":[1]}`), remoting.SystemError, "masterEpoch"},
		{remoting.ControllerRegisterBroker, map[string]string{"brokerName": "a", "brokerId": "1"}, nil, remoting.SystemError, "brokerAddress"},
		{remoting.ControllerGetReplicaInfo, nil, nil, remoting.SystemError, "brokerName"},
		{remoting.CleanBrokerData, map[string]string{"clusterName": "c"}, nil, remoting.SystemError, "brokerName"},
		{remoting.ControllerGetSyncStateData, nil, []byte(`not json`), remoting.SystemError, "broker name list"},
		{remoting.ControllerGetSyncStateData, nil, nil, remoting.SystemError, "no broker names"},
		{remoting.BrokerHeartbeat, map[string]string{"clusterName": "c", "brokerName": "a"}, nil, remoting.SystemError, "brokerAddr"},
		{remoting.BrokerHeartbeat, map[string]string{"clusterName": "c", "brokerName": "a", "brokerAddr": "x:1"}, nil, remoting.ControllerInvalidRequest, "empty brokerId"},
		{remoting.BrokerHeartbeat, map[string]string{"clusterName": "c", "brokerName": "a", "brokerAddr": "x:1", "brokerId": "1", "epoch": "99999999999"}, nil, remoting.SystemError, "epoch"},
		{remoting.UpdateControllerConfig, nil, []byte("configStorePath=/tmp/x\n"), remoting.NoPermission, "black list"},
		{remoting.UpdateControllerConfig, nil, []byte("controllerDLegerPeers=n1-1.2.3.4:5\n"), remoting.InvalidParameter, "controllerDLegerPeers"},
		{remoting.UpdateControllerConfig, nil, []byte("noSuchKey=1\n"), remoting.InvalidParameter, "noSuchKey"},
	} {
		resp := invoke(t, cl, tc.code, tc.ext, tc.body)
		if resp.Code != tc.want || !strings.Contains(resp.Remark, tc.field) {
			t.Errorf("code %d %v %q: answered %d %q, want %d naming %q", tc.code, tc.ext, tc.body, resp.Code, resp.Remark, tc.want, tc.field)
		}
	}
	if !strings.Contains(c.logs.String(), "controller request refused") {
		t.Error("refusals are not logged")
	}
	resp := invoke(t, cl, remoting.GetControllerConfig, nil, nil)
	wantCode(t, "get config", resp, remoting.Success)
	if !strings.Contains(string(resp.Body), "controllerDLegerSelfId=n0\n") || !strings.Contains(string(resp.Body), "notifyBrokerRoleChanged=true\n") {
		t.Fatalf("config body %q", resp.Body)
	}
}

// TestThreePeers: three controllers elect one raft leader; the others
// answer CONTROLLER_NOT_LEADER to writes and name the leader in their
// metadata; the state written at the leader reaches every peer.
func TestThreePeers(t *testing.T) {
	ports := []int{testutil.FreePortPair(t), 0, 0}
	ports[1] = testutil.FreePortPair(t)
	for ports[1] == ports[0] || ports[1] == ports[0]+1 || ports[1]+1 == ports[0] {
		ports[1] = testutil.FreePortPair(t)
	}
	ports[2] = testutil.FreePortPair(t)
	for slices.Contains(ports[:2], ports[2]) || slices.Contains(ports[:2], ports[2]+1) || slices.Contains(ports[:2], ports[2]-1) {
		ports[2] = testutil.FreePortPair(t)
	}
	peers := fmt.Sprintf("n0-127.0.0.1:%d;n1-127.0.0.1:%d;n2-127.0.0.1:%d", ports[0], ports[1], ports[2])
	var cs []*testController
	for i := range 3 {
		cfg := testConfig(t.TempDir())
		cfg.Peers = peers
		cfg.SelfID = fmt.Sprintf("n%d", i)
		cs = append(cs, startController(t, cfg, false))
	}
	for _, c := range cs {
		if err := c.WaitLeader(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	var leader *testController
	waitFor(t, "a raft leader", func() bool {
		for _, c := range cs {
			if c.IsLeader() {
				leader = c
				return true
			}
		}
		return false
	})
	b := &broker{t: t, cl: dial(t, leader.srv.Addr().String()), addr: "10.0.0.1:30911"}
	b.applyID()
	for _, c := range cs {
		waitFor(t, "the id to replicate to "+c.self.ID, func() bool {
			_, ok := c.State().Replicas["broker-a"]
			return ok
		})
		cl := dial(t, c.srv.Addr().String())
		md := invoke(t, cl, remoting.ControllerGetMetadataInfo, nil, nil)
		wantCode(t, "metadata", md, remoting.Success)
		if md.ExtFields["controllerLeaderId"] != leader.self.ID || md.ExtFields["controllerLeaderAddress"] != leader.self.Addr ||
			md.ExtFields["group"] != "group1" || !strings.Contains(md.ExtFields["peers"], "n2:127.0.0.1:") {
			t.Fatalf("metadata of %s: %v", c.self.ID, md.ExtFields)
		}
		if c == leader {
			if md.ExtFields["isLeader"] != "true" {
				t.Fatalf("leader metadata %v", md.ExtFields)
			}
			if r := c.role(); r != metrics.RoleLeader {
				t.Errorf("the leader's role metric %d", r)
			}
			continue
		}
		if md.ExtFields["isLeader"] != "false" {
			t.Fatalf("follower metadata %v", md.ExtFields)
		}
		if r := c.role(); r != metrics.RoleFollower {
			t.Errorf("%s's role metric %d, want follower", c.self.ID, r)
		}
		resp := invoke(t, cl, remoting.ControllerApplyBrokerID, map[string]string{
			"clusterName": "c1", "brokerName": "broker-b", "appliedBrokerId": "1", "registerCheckCode": "x:1;1",
		}, nil)
		wantCode(t, "apply at a follower", resp, remoting.ControllerNotLeader)
		resp = invoke(t, cl, remoting.ControllerGetReplicaInfo, map[string]string{"brokerName": "broker-a"}, nil)
		wantCode(t, "read at a follower", resp, remoting.ControllerNotLeader)
	}

	// The leader stops: one of the others takes over with the state.
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	var next *testController
	waitFor(t, "a new raft leader", func() bool {
		for _, c := range cs {
			if c != leader && c.IsLeader() {
				next = c
				return true
			}
		}
		return false
	})
	if r, rn := leader.role(), next.role(); r != metrics.RoleUnknown || rn != metrics.RoleLeader {
		t.Errorf("role metrics after the leader stopped: %d (stopped), %d (new leader)", r, rn)
	}
	cl := dial(t, next.srv.Addr().String())
	resp := invoke(t, cl, remoting.ControllerGetNextBrokerID, map[string]string{"clusterName": "c1", "brokerName": "broker-a"}, nil)
	wantCode(t, "next id at the new leader", resp, remoting.Success)
	if resp.ExtFields["nextBrokerId"] != "2" {
		t.Fatalf("next id at the new leader: %v", resp.ExtFields)
	}
	b2 := &broker{t: t, cl: cl, addr: "10.0.0.2:30911"}
	b2.applyID()
	if b2.id != 2 {
		t.Fatalf("id at the new leader %d", b2.id)
	}
}

// TestConfigErrors: a controller without peers or self id does not start,
// with RocketMQ's message naming the key.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Peers = "" }, "controllerDLegerPeers"},
		{func(c *Config) { c.SelfID = "" }, "controllerDLegerSelfId"},
		{func(c *Config) { c.SelfID = "n9" }, "controllerDLegerSelfId"},
		{func(c *Config) { c.Peers = "n0127.0.0.1:1" }, "controllerDLegerPeers"},
		{func(c *Config) { c.Peers = "n0-127.0.0.1:1;n0-127.0.0.1:3" }, "twice"},
		{func(c *Config) { c.Peers = "n0-127.0.0.1:65535" }, "port"},
	} {
		cfg := testConfig("")
		tc.mutate(&cfg)
		if _, err := New(Options{Config: cfg}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", cfg, err, tc.want)
		}
	}
}

// TestChangedPeersWarn: a store keeps the membership of its first start;
// a restart with other peers says so.
func TestChangedPeersWarn(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	c := startController(t, cfg, true)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Peers = fmt.Sprintf("n0-127.0.0.1:%d;n1-127.0.0.1:%d", testutil.FreePortPair(t), testutil.FreePortPair(t))
	c2 := startController(t, cfg, false)
	waitFor(t, "the warning", func() bool { return strings.Contains(c2.logs.String(), "differs from the raft membership") })
	if strings.Contains(c.logs.String(), "differs from the raft membership") {
		t.Fatal("the first start warned")
	}
}

// TestNoticesNewestWins: of the notices waiting for one broker only the
// newest master epoch is sent, so a broker never hears an older master
// last.
func TestNoticesNewestWins(t *testing.T) {
	c, err := New(Options{Config: testConfig(""), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rec := startNotifyRecorder(t)
	c.noticeMu.Lock()
	c.sending[rec.addr] = true // hold the sender back while notices queue
	c.noticeMu.Unlock()
	for _, epoch := range []int32{5, 4, 6, 6, 2} {
		c.enqueueNotice(rec.addr, notice{masterEpoch: epoch, masterID: 1, ext: map[string]string{"masterEpoch": strconv.Itoa(int(epoch))}, body: []byte(`{}`)})
	}
	c.wg.Add(1)
	go c.sendNotices(rec.addr)
	waitFor(t, "the notice", func() bool { return rec.last() != nil })
	c.wg.Wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 1 || rec.got[0].ExtFields["masterEpoch"] != "6" {
		var got []string
		for _, r := range rec.got {
			got = append(got, r.ExtFields["masterEpoch"])
		}
		t.Fatalf("sent epochs %v, want [6]", got)
	}
}

// TestRestartedLeaderGivesBrokersAScanPeriod: a controller restarted on
// its store knows no heartbeat; its inactive-master scan waits one
// scanInactiveMasterInterval from when it leads, as RocketMQ's
// DLedgerController schedules it, so a master that heartbeats within
// that period keeps its place though a slave of its group heartbeated
// first (a scan right after leading took the master for gone and elected
// the slave).
func TestRestartedLeaderGivesBrokersAScanPeriod(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	runSeeded(t, cfg, nil)

	cfg.ScanInactiveMasterInterval = 600 * time.Millisecond
	c := startController(t, cfg, true)
	addr := c.srv.Addr().String()
	b1 := &broker{t: t, cl: dial(t, addr), addr: "10.0.0.1:30911", id: 1}
	b2 := &broker{t: t, cl: dial(t, addr), addr: "10.0.0.2:30911", id: 2}
	// The slave heartbeats the restarted leader at once, the master
	// within the period.
	b2.heartbeat(60000, 1, 1)
	time.Sleep(400 * time.Millisecond)
	b1.heartbeat(60000, 1, 1)
	// Past the first scans.
	time.Sleep(1500 * time.Millisecond)
	resp := invoke(t, b1.cl, remoting.ControllerGetReplicaInfo, map[string]string{"brokerName": "broker-a"}, nil)
	wantCode(t, "replica info", resp, remoting.Success)
	if resp.ExtFields["masterBrokerId"] != "1" || resp.ExtFields["masterEpoch"] != "1" {
		t.Fatalf("after the restart the group's master is %s in epoch %s, want 1 in epoch 1 (an election ran before the brokers could heartbeat)\n%s",
			resp.ExtFields["masterBrokerId"], resp.ExtFields["masterEpoch"], c.logs.String())
	}
}
