package broker

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// actingSettings are the keys every member of an acting-master group
// gets in these tests: short periods so that changes show within a test.
func actingSettings(ns string, kv map[string]string) map[string]string {
	out := withHA(map[string]string{"namesrvAddr": ns, "enableSlaveActingMaster": "true",
		"syncBrokerMemberGroupPeriod": "100", "brokerHeartbeatInterval": "200", "registerNameServerPeriod": "300"})
	for k, v := range kv {
		out[k] = v
	}
	return out
}

// startActingNameServer starts a name server with supportActingMaster on,
// and notifyMinBrokerIdChanged as notify says.
func startActingNameServer(t *testing.T, notify bool) *namesrv.Server {
	t.Helper()
	set := configs.DefaultNamesrv()
	set.SupportActingMaster = true
	set.NotifyMinBrokerIdChanged = notify
	cfg := namesrv.DefaultConfig()
	cfg.Remoting.Addr = "127.0.0.1:0"
	cfg.Remoting.EventLoops = 1
	cfg.Settings = &set
	cfg.ScanInterval = 200 * time.Millisecond
	return startNameServerWith(t, cfg, zerolog.Nop())
}

// routeOf asks the name server for topic's route as a client does.
func routeOf(t *testing.T, ns *namesrv.Server, topic string) (namesrv.TopicRouteData, error) {
	t.Helper()
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	defer pool.Close()
	return namesrv.FetchRoute(context.Background(), pool, []string{ns.Addr().String()}, topic, 3*time.Second)
}

// brokerActive is what the broker's GET_BROKER_RUNTIME_INFO says as
// brokerActive.
func brokerActive(t *testing.T, tb *testBroker) string {
	t.Helper()
	return runtimeInfo(t, tb.client(nil))["brokerActive"]
}

// With its master stopped, the slave of an acting-master group is named
// broker id 0 with read-only queues in routes, reports itself acting,
// and serves pulls and POP of what it holds through that route without
// sending consumers back to the master; with the master back, it follows
// the master again and the route names the master.
func TestSlaveActsAsMasterWhileItsMasterIsDown(t *testing.T) {
	for _, notify := range []bool{false, true} {
		name := "member group sync"
		if notify {
			name = "name server notice"
		}
		t.Run(name, func(t *testing.T) {
			testSlaveActsAsMaster(t, notify)
		})
	}
}

func testSlaveActsAsMaster(t *testing.T, notify bool) {
	ns := startActingNameServer(t, notify)
	nsAddr := ns.Addr().String()
	period := "100"
	if notify {
		// The notices alone must show the change before the sync would.
		period = "600000"
	}
	masterStore := t.TempDir()
	masterSettings := actingSettings(nsAddr, nil)
	master := startTestBrokerAt(t, masterStore, masterSettings)
	slave := startTestBroker(t, actingSettings(nsAddr, map[string]string{"brokerRole": "SLAVE", "brokerId": "1",
		"syncBrokerMemberGroupPeriod": period, "slaveReadEnable": "true"}))
	mc := master.client(nil)
	createTopic(t, mc, "AM", 1, 1)
	sendBodies(t, mc, "AM", 3)
	waitReplicated(t, master, slave)
	syncSlave(t, slave, master)
	waitFor(t, "the slave to know its master", func() bool { return slave.masterAddr() == master.Addr() })
	// The first sync of the member list (1 s after the start); with
	// notices, the last one of the test.
	waitFor(t, "the slave to see the master as its group's smallest member", func() bool {
		m := slave.group.members.Load()
		return m != nil && (*m)[0] == master.Addr() && (*m)[1] == slave.Addr()
	})
	if slave.actingMaster() || brokerActive(t, slave) != "false" || brokerActive(t, master) != "true" {
		t.Fatalf("with the master up: slave acting %v, brokerActive slave %s, master %s",
			slave.actingMaster(), brokerActive(t, slave), brokerActive(t, master))
	}

	master.stop()
	waitFor(t, "the slave to act as master", slave.actingMaster)
	if slave.masterAddr() != "" {
		t.Errorf("acting slave still follows master %q", slave.masterAddr())
	}
	if got := brokerActive(t, slave); got != "true" {
		t.Errorf("acting slave: brokerActive %q, want true", got)
	}
	var route namesrv.TopicRouteData
	waitFor(t, "the route to name the slave as broker 0", func() bool {
		r, err := routeOf(t, ns, "AM")
		if err != nil || len(r.BrokerDatas) != 1 || len(r.QueueDatas) != 1 {
			return false
		}
		route = r
		return r.BrokerDatas[0].BrokerAddrs[namesrv.MasterID] == slave.Addr()
	})
	if perm := route.QueueDatas[0].Perm; perm&meta.PermWrite != 0 || perm&meta.PermRead == 0 {
		t.Fatalf("acting master's queues: perm %d, want read-only", perm)
	}
	// A consumer goes where the route says broker 0 is.
	c, err := remoting.Dial(context.Background(), route.BrokerDatas[0].BrokerAddrs[namesrv.MasterID], remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	resp := call(t, c, remoting.PullMessage, pullReq("am-pull", "AM", 0, 0, 0, 0, "*"), nil)
	if resp.Code != remoting.Success || len(decodeRecords(t, resp.Body)) != 3 {
		t.Fatalf("pull from the acting master: code %d %s", resp.Code, resp.Remark)
	}
	// Past the end it has nothing: held or answered, never sent back to a
	// master that is gone.
	resp = call(t, c, remoting.PullMessage, pullReq("am-pull", "AM", 0, 3, 0, 0, "*"), nil)
	if resp.Code == remoting.PullRetryImmediately {
		t.Fatalf("pull past the end on the acting master: PULL_RETRY_IMMEDIATELY, the master being gone")
	}
	// Producers see read-only queues; one that sends all the same is
	// refused as RocketMQ's acting master's store refuses the put.
	if resp := sendV2(t, c, "AM", 0, "late", ""); resp.Code != remoting.ServiceNotAvailable {
		t.Fatalf("send to the acting master: code %d %s, want SERVICE_NOT_AVAILABLE", resp.Code, resp.Remark)
	}
	pc := popclient.New(c, slave.cfg.BrokerName)
	res := mustPop(t, pc, popclient.PopRequest{Group: "am-pop", Topic: "AM", QueueID: 0, MaxMsgNums: 3, InvisibleTime: time.Minute})
	if len(res.Messages) != 3 {
		t.Fatalf("pop from the acting master: %d messages, want 3", len(res.Messages))
	}
	// The route names it as master, rightly: its answer is not marked as
	// a slave's, which would have the gRPC proxy ask for the route again
	// and again.
	if _, ok := res.Header[remoting.FieldSlave]; ok {
		t.Fatalf("the acting master's pop answer is marked %s, as a slave's following its master", remoting.FieldSlave)
	}

	// The master back, at a new address: the slave follows it again.
	master2 := startTestBrokerAt(t, masterStore, masterSettings)
	waitFor(t, "the slave to stop acting", func() bool { return !slave.actingMaster() })
	waitFor(t, "the slave to follow the master again", func() bool { return slave.masterAddr() == master2.Addr() })
	if got := brokerActive(t, slave); got != "false" {
		t.Errorf("slave with its master back: brokerActive %q, want false", got)
	}
	waitFor(t, "the route to name the master as broker 0", func() bool {
		r, err := routeOf(t, ns, "AM")
		return err == nil && len(r.BrokerDatas) == 1 && r.BrokerDatas[0].BrokerAddrs[namesrv.MasterID] == master2.Addr() &&
			r.BrokerDatas[0].BrokerAddrs[1] == slave.Addr()
	})
	// What the master gets now reaches the slave again.
	sendBodies(t, master2.client(nil), "AM", 1)
	waitReplicated(t, master2, slave)
}

// NOTIFY_MIN_BROKER_ID_CHANGE makes a slave under enableSlaveActingMaster
// act when its id is the smallest and stop when the master's is; a
// master, or a slave without the switch, ignores it.
func TestNotifyMinBrokerIDChangeSwitchesTheActingMaster(t *testing.T) {
	slave := startTestBroker(t, withHA(map[string]string{"brokerRole": "SLAVE", "brokerId": "1", "enableSlaveActingMaster": "true"}))
	classic := startTestBroker(t, withHA(map[string]string{"brokerRole": "SLAVE", "brokerId": "1"}))
	master := startTestBroker(t, withHA(map[string]string{"enableSlaveActingMaster": "true"}))
	notice := func(tb *testBroker, minID, minAddr string) {
		t.Helper()
		resp := call(t, tb.client(nil), remoting.NotifyMinBrokerIDChange, map[string]string{
			"minBrokerId": minID, "minBrokerAddr": minAddr, "brokerName": tb.cfg.BrokerName}, nil)
		if resp.Code != remoting.Success {
			t.Fatalf("notice: %d %s", resp.Code, resp.Remark)
		}
	}
	for _, tb := range []*testBroker{slave, classic, master} {
		notice(tb, "1", tb.Addr())
	}
	if !slave.actingMaster() || brokerActive(t, slave) != "true" {
		t.Fatalf("slave told its id is the smallest: acting %v", slave.actingMaster())
	}
	if classic.actingMaster() || brokerActive(t, classic) != "false" {
		t.Fatal("a slave without enableSlaveActingMaster acts")
	}
	if brokerActive(t, master) != "true" {
		t.Fatal("the master stopped being active")
	}
	notice(slave, "0", "127.0.0.1:1")
	if slave.actingMaster() || slave.masterAddr() != "127.0.0.1:1" || brokerActive(t, slave) != "false" {
		t.Fatalf("slave told the master is back: acting %v, master %q", slave.actingMaster(), slave.masterAddr())
	}
	if resp := call(t, slave.client(nil), remoting.NotifyMinBrokerIDChange, map[string]string{"minBrokerAddr": "x"}, nil); resp.Code != remoting.SystemError {
		t.Fatalf("notice without minBrokerId: code %d, want SYSTEM_ERROR", resp.Code)
	}
}

// Under enableSlaveActingMaster a broker registers with
// brokerNotActiveTimeoutMillis as its heartbeat timeout and keeps its
// registration with BROKER_HEARTBEAT, not with its registrations.
func TestActingMasterModeHeartbeatsKeepTheRegistration(t *testing.T) {
	ns := startActingNameServer(t, false)
	b := startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String(), "enableSlaveActingMaster": "true",
		"brokerNotActiveTimeoutMillis": "1500", "brokerHeartbeatInterval": "200", "registerNameServerPeriod": "60000"})
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		if m := ns.Registry().MemberGroup(b.cfg.BrokerName); m[0] != b.Addr() {
			t.Fatalf("broker dropped by the name server between registrations: members %v", m)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Without heartbeats the 1.5 s timeout drops it.
	b.register.halt(context.Background())
	waitFor(t, "the name server to drop the silent broker", func() bool {
		return ns.Registry().MemberGroup(b.cfg.BrokerName)[0] == ""
	})
}
