package broker

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/remotingtest"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// countingNameServer starts a Remoting server that passes every request
// on to the name server at nsAddr and counts the route requests of
// topic: a name server whose lookups a test can count.
func countingNameServer(t *testing.T, nsAddr, topic string) (string, *atomic.Int32) {
	t.Helper()
	up, err := remoting.Dial(context.Background(), nsAddr, remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	var lookups atomic.Int32
	srv := remotingtest.StartServer(t, remoting.RespondFunc(func(ctx context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		if req.Code == remoting.GetRouteInfoByTopic && req.ExtFields["topic"] == topic {
			lookups.Add(1)
		}
		fwd := remoting.NewRequest(req.Code, req.ExtFields, req.Body)
		fwd.Version, fwd.Language = req.Version, req.Language
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := up.Invoke(cctx, fwd)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		out := remoting.NewResponse(req, resp.Code, resp.Remark)
		out.ExtFields, out.Body = resp.ExtFields, resp.Body
		return out
	}))
	return srv.Addr().String(), &lookups
}

// Forwarded requests find the other group's master in a cached route: N
// pulls of an item on broker-b through broker-a ask the name server for
// the topic's route once, not N times. When broker-b comes back at
// another address, the first forwarding fails at the cached one, asks
// for the route again and reaches broker-b at its new address.
func TestStaticTopicForwardingCachesTheRoute(t *testing.T) {
	const topic = "cached-route-topic"
	ns := startNameServerAt(t, "127.0.0.1:0", time.Now, nil)
	counted, lookups := countingNameServer(t, ns.Addr().String(), topic)
	ta := startTestBroker(t, map[string]string{"brokerName": "broker-a", "namesrvAddr": counted})
	// Time plays no part here: only failures refresh the cache.
	ta.staticRoutes.ttl = time.Hour
	bSettings := map[string]string{"brokerName": "broker-b", "namesrvAddr": ns.Addr().String()}
	tb := startTestBroker(t, bSettings)
	ca, cb := ta.client(nil), tb.client(nil)
	item := func(bname string, gen int32, logic, end int64) meta.LogicQueueMappingItem {
		it := staticItem(gen, 0, logic, 0, end)
		it.Bname = bname
		return it
	}
	onB := meta.NewTopicQueueMappingDetail(topic, 1, "broker-b", 1000)
	onB.HostedQueues[0] = []meta.LogicQueueMappingItem{item("broker-b", 0, 0, -1)}
	if r := updateStatic(t, cb, 1, onB); r.Code != remoting.Success {
		t.Fatalf("create on broker-b: %d %s", r.Code, r.Remark)
	}
	for i := range 3 {
		mustSend(t, cb, topic, 0, "old-"+strconv.Itoa(i), "")
	}
	tb.caughtUp()
	moved := []meta.LogicQueueMappingItem{item("broker-b", 0, 0, 3), item("broker-a", 1, 10, -1)}
	for _, c := range []struct {
		cl    *remoting.Client
		bname string
	}{{cb, "broker-b"}, {ca, "broker-a"}} {
		d := meta.NewTopicQueueMappingDetail(topic, 1, c.bname, 2000)
		d.HostedQueues[0] = moved
		if r := updateStatic(t, c.cl, 1, d); r.Code != remoting.Success {
			t.Fatalf("move onto broker-a (%s): %d %s", c.bname, r.Code, r.Remark)
		}
	}
	ensureGroup(t, ca, "g")
	ensureGroup(t, cb, "g")
	pullOld := func() {
		t.Helper()
		r := call(t, ca, remoting.PullMessage, pullReq("g", topic, 0, 0, 0, 0, "*"), nil)
		if r.Code != remoting.Success || len(decodeRecords(t, r.Body)) != 3 {
			t.Fatalf("pull of broker-b's item through broker-a: %d %s", r.Code, r.Remark)
		}
	}

	before := lookups.Load()
	const n = 20
	for range n {
		pullOld()
	}
	if got := lookups.Load() - before; got != 1 {
		t.Fatalf("%d forwarded pulls asked the name server for the route %d times, want once", n, got)
	}

	// broker-b restarts on another port.
	oldAddr := tb.Addr()
	tb.stop()
	tb = startTestBrokerAt(t, tb.store, bSettings)
	if tb.Addr() == oldAddr {
		t.Fatalf("broker-b came back at its old address %s", oldAddr)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		route, ok := ns.Registry().Route(topic)
		if ok && routeMaster(*route, "broker-b") == tb.Addr() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the name server never routed broker-b's new address %s", tb.Addr())
		}
		time.Sleep(10 * time.Millisecond)
	}
	before = lookups.Load()
	pullOld()
	if got := lookups.Load() - before; got != 1 {
		t.Fatalf("the pull after broker-b moved asked for the route %d times, want once", got)
	}
	before = lookups.Load()
	pullOld()
	if got := lookups.Load() - before; got != 0 {
		t.Fatalf("a pull after the new address was learnt asked for the route %d times", got)
	}
}

// routeMaster is bname's master address in route.
func routeMaster(route namesrv.TopicRouteData, bname string) string {
	for _, bd := range route.BrokerDatas {
		if bd.BrokerName == bname {
			return bd.BrokerAddrs[namesrv.MasterID]
		}
	}
	return ""
}

// masterCache serves a master address from the route it fetched until
// its lifetime ends or a failure drops it, and refetches then; a route
// without the group's master is an error and drops what was cached.
func TestMasterCacheLifetimeAndForget(t *testing.T) {
	now := time.Unix(1000, 0)
	c := masterCache{ttl: 5 * time.Second, now: func() time.Time { return now }}
	fetches := 0
	addr := "10.0.0.1:10911"
	fetch := func(context.Context, string) (namesrv.TopicRouteData, error) {
		fetches++
		bd := namesrv.BrokerData{BrokerName: "b", BrokerAddrs: map[int64]string{}}
		if addr != "" {
			bd.BrokerAddrs[namesrv.MasterID] = addr
		}
		return namesrv.TopicRouteData{BrokerDatas: []namesrv.BrokerData{bd}}, nil
	}
	get := func(wantAddr string, wantCached bool, wantFetches int) {
		t.Helper()
		got, cached, err := c.master(context.Background(), "T", "b", fetch)
		if err != nil || got != wantAddr || cached != wantCached || fetches != wantFetches {
			t.Fatalf("master: %q cached %v (%v) after %d fetches, want %q cached %v after %d", got, cached, err, fetches, wantAddr, wantCached, wantFetches)
		}
	}
	get("10.0.0.1:10911", false, 1)
	get("10.0.0.1:10911", true, 1)
	now = now.Add(4 * time.Second)
	get("10.0.0.1:10911", true, 1)
	now = now.Add(time.Second)
	addr = "10.0.0.2:10911"
	get("10.0.0.2:10911", false, 2)
	get("10.0.0.2:10911", true, 2)
	// A failure at another address than the cached one drops nothing.
	c.forget("b", "10.0.0.1:10911")
	get("10.0.0.2:10911", true, 2)
	addr = "10.0.0.3:10911"
	c.forget("b", "10.0.0.2:10911")
	get("10.0.0.3:10911", false, 3)
	// No master in the route: an error, and the group is not cached.
	addr = ""
	now = now.Add(time.Minute)
	if _, _, err := c.master(context.Background(), "T", "b", fetch); !errors.Is(err, errNoMaster) {
		t.Fatalf("a route without the master: %v, want errNoMaster", err)
	}
	if _, _, err := c.master(context.Background(), "T", "b", fetch); !errors.Is(err, errNoMaster) || fetches != 5 {
		t.Fatalf("again: %v after %d fetches, want errNoMaster after 5", err, fetches)
	}
	// A failed fetch is the caller's error.
	boom := errors.New("no name server")
	if _, _, err := c.master(context.Background(), "T", "b", func(context.Context, string) (namesrv.TopicRouteData, error) {
		return namesrv.TopicRouteData{}, boom
	}); !errors.Is(err, boom) {
		t.Fatalf("a failed fetch: %v", err)
	}
}

// masterCache is safe for concurrent lookups, refreshes and failures (run
// with -race); every lookup gets the one address the routes give.
func TestMasterCacheConcurrentUse(t *testing.T) {
	var c masterCache
	var fetches atomic.Int32
	fetch := func(context.Context, string) (namesrv.TopicRouteData, error) {
		fetches.Add(1)
		return namesrv.TopicRouteData{BrokerDatas: []namesrv.BrokerData{{BrokerName: "b", BrokerAddrs: map[int64]string{namesrv.MasterID: "10.0.0.9:10911"}}}}, nil
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for i := range 200 {
				addr, _, err := c.master(context.Background(), "T", "b", fetch)
				if err == nil && addr != "10.0.0.9:10911" {
					err = errors.New("wrong address " + addr)
				}
				if err != nil {
					errs <- err
					return
				}
				if i%50 == 0 {
					c.forget("b", addr)
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Each failure (and the start) makes at most one miss per goroutine.
	if n := fetches.Load(); n < 1 || n > 8*(8*4+1) {
		t.Fatalf("%d route fetches for 1600 lookups with 32 failures", n)
	}
}
