package namesrv

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// deadNameServer is a dial seam for one name server address: its first
// connection attempt is refused at once, later ones hang as towards a
// host that drops packets (until the dial's context ends) until back is
// closed; from then on they reach the name server at to.
type deadNameServer struct {
	addr  string
	to    string
	back  chan struct{}
	dials atomic.Int32
}

func (d *deadNameServer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var dialer net.Dialer
	if addr != d.addr {
		return dialer.DialContext(ctx, network, addr)
	}
	if d.dials.Add(1) == 1 {
		return nil, errors.New("connection refused (test)")
	}
	select {
	case <-d.back:
		return dialer.DialContext(ctx, network, d.to)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// RocketMQ's broker registers only with the name servers its scan could
// connect to (BrokerOuterAPI.registerBrokerAll takes
// NettyRemotingClient.getAvailableNameSrvList, which scanAvailableNameSrv
// refreshes every connectTimeoutMillis), so a name server that does not
// accept connections no longer costs each registration a connect timeout
// (3 s). Once its connection failed, Register leaves it out without a
// dial; Scan finds it again when it accepts connections, and the next
// registration reaches it. Asserted on dial counts, not durations: a
// registration that dialed the dead name server again would count it.
func TestRegisterSkipsANameServerThatCouldNotBeConnected(t *testing.T) {
	live, _ := startNameServer(t, nil)
	returning, _ := startNameServer(t, nil)
	dead := &deadNameServer{addr: "192.0.2.1:9876", to: returning.Addr().String(), back: make(chan struct{})}
	pool := remoting.NewClientPool(remoting.ClientOptions{DialContext: dead.dial})
	t.Cleanup(func() { _ = pool.Close() })
	var back []string
	reg := NewRegistrar(pool, live.Addr().String()+";"+dead.addr, zerolog.Nop())
	info := brokerInfo("broker-a", "10.0.0.1:10911", 0)
	// Two topics: a first registration of one topic is refused (Java
	// takes it for a single-topic update).
	body := &RegisterBrokerBody{DataVersion: DataVersion{Counter: 1, Timestamp: 1}, TopicConfigTable: manyTopics(2)}
	body.TopicConfigTable["T"] = TopicConfig{TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicFilterType: SingleTag}

	results, err := reg.Register(testCtx(t), info, body)
	if err != nil || results[0].Err != nil || results[1].Err == nil {
		t.Fatalf("first registration: %+v, %v; want the live name server's success and the refused one's failure", results, err)
	}
	if got := reg.Available(); !slices.Equal(got, []string{live.Addr().String()}) {
		t.Fatalf("available name servers after a refused connection: %v", got)
	}
	for round := range 3 {
		results, err = reg.Register(testCtx(t), info, body)
		if err != nil || results[0].Err != nil || !errors.Is(results[1].Err, ErrUnavailable) {
			t.Fatalf("registration %d with a name server known unreachable: %+v, %v", round+2, results, err)
		}
	}
	if n := dead.dials.Load(); n != 1 {
		t.Fatalf("the unreachable name server was dialed %d times over four registrations, want once (the first)", n)
	}

	// A scan while it still drops connections leaves it out.
	if back = reg.Scan(testCtx(t), 50*time.Millisecond); len(back) != 0 {
		t.Fatalf("scan of a name server that drops connections found %v back", back)
	}
	close(dead.back)
	if back = reg.Scan(testCtx(t), 10*time.Second); !slices.Equal(back, []string{dead.addr}) {
		t.Fatalf("scan after the name server came back returned %v, want [%s]", back, dead.addr)
	}
	if got := reg.Available(); len(got) != 2 {
		t.Fatalf("available name servers after it came back: %v", got)
	}
	results, err = reg.Register(testCtx(t), info, body)
	if err != nil || results[0].Err != nil || results[1].Err != nil {
		t.Fatalf("registration after the name server came back: %+v, %v", results, err)
	}
	if _, ok := returning.Registry().Route("T"); !ok {
		t.Fatal("the name server that came back does not route the broker's topic")
	}
	// Unregistration still asks every name server, as RocketMQ's
	// unregisterBrokerAll (getNameServerAddressList).
	if err := reg.Unregister(testCtx(t), info); err != nil {
		t.Fatal(err)
	}
}

// Every name server down: the registration fails without dialing, and
// SetNameServers forgets what it knew of a removed address.
func TestRegisterWithEveryNameServerUnreachable(t *testing.T) {
	dead := &deadNameServer{addr: "192.0.2.1:9876", back: make(chan struct{})}
	pool := remoting.NewClientPool(remoting.ClientOptions{DialContext: dead.dial})
	t.Cleanup(func() { _ = pool.Close() })
	reg := NewRegistrar(pool, dead.addr, zerolog.Nop())
	info := brokerInfo("broker-a", "10.0.0.1:10911", 0)
	body := &RegisterBrokerBody{TopicConfigTable: map[string]TopicConfig{}}
	if _, err := reg.Register(testCtx(t), info, body); err == nil {
		t.Fatal("registration with a refused name server succeeded")
	}
	results, err := reg.Register(testCtx(t), info, body)
	if err == nil || len(results) != 1 || !errors.Is(results[0].Err, ErrUnavailable) {
		t.Fatalf("registration with the only name server unreachable: %+v, %v", results, err)
	}
	if n := dead.dials.Load(); n != 1 {
		t.Fatalf("%d dials, want 1", n)
	}
	reg.SetNameServers("")
	reg.SetNameServers(dead.addr)
	if got := reg.Available(); !slices.Equal(got, []string{dead.addr}) {
		t.Fatalf("a name server removed and added again is still taken as unreachable: available %v", got)
	}
}

// A REGISTER_BROKER answer whose body is not a KV table (the
// ORDER_TOPIC_CONFIG table RocketMQ's name server returns) still counts
// as a registration, without order topics, and is logged.
func TestRegisterLogsAnAnswerBodyThatIsNotAKVTable(t *testing.T) {
	addr := startAnswering(t, func(req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.Body = []byte("{not json")
		return resp
	})
	logs := &testutil.SyncBuffer{}
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	t.Cleanup(func() { _ = pool.Close() })
	reg := NewRegistrar(pool, addr, zerolog.New(logs))
	results, err := reg.Register(testCtx(t), brokerInfo("broker-a", "10.0.0.1:10911", 0), &RegisterBrokerBody{TopicConfigTable: manyTopics(2)})
	if err != nil || results[0].Err != nil || results[0].OrderTopicConfig != nil {
		t.Fatalf("registration answered with a body that is not JSON: %+v, %v", results, err)
	}
	if !strings.Contains(logs.String(), "ORDER_TOPIC_CONFIG table is not JSON") {
		t.Fatalf("nothing logged of the answer's body; logs:\n%s", logs.String())
	}
}

// Route requests ask the name servers Register reaches first and those
// whose connection failed last, each part in namesrvAddr order.
func TestPreferAvailablePutsTheUnreachableLast(t *testing.T) {
	live, _ := startNameServer(t, nil)
	dead := &deadNameServer{addr: "192.0.2.1:9876", back: make(chan struct{})}
	pool := remoting.NewClientPool(remoting.ClientOptions{DialContext: dead.dial})
	t.Cleanup(func() { _ = pool.Close() })
	reg := NewRegistrar(pool, dead.addr+";"+live.Addr().String()+";192.0.2.2:9876", zerolog.Nop())
	if got, want := reg.PreferAvailable(), []string{dead.addr, live.Addr().String(), "192.0.2.2:9876"}; !slices.Equal(got, want) {
		t.Fatalf("before any connection attempt: %v, want namesrvAddr's order %v", got, want)
	}
	reg.setDown(dead.addr, true)
	if got, want := reg.PreferAvailable(), []string{live.Addr().String(), "192.0.2.2:9876", dead.addr}; !slices.Equal(got, want) {
		t.Fatalf("with the first one unreachable: %v, want %v", got, want)
	}
}

// SetNameServers while a registration is under way: the registration
// ends with the list it started with, and the failed connection attempt
// of a name server removed meanwhile is not recorded, so that the
// address, configured again, is tried again.
func TestSetNameServersDuringARegistration(t *testing.T) {
	live, _ := startNameServer(t, nil)
	const gone = "192.0.2.1:9876"
	dialing := make(chan struct{})
	fail := make(chan struct{})
	pool := remoting.NewClientPool(remoting.ClientOptions{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != gone {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		close(dialing)
		<-fail
		return nil, errors.New("connection refused (test)")
	}})
	t.Cleanup(func() { _ = pool.Close() })
	reg := NewRegistrar(pool, gone, zerolog.Nop())
	done := make(chan []Registration, 1)
	go func() {
		results, _ := reg.Register(testCtx(t), brokerInfo("broker-a", "10.0.0.1:10911", 0), &RegisterBrokerBody{TopicConfigTable: manyTopics(2)})
		done <- results
	}()
	<-dialing
	reg.SetNameServers(live.Addr().String())
	close(fail)
	if results := <-done; len(results) != 1 || results[0].NameServer != gone || results[0].Err == nil {
		t.Fatalf("registration under way: %+v, want the failure of the name server it started with", results)
	}
	reg.SetNameServers(live.Addr().String() + ";" + gone)
	if got := reg.Available(); !slices.Equal(got, []string{live.Addr().String(), gone}) {
		t.Fatalf("available after the removed name server is configured again: %v, want both", got)
	}
}

// waitConns waits until ns holds want connections.
func waitConns(t *testing.T, ns *Server, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for ns.rs.ConnCount() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the name server holds %d connections, want %d", what, ns.rs.ConnCount(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A name server SetNameServers removes has its connection closed, as
// RocketMQ's NettyRemotingClient.updateNameServerAddressList closes the
// channel of a name server no longer listed: the name server sees it
// close and drops the broker's routes (its connection-close hook, as
// RocketMQ's BrokerHousekeepingService), while the one kept keeps its
// connection. A connection a request under way at the change opened again
// (a route fetch, say) is closed by the next Scan; an address configured
// again is left alone.
func TestSetNameServersClosesTheRemovedNameServersConnection(t *testing.T) {
	removed, _ := startNameServer(t, nil)
	kept, _ := startNameServer(t, nil)
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	t.Cleanup(func() { _ = pool.Close() })
	reg := NewRegistrar(pool, removed.Addr().String()+";"+kept.Addr().String(), zerolog.Nop())
	info := brokerInfo("broker-a", "10.0.0.1:10911", 0)
	body := &RegisterBrokerBody{TopicConfigTable: manyTopics(2)}
	body.TopicConfigTable["T"] = TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6, TopicFilterType: SingleTag}
	if _, err := reg.Register(testCtx(t), info, body); err != nil {
		t.Fatal(err)
	}
	waitConns(t, removed, 1, "registered")
	keptClient, err := pool.Get(testCtx(t), kept.Addr().String())
	if err != nil {
		t.Fatal(err)
	}

	reg.SetNameServers(kept.Addr().String())

	waitConns(t, removed, 0, "after its removal")
	deadline := time.Now().Add(5 * time.Second)
	for _, routed := removed.Registry().Route("T"); routed; _, routed = removed.Registry().Route("T") {
		if time.Now().After(deadline) {
			t.Fatal("the removed name server still routes the broker after its connection closed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if c, err := pool.Get(testCtx(t), kept.Addr().String()); err != nil || c != keptClient || c.Closed() {
		t.Fatalf("kept name server's client: %p (had %p), %v; want it untouched", c, keptClient, err)
	}
	waitConns(t, kept, 1, "kept")

	// A route fetch that took the old list dials the removed one again.
	if _, err := FetchRoute(testCtx(t), pool, []string{removed.Addr().String()}, "T", 2*time.Second); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("route from the removed name server: %v", err)
	}
	waitConns(t, removed, 1, "dialed by a stale route fetch")
	reg.Scan(testCtx(t), time.Second)
	waitConns(t, removed, 0, "after a scan")

	reg.SetNameServers(removed.Addr().String() + ";" + kept.Addr().String())
	if _, err := reg.Register(testCtx(t), info, body); err != nil {
		t.Fatal(err)
	}
	again, err := pool.Get(testCtx(t), removed.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	reg.Scan(testCtx(t), time.Second)
	if again.Closed() {
		t.Fatalf("name server configured again: a scan closed its connection (%v)", again.Err())
	}
}
