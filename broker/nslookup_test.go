package broker

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// addressServer is a loopback HTTP address server answering GETs of
// path with status and body, which the test changes as it goes; asked
// counts the requests answered.
type addressServer struct {
	srv    *httptest.Server
	mu     sync.Mutex
	status int
	body   string
	paths  []string
	asked  atomic.Int64
}

func startAddressServer(t *testing.T, body string) *addressServer {
	t.Helper()
	a := &addressServer{status: http.StatusOK, body: body}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		status, body := a.status, a.body
		a.paths = append(a.paths, r.URL.Path)
		a.mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
		a.asked.Add(1)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// answer makes the server answer status and body from now on.
func (a *addressServer) answer(status int, body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status, a.body = status, body
}

// domain is the server's host:port, as rmqAddressServerDomain names it.
func (a *addressServer) domain() string { return strings.TrimPrefix(a.srv.URL, "http://") }

// waitAsked waits until the server has answered n more requests than
// when it was called: refreshes that saw its current answer.
func (a *addressServer) waitAsked(t *testing.T, n int64) {
	t.Helper()
	want := a.asked.Load() + n
	waitFor(t, "the address server asked again", func() bool { return a.asked.Load() >= want })
}

// registeredWith reports whether the broker is in ns's cluster table.
func registeredWith(ns *namesrv.Server) bool {
	return len(ns.Registry().ClusterInfo().BrokerAddrTable) == 1
}

// RocketMQ's broker without namesrvAddr and with
// fetchNamesrvAddrByAddressServer takes its name servers from
// http://<rmqAddressServerDomain>/rocketmq/<rmqAddressServerSubGroup>
// every fetchNamesrvAddrInterval. rocketkv asks as it starts, so its
// first registration reaches them, picks a changed list up at a refresh
// and registers with it, and keeps its list when the server fails or
// answers something that is no list, logging why.
func TestNameServersFromAddressServer(t *testing.T) {
	ns1, ns2 := startTestNameServer(t), startTestNameServer(t)
	addr1, addr2 := ns1.Addr().String(), ns2.Addr().String()
	as := startAddressServer(t, addr1+"\n")
	var logs testutil.SyncBuffer
	tb := startTestBrokerWith(t, t.TempDir(), map[string]string{"fetchNamesrvAddrByAddressServer": "true",
		"rmqAddressServerDomain": as.domain(), "rmqAddressServerSubGroup": "nsaddr-test", "fetchNamesrvAddrInterval": "20"},
		func(b *Broker) {
			b.log = zerolog.New(&logs)
			b.nsLookupDelay = 20 * time.Millisecond
		})
	// Asked before the first registration, which Start waits for.
	if got := tb.register.ns.NameServers(); !slices.Equal(got, []string{addr1}) || !registeredWith(ns1) {
		t.Fatalf("after Start: name servers %v, registered with the first: %v", got, registeredWith(ns1))
	}
	as.mu.Lock()
	path := as.paths[0]
	as.mu.Unlock()
	if path != "/rocketmq/nsaddr-test" {
		t.Errorf("address server asked for %s, want /rocketmq/nsaddr-test", path)
	}

	as.answer(http.StatusOK, " "+addr2+";"+addr1+"\r\n")
	waitFor(t, "both name servers taken from the address server, and registered with", func() bool {
		return slices.Equal(tb.register.ns.NameServers(), []string{addr2, addr1}) && registeredWith(ns2)
	})

	// What the broker keeps its list through, each logged.
	for _, c := range []struct {
		status int
		body   string
		log    string
	}{
		{http.StatusInternalServerError, addr1, "status other than 200"},
		{http.StatusOK, " \n", "no name server address"},
		{http.StatusOK, "<html>moved</html>", "is not host:port"},
		{http.StatusOK, addr1 + ";10.0.0.1", "is not host:port"},
	} {
		as.answer(c.status, c.body)
		as.waitAsked(t, 3)
		if got := tb.register.ns.NameServers(); !slices.Equal(got, []string{addr2, addr1}) {
			t.Fatalf("answer %d %q changed the name servers to %v", c.status, c.body, got)
		}
		if !strings.Contains(logs.String(), c.log) {
			t.Errorf("answer %d %q: no log line saying %q:\n%s", c.status, c.body, c.log, logs.String())
		}
	}
	as.srv.CloseClientConnections()

	as.answer(http.StatusOK, addr1)
	waitFor(t, "the list of the address server back to the first name server", func() bool {
		return slices.Equal(tb.register.ns.NameServers(), []string{addr1})
	})
	if !strings.Contains(logs.String(), "name server lookup works again") {
		t.Errorf("no log line of the lookup working again:\n%s", logs.String())
	}

	// Its name servers are the address server's until a restart.
	c := tb.client(nil)
	r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte("namesrvAddr="+addr2))
	if r.Code != remoting.SystemError || !strings.Contains(r.Remark, "address server") {
		t.Errorf("namesrvAddr set on a broker of an address server: %d %q, want SYSTEM_ERROR naming the address server", r.Code, r.Remark)
	}
}

// An address server that is down at the start leaves the broker without
// name servers, serving; it registers once the server answers.
func TestAddressServerDownAtStart(t *testing.T) {
	ns := startTestNameServer(t)
	as := startAddressServer(t, "")
	as.answer(http.StatusServiceUnavailable, "")
	tb := startTestBrokerWith(t, t.TempDir(), map[string]string{"fetchNamesrvAddrByAddressServer": "true",
		"rmqAddressServerDomain": as.domain(), "fetchNamesrvAddrInterval": "20"},
		func(b *Broker) { b.nsLookupDelay = 20 * time.Millisecond })
	if got := tb.register.ns.NameServers(); len(got) != 0 {
		t.Fatalf("name servers %v from a failing address server", got)
	}
	as.answer(http.StatusOK, ns.Addr().String())
	waitFor(t, "registered once the address server answers", func() bool { return registeredWith(ns) })
}

// dnsTable is a resolver seam whose answers the test changes; a name it
// does not hold fails to resolve.
type dnsTable struct {
	mu    sync.Mutex
	hosts map[string][]string
}

func (d *dnsTable) set(host string, ips ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ips == nil {
		delete(d.hosts, host)
		return
	}
	d.hosts[host] = ips
}

func (d *dnsTable) resolve(_ context.Context, host string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ips, ok := d.hosts[host]; ok {
		return slices.Clone(ips), nil
	}
	return nil, errors.New("lookup " + host + ": no such host")
}

// RocketMQ's broker with fetchNameSrvAddrByDnsLookup registers with
// every address namesrvAddr's host resolves to, with its port, resolved
// as it starts and every updateNameServerAddrPeriod; a lookup that fails
// keeps the list.
func TestNameServersByDNSLookup(t *testing.T) {
	ns1, ns2 := startTestNameServer(t), startTestNameServer(t)
	// The addresses DNS gives, dialled at the test's name servers.
	dial := mappedDial(map[string]string{"10.1.0.1:9876": ns1.Addr().String(), "10.1.0.2:9876": ns2.Addr().String()})
	dns := &dnsTable{hosts: map[string][]string{"ns.test": {"10.1.0.1"}}}
	var logs testutil.SyncBuffer
	tb := startTestBrokerWith(t, t.TempDir(), map[string]string{"namesrvAddr": "ns.test:9876",
		"fetchNameSrvAddrByDnsLookup": "true", "updateNameServerAddrPeriod": "20"},
		func(b *Broker) {
			b.log = zerolog.New(&logs)
			b.namesrvDial = dial
			b.nsResolve = dns.resolve
			b.nsLookupDelay = 20 * time.Millisecond
		})
	if got := tb.register.ns.NameServers(); !slices.Equal(got, []string{"10.1.0.1:9876"}) || !registeredWith(ns1) {
		t.Fatalf("after Start: name servers %v, registered with the first: %v", got, registeredWith(ns1))
	}

	dns.set("ns.test", "10.1.0.1", "10.1.0.2")
	waitFor(t, "both addresses of ns.test registered with", func() bool {
		return slices.Equal(tb.register.ns.NameServers(), []string{"10.1.0.1:9876", "10.1.0.2:9876"}) && registeredWith(ns2)
	})

	dns.set("ns.test")
	waitFor(t, "a failed lookup logged", func() bool { return strings.Contains(logs.String(), "no such host") })
	time.Sleep(100 * time.Millisecond) // several more failed lookups
	if got := tb.register.ns.NameServers(); !slices.Equal(got, []string{"10.1.0.1:9876", "10.1.0.2:9876"}) {
		t.Fatalf("a failing lookup changed the name servers to %v", got)
	}

	dns.set("ns.test", "10.1.0.2")
	waitFor(t, "the one address left of ns.test", func() bool {
		return slices.Equal(tb.register.ns.NameServers(), []string{"10.1.0.2:9876"})
	})

}

// A namesrvAddr changed by UPDATE_BROKER_CONFIG is looked up before the
// answer (RocketMQ's broker looks it up at its next period), and the
// broker registers with what it resolves to; GET_BROKER_CONFIG reports
// it as set.
func TestDNSLookupOfAChangedNamesrvAddr(t *testing.T) {
	ns1, ns2 := startTestNameServer(t), startTestNameServer(t)
	at := map[string]string{"10.1.0.1:9876": ns1.Addr().String(), "10.1.0.2:9877": ns2.Addr().String()}
	dns := &dnsTable{hosts: map[string][]string{"ns.test": {"10.1.0.1"}, "other.test": {"10.1.0.2", "10.1.0.3"}}}
	tb := startTestBrokerWith(t, t.TempDir(), map[string]string{"namesrvAddr": "ns.test:9876",
		"fetchNameSrvAddrByDnsLookup": "true", "updateNameServerAddrPeriod": "3600000"},
		func(b *Broker) {
			b.namesrvDial = mappedDial(at)
			b.nsResolve = dns.resolve
			b.nsLookupDelay = time.Hour // no periodic lookup meanwhile
		})
	c := tb.client(nil)
	updateConfig(t, c, "namesrvAddr=other.test:9877")
	if got := tb.register.ns.NameServers(); !slices.Equal(got, []string{"10.1.0.2:9877", "10.1.0.3:9877"}) || !registeredWith(ns2) {
		t.Errorf("when the change of namesrvAddr was answered: name servers %v, registered with other.test's: %v", got, registeredWith(ns2))
	}
	if settings, _ := brokerSettings(t, c); settings["namesrvAddr"] != "other.test:9877" {
		t.Errorf("GET_BROKER_CONFIG namesrvAddr=%s, want it as set", settings["namesrvAddr"])
	}
}

// mappedDial dials the addresses of at (those DNS gives) at the test's
// name servers, and refuses any other.
func mappedDial(at map[string]string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, ok := at[addr]
		if !ok {
			return nil, errors.New("no route to " + addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, to)
	}
}

// A period that is not positive is refused when its lookup is used, as
// RocketMQ's scheduler refuses it at start, and accepted otherwise; so is
// an address server that makes no URL.
func TestNameServerLookupConfigChecked(t *testing.T) {
	for _, c := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"fetchNamesrvAddrByAddressServer": "true", "fetchNamesrvAddrInterval": "0"}, "fetchNamesrvAddrInterval"},
		{map[string]string{"fetchNamesrvAddrByAddressServer": "true", "rmqAddressServerDomain": ""}, "rmqAddressServerDomain"},
		{map[string]string{"fetchNamesrvAddrByAddressServer": "true", "rmqAddressServerDomain": "a b"}, "rmqAddressServerDomain"},
		{map[string]string{"namesrvAddr": "ns.test:9876", "fetchNameSrvAddrByDnsLookup": "true", "updateNameServerAddrPeriod": "-1"}, "updateNameServerAddrPeriod"},
		{map[string]string{"namesrvAddr": "ns.test:9876", "fetchNamesrvAddrByAddressServer": "true", "fetchNamesrvAddrInterval": "0"}, ""},
		{map[string]string{"fetchNameSrvAddrByDnsLookup": "true", "updateNameServerAddrPeriod": "0"}, ""},
		{map[string]string{"fetchNamesrvAddrByAddressServer": "true"}, ""},
	} {
		loaded, err := configs.LoadBroker("", c.set)
		if err != nil {
			t.Fatal(err)
		}
		err = CheckConfig(loaded.Broker)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want an error naming %q", c.set, err, c.want)
		}
	}
}
