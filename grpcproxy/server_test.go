package grpcproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rocketkv/rocketkv/broker"
	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/internal/clustertest"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// testCluster is an in-process name server and broker with a proxy in
// front of them, a gRPC client of the proxy and a Remoting client pool
// for looking at the broker directly.
type testCluster struct {
	proxy      *Server
	rpc        rmqpb.MessagingServiceClient
	pool       *remoting.ClientPool
	nsAddr     string
	brokerAddr string
	brokerName string
	broker     *broker.Broker
}

// startTestCluster starts a name server, a broker registered with it and
// a proxy whose configuration is the default changed for fast tests and
// then by mutate; everything stops when the test ends.
func startTestCluster(t testing.TB, mutate func(*Config)) *testCluster {
	t.Helper()
	return startTestClusterWith(t, nil, mutate)
}

// startTestClusterWith is startTestCluster with broker settings added.
func startTestClusterWith(t testing.TB, brokerSettings map[string]string, mutate func(*Config)) *testCluster {
	t.Helper()
	ctx := context.Background()
	nsAddr := clustertest.StartNamesrv(t)
	b, bcfg := clustertest.StartBroker(t, nsAddr, brokerSettings)

	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.NamesrvAddrs = []string{nsAddr}
	cfg.RouteTTL = 500 * time.Millisecond
	cfg.GroupPolicyTTL = 500 * time.Millisecond
	cfg.RequestTimeout = 3 * time.Second
	cfg.MinLongPolling = 500 * time.Millisecond
	cfg.MaxLongPolling = 5 * time.Second
	cfg.MinInvisible = time.Second
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatalf("start proxy: %v", err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Shutdown(sctx); err != nil {
			t.Errorf("proxy shutdown: %v", err)
		}
	})

	conn, err := grpc.NewClient(p.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial proxy: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	t.Cleanup(func() { _ = pool.Close() })
	return &testCluster{proxy: p, rpc: rmqpb.NewMessagingServiceClient(conn), pool: pool,
		nsAddr: nsAddr, brokerAddr: b.Addr(), brokerName: bcfg.BrokerName, broker: b}
}

// invoke sends one Remoting request to addr and returns the answer,
// failing the test when none comes.
func (c *testCluster) invoke(t testing.TB, addr string, code int32, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.pool.Invoke(ctx, addr, remoting.NewRequest(code, ext, body))
	if err != nil {
		t.Fatalf("request %d to %s: %v", code, addr, err)
	}
	return resp
}

// createTopic creates a topic of queues read and write queues on the
// broker (attributes as UPDATE_AND_CREATE_TOPIC takes them, e.g.
// "+message.type=FIFO") and waits until the name server routes it.
func (c *testCluster) createTopic(t testing.TB, topic string, queues int, attributes string) {
	t.Helper()
	n := strconv.Itoa(queues)
	ext := map[string]string{
		"topic": topic, "defaultTopic": "TBW102", "readQueueNums": n, "writeQueueNums": n,
		"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
	}
	if attributes != "" {
		ext["attributes"] = attributes
	}
	if resp := c.invoke(t, c.brokerAddr, remoting.UpdateAndCreateTopic, ext, nil); resp.Code != remoting.Success {
		t.Fatalf("create topic %s: code %d %s", topic, resp.Code, resp.Remark)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := c.invoke(t, c.nsAddr, remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
		if resp.Code == remoting.Success {
			var r namesrv.TopicRouteData
			if err := json.Unmarshal(resp.Body, &r); err != nil {
				t.Fatalf("route of %s: %v", topic, err)
			}
			if len(r.QueueDatas) == 1 && r.QueueDatas[0].WriteQueueNums == int32(queues) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the name server does not route %s with %d queues: code %d %s", topic, queues, resp.Code, resp.Remark)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// createGroup creates or updates a subscription group on the broker.
func (c *testCluster) createGroup(t *testing.T, gc meta.SubscriptionGroupConfig) {
	t.Helper()
	body, err := json.Marshal(gc)
	if err != nil {
		t.Fatalf("group %s: %v", gc.GroupName, err)
	}
	if resp := c.invoke(t, c.brokerAddr, remoting.UpdateAndCreateSubscriptionGroup, nil, body); resp.Code != remoting.Success {
		t.Fatalf("create group %s: code %d %s", gc.GroupName, resp.Code, resp.Remark)
	}
}

// maxOffsets returns the broker's max offset (message count) of each of
// the topic's first queues queues.
func (c *testCluster) maxOffsets(t *testing.T, topic string, queues int) []int64 {
	t.Helper()
	out := make([]int64, queues)
	for q := range queues {
		resp := c.invoke(t, c.brokerAddr, remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": strconv.Itoa(q)}, nil)
		if resp.Code != remoting.Success {
			t.Fatalf("max offset of %s queue %d: code %d %s", topic, q, resp.Code, resp.Remark)
		}
		v, err := strconv.ParseInt(resp.ExtFields["offset"], 10, 64)
		if err != nil {
			t.Fatalf("max offset of %s queue %d: %q: %v", topic, q, resp.ExtFields["offset"], err)
		}
		out[q] = v
	}
	return out
}

// waitMaxOffsets waits until the per-queue max offsets of topic are want:
// a stored message reaches its ConsumeQueue asynchronously.
func (c *testCluster) waitMaxOffsets(t *testing.T, topic string, want []int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := c.maxOffsets(t, topic, len(want))
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("max offsets of %s are %v, want %v", topic, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// callCtx returns the context of one call made as clientID (no client id
// metadata when it is empty), ending after d.
func callCtx(t *testing.T, clientID string, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	if clientID == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", clientID, "x-mq-language", "GOLANG", "x-mq-client-version", "5.0.0")
}

// msgSeq numbers the message ids of the tests.
var msgSeq atomic.Int64

// newMessage returns a message of topic with the given body, tag TagA,
// two keys, a unique message id and one user property.
func newMessage(topic, body string) *rmqpb.Message {
	return &rmqpb.Message{
		Topic:          &rmqpb.Resource{Name: topic},
		UserProperties: map[string]string{"body": body},
		SystemProperties: &rmqpb.SystemProperties{
			Tag: proto.String("TagA"), Keys: []string{"key-" + body, "k2"},
			MessageId:   fmt.Sprintf("01TEST%010d", msgSeq.Add(1)),
			MessageType: rmqpb.MessageType_NORMAL,
		},
		Body: []byte(body),
	}
}

// send sends one message in its own request as clientID and returns its
// result entry, failing the test unless it was stored.
func (c *testCluster) send(t *testing.T, clientID string, m *rmqpb.Message) *rmqpb.SendResultEntry {
	t.Helper()
	resp, err := c.rpc.SendMessage(callCtx(t, clientID, 10*time.Second), &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{m}})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	if resp.GetStatus().GetCode() != rmqpb.Code_OK || len(resp.GetEntries()) != 1 {
		t.Fatalf("SendMessage answered %v with %d entries, want OK with 1", resp.GetStatus(), len(resp.GetEntries()))
	}
	e := resp.GetEntries()[0]
	if e.GetStatus().GetCode() != rmqpb.Code_OK || e.GetMessageId() != m.GetSystemProperties().GetMessageId() || e.GetOffset() < 0 {
		t.Fatalf("send entry %v, want OK for message %s with an offset", e, m.GetSystemProperties().GetMessageId())
	}
	return e
}

// receiveRequest returns a receive of topic for group with the given
// invisible time (none when zero) and long polling time.
func receiveRequest(group, topic string, invisible, poll time.Duration) *rmqpb.ReceiveMessageRequest {
	req := &rmqpb.ReceiveMessageRequest{
		Group:              &rmqpb.Resource{Name: group},
		MessageQueue:       &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: topic}, Id: -1},
		FilterExpression:   &rmqpb.FilterExpression{Type: rmqpb.FilterType_TAG, Expression: "*"},
		BatchSize:          32,
		LongPollingTimeout: durationpb.New(poll),
	}
	if invisible > 0 {
		req.InvisibleDuration = durationpb.New(invisible)
	}
	return req
}

// receiveOnce makes one ReceiveMessage call within callTimeout and
// returns its status and messages, failing the test unless the stream
// is a status first, then only messages, then a delivery timestamp last.
func (c *testCluster) receiveOnce(t *testing.T, clientID string, req *rmqpb.ReceiveMessageRequest, callTimeout time.Duration) (*rmqpb.Status, []*rmqpb.Message) {
	t.Helper()
	stream, err := c.rpc.ReceiveMessage(callCtx(t, clientID, callTimeout), req)
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	var (
		st        *rmqpb.Status
		msgs      []*rmqpb.Message
		delivered bool
	)
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("ReceiveMessage stream: %v", err)
		}
		switch {
		case delivered:
			t.Fatalf("ReceiveMessage sent %v after the delivery timestamp", r)
		case r.GetStatus() != nil:
			if st != nil {
				t.Fatalf("ReceiveMessage sent a second status %v after %v", r.GetStatus(), st)
			}
			st = r.GetStatus()
		case r.GetMessage() != nil:
			if st == nil {
				t.Fatalf("ReceiveMessage sent a message before its status")
			}
			msgs = append(msgs, r.GetMessage())
		case r.GetDeliveryTimestamp() != nil:
			if st == nil {
				t.Fatalf("ReceiveMessage sent the delivery timestamp before its status")
			}
			delivered = true
		default:
			t.Fatalf("ReceiveMessage sent an empty response")
		}
	}
	if st == nil || !delivered {
		t.Fatalf("ReceiveMessage ended with status %v and delivery timestamp %v, want both", st, delivered)
	}
	if st.GetCode() == rmqpb.Code_OK && len(msgs) == 0 || st.GetCode() != rmqpb.Code_OK && len(msgs) > 0 {
		t.Fatalf("ReceiveMessage answered %v with %d messages", st, len(msgs))
	}
	return st, msgs
}

// receiveN receives with req until n messages came, failing the test when
// more come, a receive fails or they do not come within 20 s.
func (c *testCluster) receiveN(t *testing.T, clientID string, req *rmqpb.ReceiveMessageRequest, n int) []*rmqpb.Message {
	t.Helper()
	var got []*rmqpb.Message
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < n {
		if time.Now().After(deadline) {
			t.Fatalf("received %d messages in 20 s, want %d", len(got), n)
		}
		st, msgs := c.receiveOnce(t, clientID, req, 10*time.Second)
		if st.GetCode() != rmqpb.Code_OK && st.GetCode() != rmqpb.Code_MESSAGE_NOT_FOUND {
			t.Fatalf("ReceiveMessage answered %v", st)
		}
		got = append(got, msgs...)
	}
	if len(got) > n {
		t.Fatalf("received %d messages, want %d", len(got), n)
	}
	return got
}

// expectNothing receives with req again and again for d, failing the
// test if any message comes or a receive answers other than
// MESSAGE_NOT_FOUND.
func (c *testCluster) expectNothing(t *testing.T, clientID string, req *rmqpb.ReceiveMessageRequest, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); {
		st, msgs := c.receiveOnce(t, clientID, req, 10*time.Second)
		if len(msgs) > 0 || st.GetCode() != rmqpb.Code_MESSAGE_NOT_FOUND {
			ids := make([]string, len(msgs))
			for i, m := range msgs {
				ids[i] = fmt.Sprintf("%s (attempt %d)", m.GetSystemProperties().GetMessageId(), m.GetSystemProperties().GetDeliveryAttempt())
			}
			t.Fatalf("ReceiveMessage answered %v with messages %v, want MESSAGE_NOT_FOUND", st, ids)
		}
	}
}

// ack acknowledges one message by its handle and returns the status.
func (c *testCluster) ack(t *testing.T, clientID, group, topic, msgID, handle string) *rmqpb.Status {
	t.Helper()
	resp, err := c.rpc.AckMessage(callCtx(t, clientID, 10*time.Second), &rmqpb.AckMessageRequest{
		Group: &rmqpb.Resource{Name: group}, Topic: &rmqpb.Resource{Name: topic},
		Entries: []*rmqpb.AckMessageEntry{{MessageId: msgID, ReceiptHandle: handle}},
	})
	if err != nil {
		t.Fatalf("AckMessage: %v", err)
	}
	if len(resp.GetEntries()) != 1 || resp.GetEntries()[0].GetStatus().GetCode() != resp.GetStatus().GetCode() {
		t.Fatalf("AckMessage of one entry answered %v with entries %v", resp.GetStatus(), resp.GetEntries())
	}
	return resp.GetStatus()
}

// proxyEndpoints returns the endpoints a client reaching the proxy at its
// listen address names.
func (c *testCluster) proxyEndpoints(t *testing.T) *rmqpb.Endpoints {
	t.Helper()
	host, port, err := net.SplitHostPort(c.proxy.Addr().String())
	if err != nil {
		t.Fatalf("proxy address %s: %v", c.proxy.Addr(), err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("proxy port %s: %v", port, err)
	}
	return &rmqpb.Endpoints{Scheme: rmqpb.AddressScheme_IPv4, Addresses: []*rmqpb.Address{{Host: host, Port: int32(p)}}}
}

// TestQueryRoute checks QueryRoute against an in-process cluster: a
// topic's queues all READ_WRITE, numbered from 0, served by the broker
// group at the endpoints the client used, accepting the topic's message
// type; and the status of unknown and illegal topics.
func TestQueryRoute(t *testing.T) {
	c := startTestCluster(t, nil)
	c.createTopic(t, "RouteNormal", 4, "")
	c.createTopic(t, "RouteFifo", 2, "+message.type=FIFO")
	c.createTopic(t, "RouteDelay", 1, "+message.type=DELAY")
	domain := &rmqpb.Endpoints{Scheme: rmqpb.AddressScheme_DOMAIN_NAME, Addresses: []*rmqpb.Address{{Host: "mq.example.com", Port: 8081}}}
	tests := []struct {
		name      string
		topic     string
		endpoints *rmqpb.Endpoints // the request's; nil for none
		want      rmqpb.Code
		queues    int
		types     []rmqpb.MessageType
	}{
		{"normal topic at the proxy's address", "RouteNormal", c.proxyEndpoints(t), rmqpb.Code_OK, 4, []rmqpb.MessageType{rmqpb.MessageType_NORMAL}},
		{"the hosts the client named are answered back, with the proxy's port", "RouteNormal", domain, rmqpb.Code_OK, 4, []rmqpb.MessageType{rmqpb.MessageType_NORMAL}},
		{"no endpoints named: the address the client reached", "RouteNormal", nil, rmqpb.Code_OK, 4, []rmqpb.MessageType{rmqpb.MessageType_NORMAL}},
		{"FIFO topic", "RouteFifo", c.proxyEndpoints(t), rmqpb.Code_OK, 2, []rmqpb.MessageType{rmqpb.MessageType_FIFO}},
		{"DELAY topic", "RouteDelay", c.proxyEndpoints(t), rmqpb.Code_OK, 1, []rmqpb.MessageType{rmqpb.MessageType_DELAY}},
		{"unknown topic", "RouteMissing", c.proxyEndpoints(t), rmqpb.Code_TOPIC_NOT_FOUND, 0, nil},
		{"illegal characters", "bad topic!", c.proxyEndpoints(t), rmqpb.Code_ILLEGAL_TOPIC, 0, nil},
		{"empty name", "", c.proxyEndpoints(t), rmqpb.Code_ILLEGAL_TOPIC, 0, nil},
		{"longer than 127 bytes", strings.Repeat("t", 128), c.proxyEndpoints(t), rmqpb.Code_ILLEGAL_TOPIC, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.rpc.QueryRoute(callCtx(t, "route-client", 10*time.Second), &rmqpb.QueryRouteRequest{
				Topic: &rmqpb.Resource{Name: tc.topic}, Endpoints: tc.endpoints,
			})
			if err != nil {
				t.Fatalf("QueryRoute: %v", err)
			}
			if resp.GetStatus().GetCode() != tc.want {
				t.Fatalf("QueryRoute(%q) answered %v, want %v", tc.topic, resp.GetStatus(), tc.want)
			}
			if len(resp.GetMessageQueues()) != tc.queues {
				t.Fatalf("QueryRoute(%q) answered %d queues, want %d", tc.topic, len(resp.GetMessageQueues()), tc.queues)
			}
			wantEndpoints := c.proxyEndpoints(t)
			if tc.endpoints != nil {
				// useEndpointPortFromRequest is false by default.
				port := wantEndpoints.GetAddresses()[0].GetPort()
				wantEndpoints = proto.Clone(tc.endpoints).(*rmqpb.Endpoints)
				for _, a := range wantEndpoints.GetAddresses() {
					a.Port = port
				}
			}
			for i, q := range resp.GetMessageQueues() {
				if q.GetId() != int32(i) || q.GetPermission() != rmqpb.Permission_READ_WRITE || q.GetTopic().GetName() != tc.topic {
					t.Errorf("queue %d is %s/%d %v, want %s/%d READ_WRITE", i, q.GetTopic().GetName(), q.GetId(), q.GetPermission(), tc.topic, i)
				}
				if b := q.GetBroker(); b.GetName() != c.brokerName || b.GetId() != 0 || !proto.Equal(b.GetEndpoints(), wantEndpoints) {
					t.Errorf("queue %d is on broker %s id %d at %v, want %s id 0 at %v", i, b.GetName(), b.GetId(), b.GetEndpoints(), c.brokerName, wantEndpoints)
				}
				if !slices.Equal(q.GetAcceptMessageTypes(), tc.types) {
					t.Errorf("queue %d accepts %v, want %v", i, q.GetAcceptMessageTypes(), tc.types)
				}
			}
		})
	}
}

// TestQueryAssignment checks that a consumer group is assigned one queue
// -1 of the broker group (the broker pops from all of its queues), and
// every queue when the group consumes in order.
func TestQueryAssignment(t *testing.T) {
	c := startTestCluster(t, nil)
	c.createTopic(t, "AssignT", 4, "")
	orderly := meta.NewSubscriptionGroupConfig("AssignOrderly")
	orderly.ConsumeMessageOrderly = true
	c.createGroup(t, orderly)
	tests := []struct {
		group string
		ids   []int32
	}{
		{"AssignGroup", []int32{-1}},
		{"AssignOrderly", []int32{0, 1, 2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.group, func(t *testing.T) {
			resp, err := c.rpc.QueryAssignment(callCtx(t, "assign-client", 10*time.Second), &rmqpb.QueryAssignmentRequest{
				Topic: &rmqpb.Resource{Name: "AssignT"}, Group: &rmqpb.Resource{Name: tc.group}, Endpoints: c.proxyEndpoints(t),
			})
			if err != nil {
				t.Fatalf("QueryAssignment: %v", err)
			}
			if resp.GetStatus().GetCode() != rmqpb.Code_OK {
				t.Fatalf("QueryAssignment answered %v", resp.GetStatus())
			}
			var ids []int32
			for _, a := range resp.GetAssignments() {
				q := a.GetMessageQueue()
				ids = append(ids, q.GetId())
				if q.GetBroker().GetName() != c.brokerName || q.GetPermission() != rmqpb.Permission_READ_WRITE {
					t.Errorf("assigned queue on %s %v, want %s READ_WRITE", q.GetBroker().GetName(), q.GetPermission(), c.brokerName)
				}
			}
			if !slices.Equal(ids, tc.ids) {
				t.Fatalf("assigned queue ids %v, want %v", ids, tc.ids)
			}
		})
	}
}

// TestQueuesOf checks how a broker group's queues are listed, as
// RocketMQ's proxy lists them: read-only ones first, then write-only,
// then read-write, numbered from 0; a group without permissions shows
// its queues with permission NONE.
func TestQueuesOf(t *testing.T) {
	R, W, RW, N := rmqpb.Permission_READ, rmqpb.Permission_WRITE, rmqpb.Permission_READ_WRITE, rmqpb.Permission_NONE
	tests := []struct {
		name        string
		perm        int32
		read, write int32
		want        []rmqpb.Permission
	}{
		{"read-write, as many read as write queues", namesrv.PermRead | namesrv.PermWrite, 4, 4, []rmqpb.Permission{RW, RW, RW, RW}},
		{"read-write, more read queues", namesrv.PermRead | namesrv.PermWrite, 4, 2, []rmqpb.Permission{R, R, RW, RW}},
		{"read-write, more write queues", namesrv.PermRead | namesrv.PermWrite, 1, 3, []rmqpb.Permission{W, W, RW}},
		{"read-only topic", namesrv.PermRead, 2, 2, []rmqpb.Permission{R, R}},
		{"write-only topic", namesrv.PermWrite, 2, 3, []rmqpb.Permission{W, W, W}},
		{"no permission", 0, 2, 1, []rmqpb.Permission{N, N}},
		{"no permission and no queues", 0, 0, 0, []rmqpb.Permission{N}},
	}
	broker := &rmqpb.Broker{Name: "broker-a"}
	topic := &rmqpb.Resource{Name: "T"}
	types := []rmqpb.MessageType{rmqpb.MessageType_NORMAL}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			qd := namesrv.QueueData{BrokerName: "broker-a", Perm: tc.perm, ReadQueueNums: tc.read, WriteQueueNums: tc.write}
			var got []rmqpb.Permission
			for i, q := range queuesOf(qd, topic, types, broker) {
				if q.GetId() != int32(i) {
					t.Fatalf("queue %d has id %d", i, q.GetId())
				}
				got = append(got, q.GetPermission())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("permissions %v, want %v", got, tc.want)
			}
		})
	}
}

// telemetryOnce opens a telemetry stream as clientID, sends settings and
// returns the proxy's answer, then ends the stream and checks that the
// proxy ends it too.
func (c *testCluster) telemetryOnce(t *testing.T, clientID string, settings *rmqpb.Settings) *rmqpb.TelemetryCommand {
	t.Helper()
	stream, err := c.rpc.Telemetry(callCtx(t, clientID, 10*time.Second))
	if err != nil {
		t.Fatalf("Telemetry: %v", err)
	}
	if err := stream.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: settings}}); err != nil {
		t.Fatalf("send settings: %v", err)
	}
	answer, err := stream.Recv()
	if err != nil {
		t.Fatalf("receive the settings' answer: %v", err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatalf("close the telemetry stream: %v", err)
	}
	if extra, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the client ended its stream the proxy sent %v, %v; want the end of the stream", extra, err)
	}
	return answer
}

// TestTelemetrySettings checks the settings the proxy answers a client's
// settings with: its send retry policy and limits for producers; the
// group's order, delivery attempts, retry pauses and the batch size for
// consumers; INVALID_ARGUMENT for refused settings and CLIENT_ID_REQUIRED
// without a client id.
func TestTelemetrySettings(t *testing.T) {
	c := startTestCluster(t, nil)
	c.createTopic(t, "TeleT", 2, "")
	orderly := meta.NewSubscriptionGroupConfig("TeleOrderly")
	orderly.ConsumeMessageOrderly = true
	orderly.RetryMaxTimes = 3
	orderly.GroupRetryPolicy = &meta.GroupRetryPolicy{Type: "EXPONENTIAL"}
	c.createGroup(t, orderly)
	exponential := meta.NewSubscriptionGroupConfig("TeleExponential")
	exponential.GroupRetryPolicy = &meta.GroupRetryPolicy{Type: "EXPONENTIAL",
		Exponential: &meta.ExponentialRetryPolicy{Initial: 1500, Max: 90000, Multiplier: 3}}
	c.createGroup(t, exponential)
	customized := meta.NewSubscriptionGroupConfig("TeleCustomized")
	customized.GroupRetryPolicy = &meta.GroupRetryPolicy{Type: "CUSTOMIZED", Customized: &meta.CustomizedRetryPolicy{Next: []int64{250, 500, 750}}}
	c.createGroup(t, customized)
	consumer := func(group string) *rmqpb.Settings {
		return &rmqpb.Settings{
			ClientType:     rmqpb.ClientType_SIMPLE_CONSUMER.Enum(),
			RequestTimeout: durationpb.New(3 * time.Second),
			PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{
				Group: &rmqpb.Resource{Name: group},
				Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: &rmqpb.Resource{Name: "TeleT"},
					Expression: &rmqpb.FilterExpression{Type: rmqpb.FilterType_TAG, Expression: "*"}}},
			}},
		}
	}

	t.Run("producer", func(t *testing.T) {
		answer := c.telemetryOnce(t, "tele-producer", &rmqpb.Settings{
			ClientType: rmqpb.ClientType_PRODUCER.Enum(),
			PubSub: &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{
				Topics: []*rmqpb.Resource{{Name: "TeleT"}}, MaxBodySize: 1, ValidateMessageType: false,
			}},
		})
		if answer.GetStatus().GetCode() != rmqpb.Code_OK || answer.GetSettings() == nil {
			t.Fatalf("answer %v, want OK with settings", answer)
		}
		s := answer.GetSettings()
		bp := s.GetBackoffPolicy()
		eb := bp.GetExponentialBackoff()
		if bp.GetMaxAttempts() != 3 || eb.GetInitial().AsDuration() != 10*time.Millisecond || eb.GetMax().AsDuration() != time.Second || eb.GetMultiplier() != 2 {
			t.Errorf("backoff %v, want 3 attempts, exponential 10ms..1s x2", bp)
		}
		pub := s.GetPublishing()
		if !pub.GetValidateMessageType() || pub.GetMaxBodySize() != 4<<20 {
			t.Errorf("publishing validate_message_type %v max_body_size %d, want true and %d", pub.GetValidateMessageType(), pub.GetMaxBodySize(), 4<<20)
		}
		if len(pub.GetTopics()) != 1 || pub.GetTopics()[0].GetName() != "TeleT" {
			t.Errorf("publishing topics %v, want the client's TeleT", pub.GetTopics())
		}
	})

	t.Run("simple consumer of a new group", func(t *testing.T) {
		answer := c.telemetryOnce(t, "tele-consumer", consumer("TeleGroup"))
		if answer.GetStatus().GetCode() != rmqpb.Code_OK || answer.GetSettings() == nil {
			t.Fatalf("answer %v, want OK with settings", answer)
		}
		sub := answer.GetSettings().GetSubscription()
		if sub.GetFifo() || sub.GetReceiveBatchSize() != 32 || sub.GetLongPollingTimeout().AsDuration() != 5*time.Second {
			t.Errorf("subscription fifo %v batch %d long polling %v, want false, 32, the proxy's maximum 5s",
				sub.GetFifo(), sub.GetReceiveBatchSize(), sub.GetLongPollingTimeout().AsDuration())
		}
		if sub.GetGroup().GetName() != "TeleGroup" || len(sub.GetSubscriptions()) != 1 {
			t.Errorf("subscription group %v with %d entries, want the client's TeleGroup with 1", sub.GetGroup(), len(sub.GetSubscriptions()))
		}
		bp := answer.GetSettings().GetBackoffPolicy()
		if bp.GetMaxAttempts() != 17 {
			t.Errorf("max attempts %d, want 17 (RocketMQ's 16 retries + 1)", bp.GetMaxAttempts())
		}
		next := bp.GetCustomizedBackoff().GetNext()
		if len(next) != 18 || next[0].AsDuration() != time.Second || next[17].AsDuration() != 2*time.Hour {
			t.Errorf("customized backoff %v, want RocketMQ's 18 delay levels 1s .. 2h", next)
		}
	})

	t.Run("simple consumer of an orderly group with exponential retries", func(t *testing.T) {
		answer := c.telemetryOnce(t, "tele-orderly", consumer("TeleOrderly"))
		if answer.GetStatus().GetCode() != rmqpb.Code_OK {
			t.Fatalf("answer %v, want OK", answer)
		}
		s := answer.GetSettings()
		if !s.GetSubscription().GetFifo() || s.GetBackoffPolicy().GetMaxAttempts() != 4 || s.GetBackoffPolicy().GetExponentialBackoff() == nil {
			t.Errorf("fifo %v, backoff %v; want fifo, 4 attempts, exponential", s.GetSubscription().GetFifo(), s.GetBackoffPolicy())
		}
		eb := s.GetBackoffPolicy().GetExponentialBackoff()
		if eb.GetInitial().AsDuration() != 5*time.Second || eb.GetMax().AsDuration() != 2*time.Hour || eb.GetMultiplier() != 2 {
			t.Errorf("exponential backoff %v, want RocketMQ's default 5s..2h x2 for a group that names the type alone", eb)
		}
	})

	// The pauses a group's retry policy gives are what its consumers are
	// told, whichever of the two kinds it is.
	t.Run("consumer of a group with its own exponential policy", func(t *testing.T) {
		answer := c.telemetryOnce(t, "tele-exponential", consumer("TeleExponential"))
		eb := answer.GetSettings().GetBackoffPolicy().GetExponentialBackoff()
		if eb.GetInitial().AsDuration() != 1500*time.Millisecond || eb.GetMax().AsDuration() != 90*time.Second || eb.GetMultiplier() != 3 {
			t.Errorf("exponential backoff %v, want the group's 1.5s..90s x3", eb)
		}
	})
	t.Run("consumer of a group with its own customized policy", func(t *testing.T) {
		answer := c.telemetryOnce(t, "tele-customized", consumer("TeleCustomized"))
		next := answer.GetSettings().GetBackoffPolicy().GetCustomizedBackoff().GetNext()
		if len(next) != 3 || next[0].AsDuration() != 250*time.Millisecond || next[2].AsDuration() != 750*time.Millisecond {
			t.Errorf("customized backoff %v, want the group's 250ms, 500ms, 750ms", next)
		}
	})

	// Refused settings end the stream with gRPC's INVALID_ARGUMENT, as
	// RocketMQ's proxy ends it.
	for name, settings := range map[string]*rmqpb.Settings{
		"illegal group": consumer("bad group"),
		"illegal topic of a producer": {ClientType: rmqpb.ClientType_PRODUCER.Enum(),
			PubSub: &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{Topics: []*rmqpb.Resource{{Name: "bad topic"}}}}},
		"neither a producer's nor a consumer's": {ClientType: rmqpb.ClientType_PRODUCER.Enum()},
	} {
		t.Run(name, func(t *testing.T) {
			stream, err := c.rpc.Telemetry(callCtx(t, "tele-refused", 10*time.Second))
			if err != nil {
				t.Fatalf("Telemetry: %v", err)
			}
			if err := stream.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: settings}}); err != nil {
				t.Fatalf("send settings: %v", err)
			}
			if answer, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("answer %v, %v; want the stream ended with INVALID_ARGUMENT", answer, err)
			}
		})
	}

	// Without a client id the stream is answered CLIENT_ID_REQUIRED and
	// ended, as RocketMQ's proxy answers it.
	t.Run("no client id", func(t *testing.T) {
		stream, err := c.rpc.Telemetry(callCtx(t, "", 10*time.Second))
		if err != nil {
			t.Fatalf("Telemetry: %v", err)
		}
		if err := stream.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: consumer("TeleGroup")}}); err != nil {
			t.Fatalf("send settings: %v", err)
		}
		answer, err := stream.Recv()
		if err != nil || answer.GetStatus().GetCode() != rmqpb.Code_CLIENT_ID_REQUIRED || answer.GetSettings() != nil {
			t.Fatalf("answer %v, %v; want CLIENT_ID_REQUIRED without settings", answer, err)
		}
		if extra, err := stream.Recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("after CLIENT_ID_REQUIRED the proxy sent %v, %v; want the end of the stream", extra, err)
		}
	})
}

// TestSendMessageRefusals checks that SendMessage answers a refused
// message in the response's status (as clients read it), not as a gRPC
// error, and stores no message of a refused request.
func TestSendMessageRefusals(t *testing.T) {
	c := startTestCluster(t, nil)
	c.createTopic(t, "RefuseT", 1, "")
	tests := []struct {
		name string
		msgs []*rmqpb.Message
		want rmqpb.Code
	}{
		{"no message", nil, rmqpb.Code_MESSAGE_CORRUPTED},
		{"unknown topic", []*rmqpb.Message{newMessage("RefuseMissing", "x")}, rmqpb.Code_TOPIC_NOT_FOUND},
		{"illegal topic", []*rmqpb.Message{newMessage("bad topic", "x")}, rmqpb.Code_ILLEGAL_TOPIC},
		{"messages of two topics", []*rmqpb.Message{newMessage("RefuseT", "x"), newMessage("RefuseOther", "y")}, rmqpb.Code_MESSAGE_CORRUPTED},
		{"system property as user property", []*rmqpb.Message{func() *rmqpb.Message {
			m := newMessage("RefuseT", "x")
			m.UserProperties["KEYS"] = "k"
			return m
		}()}, rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.rpc.SendMessage(callCtx(t, "refuse-client", 10*time.Second), &rmqpb.SendMessageRequest{Messages: tc.msgs})
			if err != nil {
				t.Fatalf("SendMessage: %v", err)
			}
			if resp.GetStatus().GetCode() != tc.want {
				t.Fatalf("SendMessage answered %v, want %v", resp.GetStatus(), tc.want)
			}
		})
	}
	// Nothing of the refused requests was stored: the message sent after
	// them is the queue's only one (the ConsumeQueue is filled in order).
	c.send(t, "refuse-client", newMessage("RefuseT", "accepted"))
	c.waitMaxOffsets(t, "RefuseT", []int64{1})
}

// TestReceive checks the consumer calls against an in-process cluster:
// receiving, acknowledging, changing the invisible time, forwarding to
// the dead-letter queue, auto-renewal and the receive's refusals. The
// subtests run in parallel, each on its own topic and group.
func TestReceive(t *testing.T) {
	c := startTestCluster(t, func(cfg *Config) {
		cfg.DefaultInvisible = 3 * time.Second
		cfg.RenewAhead = 2 * time.Second
		cfg.RenewPeriod = 200 * time.Millisecond
	})
	c.createTopic(t, "RecvAck", 4, "")
	c.createTopic(t, "RecvChange", 2, "")
	c.createTopic(t, "RecvDLQ", 2, "")
	c.createTopic(t, "RecvRenew", 2, "")
	c.createTopic(t, "RecvRefuse", 1, "")

	// Send, receive and ack three messages: the stream is a status, the
	// messages, a delivery timestamp; each message is the one sent with a
	// handle naming its place; acked messages do not come back, even after
	// their invisible time.
	t.Run("send receive ack", func(t *testing.T) {
		t.Parallel()
		const topic, group, client = "RecvAck", "GroupAck", "ack-client"
		sent := map[string]*rmqpb.Message{}
		for i := range 3 {
			m := newMessage(topic, fmt.Sprintf("ack-body-%d", i))
			c.send(t, client, m)
			sent[m.GetSystemProperties().GetMessageId()] = m
		}
		const invisible = 3 * time.Second
		req := receiveRequest(group, topic, invisible, 2*time.Second)
		got := c.receiveN(t, client, req, 3)
		for _, m := range got {
			sp := m.GetSystemProperties()
			want, ok := sent[sp.GetMessageId()]
			if !ok {
				t.Fatalf("received message %s that was not sent (or twice)", sp.GetMessageId())
			}
			delete(sent, sp.GetMessageId())
			if string(m.GetBody()) != string(want.GetBody()) || sp.GetTag() != "TagA" || m.GetTopic().GetName() != topic ||
				!slices.Equal(sp.GetKeys(), want.GetSystemProperties().GetKeys()) || !maps.Equal(m.GetUserProperties(), want.GetUserProperties()) {
				t.Errorf("received %s: body %q tag %q topic %q keys %v user %v; want %q TagA %s %v %v", sp.GetMessageId(), m.GetBody(), sp.GetTag(),
					m.GetTopic().GetName(), sp.GetKeys(), m.GetUserProperties(), want.GetBody(), topic, want.GetSystemProperties().GetKeys(), want.GetUserProperties())
			}
			if sp.GetMessageType() != rmqpb.MessageType_NORMAL || sp.GetDeliveryAttempt() != 1 || sp.GetBodyDigest().GetChecksum() != md5Upper(want.GetBody()) ||
				sp.GetInvisibleDuration().AsDuration() != invisible {
				t.Errorf("received %s: type %v attempt %d digest %s invisible %v; want NORMAL, 1, %s, %v", sp.GetMessageId(), sp.GetMessageType(),
					sp.GetDeliveryAttempt(), sp.GetBodyDigest().GetChecksum(), sp.GetInvisibleDuration().AsDuration(), md5Upper(want.GetBody()), invisible)
			}
			h, err := ParseHandle(sp.GetReceiptHandle())
			if err != nil {
				t.Fatalf("receipt handle of %s: %v", sp.GetMessageId(), err)
			}
			if h.BrokerName != c.brokerName || h.QueueID != sp.GetQueueId() || h.QueueOffset != sp.GetQueueOffset() || h.InvisibleTime != invisible.Milliseconds() {
				t.Errorf("handle %+v of %s, want broker %s queue %d offset %d invisible %d", h, sp.GetMessageId(), c.brokerName,
					sp.GetQueueId(), sp.GetQueueOffset(), invisible.Milliseconds())
			}
		}
		for _, m := range got {
			sp := m.GetSystemProperties()
			if st := c.ack(t, client, group, topic, sp.GetMessageId(), sp.GetReceiptHandle()); st.GetCode() != rmqpb.Code_OK {
				t.Fatalf("ack of %s answered %v", sp.GetMessageId(), st)
			}
		}
		c.expectNothing(t, client, receiveRequest(group, topic, invisible, time.Second), invisible+2*time.Second)
	})

	// ChangeInvisibleDuration to a second makes the message come back as
	// its second delivery with a new handle, which acks it.
	t.Run("change invisible duration", func(t *testing.T) {
		t.Parallel()
		const topic, group, client = "RecvChange", "GroupChange", "change-client"
		m := newMessage(topic, "change-body")
		c.send(t, client, m)
		first := c.receiveN(t, client, receiveRequest(group, topic, 30*time.Second, 2*time.Second), 1)[0]
		resp, err := c.rpc.ChangeInvisibleDuration(callCtx(t, client, 10*time.Second), &rmqpb.ChangeInvisibleDurationRequest{
			Group: &rmqpb.Resource{Name: group}, Topic: &rmqpb.Resource{Name: topic},
			ReceiptHandle:     first.GetSystemProperties().GetReceiptHandle(),
			InvisibleDuration: durationpb.New(time.Second), MessageId: m.GetSystemProperties().GetMessageId(),
		})
		if err != nil {
			t.Fatalf("ChangeInvisibleDuration: %v", err)
		}
		if resp.GetStatus().GetCode() != rmqpb.Code_OK {
			t.Fatalf("ChangeInvisibleDuration answered %v", resp.GetStatus())
		}
		if _, err := ParseHandle(resp.GetReceiptHandle()); err != nil || resp.GetReceiptHandle() == first.GetSystemProperties().GetReceiptHandle() {
			t.Fatalf("ChangeInvisibleDuration answered handle %q (%v), want a new valid one", resp.GetReceiptHandle(), err)
		}
		const invisible = 3 * time.Second
		again := c.receiveN(t, client, receiveRequest(group, topic, invisible, 2*time.Second), 1)[0]
		sp := again.GetSystemProperties()
		if sp.GetMessageId() != m.GetSystemProperties().GetMessageId() || sp.GetDeliveryAttempt() != 2 || string(again.GetBody()) != "change-body" {
			t.Fatalf("received %s attempt %d body %q, want %s attempt 2 change-body", sp.GetMessageId(), sp.GetDeliveryAttempt(), again.GetBody(),
				m.GetSystemProperties().GetMessageId())
		}
		if rh := sp.GetReceiptHandle(); rh == first.GetSystemProperties().GetReceiptHandle() || rh == resp.GetReceiptHandle() {
			t.Fatalf("the second delivery has handle %q again, want a new one", rh)
		}
		if st := c.ack(t, client, group, topic, sp.GetMessageId(), sp.GetReceiptHandle()); st.GetCode() != rmqpb.Code_OK {
			t.Fatalf("ack of the second delivery answered %v", st)
		}
		c.expectNothing(t, client, receiveRequest(group, topic, invisible, time.Second), invisible+2*time.Second)
	})

	// ForwardMessageToDeadLetterQueue moves the message to %DLQ%<group>
	// and it is not delivered again, even after its invisible time.
	t.Run("forward to the dead-letter queue", func(t *testing.T) {
		t.Parallel()
		const topic, group, client = "RecvDLQ", "GroupDLQ", "dlq-client"
		m := newMessage(topic, "dlq-body")
		c.send(t, client, m)
		const invisible = 2 * time.Second
		got := c.receiveN(t, client, receiveRequest(group, topic, invisible, 2*time.Second), 1)[0]
		resp, err := c.rpc.ForwardMessageToDeadLetterQueue(callCtx(t, client, 10*time.Second), &rmqpb.ForwardMessageToDeadLetterQueueRequest{
			Group: &rmqpb.Resource{Name: group}, Topic: &rmqpb.Resource{Name: topic},
			ReceiptHandle: got.GetSystemProperties().GetReceiptHandle(), MessageId: m.GetSystemProperties().GetMessageId(),
			DeliveryAttempt: 1, MaxDeliveryAttempts: 17,
		})
		if err != nil {
			t.Fatalf("ForwardMessageToDeadLetterQueue: %v", err)
		}
		if resp.GetStatus().GetCode() != rmqpb.Code_OK {
			t.Fatalf("ForwardMessageToDeadLetterQueue answered %v", resp.GetStatus())
		}
		c.waitMaxOffsets(t, "%DLQ%"+group, []int64{1})
		c.expectNothing(t, client, receiveRequest(group, topic, invisible, time.Second), invisible+2*time.Second)
	})

	// A message received with auto_renew stays invisible while the proxy
	// renews it, well past the default invisible time; the client acks it
	// with the handle it got, and it does not come back.
	t.Run("auto renew", func(t *testing.T) {
		t.Parallel()
		const topic, group, client = "RecvRenew", "GroupRenew", "renew-client"
		m := newMessage(topic, "renew-body")
		c.send(t, client, m)
		req := receiveRequest(group, topic, 0, 2*time.Second)
		req.AutoRenew = true
		got := c.receiveN(t, client, req, 1)[0]
		sp := got.GetSystemProperties()
		if sp.GetInvisibleDuration().AsDuration() != 3*time.Second {
			t.Fatalf("auto-renewed message has invisible duration %v, want the default 3s", sp.GetInvisibleDuration().AsDuration())
		}
		other := receiveRequest(group, topic, 3*time.Second, time.Second)
		c.expectNothing(t, "renew-other-client", other, 6*time.Second)
		if st := c.ack(t, client, group, topic, sp.GetMessageId(), sp.GetReceiptHandle()); st.GetCode() != rmqpb.Code_OK {
			t.Fatalf("ack with the original handle answered %v", st)
		}
		c.expectNothing(t, "renew-other-client", other, 5*time.Second)
	})

	// A receive's invisible time must lie within the proxy's bounds, and
	// its deadline must leave room for the shortest long polling.
	t.Run("refusals", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			name     string
			req      *rmqpb.ReceiveMessageRequest
			deadline time.Duration
			want     rmqpb.Code
			msg      string // the status message, when set
		}{
			{"invisible time under the minimum", receiveRequest("GroupRefuse", "RecvRefuse", 500*time.Millisecond, time.Second), 10 * time.Second, rmqpb.Code_ILLEGAL_INVISIBLE_TIME, ""},
			{"invisible time over the maximum", receiveRequest("GroupRefuse", "RecvRefuse", 13*time.Hour, time.Second), 10 * time.Second, rmqpb.Code_ILLEGAL_INVISIBLE_TIME, ""},
			// The client says it is 5.0.0: older than ILLEGAL_POLLING_TIME
			// (TestIllegalPollingTimeByClientVersion).
			{"deadline too short for long polling", receiveRequest("GroupRefuse", "RecvRefuse", 10*time.Second, time.Second), 450 * time.Millisecond, rmqpb.Code_BAD_REQUEST, ""},
			{"illegal group", receiveRequest("bad group", "RecvRefuse", 10*time.Second, time.Second), 10 * time.Second, rmqpb.Code_ILLEGAL_CONSUMER_GROUP, ""},
			{"illegal topic", receiveRequest("GroupRefuse", "bad topic", 10*time.Second, time.Second), 10 * time.Second, rmqpb.Code_ILLEGAL_TOPIC, ""},
			{"unknown topic", receiveRequest("GroupRefuse", "RecvMissing", 10*time.Second, time.Second), 10 * time.Second, rmqpb.Code_TOPIC_NOT_FOUND, ""},
			// Groups are held to 120 since apache/rocketmq#9563.
			{"group of 121", receiveRequest(strings.Repeat("g", 121), "RecvRefuse", 10*time.Second, time.Second), 10 * time.Second, rmqpb.Code_ILLEGAL_CONSUMER_GROUP,
				"the specified group[" + strings.Repeat("g", 121) + "] is longer than group max length: 120."},
			{"group of 120", receiveRequest(strings.Repeat("g", 120), "RecvMissing", 10*time.Second, time.Second), 10 * time.Second, rmqpb.Code_TOPIC_NOT_FOUND, ""},
			{"blank group", receiveRequest(" ", "RecvRefuse", 10*time.Second, time.Second), 10 * time.Second, rmqpb.Code_ILLEGAL_CONSUMER_GROUP, "the specified group is blank"},
			{"system group", receiveRequest("CID_RMQ_SYS_X", "RecvRefuse", 10*time.Second, time.Second), 10 * time.Second, rmqpb.Code_ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group"},
			{"topic of 128", receiveRequest("GroupRefuse", strings.Repeat("t", 128), 10*time.Second, time.Second), 10 * time.Second, rmqpb.Code_ILLEGAL_TOPIC, "The specified topic is longer than topic max length 127."},
			{"topic of illegal characters", receiveRequest("GroupRefuse", "bad topic", 10*time.Second, time.Second), 10 * time.Second, rmqpb.Code_ILLEGAL_TOPIC,
				"The specified topic[bad topic] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				st, _ := c.receiveOnce(t, "refuse-client", tc.req, tc.deadline)
				if st.GetCode() != tc.want {
					t.Fatalf("ReceiveMessage answered %v, want %v", st, tc.want)
				}
				if tc.msg != "" && st.GetMessage() != tc.msg {
					t.Fatalf("ReceiveMessage answered %q, want %q", st.GetMessage(), tc.msg)
				}
			})
		}
	})

	// Acks of handles the proxy did not write are refused per entry.
	t.Run("ack of a malformed handle", func(t *testing.T) {
		t.Parallel()
		st := c.ack(t, "refuse-client", "GroupRefuse", "RecvRefuse", "01NOPE", "not a handle")
		if st.GetCode() != rmqpb.Code_INVALID_RECEIPT_HANDLE {
			t.Fatalf("ack of a malformed handle answered %v, want INVALID_RECEIPT_HANDLE", st)
		}
	})
}

// TestFifoMessageGroupQueue checks that the messages of one message group
// all land in one queue of a FIFO topic, the queue RocketMQ's proxy picks
// (Guava's consistent hash of the group's Java hash over the writable
// queues), each in its own request.
func TestFifoMessageGroupQueue(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, queues = "FifoT", 4
	c.createTopic(t, topic, queues, "+message.type=FIFO")
	// Two groups that belong to different queues.
	groups := []string{"order-0"}
	for i := 1; len(groups) < 2; i++ {
		g := fmt.Sprintf("order-%d", i)
		if consistentHash(groupHash(g), queues) != consistentHash(groupHash(groups[0]), queues) {
			groups = append(groups, g)
		}
	}
	want := make([]int64, queues)
	for _, g := range groups {
		q := consistentHash(groupHash(g), queues)
		for i := range 3 {
			m := newMessage(topic, fmt.Sprintf("%s-%d", g, i))
			m.SystemProperties.MessageType = rmqpb.MessageType_FIFO
			m.SystemProperties.MessageGroup = proto.String(g)
			if e := c.send(t, "fifo-client", m); e.GetOffset() != want[q] {
				t.Fatalf("message %d of group %s stored at offset %d, want %d of queue %d", i, g, e.GetOffset(), want[q], q)
			}
			want[q]++
		}
	}
	c.waitMaxOffsets(t, topic, want)
}

// sendRemoting stores a message on the broker as a Remoting producer
// whose headers use RocketMQ's binary serialization does: its properties
// reach the CommitLog byte for byte (a JSON header would have replaced
// bytes that are not UTF-8).
func (c *testCluster) sendRemoting(t *testing.T, topic string, props map[string]string, body string) {
	t.Helper()
	h := map[string]string{
		"a": "RemotingProducer", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": commitlog.FormatProperties(props),
		"j": "0", "k": "false", "m": "false",
	}
	req := remoting.NewRequest(remoting.SendMessageV2, h, []byte(body))
	req.SerializeType = remoting.SerializeRocketMQ
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.pool.Invoke(ctx, c.brokerAddr, req)
	if err != nil {
		t.Fatalf("Remoting send to %s: %v", topic, err)
	}
	if resp.Code != remoting.Success {
		t.Fatalf("Remoting send to %s: code %d %s", topic, resp.Code, resp.Remark)
	}
}

// TestReceiveNonUTF8Tag checks that a message a Remoting producer stored
// with a tag that is not UTF-8 is delivered (gRPC strings must be UTF-8,
// as Java's decoding makes them in RocketMQ's proxy) and does not hold
// back the healthy message stored after it in the same queue.
func TestReceiveNonUTF8Tag(t *testing.T) {
	c := startTestCluster(t, nil)
	const topic, group = "Utf8T", "GroupUtf8"
	c.createTopic(t, topic, 1, "")
	c.sendRemoting(t, topic, map[string]string{"TAGS": "bad\xff", "UNIQ_KEY": "01UTF8BAD"}, "bad")
	c.sendRemoting(t, topic, map[string]string{"TAGS": "good", "UNIQ_KEY": "01UTF8GOOD"}, "good")
	c.waitMaxOffsets(t, topic, []int64{2})

	seen := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for !seen["01UTF8BAD"] || !seen["01UTF8GOOD"] {
		if time.Now().After(deadline) {
			t.Fatalf("received %v in 20 s, want both messages", seen)
		}
		stream, err := c.rpc.ReceiveMessage(callCtx(t, "utf8-client", 10*time.Second), receiveRequest(group, topic, 10*time.Second, time.Second))
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		for {
			r, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("ReceiveMessage stream: %v", err)
			}
			if m := r.GetMessage(); m != nil {
				sp := m.GetSystemProperties()
				if sp.GetDeliveryAttempt() != 1 {
					t.Fatalf("message %s delivered as attempt %d, want 1", sp.GetMessageId(), sp.GetDeliveryAttempt())
				}
				seen[sp.GetMessageId()] = true
			}
		}
	}
}

// TestReceiveRefusesAnEmptySQLFilter checks that a receive whose SQL
// filter is empty or blank is refused with ILLEGAL_FILTER_EXPRESSION, as
// RocketMQ's proxy refuses it, instead of popping every message.
func TestReceiveRefusesAnEmptySQLFilter(t *testing.T) {
	c := startTestCluster(t, nil)
	c.createTopic(t, "RecvSQLEmpty", 1, "")
	c.send(t, "sql-client", newMessage("RecvSQLEmpty", "body"))
	for _, exp := range []string{"", "  "} {
		req := receiveRequest("GroupSQLEmpty", "RecvSQLEmpty", 30*time.Second, time.Second)
		req.FilterExpression = &rmqpb.FilterExpression{Type: rmqpb.FilterType_SQL, Expression: exp}
		st, msgs := c.receiveOnce(t, "sql-client", req, 10*time.Second)
		if st.GetCode() != rmqpb.Code_ILLEGAL_FILTER_EXPRESSION || len(msgs) != 0 {
			t.Errorf("receive with the SQL filter %q: status %v, %d messages; want ILLEGAL_FILTER_EXPRESSION and none", exp, st, len(msgs))
		}
	}
}

// A master's own flow control (SYSTEM_BUSY with a remark of its own) is
// no sign of a demotion and refreshes no route; a slave's rejectRequest,
// a switching broker's SERVICE_NOT_AVAILABLE and an unreachable broker
// are; a failure the caller's own context caused (cancelled, or past its
// deadline) is not.
func TestMasterRefusedOnlyAsASlave(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	late, cancelLate := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancelLate()
	for _, c := range []struct {
		ctx  context.Context
		resp *remoting.Command
		err  error
		want bool
	}{
		{live, &remoting.Command{Code: remoting.SystemBusy, Remark: "[REJECTREQUEST]system busy, start flow control for a while"}, nil, true},
		{live, &remoting.Command{Code: remoting.ServiceNotAvailable, Remark: "[SWITCHING] ..."}, nil, true},
		{live, &remoting.Command{Code: remoting.SystemBusy, Remark: "[DISPATCH_BEHIND] broker busy"}, nil, false},
		{live, &remoting.Command{Code: remoting.SystemBusy, Remark: "[OVERLOAD] ..."}, nil, false},
		{live, &remoting.Command{Code: remoting.Success}, nil, false},
		{live, nil, errors.New("dial: connection refused"), true},
		{live, nil, context.DeadlineExceeded, true}, // the request's own timeout: a broker that does not answer
		{gone, nil, context.Canceled, false},
		{late, nil, context.DeadlineExceeded, false},
	} {
		if got := masterRefused(c.ctx, c.resp, c.err); got != c.want {
			t.Errorf("masterRefused(%+v, %v) = %v, want %v", c.resp, c.err, got, c.want)
		}
	}
}
