package namesrv

import (
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/remoting"
)

// lastRenewal reads when the registry last renewed the broker at addr of
// cluster, and whether it holds that broker.
func lastRenewal(r *Registry, cluster, addr string) (time.Time, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	lb := r.live[BrokerKey{cluster, addr}]
	if lb == nil {
		return time.Time{}, false
	}
	return lb.lastUpdate, true
}

// A oneway QUERY_DATA_VERSION renews the broker, whatever version it
// carries, as RocketMQ's name server (DefaultRequestProcessor's
// queryBrokerTopicConfig calls updateBrokerInfoUpdateTimestamp): it is
// the heartbeat of a broker under compatibleWithOldNameSrv, which keeps
// it past its heartbeat timeout; without it the broker expires.
func TestHeartbeatViaDataVersionRenewsTheBroker(t *testing.T) {
	clock := newFakeClock()
	ns, _ := startNameServer(t, func(c *Config) {
		c.Now = clock.Now
		c.ScanInterval = time.Hour // expired by the test's own Expire calls
	})
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	t.Cleanup(func() { _ = pool.Close() })
	reg := NewRegistrar(pool, ns.Addr().String(), zerolog.Nop())
	info := brokerInfo("broker-a", "10.0.0.1:10911", 0)
	info.HeartbeatTimeout = 10 * time.Second
	body := topicsBody(1, "T:1:1:6", "U:1:1:6")
	if _, err := reg.Register(testCtx(t), info, body); err != nil {
		t.Fatal(err)
	}
	for _, dv := range []DataVersion{body.DataVersion, {Counter: 99, Timestamp: 99}} {
		clock.Advance(8 * time.Second)
		if err := reg.HeartbeatViaDataVersion(testCtx(t), info, dv, time.Second); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the oneway heartbeat to renew the broker", func() bool {
			at, ok := lastRenewal(ns.Registry(), info.ClusterName, info.BrokerAddr)
			return ok && at.Equal(clock.Now())
		})
		if expired := ns.Registry().Expire(); len(expired) != 0 {
			t.Fatalf("broker expired %v after a heartbeat with data version %+v", expired, dv)
		}
	}
	if v, _ := ns.Registry().DataVersionOf(info.ClusterName, info.BrokerAddr); v != body.DataVersion {
		t.Fatalf("a heartbeat changed the registered data version to %+v", v)
	}
	clock.Advance(11 * time.Second)
	if expired := ns.Registry().Expire(); len(expired) != 1 {
		t.Fatalf("without heartbeats past the timeout: expired %v, want the broker", expired)
	}
}

// routeAnswer is a GET_ROUTEINFO_BY_TOPIC answer of an old (before 4.9.4)
// Java name server: fastjson's bare integer keys. The group's name is
// also in another cluster, whose members are not the group's.
const routeAnswer = `{"brokerDatas":[` +
	`{"brokerAddrs":{0:"10.0.0.9:10911"},"brokerName":"broker-a","cluster":"Other"},` +
	`{"brokerAddrs":{1:"10.0.0.2:10911",2:"10.0.0.3:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],` +
	`"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":1,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1}]}`

// MemberGroupFromRoute reads the group's members from the route of
// rmq_sys_SYNC_BROKER_MEMBER_<brokerName>, as RocketMQ's
// getBrokerMemberGroupCompatible: the BrokerData of its cluster and name;
// a name server without the route is passed over, none known when no
// name server has it; a failure of every name server is an error.
func TestMemberGroupFromRoute(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	answering := func(code int32, body string) string {
		return startAnswering(t, func(req *remoting.Command) *remoting.Command {
			if req.Code != remoting.GetRouteInfoByTopic {
				return remoting.NewResponse(req, remoting.RequestCodeNotSupported, "")
			}
			mu.Lock()
			asked = append(asked, req.ExtFields["topic"])
			mu.Unlock()
			resp := remoting.NewResponse(req, code, "")
			resp.Body = []byte(body)
			return resp
		})
	}
	route := answering(remoting.Success, routeAnswer)
	missing := answering(remoting.TopicNotExist, "")
	broken := answering(remoting.SystemError, "")
	garbled := answering(remoting.Success, `{"brokerDatas":[`)
	for _, tc := range []struct {
		name    string
		addrs   []string
		members map[int64]string
		fails   bool
	}{
		{"old name server's route", []string{route}, map[int64]string{1: "10.0.0.2:10911", 2: "10.0.0.3:10911"}, false},
		{"passed over without the route", []string{missing, route}, map[int64]string{1: "10.0.0.2:10911", 2: "10.0.0.3:10911"}, false},
		{"passed over when failing", []string{broken, garbled, route}, map[int64]string{1: "10.0.0.2:10911", 2: "10.0.0.3:10911"}, false},
		{"no route anywhere", []string{missing, broken}, map[int64]string{}, false},
		{"every name server failing", []string{broken, garbled}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			asked = nil
			mu.Unlock()
			pool := remoting.NewClientPool(remoting.ClientOptions{})
			t.Cleanup(func() { _ = pool.Close() })
			reg := NewRegistrar(pool, strings.Join(tc.addrs, ";"), zerolog.Nop())
			members, err := reg.MemberGroupFromRoute(testCtx(t), "DefaultCluster", "broker-a", 3*time.Second)
			if (err != nil) != tc.fails || !maps.Equal(members, tc.members) {
				t.Fatalf("members %v, %v; want %v (an error: %v)", members, err, tc.members, tc.fails)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) == 0 {
				t.Fatal("no name server asked")
			}
			for _, topic := range asked {
				if topic != "rmq_sys_SYNC_BROKER_MEMBER_broker-a" {
					t.Fatalf("asked the route of %q", topic)
				}
			}
		})
	}
	// A cluster without a BrokerData of the group in the route: no member.
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	t.Cleanup(func() { _ = pool.Close() })
	members, err := NewRegistrar(pool, route, zerolog.Nop()).MemberGroupFromRoute(testCtx(t), "Third", "broker-a", 3*time.Second)
	if err != nil || len(members) != 0 {
		t.Fatalf("another cluster's group: %v, %v", members, err)
	}
}

// The members read from the route of a real name server: every member
// of the group that registered, by broker id.
func TestMemberGroupFromRouteOfThisNameServer(t *testing.T) {
	ns, _ := startNameServer(t, nil)
	pool := remoting.NewClientPool(remoting.ClientOptions{})
	t.Cleanup(func() { _ = pool.Close() })
	reg := NewRegistrar(pool, ns.Addr().String(), zerolog.Nop())
	members, err := reg.MemberGroupFromRoute(testCtx(t), "DefaultCluster", "broker-a", 3*time.Second)
	if err != nil || len(members) != 0 {
		t.Fatalf("before any registration: %v, %v", members, err)
	}
	for id, addr := range map[int64]string{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"} {
		body := topicsBody(1, "T:1:1:6", "rmq_sys_SYNC_BROKER_MEMBER_broker-a:1:1:1")
		if _, err := reg.Register(testCtx(t), brokerInfo("broker-a", addr, id), body); err != nil {
			t.Fatal(err)
		}
	}
	members, err = reg.MemberGroupFromRoute(testCtx(t), "DefaultCluster", "broker-a", 3*time.Second)
	if want := map[int64]string{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}; err != nil || !maps.Equal(members, want) {
		t.Fatalf("members %v, %v; want %v", members, err, want)
	}
}

// FuzzMembersFromRoute: no route body a name server sends makes the
// reader panic; whatever it returns without an error is a member list.
func FuzzMembersFromRoute(f *testing.F) {
	f.Add([]byte(routeAnswer))
	f.Add([]byte(`{"brokerDatas":[{"brokerAddrs":{"0":"a:1"},"brokerName":"broker-a","cluster":"DefaultCluster"}]}`))
	f.Add([]byte(`{"brokerDatas":null}`))
	f.Add([]byte(`{"brokerDatas":[{"brokerAddrs":{99999999999999999999:"x"}}]}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		members, err := membersFromRoute(body, "DefaultCluster", "broker-a")
		if err == nil && members == nil {
			t.Fatal("nil members without an error")
		}
	})
}
