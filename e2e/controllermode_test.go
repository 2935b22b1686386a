package e2e

import (
	"context"
	"fmt"
	"net"
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

// TestControllerModeFailoverGoClient: a name server hosting the controller
// (enableControllerInNamesrv) and two brokers of one group in controller
// mode. The unchanged Go client sends through the group's master; the
// master is SIGKILLed; the controller elects the slave, which restarts as
// master (brokerId 0 at the name server) and the producer's sends succeed
// again without anything done to it.
func TestControllerModeFailoverGoClient(t *testing.T) {
	t.Parallel()
	cport := controllerPort(t)
	caddr := fmt.Sprintf("127.0.0.1:%d", cport)
	ns := startNamesrvWith(t, "enableControllerInNamesrv=true", "controllerDLegerGroup=group1",
		"controllerDLegerPeers=n0-"+caddr, "controllerDLegerSelfId=n0", "controllerStorePath="+t.TempDir(),
		"scanNotActiveBrokerInterval=200", "scanInactiveMasterInterval=200")
	waitListening(t, caddr)
	sets := append([]string{"enableControllerMode=true", "controllerAddr=" + caddr,
		"brokerHeartbeatInterval=200", "controllerHeartBeatTimeoutMills=1500",
		"syncBrokerMetadataPeriod=300", "checkSyncStateSetPeriod=300"}, fastHA...)
	master := startBroker(t, ns, brokerOpts{sets: sets})
	master.waitLog(t, "broker running as SYNC_MASTER", 30*time.Second)
	slave := startBroker(t, ns, brokerOpts{sets: sets})
	slave.waitLog(t, "broker running as SLAVE", 30*time.Second)

	const topic, queues = "E2EControllerMode", 4
	createTopic(t, master.addr, topic, queues)
	waitRoute(t, ns.addr, topic, master.name)
	// The slave copies the topic (slaveSyncIntervalMillis 300): elected,
	// it routes it.
	waitUntil(t, 30*time.Second, "the slave to copy the topic", func() bool {
		r, err := rawInvoke(slave.addr, 21, nil, nil) // GET_ALL_TOPIC_CONFIG
		return err == nil && strings.Contains(string(r.Body), topic)
	})
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
	master.kill()
	slave.waitLog(t, "broker running as SYNC_MASTER", 30*time.Second)
	after := ok.Load()
	// The Go client takes the new master from the route it refreshes
	// (every 30 s) or after a failed send.
	waitUntil(t, 90*time.Second, "sends to the new master", func() bool { return ok.Load() >= after+20 })
	t.Logf("sent %d, failed %d through the failover", ok.Load(), failed.Load())
}
