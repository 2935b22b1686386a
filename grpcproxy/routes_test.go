package grpcproxy

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/remoting"
)

// countingNamesrv is a name server that answers every route request with
// an empty route after a pause, counting the requests.
func countingNamesrv(t *testing.T, pause time.Duration) (addr string, asked *atomic.Int32) {
	t.Helper()
	asked = new(atomic.Int32)
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.GetRouteInfoByTopic, func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		asked.Add(1)
		time.Sleep(pause)
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = []byte(`{"queueDatas":[],"brokerDatas":[]}`)
		_ = conn.Reply(req, resp)
	})
	ns := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, mux, zerolog.Nop())
	if err := ns.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Shutdown(context.Background()) })
	return ns.Addr().String(), asked
}

// Concurrent lookups of a route that is not cached ask the name servers
// once, and a caller that gives up does not fail the others waiting for
// the same lookup.
func TestRouteMissesCollapse(t *testing.T) {
	addr, asked := countingNamesrv(t, 300*time.Millisecond)
	cfg := DefaultConfig()
	cfg.NamesrvAddrs = []string{addr}
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	t.Cleanup(func() { _ = pool.Close() })
	rs := newRoutes(pool, &cfg)

	impatient, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := rs.get(impatient, "CollapseT")
		first <- err
	}()
	for asked.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-first; err == nil {
		t.Fatal("a cancelled lookup returned a route")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := rs.get(context.Background(), "CollapseT")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("lookup failed: %v", err)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("the name server was asked %d times for one route, want once", n)
	}
}

// A route query that names no endpoints is answered with the address the
// client's connection reached, not the proxy's listen address, which is
// "::" when it listens on every interface.
func TestRouteEndpointsWithoutTheClients(t *testing.T) {
	c := startTestCluster(t, func(cfg *Config) { cfg.Addr = ":0" })
	_, port, err := net.SplitHostPort(c.proxy.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(net.JoinHostPort("127.0.0.1", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The topic is routed once the broker's registration of it reaches
	// the name server.
	c.createTopic(t, "RouteNoEndpoints", 1, "")
	deadline := time.Now().Add(20 * time.Second)
	var resp *rmqpb.QueryRouteResponse
	for {
		resp, err = rmqpb.NewMessagingServiceClient(conn).QueryRoute(callCtx(t, "no-endpoints", 10*time.Second),
			&rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "RouteNoEndpoints"}})
		if err == nil && resp.GetStatus().GetCode() == rmqpb.Code_OK && len(resp.GetMessageQueues()) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("QueryRoute: %v %v", resp.GetStatus(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p, _ := strconv.Atoi(port)
	want := &rmqpb.Endpoints{Scheme: rmqpb.AddressScheme_IPv4, Addresses: []*rmqpb.Address{{Host: "127.0.0.1", Port: int32(p)}}}
	if got := resp.GetMessageQueues()[0].GetBroker().GetEndpoints(); !proto.Equal(got, want) {
		t.Fatalf("endpoints %v, want the address the client reached, %v", got, want)
	}
}

// System topics and consumer groups are refused as RocketMQ's proxy
// refuses them: a client can neither route, send to nor receive from the
// broker's own topics, nor consume as one of its groups.
func TestSystemTopicsAndGroupsAreRefused(t *testing.T) {
	c := startTestCluster(t, nil)
	c.createTopic(t, "UserTopic", 1, "")
	for _, topic := range []string{"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_wheel_timer"} {
		r, err := c.rpc.QueryRoute(callCtx(t, "sys", 5*time.Second), &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: topic}, Endpoints: c.proxyEndpoints(t)})
		if err != nil || r.GetStatus().GetCode() != rmqpb.Code_ILLEGAL_TOPIC {
			t.Errorf("QueryRoute %s: %v %v, want ILLEGAL_TOPIC", topic, r.GetStatus(), err)
		}
		s, err := c.rpc.SendMessage(callCtx(t, "sys", 5*time.Second), &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{newMessage(topic, "injected")}})
		if err != nil || s.GetStatus().GetCode() != rmqpb.Code_ILLEGAL_TOPIC {
			t.Errorf("SendMessage to %s: %v %v, want ILLEGAL_TOPIC", topic, s.GetStatus(), err)
		}
	}
	if st, msgs := c.receiveOnce(t, "sys", receiveRequest("CID_RMQ_SYS_X", "UserTopic", 20*time.Second, time.Second), 10*time.Second); st.GetCode() != rmqpb.Code_ILLEGAL_CONSUMER_GROUP || len(msgs) != 0 {
		t.Errorf("receive as CID_RMQ_SYS_X: %v, %d messages; want ILLEGAL_CONSUMER_GROUP", st, len(msgs))
	}
}
