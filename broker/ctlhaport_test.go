package broker

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/testutil"
)

// A controller-mode broker keeps its HA port open through a switch: a
// slave of the group dialling it while it switches from slave to master
// is not refused (the port closed with each master Broker, and a slave's
// refused client tried again only after 5 s) but served by the master
// Broker's AutoSwitch server once it starts.
func TestControllerModeSwitchKeepsTheHAPort(t *testing.T) {
	// A run of this test once hung to go test's timeout on a loaded
	// machine, its stacks lost: the guard, its cleanup the last to run,
	// covers the brokers' shutdowns too and prints every goroutine's
	// stack.
	testutil.HangGuard(t, 5*time.Minute)
	ctlAddr, a, b := newCtlGroup(t, nil)
	haAddr := "127.0.0.1:" + b.settings["haListenPort"]
	// The connection made during the switch waits for the master
	// Broker's server up to the switch wait (1 s by default), which a
	// loaded machine's switch outlasted: the port then closed it, as it
	// should, and the test failed. A long wait keeps the test about the
	// port staying open.
	b.supervise = func(s *Supervisor) { s.switchWait = time.Minute }
	type dialled struct {
		conn net.Conn
		err  error
	}
	during := make(chan dialled, 1)
	var once sync.Once
	b.configure = func(br *Broker) {
		// The Broker of the new role, not started: with b's slave
		// Broker stopped, the middle of its switch to master.
		if br.cfg.BrokerRole == roleSyncMaster {
			once.Do(func() {
				c, err := net.Dial("tcp", haAddr)
				during <- dialled{c, err}
			})
		}
	}
	a.start()
	b.start()
	if !a.isMaster() {
		t.Fatal("the first broker is not the master")
	}
	// (Not ctlBroker.end: it reads a Broker's CommitLog field, which the
	// switch below clears, without a lock.)
	waitUntil(t, 20*time.Second, "the sync state set to hold both", func() bool {
		return len(a.sup.role().syncSet) == 2
	})
	designateMaster(t, ctlAddr, b.sup.BrokerID())
	var d dialled
	select {
	case d = <-during:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the second broker did not switch")
	}
	if d.err != nil {
		t.Fatalf("a connection to the HA port during the switch to master: %v", d.err)
	}
	defer d.conn.Close()
	local := d.conn.LocalAddr().String()
	waitUntil(t, 20*time.Second, "the master Broker's AutoSwitch server to take the connection made during its switch", func() bool {
		br := b.sup.Broker()
		if br == nil || br.repl.auto == nil {
			return false
		}
		for _, s := range br.repl.auto.Slaves() {
			if s.Addr == local {
				return true
			}
		}
		return false
	})
}

// haListenPortOf is RocketMQ's rule for the HA port: listenPort+1 unless
// haListenPort says otherwise (-1 none), and a system-chosen port (0)
// when the Remoting port is system-chosen too, where listenPort+1 would
// be port 1.
func TestHAListenPortOf(t *testing.T) {
	for _, c := range []struct{ listen, ha, want int }{
		{10911, 0, 10912}, {10911, 20912, 20912}, {10911, -1, -1}, {0, 0, 0}, {0, 30912, 30912},
	} {
		cfg := configs.DefaultBroker()
		cfg.ListenPort, cfg.HAListenPort = c.listen, c.ha
		if got := haListenPortOf(cfg); got != c.want {
			t.Errorf("listenPort=%d haListenPort=%d: HA port %d, want %d", c.listen, c.ha, got, c.want)
		}
	}
}
