package namesrv

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/remoting"
)

// startFromFile starts a name server from a namesrv.properties holding
// content, as bin/namesrv -c does, and returns it with the file's path.
func startFromFile(t *testing.T, content string) (*Server, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "namesrv.properties")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := configs.LoadNamesrv(path, map[string]string{"kvConfigPath": "", "bindAddress": "127.0.0.1", "listenPort": "0"})
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := startNameServer(t, func(c *Config) {
		*c = ConfigFrom(loaded.Namesrv, path)
		c.Remoting.EventLoops = 1
	})
	return ns, path
}

func configLines(t *testing.T, c *remoting.Client) map[string]string {
	t.Helper()
	resp := invoke(t, c, remoting.GetNamesrvConfig, nil, nil)
	if resp.Code != remoting.Success {
		t.Fatalf("get config: %v", resp)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(resp.Body), "\n"), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("config line %q is not key=value", line)
		}
		out[k] = v
	}
	return out
}

func TestGetNamesrvConfigReportsTheConfigurationInForce(t *testing.T) {
	ns, _ := startFromFile(t, "scanNotActiveBrokerInterval=2000\nenableTopicList=false\nserverWorkerThreads=4\nproxyProtocolTrustedNetworks=127.0.0.1\n"+
		"serverChannelMaxIdleTimeSeconds=0\nserverSocketRcvBufSize=65536\n")
	got := configLines(t, dial(t, ns))
	port := ns.Addr().String()[strings.LastIndexByte(ns.Addr().String(), ':')+1:]
	for k, want := range map[string]string{
		"listenPort":                      port,
		"bindAddress":                     "127.0.0.1",
		"scanNotActiveBrokerInterval":     "2000",
		"enableTopicList":                 "false",
		"enableAllTopicList":              "true",
		"kvConfigPath":                    "",
		"proxyProtocolEnable":             "true",
		"proxyProtocolTrustedNetworks":    "127.0.0.1/32",
		"serverChannelMaxIdleTimeSeconds": "0",
		"serverSocketRcvBufSize":          "65536",
		"serverSocketSndBufSize":          "0",
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %q (present %v), want %q", k, v, ok, want)
		}
	}
	if len(got) != len(configs.NamesrvKeys()) {
		t.Errorf("%d keys reported, want every key (%d): %v", len(got), len(configs.NamesrvKeys()), got)
	}
}

func TestUpdateNamesrvConfig(t *testing.T) {
	ns, path := startFromFile(t, "# ours\nenableAllTopicList=true\nconfigBlackList=configBlackList;enableTopicList\n")
	c := dial(t, ns)
	update := func(body string) *remoting.Command {
		return invoke(t, c, remoting.UpdateNamesrvConfig, nil, []byte(body))
	}

	if resp := invoke(t, c, remoting.GetAllTopicListFromNameServer, nil, nil); resp.Code != remoting.Success {
		t.Fatalf("topic list before: %v", resp)
	}
	if resp := update("enableAllTopicList=false\norderMessageEnable=true\n"); resp.Code != remoting.Success || resp.Remark != "" {
		t.Fatalf("update: %v", resp)
	}
	if resp := invoke(t, c, remoting.GetAllTopicListFromNameServer, nil, nil); resp.Code != remoting.SystemError || resp.Remark != "disable" {
		t.Fatalf("topic list after it was disabled: %v", resp)
	}
	if got := configLines(t, c); got["enableAllTopicList"] != "false" || got["orderMessageEnable"] != "true" {
		t.Fatalf("config after update: %v", got)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "# ours\nenableAllTopicList=false\nconfigBlackList=configBlackList;enableTopicList\norderMessageEnable=true\n"; string(raw) != want {
		t.Fatalf("file after update:\n%s\nwant\n%s", raw, want)
	}
	// What the file now says is what a restart runs with.
	reloaded, err := configs.LoadNamesrv(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if reloaded.Namesrv.EnableAllTopicList || !reloaded.Namesrv.OrderMessageEnable {
		t.Fatalf("reloaded %+v", reloaded.Namesrv)
	}

	for _, tc := range []struct {
		body   string
		code   int32
		remark string
	}{
		{"kvConfigPath=/tmp/kv.json", remoting.NoPermission, "black list"},
		{"rocketmqHome=/opt", remoting.NoPermission, "black list"},
		{"enableTopicList=false", remoting.NoPermission, "black list"}, // named by configBlackList
		{"listenPort=1\nenableAllTopicList=true", remoting.SystemError, "listenPort cannot change while the name server runs"},
		{"noSuchKey=1", remoting.SystemError, "unknown key noSuchKey"},
		{"enableAllTopicList=perhaps", remoting.SystemError, "enableAllTopicList"},
		{"enableAllTopicList=\\uZZZZ", remoting.SystemError, "not a properties text"},
	} {
		resp := update(tc.body)
		if resp.Code != tc.code || !strings.Contains(resp.Remark, tc.remark) {
			t.Errorf("update %q: %v, want code %d with %q", tc.body, resp, tc.code, tc.remark)
		}
	}
	// A RocketMQ key without effect here is accepted, changes nothing and
	// is named in the answer.
	if resp := update("defaultThreadPoolNums=16"); resp.Code != remoting.Success ||
		!strings.Contains(resp.Remark, "defaultThreadPoolNums has no effect in rocketkv: ") {
		t.Fatalf("update with an inert key: %v", resp)
	}
	if raw2, _ := os.ReadFile(path); string(raw2) != string(raw) {
		t.Fatalf("an update with only an inert key rewrote the file:\n%s", raw2)
	}
	// None of the refused updates changed anything.
	if got := configLines(t, c); got["enableAllTopicList"] != "false" || got["enableTopicList"] != "true" || got["listenPort"] == "1" {
		t.Fatalf("config after refused updates: %v", got)
	}
	if raw2, _ := os.ReadFile(path); string(raw2) != string(raw) {
		t.Fatalf("a refused update rewrote the file:\n%s", raw2)
	}
}

// Without a configuration file an update is in force until the server
// stops; with a file it cannot write, it is in force and the caller is
// told it was not saved.
func TestUpdateNamesrvConfigWithoutAWritableFile(t *testing.T) {
	ns, logs := startNameServer(t, nil)
	c := dial(t, ns)
	if resp := invoke(t, c, remoting.UpdateNamesrvConfig, nil, []byte("enableTopicList=false")); resp.Code != remoting.Success {
		t.Fatalf("update: %v", resp)
	}
	if resp := invoke(t, c, remoting.GetTopicsByCluster, map[string]string{"cluster": "C"}, nil); resp.Remark != "disable" {
		t.Fatalf("topics by cluster after the update: %v", resp)
	}
	if !strings.Contains(logs.String(), "without a configuration file") {
		t.Errorf("the in-memory change was not logged: %s", logs)
	}

	ns2, path := startFromFile(t, "enableTopicList=true\n")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	c2 := dial(t, ns2)
	resp := invoke(t, c2, remoting.UpdateNamesrvConfig, nil, []byte("enableTopicList=false"))
	if resp.Code != remoting.Success || !strings.Contains(resp.Remark, "lasts until restart") {
		t.Fatalf("update with the file gone: %v", resp)
	}
	if got := configLines(t, c2); got["enableTopicList"] != "false" {
		t.Fatalf("not in force: %v", got)
	}
}

func TestRegisterTopicInNamesrv(t *testing.T) {
	ns, logs := startNameServer(t, nil)
	c := dial(t, ns)
	if _, err := ns.Registry().Register(RegisterRequest{ClusterName: "C", BrokerName: "broker-a", BrokerAddr: "10.0.0.1:10911",
		Body: topicsBody(1, "T:4:4:6", "TBW102:8:8:7")}); err != nil {
		t.Fatal(err)
	}
	// As a Java admin client writes it: fastjson with unquoted broker ids.
	body := `{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"C"}],` +
		`"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":3}]}`
	if resp := invoke(t, c, remoting.RegisterTopicInNamesrv, map[string]string{"topic": "NEW"}, []byte(body)); resp.Code != remoting.Success {
		t.Fatalf("register topic: %v", resp)
	}
	route := invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "NEW"}, nil)
	if route.Code != remoting.Success || !strings.Contains(string(route.Body),
		`"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":3}]`) {
		t.Fatalf("route of the registered topic: %v %s", route, route.Body)
	}

	// A group that has not registered: answered SUCCESS, as RocketMQ
	// answers, and logged; on a topic the name server knows, the entries
	// before it are stored, on a new one nothing is.
	unknown := `{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"writeQueueNums":8},` +
		`{"brokerName":"broker-z","perm":6,"readQueueNums":8,"writeQueueNums":8}]}`
	resp := invoke(t, c, remoting.RegisterTopicInNamesrv, map[string]string{"topic": "NEW"}, []byte(unknown))
	if resp.Code != remoting.Success {
		t.Fatalf("register on an unknown broker: %v, want SUCCESS", resp)
	}
	if !strings.Contains(logs.String(), "broker-z") {
		t.Error("the unknown broker was not logged")
	}
	if again := invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "NEW"}, nil); !strings.Contains(string(again.Body),
		`"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]`) {
		t.Fatalf("route of a known topic after an entry before an unknown broker: %s", again.Body)
	}
	resp = invoke(t, c, remoting.RegisterTopicInNamesrv, map[string]string{"topic": "NEW2"}, []byte(unknown))
	if _, ok := ns.Registry().Route("NEW2"); resp.Code != remoting.Success || ok {
		t.Fatalf("register of a new topic naming an unknown broker: %v, route stored %v; want SUCCESS and no route", resp, ok)
	}

	// On a wiped broker the entry is taken as it comes, as RocketMQ
	// stores it (a Java broker with enableSingleTopicRegister registers a
	// topic created there so); the broker's other topics stay wiped.
	ns.Registry().WipeWritePerm("broker-a")
	if resp := invoke(t, c, remoting.RegisterTopicInNamesrv, map[string]string{"topic": "CREATED"},
		[]byte(`{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":1,"writeQueueNums":1}]}`)); resp.Code != remoting.Success {
		t.Fatalf("register on a wiped broker: %v", resp)
	}
	if r := invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "CREATED"}, nil); !strings.Contains(string(r.Body), `"perm":6`) {
		t.Fatalf("route of a topic registered on a wiped broker %s, want its own perm 6", r.Body)
	}
	if r := invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, nil); !strings.Contains(string(r.Body), `"perm":4`) {
		t.Fatalf("route of the wiped broker's other topic %s, want perm 4", r.Body)
	}

	for _, tc := range []struct {
		ext    map[string]string
		body   string
		remark string
	}{
		{nil, body, "topic"},
		{map[string]string{"topic": "X"}, `{"queueDatas":[`, "decode topic route data"},
		{map[string]string{"topic": "X"}, `{"queueDatas":[{"perm":6}]}`, "no brokerName"},
		{map[string]string{"topic": "X"}, `{"queueDatas":{"brokerName":"broker-a"}}`, "queueDatas"},
		{map[string]string{"topic": "X"}, `{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":-8,"writeQueueNums":4}]}`, "readQueueNums -8"},
		{map[string]string{"topic": "X"}, `{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"writeQueueNums":2000000000}]}`, "writeQueueNums 2000000000"},
		{map[string]string{"topic": "X"}, `{"queueDatas":[{"brokerName":"broker-a","perm":99,"readQueueNums":4,"writeQueueNums":4}]}`, "perm 99"},
	} {
		if resp := invoke(t, c, remoting.RegisterTopicInNamesrv, tc.ext, []byte(tc.body)); resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, tc.remark) {
			t.Errorf("register %v %q: %v, want an error naming %q", tc.ext, tc.body, resp, tc.remark)
		}
	}
	if _, ok := ns.Registry().Route("X"); ok {
		t.Fatal("a bad registration created a route")
	}
	// No queue data: nothing to do, as RocketMQ.
	if resp := invoke(t, c, remoting.RegisterTopicInNamesrv, map[string]string{"topic": "EMPTY"}, []byte(`{"queueDatas":[]}`)); resp.Code != remoting.Success {
		t.Fatalf("empty registration: %v", resp)
	}
}

func TestGetBrokerMemberGroup(t *testing.T) {
	ns, _ := startNameServer(t, nil)
	c := dial(t, ns)
	for id, addr := range map[int64]string{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"} {
		if _, err := ns.Registry().Register(RegisterRequest{ClusterName: "C", BrokerName: "broker-a", BrokerAddr: addr, BrokerID: id,
			Body: topicsBody(1, "T:4:4:6", "TBW102:8:8:7")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ broker, want string }{
		{"broker-a", `{"brokerMemberGroup":{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"C"}}`},
		{"broker-x", `{"brokerMemberGroup":{"brokerAddrs":{},"brokerName":"broker-x","cluster":"C"}}`},
	} {
		resp := invoke(t, c, remoting.GetBrokerMemberGroup, map[string]string{"clusterName": "C", "brokerName": tc.broker}, nil)
		if resp.Code != remoting.Success || string(resp.Body) != tc.want {
			t.Errorf("member group of %s: %v %s, want %s", tc.broker, resp, resp.Body, tc.want)
		}
	}
	if resp := invoke(t, c, remoting.GetBrokerMemberGroup, map[string]string{"clusterName": "C"}, nil); resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, "brokerName") {
		t.Fatalf("without brokerName: %v", resp)
	}
}

// The PROXY protocol keys reach the listener: a header from a peer the
// file does not trust closes the connection.
func TestNamesrvProxyProtocolSettings(t *testing.T) {
	for content, accepted := range map[string]bool{
		"":                            true,
		"proxyProtocolEnable=false\n": false,
		"proxyProtocolTrustedNetworks=10.0.0.0/8\n": false,
	} {
		ns, _ := startFromFile(t, content)
		conn, err := net.Dial("tcp", ns.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		// A version 1 header, then GET_NAMESRV_CONFIG.
		frame, err := remoting.Encode(remoting.NewRequest(remoting.GetNamesrvConfig, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(append([]byte("PROXY TCP4 192.0.2.1 192.0.2.2 1000 9876\r\n"), frame...)); err != nil {
			t.Fatal(err)
		}
		_, err = remoting.NewFrameReader(conn, 0).ReadFrame()
		_ = conn.Close()
		if accepted != (err == nil) {
			t.Errorf("%q: answer error %v, accepted=%v wanted", content, err, accepted)
		}
	}
}

// The body of UPDATE_NAMESRV_CONFIG is read as RocketMQ reads it
// (MixAll.string2Properties, that is java.util.Properties.load): lines
// continued over CRLF, a key continued on the next line, a backslash
// ending the body, escapes in keys and values, the last of a key given
// twice. The cases run in order on one name server, each moving the
// settings on from the one before; want is the settings after the case.
func TestUpdateNamesrvConfigBodyReadAsJavaProperties(t *testing.T) {
	ns, path := startFromFile(t, "# ours\n")
	c := dial(t, ns)
	for _, tc := range []struct {
		name   string
		body   string
		code   int32
		remark string // in the answer's remark
		want   map[string]string
	}{
		{"a value continued over CRLF", "enableTopicList=fal\\\r\n    se\r\norderMessageEnable=true\r\n", remoting.Success, "",
			map[string]string{"enableTopicList": "false", "orderMessageEnable": "true"}},
		{"a key continued on the next line", "enableTopic\\\r\n  List=true\n", remoting.Success, "",
			map[string]string{"enableTopicList": "true"}},
		{"a backslash ending the body", "orderMessageEnable=false\\", remoting.Success, "",
			map[string]string{"orderMessageEnable": "false"}},
		{"escapes in key and value", "enable\\u0041ll\\TopicList=f\\u0061lse\n", remoting.Success, "",
			map[string]string{"enableAllTopicList": "false"}},
		{"the last of a key given twice", "enableAllTopicList=false\nenableAllTopicList=true\n", remoting.Success, "",
			map[string]string{"enableAllTopicList": "true"}},
		{"an entry without a key", "=true\norderMessageEnable=true\n", remoting.SystemError, "an entry without a key",
			map[string]string{"orderMessageEnable": "false"}},
		{"an escaped ':' is part of the key", "orderMessageEnable\\:x=true\n", remoting.SystemError, "unknown key orderMessageEnable:x",
			map[string]string{"orderMessageEnable": "false"}},
		{"a malformed \\u escape", "orderMessageEnable=\\u00zz\n", remoting.SystemError, "not a properties text: line 1: key orderMessageEnable",
			map[string]string{"orderMessageEnable": "false"}},
	} {
		resp := invoke(t, c, remoting.UpdateNamesrvConfig, nil, []byte(tc.body))
		if resp.Code != tc.code || !strings.Contains(resp.Remark, tc.remark) {
			t.Errorf("%s: body %q: %d %q, want %d with %q", tc.name, tc.body, resp.Code, resp.Remark, tc.code, tc.remark)
		}
		got := configLines(t, c)
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: body %q: %s=%q after it, want %q", tc.name, tc.body, k, got[k], v)
			}
		}
	}
	// What was read is what was written back.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "# ours\nenableTopicList=true\norderMessageEnable=false\nenableAllTopicList=true\n"; string(raw) != want {
		t.Fatalf("file after the updates:\n%s\nwant\n%s", raw, want)
	}
}

// RocketMQ's RouteInfoManager reads deleteTopicWithBrokerRegistration at
// every registration, so mqadmin updateNamesrvConfig turns it on or off
// for the registrations that follow.
func TestUpdateDeleteTopicWithBrokerRegistrationTakesEffect(t *testing.T) {
	ns, path := startFromFile(t, "deleteTopicWithBrokerRegistration=false\n")
	c := dial(t, ns)
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	t.Cleanup(func() { _ = pool.Close() })
	reg := NewRegistrar(pool, ns.Addr().String(), zerolog.Nop())
	master := brokerInfo("broker-a", "10.0.0.1:10911", 0)
	registerTopics := func(counter int64, specs ...string) {
		t.Helper()
		if _, err := reg.Register(testCtx(t), master, topicsBody(counter, specs...)); err != nil {
			t.Fatal(err)
		}
	}
	routeCode := func(topic string) int32 {
		return invoke(t, c, remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil).Code
	}

	registerTopics(1, "T:4:4:6", "U:4:4:6", "V:4:4:6")
	registerTopics(2, "T:4:4:6", "V:4:4:6") // U deleted on the broker
	if code := routeCode("U"); code != remoting.Success {
		t.Fatalf("U's route with the setting off: code %d", code)
	}

	if resp := invoke(t, c, remoting.UpdateNamesrvConfig, nil, []byte("deleteTopicWithBrokerRegistration=true\n")); resp.Code != remoting.Success {
		t.Fatalf("update: %v", resp)
	}
	if got := configLines(t, c)["deleteTopicWithBrokerRegistration"]; got != "true" {
		t.Fatalf("config after the update says %q", got)
	}
	registerTopics(3, "T:4:4:6", "V:4:4:6")
	if code := routeCode("U"); code != remoting.TopicNotExist {
		t.Fatalf("U's route after the broker's registration with the setting on: code %d, want TOPIC_NOT_EXIST", code)
	}

	if resp := invoke(t, c, remoting.UpdateNamesrvConfig, nil, []byte("deleteTopicWithBrokerRegistration=false\n")); resp.Code != remoting.Success {
		t.Fatalf("update back: %v", resp)
	}
	registerTopics(4, "T:4:4:6")
	if code := routeCode("V"); code != remoting.Success {
		t.Fatalf("V's route with the setting off again: code %d", code)
	}
	if raw, err := os.ReadFile(path); err != nil || string(raw) != "deleteTopicWithBrokerRegistration=false\n" {
		t.Fatalf("file after the updates: %q %v", raw, err)
	}
}

// enableShutdownGracefully in a namesrv.properties makes the stopping name
// server answer GO_AWAY to clients newer than RocketMQ 5.3.1 for
// shutdownWaitTimeSeconds, while older ones are served, then stop.
func TestGracefulShutdownFromTheConfigFile(t *testing.T) {
	ns, _ := startFromFile(t, "enableShutdownGracefully=true\nshutdownWaitTimeSeconds=2\n")
	c := dial(t, ns)
	// A client of no pool fails a request answered GO_AWAY (ErrGoAway).
	topics := func(version int32) int32 {
		t.Helper()
		req := remoting.NewRequest(remoting.GetAllTopicListFromNameServer, nil, nil)
		req.Version = version
		resp, err := c.Invoke(testCtx(t), req)
		if errors.Is(err, remoting.ErrGoAway) {
			return remoting.GoAway
		}
		if err != nil {
			t.Fatalf("topic list as version %d: %v", version, err)
		}
		return resp.Code
	}
	stopped := make(chan error, 1)
	go func() { stopped <- ns.Shutdown(context.Background()) }()
	deadline := time.Now().Add(time.Second)
	for topics(481) != remoting.GoAway {
		if time.Now().After(deadline) {
			t.Fatal("a 5.3.4 client was never told to go away")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code := topics(317); code != remoting.Success {
		t.Errorf("going away, a Go client v2 got %d, want it served", code)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
