package broker

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/namesrv"
)

// startNameServerAt starts a name server listening on addr ("127.0.0.1:0"
// for any port) whose registry reads the clock now, and expires brokers
// every 20 ms; it logs into logs when not nil.
func startNameServerAt(t *testing.T, addr string, now func() time.Time, logs *testutil.SyncBuffer) *namesrv.Server {
	t.Helper()
	cfg := namesrv.DefaultConfig()
	cfg.Remoting.Addr = addr
	cfg.Remoting.EventLoops = 1
	cfg.Now = now
	cfg.ScanInterval = 20 * time.Millisecond
	log := zerolog.Nop()
	if logs != nil {
		log = zerolog.New(logs)
	}
	return startNameServerWith(t, cfg, log)
}

// skewedClock is time.Now moved on by what ahead adds, safe for
// concurrent use.
type skewedClock struct{ skew atomic.Int64 }

func (c *skewedClock) now() time.Time        { return time.Now().Add(time.Duration(c.skew.Load())) }
func (c *skewedClock) ahead(d time.Duration) { c.skew.Add(int64(d)) }

// forceRegisterTopic is a topic every broker holds and registers.
const forceRegisterTopic = "TBW102"

// routed reports whether ns routes forceRegisterTopic.
func routed(ns *namesrv.Server) bool {
	_, ok := ns.Registry().Route(forceRegisterTopic)
	return ok
}

// RocketMQ's BrokerController.registerBrokerAll sends its periodic
// registration only when forceRegister (default true) is on or a name
// server lacks the data version of the broker's topics (needRegister,
// QUERY_DATA_VERSION). With the name server's route of a topic deleted
// behind the broker's back, a registration puts it back; with
// forceRegister=false the periodic one does not come while the name
// server holds the broker's data version. A slave registers every
// period whatever forceRegister says: its registration's answer is how
// it follows its master.
func TestForceRegisterDecidesWhetherThePeriodicRegistrationResendsTheTopics(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		resends  bool
	}{
		{"master, forceRegister default", nil, true},
		{"master, forceRegister=true", map[string]string{"forceRegister": "true"}, true},
		{"master, forceRegister=false", map[string]string{"forceRegister": "false"}, false},
		{"slave, forceRegister=false", map[string]string{"forceRegister": "false", "brokerRole": "SLAVE", "brokerId": "1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := startNameServerAt(t, "127.0.0.1:0", nil, nil)
			settings := map[string]string{"namesrvAddr": ns.Addr().String(), "registerNameServerPeriod": "50"}
			for k, v := range tc.settings {
				settings[k] = v
			}
			startTestBroker(t, settings)
			waitFor(t, "the broker's first registration", func() bool { return routed(ns) })
			ns.Registry().DeleteTopic(forceRegisterTopic, "")
			if tc.resends {
				waitFor(t, "a periodic registration that sends the deleted topic again", func() bool { return routed(ns) })
				return
			}
			// Twenty periods.
			time.Sleep(time.Second)
			if routed(ns) {
				t.Fatal("a periodic registration sent the topics again though the name server holds their data version")
			}
		})
	}
}

// A broker with forceRegister=false registers again once a name server
// lacks the data version of its topics: one that forgot the broker, and
// one restarted on the same address. Meanwhile its QUERY_DATA_VERSION
// requests renew it at the name server (RocketMQ's queryBrokerTopicConfig
// updates the broker's timestamp), so that it does not expire though it
// sends no registration for longer than the name server's 120 s.
func TestForceRegisterOffRegistersWhenTheNameServerLacksTheVersion(t *testing.T) {
	clock := &skewedClock{}
	logs := &testutil.SyncBuffer{}
	ns := startNameServerAt(t, "127.0.0.1:0", clock.now, logs)
	addr := ns.Addr().String()
	tb := startTestBroker(t, map[string]string{"namesrvAddr": addr, "registerNameServerPeriod": "50", "forceRegister": "false"})
	waitFor(t, "the broker's first registration", func() bool { return routed(ns) })
	ns.Registry().DeleteTopic(forceRegisterTopic, "")
	cluster, brokerAddr := tb.cfg.BrokerClusterName, tb.Addr()

	// 100 s twice, with periods between: 200 s since the registration,
	// 100 s since the broker's last data version query.
	for range 2 {
		clock.ahead(100 * time.Second)
		// Twenty periods: a loaded machine may delay a few queries,
		// and one after each jump is what keeps the broker alive.
		time.Sleep(time.Second)
	}
	if _, ok := ns.Registry().DataVersionOf(cluster, brokerAddr); !ok || strings.Contains(logs.String(), "broker expired") {
		t.Fatalf("the name server expired the broker: its data version queries did not renew it; logs:\n%s", logs.String())
	}
	if routed(ns) {
		t.Fatal("the broker registered though the name server holds its data version")
	}

	t.Run("name server forgot the broker", func(t *testing.T) {
		ns.Registry().Unregister(cluster, brokerAddr, tb.cfg.BrokerName)
		waitFor(t, "a registration with the name server that forgot the broker", func() bool { return routed(ns) })
	})

	t.Run("name server restarted", func(t *testing.T) {
		if err := ns.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		again := startNameServerAt(t, addr, nil, nil)
		waitFor(t, "a registration with the restarted name server", func() bool { return routed(again) })
	})
}

// forceRegister changes at run time (UPDATE_BROKER_CONFIG), as RocketMQ
// reads it at each periodic registration: turned off, the periods stop
// resending the topics the name server holds the data version of;
// turned on again, the next period sends them.
func TestForceRegisterChangesAtRunTime(t *testing.T) {
	ns := startNameServerAt(t, "127.0.0.1:0", nil, nil)
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String(), "registerNameServerPeriod": "50"})
	c := tb.client(nil)
	waitFor(t, "the broker's first registration", func() bool { return routed(ns) })
	updateConfig(t, c, "forceRegister=false")
	// A periodic registration begun before the change may still send the
	// topics once, however late a loaded machine lets it run: the second
	// round of twenty periods must not.
	for round := 1; ; round++ {
		ns.Registry().DeleteTopic(forceRegisterTopic, "")
		time.Sleep(time.Second)
		if !routed(ns) {
			break
		}
		if round == 2 {
			t.Fatal("with forceRegister turned off periodic registrations sent the topics again, twice")
		}
	}
	updateConfig(t, c, "forceRegister=true")
	waitFor(t, "a periodic registration once forceRegister is on again", func() bool { return routed(ns) })
}
