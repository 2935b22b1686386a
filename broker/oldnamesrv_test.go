package broker

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// nsProxy stands between brokers and a name server: it forwards each
// request (a oneway one as a call, so that it has been served when
// counted) and records what it forwarded, except the request codes it
// refuses with REQUEST_CODE_NOT_SUPPORTED as a RocketMQ 4.x name server
// refuses GET_BROKER_MEMBER_GROUP and BROKER_HEARTBEAT.
type nsProxy struct {
	addr   string
	ns     string
	clock  *testutil.Clock // the name server's
	refuse map[int32]bool
	pool   *remoting.ClientPool

	mu      sync.Mutex
	served  map[int32]int // by request code, once the name server answered
	refused map[int32]int
	// renewed is, by request code and broker address, the name server's
	// time read before forwarding the last heartbeat it answered SUCCESS.
	renewed map[int32]map[string]time.Time
	// registered is the same for REGISTER_BROKER, by broker address.
	registered map[string]time.Time
	// dataVersions are the bodies of the last QUERY_DATA_VERSION, by
	// broker address.
	dataVersions map[string][]byte
	routesAsked  map[string]int // GET_ROUTEINFO_BY_TOPIC by topic
}

func startNSProxy(t *testing.T, ns string, clock *testutil.Clock, refuse ...int32) *nsProxy {
	t.Helper()
	p := &nsProxy{ns: ns, clock: clock, refuse: map[int32]bool{}, pool: remoting.NewClientPool(remoting.ClientOptions{}),
		served: map[int32]int{}, refused: map[int32]int{}, renewed: map[int32]map[string]time.Time{},
		registered: map[string]time.Time{}, dataVersions: map[string][]byte{}, routesAsked: map[string]int{}}
	for _, code := range refuse {
		p.refuse[code] = true
	}
	t.Cleanup(func() { _ = p.pool.Close() })
	p.addr = startRemotingServer(t, remoting.HandlerFunc(p.serve))
	return p
}

func (p *nsProxy) serve(ctx context.Context, conn *remoting.Conn, req *remoting.Command) {
	if p.refuse[req.Code] {
		p.mu.Lock()
		p.refused[req.Code]++
		p.mu.Unlock()
		_ = conn.Reply(req, remoting.NewResponse(req, remoting.RequestCodeNotSupported,
			"request type "+strconv.Itoa(int(req.Code))+" not supported"))
		return
	}
	at := p.clock.Now()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := p.pool.Invoke(cctx, p.ns, remoting.NewRequest(req.Code, maps.Clone(req.ExtFields), req.Body))
	if err != nil {
		_ = conn.Reply(req, remoting.NewResponse(req, remoting.SystemError, err.Error()))
		return
	}
	p.mu.Lock()
	p.served[req.Code]++
	addr := req.ExtFields["brokerAddr"]
	switch req.Code {
	case remoting.QueryDataVersion, remoting.BrokerHeartbeat:
		if resp.Code == remoting.Success {
			if p.renewed[req.Code] == nil {
				p.renewed[req.Code] = map[string]time.Time{}
			}
			p.renewed[req.Code][addr] = at
		}
		if req.Code == remoting.QueryDataVersion {
			p.dataVersions[addr] = req.Body
		}
	case remoting.RegisterBroker:
		p.registered[addr] = at
	case remoting.GetRouteInfoByTopic:
		p.routesAsked[req.ExtFields["topic"]]++
	}
	p.mu.Unlock()
	out := remoting.NewResponse(req, resp.Code, resp.Remark)
	out.ExtFields, out.Body = resp.ExtFields, resp.Body
	_ = conn.Reply(req, out)
}

// counts returns how many requests of code were served and refused.
func (p *nsProxy) counts(code int32) (served, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served[code], p.refused[code]
}

// renewedAt returns when the name server last renewed the broker at addr
// by a heartbeat of code (zero if never).
func (p *nsProxy) renewedAt(code int32, addr string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.renewed[code][addr]
}

func (p *nsProxy) registeredAt(addr string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.registered[addr]
}

func (p *nsProxy) dataVersion(addr string) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dataVersions[addr]
}

func (p *nsProxy) routeRequests(topic string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.routesAsked[topic]
}

// startClockedNameServer starts a name server with supportActingMaster
// on a settable clock, which expires brokers only when the test asks
// (Registry().Expire).
func startClockedNameServer(t *testing.T) (*namesrv.Server, *testutil.Clock) {
	t.Helper()
	clock := testutil.NewClock(time.Unix(1_700_000_000, 0))
	set := configs.DefaultNamesrv()
	set.SupportActingMaster = true
	cfg := namesrv.DefaultConfig()
	cfg.Remoting.Addr = "127.0.0.1:0"
	cfg.Remoting.EventLoops = 1
	cfg.Settings = &set
	cfg.Now = clock.Now
	cfg.ScanInterval = time.Hour
	return startNameServerWith(t, cfg, zerolog.Nop()), clock
}

// oldNameSrvSettings are actingSettings through the proxy, with
// registrations rare enough that only heartbeats renew the brokers
// during a test, and compatibleWithOldNameSrv as compat says ("" leaves
// the default).
func oldNameSrvSettings(p *nsProxy, compat string, kv map[string]string) map[string]string {
	out := actingSettings(p.addr, map[string]string{"registerNameServerPeriod": "60000"})
	if compat != "" {
		out["compatibleWithOldNameSrv"] = compat
	}
	maps.Copy(out, kv)
	return out
}

// waitMembers waits until each broker's last member list of the group is
// want.
func waitMembers(t *testing.T, want map[int64]string, brokers ...*testBroker) {
	t.Helper()
	for _, b := range brokers {
		waitFor(t, b.Addr()+" to learn its group's members "+formatMembers(want), func() bool {
			m := b.group.members.Load()
			return m != nil && maps.Equal(*m, want)
		})
	}
}

func formatMembers(m map[int64]string) string {
	out, _ := json.Marshal(m)
	return string(out)
}

// checkStaysRegistered moves the name server's clock twice by less than
// the brokers' heartbeat timeout (brokerNotActiveTimeoutMillis, 10 s),
// past it in all, waiting between the two for each broker's heartbeat
// of code: the name server keeps every broker, which no registration
// renewed meanwhile. Without the heartbeats' renewals it would drop
// them.
func checkStaysRegistered(t *testing.T, ns *namesrv.Server, clock *testutil.Clock, p *nsProxy, code int32, brokers ...*testBroker) {
	t.Helper()
	if expired := ns.Registry().Expire(); len(expired) != 0 {
		t.Fatalf("expired before the clock moved: %v", expired)
	}
	const step = 9 * time.Second
	clock.Advance(step)
	moved := clock.Now()
	for _, b := range brokers {
		waitFor(t, b.Addr()+"'s heartbeat after the clock moved", func() bool {
			return !p.renewedAt(code, b.Addr()).Before(moved)
		})
	}
	clock.Advance(step)
	for _, b := range brokers {
		if at := p.registeredAt(b.Addr()); !at.Before(moved) {
			t.Fatalf("%s registered at %v, after the clock moved: its heartbeats are not what kept it", b.Addr(), at)
		}
	}
	if expired := ns.Registry().Expire(); len(expired) != 0 {
		t.Fatalf("the name server dropped heartbeating brokers: %v", expired)
	}
	for _, b := range brokers {
		if got := ns.Registry().MemberGroup(b.cfg.BrokerName)[b.cfg.BrokerID]; got != b.Addr() {
			t.Fatalf("broker id %d of %s: %q, want %s", b.cfg.BrokerID, b.cfg.BrokerName, got, b.Addr())
		}
	}
}

// An acting-master group learns its members and stays registered with
// compatibleWithOldNameSrv true (RocketMQ's default: QUERY_DATA_VERSION
// heartbeats carrying the topics' data version, the members from the
// route of rmq_sys_SYNC_BROKER_MEMBER_<brokerName>) and false
// (BROKER_HEARTBEAT, GET_BROKER_MEMBER_GROUP), each using only its own
// requests; with the master gone the slave acts.
func TestActingMasterGroupWithCompatibleWithOldNameSrv(t *testing.T) {
	for _, compat := range []bool{true, false} {
		t.Run("compatibleWithOldNameSrv="+strconv.FormatBool(compat), func(t *testing.T) {
			ns, clock := startClockedNameServer(t)
			p := startNSProxy(t, ns.Addr().String(), clock)
			master := startTestBroker(t, oldNameSrvSettings(p, strconv.FormatBool(compat), nil))
			slave := startTestBroker(t, oldNameSrvSettings(p, strconv.FormatBool(compat),
				map[string]string{"brokerRole": "SLAVE", "brokerId": "1"}))
			waitMembers(t, map[int64]string{0: master.Addr(), 1: slave.Addr()}, master, slave)

			heartbeat := remoting.BrokerHeartbeat
			if compat {
				heartbeat = remoting.QueryDataVersion
			}
			checkStaysRegistered(t, ns, clock, p, heartbeat, master, slave)
			memberTopic := namesrv.SyncBrokerMemberGroupPrefix + "broker-a"
			groupAsked, _ := p.counts(remoting.GetBrokerMemberGroup)
			if compat {
				if n, _ := p.counts(remoting.BrokerHeartbeat); n != 0 || groupAsked != 0 || p.routeRequests(memberTopic) == 0 {
					t.Fatalf("compatible: %d BROKER_HEARTBEAT, %d GET_BROKER_MEMBER_GROUP, %d routes of %s; want none, none, some",
						n, groupAsked, p.routeRequests(memberTopic), memberTopic)
				}
				// The heartbeat carries the topics' data version.
				for _, b := range []*testBroker{master, slave} {
					waitFor(t, b.Addr()+"'s heartbeat to carry its topics' data version", func() bool {
						var dv namesrv.DataVersion
						v := b.topics.table.Version()
						return json.Unmarshal(p.dataVersion(b.Addr()), &dv) == nil &&
							dv.Counter == v.Counter && dv.Timestamp == v.Timestamp
					})
				}
			} else {
				// forceRegister (the default) registers without asking
				// QUERY_DATA_VERSION first: none is sent at all.
				if n, _ := p.counts(remoting.QueryDataVersion); n != 0 || groupAsked == 0 || p.routeRequests(memberTopic) != 0 {
					t.Fatalf("not compatible: %d QUERY_DATA_VERSION, %d GET_BROKER_MEMBER_GROUP, %d routes of %s; want none, some, none",
						n, groupAsked, p.routeRequests(memberTopic), memberTopic)
				}
			}

			master.stop()
			waitFor(t, "the slave to act as master", slave.actingMaster)
			waitMembers(t, map[int64]string{1: slave.Addr()}, slave)
		})
	}
}

// Against a RocketMQ 4.x name server, which refuses GET_BROKER_MEMBER_GROUP
// and BROKER_HEARTBEAT, an acting-master group with the default
// compatibleWithOldNameSrv learns its members, stays registered and has
// its slave act when the master is gone; with the key false a broker
// learns no member and its heartbeats are refused.
func TestActingMasterWithA4xNameServer(t *testing.T) {
	ns, clock := startClockedNameServer(t)
	p := startNSProxy(t, ns.Addr().String(), clock, remoting.GetBrokerMemberGroup, remoting.BrokerHeartbeat)

	t.Run("default", func(t *testing.T) {
		master := startTestBroker(t, oldNameSrvSettings(p, "", nil))
		slave := startTestBroker(t, oldNameSrvSettings(p, "", map[string]string{"brokerRole": "SLAVE", "brokerId": "1"}))
		waitMembers(t, map[int64]string{0: master.Addr(), 1: slave.Addr()}, master, slave)
		checkStaysRegistered(t, ns, clock, p, remoting.QueryDataVersion, master, slave)
		master.stop()
		waitFor(t, "the slave to act as master", slave.actingMaster)
		if _, refused := p.counts(remoting.GetBrokerMemberGroup); refused != 0 {
			t.Fatalf("%d GET_BROKER_MEMBER_GROUP sent with the default", refused)
		}
		if _, refused := p.counts(remoting.BrokerHeartbeat); refused != 0 {
			t.Fatalf("%d BROKER_HEARTBEAT sent with the default", refused)
		}
	})

	t.Run("compatibleWithOldNameSrv=false", func(t *testing.T) {
		slave := startTestBroker(t, oldNameSrvSettings(p, "false", map[string]string{
			"brokerName": "broker-b", "brokerRole": "SLAVE", "brokerId": "1"}))
		_, asked0 := p.counts(remoting.GetBrokerMemberGroup)
		_, beats0 := p.counts(remoting.BrokerHeartbeat)
		waitFor(t, "three refused member syncs and heartbeats", func() bool {
			_, asked := p.counts(remoting.GetBrokerMemberGroup)
			_, beats := p.counts(remoting.BrokerHeartbeat)
			return asked >= asked0+3 && beats >= beats0+3
		})
		if m := slave.group.members.Load(); m != nil {
			t.Fatalf("members %v learnt from a name server that refused every request for them", *m)
		}
		if at := p.renewedAt(remoting.QueryDataVersion, slave.Addr()); !at.IsZero() {
			t.Fatalf("heartbeat by QUERY_DATA_VERSION at %v with compatibleWithOldNameSrv=false", at)
		}
	})
}
