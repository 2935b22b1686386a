package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// queuesText renders assigned queues as "broker/queue" in order, for
// comparisons and failure messages.
func queuesText(as []queueAssignment) string {
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%s/%d", a.MessageQueue.BrokerName, a.MessageQueue.QueueID))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// queryAssignmentRaw sends QUERY_ASSIGNMENT and returns its assignments and
// whether the answer was null (the client keeps its queues).
func queryAssignmentRaw(t *testing.T, c *remoting.Client, body queryAssignmentBody) ([]queueAssignment, bool) {
	t.Helper()
	raw, _ := json.Marshal(body)
	r := call(t, c, remoting.QueryAssignment, nil, raw)
	var out struct {
		MessageQueueAssignments *[]queueAssignment `json:"messageQueueAssignments"`
	}
	if r.Code != remoting.Success || json.Unmarshal(r.Body, &out) != nil {
		t.Fatalf("query assignment %d %s", r.Code, r.Body)
	}
	if out.MessageQueueAssignments == nil {
		return nil, true
	}
	return *out.MessageQueueAssignments, false
}

// A Java client asks a random broker of the topic's route for its
// assignment. Every broker must divide the queues of the whole route among
// the group's clients the same way, or clients flip between the queues of
// one broker and another's and some queues go unconsumed.
func TestQueryAssignmentSpansEveryBrokerGroup(t *testing.T) {
	ns := startTestNameServer(t)
	addr := ns.Addr().String()
	a := startTestBroker(t, map[string]string{"namesrvAddr": addr, "brokerName": "broker-a", "loadBalancePollNameServerInterval": "100"})
	b := startTestBroker(t, map[string]string{"namesrvAddr": addr, "brokerName": "broker-b"})
	ca, cb := a.client(nil), b.client(nil)
	for _, c := range []*remoting.Client{ca, cb} {
		heartbeat(t, c, heartbeatBody("c1", "", "g", map[string]string{"T": "*"}))
		heartbeat(t, c, heartbeatBody("c2", "", "g", map[string]string{"T": "*"}))
	}

	// The topic on broker-a only, and its route fetched by broker-a.
	mustSend(t, ca, "T", 0, "x", "")
	waitForRoute(t, ns, "T", "broker-a", func(r *namesrv.TopicRouteData) bool { return len(r.QueueDatas) == 1 })
	query := func(c *remoting.Client, client string) string {
		as := queryAssignment(t, c, "T", "g", client)
		for _, x := range as {
			if x.Mode != modePull || x.MessageQueue.Topic != "T" {
				t.Fatalf("assignment %+v", x)
			}
		}
		return queuesText(as)
	}
	if got := query(ca, "c1"); got != "broker-a/0 broker-a/1" {
		t.Fatalf("c1 of one broker group: %s", got)
	}

	// Then on broker-b too: broker-a takes it in after its route expires,
	// and both brokers answer the same division of the eight queues.
	mustSend(t, cb, "T", 0, "x", "")
	waitForRoute(t, ns, "T", "two broker groups", func(r *namesrv.TopicRouteData) bool { return len(r.QueueDatas) == 2 })
	want := map[string]string{"c1": "broker-a/0 broker-a/1 broker-a/2 broker-a/3", "c2": "broker-b/0 broker-b/1 broker-b/2 broker-b/3"}
	deadline := time.Now().Add(10 * time.Second)
	for query(ca, "c1") != want["c1"] && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	for name, c := range map[string]*remoting.Client{"broker-a": ca, "broker-b": cb} {
		for client, w := range want {
			if got := query(c, client); got != w {
				t.Errorf("%s asked by %s: %s, want %s", client, name, got, w)
			}
		}
	}

	// In POP mode every client pops every broker group.
	set, _ := json.Marshal(requestModeBody{Topic: "T", ConsumerGroup: "g", Mode: "POP"})
	for _, c := range []*remoting.Client{ca, cb} {
		if r := call(t, c, remoting.SetMessageRequestMode, nil, set); r.Code != remoting.Success {
			t.Fatalf("set mode %d %s", r.Code, r.Remark)
		}
		if got := queuesText(queryAssignment(t, c, "T", "g", "c1")); got != "broker-a/-1 broker-b/-1" {
			t.Errorf("pop assignment: %s", got)
		}
	}

	// With the name server gone, broker-a keeps dividing the route it
	// last had; a topic it has never fetched gets a null assignment, so
	// that clients keep what they have rather than a part of it.
	if err := ns.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // past loadBalancePollNameServerInterval
	if got := queuesText(queryAssignment(t, ca, "T", "g", "c2")); got != "broker-a/-1 broker-b/-1" {
		t.Errorf("c2 with the name server down: %s", got)
	}
	mustSend(t, ca, "U", 0, "x", "")
	if as, null := queryAssignmentRaw(t, ca, queryAssignmentBody{Topic: "U", ConsumerGroup: "g", ClientID: "c1", StrategyName: "AVG", MessageModel: modelClustering}); !null {
		t.Errorf("a topic without a route: %+v, want a null assignment", as)
	}
}

// SET_MESSAGE_REQUEST_MODE wants the topic and the group to exist, as
// RocketMQ's does; the group is created as a subscription would create it.
func TestSetRequestModeChecksTopicAndGroup(t *testing.T) {
	b := startTestBroker(t, map[string]string{"autoCreateSubscriptionGroup": "false"})
	c := b.client(nil)
	mustSend(t, c, "M", 0, "x", "")
	set := func(topic, group string) int32 {
		body, _ := json.Marshal(requestModeBody{Topic: topic, ConsumerGroup: group, Mode: "POP"})
		return call(t, c, remoting.SetMessageRequestMode, nil, body).Code
	}
	if code := set("missing", "CID_RMQ_SYS_x"); code != remoting.TopicNotExist {
		t.Errorf("unknown topic: code %d", code)
	}
	if code := set("M", "nobody"); code != remoting.SubscriptionGroupNotExist {
		t.Errorf("unknown group: code %d", code)
	}
	if code := set("M", "CID_RMQ_SYS_x"); code != remoting.Success {
		t.Errorf("system group (created on use): code %d", code)
	}
}

// The allocation of QUERY_ASSIGNMENT, worked out by hand from RocketMQ's
// strategies and its allocate4Pop.
func TestAssignDividesQueues(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	for _, id := range []string{"c1", "c2", "c3"} {
		heartbeat(t, c, heartbeatBody(id, "", "g", map[string]string{"T": "*"}))
	}
	queues := func(n int) []assignedQueue {
		var all []assignedQueue
		for i := range n {
			all = append(all, assignedQueue{BrokerName: fmt.Sprintf("b%d", i/4), QueueID: int32(i % 4), Topic: "T"})
		}
		return all
	}
	text := func(qs []assignedQueue) string {
		var out []string
		for _, q := range qs {
			out = append(out, fmt.Sprintf("%s/%d", q.BrokerName, q.QueueID))
		}
		return strings.Join(out, " ")
	}
	pull := requestModeBody{Mode: modePull}
	pop := func(share int) requestModeBody { return requestModeBody{Mode: modePop, PopShareQueueNum: share} }
	tests := []struct {
		name     string
		body     queryAssignmentBody
		mode     requestModeBody
		queues   int
		found    bool
		want     string
		wantNull bool
	}{
		{"average, first clients take one more", queryAssignmentBody{ClientID: "c1", StrategyName: "AVG"}, pull, 8, true, "b0/0 b0/1 b0/2", false},
		{"average, last client", queryAssignmentBody{ClientID: "c3", StrategyName: "AVG"}, pull, 8, true, "b1/2 b1/3", false},
		{"no strategy named is average", queryAssignmentBody{ClientID: "c2"}, pull, 8, true, "b0/3 b1/0 b1/1", false},
		{"by circle", queryAssignmentBody{ClientID: "c2", StrategyName: "AVG_BY_CIRCLE"}, pull, 8, true, "b0/1 b1/0 b1/3", false},
		{"a client the broker has not heard of counts", queryAssignmentBody{ClientID: "c0", StrategyName: "AVG"}, pull, 8, true, "b0/0 b0/1", false},
		{"more clients than queues", queryAssignmentBody{ClientID: "c3", StrategyName: "AVG"}, pull, 2, true, "", false},
		{"unknown strategy", queryAssignmentBody{ClientID: "c1", StrategyName: "CONSISTENT_HASH"}, pull, 8, true, "", true},
		{"no client id", queryAssignmentBody{StrategyName: "AVG"}, pull, 8, true, "", true},
		{"unknown topic", queryAssignmentBody{ClientID: "c1", StrategyName: "AVG"}, pull, 0, false, "", true},
		{"no readable queue", queryAssignmentBody{ClientID: "c1", StrategyName: "AVG"}, pull, 0, true, "", true},
		{"broadcasting takes every queue", queryAssignmentBody{ClientID: "c1", StrategyName: "AVG", MessageModel: modelBroadcasting}, pull, 8, true, text(queues(8)), false},
		{"pop without sharing", queryAssignmentBody{ClientID: "c1", StrategyName: "AVG"}, pop(0), 8, true, "b0/-1 b1/-1", false},
		{"pop sharing with every other client", queryAssignmentBody{ClientID: "c1", StrategyName: "AVG"}, pop(2), 8, true, "b0/-1 b1/-1", false},
		{"pop sharing with the next client", queryAssignmentBody{ClientID: "c3", StrategyName: "AVG"}, pop(1), 8, true, "b1/2 b1/3 b0/0 b0/1 b0/2", false},
		{"pop with more clients than queues", queryAssignmentBody{ClientID: "c3", StrategyName: "AVG"}, pop(1), 2, true, "b0/0", false},
		{"pop without sharing, no readable queue", queryAssignmentBody{ClientID: "c1", StrategyName: "AVG"}, pop(0), 0, true, "", false},
		{"pop sharing, no readable queue", queryAssignmentBody{ClientID: "c1", StrategyName: "AVG"}, pop(1), 0, true, "", true},
		{"pop without sharing, unknown topic", queryAssignmentBody{ClientID: "c1", StrategyName: "AVG"}, pop(0), 0, false, "", true},
		{"pop without sharing, no client id", queryAssignmentBody{StrategyName: "AVG"}, pop(0), 8, true, "b0/-1 b1/-1", false},
		{"pop without sharing, unknown strategy", queryAssignmentBody{ClientID: "c1", StrategyName: "CONSISTENT_HASH"}, pop(0), 8, true, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.body.Topic, tt.body.ConsumerGroup = "T", "g"
			got, ok := b.assign(tt.body, tt.mode, queues(tt.queues), tt.found)
			if ok == tt.wantNull || text(got) != tt.want {
				t.Fatalf("assigned %q (null %v), want %q (null %v)", text(got), !ok, tt.want, tt.wantNull)
			}
		})
	}
}

// serverLoadBalancerEnable=false gives every client every queue.
func TestServerLoadBalancerOff(t *testing.T) {
	b := startTestBroker(t, map[string]string{"serverLoadBalancerEnable": "false"})
	c := b.client(nil)
	heartbeat(t, c, heartbeatBody("c1", "", "g", map[string]string{"LB": "*"}))
	heartbeat(t, c, heartbeatBody("c2", "", "g", map[string]string{"LB": "*"}))
	mustSend(t, c, "LB", 0, "x", "")
	if got := queuesText(queryAssignment(t, c, "LB", "g", "c2")); got != "broker-a/0 broker-a/1 broker-a/2 broker-a/3" {
		t.Fatalf("assignment with the balancer off: %s", got)
	}
}

// The route decides the other broker groups' queues only: this broker's
// come from its own topic config (a route's count for it is ignored), a
// group the route says is not readable has none, and a topic the name
// servers do not know yet (not registered) still gets this broker's.
func TestQueryAssignmentMergesTheRouteWithItsOwnQueues(t *testing.T) {
	route := `{"brokerDatas":[],"queueDatas":[` +
		`{"brokerName":"broker-z","perm":6,"readQueueNums":2,"writeQueueNums":2,"topicSysFlag":0},` +
		`{"brokerName":"broker-a","perm":6,"readQueueNums":99,"writeQueueNums":99,"topicSysFlag":0},` +
		`{"brokerName":"broker-w","perm":2,"readQueueNums":3,"writeQueueNums":3,"topicSysFlag":0}]}`
	addr := startRemotingServer(t, remoting.RespondFunc(func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		if req.Code != remoting.GetRouteInfoByTopic {
			return remoting.NewResponse(req, remoting.SystemError, "not a name server")
		}
		if req.ExtFields["topic"] != "Routed" {
			return remoting.NewResponse(req, remoting.TopicNotExist, "no route")
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = []byte(route)
		return resp
	}))
	b := startTestBroker(t, map[string]string{"namesrvAddr": addr})
	c := b.client(nil)
	mustSend(t, c, "Routed", 0, "x", "")
	mustSend(t, c, "Unregistered", 0, "x", "")
	if got := queuesText(queryAssignment(t, c, "Routed", "g", "c1")); got != "broker-a/0 broker-a/1 broker-a/2 broker-a/3 broker-z/0 broker-z/1" {
		t.Errorf("routed topic: %s", got)
	}
	if got := queuesText(queryAssignment(t, c, "Unregistered", "g", "c1")); got != "broker-a/0 broker-a/1 broker-a/2 broker-a/3" {
		t.Errorf("topic the name server does not know: %s", got)
	}
}

// A route QUERY_ASSIGNMENT cached is dropped once no query has refreshed
// it for unusedRoutes intervals: topics queried once (a session's, one
// deleted since) stayed cached for good.
func TestAssignmentRoutesNobodyAsksForAreDropped(t *testing.T) {
	ns := startTestNameServer(t)
	addr := ns.Addr().String()
	b := startTestBroker(t, map[string]string{"namesrvAddr": addr, "brokerName": "broker-a", "loadBalancePollNameServerInterval": "100"})
	b.assignRoutes.mu.Lock()
	b.assignRoutes.minUnused = 0 // ten intervals, not a minute
	b.assignRoutes.mu.Unlock()
	c := b.client(nil)
	topics := []string{"Once0", "Once1", "Once2", "Kept"}
	for _, topic := range topics {
		mustSend(t, c, topic, 0, "x", "")
		waitForRoute(t, ns, topic, "broker-a", func(r *namesrv.TopicRouteData) bool { return len(r.QueueDatas) == 1 })
	}
	cached := func() []string {
		b.assignRoutes.mu.Lock()
		defer b.assignRoutes.mu.Unlock()
		return slices.Sorted(maps.Keys(b.assignRoutes.cache))
	}
	for _, topic := range topics {
		queryAssignment(t, c, topic, "g", "c1")
	}
	if got := cached(); len(got) != len(topics) {
		t.Fatalf("cached routes %v, want %v", got, topics)
	}
	// Kept is asked for every interval, the others never again.
	deadline := time.Now().Add(unusedRoutes*100*time.Millisecond + time.Second)
	for time.Now().Before(deadline) {
		queryAssignment(t, c, "Kept", "g", "c1")
		time.Sleep(50 * time.Millisecond)
	}
	if got := cached(); !slices.Equal(got, []string{"Kept"}) {
		t.Errorf("cached routes %v after %d unused intervals, want [Kept]", got, unusedRoutes)
	}
}

// With loadBalancePollNameServerInterval=0 (every query fetches) the last
// route of every topic still serves while the name servers fail: the
// first version of the sweep above dropped every route but the one just
// fetched (found by a review).
func TestZeroRouteIntervalKeepsTheLastRoutes(t *testing.T) {
	var down atomic.Bool
	route := `{"brokerDatas":[],"queueDatas":[{"brokerName":"broker-z","perm":6,"readQueueNums":2,"writeQueueNums":2,"topicSysFlag":0}]}`
	addr := startRemotingServer(t, remoting.RespondFunc(func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		if req.Code != remoting.GetRouteInfoByTopic || down.Load() {
			return remoting.NewResponse(req, remoting.SystemError, "down")
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = []byte(route)
		return resp
	}))
	b := startTestBroker(t, map[string]string{"namesrvAddr": addr, "loadBalancePollNameServerInterval": "0"})
	c := b.client(nil)
	const want = "broker-a/0 broker-a/1 broker-a/2 broker-a/3 broker-z/0 broker-z/1"
	for _, topic := range []string{"RA", "RB"} {
		mustSend(t, c, topic, 0, "x", "")
		if got := queuesText(queryAssignment(t, c, topic, "g", "c1")); got != want {
			t.Fatalf("%s: %s", topic, got)
		}
	}
	down.Store(true)
	for _, topic := range []string{"RA", "RB"} {
		if got := queuesText(queryAssignment(t, c, topic, "g", "c1")); got != want {
			t.Errorf("%s with the name server down: %q, want the last route %q", topic, got, want)
		}
	}
}

// A topic with no readable queue gives a POP client that pops every queue
// an empty assignment, which drops the queues it had, where a missing
// topic gives a null one (RocketMQ's allocate4Pop of an empty route).
func TestQueryAssignmentOfPopWithoutReadableQueues(t *testing.T) {
	b := startTestBroker(t, map[string]string{"defaultMessageRequestMode": "POP"})
	c := b.client(nil)
	heartbeat(t, c, heartbeatBody("c1", "", "g", map[string]string{"NR": "*"}))
	createTopic(t, c, "NR", 0, 4)
	body := queryAssignmentBody{Topic: "NR", ConsumerGroup: "g", ClientID: "c1", StrategyName: "AVG", MessageModel: modelClustering}
	if as, null := queryAssignmentRaw(t, c, body); null || len(as) != 0 {
		t.Fatalf("POP assignment of a topic without readable queues: %+v (null %v), want an empty one", as, null)
	}
	body.Topic = "Missing"
	if as, null := queryAssignmentRaw(t, c, body); !null {
		t.Fatalf("POP assignment of a missing topic: %+v, want a null one", as)
	}
}
