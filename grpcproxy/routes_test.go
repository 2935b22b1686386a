package grpcproxy

import (
	"context"
	"encoding/json"
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
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/remoting"
)

// answeringServer is a Remoting server answering every request of code
// with body after pause, counting the requests.
func answeringServer(t *testing.T, code int32, body []byte, pause time.Duration) (addr string, asked *atomic.Int32) {
	t.Helper()
	asked = new(atomic.Int32)
	mux := remoting.NewMux()
	mux.HandleFunc(code, func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		asked.Add(1)
		time.Sleep(pause)
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = body
		_ = conn.Reply(req, resp)
	})
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, mux, zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return srv.Addr().String(), asked
}

// countingNamesrv is a name server that answers every route request with
// an empty route after a pause, counting the requests.
func countingNamesrv(t *testing.T, pause time.Duration) (addr string, asked *atomic.Int32) {
	t.Helper()
	return answeringServer(t, remoting.GetRouteInfoByTopic, []byte(`{"queueDatas":[],"brokerDatas":[]}`), pause)
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
	bg := newBackground()
	t.Cleanup(bg.stop)
	rs := newRoutes(pool, &cfg, newNameServers(cfg.NamesrvAddrs), bg)

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

// stallingServer is a Remoting server that answers the first request of
// code with body and holds every later one unanswered until the test
// ends: a name server or broker that hangs after its first answer. asked
// counts the requests.
func stallingServer(t *testing.T, code int32, body []byte) (addr string, asked *atomic.Int32) {
	t.Helper()
	asked = new(atomic.Int32)
	release := make(chan struct{})
	mux := remoting.NewMux()
	mux.HandleFunc(code, func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) {
		if asked.Add(1) > 1 {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = body
		_ = conn.Reply(req, resp)
	})
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, mux, zerolog.Nop())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	t.Cleanup(func() { close(release) }) // before the shutdown
	return srv.Addr().String(), asked
}

// stopWithin stops bg, failing the test unless it returns within 10 s.
func stopWithin(t *testing.T, bg *background, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		bg.stop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("shutdown waited for %s", what)
	}
}

// A cached route past its TTL is answered at once while it is refreshed
// in the background, as RocketMQ's proxy does (TopicRouteService:
// refreshAfterWrite): no call waits for a name server that hangs (each
// may take a request timeout). Shutdown cancels the refresh, and a
// refresh that failed keeps the route.
func TestStaleRouteAnsweredWhileItIsRefreshed(t *testing.T) {
	addr, asked := stallingServer(t, remoting.GetRouteInfoByTopic, []byte(`{"queueDatas":[],"brokerDatas":[]}`))
	cfg := DefaultConfig()
	cfg.NamesrvAddrs = []string{addr}
	cfg.RouteTTL = time.Millisecond
	cfg.RequestTimeout = time.Minute // a refresh outlasts the test
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	t.Cleanup(func() { _ = pool.Close() })
	bg := newBackground()
	t.Cleanup(bg.stop)
	rs := newRoutes(pool, &cfg, newNameServers(cfg.NamesrvAddrs), bg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cached, err := rs.get(ctx, "StaleT")
	if err != nil {
		t.Fatalf("first lookup: %v", err)
	}
	for time.Since(cached.at) <= cfg.RouteTTL {
		time.Sleep(time.Millisecond)
	}
	for range 3 {
		if got, err := rs.get(ctx, "StaleT"); err != nil || got != cached {
			t.Fatalf("lookup of a route past its TTL answered %p, %v; want the cached route %p at once", got, err, cached)
		}
	}
	waitFor(t, "the route refreshed in the background", func() bool { return asked.Load() >= 2 })
	stopWithin(t, bg, "a route refresh held up by a name server that does not answer")
	// Stopped, the proxy looks nothing up: a route is the one kept.
	if _, err := rs.get(ctx, "StaleT"); err != nil {
		t.Fatalf("after a failed refresh, lookup answered %v; want the route kept", err)
	}
}

// A group's cached policy past the route TTL is answered at once while
// it is refreshed in the background, as routes are: a receive does not
// wait for a broker that hangs, nor gets the defaults (a FIFO group taken
// for a concurrent one) meanwhile.
func TestStaleGroupPolicyAnsweredWhileItIsRefreshed(t *testing.T) {
	const group = "StalePolicyGroup"
	gc := meta.NewSubscriptionGroupConfig(group)
	gc.ConsumeMessageOrderly = true
	body, err := json.Marshal(gc)
	if err != nil {
		t.Fatal(err)
	}
	addr, asked := stallingServer(t, remoting.GetSubscriptionGroupConfig, body)
	p := startProxyWithoutCluster(t, func(cfg *Config) {
		cfg.GroupPolicyTTL = time.Millisecond
		cfg.RequestTimeout = time.Minute // a refresh outlasts the test
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if gp := p.groupPolicyAt(ctx, []string{addr}, group); !gp.orderly {
		t.Fatalf("first read: %+v, want orderly", gp)
	}
	c, ok := p.policies.Get(group)
	if !ok {
		t.Fatal("the policy read is not cached")
	}
	for time.Since(c.at) <= time.Millisecond {
		time.Sleep(time.Millisecond)
	}
	for range 3 {
		if gp := p.groupPolicyAt(ctx, []string{addr}, group); !gp.orderly {
			t.Fatalf("read of a policy past its TTL answered %+v; want the cached orderly policy at once", gp)
		}
	}
	waitFor(t, "the policy refreshed in the background", func() bool { return asked.Load() >= 2 })
	stopWithin(t, p.bg, "a policy refresh held up by a broker that does not answer")
	if gp := p.groupPolicyAt(ctx, []string{addr}, group); !gp.orderly {
		t.Fatalf("after a failed refresh, read answered %+v; want the orderly policy kept", gp)
	}
}

// The route cache keeps at most RouteCacheSize routes, the least recently
// asked for going first, and drops a route no call asked for in
// RouteIdle (topicRouteServiceCacheMaxNum and ...ExpiredSeconds, as
// RocketMQ's proxy's cache): the next call for it asks the name servers
// again, while a route asked for within the idle time stays.
func TestRouteCacheBoundAndIdleRoutes(t *testing.T) {
	addr, asked := countingNamesrv(t, 0)
	newCache := func(size int, idle time.Duration) *routes {
		cfg := DefaultConfig()
		cfg.NamesrvAddrs = []string{addr}
		cfg.RouteTTL = time.Hour
		cfg.RouteCacheSize, cfg.RouteIdle = size, idle
		pool := remoting.NewClientPool(remoting.ClientOptions{})
		t.Cleanup(func() { _ = pool.Close() })
		bg := newBackground()
		t.Cleanup(bg.stop)
		return newRoutes(pool, &cfg, newNameServers(cfg.NamesrvAddrs), bg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lookups := func(rs *routes, topics ...string) int32 {
		t.Helper()
		before := asked.Load()
		for _, topic := range topics {
			if _, err := rs.get(ctx, topic); err != nil {
				t.Fatalf("route of %s: %v", topic, err)
			}
		}
		return asked.Load() - before
	}

	bounded := newCache(2, 0)
	if n := lookups(bounded, "BoundA", "BoundB", "BoundC"); n != 3 {
		t.Fatalf("%d lookups for three new topics", n)
	}
	if n := lookups(bounded, "BoundB", "BoundC"); n != 0 {
		t.Fatalf("%d lookups for the two most recent topics, want them cached", n)
	}
	if n := lookups(bounded, "BoundA"); n != 1 {
		t.Fatalf("%d lookups for the topic dropped past the cache's size of 2, want 1", n)
	}

	const idle = 2 * time.Second
	idling := newCache(100, idle)
	lookups(idling, "IdleKept", "IdleDropped")
	for range 5 { // more than idle in all, each gap well under it
		time.Sleep(idle / 5)
		if n := lookups(idling, "IdleKept"); n != 0 {
			t.Fatalf("%d lookups for a route asked for every %v, want it cached", n, idle/5)
		}
	}
	if n := lookups(idling, "IdleDropped"); n != 1 {
		t.Fatalf("%d lookups for a route nobody asked for in %v, want 1", n, idle)
	}
}
