package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/controllertest"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/remoting"
)

// confirmGroup is the state of the tested group as its controller knows
// it: the master's address ("" when it has none) and how many brokers are
// in its sync state set.
func confirmGroup(peer *controllertest.Peer) (master string, inSync int) {
	st := peer.Controller.State()
	ss, reps := st.SyncStates["broker-a"], st.Replicas["broker-a"]
	if ss == nil || reps == nil || !ss.HasMaster {
		return "", 0
	}
	return reps.Brokers[ss.MasterID].Addr, len(ss.SyncStateSet)
}

// clientCache keeps one Remoting client per broker address, dropping one
// whose request failed (its broker was killed, say) so the next use dials
// again.
type clientCache struct {
	mu      sync.Mutex
	clients map[string]*remoting.Client
}

func (cc *clientCache) invoke(addr string, code int32, ext map[string]string, body []byte) (*remoting.Command, error) {
	cc.mu.Lock()
	c := cc.clients[addr]
	cc.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c == nil {
		var err error
		if c, err = remoting.Dial(ctx, addr, remoting.ClientOptions{}); err != nil {
			return nil, err
		}
		cc.mu.Lock()
		cc.clients[addr] = c
		cc.mu.Unlock()
	}
	resp, err := c.Invoke(ctx, remoting.NewRequest(code, ext, body))
	if err != nil {
		cc.mu.Lock()
		if cc.clients[addr] == c {
			delete(cc.clients, addr)
		}
		cc.mu.Unlock()
		_ = c.Close()
	}
	return resp, err
}

func (cc *clientCache) close() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for addr, c := range cc.clients {
		_ = c.Close()
		delete(cc.clients, addr)
	}
}

// With allAckInSyncStateSet the confirm limit keeps its promise across
// SIGKILLs of the master: a controller-mode group of two child brokers
// loses its master to a SIGKILL at a random moment, several times (its
// slave paused for a moment just before, so the master holds records the
// slave does not), while four senders keep sending to whichever broker
// the controller names master and a consumer keeps pulling from it; each
// killed broker starts again at once on its store. Afterwards every
// acknowledged message is in the queue of the last master exactly once,
// at the queue offset its send was acknowledged with, in the order of its
// sender's sends, and every record the consumer saw during the run is
// still there at the offset it saw it: no consumer ever read a record
// that a failover later took back.
func TestControllerModeConfirmLimitSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	const topic, kills, senders = "ConfirmKill", 4, 4
	peer := startTestControllers(t, 1, false, true)[0]
	waitUntil(t, 20*time.Second, "the controller to lead", peer.Controller.IsLeader)
	// A slave whose master did not answer EXCHANGE_BROKER_HA_INFO at its
	// switch (a master restarting its Broker) learns the master's HA
	// address from its name server's answer, as RocketMQ's does.
	nsAddr := startTestNameServer(t).Addr().String()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))

	var brokers [2]*childBroker
	for i := range brokers {
		port := testutil.FreePortPair(t)
		brokers[i] = &childBroker{t: t, store: t.TempDir(), port: port, extra: []string{
			"enableControllerMode=true", "controllerAddr=" + peer.Addr,
			"namesrvAddr=" + nsAddr, "registerNameServerPeriod=1000",
			"brokerClusterName=DefaultCluster", "brokerName=broker-a",
			"haListenPort=" + strconv.Itoa(port+1), "allAckInSyncStateSet=true",
			"brokerHeartbeatInterval=200", "controllerHeartBeatTimeoutMills=1500",
			"syncBrokerMetadataPeriod=300", "checkSyncStateSetPeriod=300", "syncControllerMetadataPeriod=1000",
			"haSendHeartbeatInterval=200", "slaveSyncIntervalMillis=300",
			// The file's role and id, which controller mode ignores.
			"brokerRole=SLAVE", "brokerId=7",
		}}
		t.Cleanup(brokers[i].kill)
	}
	brokers[0].start()
	brokers[1].start()
	byAddr := func(addr string) *childBroker {
		for _, b := range brokers {
			if addr == "127.0.0.1:"+strconv.Itoa(b.port) {
				return b
			}
		}
		t.Fatalf("the controller names master %q, no broker of the test", addr)
		return nil
	}

	clients := &clientCache{clients: map[string]*remoting.Client{}}
	t.Cleanup(clients.close)
	var (
		mu        sync.Mutex
		acked     = map[string]int64{} // body -> acknowledged queue offset
		ackOrder  [senders][]string    // per sender, its acknowledged bodies in send order
		seen      = map[int64]string{} // queue offset -> body the consumer read
		consumed  int
		conflicts []string
	)
	ackCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Several senders, each one message at a time with a new body each
	// try, keep several records in flight, written by the master and not
	// yet acknowledged by its slave, at every kill.
	sendLoop := func(sender int) {
		defer wg.Done()
		for seq := 0; ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			master, _ := confirmGroup(peer)
			if master == "" {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			body := fmt.Sprintf("s%d-%07d", sender, seq)
			resp, err := clients.invoke(master, remoting.SendMessageV2, map[string]string{
				"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0",
				"f": "0", "g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "",
			}, []byte(body))
			if err != nil || resp.Code != remoting.Success {
				// Not acknowledged (a killed master, a slave not yet
				// promoted, a timeout of the in-sync replicas): the
				// message may or may not be stored.
				time.Sleep(20 * time.Millisecond)
				continue
			}
			off, err := strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
			if err != nil {
				t.Errorf("send of %s acknowledged without a queue offset: %v", body, resp.ExtFields)
				return
			}
			mu.Lock()
			acked[body] = off
			ackOrder[sender] = append(ackOrder[sender], body)
			mu.Unlock()
		}
	}
	wg.Add(senders + 1)
	for i := range senders {
		go sendLoop(i)
	}
	go func() { // the consumer: pulls whichever broker is master
		defer wg.Done()
		next := int64(0)
		for {
			select {
			case <-stop:
				return
			default:
			}
			master, _ := confirmGroup(peer)
			if master == "" {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			resp, err := clients.invoke(master, remoting.PullMessage, pullReq("confirm-reader", topic, 0, next, 0, 0, "*"), nil)
			if err != nil || resp.Code != remoting.Success {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			for body := resp.Body; len(body) > 0; {
				m, err := commitlog.Decode(body)
				if err != nil {
					t.Errorf("decode a pulled record: %v", err)
					return
				}
				body = body[m.StoreSize:]
				mu.Lock()
				if was, ok := seen[m.QueueOffset]; ok && was != string(m.Body) {
					conflicts = append(conflicts, fmt.Sprintf("offset %d read as %q, later as %q", m.QueueOffset, was, m.Body))
				}
				seen[m.QueueOffset] = string(m.Body)
				consumed++
				mu.Unlock()
				next = m.QueueOffset + 1
			}
		}
	}()

	masters := map[string]bool{}
	for kill := 0; kill < kills; kill++ {
		before := ackCount()
		waitUntil(t, 40*time.Second, "a master with both brokers in its sync state set, taking sends", func() bool {
			m, n := confirmGroup(peer)
			return m != "" && n == 2 && ackCount() > before+20
		})
		time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
		master, _ := confirmGroup(peer)
		masters[master] = true
		victim := byAddr(master)
		slave := brokers[0]
		if slave == victim {
			slave = brokers[1]
		}
		// The slave pauses (a stall, well within its heartbeat timeout)
		// while the senders go on: the master holds records its slave
		// does not, the ones the confirm limit must keep from the
		// consumer, when it is killed.
		if err := slave.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(50+rng.IntN(300)) * time.Millisecond)
		victim.kill()
		if err := slave.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		t.Logf("kill %d: SIGKILLed master %s after %d acknowledged sends", kill+1, master, ackCount())
		// Back at once on its store: it rejoins as a slave (or is master
		// again, when the other broker was not in the set at the kill).
		victim.start()
	}
	before := ackCount()
	waitUntil(t, 40*time.Second, "the group to settle with both brokers in its sync state set", func() bool {
		m, n := confirmGroup(peer)
		return m != "" && n == 2 && ackCount() > before+20
	})
	close(stop)
	wg.Wait()
	master, _ := confirmGroup(peer)
	masters[master] = true
	if len(masters) < 2 {
		t.Fatalf("the group kept master %v through %d kills: no failover, the test proved nothing", masters, kills)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(conflicts) > 0 {
		t.Fatalf("the consumer read records a failover took back: %v", conflicts)
	}
	last := int64(-1) // the highest acknowledged offset
	for _, off := range acked {
		last = max(last, off)
	}
	mc := dialCtl(t, master)
	var final []string
	waitUntil(t, 20*time.Second, "the last acknowledged message readable on the master", func() bool {
		final = final[:0]
		for off := int64(0); ; {
			resp := call(t, mc, remoting.PullMessage, pullReq("confirm-check", topic, 0, off, 0, 0, "*"), nil)
			if resp.Code != remoting.Success {
				break
			}
			for _, m := range decodeRecords(t, resp.Body) {
				if m.QueueOffset != int64(len(final)) {
					t.Fatalf("the final queue holds offset %d after %d records: a gap", m.QueueOffset, len(final))
				}
				final = append(final, string(m.Body))
				off = m.QueueOffset + 1
			}
		}
		return int64(len(final)) > last
	})
	t.Logf("%d kills, masters %v; %d sends acknowledged, %d records in the queue, %d reads by the consumer (%d offsets)",
		kills, masters, len(acked), len(final), consumed, len(seen))
	where := map[string]int64{}
	for off, body := range final {
		if prev, dup := where[body]; dup {
			t.Fatalf("%s is in the queue twice, at %d and %d", body, prev, off)
		}
		where[body] = int64(off)
	}
	for _, bodies := range ackOrder {
		prev := int64(-1)
		for _, body := range bodies {
			off, ok := where[body]
			if !ok {
				t.Fatalf("acknowledged %s (queue offset %d) is not in the queue of the last master", body, acked[body])
			}
			if off != acked[body] {
				t.Fatalf("acknowledged %s at queue offset %d is at %d now", body, acked[body], off)
			}
			if off <= prev {
				t.Fatalf("acknowledged %s at %d, sent after its sender's message at %d", body, off, prev)
			}
			prev = off
		}
	}
	if len(seen) == 0 {
		t.Fatal("the consumer read nothing during the run")
	}
	for off, body := range seen {
		if off >= int64(len(final)) || final[off] != body {
			got := "nothing"
			if off < int64(len(final)) {
				got = strconv.Quote(final[off])
			}
			t.Fatalf("the consumer read %q at offset %d during the run; the last master holds %s there", body, off, got)
		}
	}
}
