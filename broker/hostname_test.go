package broker

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rs/zerolog"
)

// A brokerIP1 host name is what the broker registers with the name
// servers and names itself by, as RocketMQ's getBrokerAddr, while the
// messages it stores carry the address the name resolves to.
func TestBrokerIP1HostName(t *testing.T) {
	ns := startTestNameServer(t)
	b := startTestBroker(t, map[string]string{"brokerIP1": "localhost", "namesrvAddr": ns.Addr().String()})
	port := strconv.Itoa(int(b.hostAddr().Port()))
	want := net.JoinHostPort("localhost", port)
	if got := b.Addr(); got != want {
		t.Fatalf("Addr %q, want %q", got, want)
	}
	if got, wantHA := b.haServerAddr(), "localhost:"; !strings.HasPrefix(got, wantHA) {
		t.Fatalf("HA address %q, want the host name", got)
	}
	c := b.client(nil)
	sent := mustSend(t, c, "HostNameT", 0, "m", "")
	b.caughtUp()
	waitForRoute(t, ns, "HostNameT", "the broker named "+want, func(r *namesrv.TopicRouteData) bool {
		return len(r.BrokerDatas) == 1 && r.BrokerDatas[0].BrokerAddrs[namesrv.MasterID] == want
	})
	got := pullAll(t, b, c, "HostNameT", 0)
	if len(got) != 1 {
		t.Fatalf("pulled %d messages, want 1", len(got))
	}
	// (The port is listenPort's, 0 in tests: the log opens before the
	// server binds.)
	if host := got[0].StoreHost; host.Addr().String() != "127.0.0.1" {
		t.Fatalf("store host %v, want 127.0.0.1 (localhost resolved)", host)
	}
	host, _, err := commitlog.ParseMessageID(sent.ExtFields["msgId"])
	if err != nil || host.Addr().String() != "127.0.0.1" {
		t.Fatalf("the send's message id %q: %v, %v; want the resolved address", sent.ExtFields["msgId"], host, err)
	}
}

// A brokerIP1 that is neither an address nor a name that resolves stops
// New with an error that names the key.
func TestBrokerIP1Unresolvable(t *testing.T) {
	loaded, err := configs.LoadBroker("", map[string]string{"storePathRootDir": t.TempDir(), "brokerIP1": "no-such-host.invalid"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(loaded.Broker, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), `brokerIP1 "no-such-host.invalid"`) {
		t.Fatalf("New with an unresolvable brokerIP1: %v", err)
	}
}
