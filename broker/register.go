package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// compressAboveTopics turns compressed registration on by itself for large
// topic tables, whatever compressedRegister says: a plain JSON body of
// 10,000 topics is megabytes every 30 s per name server. Not when a topic
// has a topicSysFlag (unit topics), which only the plain body carries.
const compressAboveTopics = 1000

// registrar registers the broker with every name server every
// registerNameServerPeriod (with forceRegister off, only when one lacks
// the topics' data version), and soon after a topic change.
type registrar struct {
	b       *Broker
	ns      *namesrv.Registrar
	pool    *remoting.ClientPool
	trigger func()
	kick    chan struct{}
	// waits are registerAndWait's requests: the loop registers and closes
	// each once a registration that began after it asked has ended.
	waits chan chan struct{}
	// registered is set after the first successful registration (owned by
	// the loop goroutine).
	registered bool
	// cancelLoop stops the loop and scan goroutines started by start;
	// loopDone is closed when both have returned.
	cancelLoop context.CancelFunc
	loopDone   chan struct{}
	// firstDone is closed when the loop's first registration ended (at
	// once without name servers); Start waits for it.
	firstDone chan struct{}
	// scanEvery is how often scanLoop looks for name servers that can be
	// connected again.
	scanEvery time.Duration
	// lookup keeps the name servers as DNS or an address server gives
	// them; nil when they are namesrvAddr as written.
	lookup *nsLookup
}

// nameServerScanPeriod is how often the name servers are connected to
// see which ones registrations reach: RocketMQ's broker scans every
// connectTimeoutMillis (NettyRemotingClient.scanAvailableNameSrv), 3 s.
// A scan waits as long for a name server to accept a connection.
const nameServerScanPeriod = 3 * time.Second

func newRegistrar(b *Broker) *registrar {
	pool := remoting.NewClientPool(remoting.ClientOptions{Log: b.component("namesrv-client"), TLS: b.namesrvClientTLS(),
		BeforeRequest: b.innerSigner(), DialContext: b.namesrvDial, ReconnectForGoAway: b.reconnectForGoAway})
	addrs := b.cfg.NamesrvAddr
	if nameServerSource(&b.cfg) != nsStatic {
		addrs = "" // until the lookup as the registrar starts
	}
	r := &registrar{
		b:     b,
		pool:  pool,
		ns:    namesrv.NewRegistrar(pool, addrs, b.component("registrar")),
		kick:  make(chan struct{}, 1),
		waits: make(chan chan struct{}),
		// Made here, not by start: registerAndWait reads it from request
		// handlers, which nothing orders after start.
		loopDone:  make(chan struct{}),
		firstDone: make(chan struct{}),
		scanEvery: cmp.Or(b.namesrvScanEvery, nameServerScanPeriod),
	}
	r.trigger = func() {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	r.lookup = newNSLookup(r)
	return r
}

func (r *registrar) info() namesrv.BrokerInfo {
	return namesrv.BrokerInfo{
		ClusterName:  r.b.cfg.BrokerClusterName,
		BrokerName:   r.b.cfg.BrokerName,
		BrokerAddr:   r.b.Addr(),
		BrokerID:     r.b.cfg.BrokerID,
		HAServerAddr: r.b.haServerAddr(),
		// RocketMQ's registerBrokerAll sends enableSlaveActingMaster, and
		// brokerNotActiveTimeoutMillis as the heartbeat timeout with it.
		EnableActingMaster: r.b.cfg.EnableSlaveActingMaster,
		HeartbeatTimeout:   r.heartbeatTimeout(),
	}
}

// heartbeatTimeout is how long a name server keeps the broker without a
// registration or heartbeat: brokerNotActiveTimeoutMillis under
// enableSlaveActingMaster, the name server's default (0) otherwise.
func (r *registrar) heartbeatTimeout() time.Duration {
	if !r.b.cfg.EnableSlaveActingMaster {
		return 0
	}
	return r.b.cfg.BrokerNotActiveTimeout
}

// start runs the registration loop, and beside it the scan of the name
// servers and their lookup (DNS or address server) if any, on goroutines
// of the broker's until halt or the broker's context ends. The name
// servers are looked up first, before it returns, so that the first
// registration reaches them (RocketMQ's broker resolves namesrvAddr
// before it starts too, but asks an address server 10 s after).
func (r *registrar) start() {
	ctx, cancel := context.WithCancel(r.b.ctx)
	r.cancelLoop = cancel
	if r.lookup != nil {
		r.lookup.refresh(ctx)
		select {
		case <-r.kick: // the loop's first registration reaches them
		default:
		}
	}
	r.b.goBackground("register", func(context.Context) {
		defer close(r.loopDone)
		var beside sync.WaitGroup
		defer beside.Wait()
		beside.Go(func() { r.scanLoop(ctx) })
		if r.lookup != nil {
			beside.Go(func() { r.lookup.run(ctx) })
		}
		r.loop(ctx)
	})
}

// scanLoop connects to the name servers every scanEvery and registers
// at once when one that registrations left out (it could not be
// connected) accepts connections again: it may be a restarted name
// server that knows no route of the broker. RocketMQ's broker reaches it
// at its next periodic registration.
func (r *registrar) scanLoop(ctx context.Context) {
	if len(r.ns.NameServers()) == 0 && r.lookup == nil {
		return
	}
	periodic.Run(ctx, r.scanEvery, func(ctx context.Context) {
		if back := r.ns.Scan(ctx, nameServerScanPeriod); len(back) > 0 {
			r.b.log.Info().Strs("namesrv", back).Msg("name servers connectable again: registering")
			r.trigger()
		}
	})
}

// awaitFirst waits until the first registration ended (each name server
// answered or failed, within registerBrokerTimeoutMills) or ctx ends, as
// RocketMQ's BrokerController.start registers once before it returns: a
// tool run right after the start finds the broker in its cluster.
func (r *registrar) awaitFirst(ctx context.Context) {
	select {
	case <-r.firstDone:
	case <-r.loopDone:
	case <-ctx.Done():
	}
}

// untilStopped returns a context of ctx that also ends when the
// registration loop stopped (at unregisterAll or halt): what speaks to
// the name servers for the broker (heartbeats, member list syncs) stops
// with the registrations, not after, so that nothing renews a broker that
// unregistered nor uses the closed connections. cancel releases the
// goroutine that watches the loop.
func (r *registrar) untilStopped(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-r.loopDone:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// halt stops the registration loop, waiting until it returned (a
// registration under way is cancelled) or ctx ends, so that nothing
// registers the broker again after an unregistration; then the name
// server connections close.
func (r *registrar) halt(ctx context.Context) {
	if r == nil {
		return
	}
	r.stopLoop(ctx)
	r.pool.Close()
}

// stopLoop cancels the registration loop and waits until it returned or
// ctx ends.
func (r *registrar) stopLoop(ctx context.Context) {
	if r.cancelLoop == nil {
		return
	}
	r.cancelLoop()
	select {
	case <-r.loopDone:
	case <-ctx.Done():
	}
}

// loop registers at start, then periodically and on triggers (coalesced
// for a short while so a burst of topic creations makes one registration).
// Without name servers, it waits for the broker to stop, unless a lookup
// may find some: then it registers once they come.
func (r *registrar) loop(ctx context.Context) {
	if len(r.ns.NameServers()) == 0 && r.lookup == nil {
		close(r.firstDone)
		<-ctx.Done()
		return
	}
	t := time.NewTicker(registerPeriod(r.b.cfg.RegisterNameServerPeriod))
	defer t.Stop()
	r.registerOnce(ctx, true)
	close(r.firstDone)
	for {
		var waiting []chan struct{}
		// Only the periodic registration may be skipped: the others carry
		// a change, or reach a name server that knows nothing yet.
		force := true
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			force = r.forcePeriodic()
		case w := <-r.waits:
			// Registered now, with every request that came meanwhile.
			waiting = append(waiting, w)
			for more := true; more; {
				select {
				case w := <-r.waits:
					waiting = append(waiting, w)
				case <-r.kick:
				default:
					more = false
				}
			}
		case <-r.kick:
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			// Drain a trigger that arrived meanwhile: this registration
			// covers it.
			select {
			case <-r.kick:
			default:
			}
		}
		r.registerOnce(ctx, force)
		for _, w := range waiting {
			close(w)
		}
	}
}

// forcePeriodic reports whether the periodic registration sends the
// topics whatever the name servers hold: forceRegister (default true) as
// in force now, as RocketMQ's BrokerController.registerBrokerAll reads it
// at each period, and always on a slave. With forceRegister off
// RocketMQ's slave too asks first, and keeps the master its last
// registration answered with until its topics' data version moves; a
// rocketkv slave registers every period, as its registration's answer is
// how it follows its master (see noteRegistration).
func (r *registrar) forcePeriodic() bool {
	return r.b.current().ForceRegister || r.b.isSlave()
}

// maxRegisterPeriod bounds registerNameServerPeriod from above, as
// RocketMQ's BrokerController does (min(period, 60 s)): a name server
// forgets a broker silent for 120 s.
const maxRegisterPeriod = 60 * time.Second

// registerPeriod is how often the broker registers with a
// registerNameServerPeriod of set: set, at most maxRegisterPeriod, and
// 30 s (the default) when it is not positive. RocketMQ's
// BrokerController also raises a period below 10 s to 10 s (0 too);
// rocketkv keeps a shorter one, which its tests use to see routes
// change quickly.
func registerPeriod(set time.Duration) time.Duration {
	if set <= 0 {
		return 30 * time.Second
	}
	return min(set, maxRegisterPeriod)
}

// registerAndWait registers the broker with the name servers now and
// returns once that registration ended (each name server answered or
// failed), or ctx ends, or the loop stops: what an admin change whose
// answer must find the routes changed waits for (RocketMQ's
// updateAndCreateTopic and updateBrokerConfig register before they
// answer). Without name servers it returns at once.
func (r *registrar) registerAndWait(ctx context.Context) {
	if !r.hasNameServers() {
		return
	}
	done := make(chan struct{})
	select {
	case r.waits <- done:
	case <-ctx.Done():
		return
	case <-r.loopDone:
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	case <-r.loopDone:
	}
}

// setNameServers makes namesrvAddrs (a namesrvAddr value) the name
// servers the broker registers with, fetches routes from and scans, as
// RocketMQ's BrokerController applies namesrvAddr to its BrokerOuterAPI
// (updateNameServerAddressList). The connections to removed name servers
// are closed: a registration or route fetch under way to one of them
// fails with remoting.ErrAddrClosed, and what a removed name server's
// connection attempt or scan finds is not recorded. The next
// registration reaches the new name servers, and it comes at once: one
// that is new knows no route of the broker.
func (r *registrar) setNameServers(namesrvAddrs string) {
	old := r.ns.NameServers()
	r.ns.SetNameServers(namesrvAddrs)
	r.b.log.Info().Strs("old", old).Strs("new", r.ns.NameServers()).Msg("name servers changed: registering with the new ones")
	r.trigger()
}

// namesrvAddrChanged applies namesrvAddrs, UPDATE_BROKER_CONFIG's new
// namesrvAddr, already in force: as the list (setNameServers), or with
// fetchNameSrvAddrByDnsLookup as the hosts to look up, at once rather
// than at RocketMQ's next period. A lookup of them that fails keeps the
// list, and the periodic lookup tries them again.
func (r *registrar) namesrvAddrChanged(ctx context.Context, namesrvAddrs string) {
	if r.lookup != nil && r.lookup.source == nsDNS {
		r.lookup.refresh(ctx)
		return
	}
	r.setNameServers(namesrvAddrs)
}

// hasNameServers reports whether name servers are configured.
func (r *registrar) hasNameServers() bool {
	return r != nil && len(r.ns.NameServers()) > 0
}

// registerOnce sends the whole topic table to every available name
// server. Unless force, it first asks them whether one lacks the table's
// data version and registers only then (needRegister).
func (r *registrar) registerOnce(ctx context.Context, force bool) {
	if !r.hasNameServers() {
		return // none found by the lookup yet
	}
	timeout := r.b.cfg.RegisterBrokerTimeout
	if timeout <= 0 {
		timeout = 24 * time.Second
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dv := r.b.topics.dataVersion()
	if !force && !r.needRegister(rctx, dv) {
		return
	}
	body := &namesrv.RegisterBrokerBody{TopicConfigTable: map[string]namesrv.TopicConfig{}, DataVersion: dv}
	perm := r.b.permission()
	sysFlags := false // a topic the compressed body would lose its topicSysFlag of
	err := r.b.topics.table.Each(func(tc meta.TopicConfig) bool {
		sysFlags = sysFlags || tc.TopicSysFlag != 0
		body.TopicConfigTable[tc.TopicName] = namesrv.TopicConfig{
			Attributes: tc.Attributes, Order: tc.Order, Perm: int32(registeredPerm(tc.Perm, perm)),
			ReadQueueNums: int32(tc.ReadQueueNums), WriteQueueNums: int32(tc.WriteQueueNums),
			TopicFilterType: tc.TopicFilterType, TopicName: tc.TopicName, TopicSysFlag: int32(tc.TopicSysFlag),
		}
		return true
	})
	if err != nil {
		r.b.log.Error().Err(err).Msg("read topics for registration")
		return
	}
	// Static topics' mappings, as RocketMQ's registerBrokerAll sends them
	// in its TopicConfigAndMappingSerializeWrapper: the leaders this
	// group holds, for the routes' topicQueueMappingByBroker.
	infos, err := r.b.staticMappingInfos(func(topic string) bool { _, ok := body.TopicConfigTable[topic]; return ok })
	if err != nil {
		r.b.log.Error().Err(err).Msg("read static topic mappings for registration")
		return
	}
	for topic, raw := range infos {
		if body.TopicQueueMappingInfo == nil {
			body.TopicQueueMappingInfo = map[string]json.RawMessage{}
		}
		body.TopicQueueMappingInfo[topic] = raw
	}
	info := r.info()
	// The compressed body has no topicSysFlag (RocketMQ's TopicConfig.encode
	// leaves it out): compressed by itself only when no topic has one.
	info.Compressed = r.b.cfg.CompressedRegister || len(body.TopicConfigTable) > compressAboveTopics && !sysFlags
	results, err := r.ns.Register(rctx, info, body)
	r.b.noteRegistration(results)
	r.applyOrderTopics(results)
	for _, res := range results {
		// One left out as not connectable was logged when it became so.
		if res.Err != nil && !errors.Is(res.Err, namesrv.ErrUnavailable) {
			r.b.log.Warn().Err(res.Err).Str("namesrv", res.NameServer).Msg("register broker")
		}
	}
	if err != nil && ctx.Err() == nil {
		r.b.log.Warn().Err(err).Msg("broker not registered with any name server")
		return
	}
	ev := r.b.log.Debug()
	if !r.registered {
		r.registered = true
		ev = r.b.log.Info()
	}
	ev.Int("topics", len(body.TopicConfigTable)).Bool("compressed", info.Compressed).Msg("registered with name servers")
}

// needRegister asks the available name servers whether one lacks data
// version dv of the broker's topics (forceRegister off). Those that hold
// it renewed the broker on the way, so that skipping the registration
// does not let them forget it.
func (r *registrar) needRegister(ctx context.Context, dv namesrv.DataVersion) bool {
	// A failure is logged by the registrar and makes need true.
	need, _ := r.ns.NeedRegister(ctx, r.info(), dv)
	if !need {
		r.b.log.Debug().Int64("counter", dv.Counter).Msg("name servers hold the topics' data version: registration skipped (forceRegister=false)")
	}
	return need
}

// applyOrderTopics orders the topics of the ORDER_TOPIC_CONFIG table the
// first name server that accepted the registration answered with (as
// RocketMQ's handleRegisterBrokerResult, which reads the first answer
// only; its answers come in the order they arrived, these in the order of
// namesrvAddr).
func (r *registrar) applyOrderTopics(results []namesrv.Registration) {
	for _, res := range results {
		if res.Err != nil {
			continue
		}
		if err := r.b.topics.markOrderTopics(res.OrderTopicConfig); err != nil {
			r.b.log.Warn().Err(err).Str("namesrv", res.NameServer).Msg("apply the name server's order topics")
		}
		return
	}
}

// unregisterAll tells every name server the broker is going away.
//
// The registration loop is stopped first (a registration of a stopping
// broker would put it back for as long as its requests take to drain),
// and the name server connections close after.
func (r *registrar) unregisterAll(ctx context.Context) {
	if r == nil {
		return
	}
	defer r.pool.Close()
	r.stopLoop(ctx)
	if len(r.ns.NameServers()) == 0 {
		return
	}
	uctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := r.ns.Unregister(uctx, r.info()); err != nil {
		r.b.log.Warn().Err(err).Msg("unregister broker")
	}
}
