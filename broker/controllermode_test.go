package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/controller"
	"github.com/rocketkv/rocketkv/ha"
	"github.com/rocketkv/rocketkv/ha/autoswitch"
	"github.com/rocketkv/rocketkv/internal/controllertest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// startTestControllers starts n controllers as one raft group
// (controllertest.Start), until the test ends.
func startTestControllers(t *testing.T, n int, unclean, notify bool) []*controllertest.Peer {
	t.Helper()
	return controllertest.Start(t, n, controllertest.Options{Unclean: unclean, Notify: notify})
}

// startTestControllersOn is startTestControllers on the given ports
// (each with the next one free for raft).
func startTestControllersOn(t *testing.T, ports []int, unclean, notify bool) []*controllertest.Peer {
	t.Helper()
	return controllertest.StartOn(t, ports, controllertest.Options{Unclean: unclean, Notify: notify})
}

// startTestController starts one controller and returns its address
// once it leads.
func startTestController(t *testing.T, unclean, notify bool) string {
	t.Helper()
	return controllertest.StartOne(t, controllertest.Options{Unclean: unclean, Notify: notify}).Addr
}

// waitUntil polls cond every 50 ms for up to d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ctlBroker is a controller-mode broker of the test: its store and ports
// stay across restarts.
type ctlBroker struct {
	t        *testing.T
	store    string
	settings map[string]string
	sup      *Supervisor
	// configure, when set, is applied to each Broker the Supervisor
	// starts, before its Start.
	configure func(*Broker)
	// supervise, when set, is applied to the Supervisor before its Start.
	supervise func(*Supervisor)
}

// newCtlGroup starts a controller and a name server and returns the two
// brokers (not started) of a controller-mode group, with settings added to
// both. They register with the name server every 500 ms: a slave whose
// master restarts at a switch learns the master's HA address from the
// name server's answers.
func newCtlGroup(t *testing.T, settings map[string]string) (ctlAddr string, a, b *ctlBroker) {
	t.Helper()
	ctlAddr = startTestController(t, false, true)
	ns := startTestNameServer(t)
	a = newCtlBroker(t, ctlAddr, ns.Addr().String())
	b = newCtlBroker(t, ctlAddr, ns.Addr().String())
	for _, c := range []*ctlBroker{a, b} {
		c.settings["registerNameServerPeriod"] = "500"
		maps.Copy(c.settings, settings)
	}
	return ctlAddr, a, b
}

func newCtlBroker(t *testing.T, controllerAddr, namesrvAddr string) *ctlBroker {
	port := testutil.FreePortPair(t)
	return &ctlBroker{t: t, store: t.TempDir(), settings: map[string]string{
		"enableControllerMode":            "true",
		"controllerAddr":                  controllerAddr,
		"namesrvAddr":                     namesrvAddr,
		"brokerClusterName":               "DefaultCluster",
		"brokerName":                      "broker-a",
		"brokerIP1":                       "127.0.0.1",
		"listenPort":                      strconv.Itoa(port),
		"haListenPort":                    strconv.Itoa(port + 1),
		"fastListenPort":                  "-1",
		"mappedFileSizeCommitLog":         strconv.Itoa(4 << 20),
		"brokerHeartbeatInterval":         "200",
		"controllerHeartBeatTimeoutMills": "1500",
		"syncBrokerMetadataPeriod":        "300",
		"checkSyncStateSetPeriod":         "300",
		"syncControllerMetadataPeriod":    "1000",
		"haSendHeartbeatInterval":         "200",
		"slaveSyncIntervalMillis":         "300",
		// The file's role and id, which controller mode ignores.
		"brokerRole": "SLAVE",
		"brokerId":   "7",
	}}
}

// newSupervisor builds the broker's Supervisor from its store and
// settings, logging to log, without starting it.
func (c *ctlBroker) newSupervisor(log zerolog.Logger) *Supervisor {
	c.t.Helper()
	o := map[string]string{"storePathRootDir": c.store}
	for k, v := range c.settings {
		o[k] = v
	}
	loaded, err := configs.LoadBroker("", o)
	if err != nil {
		c.t.Fatal(err)
	}
	s, err := NewSupervisor(loaded.Broker, log)
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

func (c *ctlBroker) start() {
	c.t.Helper()
	s := c.newSupervisor(zerolog.Nop())
	s.configure = c.configure
	if c.supervise != nil {
		c.supervise(s)
	}
	// A hang guard: a start waits for the controller's answers, slow on
	// a machine loaded by several -race runs.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		c.t.Fatalf("start controller-mode broker: %v", err)
	}
	c.sup = s
	c.t.Cleanup(func() { c.stop() })
}

func (c *ctlBroker) stop() {
	if c.sup == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.sup.Shutdown(ctx); err != nil {
		c.t.Errorf("shutdown: %v", err)
	}
	c.sup = nil
}

func (c *ctlBroker) addr() string { return "127.0.0.1:" + c.settings["listenPort"] }

func (c *ctlBroker) isMaster() bool {
	r := c.sup.role()
	return r.running && r.master
}

// end is the running Broker's CommitLog end (-1 when none runs or its
// stores close), read as the Supervisor's heartbeat reads it, since a
// switch may stop the Broker meanwhile.
func (c *ctlBroker) end() int64 {
	if b := c.sup.Broker(); b != nil {
		if end, _, ok := b.replicaOffsets(); ok {
			return end
		}
	}
	return -1
}

// dialCtl opens a Remoting client to addr for the test.
func dialCtl(t *testing.T, addr string) *remoting.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := remoting.Dial(ctx, addr, remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// TestControllerModeFailover runs two rocketkv brokers in controller mode
// against the controller of package controller: each gets its id from the
// controller (kept in RocketMQ's identity file across a restart), the first
// is elected master and the second replicates from it; stopped, the master
// is replaced by the slave (a new epoch, in its epoch file and in its
// GET_BROKER_EPOCH_CACHE answer), while a sender that follows the name
// server's route keeps sending; the old master comes back as a slave, and
// the records it held that the new master never had are cut.
//
// It runs twice: with the controller's NOTIFY_BROKER_ROLE_CHANGED and the
// brokers' GET_REPLICA_INFO a minute apart, and with no notices and the
// poll every 300 ms, so that each path alone makes the failover.
func TestControllerModeFailover(t *testing.T) {
	t.Run("notices", func(t *testing.T) { testControllerModeFailover(t, true, "60000") })
	t.Run("polls", func(t *testing.T) { testControllerModeFailover(t, false, "300") })
}

func testControllerModeFailover(t *testing.T, notify bool, poll string) {
	ctlAddr := startTestController(t, true, notify)
	ns := startTestNameServer(t)
	nsAddr := ns.Addr().String()

	a := newCtlBroker(t, ctlAddr, nsAddr)
	b := newCtlBroker(t, ctlAddr, nsAddr)
	a.settings["syncBrokerMetadataPeriod"] = poll
	b.settings["syncBrokerMetadataPeriod"] = poll
	a.start()
	if !a.isMaster() {
		t.Fatal("the first broker of the group is not its master")
	}
	b.start()
	if b.isMaster() {
		t.Fatal("the second broker is master too")
	}
	idA, idB := a.sup.BrokerID(), b.sup.BrokerID()
	if idA == idB || idA <= 0 || idB <= 0 {
		t.Fatalf("broker ids %d and %d", idA, idB)
	}
	raw, err := os.ReadFile(identityPath(a.sup.cfg))
	if err != nil || string(raw) != "DefaultCluster#broker-a#"+strconv.FormatInt(idA, 10) {
		t.Fatalf("identity file %q, %v", raw, err)
	}
	if _, err := os.Stat(tempIdentityPath(a.sup.cfg)); !os.IsNotExist(err) {
		t.Fatalf("the temp identity file is left: %v", err)
	}
	if got := a.sup.Broker().cfg; got.BrokerID != 0 || got.BrokerRole != roleSyncMaster {
		t.Fatalf("master runs as id %d %s, want 0 SYNC_MASTER", got.BrokerID, got.BrokerRole)
	}
	if got := b.sup.Broker().cfg; got.BrokerID != idB || got.BrokerRole != roleSlave {
		t.Fatalf("slave runs as id %d %s, want %d SLAVE", got.BrokerID, got.BrokerRole, idB)
	}
	epochA := a.sup.role().masterEpoch

	// Sends to the master reach the slave; the master reports it in sync.
	ca := dialCtl(t, a.addr())
	for i := range 20 {
		mustSend(t, ca, "TopicTest", 0, "before-"+strconv.Itoa(i), "")
	}
	waitUntil(t, 20*time.Second, "the slave to replicate", func() bool { return b.end() == a.end() })
	waitUntil(t, 20*time.Second, "the sync state set to hold both", func() bool { return len(a.sup.role().syncSet) == 2 })
	// The set the controller holds is the one the master's AutoSwitch
	// server proposed and was given back.
	ctlSet := controllerSyncStateSet(t, a)
	if !slices.Equal(ctlSet, []int64{min(idA, idB), max(idA, idB)}) || !slices.Equal(ctlSet, a.sup.Broker().repl.auto.SyncStateSet()) {
		t.Fatalf("the controller's sync state set %v, the master's server's %v, want both brokers", ctlSet, a.sup.Broker().repl.auto.SyncStateSet())
	}
	// GET_BROKER_HA_STATUS is the AutoSwitch server's: the slave
	// connected and in the sync state set.
	var haInfo ha.RuntimeInfo
	if resp := call(t, ca, remoting.GetBrokerHAStatus, nil, nil); resp.Code != remoting.Success || json.Unmarshal(resp.Body, &haInfo) != nil ||
		!haInfo.Master || haInfo.InSyncSlaveNums != 1 || len(haInfo.HAConnectionInfo) != 1 || !haInfo.HAConnectionInfo[0].InSync {
		t.Fatalf("master's HA status: %d %s", resp.Code, resp.Body)
	}
	// The slave recorded the master's epochs from its transfers, in its
	// own epoch file.
	if ea, eb := epochFileEntries(t, a), epochFileEntries(t, b); len(ea) == 0 || !slices.Equal(ea, eb) {
		t.Fatalf("slave's epoch file %v, master's %v", eb, ea)
	}
	waitUntil(t, 20*time.Second, "the slave to copy the master's topics", func() bool {
		_, ok, err := b.sup.Broker().topicConfig("TopicTest")
		return ok && err == nil
	})

	// A sender that follows the route (the master, brokerId 0) keeps
	// sending through the failover.
	var sent, failed atomic.Int64
	stopSend := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		routeSender(nsAddr, stopSend, &sent, &failed)
	}()
	waitUntil(t, 20*time.Second, "sends through the route", func() bool { return sent.Load() > 5 })

	before := sent.Load()
	a.stop()
	waitUntil(t, 30*time.Second, "the slave to become master", b.isMaster)
	if e := b.sup.role().masterEpoch; e <= epochA {
		t.Fatalf("new master's epoch %d, the old one's %d", e, epochA)
	}
	waitUntil(t, 30*time.Second, "sends to the new master", func() bool { return sent.Load() > before+5 })
	// The new master registered with the name server as brokerId 0, as
	// RocketMQ's controller-mode master does.
	route, err := namesrv.FetchRoute(context.Background(), remoting.NewClientPool(remoting.ClientOptions{}), []string{nsAddr}, "TopicTest", 2*time.Second)
	if err != nil || len(route.BrokerDatas) != 1 || route.BrokerDatas[0].BrokerAddrs[0] != b.addr() {
		t.Fatalf("route after the failover: %+v, %v; want brokerId 0 at %s", route.BrokerDatas, err, b.addr())
	}
	close(stopSend)
	wg.Wait()
	t.Logf("sent %d, failed attempts %d (through the failover)", sent.Load(), failed.Load())

	sw := b.sup.Switches()
	last := sw[len(sw)-1]
	if !last.Master {
		t.Fatalf("last switch %+v is not to master", last)
	}
	t.Logf("switch of the slave to master took %v", last.Took)
	ef, err := autoswitch.OpenEpochFile(epochFilePath(b.sup.cfg))
	if err != nil {
		t.Fatal(err)
	}
	if ef.LastEpoch() != b.sup.role().masterEpoch {
		t.Fatalf("epoch file's last epoch %d, want %d", ef.LastEpoch(), b.sup.role().masterEpoch)
	}
	cb := dialCtl(t, b.addr())
	resp := call(t, cb, remoting.GetBrokerEpochCache, nil, nil)
	var cache autoswitch.EpochEntryCache
	if resp.Code != remoting.Success || json.Unmarshal(resp.Body, &cache) != nil || len(cache.EpochList) == 0 ||
		cache.EpochList[len(cache.EpochList)-1].Epoch != ef.LastEpoch() || cache.BrokerID != 0 {
		t.Fatalf("GET_BROKER_EPOCH_CACHE: %d %s %s", resp.Code, resp.Remark, resp.Body)
	}

	// The old master comes back as a slave with its id.
	a.start()
	if a.sup.BrokerID() != idA {
		t.Fatalf("restarted with id %d, had %d", a.sup.BrokerID(), idA)
	}
	if a.isMaster() {
		t.Fatal("the old master came back as master")
	}
	waitUntil(t, 20*time.Second, "the old master to follow the new one", func() bool { return a.end() == b.end() })
}

// TestControllerModeCutsDivergedSlave has a master write records its
// slave never gets, then elects the slave (unclean election) which writes
// others at the same offsets: the old master, back, follows the new one
// after its CommitLog was cut where the logs part, without an operator.
func TestControllerModeCutsDivergedSlave(t *testing.T) {
	ctlAddr := startTestController(t, true, true)
	a := newCtlBroker(t, ctlAddr, "")
	b := newCtlBroker(t, ctlAddr, "")
	a.start()
	b.start()
	ca := dialCtl(t, a.addr())
	for i := range 10 {
		mustSend(t, ca, "TopicTest", 0, "shared-"+strconv.Itoa(i), "")
	}
	waitUntil(t, 20*time.Second, "the slave to replicate", func() bool { return b.end() == a.end() })
	shared := a.end()
	b.stop()
	for i := range 10 {
		mustSend(t, ca, "TopicTest", 0, "only-on-a-"+strconv.Itoa(i), "")
	}
	a.stop()
	b.start()
	waitUntil(t, 30*time.Second, "the slave to be elected", b.isMaster)
	cb := dialCtl(t, b.addr())
	for i := range 5 {
		mustSend(t, cb, "TopicTest", 0, "on-b-"+strconv.Itoa(i)+strings.Repeat("x", 50), "")
	}
	var (
		startedMu sync.Mutex
		started   []*Broker // the Brokers a's Supervisor starts, in order
	)
	a.configure = func(br *Broker) {
		startedMu.Lock()
		started = append(started, br)
		startedMu.Unlock()
	}
	a.start()
	waitUntil(t, 30*time.Second, "the old master to be cut and follow", func() bool {
		for _, s := range a.sup.Switches() {
			if s.CutAt > 0 {
				return a.end() == b.end()
			}
		}
		return false
	})
	for _, s := range a.sup.Switches() {
		if s.CutAt > 0 && s.CutAt != shared {
			t.Fatalf("cut at %d, the logs part at %d", s.CutAt, shared)
		}
	}
	// A cut asked for by a Broker the Supervisor has replaced since (its
	// client found it just before the switch) is stale: the running
	// Broker is neither restarted nor cut.
	startedMu.Lock()
	first, last := started[0], started[len(started)-1]
	startedMu.Unlock()
	switches := len(a.sup.Switches())
	first.ctl.cut(shared / 2)
	time.Sleep(2 * time.Second)
	if got := a.sup.Switches(); len(got) != switches || a.sup.Broker() != last {
		t.Fatalf("a stale cut restarted the running slave: switches %+v", got)
	}
	// The old master's epoch file lost its own last epoch with the cut
	// and took the new master's from its transfers.
	if ea, eb := epochFileEntries(t, a), epochFileEntries(t, b); !slices.Equal(ea, eb) {
		t.Fatalf("the rejoined old master's epoch file %v, the new master's %v", ea, eb)
	}
}

// routeSender sends to the master the name server's route names
// (brokerId 0), fetching the route again after a failed send.
func routeSender(nsAddr string, stop <-chan struct{}, sent, failed *atomic.Int64) {
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	defer func() { _ = pool.Close() }()
	master := ""
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if master == "" {
			if r, err := namesrv.FetchRoute(ctx, pool, []string{nsAddr}, "TopicTest", 2*time.Second); err == nil {
				for _, bd := range r.BrokerDatas {
					master = bd.BrokerAddrs[0]
				}
			}
		}
		ok := false
		if master != "" {
			resp, err := pool.Invoke(ctx, master, remoting.NewRequest(remoting.SendMessageV2, map[string]string{
				"a": "pg", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "0", "f": "0",
				"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "",
			}, []byte("through-failover-"+strconv.Itoa(i))))
			ok = err == nil && resp.Code == remoting.Success
		}
		cancel()
		if ok {
			sent.Add(1)
		} else {
			failed.Add(1)
			master = ""
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestControllerModeIdentitySteps starts a broker whose previous start
// stopped between GET_NEXT_BROKER_ID and the identity file (only the temp
// file, with its id and check code, is there): it applies for that id,
// not the controller's next, and writes the identity file, as RocketMQ's
// register resumes. The
// controller's address is a host name looked up by DNS
// (fetchControllerAddrByDnsLookup).
func TestControllerModeIdentitySteps(t *testing.T) {
	ctlAddr := startTestController(t, false, true)
	_, port, _ := net.SplitHostPort(ctlAddr)
	a := newCtlBroker(t, "controller.test:"+port, "")
	a.settings["fetchControllerAddrByDnsLookup"] = "true"
	cfg := configs.Broker{StorePathRootDir: a.store}
	// A first broker takes id 1; the temp file asks for 5, where the
	// controller's next id is 2.
	first := newCtlBroker(t, ctlAddr, "")
	first.start()
	if first.sup.BrokerID() != 1 {
		t.Fatalf("first broker's id %d", first.sup.BrokerID())
	}
	if err := writeIdentity(tempIdentityPath(cfg), brokerIdentity{Cluster: "DefaultCluster", Broker: "broker-a", ID: 5,
		CheckCode: a.addr() + ";1700000000000"}, true); err != nil {
		t.Fatal(err)
	}
	s := a.newSupervisor(zerolog.Nop())
	var looked atomic.Int32
	s.resolve = func(_ context.Context, host string) ([]string, error) {
		if host != "controller.test" {
			return nil, fmt.Errorf("unexpected lookup of %s", host)
		}
		looked.Add(1)
		return []string{"127.0.0.1"}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	a.sup = s
	t.Cleanup(a.stop)
	if looked.Load() == 0 {
		t.Fatal("controllerAddr's host was not looked up")
	}
	if s.BrokerID() != 5 {
		t.Fatalf("id %d, want the temp file's 5", s.BrokerID())
	}
	if raw, err := os.ReadFile(identityPath(cfg)); err != nil || string(raw) != "DefaultCluster#broker-a#5" {
		t.Fatalf("identity file %q, %v", raw, err)
	}
	if _, err := os.Stat(tempIdentityPath(cfg)); !os.IsNotExist(err) {
		t.Fatalf("temp identity file left: %v", err)
	}
	if a.isMaster() {
		t.Fatal("the second broker of the group is master too")
	}
	// A second broker of another group name on the same store is
	// refused, as RocketMQ's checkMetadataValid.
	a.stop()
	a.settings["brokerName"] = "broker-b"
	s2 := a.newSupervisor(zerolog.Nop())
	s2.resolve = s.resolve
	if err := s2.Start(ctx); err == nil || !strings.Contains(err.Error(), "broker-a") {
		_ = s2.Shutdown(ctx)
		t.Fatalf("start with another brokerName on the store: %v", err)
	}
}

// TestControllerModeControllerFailover runs a broker group against three
// controllers: when the leading controller stops, the brokers find the new
// leader (a follower answers CONTROLLER_NOT_LEADER; GET_METADATA_INFO names
// the leader) and go on: a broker started after it gets its id, and the
// master's stop still makes the slave master.
func TestControllerModeControllerFailover(t *testing.T) {
	peers := startTestControllers(t, 3, false, true)
	var addrs []string
	for _, p := range peers {
		addrs = append(addrs, p.Addr)
	}
	list := strings.Join(addrs, ";")
	leader := func() *controllertest.Peer {
		for _, p := range peers {
			if p.Controller.IsLeader() {
				return p
			}
		}
		return nil
	}
	waitUntil(t, 20*time.Second, "a leading controller", func() bool { return leader() != nil })
	a := newCtlBroker(t, list, "")
	// The periodic GET_METADATA_INFO a minute apart: a request that
	// fails at the old leader finds the new one itself.
	a.settings["syncControllerMetadataPeriod"] = "60000"
	a.start()
	if !a.isMaster() {
		t.Fatal("the first broker is not master")
	}
	// Leadership may have moved meanwhile (an election under load):
	// the peer stopped is the one leading now.
	var old *controllertest.Peer
	waitUntil(t, 30*time.Second, "a leading controller to stop", func() bool { old = leader(); return old != nil })
	old.Stop()
	waitUntil(t, 30*time.Second, "another controller to lead", func() bool { l := leader(); return l != nil && l != old })
	b := newCtlBroker(t, list, "")
	b.start()
	if b.isMaster() || b.sup.BrokerID() == a.sup.BrokerID() {
		t.Fatalf("second broker: master %v, id %d (first's %d)", b.isMaster(), b.sup.BrokerID(), a.sup.BrokerID())
	}
	ca := dialCtl(t, a.addr())
	mustSend(t, ca, "TopicTest", 0, "after the controller failover", "")
	waitUntil(t, 20*time.Second, "the slave to replicate", func() bool { return b.end() == a.end() })
	// The master reports the slave in sync to the new leader
	// (CONTROLLER_ALTER_SYNC_STATE_SET): the election after its stop is
	// a clean one, among the sync state set.
	waitUntil(t, 20*time.Second, "the sync state set to hold both", func() bool { return len(a.sup.role().syncSet) == 2 })
	a.stop()
	waitUntil(t, 30*time.Second, "the slave to become master under the new controller", b.isMaster)
}

// TestControllerModeAllAckInSyncStateSet: with allAckInSyncStateSet a
// master's sends wait for every other broker of its sync state set; the
// set grows when the slave catches up and shrinks when it stops (the
// master reports both with CONTROLLER_ALTER_SYNC_STATE_SET), and the
// number of slave acknowledgements a send waits for follows it.
func TestControllerModeAllAckInSyncStateSet(t *testing.T) {
	ctlAddr := startTestController(t, false, true)
	a := newCtlBroker(t, ctlAddr, "")
	b := newCtlBroker(t, ctlAddr, "")
	a.settings["allAckInSyncStateSet"] = "true"
	a.start()
	b.start()
	waitUntil(t, 20*time.Second, "the sync state set to hold both", func() bool { return len(a.sup.role().syncSet) == 2 })
	if n := a.sup.Broker().slaveAcks(); n != 1 {
		t.Fatalf("a send waits for %d slaves, want the set's other broker", n)
	}
	ca := dialCtl(t, a.addr())
	mustSend(t, ca, "TopicTest", 0, "acknowledged by the slave", "")
	b.stop()
	waitUntil(t, 20*time.Second, "the sync state set to shrink", func() bool { return len(a.sup.role().syncSet) == 1 })
	if n := a.sup.Broker().slaveAcks(); n != 0 {
		t.Fatalf("a send waits for %d slaves with the master alone in the set", n)
	}
	mustSend(t, ca, "TopicTest", 0, "the master alone", "")
}

// syncStateData asks for the group's replicas with their addresses
// (CONTROLLER_GET_SYNC_STATE_DATA); only the tests ask (a broker has no
// use for it since the sync state set comes from its own proposals).
func (c *controllerClient) syncStateData(ctx context.Context, name string) (replicasInfo, error) {
	body, err := json.Marshal([]string{name})
	if err != nil {
		return replicasInfo{}, err
	}
	resp, err := c.invoke(ctx, func() *remoting.Command {
		return remoting.NewRequest(remoting.ControllerGetSyncStateData, nil, body)
	})
	if err != nil {
		return replicasInfo{}, fmt.Errorf("get sync state data of %s: %w", name, err)
	}
	var out brokerReplicasInfo
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return replicasInfo{}, fmt.Errorf("get sync state data of %s: answer: %w", name, err)
	}
	info, ok := out.ReplicasInfoTable[name]
	if !ok {
		return replicasInfo{}, fmt.Errorf("get sync state data of %s: the controller holds no such group", name)
	}
	return info, nil
}

// controllerSyncStateSet is the group's sync state set as the controller
// holds it (CONTROLLER_GET_SYNC_STATE_DATA), sorted.
func controllerSyncStateSet(t *testing.T, c *ctlBroker) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.sup.ctl.syncStateData(ctx, c.sup.cfg.BrokerName)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range info.InSyncReplicas {
		ids = append(ids, r.BrokerID)
	}
	slices.Sort(ids)
	return ids
}

// epochFileEntries reads the broker's epoch file from its disk: epoch
// and start of each entry.
func epochFileEntries(t *testing.T, c *ctlBroker) []autoswitch.EpochEntry {
	t.Helper()
	ef, err := autoswitch.OpenEpochFile(epochFilePath(c.sup.cfg))
	if err != nil {
		t.Fatal(err)
	}
	return ef.Entries()
}

// TestControllerModeAsyncLearner: a slave with asyncLearner replicates
// the master's log but its AutoSwitch handshake says it is a learner, so
// the master never proposes it for the sync state set, and the set the
// controller holds stays the master alone; a slave without the flag
// joins it.
func TestControllerModeAsyncLearner(t *testing.T) {
	ctlAddr := startTestController(t, false, true)
	a := newCtlBroker(t, ctlAddr, "")
	b := newCtlBroker(t, ctlAddr, "")
	b.settings["asyncLearner"] = "true"
	a.start()
	b.start()
	ca := dialCtl(t, a.addr())
	for i := range 5 {
		mustSend(t, ca, "TopicTest", 0, "to a learner "+strconv.Itoa(i), "")
	}
	waitUntil(t, 20*time.Second, "the learner to replicate", func() bool { return b.end() == a.end() })
	// Several of the master's checks (checkSyncStateSetPeriod, 300 ms).
	time.Sleep(1500 * time.Millisecond)
	if got := controllerSyncStateSet(t, a); !slices.Equal(got, []int64{a.sup.BrokerID()}) {
		t.Fatalf("the controller's sync state set %v holds the learner", got)
	}
	b.stop()
	b.settings["asyncLearner"] = "false"
	b.start()
	want := []int64{min(a.sup.BrokerID(), b.sup.BrokerID()), max(a.sup.BrokerID(), b.sup.BrokerID())}
	waitUntil(t, 20*time.Second, "the slave, no longer a learner, to join the set", func() bool {
		return slices.Equal(controllerSyncStateSet(t, a), want)
	})
}

// With minInSyncReplicas=2 a controller-mode master alone in its sync
// state set refuses the puts that wait for replication before storing
// them, as RocketMQ's CommitLog put (IN_SYNC_REPLICAS_NOT_ENOUGH, answered
// SYSTEM_ERROR "in-sync replicas not enough"): a producer's send, and the
// broker's own puts such as an END_TRANSACTION commit's; a send with
// WAIT=false is stored (RocketMQ's needHandleHA is false for it), and
// once a slave is in the set the waiting puts go through.
func TestControllerModeMinInSyncReplicas(t *testing.T) {
	ctlAddr := startTestController(t, false, true)
	a := newCtlBroker(t, ctlAddr, "")
	a.settings["minInSyncReplicas"] = "2"
	a.start()
	ca := dialCtl(t, a.addr())
	if r := sendV2(t, ca, "TopicTest", 0, "refused", ""); r.Code != remoting.SystemError || r.Remark != inSyncReplicasRemark {
		t.Fatalf("send to a master alone in its set with minInSyncReplicas=2: code %d %q, want SYSTEM_ERROR %q", r.Code, r.Remark, inSyncReplicasRemark)
	}
	mustSend(t, ca, "TopicTest", 0, "not waiting", "WAIT\x01false\x02")

	b := newCtlBroker(t, ctlAddr, "")
	b.start()
	waitUntil(t, 20*time.Second, "the sync state set to hold both", func() bool { return len(a.sup.role().syncSet) == 2 })
	mustSend(t, ca, "TopicTest", 0, "two in the set", "")
	half := sendHalf(t, ca, "TxT", 0, "UNIQ-MIN-ISR", "payload", "", time.Now().UnixMilli())
	undone := sendHalf(t, ca, "TxT", 0, "UNIQ-MIN-ISR-ROLLBACK", "never", "", time.Now().UnixMilli())
	undoneByCheck := sendHalf(t, ca, "TxT", 0, "UNIQ-MIN-ISR-ROLLBACK-CHECK", "never", "", time.Now().UnixMilli())

	// The slave leaves: the committed message's put (it waits, as the
	// half did) is refused, and the message is not in its topic.
	b.stop()
	waitUntil(t, 20*time.Second, "the sync state set to shrink", func() bool { return len(a.sup.role().syncSet) == 1 })
	if r := endTxn(t, ca, half, "pg", 8, false); r.Code != remoting.SystemError || r.Remark != inSyncReplicasRemark {
		t.Fatalf("END_TRANSACTION commit on a master alone in its set: code %d %q, want SYSTEM_ERROR %q", r.Code, r.Remark, inSyncReplicasRemark)
	}
	maxOffset := func(topic string) int64 {
		t.Helper()
		r := call(t, ca, remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": "0"}, nil)
		if r.Code != remoting.Success {
			t.Fatalf("GET_MAX_OFFSET %s: code %d %s", topic, r.Code, r.Remark)
		}
		return header(t, r, "offset")
	}
	if got := maxOffset("TxT"); got != 0 {
		t.Fatalf("TxT holds %d messages after the refused commit, want 0", got)
	}
	// A rollback puts nothing to the real topic, only its op message,
	// which RocketMQ's EndTransactionProcessor does not wait for
	// (deletePrepareMessage queues it; its op batch service puts it with
	// WAIT=false, which no short sync state set refuses): SUCCESS, the
	// op message stored, and the transaction over (a commit after it is
	// refused).
	if r := endTxn(t, ca, undone, "pg", 12, false); r.Code != remoting.Success {
		t.Fatalf("END_TRANSACTION rollback on a master alone in its set: code %d %q, want SUCCESS", r.Code, r.Remark)
	}
	if r := endTxn(t, ca, undoneByCheck, "pg", 12, true); r.Code != remoting.Success {
		t.Fatalf("END_TRANSACTION rollback answering a check on a master alone in its set: code %d %q, want SUCCESS", r.Code, r.Remark)
	}
	for _, h := range []sentHalf{undone, undoneByCheck} {
		ended, ok, err := a.sup.Broker().db.Transactions().Ended(h.phy)
		if err != nil || !ok || ended.State != kvindex.TxnRollback {
			t.Fatalf("the end of rolled-back %s: %+v ok %v err %v; want a rollback recorded", h.uniq, ended, ok, err)
		}
	}
	// GET_MAX_OFFSET counts what the dispatcher indexed, which may run
	// behind the answers: waited for, not read at once (a loaded machine
	// showed one op message of the two).
	waitUntil(t, 20*time.Second, "the two rollbacks' op messages", func() bool { return maxOffset(meta.TransOpHalfTopic) >= 2 })
	if got := maxOffset(meta.TransOpHalfTopic); got != 2 {
		t.Fatalf("%s holds %d op messages after two rollbacks on a master alone in its set, want 2", meta.TransOpHalfTopic, got)
	}

	b.start()
	waitUntil(t, 20*time.Second, "the sync state set to hold both again", func() bool { return len(a.sup.role().syncSet) == 2 })
	if r := endTxn(t, ca, half, "pg", 8, false); r.Code != remoting.Success {
		t.Fatalf("END_TRANSACTION commit with two in the set: code %d %q", r.Code, r.Remark)
	}
	waitUntil(t, 10*time.Second, "the committed message in its topic", func() bool { return maxOffset("TxT") == 1 })
	if r := endTxn(t, ca, undone, "pg", 8, false); r.Code == remoting.Success {
		t.Fatal("END_TRANSACTION commit of a rolled-back transaction answered SUCCESS")
	}
	if got := maxOffset("TxT"); got != 1 {
		t.Fatalf("TxT holds %d messages, want the one committed (the rolled-back ones never)", got)
	}
}

// Delayed and timer messages a controller-mode master took while its
// sync state set was full are delivered to their topics when they fall
// due with the set below minInSyncReplicas: RocketMQ's messageTimeUp and
// the timer's convertMessage put them with WAIT=false, which its put does
// not refuse (they used to be refused, and stayed parked until the slave
// came back). A send-back, stored with WAIT=false, is not refused either.
func TestControllerModeMinInSyncReplicasDeliversDue(t *testing.T) {
	ctlAddr := startTestController(t, false, true)
	a := newCtlBroker(t, ctlAddr, "")
	a.settings["minInSyncReplicas"] = "2"
	// The timer delivers nothing until the set is short; nor do the delay
	// levels (their first turn waits for gate).
	a.settings["timerStopDequeue"] = "true"
	gate := make(chan struct{})
	var opened, held sync.Once
	open := func() { opened.Do(func() { close(gate) }) }
	a.configure = func(br *Broker) {
		br.delayTurn = func(int) { held.Do(func() { <-gate }) }
	}
	a.start()
	t.Cleanup(open) // before a's stop, which waits for the delay loop
	ca := dialCtl(t, a.addr())

	b := newCtlBroker(t, ctlAddr, "")
	b.start()
	waitUntil(t, 20*time.Second, "the sync state set to hold both", func() bool { return len(a.sup.role().syncSet) == 2 })
	mustSend(t, ca, "DelayT", 0, "delayed", "DELAY\x011\x02")
	due := strconv.FormatInt(time.Now().Add(time.Second).UnixMilli(), 10)
	mustSend(t, ca, "TimerT", 0, "timed", "TIMER_DELIVER_MS\x01"+due+"\x02")
	failed := mustSend(t, ca, "BackT", 0, "failed by its consumer", "")
	_, failedPhy, err := commitlog.ParseMessageID(failed.ExtFields["msgId"])
	if err != nil {
		t.Fatal(err)
	}

	b.stop()
	waitUntil(t, 20*time.Second, "the sync state set to shrink", func() bool { return len(a.sup.role().syncSet) == 1 })
	if r := sendV2(t, ca, "DelayT", 0, "refused", ""); r.Code != remoting.SystemError || r.Remark != inSyncReplicasRemark {
		t.Fatalf("send to a master alone in its set with minInSyncReplicas=2: code %d %q, want SYSTEM_ERROR %q", r.Code, r.Remark, inSyncReplicasRemark)
	}
	// A send-back's copy carries WAIT=false in its properties, as
	// RocketMQ's consumerSendMsgBack writes it: it is not refused either.
	back := call(t, ca, remoting.ConsumerSendMsgBack, map[string]string{"offset": strconv.FormatInt(failedPhy, 10),
		"group": "cg-back", "delayLevel": "-1", "originTopic": "BackT", "originMsgId": failed.ExtFields["msgId"]}, nil)
	if back.Code != remoting.Success {
		t.Fatalf("CONSUMER_SEND_MSG_BACK on a master alone in its set: code %d %q, want SUCCESS", back.Code, back.Remark)
	}
	open()
	updateConfig(t, ca, "timerStopDequeue=false")
	for _, topic := range []string{"DelayT", "TimerT", meta.DLQTopic("cg-back")} {
		waitUntil(t, 20*time.Second, "the due message in "+topic, func() bool {
			r := call(t, ca, remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": "0"}, nil)
			return r.Code == remoting.Success && header(t, r, "offset") == 1
		})
	}
}

// A slave whose master does not answer EXCHANGE_BROKER_HA_INFO at its
// switch (here its connections to the master are refused, as to a master
// being restarted), in a group without name servers to give the master's
// HA address, keeps asking its master and replicates once it answers,
// without a restart of its Broker (it used to have no HA address, and
// never replicated).
func TestControllerModeSlaveAsksMasterHAAgain(t *testing.T) {
	ctlAddr := startTestController(t, false, true)
	a := newCtlBroker(t, ctlAddr, "")
	a.start()
	ca := dialCtl(t, a.addr())
	mustSend(t, ca, "TopicTest", 0, "before the slave", "")

	var refuse atomic.Bool
	refuse.Store(true)
	b := newCtlBroker(t, ctlAddr, "")
	b.supervise = func(s *Supervisor) {
		_ = s.peers.Close()
		s.peers = remoting.NewClientPool(remoting.ClientOptions{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if refuse.Load() {
					return nil, errors.New("refused by the test: the master is being restarted")
				}
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
		})
	}
	b.start()
	br := b.sup.Broker()
	if br == nil || !br.isSlave() {
		t.Fatal("the second broker does not run as a slave")
	}
	if ha := br.repl.load(&br.repl.masterHA); ha != "" {
		t.Fatalf("the slave has the master's HA address %q though its master did not answer and no name server runs", ha)
	}
	refuse.Store(false)
	mustSend(t, ca, "TopicTest", 0, "after the master answers", "")
	end := a.end()
	waitUntil(t, 20*time.Second, "the slave to replicate the master's log", func() bool { return b.end() == end })
	if b.sup.Broker() != br {
		t.Fatal("the slave's Broker was restarted to take its master's HA address")
	}
	waitUntil(t, 20*time.Second, "the sync state set to hold both", func() bool { return len(a.sup.role().syncSet) == 2 })
}

// A broker that finds no controller at its start keeps trying, as
// RocketMQ's ReplicasManager retries its start every 5 s, and starts once
// a controller answers (it used to give up after five tries and bin/broker
// exited). Meanwhile its port answers SERVICE_NOT_AVAILABLE.
func TestControllerModeStartWaitsForTheController(t *testing.T) {
	port := testutil.FreePortPair(t)
	a := newCtlBroker(t, fmt.Sprintf("127.0.0.1:%d", port), "")
	started := make(chan struct{})
	go func() {
		defer close(started)
		a.start()
	}()
	// Five tries a second apart at most, and then some: the controller
	// comes after the old code gave up.
	select {
	case <-started:
		t.Fatal("the broker started without a controller")
	case <-time.After(6 * time.Second):
	}
	// It listens meanwhile, as RocketMQ's broker does before its role
	// is known, and asks its clients to come back.
	if r := call(t, dialCtl(t, a.addr()), remoting.GetBrokerRuntimeInfo, nil, nil); r.Code != remoting.ServiceNotAvailable || r.Remark != switchingRemark {
		t.Fatalf("a request before the broker has a role: code %d %q, want SERVICE_NOT_AVAILABLE %q", r.Code, r.Remark, switchingRemark)
	}
	startTestControllersOn(t, []int{port}, false, true)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the broker did not start once its controller answered")
	}
	if a.sup == nil || a.sup.BrokerID() <= 0 {
		t.Fatal("the broker has no id from the controller")
	}
}

// A Start given up before the controller gave a role (its context
// ended) answers the requests waiting for the first Broker
// SERVICE_NOT_AVAILABLE and frees the ports it listened on, so that the
// process, or the next Start, can take them again.
func TestControllerModeStartGivenUpFreesItsPort(t *testing.T) {
	port := testutil.FreePortPair(t)
	a := newCtlBroker(t, fmt.Sprintf("127.0.0.1:%d", port), "")
	s := a.newSupervisor(zerolog.Nop())
	s.switchWait = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan error, 1)
	go func() { started <- s.Start(ctx) }()

	var c *remoting.Client
	waitUntil(t, 10*time.Second, "the broker to listen before its role", func() bool {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
		defer dcancel()
		cl, err := remoting.Dial(dctx, a.addr(), remoting.ClientOptions{})
		if err != nil {
			return false
		}
		c = cl
		return true
	})
	defer c.Close()
	// A request the gate keeps for the first Broker (TestHandlerGate*
	// show it waits; here it may also still be on its way when the
	// start gives up and the connection closes).
	waiting := invokeAsync(c, remoting.GetBrokerRuntimeInfo)
	cancel()
	select {
	case err := <-started:
		if err == nil {
			t.Fatal("the start succeeded without a controller")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the start did not return once its context ended")
	}
	select {
	case got := <-waiting:
		if got.err == nil && got.resp.Code != remoting.ServiceNotAvailable {
			t.Fatalf("the waiting request: code %d %q, want SERVICE_NOT_AVAILABLE or a closed connection", got.resp.Code, got.resp.Remark)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the request waiting for the first Broker got no answer after the start was given up")
	}
	again, err := net.Listen("tcp", a.addr())
	if err != nil {
		t.Fatalf("the port is still held after the start was given up: %v", err)
	}
	_ = again.Close()
}

// A controller-mode broker started again reports its store's CommitLog end
// in the heartbeats it sends before its Broker runs, as RocketMQ's broker,
// which loads its store first: the controller elects among a group's live
// brokers by that end, and a broker that reported 0 while it waited for a
// master would lose the election of a group restarted together to one
// holding fewer records. Its confirm offset meanwhile is the checkpoint's,
// as RocketMQ's loaded store reports it.
func TestControllerModeHeartbeatBeforeStartReportsTheStoreEnd(t *testing.T) {
	peer := startTestControllers(t, 1, false, true)[0]
	a := newCtlBroker(t, peer.Addr, "")
	a.start()
	ca := dialCtl(t, a.addr())
	for i := range 10 {
		mustSend(t, ca, "TopicTest", 0, "before-restart-"+strconv.Itoa(i), "")
	}
	end, id := a.end(), a.sup.BrokerID()
	if end <= 0 {
		t.Fatalf("store end %d after the sends", end)
	}
	// The confirm offset the checkpoint keeps (a master alone in its set
	// has no limit of its own: this one stands for an earlier one).
	a.sup.Broker().clog.SetConfirmLimit(end - 1)
	a.stop()
	// The closed connection drops the broker's live entry, as a
	// controller restarted with the group would not have one.
	waitUntil(t, 10*time.Second, "the controller to forget the stopped broker", func() bool {
		_, ok := peer.Controller.LiveInfo("DefaultCluster", "broker-a", id)
		return !ok
	})

	s := a.newSupervisor(zerolog.Nop())
	var (
		once     sync.Once
		reported controller.LiveInfo
		known    bool
	)
	s.configure = func(*Broker) {
		once.Do(func() { reported, known = peer.Controller.LiveInfo("DefaultCluster", "broker-a", id) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	a.sup = s
	t.Cleanup(a.stop)
	if !known {
		t.Fatal("no heartbeat reached the controller before the Broker started")
	}
	if reported.MaxOffset != end || reported.Epoch != 1 || reported.ConfirmOffset != end-1 {
		t.Fatalf("heartbeat before the Broker started: epoch %d maxOffset %d confirmOffset %d, want epoch 1, the store's end %d and the checkpoint's confirm offset %d",
			reported.Epoch, reported.MaxOffset, reported.ConfirmOffset, end, end-1)
	}
}

// With allAckInSyncStateSet a master shows consumers only the records
// every member of its sync state set holds (RocketMQ's dispatch stops at
// the confirm offset): a send its slave, cut off but still connected and
// in the set, never acknowledged is in the master's CommitLog but not in
// its ConsumeQueue, so no consumer reads a record that a failover to that
// slave would take back; it appears once the slave holds it. The slave,
// too, shows only what its master confirmed.
func TestControllerModeAllAckHidesUnconfirmedRecords(t *testing.T) {
	ctlAddr := startTestController(t, false, true)
	a := newCtlBroker(t, ctlAddr, "")
	b := newCtlBroker(t, ctlAddr, "")
	for _, c := range []*ctlBroker{a, b} {
		c.settings["allAckInSyncStateSet"] = "true"
		// The held slave stays in the set for the whole test.
		c.settings["haMaxTimeSlaveNotCatchup"] = "120000"
		c.settings["syncFlushTimeout"] = "500"
	}
	a.start()
	// The slave reaches the master's HA port through a forwarder that
	// can hold its bytes without closing the connection.
	ha := testutil.StartForwarder(t, "127.0.0.1:"+a.settings["haListenPort"])
	b.configure = func(br *Broker) {
		if br.isSlave() {
			br.cfg.HAMasterAddress = ha.Addr()
		}
	}
	b.start()
	waitUntil(t, 20*time.Second, "the sync state set to hold both", func() bool { return len(a.sup.role().syncSet) == 2 })
	ca := dialCtl(t, a.addr())
	mustSend(t, ca, "TopicTest", 0, "confirmed", "")
	maxOffset := func(c *remoting.Client) int64 {
		t.Helper()
		r := call(t, c, remoting.GetMaxOffset, map[string]string{"topic": "TopicTest", "queueId": "0"}, nil)
		if r.Code != remoting.Success {
			t.Fatalf("GET_MAX_OFFSET: code %d %s", r.Code, r.Remark)
		}
		return header(t, r, "offset")
	}
	waitUntil(t, 10*time.Second, "the confirmed send to be consumable", func() bool { return maxOffset(ca) == 1 })

	ha.Hold()
	if r := sendV2(t, ca, "TopicTest", 0, "not confirmed", ""); r.Code != remoting.FlushSlaveTimeout {
		t.Fatalf("send with the set's slave cut off: code %d %s, want FLUSH_SLAVE_TIMEOUT", r.Code, r.Remark)
	}
	end := a.end()
	// Several dispatcher wake-ups (appends, flushes) later the record is
	// still not shown.
	time.Sleep(500 * time.Millisecond)
	if got := maxOffset(ca); got != 1 {
		t.Fatalf("queue max offset %d on the master with the record unconfirmed, want 1", got)
	}
	if lim := a.sup.Broker().clog.ConfirmLimit(); lim < 0 || lim >= end {
		t.Fatalf("the master's confirm limit %d, want one below its end %d", lim, end)
	}
	if got := len(a.sup.role().syncSet); got != 2 {
		t.Fatalf("the sync state set has %d members while the slave is held, want 2", got)
	}

	ha.Release()
	waitUntil(t, 20*time.Second, "the slave to hold the master's log", func() bool { return b.end() == end })
	waitUntil(t, 10*time.Second, "the record to be shown once the slave holds it", func() bool { return maxOffset(ca) == 2 })
	cb := dialCtl(t, b.addr())
	waitUntil(t, 10*time.Second, "the slave to show both records", func() bool { return maxOffset(cb) == 2 })
	if lim := b.sup.Broker().clog.ConfirmLimit(); lim != end {
		t.Fatalf("the slave's confirm limit %d, want the master's confirm offset %d", lim, end)
	}
}

// designateMaster asks the controller at ctlAddr to make broker id the
// group's master (CONTROLLER_ELECT_MASTER with designateElect, as
// mqadmin electMaster asks it).
func designateMaster(t *testing.T, ctlAddr string, id int64) {
	t.Helper()
	cl := dialCtl(t, ctlAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, remoting.NewRequest(remoting.ControllerElectMaster, map[string]string{
		"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": strconv.FormatInt(id, 10),
		"designateElect": "true", "invokeTime": strconv.FormatInt(time.Now().UnixMilli(), 10)}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != remoting.Success {
		t.Fatalf("designate broker %d master: code %d %s", id, resp.Code, resp.Remark)
	}
}

// switchAwayAndBack runs during over and over on a goroutine of its own
// while the controller makes b the group's master, a following it, and
// then a the master again with both in its sync state set; it returns
// once the loop has stopped (on a failed wait too, before the test's end
// stops the brokers). a leads at the call, b following it; following,
// when not nil, runs while a follows b, before a leads again. The test
// fails when a leads again on the Broker it led with: no switch was
// tested.
func switchAwayAndBack(t *testing.T, ctlAddr string, a, b *ctlBroker, following, during func()) {
	t.Helper()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			during()
		}
	}()
	defer func() {
		close(stop)
		<-done
	}()
	first := a.sup.Broker()
	// The controller elects a designated broker only from the sync state
	// set it holds, which an election resets to the new master alone:
	// each designation waits for the master to have reported the other
	// back in sync.
	waitUntil(t, 60*time.Second, "the controller to hold both in the sync state set", func() bool {
		return len(controllerSyncStateSet(t, a)) == 2
	})
	designateMaster(t, ctlAddr, b.sup.BrokerID())
	waitUntil(t, 60*time.Second, "the first broker to follow the second, back in the sync state set", func() bool {
		return b.isMaster() && a.sup.role().running && !a.isMaster() && len(controllerSyncStateSet(t, b)) == 2
	})
	if following != nil {
		following()
	}
	designateMaster(t, ctlAddr, a.sup.BrokerID())
	waitUntil(t, 60*time.Second, "the first broker to lead again with both in sync", func() bool {
		return a.isMaster() && len(a.sup.role().syncSet) == 2
	})
	if a.sup.Broker() == first {
		t.Fatal("the first broker leads again without a new Broker: no switch was tested")
	}
}

// TestControllerModeDropsStaleProposal: a sync state set proposed by
// the AutoSwitch server of a master Broker the Supervisor has replaced
// since (master, then slave, then master again, each a new Broker) is
// not sent to the controller: it was worked out from that Broker's
// slaves and epoch, and the controller would take it under the current
// epochs.
func TestControllerModeDropsStaleProposal(t *testing.T) {
	ctlAddr, a, b := newCtlGroup(t, nil)
	a.start()
	b.start()
	mustSend(t, dialCtl(t, a.addr()), "TopicTest", 0, "in the first epoch", "")
	waitUntil(t, 20*time.Second, "the sync state set to hold both", func() bool {
		return len(a.sup.role().syncSet) == 2 && b.end() == a.end()
	})
	first := a.sup.Broker()
	designateMaster(t, ctlAddr, b.sup.BrokerID())
	waitUntil(t, 20*time.Second, "the second broker to lead with both in sync", func() bool {
		return b.isMaster() && len(b.sup.role().syncSet) == 2
	})
	designateMaster(t, ctlAddr, a.sup.BrokerID())
	waitUntil(t, 20*time.Second, "the first broker to lead again with both in sync", func() bool {
		return a.isMaster() && len(a.sup.role().syncSet) == 2 && len(controllerSyncStateSet(t, a)) == 2
	})
	if a.sup.Broker() == first {
		t.Fatal("the first broker leads again without a new Broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	before, err := a.sup.ctl.syncStateData(ctx, "broker-a")
	if err != nil {
		t.Fatal(err)
	}
	// The first Broker's server would have dropped the slave.
	first.ctl.propose([]int64{a.sup.BrokerID()})
	time.Sleep(2 * time.Second)
	after, err := a.sup.ctl.syncStateData(ctx, "broker-a")
	if err != nil {
		t.Fatal(err)
	}
	if after.SyncStateSetEpoch != before.SyncStateSetEpoch {
		t.Fatalf("a stale proposal changed the sync state set: epoch %d -> %d, now %+v", before.SyncStateSetEpoch, after.SyncStateSetEpoch, after.InSyncReplicas)
	}
}

// TestControllerModeSwitchSkipsGracefulWait has the slave, started with
// enableShutdownGracefully, elected master: its slave Broker stops
// without telling its clients to go away (and so without the wait, which
// with the default 30 s outlasted the switch's stop deadline and failed
// the switch).
// The process's own stop keeps the graceful wait
// (TestGracefulShutdownTellsNewerClientsToGoAway).
func TestControllerModeSwitchSkipsGracefulWait(t *testing.T) {
	ctlAddr := startTestController(t, true, true)
	a := newCtlBroker(t, ctlAddr, "")
	b := newCtlBroker(t, ctlAddr, "")
	b.settings["enableShutdownGracefully"] = "true"
	b.settings["shutdownWaitTimeSeconds"] = "5" // the cleanup's stop waits it
	var mu sync.Mutex
	var started []*Broker
	b.configure = func(br *Broker) {
		mu.Lock()
		defer mu.Unlock()
		started = append(started, br)
	}
	a.start()
	b.start()
	if b.isMaster() || !a.isMaster() {
		t.Fatal("the first broker is not the master, or the second is")
	}
	a.stop()
	waitUntil(t, 25*time.Second, "the slave to become master", b.isMaster)
	mu.Lock()
	defer mu.Unlock()
	if len(started) != 2 {
		t.Fatalf("%d Brokers started, want the slave's and the master's", len(started))
	}
	if slave := started[0]; slave.server.GoingAway() {
		t.Fatal("the slave Broker stopped for the switch told its clients to go away")
	}
	if sw := b.sup.Switches(); len(sw) != 2 || !sw[1].Master {
		t.Fatalf("switches %+v, want the start as slave, then as master", sw)
	}
	if got := b.sup.GoAwayWait(); got != 5*time.Second {
		t.Fatalf("the running Broker's graceful wait is %v, want the configured 5s for the process's stop", got)
	}
}

// A role switch keeps the process's ports and its clients' connections,
// as RocketMQ's one BrokerController keeps them: a consumer registered
// with the slave before it is elected master is still in its group's
// list afterwards, asked on the same connection without a new heartbeat,
// and no connection is refused while the switch runs (the Broker's own
// servers used to stop and start with it: connections refused during
// the switch, and every client's closed).
func TestControllerModeSwitchKeepsConnections(t *testing.T) {
	ctlAddr := startTestController(t, true, true)
	a := newCtlBroker(t, ctlAddr, "")
	b := newCtlBroker(t, ctlAddr, "")
	// Requests arriving during the switch wait for the next Broker;
	// the wait is made long here so that a slow machine's switch does
	// not turn them into SERVICE_NOT_AVAILABLE answers.
	b.supervise = func(s *Supervisor) { s.switchWait = time.Minute }
	a.start()
	b.start()
	if !a.isMaster() || b.isMaster() {
		t.Fatal("the first broker is not the master, or the second is")
	}
	c := dialCtl(t, b.addr())
	if r := call(t, c, remoting.HeartBeat, nil, consumerHeartbeat("10.0.0.9@1", "G")); r.Code != remoting.Success {
		t.Fatalf("heartbeat: code %d %q", r.Code, r.Remark)
	}
	first := b.sup.Broker()
	stop := make(chan struct{})
	asker := dialCtl(t, b.addr())
	askerDone := make(chan struct{})
	var asked atomic.Int64
	var unanswered []string
	go func() {
		defer close(askerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			r, err := asker.Invoke(ctx, remoting.NewRequest(remoting.GetBrokerRuntimeInfo, nil, nil))
			cancel()
			asked.Add(1)
			switch {
			case err != nil:
				unanswered = append(unanswered, err.Error())
			case r.Code != remoting.Success:
				unanswered = append(unanswered, fmt.Sprintf("code %d %q", r.Code, r.Remark))
			}
		}
	}()

	dialerDone := make(chan struct{})
	var dials, refused atomic.Int64
	go func() {
		defer close(dialerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			conn, err := net.DialTimeout("tcp", b.addr(), time.Second)
			if err != nil {
				refused.Add(1)
				continue
			}
			dials.Add(1)
			_ = conn.Close()
		}
	}()
	a.stop()
	waitUntil(t, 25*time.Second, "the slave to become master", b.isMaster)
	close(stop)
	<-dialerDone
	<-askerDone
	if b.sup.Broker() == first {
		t.Fatal("the slave leads without a new Broker: no switch was tested")
	}
	if n := refused.Load(); n > 0 {
		t.Errorf("%d of %d connections refused during the switch", n, n+dials.Load())
	}
	if len(unanswered) > 0 {
		t.Errorf("%d of %d requests during the switch were not served: %v", len(unanswered), asked.Load(), unanswered[:min(len(unanswered), 5)])
	}
	code, ids := consumerIDList(t, c, "G")
	if code != remoting.Success || !slices.Equal(ids, []string{"10.0.0.9@1"}) {
		t.Fatalf("the group's consumers after the switch, on the connection of the heartbeat: code %d %v", code, ids)
	}
}

// A proposal of the sync state set the controller holds already (a
// slave that dropped out and came back before the shrink was sent) is
// taken as that set, logged at info: it used to be a warning after
// every such reconnection, and the set the controller refused was put
// back on the master's server.
func TestControllerModeProposalOfTheHeldSetIsNoWarning(t *testing.T) {
	ctlAddr := startTestController(t, false, true)
	a := newCtlBroker(t, ctlAddr, "")
	var logs testutil.SyncBuffer
	a.supervise = func(s *Supervisor) {
		s.log = zerolog.New(&logs).With().Str("component", "controller-mode").Logger()
	}
	a.start()
	if !a.isMaster() {
		t.Fatal("the broker alone is not elected master")
	}
	held := controllerSyncStateSet(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.sup.alterSyncStateSet(ctx, a.sup.Broker(), held)
	out := logs.String()
	if strings.Contains(out, `"level":"warn"`) {
		t.Fatalf("proposing the held set %v logged a warning:\n%s", held, out)
	}
	if !strings.Contains(out, "the controller holds the proposed sync state set already") {
		t.Fatalf("no line about the held set:\n%s", out)
	}
	if got := a.sup.role().syncSet; !slices.Equal(got, held) {
		t.Fatalf("the supervisor's set is %v, want the held %v", got, held)
	}
}
