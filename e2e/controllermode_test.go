package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// controllerPort returns a free port whose next port is free too (the
// controller's raft transport).
func controllerPort(t *testing.T) int {
	t.Helper()
	for range 100 {
		p := freePort(t)
		if !handedOut.claim(p + 1) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", p+1))
		if err != nil {
			continue
		}
		_ = l.Close()
		return p
	}
	t.Fatal("no free port pair")
	return 0
}

// startNamesrvWithController starts a name server hosting a one-peer
// controller (enableControllerInNamesrv) that scans for dead brokers and
// masters every 200 ms, and returns the controller's address with it.
func startNamesrvWithController(t *testing.T) (string, *namesrv) {
	t.Helper()
	caddr := fmt.Sprintf("127.0.0.1:%d", controllerPort(t))
	ns := startNamesrvWith(t, "enableControllerInNamesrv=true", "controllerDLegerGroup=group1",
		"controllerDLegerPeers=n0-"+caddr, "controllerDLegerSelfId=n0", "controllerStorePath="+t.TempDir(),
		"scanNotActiveBrokerInterval=200", "scanInactiveMasterInterval=200")
	waitListening(t, caddr)
	return caddr, ns
}

// TestControllerModeFailoverGoClient: a name server hosting the controller
// (enableControllerInNamesrv) and two brokers of one group in controller
// mode. The unchanged Go client sends through the group's master; the
// master is SIGKILLed; the controller elects the slave, which restarts as
// master (brokerId 0 at the name server) and the producer's sends succeed
// again without anything done to it.
func TestControllerModeFailoverGoClient(t *testing.T) {
	t.Parallel()
	caddr, ns := startNamesrvWithController(t)
	master, slave := startControllerModeGroup(t, ns, caddr)

	const topic, queues = "E2EControllerMode", 4
	createTopic(t, master.addr, topic, queues)
	waitRoute(t, ns.addr, topic, master.name)
	// The slave copies the topic (slaveSyncIntervalMillis 300): elected,
	// it routes it.
	waitTopicCopied(t, slave.addr, topic)
	p := newProducer(t, ns.addr, "pg-controller-mode")

	var ok, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(fmt.Sprintf("m-%d", i))))
			cancel()
			if err == nil && res.Status == primitive.SendOK {
				ok.Add(1)
			} else {
				failed.Add(1)
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()
	waitUntil(t, 30*time.Second, "sends to the master", func() bool { return ok.Load() >= 20 })
	checkBrokerEpochs(t, ns.addr, master, slave)
	master.kill()
	slave.waitLog(t, "broker running as SYNC_MASTER", 30*time.Second)
	after := ok.Load()
	// The Go client takes the new master from the route it refreshes
	// (every 30 s) or after a failed send.
	waitUntil(t, 90*time.Second, "sends to the new master", func() bool { return ok.Load() >= after+20 })
	t.Logf("sent %d, failed %d through the failover", ok.Load(), failed.Load())
}

// controllerGroup is what the controller at addr says of broker-a: master
// id and epoch, sync state set epoch, and how many members it counts alive.
func controllerGroup(addr string) (master, masterEpoch, setEpoch string, alive int, err error) {
	r, err := rawInvoke(addr, 1004, map[string]string{"brokerName": "broker-a"}, nil) // CONTROLLER_GET_REPLICA_INFO
	if err != nil {
		return "", "", "", 0, err
	}
	if r.Code != 0 {
		return "", "", "", 0, fmt.Errorf("replica info: code %d %s", r.Code, r.Remark)
	}
	var set struct {
		SyncStateSetEpoch int `json:"syncStateSetEpoch"`
	}
	if err := json.Unmarshal(r.Body, &set); err != nil {
		return "", "", "", 0, fmt.Errorf("replica info body %q: %w", r.Body, err)
	}
	d, err := rawInvoke(addr, 1006, nil, []byte(`["broker-a"]`)) // CONTROLLER_GET_SYNC_STATE_DATA
	if err != nil {
		return "", "", "", 0, err
	}
	alive = strings.Count(string(d.Body), `"alive":true`)
	return r.ExtFields["masterBrokerId"], r.ExtFields["masterEpoch"], strconv.Itoa(set.SyncStateSetEpoch), alive, nil
}

// TestControllerKillKeepsGroup: a controller, standalone (bin/controller)
// or inside the name server (enableControllerInNamesrv), and a group of
// two brokers in controller mode, the slave in the sync state set. The
// controller's process is SIGKILLed at random moments and restarted on
// its store, four times: each time it comes back with the group's master
// and epochs, both brokers heartbeat it again, and it elects nobody (no
// epoch moves, neither broker changes role) although its master scan runs
// every 200 ms and it heard from nobody when it started.
func TestControllerKillKeepsGroup(t *testing.T) {
	t.Parallel()
	for _, inNamesrv := range []bool{false, true} {
		name := "standalone"
		if inNamesrv {
			name = "in name server"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			controllerKillKeepsGroup(t, inNamesrv)
		})
	}
}

func controllerKillKeepsGroup(t *testing.T, inNamesrv bool) {
	cport := controllerPort(t)
	caddr := fmt.Sprintf("127.0.0.1:%d", cport)
	store := filepath.Join(t.TempDir(), "controller")
	var ns *namesrv
	var ctl *proc
	if inNamesrv {
		ns = startNamesrvWith(t, "enableControllerInNamesrv=true", "controllerDLegerGroup=group1",
			"controllerDLegerPeers=n0-"+caddr, "controllerDLegerSelfId=n0", "controllerStorePath="+store,
			"scanNotActiveBrokerInterval=200", "scanInactiveMasterInterval=200")
		ctl = ns.proc
	} else {
		ctl = startProc(t, "controller", "--peers", "n0-"+caddr, "--self-id", "n0", "--store", store,
			"--set", "controllerDLegerGroup=group1", "--set", "scanNotActiveBrokerInterval=200", "--set", "scanInactiveMasterInterval=200",
			"--log-format", "json", "--log-level", "debug")
		ns = startNamesrv(t)
	}
	waitListening(t, caddr)
	master, slave := startControllerModeGroup(t, ns, caddr)

	// The master puts the slave into the sync state set once it caught
	// up: from then on the slave is a candidate of any election.
	var masterID, epoch, setEpoch string
	waitUntil(t, 30*time.Second, "the slave in the sync state set", func() bool {
		if _, ok := groupInSync(caddr); !ok {
			return false
		}
		var (
			alive int
			err   error
		)
		masterID, epoch, setEpoch, alive, err = controllerGroup(caddr)
		return err == nil && alive == 2
	})
	roles := master.countLog("broker running as") + slave.countLog("broker running as")
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for kill := 0; kill < 4; kill++ {
		time.Sleep(time.Duration(rng.Intn(1000)) * time.Millisecond)
		ctl.kill()
		time.Sleep(time.Duration(rng.Intn(500)) * time.Millisecond)
		ctl.start(t)
		waitListening(t, caddr)
		waitUntil(t, 30*time.Second, "the restarted controller to hear from both brokers", func() bool {
			_, _, _, alive, err := controllerGroup(caddr)
			return err == nil && alive == 2
		})
		// Longer than the brokers' heartbeat timeout and many master
		// scans: a spurious election would have happened by now.
		time.Sleep(2 * time.Second)
		m, e, s, alive, err := controllerGroup(caddr)
		if err != nil {
			t.Fatalf("kill %d: %v", kill, err)
		}
		if m != masterID || e != epoch || s != setEpoch || alive != 2 {
			t.Fatalf("kill %d: the restarted controller has master %s epoch %s sync state set epoch %s (%d alive), before the kill master %s epoch %s sync state set epoch %s",
				kill, m, e, s, alive, masterID, epoch, setEpoch)
		}
		if n := master.countLog("broker running as") + slave.countLog("broker running as"); n != roles {
			t.Fatalf("kill %d: a broker changed its role after the controller restarted", kill)
		}
	}
}

// startControllerModeGroup starts two controller-mode brokers of one
// group under the controller at caddr, with quick heartbeats and HA and
// the settings of more, and waits until the first runs as master and the
// second as its slave.
func startControllerModeGroup(t *testing.T, ns *namesrv, caddr string, more ...string) (master, slave *brokerProc) {
	t.Helper()
	sets := append([]string{"enableControllerMode=true", "controllerAddr=" + caddr,
		"brokerHeartbeatInterval=200", "controllerHeartBeatTimeoutMills=1500",
		"syncBrokerMetadataPeriod=300", "checkSyncStateSetPeriod=300"}, fastHA...)
	sets = append(sets, more...)
	master = startBroker(t, ns, brokerOpts{sets: sets})
	master.waitLog(t, "broker running as SYNC_MASTER", 30*time.Second)
	slave = startBroker(t, ns, brokerOpts{sets: sets})
	slave.waitLog(t, "broker running as SLAVE", 30*time.Second)
	return master, slave
}

// checkBrokerEpochs runs bin/admin getBrokerEpoch on the group of master
// and slave: both brokers are printed, each with the epoch the controller
// gave the master, starting at 0 (the group's first), and the master's
// ends at its CommitLog end, past the messages sent.
func checkBrokerEpochs(t *testing.T, nsAddr string, master, slave *brokerProc) {
	t.Helper()
	var out []byte
	var err error
	// The slave registers with the name server after it takes its role.
	waitUntil(t, 30*time.Second, "getBrokerEpoch to list the master and the slave", func() bool {
		out, err = exec.Command(filepath.Join(binDir, "admin"), "getBrokerEpoch", "-n", nsAddr, "-b", master.name).CombinedOutput()
		return err == nil && strings.Contains(string(out), "#brokerAddr\t"+slave.addr)
	})
	blocks := map[string][]string{} // broker address -> its epoch lines
	var addr string
	for _, line := range strings.Split(string(out), "\n") {
		if a, ok := strings.CutPrefix(line, "#brokerAddr\t"); ok {
			addr = a
		} else if e, ok := strings.CutPrefix(line, "#Epoch: "); ok {
			blocks[addr] = append(blocks[addr], e)
		}
	}
	m, s := blocks[master.addr], blocks[slave.addr]
	if len(blocks) != 2 || len(m) != 1 || len(s) != 1 {
		t.Fatalf("getBrokerEpoch -b %s: want one epoch of each of %s and %s, got\n%s", master.name, master.addr, slave.addr, out)
	}
	var epoch, mEnd, sEpoch, sStart, sEnd int64
	var mStart int64 = -1
	if _, err := fmt.Sscanf(m[0], "EpochEntry{epoch=%d, startOffset=%d, endOffset=%d}", &epoch, &mStart, &mEnd); err != nil {
		t.Fatalf("master's epoch %q: %v", m[0], err)
	}
	if _, err := fmt.Sscanf(s[0], "EpochEntry{epoch=%d, startOffset=%d, endOffset=%d}", &sEpoch, &sStart, &sEnd); err != nil {
		t.Fatalf("slave's epoch %q: %v", s[0], err)
	}
	// Sends go on while the tool asks each broker in turn: the slave's
	// end is compared with the master's as a later call reads it, which
	// the slave's, read before, cannot pass.
	later, err := exec.Command(filepath.Join(binDir, "admin"), "getBrokerEpoch", "-n", nsAddr, "-b", master.name).CombinedOutput()
	if err != nil {
		t.Fatalf("getBrokerEpoch again: %v\n%s", err, later)
	}
	mEndLater := int64(-1)
	for _, line := range strings.Split(string(later), "\n") {
		if a, ok := strings.CutPrefix(line, "#brokerAddr\t"); ok {
			addr = a
		} else if e, ok := strings.CutPrefix(line, "#Epoch: "); ok && addr == master.addr {
			var le, ls int64
			if _, err := fmt.Sscanf(e, "EpochEntry{epoch=%d, startOffset=%d, endOffset=%d}", &le, &ls, &mEndLater); err != nil {
				t.Fatalf("master's epoch %q: %v", e, err)
			}
		}
	}
	if epoch < 1 || mStart != 0 || sEpoch != epoch || sStart != 0 || mEnd <= 0 || sEnd > mEndLater {
		t.Fatalf("getBrokerEpoch: master %q (end %d a call later), slave %q (want the same epoch from 0, the master's end past the sends, the slave's not past it)", m[0], mEndLater, s[0])
	}
}
