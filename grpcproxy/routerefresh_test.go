package grpcproxy

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/remoting"
)

// switchingNamesrv is a name server whose answer to route requests the
// test changes, counting the requests.
type switchingNamesrv struct {
	addr  string
	route atomic.Pointer[string]
	asked atomic.Int32
	srv   *remoting.Server
}

func startSwitchingNamesrv(t *testing.T, route string) *switchingNamesrv {
	t.Helper()
	ns := &switchingNamesrv{}
	ns.route.Store(&route)
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.GetRouteInfoByTopic, func(_ context.Context, conn *remoting.Conn, req *remoting.Command) {
		ns.asked.Add(1)
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = []byte(*ns.route.Load())
		_ = conn.Reply(req, resp)
	})
	ns.srv = remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}, mux, zerolog.Nop())
	if err := ns.srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.srv.Shutdown(context.Background()) })
	ns.addr = ns.srv.Addr().String()
	return ns
}

// routeOf is a name server's route of one queue on broker-a, whose
// master is master ("": none).
func routeOf(master string) string {
	addrs := `{}`
	if master != "" {
		addrs = fmt.Sprintf(`{"0":%q}`, master)
	}
	return fmt.Sprintf(`{"brokerDatas":[{"cluster":"C","brokerName":"broker-a","brokerAddrs":%s}],`+
		`"queueDatas":[{"brokerName":"broker-a","readQueueNums":1,"writeQueueNums":1,"perm":6,"topicSysFlag":0}]}`, addrs)
}

// testRoutes returns routes asking the name server at nsAddr, whose
// routes live for an hour.
func testRoutes(t *testing.T, nsAddr string) *routes {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NamesrvAddrs = []string{nsAddr}
	cfg.RouteTTL = time.Hour
	cfg.RequestTimeout = 2 * time.Second
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	t.Cleanup(func() { _ = pool.Close() })
	bg := newBackground()
	t.Cleanup(bg.stop)
	return newRoutes(pool, &cfg, newNameServers(cfg.NamesrvAddrs), bg)
}

// masterNow returns broker-a's master in the route get answers.
func masterNow(t *testing.T, rs *routes, topic string) string {
	t.Helper()
	r, err := rs.get(context.Background(), topic)
	if err != nil {
		t.Fatalf("route of %s: %v", topic, err)
	}
	return r.masters["broker-a"]
}

// A master that refuses a request as a slave or a switching broker does
// (routes.refusedBy) has the next call wait for the route to be asked
// again, long before its TTL: a controller-mode group's new master is
// reached by the client's retry. A refusal by an address that is not
// the route's master, or of a route younger than the floor, changes
// nothing; a lookup that fails keeps the route.
func TestRouteRefreshedWhenItsMasterRefuses(t *testing.T) {
	const old, elected = "127.0.0.1:1", "127.0.0.1:2" // nothing listens: no message type read
	ns := startSwitchingNamesrv(t, routeOf(old))
	rs := testRoutes(t, ns.addr)
	rs.floor = 0
	if m := masterNow(t, rs, "T"); m != old {
		t.Fatalf("master %q, want %q", m, old)
	}
	ns.route.Store(ptr(routeOf(elected)))

	rs.refusedBy("127.0.0.1:3")
	if m := masterNow(t, rs, "T"); m != old || ns.asked.Load() != 1 {
		t.Fatalf("after a refusal by a broker that is not the route's master: master %q, name server asked %d times; want %q, once", m, ns.asked.Load(), old)
	}
	rs.refusedBy(old)
	if m := masterNow(t, rs, "T"); m != elected || ns.asked.Load() != 2 {
		t.Fatalf("after its master refused: master %q, name server asked %d times; want %q, twice", m, ns.asked.Load(), elected)
	}
	if m := masterNow(t, rs, "T"); m != elected || ns.asked.Load() != 2 {
		t.Fatalf("the refreshed route was asked again: master %q, name server asked %d times", m, ns.asked.Load())
	}

	// Within the floor a refusal is not taken.
	rs.floor = time.Hour
	ns.route.Store(ptr(routeOf(old)))
	rs.refusedBy(elected)
	if m := masterNow(t, rs, "T"); m != elected || ns.asked.Load() != 2 {
		t.Fatalf("a refusal within the floor refreshed the route: master %q, name server asked %d times", m, ns.asked.Load())
	}

	// The name server gone, the refused route serves on.
	rs.floor = 0
	_ = ns.srv.Shutdown(context.Background())
	rs.refusedBy(elected)
	if m := masterNow(t, rs, "T"); m != elected {
		t.Fatalf("with no name server the refused route was not kept: master %q", m)
	}
}

// A route in which a broker group has no master (its old master
// registered as a slave before the new one registered as master) is
// asked again after the floor, not after its TTL.
func TestRouteWithoutMasterRefreshedSoon(t *testing.T) {
	ns := startSwitchingNamesrv(t, routeOf(""))
	rs := testRoutes(t, ns.addr)
	rs.floor = 0
	if m := masterNow(t, rs, "T"); m != "" {
		t.Fatalf("master %q, want none", m)
	}
	ns.route.Store(ptr(routeOf("127.0.0.1:2")))
	deadline := time.Now().Add(20 * time.Second)
	for masterNow(t, rs, "T") != "127.0.0.1:2" {
		if time.Now().After(deadline) {
			t.Fatalf("the route without a master was not refreshed in 20 s (TTL an hour); name server asked %d times", ns.asked.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A route with its master lives its TTL.
	asked := ns.asked.Load()
	ns.route.Store(ptr(routeOf("127.0.0.1:4")))
	for range 5 {
		masterNow(t, rs, "T")
	}
	if ns.asked.Load() != asked {
		t.Fatalf("a route with its master was asked again before its TTL")
	}
}

// ptr returns a pointer to a copy of s.
func ptr(s string) *string { return &s }

// When a refresh finds a broker group's master replaced, the other
// cached routes naming the old master are asked again at their next
// call, without a refusal of their own (a topic only received from would
// otherwise pop from the demoted master until its TTL); routes naming
// another master are not.
func TestRouteMasterMovedRefreshesTheOtherRoutes(t *testing.T) {
	const old, elected = "127.0.0.1:1", "127.0.0.1:2"
	ns := startSwitchingNamesrv(t, routeOf(old))
	rs := testRoutes(t, ns.addr)
	rs.floor = 0
	for _, topic := range []string{"Sent", "Received"} {
		if m := masterNow(t, rs, topic); m != old {
			t.Fatalf("master of %s %q, want %q", topic, m, old)
		}
	}
	ns.route.Store(ptr(routeOf("127.0.0.1:5")))
	if m := masterNow(t, rs, "Elsewhere"); m != "127.0.0.1:5" {
		t.Fatalf("master of Elsewhere %q", m)
	}
	ns.route.Store(ptr(routeOf(elected)))
	rs.refusedBy(old)
	if m := masterNow(t, rs, "Sent"); m != elected {
		t.Fatalf("master of the refused topic %q, want %q", m, elected)
	}
	asked := ns.asked.Load()
	if m := masterNow(t, rs, "Received"); m != elected || ns.asked.Load() != asked+1 {
		t.Fatalf("the other route of the replaced master: master %q, name server asked %d more times; want %q, once", m, ns.asked.Load()-asked, elected)
	}
	if m := masterNow(t, rs, "Elsewhere"); m != "127.0.0.1:5" || ns.asked.Load() != asked+1 {
		t.Fatalf("a route of another master was asked again: master %q", m)
	}
}

// A refusal is kept by the refusing broker's address, not by the topic
// whose request met it: every cached route naming that master is asked
// again at its next call, even when the name servers still routed the
// refusing master when the refused topic's route was asked again (no
// move for the refresh to find), so a topic that shares the broker
// follows the election the name servers learn of afterwards. A route of
// another master is not asked again, nor is a route asked for after the
// refusal.
func TestRefusalThroughOneTopicRefreshesTheBrokersOtherTopics(t *testing.T) {
	const old, elected, other = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:5"
	ns := startSwitchingNamesrv(t, routeOf(other))
	rs := testRoutes(t, ns.addr)
	rs.floor = 0
	if m := masterNow(t, rs, "Elsewhere"); m != other {
		t.Fatalf("master of Elsewhere %q, want %q", m, other)
	}
	ns.route.Store(ptr(routeOf(old)))
	for _, topic := range []string{"Refused", "Shared"} {
		if m := masterNow(t, rs, topic); m != old {
			t.Fatalf("master of %s %q, want %q", topic, m, old)
		}
	}
	// The old master refuses a request of Refused; the name servers do
	// not know of the switch yet.
	rs.refusedBy(old)
	asked := ns.asked.Load()
	if m := masterNow(t, rs, "Refused"); m != old || ns.asked.Load() != asked+1 {
		t.Fatalf("the refused topic: master %q, name server asked %d more times; want %q, once", m, ns.asked.Load()-asked, old)
	}
	// Refused was asked for after the refusal: it serves until the next
	// news of its master.
	if m := masterNow(t, rs, "Refused"); m != old || ns.asked.Load() != asked+1 {
		t.Fatalf("a route asked for after the refusal was asked again: master %q, name server asked %d more times", m, ns.asked.Load()-asked)
	}
	// The election reaches the name servers: Shared, which met no
	// refusal of its own, follows it at its next call, and the move it
	// finds has Refused follow too.
	ns.route.Store(ptr(routeOf(elected)))
	if m := masterNow(t, rs, "Shared"); m != elected || ns.asked.Load() != asked+2 {
		t.Fatalf("the other topic of the refusing broker: master %q, name server asked %d more times; want %q, twice in all",
			m, ns.asked.Load()-asked, elected)
	}
	if m := masterNow(t, rs, "Elsewhere"); m != other || ns.asked.Load() != asked+2 {
		t.Fatalf("a route of another master was asked again: master %q, name server asked %d more times", m, ns.asked.Load()-asked)
	}
	if m := masterNow(t, rs, "Refused"); m != elected || ns.asked.Load() != asked+3 {
		t.Fatalf("after the move: master of Refused %q, name server asked %d more times; want %q, three times in all", m, ns.asked.Load()-asked, elected)
	}
}

// The news of a broker is forgotten once no cached route can be older:
// past RouteTTL, RouteIdle and a lookup's time (routes asked for before
// it have been asked again or are dropped as idle); with RouteIdle 0 it
// is kept.
func TestBrokerNewsForgottenWhenNoRouteCanBeOlder(t *testing.T) {
	rs := testRoutes(t, deadAddr(t))
	rs.idle = time.Minute
	now := time.Now()
	keep := rs.ttl + rs.idle + rs.loadTimeout()
	rs.news["old"] = brokerNews{refused: now.Add(-keep - time.Second)}
	rs.news["recent"] = brokerNews{refused: now.Add(-keep - time.Second), moved: now.Add(-keep + time.Second)}
	rs.mu.Lock()
	rs.forgetOldNews(now)
	_, oldKept := rs.news["old"]
	_, recentKept := rs.news["recent"]
	rs.idle = 0
	rs.news["old"] = brokerNews{refused: now.Add(-time.Hour * 24)}
	rs.forgetOldNews(now)
	_, keptForever := rs.news["old"]
	rs.mu.Unlock()
	if oldKept || !recentKept || !keptForever {
		t.Fatalf("kept: past the time %v, recent %v, with RouteIdle 0 %v; want false, true, true", oldKept, recentKept, keptForever)
	}
}
