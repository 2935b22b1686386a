package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// RocketMQ's AdminBrokerProcessor.updateAndCreateTopic calls
// registerIncrementBrokerData (synchronous: BrokerOuterAPI.registerBrokerAll
// waits on its latch) before it answers SUCCESS, so once mqadmin updateTopic
// returns the name servers route the topic.
func TestACreatedTopicIsRoutedWhenAnswered(t *testing.T) {
	ns := startTestNameServer(t)
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String()})
	waitFor(t, "the broker registered", func() bool { return len(ns.Registry().ClusterInfo().BrokerAddrTable) == 1 })
	c := tb.client(nil)
	createTopic(t, c, "RegSyncTopic", 4, 4)
	if _, found := ns.Registry().Route("RegSyncTopic"); !found {
		t.Fatal("UPDATE_AND_CREATE_TOPIC answered SUCCESS before the name server knew the topic (RocketMQ registers before answering)")
	}
}

// RocketMQ's AdminBrokerProcessor.updateBrokerConfig calls
// registerBrokerAll(false, false, true) before answering when the body has
// brokerPermission: producers stop being routed to the broker once
// mqadmin updateBrokerConfig returns.
func TestABrokerPermissionChangeIsRoutedWhenAnswered(t *testing.T) {
	ns := startTestNameServer(t)
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String()})
	c := tb.client(nil)
	createTopic(t, c, "RegPermTopic", 4, 4)
	waitForRoutePerm(t, ns, "RegPermTopic", 6)
	updateConfig(t, c, "brokerPermission=4\n")
	r, _ := ns.Registry().Route("RegPermTopic")
	if r == nil || len(r.QueueDatas) != 1 || r.QueueDatas[0].Perm != 4 {
		t.Fatalf("UPDATE_BROKER_CONFIG brokerPermission=4 answered SUCCESS while the name server routes %+v (RocketMQ registers before answering)", r)
	}
}

// With compressedRegister=false (the default) RocketMQ's BrokerController
// always registers the plain JSON body (RegisterBrokerBody.encode(false)),
// which carries each topic's topicSysFlag into the name server's QueueData.
// rocketkv switches to the compressed form above 1,000 topics by itself,
// whose topic text (TopicConfig.encode) has no topicSysFlag, only when no
// topic has one; every unit topic of a large broker used to be routed
// with topicSysFlag 0.
func TestALargeTopicTableKeepsItsTopicSysFlags(t *testing.T) {
	ns := startTestNameServer(t)
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String()})
	var cfgs []meta.TopicConfig
	for i := range 1001 {
		tc := meta.NewTopicConfig(fmt.Sprintf("RegBulk%04d", i), 1)
		cfgs = append(cfgs, tc)
	}
	unit := meta.NewTopicConfig("RegUnitTopic", 2)
	unit.TopicSysFlag = 1
	cfgs = append(cfgs, unit)
	if err := tb.topics.put(cfgs...); err != nil {
		t.Fatal(err)
	}
	waitForRoute(t, ns, "RegUnitTopic", "routed", func(*namesrv.TopicRouteData) bool { return true })
	r, _ := ns.Registry().Route("RegUnitTopic")
	if r.QueueDatas[0].TopicSysFlag != 1 {
		t.Fatalf("route of a topic with topicSysFlag 1 on a broker of %d topics: %+v", len(cfgs), r.QueueDatas)
	}
}

// hangingNameServer stands in for a name server that answers every
// request SUCCESS, and REGISTER_BROKER only once released while hung.
type hangingNameServer struct {
	addr      string
	hung      atomic.Bool
	release   chan struct{}
	releaseMu sync.Once
	registers atomic.Int32
}

func startHangingNameServer(t *testing.T) *hangingNameServer {
	t.Helper()
	ns := &hangingNameServer{release: make(chan struct{})}
	ns.addr = startRemotingServer(t, remoting.RespondFunc(func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		if req.Code == remoting.RegisterBroker {
			if ns.hung.Load() {
				<-ns.release
			}
			ns.registers.Add(1)
		}
		return remoting.NewResponse(req, remoting.Success, "")
	}))
	// Before the server's shutdown, which waits for its handlers.
	t.Cleanup(ns.open)
	return ns
}

// open lets the hung registrations be answered.
func (ns *hangingNameServer) open() { ns.releaseMu.Do(func() { close(ns.release) }) }

// UPDATE_AND_CREATE_TOPIC answers once the broker registered (RocketMQ's
// admin processor registers before it answers, on a thread of its admin
// pool: sends and pulls have pools of their own). Here every request
// shares the server's workers, so the wait for a name server that hangs
// (up to registerBrokerTimeoutMills, 24 s) runs off the worker: more
// topic creations than there are workers are all taken in while the name
// server hangs, other requests are served meanwhile, and each creation
// is answered SUCCESS once the registration ended, none before.
func TestTopicCreationsWaitForTheRegistrationOffTheWorkers(t *testing.T) {
	ns := startHangingNameServer(t)
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.addr})
	waitFor(t, "the broker registered", func() bool { return ns.registers.Load() > 0 })
	c := tb.client(nil)
	ns.hung.Store(true)
	n := 2 * max(16, 4*runtime.GOMAXPROCS(0)) // remoting's default worker count, twice
	reqs := make([]*remoting.Command, n)
	for i := range reqs {
		reqs[i] = remoting.NewRequest(remoting.UpdateAndCreateTopic, map[string]string{
			"topic": fmt.Sprintf("HungReg%03d", i), "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
		}, nil)
	}
	answers := invokeAll(t, c, reqs)
	waitFor(t, "every topic created while the name server hangs", func() bool {
		for i := range n {
			if _, ok, _ := tb.topics.table.Get(fmt.Sprintf("HungReg%03d", i)); !ok {
				return false
			}
		}
		return true
	})
	answeredAfterFlush(t, c, answers, n, ns.open, "topic creation")
}

// UPDATE_BROKER_CONFIG with brokerPermission waits for its registration
// off the worker too. Each change is sent once the one before it took
// effect, so that each changes the permission (and registers).
func TestPermissionChangesWaitForTheRegistrationOffTheWorkers(t *testing.T) {
	ns := startHangingNameServer(t)
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.addr})
	waitFor(t, "the broker registered", func() bool { return ns.registers.Load() > 0 })
	c := tb.client(nil)
	ns.hung.Store(true)
	n := 2 * max(16, 4*runtime.GOMAXPROCS(0))
	answers := make(chan *remoting.Command, n)
	for i := range n {
		perm := []int{4, 6}[i%2]
		req := remoting.NewRequest(remoting.UpdateBrokerConfig, nil, fmt.Appendf(nil, "brokerPermission=%d\n", perm))
		if err := c.InvokeAsync(req, func(resp *remoting.Command, err error) {
			if err != nil {
				resp = &remoting.Command{Code: -1, Remark: err.Error()}
			}
			answers <- resp
		}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("permission change %d in effect", i), func() bool { return tb.permission() == perm })
	}
	answeredAfterFlush(t, c, answers, n, ns.open, "permission change")
}

// A name server that could not be connected is left out of the
// registrations that follow (RocketMQ registers with
// NettyRemotingClient.getAvailableNameSrvList only): a topic creation is
// answered once the live name server routes it while every connection
// attempt to the dead one hangs, and the dead one is registered with as
// soon as it accepts connections again (the scan finds it), without
// waiting for the periodic registration.
func TestADeadNameServerDoesNotHoldTheRegistration(t *testing.T) {
	live := startTestNameServer(t)
	returning := startTestNameServer(t)
	const deadAddr = "192.0.2.1:9876"
	var hang atomic.Bool
	back := make(chan struct{})
	var backOnce sync.Once
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		if addr != deadAddr {
			return d.DialContext(ctx, network, addr)
		}
		if !hang.Load() {
			return nil, errors.New("connection refused (test)")
		}
		<-back // a dropped SYN: not even the pool's dial timeout ends it
		return d.DialContext(ctx, network, returning.Addr().String())
	}
	tb := startTestBrokerWith(t, t.TempDir(), map[string]string{"namesrvAddr": live.Addr().String() + ";" + deadAddr},
		func(b *Broker) {
			b.namesrvDial = dial
			b.namesrvScanEvery = 20 * time.Millisecond
		})
	// Before the broker stops: its pool waits for the hung dial.
	t.Cleanup(func() { backOnce.Do(func() { close(back) }) })
	waitFor(t, "registered with the live name server, the dead one left out", func() bool {
		return len(live.Registry().ClusterInfo().BrokerAddrTable) == 1 &&
			slices.Equal(tb.register.ns.Available(), []string{live.Addr().String()})
	})
	hang.Store(true)

	c := tb.client(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer cancel()
	r, err := c.Invoke(ctx, remoting.NewRequest(remoting.UpdateAndCreateTopic, map[string]string{
		"topic": "DeadNsTopic", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6"}, nil))
	if err != nil || r.Code != remoting.Success {
		t.Fatalf("topic creation with a dead name server configured: %v, %v", r, err)
	}
	if _, ok := live.Registry().Route("DeadNsTopic"); !ok {
		t.Fatal("topic creation answered before the live name server routed it")
	}

	backOnce.Do(func() { close(back) })
	waitFor(t, "registered with the name server that came back", func() bool {
		_, ok := returning.Registry().Route("DeadNsTopic")
		return ok
	})
}

// rocketmq_topic_create_execution_time counts a creation whose answer
// waited off the worker for the registration as a success, and its time
// runs to the answer (RocketMQ records it after registerIncrementBrokerData
// returned): at least as long as the test held the name server after the
// topic was stored.
func TestTopicCreationTimeRunsToTheAnswerAfterRegistration(t *testing.T) {
	ns := startHangingNameServer(t)
	tb := startTestBroker(t, map[string]string{"namesrvAddr": ns.addr, "metricsExporterType": "PROM",
		"metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0"})
	waitFor(t, "the broker registered", func() bool { return ns.registers.Load() > 0 })
	c := tb.client(nil)
	ns.hung.Store(true)
	answers := invokeAll(t, c, []*remoting.Command{remoting.NewRequest(remoting.UpdateAndCreateTopic,
		map[string]string{"topic": "TimedReg", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}, nil)})
	waitFor(t, "the topic stored", func() bool { _, ok, _ := tb.topics.table.Get("TimedReg"); return ok })
	time.Sleep(100 * time.Millisecond) // the least time the creation's answer waits from here
	ns.open()
	if r := <-answers; r.Code != remoting.Success {
		t.Fatalf("topic creation answered %d %q", r.Code, r.Remark)
	}
	text := scrapeMetrics(t, tb)
	const name = "rocketmq_topic_create_execution_time_milliseconds"
	if n := metricValue(t, text, name+"_count", `invocation_status="success"`); n != 1 {
		t.Fatalf("%v successful topic creations recorded, want 1\n%s", n, text)
	}
	// It began before the topic was stored and ended after the release.
	if ms := metricValue(t, text, name+"_sum", `invocation_status="success"`); ms < 100 {
		t.Fatalf("topic creation recorded as %v ms; its answer waited at least 100 ms for the registration", ms)
	}
}

// TestStartReturnsRegistered checks that Start returns only after the
// first registration, as RocketMQ's BrokerController.start registers
// once before it returns: a tool run right after the start (mqadmin
// updateSubGroup -c) finds the broker in its cluster without waiting.
func TestStartReturnsRegistered(t *testing.T) {
	ns := startTestNameServer(t)
	b := startTestBroker(t, map[string]string{"namesrvAddr": ns.Addr().String(), "brokerName": "broker-start"})
	ci := ns.Registry().ClusterInfo()
	if bd, ok := ci.BrokerAddrTable["broker-start"]; !ok || bd.BrokerAddrs[0] != b.Addr() {
		t.Fatalf("the name server does not know the broker when Start returned: %+v", ci.BrokerAddrTable)
	}
}
