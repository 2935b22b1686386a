package namesrv

import (
	"context"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// waitFor polls cond; the 10 s deadline only guards against hangs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func startNameServer(t *testing.T, mutate func(*Config)) (*Server, *testutil.SyncBuffer) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Remoting.Addr = "127.0.0.1:0"
	cfg.Remoting.EventLoops = 1
	if mutate != nil {
		mutate(&cfg)
	}
	logs := &testutil.SyncBuffer{}
	s, err := NewServer(cfg, zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s, logs
}

func dial(t *testing.T, s *Server) *remoting.Client {
	t.Helper()
	c, err := remoting.Dial(testCtx(t), s.Addr().String(), remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func invoke(t *testing.T, c *remoting.Client, code int32, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	resp, err := c.Invoke(testCtx(t), remoting.NewRequest(code, ext, body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func brokerInfo(name, addr string, id int64) BrokerInfo {
	return BrokerInfo{ClusterName: "DefaultCluster", BrokerName: name, BrokerAddr: addr, BrokerID: id,
		HAServerAddr: addr + "-ha", EnableActingMaster: false}
}

func TestEndToEndWithRegistrar(t *testing.T) {
	ns1, _ := startNameServer(t, nil)
	ns2, _ := startNameServer(t, nil)
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	defer pool.Close()
	reg := NewRegistrar(pool, " "+ns1.Addr().String()+";"+ns2.Addr().String()+"; ", zerolog.Nop())
	if got := reg.NameServers(); len(got) != 2 {
		t.Fatalf("name servers %v", got)
	}

	master := brokerInfo("broker-a", "10.0.0.1:10911", 0)
	master.Compressed = true
	body := &RegisterBrokerBody{DataVersion: DataVersion{Counter: 1, Timestamp: 1}, TopicConfigTable: manyTopics(10_000)}
	body.TopicConfigTable["T"] = TopicConfig{TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicFilterType: SingleTag}
	results, err := reg.Register(testCtx(t), master, body)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil || r.Result != (RegisterResult{}) {
			t.Fatalf("master registration %+v", r)
		}
	}
	slave := brokerInfo("broker-a", "10.0.0.2:10911", 1)
	results, err = reg.Register(testCtx(t), slave, body)
	if err != nil {
		t.Fatal(err)
	}
	if results[0].Result.MasterAddr != "10.0.0.1:10911" || results[1].Result.HAServerAddr != "10.0.0.1:10911-ha" {
		t.Fatalf("slave registration %+v", results)
	}

	for _, ns := range []*Server{ns1, ns2} {
		c := dial(t, ns)
		resp := invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil)
		want := `{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],` +
			`"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}`
		if resp.Code != remoting.Success || string(resp.Body) != want {
			t.Fatalf("route: %v %s", resp, resp.Body)
		}
		if n := len(ns.Registry().Topics()); n != 10_001 {
			t.Fatalf("%d topics registered", n)
		}
	}

	if need, err := reg.NeedRegister(testCtx(t), master, body.DataVersion); err != nil || need {
		t.Fatalf("NeedRegister with the registered version: %v %v", need, err)
	}
	if need, err := reg.NeedRegister(testCtx(t), master, DataVersion{Counter: 2}); err != nil || !need {
		t.Fatalf("NeedRegister with a new version: %v %v", need, err)
	}

	if err := reg.Unregister(testCtx(t), slave); err != nil {
		t.Fatal(err)
	}
	if err := reg.Unregister(testCtx(t), master); err != nil {
		t.Fatal(err)
	}
	resp := invoke(t, dial(t, ns1), remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil)
	if resp.Code != remoting.TopicNotExist {
		t.Fatalf("route after unregister: %v", resp)
	}

	// One name server down: registration still succeeds, with its error reported.
	if err := ns2.Shutdown(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	results, err = reg.Register(testCtx(t), master, body)
	if err != nil || results[0].Err != nil || results[1].Err == nil {
		t.Fatalf("with one name server down: %v %+v", err, results)
	}
	reg.SetNameServers(ns2.Addr().String())
	if _, err := reg.Register(testCtx(t), master, body); err == nil {
		t.Fatal("registration with every name server down succeeded")
	}
	reg.SetNameServers("")
	if _, err := reg.Register(testCtx(t), master, body); err != ErrNoNameServer {
		t.Fatalf("no name servers: %v", err)
	}
}

func TestRequests(t *testing.T) {
	ns, _ := startNameServer(t, func(c *Config) { c.OrderMessageEnable = true })
	c := dial(t, ns)
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	defer pool.Close()
	reg := NewRegistrar(pool, ns.Addr().String(), zerolog.Nop())
	if _, err := reg.Register(testCtx(t), brokerInfo("broker-a", "10.0.0.1:10911", 0), topicsBody(1, "T:4:4:6", "TBW102:8:8:7")); err != nil {
		t.Fatal(err)
	}

	t.Run("unknown topic", func(t *testing.T) {
		resp := invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "nope"}, nil)
		// RocketMQ's remark, FAQ hint included.
		const remark = "No topic route info in name server for the topic: nope\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
		if resp.Code != remoting.TopicNotExist || resp.Remark != remark || resp.Body != nil {
			t.Fatalf("%v", resp)
		}
	})
	t.Run("missing topic field", func(t *testing.T) {
		resp := invoke(t, c, remoting.GetRouteInfoByTopic, nil, nil)
		if resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, `"topic"`) {
			t.Fatalf("%v", resp)
		}
	})
	t.Run("cluster info", func(t *testing.T) {
		resp := invoke(t, c, remoting.GetBrokerClusterInfo, nil, nil)
		var ci ClusterInfo
		if resp.Code != remoting.Success || json.Unmarshal(resp.Body, &ci) != nil ||
			ci.BrokerAddrTable["broker-a"].BrokerAddrs[0] != "10.0.0.1:10911" || ci.ClusterAddrTable["DefaultCluster"][0] != "broker-a" {
			t.Fatalf("%v %s", resp, resp.Body)
		}
	})
	t.Run("topic lists", func(t *testing.T) {
		resp := invoke(t, c, remoting.GetAllTopicListFromNameServer, nil, nil)
		if string(resp.Body) != `{"topicList":["T","TBW102"]}` {
			t.Fatalf("all topics %s", resp.Body)
		}
		resp = invoke(t, c, remoting.GetTopicsByCluster, map[string]string{"cluster": "DefaultCluster"}, nil)
		if string(resp.Body) != `{"topicList":["T","TBW102"]}` {
			t.Fatalf("cluster topics %s", resp.Body)
		}
	})
	t.Run("order topic config", func(t *testing.T) {
		resp := invoke(t, c, remoting.PutKVConfig, map[string]string{"namespace": OrderTopicConfigNamespace, "key": "T", "value": "broker-a:4"}, nil)
		if resp.Code != remoting.Success {
			t.Fatalf("put: %v", resp)
		}
		resp = invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil)
		if !strings.Contains(string(resp.Body), `"orderTopicConf":"broker-a:4"`) {
			t.Fatalf("route %s", resp.Body)
		}
		resp = invoke(t, c, remoting.GetKVConfig, map[string]string{"namespace": OrderTopicConfigNamespace, "key": "T"}, nil)
		if resp.Code != remoting.Success || resp.ExtFields["value"] != "broker-a:4" {
			t.Fatalf("get: %v", resp)
		}
		resp = invoke(t, c, remoting.GetKVListByNamespace, map[string]string{"namespace": OrderTopicConfigNamespace}, nil)
		if string(resp.Body) != `{"table":{"T":"broker-a:4"}}` {
			t.Fatalf("list %s", resp.Body)
		}
		// A registering broker gets the table back.
		results, err := reg.Register(testCtx(t), brokerInfo("broker-a", "10.0.0.1:10911", 0), topicsBody(2, "T:4:4:6", "TBW102:8:8:7"))
		if err != nil || results[0].OrderTopicConfig["T"] != "broker-a:4" {
			t.Fatalf("register: %+v %v", results, err)
		}
		resp = invoke(t, c, remoting.DeleteKVConfig, map[string]string{"namespace": OrderTopicConfigNamespace, "key": "T"}, nil)
		if resp.Code != remoting.Success {
			t.Fatalf("delete: %v", resp)
		}
		resp = invoke(t, c, remoting.GetKVConfig, map[string]string{"namespace": OrderTopicConfigNamespace, "key": "T"}, nil)
		if resp.Code != remoting.QueryNotFound {
			t.Fatalf("get after delete: %v", resp)
		}
		resp = invoke(t, c, remoting.GetKVListByNamespace, map[string]string{"namespace": "never"}, nil)
		if resp.Code != remoting.QueryNotFound {
			t.Fatalf("list unknown namespace: %v", resp)
		}
		resp = invoke(t, c, remoting.PutKVConfig, map[string]string{"namespace": "n"}, nil)
		if resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, `"key"`) {
			t.Fatalf("put without key: %v", resp)
		}
	})
	t.Run("query data version and heartbeat", func(t *testing.T) {
		ext := map[string]string{"clusterName": "DefaultCluster", "brokerAddr": "10.0.0.1:10911", "brokerName": "broker-a", "brokerId": "0"}
		resp := invoke(t, c, remoting.QueryDataVersion, ext, []byte(`{"counter":2,"stateVersion":0,"timestamp":2}`))
		if resp.Code != remoting.Success || resp.ExtFields["changed"] != "false" || string(resp.Body) != `{"counter":2,"stateVersion":0,"timestamp":2}` {
			t.Fatalf("same version: %v %s", resp, resp.Body)
		}
		resp = invoke(t, c, remoting.QueryDataVersion, ext, []byte(`{"counter":3,"timestamp":3}`))
		if resp.ExtFields["changed"] != "true" {
			t.Fatalf("new version: %v", resp)
		}
		resp = invoke(t, c, remoting.QueryDataVersion, ext, []byte(`x`))
		if resp.Code != remoting.SystemError {
			t.Fatalf("bad body: %v", resp)
		}
		resp = invoke(t, c, remoting.BrokerHeartbeat, ext, nil)
		if resp.Code != remoting.Success {
			t.Fatalf("heartbeat: %v", resp)
		}
	})
	t.Run("register errors", func(t *testing.T) {
		ext := map[string]string{"brokerName": "b", "brokerAddr": "1.1.1.1:1", "clusterName": "C", "haServerAddr": "", "brokerId": "0"}
		body, _ := topicsBody(1, "A:1:1:6", "B:1:1:6").Encode(false)
		bad := map[string]string{}
		for k, v := range ext {
			bad[k] = v
		}
		bad["bodyCrc32"] = "12345"
		if resp := invoke(t, c, remoting.RegisterBroker, bad, body); resp.Code != remoting.SystemError || resp.Remark != "crc32 not match" {
			t.Fatalf("crc: %v", resp)
		}
		bad["bodyCrc32"] = "x"
		if resp := invoke(t, c, remoting.RegisterBroker, bad, body); resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, `"bodyCrc32"`) {
			t.Fatalf("bad crc field: %v", resp)
		}
		delete(bad, "bodyCrc32")
		delete(bad, "brokerId")
		if resp := invoke(t, c, remoting.RegisterBroker, bad, body); resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, `"brokerId"`) {
			t.Fatalf("missing brokerId: %v", resp)
		}
		if resp := invoke(t, c, remoting.RegisterBroker, ext, []byte(`{"topicConfigSerializeWrapper":`)); resp.Code != remoting.SystemError {
			t.Fatalf("bad body: %v", resp)
		}
		single, _ := topicsBody(1, "A:1:1:6").Encode(false)
		if resp := invoke(t, c, remoting.RegisterBroker, ext, single); resp.Code != remoting.SystemError || resp.Remark != "register broker failed" {
			t.Fatalf("single topic: %v", resp)
		}
		good := map[string]string{}
		for k, v := range ext {
			good[k] = v
		}
		good["bodyCrc32"] = strconv.FormatInt(int64(crc32.ChecksumIEEE(body)&0x7FFFFFFF), 10)
		if resp := invoke(t, c, remoting.RegisterBroker, good, body); resp.Code != remoting.Success {
			t.Fatalf("good crc: %v", resp)
		}
	})
	t.Run("delete topic and unsupported code", func(t *testing.T) {
		if resp := invoke(t, c, remoting.DeleteTopicInNamesrv, map[string]string{"topic": "T"}, nil); resp.Code != remoting.Success {
			t.Fatalf("delete: %v", resp)
		}
		if resp := invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil); resp.Code != remoting.TopicNotExist {
			t.Fatalf("route after delete: %v", resp)
		}
		if resp := invoke(t, c, remoting.SendMessage, nil, []byte("a=b")); resp.Code != remoting.RequestCodeNotSupported {
			t.Fatalf("unsupported: %v", resp)
		}
	})
}

func TestDisabledTopicLists(t *testing.T) {
	ns, _ := startNameServer(t, func(c *Config) { c.EnableAllTopicList, c.EnableTopicList = false, false })
	c := dial(t, ns)
	for _, code := range []int32{remoting.GetAllTopicListFromNameServer, remoting.GetTopicsByCluster,
		remoting.GetUnitTopicList, remoting.GetHasUnitSubTopicList, remoting.GetHasUnitSubUnUnitTopicList} {
		if resp := invoke(t, c, code, map[string]string{"cluster": "C"}, nil); resp.Code != remoting.SystemError || resp.Remark != "disable" {
			t.Fatalf("code %d: %v", code, resp)
		}
	}
}

func TestExpiryClosesConnection(t *testing.T) {
	clock := newFakeClock()
	ns, logs := startNameServer(t, func(c *Config) {
		c.Now = clock.Now
		c.ScanInterval = 5 * time.Millisecond
	})
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	defer pool.Close()
	reg := NewRegistrar(pool, ns.Addr().String(), zerolog.Nop())
	info := brokerInfo("broker-a", "10.0.0.1:10911", 0)
	if _, err := reg.Register(testCtx(t), info, topicsBody(1, "T:1:1:6", "U:1:1:6")); err != nil {
		t.Fatal(err)
	}
	client, err := pool.Get(testCtx(t), ns.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(DefaultBrokerTimeout + time.Second)
	waitFor(t, "broker expiry", func() bool { return ns.Registry().BrokerCount() == 0 })
	<-client.Done() // the name server closed the expired broker's connection
	if !strings.Contains(logs.String(), "broker expired") {
		t.Fatalf("no log line: %s", logs)
	}
	// The broker's next registration comes back on a new connection.
	if _, err := reg.Register(testCtx(t), info, topicsBody(2, "T:1:1:6", "U:1:1:6")); err != nil {
		t.Fatal(err)
	}
}

// A connection that closes unregisters every broker whose registration
// came over it, on purpose unlike RocketMQ: its onChannelDestroy
// unregisters the first broker it finds on the channel, in the hash order
// of its live table, and leaves the others routed for up to the 120 s of
// their expiry although their connection is gone (a BrokerContainer's
// brokers share one). A broker still running registers again within its
// 30 s period over a new connection.
func TestConnectionCloseUnregistersEveryBrokerOnIt(t *testing.T) {
	ns, _ := startNameServer(t, nil)
	c := dial(t, ns)
	registerOver(t, c, "broker-a", "10.0.0.1:10911", 1, "T:4:4:6", "A:4:4:6")
	registerOver(t, c, "broker-b", "10.0.0.2:10911", 1, "T:4:4:6", "B:4:4:6")
	other := dial(t, ns)
	registerOver(t, other, "broker-c", "10.0.0.3:10911", 1, "T:4:4:6", "C:4:4:6")
	_ = c.Close()
	waitFor(t, "unregister on close", func() bool { return ns.Registry().BrokerCount() == 1 })
	for _, topic := range []string{"A", "B"} {
		if resp := invoke(t, other, remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil); resp.Code != remoting.TopicNotExist {
			t.Fatalf("route of %s after its broker's connection closed: %v %s", topic, resp, resp.Body)
		}
	}
	resp := invoke(t, other, remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil)
	var route TopicRouteData
	if err := json.Unmarshal(resp.Body, &route); err != nil || len(route.BrokerDatas) != 1 || route.BrokerDatas[0].BrokerName != "broker-c" {
		t.Fatalf("route of T: %s %v", resp.Body, err)
	}
}

func TestConnectionCloseUnregisters(t *testing.T) {
	ns, _ := startNameServer(t, nil)
	c := dial(t, ns)
	body, _ := topicsBody(1, "T:1:1:6", "U:1:1:6").Encode(true)
	ext := map[string]string{"brokerName": "b", "brokerAddr": "1.1.1.1:1", "clusterName": "C", "haServerAddr": "",
		"brokerId": "0", "compressed": "true"}
	if resp := invoke(t, c, remoting.RegisterBroker, ext, body); resp.Code != remoting.Success {
		t.Fatalf("register: %v", resp)
	}
	if ns.Registry().BrokerCount() != 1 {
		t.Fatal("not registered")
	}
	_ = c.Close()
	waitFor(t, "unregister on close", func() bool { return ns.Registry().BrokerCount() == 0 })
}

func TestKVStorePersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "namesrv", "kvConfig.json")
	kv, err := OpenKVStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Put(OrderTopicConfigNamespace, "T", "a:4"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Put("ns", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete("ns", "k"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil || string(data) != `{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"a:4"},"ns":{}}}` {
		t.Fatalf("file %s %v", data, err)
	}
	again, err := OpenKVStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := again.Get(OrderTopicConfigNamespace, "T"); !ok || v != "a:4" {
		t.Fatalf("reloaded %q %v", v, ok)
	}
	if table, ok := again.List("ns"); !ok || len(table) != 0 {
		t.Fatalf("empty namespace %v %v", table, ok)
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenKVStore(path); err == nil {
		t.Fatal("corrupt file accepted")
	}
}

// RocketMQ rewrites kvConfig.json in place, so a name server stopped
// between the truncation and the write leaves it empty; RocketMQ starts
// from it with no KV configuration, and so must a name server given
// RocketMQ's file.
func TestNameServerStartsFromAnEmptyKVConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kvConfig.json")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ns, _ := startNameServer(t, func(c *Config) { c.KVConfigPath = path })
	c := dial(t, ns)
	if resp := invoke(t, c, remoting.GetKVListByNamespace, map[string]string{"namespace": OrderTopicConfigNamespace}, nil); resp.Code != remoting.QueryNotFound {
		t.Fatalf("KV list from an empty file: %v", resp)
	}
	if resp := invoke(t, c, remoting.PutKVConfig, map[string]string{"namespace": OrderTopicConfigNamespace, "key": "T", "value": "broker-a:4"}, nil); resp.Code != remoting.Success {
		t.Fatalf("put: %v", resp)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != `{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"broker-a:4"}}}` {
		t.Fatalf("file after a put: %s %v", data, err)
	}
}

func TestBrokerPermissionAndListRequests(t *testing.T) {
	ns, logs := startNameServer(t, nil)
	c := dial(t, ns)
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	defer pool.Close()
	reg := NewRegistrar(pool, ns.Addr().String(), zerolog.Nop())
	body := topicsBody(1, "T:4:4:6", "TBW102:8:8:7")
	tc := body.TopicConfigTable["T"]
	tc.TopicSysFlag = 1
	body.TopicConfigTable["T"] = tc
	if _, err := reg.Register(testCtx(t), brokerInfo("broker-a", "10.0.0.1:10911", 0), body); err != nil {
		t.Fatal(err)
	}
	resp := invoke(t, c, remoting.WipeWritePermOfBroker, map[string]string{"brokerName": "broker-a"}, nil)
	if resp.Code != remoting.Success || resp.ExtFields["wipeTopicCount"] != "2" {
		t.Fatalf("wipe: %v", resp)
	}
	if !strings.Contains(logs.String(), "write permission of broker wiped") {
		t.Fatal("the wipe was not logged")
	}
	route := invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil)
	if !strings.Contains(string(route.Body), `"perm":4`) {
		t.Fatalf("route after wipe %s", route.Body)
	}
	resp = invoke(t, c, remoting.AddWritePermOfBroker, map[string]string{"brokerName": "broker-a"}, nil)
	if resp.Code != remoting.Success || resp.ExtFields["addTopicCount"] != "2" {
		t.Fatalf("add: %v", resp)
	}
	route = invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil)
	if !strings.Contains(string(route.Body), `"perm":6`) {
		t.Fatalf("route after add %s", route.Body)
	}
	for _, code := range []int32{remoting.WipeWritePermOfBroker, remoting.AddWritePermOfBroker} {
		if resp := invoke(t, c, code, nil, nil); resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, "brokerName") {
			t.Fatalf("code %d without brokerName: %v", code, resp)
		}
	}
	for code, want := range map[int32]string{
		remoting.GetSystemTopicListFromNS:     `{"brokerAddr":"10.0.0.1:10911","topicList":["DefaultCluster","broker-a"]}`,
		remoting.GetUnitTopicList:             `{"topicList":["T"]}`,
		remoting.GetHasUnitSubTopicList:       `{"topicList":[]}`,
		remoting.GetHasUnitSubUnUnitTopicList: `{"topicList":[]}`,
	} {
		if resp := invoke(t, c, code, nil, nil); resp.Code != remoting.Success || string(resp.Body) != want {
			t.Errorf("code %d: %d %s, want %s", code, resp.Code, resp.Body, want)
		}
	}
}

// A client in zone mode (__ZONE_MODE, __ZONE_NAME) gets the broker groups
// of its zone (the name compared case-insensitively) and those without a
// master, whose slaves it may read from, with their queues only, as
// RocketMQ's name server answers it; other clients get every group.
func TestZoneModeRoutesKeepTheClientsZone(t *testing.T) {
	ns, _ := startNameServer(t, nil)
	reg := ns.Registry()
	for _, b := range []struct {
		name, addr, zone string
		id               int64
	}{
		{"broker-a", "10.0.0.1:10911", "zoneA", 0},
		{"broker-b", "10.0.0.2:10911", "zoneB", 0},
		{"broker-c", "10.0.0.3:10911", "zoneB", 0},
		{"broker-c", "10.0.0.4:10911", "zoneB", 1},
	} {
		if _, err := reg.Register(RegisterRequest{ClusterName: "C", BrokerName: b.name, BrokerAddr: b.addr, BrokerID: b.id,
			ZoneName: b.zone, Body: topicsBody(1, "T:4:4:6", "TBW102:8:8:7")}); err != nil {
			t.Fatal(err)
		}
	}
	reg.Unregister("C", "10.0.0.3:10911", "broker-c") // broker-c's master is down
	c := dial(t, ns)
	for _, tc := range []struct {
		ext  map[string]string
		want []string
	}{
		{map[string]string{"__ZONE_MODE": "true", "__ZONE_NAME": "ZONEA"}, []string{"broker-a", "broker-c"}},
		{map[string]string{"__ZONE_MODE": "true", "__ZONE_NAME": "zoneB"}, []string{"broker-b", "broker-c"}},
		{map[string]string{"__ZONE_MODE": "true", "__ZONE_NAME": " "}, []string{"broker-a", "broker-b", "broker-c"}},
		{map[string]string{"__ZONE_MODE": "false", "__ZONE_NAME": "zoneA"}, []string{"broker-a", "broker-b", "broker-c"}},
		{map[string]string{}, []string{"broker-a", "broker-b", "broker-c"}},
	} {
		tc.ext["topic"] = "T"
		resp := invoke(t, c, remoting.GetRouteInfoByTopic, tc.ext, nil)
		var route TopicRouteData
		if resp.Code != remoting.Success || json.Unmarshal(resp.Body, &route) != nil {
			t.Fatalf("%v %s", resp, resp.Body)
		}
		var groups, queues []string
		for _, bd := range route.BrokerDatas {
			groups = append(groups, bd.BrokerName)
		}
		for _, qd := range route.QueueDatas {
			queues = append(queues, qd.BrokerName)
		}
		slices.Sort(groups)
		slices.Sort(queues)
		if !slices.Equal(groups, tc.want) || !slices.Equal(queues, tc.want) {
			t.Errorf("route for %v: groups %v, queues %v; want %v", tc.ext, groups, queues, tc.want)
		}
	}
}

// A put or delete whose file write fails is answered with the error and
// leaves the table as it was: nobody reads a value the caller was told
// was not stored (RocketMQ keeps it in memory and only logs).
func TestKVStoreKeepsNothingAWriteFailed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "namesrv")
	kv, err := OpenKVStore(filepath.Join(dir, "kvConfig.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Put("ns", "k", "v1"); err != nil {
		t.Fatal(err)
	}
	// The directory becomes a file: every later write fails.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"replace a value", func() error { return kv.Put("ns", "k", "v2") }},
		{"add a key", func() error { return kv.Put("ns", "new", "x") }},
		{"add a namespace", func() error { return kv.Put("other", "k", "x") }},
		{"delete a key", func() error { return kv.Delete("ns", "k") }},
	} {
		if err := op.do(); err == nil {
			t.Fatalf("%s: no error with the file unwritable", op.name)
		}
	}
	if v, ok := kv.Get("ns", "k"); !ok || v != "v1" {
		t.Fatalf("ns/k after failed writes: %q %v, want v1", v, ok)
	}
	if _, ok := kv.Get("ns", "new"); ok {
		t.Fatal("a key whose put failed is readable")
	}
	if _, ok := kv.List("other"); ok {
		t.Fatal("a namespace whose put failed is listed")
	}
}

// Two brokers register over one connection; one goes on renewing, the
// other falls silent and expires. The name server closes the connection
// (RocketMQ closes an expired broker's channel) and the renewing broker
// stays registered.
func TestExpiryKeepsTheOtherBrokersOfTheConnection(t *testing.T) {
	clock := newFakeClock()
	ns, _ := startNameServer(t, func(c *Config) {
		c.Now = clock.Now
		c.ScanInterval = 5 * time.Millisecond
	})
	c := dial(t, ns)
	for _, b := range []struct{ name, addr string }{{"broker-a", "1.1.1.1:1"}, {"broker-b", "2.2.2.2:1"}} {
		body, _ := topicsBody(1, "T:1:1:6", "U:1:1:6").Encode(false)
		ext := map[string]string{"brokerName": b.name, "brokerAddr": b.addr, "clusterName": "C", "haServerAddr": "",
			"brokerId": "0"}
		if resp := invoke(t, c, remoting.RegisterBroker, ext, body); resp.Code != remoting.Success {
			t.Fatalf("register %s: %v", b.name, resp)
		}
	}
	clock.Advance(time.Minute)
	if resp := invoke(t, c, remoting.BrokerHeartbeat, map[string]string{"clusterName": "C", "brokerAddr": "2.2.2.2:1",
		"brokerName": "broker-b", "brokerId": "0"}, nil); resp.Code != remoting.Success {
		t.Fatalf("heartbeat: %v", resp)
	}
	clock.Advance(DefaultBrokerTimeout - time.Minute + time.Second)
	waitFor(t, "broker-a's expiry", func() bool { return ns.Registry().BrokerCount() < 2 })
	<-c.Done() // the expired broker's connection is closed
	// Shutdown waits for the connection's close hook.
	if err := ns.Shutdown(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if n := ns.Registry().BrokerCount(); n != 1 {
		t.Fatalf("%d brokers registered, want broker-b", n)
	}
	if v, ok := ns.Registry().DataVersionOf("C", "2.2.2.2:1"); !ok || v.Counter != 1 {
		t.Fatalf("broker-b: %+v %v", v, ok)
	}
}

// A Java broker hosting a static topic registers its mapping (compressed
// body, fastjson's bare keys); GET_ROUTEINFO_BY_TOPIC hands it to clients
// in topicQueueMappingByBroker, as RocketMQ's name server does.
func TestRouteRequestServesAStaticTopicsMapping(t *testing.T) {
	ns, _ := startNameServer(t, nil)
	c := dial(t, ns)
	body, err := staticBody(1, `{"bname":"broker-a","currIdMap":{1:1,0:0},"dirty":false,"epoch":1700000000000,"scope":"__global__","topic":"static-topic","totalQueues":2}`,
		"static-topic:2:2:6", "T:1:1:6").Encode(true)
	if err != nil {
		t.Fatal(err)
	}
	ext := map[string]string{"brokerName": "broker-a", "brokerAddr": "10.0.0.1:10911", "clusterName": "C", "haServerAddr": "",
		"brokerId": "0", "compressed": "true"}
	if resp := invoke(t, c, remoting.RegisterBroker, ext, body); resp.Code != remoting.Success {
		t.Fatalf("register: %v", resp)
	}
	resp := invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "static-topic"}, nil)
	if resp.Code != remoting.Success {
		t.Fatalf("route: %v", resp)
	}
	const want = `,"topicQueueMappingByBroker":{"broker-a":{"bname":"broker-a","currIdMap":{"0":0,"1":1},"dirty":false,` +
		`"epoch":1700000000000,"scope":"__global__","topic":"static-topic","totalQueues":2}}}`
	if !strings.HasSuffix(string(resp.Body), want) {
		t.Fatalf("route %s\nwant it to end %s", resp.Body, want)
	}
}

// registerOver sends a master's REGISTER_BROKER over c with a plain body
// of the given topics ("name:read:write:perm") at data version counter.
func registerOver(t *testing.T, c *remoting.Client, name, addr string, counter int64, topics ...string) {
	t.Helper()
	body, err := topicsBody(counter, topics...).Encode(false)
	if err != nil {
		t.Fatal(err)
	}
	ext := map[string]string{"brokerName": name, "brokerAddr": addr, "clusterName": "C", "haServerAddr": "", "brokerId": "0"}
	if resp := invoke(t, c, remoting.RegisterBroker, ext, body); resp.Code != remoting.Success {
		t.Fatalf("register %s at version %d: %v", name, counter, resp)
	}
}

// routePerms asks c for each topic's route and returns the perm of its
// one queue data.
func routePerms(t *testing.T, c *remoting.Client, topics ...string) []int32 {
	t.Helper()
	var out []int32
	for _, topic := range topics {
		resp := invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
		var route TopicRouteData
		if resp.Code != remoting.Success || json.Unmarshal(resp.Body, &route) != nil || len(route.QueueDatas) != 1 {
			t.Fatalf("route of %s: %v %s", topic, resp, resp.Body)
		}
		out = append(out, route.QueueDatas[0].Perm)
	}
	return out
}

// RocketMQ's WIPE_WRITE_PERM_OF_BROKER changes the queue data the name
// server holds, which it rebuilds from the broker's topic config only for
// a topic the group has no queue data of, or one a registration with a
// new data version carries. So a topic deleted from the name server and
// registered again comes back writable, and a Java broker's incremental
// registration of a topic created on it (REGISTER_BROKER with that topic
// alone and the new data version) leaves its other topics wiped, also
// through the periodic registrations of that version that follow.
func TestAWipeLastsPerTopicAsRocketMQsQueueData(t *testing.T) {
	ns, _ := startNameServer(t, nil)
	c := dial(t, ns)
	registerOver(t, c, "broker-a", "10.0.0.1:10911", 1, "T:4:4:6", "U:4:4:6", "V:4:4:6")
	if resp := invoke(t, c, remoting.WipeWritePermOfBroker, map[string]string{"brokerName": "broker-a"}, nil); resp.ExtFields["wipeTopicCount"] != "3" {
		t.Fatalf("wipe: %v", resp)
	}

	if resp := invoke(t, c, remoting.DeleteTopicInNamesrv, map[string]string{"topic": "U"}, nil); resp.Code != remoting.Success {
		t.Fatalf("delete U: %v", resp)
	}
	registerOver(t, c, "broker-a", "10.0.0.1:10911", 1, "T:4:4:6", "U:4:4:6", "V:4:4:6")
	if got := routePerms(t, c, "T", "U", "V"); !slices.Equal(got, []int32{4, 6, 4}) {
		t.Fatalf("perms after U was deleted and registered again %v, want [4 6 4]", got)
	}

	// N is created on the broker: version 2, registered alone, then with
	// every topic at that version.
	registerOver(t, c, "broker-a", "10.0.0.1:10911", 2, "N:4:4:6")
	registerOver(t, c, "broker-a", "10.0.0.1:10911", 2, "T:4:4:6", "U:4:4:6", "V:4:4:6", "N:4:4:6")
	if got := routePerms(t, c, "T", "U", "V", "N"); !slices.Equal(got, []int32{4, 6, 4, 6}) {
		t.Fatalf("perms after an incremental registration %v, want [4 6 4 6]", got)
	}

	// A registration of version 3 carrying every topic ends the wipe.
	registerOver(t, c, "broker-a", "10.0.0.1:10911", 3, "T:4:4:6", "U:4:4:6", "V:4:4:6", "N:4:4:6")
	if got := routePerms(t, c, "T", "V"); !slices.Equal(got, []int32{6, 6}) {
		t.Fatalf("perms after a new version of every topic %v, want [6 6]", got)
	}
}

// With needWaitForService, RocketMQ's name server answers route requests
// SYSTEM_ERROR "name server not ready" for waitSecondsForService after its
// start, while brokers register; both keys are read per request, so an
// update changes them at once.
func TestRoutesWaitForServiceAfterTheStart(t *testing.T) {
	clock := newFakeClock()
	ns, logs := startNameServer(t, func(c *Config) {
		c.Now = clock.Now
		set := configs.DefaultNamesrv()
		set.NeedWaitForService = true
		c.Settings = &set
	})
	c := dial(t, ns)
	registerOver(t, c, "broker-a", "10.0.0.1:10911", 1, "T:4:4:6", "U:4:4:6")
	route := func() *remoting.Command {
		return invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil)
	}
	if resp := route(); resp.Code != remoting.SystemError || resp.Remark != "name server not ready" {
		t.Fatalf("route during the wait: %v", resp)
	}
	if !strings.Contains(logs.String(), "name server not ready") {
		t.Error("the refused route request was not logged")
	}
	clock.Advance(45*time.Second - time.Millisecond)
	if resp := route(); resp.Code != remoting.SystemError {
		t.Fatalf("route 1 ms before the wait's end: %v", resp)
	}
	clock.Advance(time.Millisecond)
	if resp := route(); resp.Code != remoting.Success {
		t.Fatalf("route after waitSecondsForService: %v", resp)
	}

	for _, u := range []struct {
		body string
		want int32
	}{{"waitSecondsForService=100", remoting.SystemError}, {"needWaitForService=false", remoting.Success}} {
		if resp := invoke(t, c, remoting.UpdateNamesrvConfig, nil, []byte(u.body)); resp.Code != remoting.Success {
			t.Fatalf("update %s: %v", u.body, resp)
		}
		if resp := route(); resp.Code != u.want {
			t.Fatalf("route after %s: %v, want code %d", u.body, resp, u.want)
		}
	}
}

// With supportActingMaster, RocketMQ's name server names, in a route, the
// slave of the smallest id of a group acting without its master as broker
// id 0 where the topic's queues there are read-only (as the master's
// leaving made them), but not in the routes of the group's own
// SYNC_BROKER_MEMBER topic, nor for a group without enableActingMaster.
func TestSupportActingMasterNamesTheActingMasterInRoutes(t *testing.T) {
	ns, _ := startNameServer(t, nil)
	c := dial(t, ns)
	const sync = "rmq_sys_SYNC_BROKER_MEMBER_broker-a"
	for _, b := range []struct {
		name, addr, id, acting string
	}{
		{"broker-a", "10.0.0.1:10911", "0", "true"}, {"broker-a", "10.0.0.2:10911", "1", "true"}, {"broker-a", "10.0.0.3:10911", "2", "true"},
		{"broker-b", "10.0.1.1:10911", "0", "false"}, {"broker-b", "10.0.1.2:10911", "1", "false"},
	} {
		body, _ := topicsBody(1, "T:4:4:6", sync+":1:1:6").Encode(false)
		ext := map[string]string{"brokerName": b.name, "brokerAddr": b.addr, "clusterName": "C", "haServerAddr": "",
			"brokerId": b.id, "enableActingMaster": b.acting}
		if resp := invoke(t, c, remoting.RegisterBroker, ext, body); resp.Code != remoting.Success {
			t.Fatalf("register %s/%s: %v", b.name, b.id, resp)
		}
	}
	for _, m := range []struct{ name, addr string }{{"broker-a", "10.0.0.1:10911"}, {"broker-b", "10.0.1.1:10911"}} {
		if resp := invoke(t, c, remoting.UnregisterBroker, map[string]string{"brokerName": m.name, "brokerAddr": m.addr,
			"clusterName": "C", "brokerId": "0"}, nil); resp.Code != remoting.Success {
			t.Fatalf("unregister %s's master: %v", m.name, resp)
		}
	}
	addrs := func(topic string) map[string]map[int64]string {
		t.Helper()
		resp := invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
		var route TopicRouteData
		if resp.Code != remoting.Success || json.Unmarshal(resp.Body, &route) != nil {
			t.Fatalf("route of %s: %v %s", topic, resp, resp.Body)
		}
		out := map[string]map[int64]string{}
		for _, bd := range route.BrokerDatas {
			out[bd.BrokerName] = bd.BrokerAddrs
		}
		return out
	}
	asRegistered := map[string]map[int64]string{
		"broker-a": {1: "10.0.0.2:10911", 2: "10.0.0.3:10911"},
		"broker-b": {1: "10.0.1.2:10911"},
	}
	if got := addrs("T"); !reflect.DeepEqual(got, asRegistered) {
		t.Fatalf("route of T with supportActingMaster off: %v", got)
	}
	if resp := invoke(t, c, remoting.UpdateNamesrvConfig, nil, []byte("supportActingMaster=true")); resp.Code != remoting.Success {
		t.Fatalf("update: %v", resp)
	}
	want := map[string]map[int64]string{
		"broker-a": {0: "10.0.0.2:10911", 2: "10.0.0.3:10911"},
		"broker-b": {1: "10.0.1.2:10911"},
	}
	if got := addrs("T"); !reflect.DeepEqual(got, want) {
		t.Fatalf("route of T with supportActingMaster on: %v, want %v", got, want)
	}
	if got := addrs(sync); !reflect.DeepEqual(got, asRegistered) {
		t.Fatalf("route of %s: %v, want the group as registered", sync, got)
	}
	// The routes name an acting master; the group's members stay as they
	// registered.
	if got := ns.Registry().MemberGroup("broker-a"); !reflect.DeepEqual(got, asRegistered["broker-a"]) {
		t.Fatalf("member group after a route request: %v", got)
	}
}
