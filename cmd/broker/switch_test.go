package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/internal/clustertest"
	"github.com/rocketkv/rocketkv/internal/controllertest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// switchBroker is a controller-mode bin/broker run in process with
// --enable-proxy.
type switchBroker struct {
	addr, grpcAddr string
	// stop stops the broker (once; the test's end stops it otherwise).
	stop func()
}

// runSwitchBroker runs bin/broker's run in controller mode with the
// embedded proxy (its route cache refreshed only every proxyRouteRefresh
// seconds), until the test ends; it returns once the proxy's port
// accepts connections.
func runSwitchBroker(t *testing.T, ctlAddr, nsAddr string, proxyRouteRefresh int) switchBroker {
	t.Helper()
	port := testutil.FreePortPair(t) // the next port is its HA port
	grpcPort := testutil.FreePort(t)
	pc := filepath.Join(t.TempDir(), "rmq-proxy.json")
	if err := os.WriteFile(pc, fmt.Appendf(nil, `{"rocketMQClusterName":"DefaultCluster","grpcServerPort":%d,"bindAddress":"127.0.0.1",`+
		`"topicRouteServiceCacheRefreshSeconds":%d,"grpcClientConsumerMinLongPollingTimeoutMillis":500}`, grpcPort, proxyRouteRefresh), 0o644); err != nil {
		t.Fatal(err)
	}
	o := options{enableProxy: true, proxyConfig: pc, shutdownWait: 20 * time.Second, namesrv: nsAddr, store: t.TempDir(),
		sets: []string{"enableControllerMode=true", "controllerAddr=" + ctlAddr, "brokerClusterName=DefaultCluster",
			"brokerName=broker-a", "brokerIP1=127.0.0.1", "listenPort=" + strconv.Itoa(port), "haListenPort=" + strconv.Itoa(port+1),
			"fastListenPort=-1", "mappedFileSizeCommitLog=4194304", "logLevel=error",
			"brokerHeartbeatInterval=200", "controllerHeartBeatTimeoutMills=1500", "syncBrokerMetadataPeriod=300",
			"checkSyncStateSetPeriod=300", "syncControllerMetadataPeriod=1000", "haSendHeartbeatInterval=200",
			"slaveSyncIntervalMillis=300", "registerNameServerPeriod=500"}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, o) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("broker %d stopped with %v", port, err)
				}
			case <-time.After(60 * time.Second):
				t.Errorf("broker %d did not stop within 60 s", port)
			}
		})
	}
	t.Cleanup(stop)
	b := switchBroker{addr: fmt.Sprintf("127.0.0.1:%d", port), grpcAddr: fmt.Sprintf("127.0.0.1:%d", grpcPort), stop: stop}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("broker %d stopped at its start: %v", port, err)
		default:
		}
		if c, err := net.DialTimeout("tcp", b.grpcAddr, time.Second); err == nil {
			_ = c.Close()
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy of broker %d does not listen after 60 s", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// switchClient is a gRPC client of one embedded proxy over one
// connection, counting the connections it made.
type switchClient struct {
	id    string
	conn  *grpc.ClientConn
	rpc   rmqpb.MessagingServiceClient
	dials atomic.Int64
}

func newSwitchClient(t *testing.T, id, addr string) *switchClient {
	t.Helper()
	c := &switchClient{id: id}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			c.dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c.conn, c.rpc = conn, rmqpb.NewMessagingServiceClient(conn)
	return c
}

// ctx is the context of one call of the client, ending after d.
func (c *switchClient) ctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", c.id, "x-mq-language", "GOLANG", "x-mq-client-version", "5.0.0")
}

// telemetry opens the client's telemetry stream with settings and
// waits for the proxy's answer; the stream stays open.
func (c *switchClient) telemetry(t *testing.T, settings *rmqpb.Settings) rmqpb.MessagingService_TelemetryClient {
	t.Helper()
	stream, err := c.rpc.Telemetry(c.ctx(t, 5*time.Minute))
	if err != nil {
		t.Fatalf("Telemetry: %v", err)
	}
	telemetrySettings(t, stream, settings)
	return stream
}

// telemetrySettings sends settings on an open telemetry stream and
// checks the proxy's answer.
func telemetrySettings(t *testing.T, stream rmqpb.MessagingService_TelemetryClient, settings *rmqpb.Settings) {
	t.Helper()
	if err := stream.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: settings}}); err != nil {
		t.Fatalf("send settings on the telemetry stream: %v", err)
	}
	answer, err := stream.Recv()
	if err != nil {
		t.Fatalf("the settings' answer on the telemetry stream: %v", err)
	}
	if answer.GetStatus().GetCode() != rmqpb.Code_OK || answer.GetSettings() == nil {
		t.Fatalf("the settings' answer %v, want OK with settings", answer)
	}
}

// send sends one message of topic and returns the status answered.
func (c *switchClient) send(t *testing.T, topic, body string) *rmqpb.Status {
	t.Helper()
	resp, err := c.rpc.SendMessage(c.ctx(t, 10*time.Second), &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{
		Topic: &rmqpb.Resource{Name: topic}, Body: []byte(body),
		SystemProperties: &rmqpb.SystemProperties{Tag: proto.String("T"), MessageType: rmqpb.MessageType_NORMAL,
			MessageId: fmt.Sprintf("01SWITCH%s%08d", c.id, switchSeq.Add(1))},
	}}})
	if err != nil {
		t.Fatalf("SendMessage through %s: %v (the call failed, not the send)", c.id, err)
	}
	return resp.GetStatus()
}

var switchSeq atomic.Int64

// receive makes one ReceiveMessage call polling up to poll and returns
// its status and messages; a failed call (not an answered status) is
// returned as its error.
func (c *switchClient) receive(t *testing.T, group, topic string, poll time.Duration) (*rmqpb.Status, []*rmqpb.Message, error) {
	stream, err := c.rpc.ReceiveMessage(c.ctx(t, poll+10*time.Second), &rmqpb.ReceiveMessageRequest{
		Group:              &rmqpb.Resource{Name: group},
		MessageQueue:       &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: topic}, Id: -1},
		FilterExpression:   &rmqpb.FilterExpression{Type: rmqpb.FilterType_TAG, Expression: "*"},
		BatchSize:          32,
		InvisibleDuration:  durationpb.New(30 * time.Second),
		LongPollingTimeout: durationpb.New(poll),
	})
	if err != nil {
		return nil, nil, err
	}
	var st *rmqpb.Status
	var msgs []*rmqpb.Message
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return st, msgs, nil
		}
		if err != nil {
			return st, msgs, err
		}
		if r.GetStatus() != nil {
			st = r.GetStatus()
		}
		if r.GetMessage() != nil {
			msgs = append(msgs, r.GetMessage())
		}
	}
}

// ack acknowledges one received message and returns the status.
func (c *switchClient) ack(t *testing.T, group, topic string, m *rmqpb.Message) *rmqpb.Status {
	t.Helper()
	resp, err := c.rpc.AckMessage(c.ctx(t, 10*time.Second), &rmqpb.AckMessageRequest{
		Group: &rmqpb.Resource{Name: group}, Topic: &rmqpb.Resource{Name: topic},
		Entries: []*rmqpb.AckMessageEntry{{MessageId: m.GetSystemProperties().GetMessageId(), ReceiptHandle: m.GetSystemProperties().GetReceiptHandle()}},
	})
	if err != nil {
		t.Fatalf("AckMessage through %s: %v", c.id, err)
	}
	return resp.GetStatus()
}

// masterOf returns the master (brokerId 0) and the slaves of the route of
// topic the name server at nsAddr answers (none when it has no route).
func masterOf(t *testing.T, pool *remoting.ClientPool, nsAddr, topic string) (master string, slaves []string) {
	t.Helper()
	route, err := namesrv.FetchRoute(context.Background(), pool, []string{nsAddr}, topic, 2*time.Second)
	if err != nil || len(route.BrokerDatas) != 1 {
		return "", nil
	}
	for id, a := range route.BrokerDatas[0].BrokerAddrs {
		if id == namesrv.MasterID {
			master = a
		} else {
			slaves = append(slaves, a)
		}
	}
	return master, slaves
}

// switchGroup is a controller, a name server and two controller-mode
// brokers with embedded proxies: a the master and b its slave, both
// holding the test's topic.
type switchGroup struct {
	ctlAddr, nsAddr string
	pool            *remoting.ClientPool
	invoke          func(addr string, code int32, ext map[string]string) *remoting.Command
	a, b            switchBroker
}

// startSwitchGroup starts a switchGroup whose proxies refresh routes
// every routeRefresh seconds, creates topic (two queues) on the master
// and waits until the slave copied it: a slave elected before that would
// not have the topic (as in RocketMQ).
func startSwitchGroup(t *testing.T, topic string, routeRefresh int) switchGroup {
	t.Helper()
	g := switchGroup{ctlAddr: controllertest.StartOne(t, controllertest.Options{Notify: true}).Addr, nsAddr: clustertest.StartNamesrv(t)}
	g.pool, g.invoke = switchInvoker(t)
	g.a = runSwitchBroker(t, g.ctlAddr, g.nsAddr, routeRefresh)
	waitFor(t, 30*time.Second, "broker a to register as master", func() bool {
		m, _ := masterOf(t, g.pool, g.nsAddr, "DefaultCluster")
		return m == g.a.addr
	})
	if r := g.invoke(g.a.addr, remoting.UpdateAndCreateTopic, map[string]string{"topic": topic, "defaultTopic": "TBW102",
		"readQueueNums": "2", "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}); r.Code != remoting.Success {
		t.Fatalf("create %s: code %d %s", topic, r.Code, r.Remark)
	}
	g.b = runSwitchBroker(t, g.ctlAddr, g.nsAddr, routeRefresh)
	waitFor(t, 30*time.Second, "broker b to register as a's slave", func() bool {
		m, s := masterOf(t, g.pool, g.nsAddr, topic)
		return m == g.a.addr && slices.Equal(s, []string{g.b.addr})
	})
	waitFor(t, 30*time.Second, "broker b to copy the topic from a", func() bool {
		return g.invoke(g.b.addr, remoting.GetTopicConfig, map[string]string{"topic": topic}).Code == remoting.Success
	})
	return g
}

// switchInvoker returns a client pool of the test and a function that
// sends one request through it, failing the test when it gets no answer.
func switchInvoker(t *testing.T) (*remoting.ClientPool, func(addr string, code int32, ext map[string]string) *remoting.Command) {
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	t.Cleanup(func() { _ = pool.Close() })
	return pool, func(addr string, code int32, ext map[string]string) *remoting.Command {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := pool.Invoke(ctx, addr, remoting.NewRequest(code, ext, nil))
		if err != nil {
			t.Fatalf("request %d to %s: %v", code, addr, err)
		}
		return resp
	}
}

// waitFor polls cond every 50 ms for up to d (a hang guard).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEmbeddedProxyFollowsRoleSwitch runs two controller-mode brokers
// of one group with --enable-proxy (broker a master, b its slave), gRPC
// clients on both proxies, then has the controller make b the master:
// a becomes a slave and b a master, each a new Broker behind the same
// process. What a gRPC client needs across it:
//   - both proxies' ports keep accepting connections, and each client's
//     one connection and its telemetry stream stay open (settings sent
//     on it after the switch are answered);
//   - a receive long-polling on a across the switch is answered, with a
//     status, not cut;
//   - sends through either proxy reach the new master once the name
//     server routes it, although the proxies' route caches would keep
//     the old master for 10 minutes (topicRouteServiceCacheRefreshSeconds);
//     a send that fails before is answered with a status a client
//     retries (what RocketMQ's proxy answers for a slave's or a
//     switching broker's refusal), never a failed call;
//   - a message received before the switch is acknowledged after it,
//     and the messages sent after it are received from the new master.
func TestEmbeddedProxyFollowsRoleSwitch(t *testing.T) {
	const topic, group = "SwitchTopic", "SwitchGroup"
	const routeRefresh = 600 // seconds: longer than the test
	g := startSwitchGroup(t, topic, routeRefresh)
	nsAddr, pool, invoke, a, b := g.nsAddr, g.pool, g.invoke, g.a, g.b

	ca, cb := newSwitchClient(t, "CA", a.grpcAddr), newSwitchClient(t, "CB", b.grpcAddr)
	producer := &rmqpb.Settings{ClientType: rmqpb.ClientType_PRODUCER.Enum(), RequestTimeout: durationpb.New(3 * time.Second),
		PubSub: &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{Topics: []*rmqpb.Resource{{Name: topic}}}}}
	consumer := &rmqpb.Settings{ClientType: rmqpb.ClientType_SIMPLE_CONSUMER.Enum(), RequestTimeout: durationpb.New(3 * time.Second),
		PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{Group: &rmqpb.Resource{Name: group},
			Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: &rmqpb.Resource{Name: topic},
				Expression: &rmqpb.FilterExpression{Type: rmqpb.FilterType_TAG, Expression: "*"}}}}}}
	teleA, teleB := ca.telemetry(t, consumer), cb.telemetry(t, producer)

	// Before the switch: sends through both proxies reach a, and a
	// message is received (not yet acknowledged) through b's proxy.
	for i, c := range []*switchClient{ca, cb} {
		if st := c.send(t, topic, "before-"+strconv.Itoa(i)); st.GetCode() != rmqpb.Code_OK {
			t.Fatalf("send through %s before the switch: %v", c.id, st)
		}
	}
	var held []*rmqpb.Message
	waitFor(t, 30*time.Second, "the messages sent before the switch to be received", func() bool {
		st, msgs, err := cb.receive(t, group, topic, time.Second)
		if err != nil {
			t.Fatalf("receive before the switch: %v", err)
		}
		if st.GetCode() != rmqpb.Code_OK && st.GetCode() != rmqpb.Code_MESSAGE_NOT_FOUND {
			t.Fatalf("receive before the switch answered %v", st)
		}
		held = append(held, msgs...)
		return len(held) >= 2
	})

	// Across the switch: dialers on both gRPC ports, and a receive long
	// polling on a (nothing left to receive) through a's proxy.
	stopDial := make(chan struct{})
	var dialed, refused atomic.Int64
	var wg sync.WaitGroup
	for _, addr := range []string{a.grpcAddr, b.grpcAddr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stopDial:
					return
				default:
				}
				conn, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					refused.Add(1)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				dialed.Add(1)
				_ = conn.Close()
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	type polled struct {
		st   *rmqpb.Status
		msgs []*rmqpb.Message
		err  error
	}
	pollDone := make(chan polled, 1)
	go func() {
		st, msgs, err := ca.receive(t, group, topic, 8*time.Second)
		pollDone <- polled{st, msgs, err}
	}()

	// b becomes the master: designated (mqadmin electMaster) once the
	// controller holds it in the sync state set.
	g.elect(t, topic, b.addr)
	var lastMaster string
	var lastSlaves []string
	waitFor(t, 30*time.Second, "the name server to route b as master and a as its slave", func() bool {
		lastMaster, lastSlaves = masterOf(t, pool, nsAddr, topic)
		return lastMaster == b.addr && slices.Equal(lastSlaves, []string{a.addr})
	})
	t.Logf("route of %s: master %s, slaves %v", topic, lastMaster, lastSlaves)

	// The old Broker answers its held pops as it stops; a pop that came
	// between the two Brokers is refused as switching.
	p := <-pollDone
	switch c := p.st.GetCode(); {
	case p.err != nil:
		t.Errorf("the receive long polling across the switch failed as a call: %v", p.err)
	case c != rmqpb.Code_OK && c != rmqpb.Code_MESSAGE_NOT_FOUND && c != rmqpb.Code_INTERNAL_SERVER_ERROR:
		t.Errorf("the receive long polling across the switch answered %v", p.st)
	default:
		t.Logf("the receive long polling across the switch answered %v with %d messages", p.st, len(p.msgs))
	}
	held = append(held, p.msgs...)

	// Sends through both proxies reach b; a failed one is a retryable
	// status.
	heldByB := func() (n int64) {
		for q := range 2 {
			r := invoke(b.addr, remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": strconv.Itoa(q)})
			v, _ := strconv.ParseInt(r.ExtFields["offset"], 10, 64)
			n += v
		}
		return n
	}
	before := heldByB()
	failures := map[rmqpb.Code]int{}
	for i, c := range []*switchClient{ca, cb} {
		seen := map[rmqpb.Code]int{}
		waitFor(t, 60*time.Second, "a send through "+c.id+" after the switch", func() bool {
			st := c.send(t, topic, "after-"+strconv.Itoa(i))
			if st.GetCode() == rmqpb.Code_OK {
				return true
			}
			failures[st.GetCode()]++
			if seen[st.GetCode()]++; seen[st.GetCode()] == 1 {
				t.Logf("send through %s after the switch: %v", c.id, st)
			}
			return false
		})
		t.Logf("sends through %s refused before one reached the new master: %v", c.id, seen)
	}
	for code := range failures {
		if code != rmqpb.Code_TOO_MANY_REQUESTS && code != rmqpb.Code_INTERNAL_SERVER_ERROR {
			t.Errorf("a send after the switch answered %v, which is not what RocketMQ's proxy answers for a slave or a switching broker", code)
		}
	}
	// A stored message reaches the ConsumeQueue asynchronously.
	waitFor(t, 20*time.Second, "the new master b to hold the 2 messages sent after the switch", func() bool {
		return heldByB() == before+2
	})

	close(stopDial)
	wg.Wait()
	if n := refused.Load(); n > 0 {
		t.Errorf("%d of %d connections to the proxies' ports refused across the switch", n, n+dialed.Load())
	}
	// The clients' connections and telemetry streams are those of before.
	for _, c := range []*switchClient{ca, cb} {
		if n := c.dials.Load(); n != 1 {
			t.Errorf("client %s connected %d times, want once: its connection was dropped", c.id, n)
		}
		if s := c.conn.GetState(); s != connectivity.Ready {
			t.Errorf("client %s's connection is %v, want READY", c.id, s)
		}
	}
	telemetrySettings(t, teleA, consumer)
	telemetrySettings(t, teleB, producer)

	// What was received before the switch is acknowledged after it, and
	// what was sent after it is received from b.
	for _, m := range held {
		if st := cb.ack(t, group, topic, m); st.GetCode() != rmqpb.Code_OK {
			t.Errorf("ack after the switch of a message received before it: %v", st)
		}
	}
	var got []string
	waitFor(t, 30*time.Second, "the messages sent after the switch to be received", func() bool {
		st, msgs, err := ca.receive(t, group, topic, time.Second)
		if err != nil {
			t.Fatalf("receive after the switch: %v", err)
		}
		if st.GetCode() != rmqpb.Code_OK && st.GetCode() != rmqpb.Code_MESSAGE_NOT_FOUND {
			t.Logf("receive after the switch answered %v", st)
		}
		for _, m := range msgs {
			got = append(got, string(m.GetBody()))
			if st := ca.ack(t, group, topic, m); st.GetCode() != rmqpb.Code_OK {
				t.Errorf("ack after the switch: %v", st)
			}
		}
		return slices.Contains(got, "after-0") && slices.Contains(got, "after-1")
	})
}

// elect has the group's controller elect the broker at addr master of
// broker-a (mqadmin electMaster's designated election), its id taken from
// topic's route; it asks until the controller, which elects only a broker
// in the sync state set, agrees.
func (g switchGroup) elect(t *testing.T, topic, addr string) {
	t.Helper()
	_, ids := routeIDs(t, g.pool, g.nsAddr, topic)
	id, ok := ids[addr]
	if !ok {
		t.Fatalf("%s's broker id is not in the route: %v", addr, ids)
	}
	waitFor(t, 30*time.Second, "the controller to elect "+addr, func() bool {
		r := g.invoke(g.ctlAddr, remoting.ControllerElectMaster, map[string]string{
			"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": strconv.FormatInt(id, 10),
			"designateElect": "true", "invokeTime": strconv.FormatInt(time.Now().UnixMilli(), 10)})
		return r.Code == remoting.Success
	})
}

// routeIDs returns the broker ids of topic's route by address.
func routeIDs(t *testing.T, pool *remoting.ClientPool, nsAddr, topic string) (namesrv.TopicRouteData, map[string]int64) {
	t.Helper()
	route, err := namesrv.FetchRoute(context.Background(), pool, []string{nsAddr}, topic, 2*time.Second)
	if err != nil || len(route.BrokerDatas) != 1 {
		t.Fatalf("route of %s: %+v %v", topic, route, err)
	}
	ids := map[string]int64{}
	for id, a := range route.BrokerDatas[0].BrokerAddrs {
		ids[a] = id
	}
	return route, ids
}

// TestEmbeddedProxyFollowsFailover stops the master's process (its
// proxy with it): the slave's proxy, whose broker the controller elects,
// keeps its port, its client's connection and telemetry stream, and
// the client's sends reach the new master once its route is asked
// again, the ones before refused with a status a client retries (the
// stopped master cannot be reached: INTERNAL_SERVER_ERROR, as
// RocketMQ's proxy answers a failed send; or a slave's or a switching
// broker's refusal).
func TestEmbeddedProxyFollowsFailover(t *testing.T) {
	const topic = "FailoverTopic"
	g := startSwitchGroup(t, topic, 600)
	nsAddr, pool, a, b := g.nsAddr, g.pool, g.a, g.b

	cb := newSwitchClient(t, "CB", b.grpcAddr)
	producer := &rmqpb.Settings{ClientType: rmqpb.ClientType_PRODUCER.Enum(), RequestTimeout: durationpb.New(3 * time.Second),
		PubSub: &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{Topics: []*rmqpb.Resource{{Name: topic}}}}}
	tele := cb.telemetry(t, producer)
	if st := cb.send(t, topic, "before"); st.GetCode() != rmqpb.Code_OK {
		t.Fatalf("send before the failover: %v", st)
	}

	stopDial := make(chan struct{})
	dialDone := make(chan struct{})
	var dialed, refused atomic.Int64
	go func() {
		defer close(dialDone)
		for {
			select {
			case <-stopDial:
				return
			default:
			}
			conn, err := net.DialTimeout("tcp", b.grpcAddr, time.Second)
			if err != nil {
				refused.Add(1)
			} else {
				dialed.Add(1)
				_ = conn.Close()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	a.stop()
	waitFor(t, 30*time.Second, "the name server to route b as master", func() bool {
		m, _ := masterOf(t, pool, nsAddr, topic)
		return m == b.addr
	})
	seen := map[rmqpb.Code]int{}
	waitFor(t, 60*time.Second, "a send through b's proxy after the failover", func() bool {
		st := cb.send(t, topic, "after")
		if st.GetCode() == rmqpb.Code_OK {
			return true
		}
		if seen[st.GetCode()]++; seen[st.GetCode()] == 1 {
			t.Logf("send after the failover: %v", st)
		}
		return false
	})
	t.Logf("sends refused before one reached the new master: %v", seen)
	for code := range seen {
		if code != rmqpb.Code_TOO_MANY_REQUESTS && code != rmqpb.Code_INTERNAL_SERVER_ERROR {
			t.Errorf("a send after the failover answered %v, which is not what RocketMQ's proxy answers for a master gone, a slave or a switching broker", code)
		}
	}
	close(stopDial)
	<-dialDone
	if n := refused.Load(); n > 0 {
		t.Errorf("%d of %d connections to b's proxy refused across the failover", n, n+dialed.Load())
	}
	if n := cb.dials.Load(); n != 1 {
		t.Errorf("the client connected %d times, want once: its connection was dropped", n)
	}
	telemetrySettings(t, tele, producer)
}
