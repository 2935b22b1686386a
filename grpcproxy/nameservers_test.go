package grpcproxy

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/namesrv"
)

// addressServer is an httptest address server whose answer the test
// changes: a body with status 200, or a failing status. It records the
// paths asked for and counts the requests.
type addressServer struct {
	srv *httptest.Server

	mu     sync.Mutex
	body   string
	status int
	paths  []string
}

func startAddressServer(t *testing.T, body string) *addressServer {
	t.Helper()
	a := &addressServer{body: body, status: http.StatusOK}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.paths = append(a.paths, r.URL.Path)
		status, body := a.status, a.body
		a.mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// answer makes the server answer body with status from now on.
func (a *addressServer) answer(status int, body string) {
	a.mu.Lock()
	a.status, a.body = status, body
	a.mu.Unlock()
}

// asked returns how many requests the server had.
func (a *addressServer) asked() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.paths)
}

// waitAsked waits until the server had n requests.
func (a *addressServer) waitAsked(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for a.asked() < n {
		if time.Now().After(deadline) {
			t.Fatalf("address server asked %d times, want %d", a.asked(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// routeCode asks the proxy for topic's route and returns the answer's
// code.
func routeCode(t *testing.T, c *testCluster, topic string) rmqpb.Code {
	t.Helper()
	r, err := c.rpc.QueryRoute(callCtx(t, "ns-lookup", 10*time.Second),
		&rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: topic}, Endpoints: c.proxyEndpoints(t)})
	if err != nil {
		t.Fatalf("QueryRoute %s: %v", topic, err)
	}
	return r.GetStatus().GetCode()
}

// A proxy with an address server (namesrvDomain) takes its name servers
// from it, not from namesrvAddr: the list served at start is used, a
// changed list is picked up by the next refresh and route lookups reach
// the name server it names, and a failing server or an answer that is
// no list keeps the list the proxy has.
func TestAddressServerNameServers(t *testing.T) {
	dead := deadAddr(t)
	as := startAddressServer(t, dead+"\n")
	c := startTestCluster(t, func(cfg *Config) {
		// namesrvAddr would reach the name server; the address server
		// wins over it, as in RocketMQ's proxy.
		cfg.AddressServer = as.srv.URL + "/rocketmq/"
		cfg.AddressServerDelay, cfg.AddressServerPeriod = 50*time.Millisecond, 50*time.Millisecond
		cfg.RequestTimeout = 500 * time.Millisecond
	})
	c.proxy.cfg.NamesrvAddrs = nil // proves nothing reads it after New
	c.createTopic(t, "AddrServerTopic", 2, "")

	if got := c.proxy.ns.get(); !slices.Equal(got, []string{dead}) {
		t.Fatalf("name servers after start %v, want the address server's %v", got, []string{dead})
	}
	if code := routeCode(t, c, "AddrServerTopic"); code == rmqpb.Code_OK {
		t.Fatalf("route found through %s, which no name server listens on", dead)
	}

	// A changed list: the next refresh uses it, and routes come from the
	// name server it names.
	as.answer(http.StatusOK, " "+c.nsAddr+";"+c.nsAddr+"\r\n")
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(c.proxy.ns.get(), []string{c.nsAddr}) {
		if time.Now().After(deadline) {
			t.Fatalf("name servers %v, want the changed list %s", c.proxy.ns.get(), c.nsAddr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code := routeCode(t, c, "AddrServerTopic"); code != rmqpb.Code_OK {
		t.Fatalf("route through the address server's name server: %v, want OK", code)
	}

	// A failing server and an answer that is no list keep the list: a
	// topic not cached yet is still routed.
	for i, bad := range []struct {
		status int
		body   string
	}{{http.StatusInternalServerError, dead}, {http.StatusOK, "not an address"}, {http.StatusOK, "\n"}} {
		as.answer(bad.status, bad.body)
		as.waitAsked(t, as.asked()+2)
		if got := c.proxy.ns.get(); !slices.Equal(got, []string{c.nsAddr}) {
			t.Fatalf("answer %d %q: name servers %v, want %s kept", bad.status, bad.body, got, c.nsAddr)
		}
		topic := "AddrServerKept" + string(rune('A'+i))
		c.createTopic(t, topic, 1, "")
		if code := routeCode(t, c, topic); code != rmqpb.Code_OK {
			t.Fatalf("answer %d %q: route of %s %v, want OK through the kept name server", bad.status, bad.body, topic, code)
		}
	}

	as.mu.Lock()
	defer as.mu.Unlock()
	for _, p := range as.paths {
		if p != "/rocketmq/" {
			t.Fatalf("address server asked for %q, want /rocketmq/", p)
		}
	}
}

// namesrvDomain wins over namesrvAddr, and the URL is RocketMQ's: port
// 8080 unless the domain names one, an empty subgroup leaving the path
// at /rocketmq/. Without namesrvDomain namesrvAddr is used.
func TestConfigFromNamesrvDomain(t *testing.T) {
	for _, tc := range []struct {
		overrides map[string]string
		want      string
	}{
		{map[string]string{"namesrvDomain": "addr.example:8081"}, "http://addr.example:8081/rocketmq/"},
		{map[string]string{"namesrvDomain": "addr.example", "namesrvDomainSubgroup": "nsaddr", "namesrvAddr": "10.0.0.1:9876"}, "http://addr.example:8080/rocketmq/nsaddr"},
		{map[string]string{"namesrvAddr": "10.0.0.1:9876"}, ""},
	} {
		loaded, err := configs.LoadProxy("", tc.overrides)
		if err != nil {
			t.Fatalf("%v: %v", tc.overrides, err)
		}
		if len(loaded.InertKeys) != 0 {
			t.Errorf("%v: inert keys %v", tc.overrides, loaded.InertKeys)
		}
		c, err := ConfigFrom(loaded.Proxy, DefaultConfig().Log)
		if err != nil {
			t.Fatalf("%v: %v", tc.overrides, err)
		}
		if c.AddressServer != tc.want {
			t.Errorf("%v: address server %q, want %q", tc.overrides, c.AddressServer, tc.want)
		}
		if err := c.validate(); err != nil {
			t.Errorf("%v: %v", tc.overrides, err)
		}
	}
	c := DefaultConfig()
	c.NamesrvAddrs, c.AddressServer = nil, "http:///rocketmq/"
	if err := c.validate(); err == nil {
		t.Error("an address server URL without a host validated")
	}
	c.AddressServer = ""
	if err := c.validate(); err == nil {
		t.Error("neither name servers nor an address server validated")
	}
}

// Before the address server has given a list, the proxy's lookups of
// every master (for users and access lists) fail naming the missing name
// servers rather than finding no broker.
func TestAllMastersWithoutNameServers(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NamesrvAddrs, cfg.AddressServer = nil, "http://127.0.0.1:1/rocketmq/"
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.pool.Close() })
	if m, err := s.allMasters(context.Background()); !errors.Is(err, namesrv.ErrNoNameServer) {
		t.Fatalf("allMasters: %v, %v; want ErrNoNameServer", m, err)
	}
}
