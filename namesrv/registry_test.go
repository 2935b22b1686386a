package namesrv

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// newFakeClock is a settable clock for expiry tests.
func newFakeClock() *testutil.Clock { return testutil.NewClock(time.Unix(1_700_000_000, 0)) }

// topics builds a body with the given topics, each "name:read:write:perm".
func topicsBody(counter int64, specs ...string) *RegisterBrokerBody {
	b := &RegisterBrokerBody{DataVersion: DataVersion{Counter: counter, Timestamp: counter}, TopicConfigTable: map[string]TopicConfig{}}
	for _, s := range specs {
		p := strings.Split(s, ":")
		n := func(i int) int32 { v, _ := strconv.Atoi(p[i]); return int32(v) }
		b.TopicConfigTable[p[0]] = TopicConfig{TopicName: p[0], ReadQueueNums: n(1), WriteQueueNums: n(2), Perm: n(3), TopicFilterType: SingleTag}
	}
	return b
}

func register(t *testing.T, r *Registry, cluster, name, addr string, id int64, body *RegisterBrokerBody) RegisterResult {
	t.Helper()
	res, err := r.Register(RegisterRequest{ClusterName: cluster, BrokerName: name, BrokerAddr: addr, BrokerID: id,
		HAServerAddr: addr + "-ha", Body: body})
	if err != nil {
		t.Fatalf("register %s/%d: %v", name, id, err)
	}
	return res
}

func routeJSON(t *testing.T, r *Registry, topic string) string {
	t.Helper()
	route, ok := r.Route(topic)
	if !ok {
		t.Fatalf("no route for %s", topic)
	}
	return string(route.AppendJSON(nil))
}

func TestRouteGolden(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	register(t, r, "DefaultCluster", "broker-a", "10.0.0.1:10911", 0, topicsBody(1, "T:4:4:6", "TBW102:8:8:7"))
	// Spec 7.3's example, in the standard form (quoted broker-id key).
	want := `{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],` +
		`"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}`
	if got := routeJSON(t, r, "T"); got != want {
		t.Fatalf("route\n got %s\nwant %s", got, want)
	}

	// Two groups, a slave, a zone, an order conf: sorted and complete.
	register(t, r, "DefaultCluster", "broker-b", "10.0.0.2:10911", 0, topicsBody(1, "T:2:2:6", "Y:1:1:6"))
	register(t, r, "DefaultCluster", "broker-b", "10.0.0.3:10911", 1, topicsBody(1, "T:2:2:6", "X:1:1:6"))
	route, _ := r.Route("T")
	route.OrderTopicConf = "broker-a:4;broker-b:2"
	route.BrokerDatas[0].ZoneName = "z1"
	want = `{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false,"zoneName":"z1"},` +
		`{"brokerAddrs":{"0":"10.0.0.2:10911","1":"10.0.0.3:10911"},"brokerName":"broker-b","cluster":"DefaultCluster","enableActingMaster":false}],` +
		`"filterServerTable":{},"orderTopicConf":"broker-a:4;broker-b:2","queueDatas":[` +
		`{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4},` +
		`{"brokerName":"broker-b","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}`
	if got := string(route.AppendJSON(nil)); got != want {
		t.Fatalf("route\n got %s\nwant %s", got, want)
	}
	if _, ok := r.Route("X"); ok {
		t.Fatal("a slave's topics must not create queue data")
	}
	if !json.Valid([]byte(want)) {
		t.Fatal("not JSON")
	}
}

// goClientBrokerAddrs parses brokerAddrs the way the Go client does (spec
// 7.4): cut the braces, split on ',', split at the first ':', drop quotes.
func goClientBrokerAddrs(t *testing.T, routeJSON string) map[int64]string {
	t.Helper()
	i := strings.Index(routeJSON, `"brokerAddrs":`)
	rest := routeJSON[i+len(`"brokerAddrs":`):]
	raw := rest[:strings.Index(rest, "}")+1]
	out := map[int64]string{}
	for _, piece := range strings.Split(raw[1:len(raw)-1], ",") {
		k, v, _ := strings.Cut(piece, ":")
		id, err := strconv.ParseInt(strings.ReplaceAll(k, `"`, ""), 10, 64)
		if err != nil {
			t.Fatalf("Go client would fail on key %q", k)
		}
		out[id] = strings.ReplaceAll(v, `"`, "")
	}
	return out
}

func TestRouteParsesLikeGoClient(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	register(t, r, "C", "b", "10.0.0.1:10911", 0, topicsBody(1, "T:1:1:6", "U:1:1:6"))
	register(t, r, "C", "b", "10.0.0.2:10911", 1, topicsBody(1, "T:1:1:6", "U:1:1:6"))
	addrs := goClientBrokerAddrs(t, routeJSON(t, r, "T"))
	if addrs[0] != "10.0.0.1:10911" || addrs[1] != "10.0.0.2:10911" || len(addrs) != 2 {
		t.Fatalf("Go client would read %v", addrs)
	}
}

func TestReRegisterUpdates(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	register(t, r, "C", "a", "1.1.1.1:1", 0, topicsBody(1, "T:4:4:6", "U:4:4:6"))

	// Same data version (a later chunk of a split registration): changed
	// configs and new topics still take effect.
	register(t, r, "C", "a", "1.1.1.1:1", 0, topicsBody(1, "T:8:8:6", "U:4:4:6", "V:1:1:6"))
	if q := mustRoute(t, r, "T").QueueDatas[0]; q.ReadQueueNums != 8 {
		t.Fatalf("changed config under an unchanged version ignored: %+v", q)
	}
	if _, ok := r.Route("V"); !ok {
		t.Fatal("new topic under an unchanged version not added")
	}

	// New data version: queue data rebuilt.
	register(t, r, "C", "a", "1.1.1.1:1", 0, topicsBody(2, "T:8:8:4", "U:4:4:6", "V:1:1:6"))
	if q := mustRoute(t, r, "T").QueueDatas[0]; q.ReadQueueNums != 8 || q.Perm != 4 {
		t.Fatalf("new version not applied: %+v", q)
	}
	// Topics absent from a registration stay (deleteTopicWithBrokerRegistration off).
	register(t, r, "C", "a", "1.1.1.1:1", 0, topicsBody(3, "T:8:8:4", "V:1:1:6"))
	if _, ok := r.Route("U"); !ok {
		t.Fatal("topic dropped without deleteTopicWithBrokerRegistration")
	}

	r2 := NewRegistry(RegistryOptions{DeleteTopicWithBrokerRegistration: true})
	register(t, r2, "C", "a", "1.1.1.1:1", 0, topicsBody(1, "T:4:4:6", "U:4:4:6"))
	register(t, r2, "C", "a", "1.1.1.1:1", 0, topicsBody(2, "T:4:4:6", "V:4:4:6"))
	if _, ok := r2.Route("U"); ok {
		t.Fatal("topic kept with deleteTopicWithBrokerRegistration")
	}
}

func TestSplitRegistration(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	register(t, r, "C", "a", "1.1.1.1:1", 0, topicsBody(1, "A:1:1:6", "B:1:1:6", "C:1:1:6", "D:1:1:6"))
	// Version 2 arrives in two chunks: A and B first, then C and D, with
	// C's queue count changed.
	register(t, r, "C", "a", "1.1.1.1:1", 0, topicsBody(2, "A:2:2:6", "B:1:1:6"))
	register(t, r, "C", "a", "1.1.1.1:1", 0, topicsBody(2, "C:3:3:6", "D:1:1:6"))
	for topic, want := range map[string]int32{"A": 2, "B": 1, "C": 3, "D": 1} {
		if q := mustRoute(t, r, topic).QueueDatas[0]; q.ReadQueueNums != want {
			t.Errorf("%s: %d queues, want %d", topic, q.ReadQueueNums, want)
		}
	}
}

func mustRoute(t *testing.T, r *Registry, topic string) *TopicRouteData {
	t.Helper()
	route, ok := r.Route(topic)
	if !ok {
		t.Fatalf("no route for %s", topic)
	}
	return route
}

func TestSlaveResultAndPromotion(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	res := register(t, r, "C", "a", "1.1.1.2:1", 1, topicsBody(1, "T:1:1:6", "U:1:1:6"))
	if res != (RegisterResult{}) {
		t.Fatalf("slave without master got %+v", res)
	}
	register(t, r, "C", "a", "1.1.1.1:1", 0, topicsBody(1, "T:1:1:6", "U:1:1:6"))
	res = register(t, r, "C", "a", "1.1.1.2:1", 1, topicsBody(1, "T:1:1:6", "U:1:1:6"))
	if res.MasterAddr != "1.1.1.1:1" || res.HAServerAddr != "1.1.1.1:1-ha" {
		t.Fatalf("slave result %+v", res)
	}
	// The master goes; the slave comes back as master on the same address.
	r.Unregister("C", "1.1.1.1:1", "a")
	register(t, r, "C", "a", "1.1.1.2:1", 0, topicsBody(2, "T:1:1:6", "U:1:1:6"))
	addrs := mustRoute(t, r, "T").BrokerDatas[0].BrokerAddrs
	if len(addrs) != 1 || addrs[0] != "1.1.1.2:1" {
		t.Fatalf("after promotion %v", addrs)
	}
}

func TestActingMasterPrimeSlave(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	on := true
	_, err := r.Register(RegisterRequest{ClusterName: "C", BrokerName: "a", BrokerAddr: "1.1.1.2:1", BrokerID: 1,
		EnableActingMaster: &on, Body: topicsBody(1, "T:2:2:6", "U:2:2:6")})
	if err != nil {
		t.Fatal(err)
	}
	route := mustRoute(t, r, "T")
	if q := route.QueueDatas[0]; q.Perm != 4 {
		t.Fatalf("prime slave keeps write perm: %+v", q)
	}
	if !route.BrokerDatas[0].EnableActingMaster {
		t.Fatal("enableActingMaster not recorded")
	}
}

func TestRegisterRefusesFirstSingleTopic(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	_, err := r.Register(RegisterRequest{ClusterName: "C", BrokerName: "a", BrokerAddr: "1.1.1.1:1", Body: topicsBody(1, "T:1:1:6")})
	if !errors.Is(err, ErrRegisterRefused) {
		t.Fatalf("err = %v", err)
	}
	if ci := r.ClusterInfo(); len(ci.BrokerAddrTable) != 0 || len(ci.ClusterAddrTable) != 0 {
		t.Fatalf("refused registration left state: %+v", ci)
	}
	register(t, r, "C", "a", "1.1.1.1:1", 0, topicsBody(1, "T:1:1:6", "U:1:1:6"))
	register(t, r, "C", "a", "1.1.1.1:1", 0, topicsBody(2, "W:1:1:6")) // known broker: single-topic update accepted
	if _, ok := r.Route("W"); !ok {
		t.Fatal("single-topic update of a known broker lost")
	}
}

func TestUnregisterAndTopicCleanup(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	register(t, r, "C1", "a", "1.1.1.1:1", 0, topicsBody(1, "T:1:1:6", "A:1:1:6"))
	register(t, r, "C1", "a", "1.1.1.2:1", 1, topicsBody(1, "T:1:1:6", "A:1:1:6"))
	register(t, r, "C2", "b", "2.2.2.2:1", 0, topicsBody(1, "T:1:1:6", "B:1:1:6"))

	r.Unregister("C1", "1.1.1.1:1", "a") // slave remains: group and topics stay
	if route := mustRoute(t, r, "A"); route.BrokerDatas[0].BrokerAddrs[1] != "1.1.1.2:1" || len(route.BrokerDatas[0].BrokerAddrs) != 1 {
		t.Fatalf("route after master left: %+v", route.BrokerDatas)
	}
	r.Unregister("C1", "1.1.1.2:1", "a")
	if _, ok := r.Route("A"); ok {
		t.Fatal("topic of a removed group survives")
	}
	if route := mustRoute(t, r, "T"); len(route.QueueDatas) != 1 || route.QueueDatas[0].BrokerName != "b" {
		t.Fatalf("shared topic: %+v", route.QueueDatas)
	}
	ci := r.ClusterInfo()
	if _, ok := ci.ClusterAddrTable["C1"]; ok || len(ci.BrokerAddrTable) != 1 {
		t.Fatalf("cluster info %+v", ci)
	}
	if r.BrokerCount() != 1 {
		t.Fatalf("%d brokers", r.BrokerCount())
	}
}

func TestExpiryWithInjectedClock(t *testing.T) {
	clock := newFakeClock()
	r := NewRegistry(RegistryOptions{Now: clock.Now})
	register(t, r, "C", "a", "1.1.1.1:1", 0, topicsBody(1, "T:1:1:6", "U:1:1:6"))
	_, err := r.Register(RegisterRequest{ClusterName: "C", BrokerName: "b", BrokerAddr: "2.2.2.2:1",
		Timeout: 10 * time.Second, Body: topicsBody(1, "T:1:1:6", "V:1:1:6"), ConnID: 7})
	if err != nil {
		t.Fatal(err)
	}

	clock.Advance(10 * time.Second)
	if gone := r.Expire(); len(gone) != 0 {
		t.Fatalf("expired at exactly the timeout: %+v", gone)
	}
	clock.Advance(time.Millisecond)
	gone := r.Expire()
	if len(gone) != 1 || gone[0].BrokerAddr != "2.2.2.2:1" || gone[0].ConnID != 7 || gone[0].BrokerName != "b" {
		t.Fatalf("expired %+v", gone)
	}
	if _, ok := r.Route("V"); ok {
		t.Fatal("expired broker's topic survives")
	}

	// A heartbeat renews; 120 s of silence expires.
	clock.Advance(100 * time.Second)
	if !r.Heartbeat("C", "1.1.1.1:1") || r.Heartbeat("C", "9.9.9.9:1") {
		t.Fatal("heartbeat result")
	}
	clock.Advance(DefaultBrokerTimeout)
	if gone := r.Expire(); len(gone) != 0 {
		t.Fatalf("renewed broker expired: %+v", gone)
	}
	clock.Advance(time.Millisecond)
	if gone := r.Expire(); len(gone) != 1 {
		t.Fatalf("silent broker not expired: %+v", gone)
	}
	if topics := r.Topics(); len(topics) != 0 {
		t.Fatalf("topics left: %v", topics)
	}
}

func TestConnClosedUnregisters(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	for i, addr := range []string{"1.1.1.1:1", "1.1.1.2:1"} {
		_, err := r.Register(RegisterRequest{ClusterName: "C", BrokerName: "a" + strconv.Itoa(i), BrokerAddr: addr,
			Body: topicsBody(1, "T:1:1:6", "U:1:1:6"), ConnID: uint64(10 + i)})
		if err != nil {
			t.Fatal(err)
		}
	}
	if gone := r.ConnClosed(10); len(gone) != 1 || gone[0].BrokerAddr != "1.1.1.1:1" {
		t.Fatalf("gone %v", gone)
	}
	if gone := r.ConnClosed(0); gone != nil {
		t.Fatal("conn 0 unregistered brokers")
	}
	if route := mustRoute(t, r, "T"); len(route.QueueDatas) != 1 {
		t.Fatalf("route %+v", route)
	}
}

func TestListsAndDelete(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	register(t, r, "C1", "a", "1.1.1.1:1", 0, topicsBody(1, "T:1:1:6", "A:1:1:6"))
	register(t, r, "C2", "b", "2.2.2.2:1", 0, topicsBody(1, "T:1:1:6", "B:1:1:6"))
	if got := r.Topics(); !slices.Equal(got, []string{"A", "B", "T"}) {
		t.Fatalf("topics %v", got)
	}
	if got := r.TopicsByCluster("C1"); !slices.Equal(got, []string{"A", "T"}) {
		t.Fatalf("C1 topics %v", got)
	}
	if got := r.TopicsByCluster("nope"); len(got) != 0 {
		t.Fatalf("unknown cluster %v", got)
	}
	ci := string(r.ClusterInfo().AppendJSON(nil))
	want := `{"brokerAddrTable":{"a":{"brokerAddrs":{"0":"1.1.1.1:1"},"brokerName":"a","cluster":"C1","enableActingMaster":false},` +
		`"b":{"brokerAddrs":{"0":"2.2.2.2:1"},"brokerName":"b","cluster":"C2","enableActingMaster":false}},` +
		`"clusterAddrTable":{"C1":["a"],"C2":["b"]}}`
	if ci != want {
		t.Fatalf("cluster info\n got %s\nwant %s", ci, want)
	}
	if got := string(appendTopicListJSON(nil, r.Topics(), "")); got != `{"topicList":["A","B","T"]}` {
		t.Fatalf("topic list %s", got)
	}

	r.DeleteTopic("T", "C1")
	if route := mustRoute(t, r, "T"); len(route.QueueDatas) != 1 || route.QueueDatas[0].BrokerName != "b" {
		t.Fatalf("after cluster delete %+v", route.QueueDatas)
	}
	r.DeleteTopic("T", "")
	if _, ok := r.Route("T"); ok {
		t.Fatal("topic survives delete")
	}
	if got := r.TopicsByCluster("C2"); !slices.Equal(got, []string{"B"}) {
		t.Fatalf("index not updated: %v", got)
	}
}

func TestRegistry10kTopicsSeveralBrokers(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	table := manyTopics(10_000)
	for i := range 4 {
		body := &RegisterBrokerBody{DataVersion: DataVersion{Counter: 1}, TopicConfigTable: table}
		register(t, r, "C", "broker-"+strconv.Itoa(i), "10.0.0."+strconv.Itoa(i)+":10911", 0, body)
	}
	route := mustRoute(t, r, "topic-01234")
	if len(route.QueueDatas) != 4 || len(route.BrokerDatas) != 4 {
		t.Fatalf("route %+v", route)
	}
	if n := len(r.Topics()); n != 10_000 {
		t.Fatalf("%d topics", n)
	}
	r.Unregister("C", "10.0.0.0:10911", "broker-0")
	if route := mustRoute(t, r, "topic-09999"); len(route.QueueDatas) != 3 {
		t.Fatalf("after unregister %+v", route.QueueDatas)
	}
}

func perms(t *testing.T, r *Registry, topics ...string) []int32 {
	t.Helper()
	var out []int32
	for _, topic := range topics {
		route, ok := r.Route(topic)
		if !ok || len(route.QueueDatas) != 1 {
			t.Fatalf("route of %s: %+v", topic, route)
		}
		out = append(out, route.QueueDatas[0].Perm)
	}
	return out
}

// A wiped write permission outlives the broker's periodic re-registrations
// and ends with AddWritePerm or a registration with a new data version;
// other groups are untouched.
func TestWritePermWipeLastsUntilTheBrokerChanges(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	register(t, r, "c", "broker-a", "a:1", 0, topicsBody(1, "T:4:4:6", "U:4:4:7", "R:1:1:4"))
	register(t, r, "c", "broker-a", "a:2", 1, topicsBody(1, "T:4:4:6", "U:4:4:7", "R:1:1:4"))
	register(t, r, "c", "broker-b", "b:1", 0, topicsBody(1, "V:4:4:6", "W:4:4:6"))
	if n := r.WipeWritePerm("broker-a"); n != 3 {
		t.Fatalf("wiped %d topics, want 3", n)
	}
	if got := perms(t, r, "T", "U", "R", "V"); !slices.Equal(got, []int32{4, 5, 4, 6}) {
		t.Fatalf("perms after wipe %v", got)
	}
	// The periodic re-registration (same data version) keeps the wipe. A
	// topic the group had no queue data of comes with the broker's own
	// permission, as RocketMQ builds the queue data of a topic new to the
	// group from the broker's topic config: the wipe changed the queue
	// data there was, it is not a setting of the group.
	register(t, r, "c", "broker-a", "a:1", 0, topicsBody(1, "T:4:4:6", "U:4:4:7", "R:1:1:4", "N:1:1:6"))
	if got := perms(t, r, "T", "U", "N"); !slices.Equal(got, []int32{4, 5, 6}) {
		t.Fatalf("perms after a same-version registration %v, want [4 5 6]", got)
	}
	if n := r.AddWritePerm("broker-a"); n != 4 {
		t.Fatalf("added write to %d topics, want 4", n)
	}
	if got := perms(t, r, "T", "U", "R", "N"); !slices.Equal(got, []int32{6, 6, 6, 6}) {
		t.Fatalf("perms after add %v", got)
	}
	register(t, r, "c", "broker-a", "a:1", 0, topicsBody(1, "T:4:4:6", "U:4:4:7", "R:1:1:4", "N:1:1:6"))
	if got := perms(t, r, "R"); got[0] != 6 {
		t.Fatalf("a same-version registration undid the add: %v", got)
	}
	// A new data version (a topic change on the broker) rules again.
	r.WipeWritePerm("broker-a")
	register(t, r, "c", "broker-a", "a:1", 0, topicsBody(2, "T:4:4:6", "U:4:4:7", "R:1:1:4", "N:1:1:6"))
	if got := perms(t, r, "T", "U", "R", "N"); !slices.Equal(got, []int32{6, 7, 4, 6}) {
		t.Fatalf("perms after a new data version %v", got)
	}
	if n := r.WipeWritePerm("broker-x"); n != 0 {
		t.Fatalf("wiped %d topics of an unknown broker", n)
	}
	// A master that registers anew while its slave kept the group (a
	// restart: same data version) is routed as it registers, as
	// RocketMQ rebuilds a broker's first registration.
	register(t, r, "c", "broker-a", "a:2", 1, topicsBody(2, "T:4:4:6", "U:4:4:7", "R:1:1:4", "N:1:1:6"))
	r.WipeWritePerm("broker-a")
	r.Unregister("c", "a:1", "broker-a")
	register(t, r, "c", "broker-a", "a:1", 0, topicsBody(2, "T:4:4:6", "U:4:4:7", "R:1:1:4", "N:1:1:6"))
	if got := perms(t, r, "T", "U", "R", "N"); !slices.Equal(got, []int32{6, 7, 4, 6}) {
		t.Fatalf("perms after the master registered anew %v, want its own", got)
	}
	// The wipe goes with the group: a broker-a that registers anew after
	// leaving is routed as it registers.
	r.WipeWritePerm("broker-a")
	r.Unregister("c", "a:1", "broker-a")
	r.Unregister("c", "a:2", "broker-a")
	register(t, r, "c", "broker-a", "a:1", 0, topicsBody(2, "T:4:4:6", "U:4:4:6"))
	if got := perms(t, r, "T"); got[0] != 6 {
		t.Fatalf("a wipe survived the group: %v", got)
	}
}

// RocketMQ keeps a write-permission change while the broker that
// registers brings the data version it last registered from its own
// address; a master restarted on another address (a new IP or port,
// before its old address expired) registers from an address the name
// server holds no data version for, and its topics are routed as it
// registers them, even with its persisted data version unchanged.
func TestWritePermChangeEndsWhenTheMasterRegistersFromANewAddress(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	register(t, r, "c", "broker-a", "10.0.0.1:10911", 0, topicsBody(7, "T:4:4:6", "R:1:1:4"))
	if n := r.AddWritePerm("broker-a"); n != 2 {
		t.Fatalf("added write to %d topics, want 2", n)
	}
	if got := perms(t, r, "T", "R"); !slices.Equal(got, []int32{6, 6}) {
		t.Fatalf("perms after add %v", got)
	}
	// Restarted on 10.0.0.9, its old address not yet expired.
	register(t, r, "c", "broker-a", "10.0.0.9:10911", 0, topicsBody(7, "T:4:4:6", "R:1:1:4"))
	if got := perms(t, r, "T", "R"); !slices.Equal(got, []int32{6, 4}) {
		t.Fatalf("perms after the master registered from a new address %v, want its own [6 4] (R is read-only)", got)
	}

	// Likewise for a wipe, and the periodic registration from the new
	// address keeps a wipe made after it.
	r.WipeWritePerm("broker-a")
	register(t, r, "c", "broker-a", "10.0.0.9:10911", 0, topicsBody(7, "T:4:4:6", "R:1:1:4"))
	if got := perms(t, r, "T"); got[0] != 4 {
		t.Fatalf("a same-address, same-version registration undid the wipe: %v", got)
	}
	register(t, r, "c", "broker-a", "10.0.0.5:10911", 0, topicsBody(7, "T:4:4:6", "R:1:1:4"))
	if got := perms(t, r, "T"); got[0] != 6 {
		t.Fatalf("perm after the master registered from a new address %v, want its own 6", got)
	}
}

// RocketMQ applies each write-permission change to the queue data the
// one before left, and the queue data stays so while the broker registers
// its unchanged data version: an add then a wipe leaves read only, also
// where the topic's own permission has INHERIT (the template TBW102).
func TestWritePermChangesCompose(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	register(t, r, "c", "broker-a", "a:1", 0, topicsBody(1, "T:4:4:6", "TBW102:8:8:7"))
	r.AddWritePerm("broker-a")
	r.WipeWritePerm("broker-a")
	if got := perms(t, r, "T", "TBW102"); !slices.Equal(got, []int32{4, 4}) {
		t.Fatalf("perms after add then wipe %v", got)
	}
	register(t, r, "c", "broker-a", "a:1", 0, topicsBody(1, "T:4:4:6", "TBW102:8:8:7"))
	if got := perms(t, r, "T", "TBW102"); !slices.Equal(got, []int32{4, 4}) {
		t.Fatalf("perms after add, wipe and a same-version registration %v, want [4 4]", got)
	}
}

// In acting-master mode RocketMQ wipes the write permission of the queue
// data a group's leaving master left, an operator's add included; the
// prime slave's registrations with its unchanged data version keep it so.
func TestAnActingMasterGroupsWipeComposesWithAnAdd(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	acting := true
	for _, b := range []struct {
		addr string
		id   int64
	}{{"1.1.1.1:1", 0}, {"1.1.1.2:1", 1}} {
		if _, err := r.Register(RegisterRequest{ClusterName: "c", BrokerName: "a", BrokerAddr: b.addr, BrokerID: b.id,
			EnableActingMaster: &acting, Body: topicsBody(1, "T:2:2:6", "U:2:2:6")}); err != nil {
			t.Fatal(err)
		}
	}
	r.AddWritePerm("a")
	r.Unregister("c", "1.1.1.1:1", "a")
	if got := perms(t, r, "T", "U"); !slices.Equal(got, []int32{4, 4}) {
		t.Fatalf("perms after the master left %v", got)
	}
	if _, err := r.Register(RegisterRequest{ClusterName: "c", BrokerName: "a", BrokerAddr: "1.1.1.2:1", BrokerID: 1,
		EnableActingMaster: &acting, Body: topicsBody(1, "T:2:2:6", "U:2:2:6")}); err != nil {
		t.Fatal(err)
	}
	if got := perms(t, r, "T", "U"); !slices.Equal(got, []int32{4, 4}) {
		t.Fatalf("perms after the prime slave's registration %v, want read only", got)
	}
}

func TestSystemAndUnitTopicLists(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	if topics, addr := r.SystemTopics(); len(topics) != 0 || addr != "" {
		t.Fatalf("empty registry: %v %q", topics, addr)
	}
	register(t, r, "c2", "broker-b", "b:2", 1, topicsBody(1))
	body := topicsBody(1, "Plain:1:1:6", "Unit:1:1:6", "Sub:1:1:6", "Both:1:1:6")
	for name, flag := range map[string]int32{"Unit": 1, "Sub": 2, "Both": 3} {
		tc := body.TopicConfigTable[name]
		tc.TopicSysFlag = flag
		body.TopicConfigTable[name] = tc
	}
	register(t, r, "c1", "broker-a", "a:1", 0, body)
	topics, addr := r.SystemTopics()
	if !slices.Equal(topics, []string{"c1", "broker-a", "c2", "broker-b"}) || addr != "a:1" {
		t.Fatalf("system topics %v, address %q", topics, addr)
	}
	for _, tc := range []struct {
		keep func(int32) bool
		want []string
	}{
		{func(f int32) bool { return f&1 != 0 }, []string{"Both", "Unit"}},
		{func(f int32) bool { return f&2 != 0 }, []string{"Both", "Sub"}},
		{func(f int32) bool { return f&1 == 0 && f&2 != 0 }, []string{"Sub"}},
	} {
		if got := r.TopicsWithSysFlag(tc.keep); !slices.Equal(got, tc.want) {
			t.Errorf("topics %v, want %v", got, tc.want)
		}
	}
}

// When the master of a group in slave-acting-master mode unregisters (or
// expires, or its connection closes) and slaves are left, the group's
// queues lose their write permission at once, as RocketMQ wipes it:
// producers stop sending to a group without a master. A group not in that
// mode keeps its permission; the master's return restores it.
func TestAMasterLeavingAnActingMasterGroupWipesItsWritePermission(t *testing.T) {
	for _, acting := range []bool{true, false} {
		r := NewRegistry(RegistryOptions{})
		register := func(addr string, id int64) {
			t.Helper()
			if _, err := r.Register(RegisterRequest{ClusterName: "C", BrokerName: "a", BrokerAddr: addr, BrokerID: id,
				EnableActingMaster: &acting, Body: topicsBody(1, "T:2:2:6", "U:2:2:6")}); err != nil {
				t.Fatal(err)
			}
		}
		perms := func() []int32 {
			var out []int32
			for _, topic := range []string{"T", "U"} {
				route, ok := r.Route(topic)
				if !ok || len(route.QueueDatas) != 1 {
					t.Fatalf("route of %s: %+v %v", topic, route, ok)
				}
				out = append(out, route.QueueDatas[0].Perm)
			}
			return out
		}
		register("1.1.1.1:1", 0)
		register("1.1.1.2:1", 1)
		r.Unregister("C", "1.1.1.1:1", "a")
		want := PermRead | PermWrite
		if acting {
			want = PermRead
		}
		if got := perms(); got[0] != want || got[1] != want {
			t.Fatalf("acting master %v: queue perms %v after the master left, want %d", acting, got, want)
		}
		register("1.1.1.1:1", 0)
		if got := perms(); got[0] != PermRead|PermWrite || got[1] != PermRead|PermWrite {
			t.Fatalf("acting master %v: queue perms %v after the master came back", acting, got)
		}
	}
}

// RocketMQ's system topic list is a set: a broker named as its cluster,
// or one that moved to another cluster (its name stays listed under the
// old one as well), is listed once.
func TestSystemTopicsListEachNameOnce(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	register(t, r, "c1", "c1", "a:1", 0, topicsBody(1))
	register(t, r, "c1", "broker-b", "b:1", 0, topicsBody(1))
	register(t, r, "c2", "broker-b", "b:1", 0, topicsBody(1))
	topics, addr := r.SystemTopics()
	if !slices.Equal(topics, []string{"c1", "broker-b", "c2"}) || addr != "b:1" {
		t.Fatalf("system topics %v, address %q", topics, addr)
	}
}

// A master and its slave, and another broker name, share connection 7;
// the slave stops renewing and expires. The name server closes the
// connection, as RocketMQ closes an expired broker's channel, but the
// brokers that still renew stay registered, as in RocketMQ; the next
// registration attaches a broker to its new connection again.
func TestAnExpiredBrokerLeavesTheOthersOnItsConnection(t *testing.T) {
	clock := newFakeClock()
	r := NewRegistry(RegistryOptions{Now: clock.Now})
	for _, b := range []struct {
		name, addr string
		id         int64
	}{{"a", "1.1.1.1:1", 0}, {"a", "1.1.1.2:1", 1}, {"b", "2.2.2.2:1", 0}} {
		if _, err := r.Register(RegisterRequest{ClusterName: "C", BrokerName: b.name, BrokerAddr: b.addr, BrokerID: b.id,
			Body: topicsBody(1, "T:1:1:6", "U:1:1:6"), ConnID: 7}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Minute)
	r.Heartbeat("C", "1.1.1.1:1")
	r.Heartbeat("C", "2.2.2.2:1")
	clock.Advance(DefaultBrokerTimeout - time.Minute + time.Millisecond)
	gone := r.Expire()
	if len(gone) != 1 || gone[0].BrokerAddr != "1.1.1.2:1" || gone[0].ConnID != 7 {
		t.Fatalf("expired %+v", gone)
	}
	if left := r.ConnClosed(7); len(left) != 0 {
		t.Fatalf("closing the expired broker's connection unregistered %v", left)
	}
	if n := r.BrokerCount(); n != 2 {
		t.Fatalf("%d brokers registered, want the master of a and b", n)
	}
	for _, topic := range []string{"T", "U"} {
		if route := mustRoute(t, r, topic); len(route.QueueDatas) != 2 {
			t.Fatalf("route of %s: %+v", topic, route.QueueDatas)
		}
	}
	// b registers again on a new connection, 8, whose close unregisters it.
	if _, err := r.Register(RegisterRequest{ClusterName: "C", BrokerName: "b", BrokerAddr: "2.2.2.2:1",
		Body: topicsBody(1, "T:1:1:6", "U:1:1:6"), ConnID: 8}); err != nil {
		t.Fatal(err)
	}
	if left := r.ConnClosed(8); len(left) != 1 || left[0].BrokerAddr != "2.2.2.2:1" {
		t.Fatalf("closing b's new connection unregistered %v", left)
	}
}

// With the master gone, a 5.x group's prime slave registering the data
// version it registered before leaves the queue data its master left, as
// RocketMQ does (a slave's topic configs may lag its master's), and adds
// only topics the group has no queue data of; from a new data version on
// its configs rule, the later chunks of a split registration included.
func TestAPrimeSlaveKeepsItsMastersQueueDataUntilItsDataVersionChanges(t *testing.T) {
	for _, acting := range []bool{false, true} {
		r := NewRegistry(RegistryOptions{})
		reg := func(addr string, id int64, body *RegisterBrokerBody) {
			t.Helper()
			if _, err := r.Register(RegisterRequest{ClusterName: "C", BrokerName: "a", BrokerAddr: addr, BrokerID: id,
				EnableActingMaster: &acting, Body: body}); err != nil {
				t.Fatal(err)
			}
		}
		queues := func(topic string) QueueData {
			t.Helper()
			return mustRoute(t, r, topic).QueueDatas[0]
		}
		wantPerm := PermRead | PermWrite
		if acting {
			wantPerm = PermRead
		}
		reg("1.1.1.1:1", 0, topicsBody(6, "T:8:8:6", "U:4:4:6"))
		reg("1.1.1.2:1", 1, topicsBody(5, "T:4:4:6", "U:4:4:6"))
		r.Unregister("C", "1.1.1.1:1", "a")
		reg("1.1.1.2:1", 1, topicsBody(5, "T:4:4:6", "U:2:2:6", "N:1:1:6"))
		if q := queues("T"); q.ReadQueueNums != 8 || q.WriteQueueNums != 8 || q.Perm != wantPerm {
			t.Fatalf("acting %v: T after the slave's same-version registration %+v, want the master's 8 queues", acting, q)
		}
		if q := queues("U"); q.ReadQueueNums != 4 {
			t.Fatalf("acting %v: U %+v, want the master's 4 queues", acting, q)
		}
		if q := queues("N"); q.ReadQueueNums != 1 || q.Perm != wantPerm {
			t.Fatalf("acting %v: topic new to the group %+v", acting, q)
		}
		// The slave's data version changes: its configs rule, also those
		// of the next chunk with that data version.
		reg("1.1.1.2:1", 1, topicsBody(7, "T:16:16:6", "U:4:4:6"))
		reg("1.1.1.2:1", 1, topicsBody(7, "U:2:2:6", "N:1:1:6"))
		if q := queues("T"); q.ReadQueueNums != 16 || q.Perm != wantPerm {
			t.Fatalf("acting %v: T after a new data version %+v", acting, q)
		}
		if q := queues("U"); q.ReadQueueNums != 2 {
			t.Fatalf("acting %v: U after a split registration's second chunk %+v", acting, q)
		}
	}
}

// staticBody is a registration carrying a static topic's mapping as a Java
// broker writes it (fastjson: bare integer keys).
func staticBody(counter int64, mapping string, specs ...string) *RegisterBrokerBody {
	b := topicsBody(counter, specs...)
	b.TopicQueueMappingInfo = map[string]json.RawMessage{"static-topic": json.RawMessage(mapping)}
	return b
}

// routeMappings reads the topicQueueMappingByBroker of topic's route JSON.
func routeMappings(t *testing.T, r *Registry, topic string) map[string]struct {
	CurrIDMap map[string]int32 `json:"currIdMap"`
	Epoch     int64            `json:"epoch"`
} {
	t.Helper()
	var route struct {
		TopicQueueMappingByBroker map[string]struct {
			CurrIDMap map[string]int32 `json:"currIdMap"`
			Epoch     int64            `json:"epoch"`
		} `json:"topicQueueMappingByBroker"`
	}
	if err := json.Unmarshal([]byte(routeJSON(t, r, topic)), &route); err != nil {
		t.Fatal(err)
	}
	return route.TopicQueueMappingByBroker
}

// RocketMQ's route of a static topic carries the mappings its brokers
// registered, by broker name (topicQueueMappingByBroker): a client finds
// the topic's logical queues only there.
func TestRouteOfAStaticTopicCarriesItsMappings(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	const mappingA = `{"bname":"broker-a","currIdMap":{0:0,1:1},"dirty":false,"epoch":1700000000000,"scope":"__global__","topic":"static-topic","totalQueues":4}`
	const mappingB = `{"bname":"broker-b","currIdMap":{3:1,2:0},"epoch":1700000000000,"topic":"static-topic","totalQueues":4}`
	// Both bodies go through the wire forms, as a Java broker sends them.
	for i, b := range []struct {
		name, addr, mapping string
		compressed          bool
	}{{"broker-a", "10.0.0.1:10911", mappingA, false}, {"broker-b", "10.0.0.2:10911", mappingB, true}} {
		data, err := staticBody(1, b.mapping, "static-topic:2:2:6", "T:1:1:6").Encode(b.compressed)
		if err != nil {
			t.Fatal(err)
		}
		body, err := DecodeRegisterBrokerBody(data, b.compressed, remoting.CurrentVersion)
		if err != nil {
			t.Fatalf("broker %d: %v", i, err)
		}
		register(t, r, "DefaultCluster", b.name, b.addr, 0, body)
	}
	want := `{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false},` +
		`{"brokerAddrs":{"0":"10.0.0.2:10911"},"brokerName":"broker-b","cluster":"DefaultCluster","enableActingMaster":false}],` +
		`"filterServerTable":{},"queueDatas":[` +
		`{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2},` +
		`{"brokerName":"broker-b","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}],` +
		`"topicQueueMappingByBroker":{` +
		`"broker-a":{"bname":"broker-a","currIdMap":{"0":0,"1":1},"dirty":false,"epoch":1700000000000,"scope":"__global__","topic":"static-topic","totalQueues":4},` +
		`"broker-b":{"bname":"broker-b","currIdMap":{"2":0,"3":1},"dirty":false,"epoch":1700000000000,"scope":"__global__","topic":"static-topic","totalQueues":4}}}`
	if got := routeJSON(t, r, "static-topic"); got != want {
		t.Fatalf("route\n got %s\nwant %s", got, want)
	}
	if got := routeJSON(t, r, "T"); strings.Contains(got, "topicQueueMappingByBroker") {
		t.Fatalf("route of a topic that is not static: %s", got)
	}

	// A master's new mapping (a queue moved) replaces its old one.
	const movedA = `{"bname":"broker-a","currIdMap":{0:0},"epoch":1700000000001,"topic":"static-topic","totalQueues":4}`
	register(t, r, "DefaultCluster", "broker-a", "10.0.0.1:10911", 0, staticBody(2, movedA, "static-topic:2:2:6", "T:1:1:6"))
	if m := routeMappings(t, r, "static-topic")["broker-a"]; len(m.CurrIDMap) != 1 || m.Epoch != 1700000000001 {
		t.Fatalf("broker-a's mapping after it moved a queue: %+v", m)
	}
	// The topic gone, its mappings go: created again without them, it is
	// no static topic. On purpose unlike RocketMQ, whose name server never
	// removes an entry of its topicQueueMappingInfoTable (neither
	// DELETE_TOPIC_IN_NAMESRV nor a broker's leaving does) and serves it
	// again in the route of a topic of that name, so a client would take
	// the new plain topic as static and send by stale mappings.
	r.DeleteTopic("static-topic", "")
	register(t, r, "DefaultCluster", "broker-c", "10.0.0.3:10911", 0, topicsBody(1, "static-topic:2:2:6", "T:1:1:6"))
	if m := routeMappings(t, r, "static-topic"); m != nil {
		t.Fatalf("mappings of a deleted topic: %+v", m)
	}
	// A mapping Java cannot read refuses the registration.
	_, err := r.Register(RegisterRequest{ClusterName: "DefaultCluster", BrokerName: "broker-a", BrokerAddr: "10.0.0.1:10911",
		Body: staticBody(3, `{"bname":"broker-a","epoch":"soon"}`, "T:1:1:6", "U:1:1:6")})
	if !errors.Is(err, ErrBadRegisterBody) {
		t.Fatalf("bad mapping: err %v", err)
	}
}

// Like its queue data, a prime slave's mapping replaces the one its master
// left only from a new data version of the slave on.
func TestAPrimeSlaveKeepsItsMastersMappingUntilItsDataVersionChanges(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	on := true
	reg := func(addr string, id int64, body *RegisterBrokerBody) {
		t.Helper()
		if _, err := r.Register(RegisterRequest{ClusterName: "C", BrokerName: "broker-a", BrokerAddr: addr, BrokerID: id,
			EnableActingMaster: &on, Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	epoch := func() int64 {
		t.Helper()
		return routeMappings(t, r, "static-topic")["broker-a"].Epoch
	}
	const m1 = `{"bname":"broker-a","currIdMap":{0:0},"epoch":1,"topic":"static-topic","totalQueues":2}`
	const m2 = `{"bname":"broker-a","currIdMap":{0:0,1:1},"epoch":2,"topic":"static-topic","totalQueues":2}`
	reg("1.1.1.1:1", 0, staticBody(2, m2, "static-topic:2:2:6", "T:1:1:6"))
	reg("1.1.1.2:1", 1, staticBody(1, m1, "static-topic:2:2:6", "T:1:1:6"))
	r.Unregister("C", "1.1.1.1:1", "broker-a")
	reg("1.1.1.2:1", 1, staticBody(1, m1, "static-topic:2:2:6", "T:1:1:6"))
	if e := epoch(); e != 2 {
		t.Fatalf("mapping epoch %d after the slave's same-version registration, want the master's 2", e)
	}
	reg("1.1.1.2:1", 1, staticBody(3, m1, "static-topic:2:2:6", "T:1:1:6"))
	if e := epoch(); e != 1 {
		t.Fatalf("mapping epoch %d after the slave's new data version, want its 1", e)
	}
}

// Queue data REGISTER_TOPIC_IN_NAMESRV stored stays through the group's
// registrations at the data version the name server holds, as RocketMQ
// rebuilds queue data only at a new one (registerBroker's
// isTopicConfigChanged), and goes at a new data version, a registration
// anew, or when the topic's queue data goes.
func TestRegisteredTopicStaysUntilANewDataVersion(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	register(t, r, "C", "broker-a", "10.0.0.1:10911", 0, topicsBody(1, "T:4:4:6", "U:4:4:6"))
	if err := r.RegisterTopic("T", []QueueData{{BrokerName: "broker-a", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}}); err != nil {
		t.Fatal(err)
	}
	want2 := `"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]`
	register(t, r, "C", "broker-a", "10.0.0.1:10911", 0, topicsBody(1, "T:4:4:6", "U:4:4:6"))
	if got := routeJSON(t, r, "T"); !strings.Contains(got, want2) {
		t.Fatalf("route after a registration at the same data version: %s, want the registered topic's %s", got, want2)
	}
	register(t, r, "C", "broker-a", "10.0.0.1:10911", 0, topicsBody(2, "T:4:4:6", "U:4:4:6"))
	want4 := `"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]`
	if got := routeJSON(t, r, "T"); !strings.Contains(got, want4) {
		t.Fatalf("route after a new data version: %s, want the broker's %s", got, want4)
	}
	// Rebuilt once: a later same-version registration rebuilds as
	// before (the entry is no longer the registered one).
	if err := r.RegisterTopic("U", []QueueData{{BrokerName: "broker-a", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}}); err != nil {
		t.Fatal(err)
	}
	register(t, r, "C", "broker-a", "10.0.0.2:10911", 0, topicsBody(2, "T:4:4:6", "U:4:4:6"))
	if got := routeJSON(t, r, "U"); !strings.Contains(got, want4) {
		t.Fatalf("route after a registration from a new address: %s, want the broker's %s", got, want4)
	}
	if len(r.pinned) != 0 {
		t.Fatalf("marks left: %v", r.pinned)
	}
	// The mark goes with the queue data.
	if err := r.RegisterTopic("T", []QueueData{{BrokerName: "broker-a", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}}); err != nil {
		t.Fatal(err)
	}
	r.DeleteTopic("T", "")
	register(t, r, "C", "broker-a", "10.0.0.2:10911", 0, topicsBody(2, "T:4:4:6", "U:4:4:6"))
	if got := routeJSON(t, r, "T"); !strings.Contains(got, want4) || len(r.pinned) != 0 {
		t.Fatalf("route of a deleted registered topic registered again: %s (marks %v), want the broker's %s", got, r.pinned, want4)
	}
}
