package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
	"github.com/rs/zerolog"
)

// RocketMQ's broker reads enableReconnectForGoAway (default true) for its
// name-server connections: a registration that a stopping name server
// (enableShutdownGracefully) answers GO_AWAY is sent once more on a new
// connection to the same address, which, behind a load balancer or a DNS
// name, reaches another name server. With the key false the
// registration fails and its connection is closed, as RocketMQ closes the
// channel of a failed synchronous call, so the next one dials again.
func TestRegistrationReconnectsOnGoAway(t *testing.T) {
	for _, reconnect := range []bool{true, false} {
		t.Run(fmt.Sprintf("enableReconnectForGoAway=%v", reconnect), func(t *testing.T) {
			testRegistrationOnGoAway(t, reconnect)
		})
	}
}

func testRegistrationOnGoAway(t *testing.T, reconnect bool) {
	cfg := namesrv.DefaultConfig()
	cfg.Remoting.Addr = "127.0.0.1:0"
	cfg.Remoting.EventLoops = 1
	cfg.Remoting.GoAwayWait = time.Minute
	old := startNameServerWith(t, cfg, zerolog.Nop())
	next := startTestNameServer(t)
	// ns.test:9876 is the old name server until it goes away, then the
	// next one.
	var behind atomic.Pointer[string]
	oldAddr, nextAddr := old.Addr().String(), next.Addr().String()
	behind.Store(&oldAddr)
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, *behind.Load())
	}
	tb := startTestBrokerWith(t, t.TempDir(), map[string]string{"namesrvAddr": "ns.test:9876", "enableReconnectForGoAway": strconv.FormatBool(reconnect)},
		func(b *Broker) { b.namesrvDial = dial })
	if !registeredWith(old) {
		t.Fatal("not registered with the name server at start")
	}

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- old.Shutdown(ctx) }()
	defer func() {
		cancel()
		<-stopped
	}()
	probe, err := remoting.Dial(t.Context(), oldAddr, remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	waitFor(t, "the old name server going away", func() bool {
		_, err := probe.Invoke(t.Context(), remoting.NewRequest(remoting.GetAllTopicListFromNameServer, nil, nil))
		return errors.Is(err, remoting.ErrGoAway)
	})
	behind.Store(&nextAddr)

	rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer rcancel()
	tb.register.registerAndWait(rctx)
	if reconnect != registeredWith(next) {
		t.Fatalf("after a registration answered GO_AWAY: registered with the name server now behind the address %v, want %v",
			registeredWith(next), reconnect)
	}
	if !reconnect {
		tb.register.registerAndWait(rctx)
		if !registeredWith(next) {
			t.Fatal("the registration after the one answered GO_AWAY did not dial again")
		}
	}
}

// A slave syncs from its master with the broker's client settings, as
// RocketMQ's BrokerOuterAPI: a master connection answered GO_AWAY is
// replaced by a new one (enableReconnectForGoAway), which a load balancer
// in front of the master, say, takes to another server; off, the request
// fails with the GO_AWAY.
func TestSlaveSyncReconnectsOnGoAway(t *testing.T) {
	for _, reconnect := range []bool{true, false} {
		t.Run(fmt.Sprintf("enableReconnectForGoAway=%v", reconnect), func(t *testing.T) {
			slave := startTestBroker(t, map[string]string{"enableReconnectForGoAway": strconv.FormatBool(reconnect)})
			testSlaveSyncOnGoAway(t, slave, reconnect)
		})
	}
}

// enableReconnectForGoAway changes while the broker runs
// (UPDATE_BROKER_CONFIG), and the next GO_AWAY follows it: RocketMQ's
// broker registers its NettyClientConfig with its Configuration, so an
// update sets the key in the config object its BrokerOuterAPI client
// reads at each GO_AWAY.
func TestReconnectForGoAwayChangesAtRunTime(t *testing.T) {
	slave := startTestBroker(t, nil)
	c := slave.client(nil)
	updateConfig(t, c, "enableReconnectForGoAway=false")
	testSlaveSyncOnGoAway(t, slave, false)
	updateConfig(t, c, "enableReconnectForGoAway=true")
	testSlaveSyncOnGoAway(t, slave, true)
}

// testSlaveSyncOnGoAway syncs slave from a master whose first connection
// answers GO_AWAY and whose later ones know no request, and checks the
// outcome against enableReconnectForGoAway (reconnect).
func testSlaveSyncOnGoAway(t *testing.T, slave *testBroker, reconnect bool) {
	t.Helper()
	var first atomic.Uint64
	var conns sync.Map
	master := startRemotingServer(t, remoting.RespondFunc(func(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		conns.Store(conn.ID(), true)
		first.CompareAndSwap(0, conn.ID())
		if conn.ID() == first.Load() {
			return remoting.NewResponse(req, remoting.GoAway, "please go away")
		}
		return remoting.NotSupportedResponse(req)
	}))
	err := slave.syncFromMaster(t.Context(), master)
	if err == nil {
		t.Fatal("a master that answers nothing synced")
	}
	if got := strings.Contains(err.Error(), "GO_AWAY"); got == reconnect {
		t.Errorf("enableReconnectForGoAway=%v: sync error names GO_AWAY: %v, want %v: %v", reconnect, got, !reconnect, err)
	}
	// Off, the request answered GO_AWAY fails and its connection is
	// closed, so the sync's next request dials again, as RocketMQ's next
	// invokeSync does.
	n := 0
	conns.Range(func(any, any) bool { n++; return true })
	if n != 2 {
		t.Errorf("enableReconnectForGoAway=%v: the master saw requests on %d connections, want 2", reconnect, n)
	}
}
