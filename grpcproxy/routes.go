package grpcproxy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// topicRoute is what the proxy knows of one topic: its name server route,
// the masters by broker group and the message types the topic accepts.
type topicRoute struct {
	route   namesrv.TopicRouteData
	masters map[string]string // broker name -> master address
	types   []rmqpb.MessageType
	at      time.Time
	// used is when a call last asked for the route (UnixNano).
	used atomic.Int64
	// refreshing is set once a refresh of this route, past its TTL, has
	// been started, so that the calls answered with it meanwhile do not
	// each start one.
	refreshing atomic.Bool
	// masterless says a broker group of the route has no master (one
	// that is being switched: its old master registered as a slave
	// before the new one registered as master); such a route is asked
	// again after refreshFloor instead of its TTL.
	masterless bool
}

// writeQueue is one writable queue of a topic on a master.
type writeQueue struct {
	broker, addr string
	queueID      int32
}

// writeQueues lists the writable queues of the route's masters, ordered
// by broker name and queue id.
func (r *topicRoute) writeQueues() []writeQueue {
	var qs []writeQueue
	for _, qd := range r.route.QueueDatas {
		addr, ok := r.masters[qd.BrokerName]
		if !ok || qd.Perm&namesrv.PermWrite == 0 {
			continue
		}
		for i := int32(0); i < qd.WriteQueueNums; i++ {
			qs = append(qs, writeQueue{broker: qd.BrokerName, addr: addr, queueID: i})
		}
	}
	slices.SortFunc(qs, func(a, b writeQueue) int {
		return cmp.Or(cmp.Compare(a.broker, b.broker), cmp.Compare(a.queueID, b.queueID))
	})
	return qs
}

// readableBrokers lists the broker groups with a master and readable
// queues, by name.
func (r *topicRoute) readableBrokers() []namesrv.QueueData {
	var qds []namesrv.QueueData
	for _, qd := range r.route.QueueDatas {
		if _, ok := r.masters[qd.BrokerName]; ok && qd.Perm&namesrv.PermRead != 0 && qd.ReadQueueNums > 0 {
			qds = append(qds, qd)
		}
	}
	slices.SortFunc(qds, func(a, b namesrv.QueueData) int { return cmp.Compare(a.BrokerName, b.BrokerName) })
	return qds
}

// routes caches topic routes from the name servers.
type routes struct {
	pool *remoting.ClientPool
	// ns is read afresh by each lookup (its list may change).
	ns      *nameServers
	ttl     time.Duration
	timeout time.Duration
	// plaintext says the pool dials without TLS (no tls.enable).
	plaintext bool
	// bg runs the lookups, which no caller cancels.
	bg *background

	// idle is how long a route no call asks for is kept (0: for ever).
	idle time.Duration
	// floor is refreshFloor (tests change it).
	floor time.Duration
	// cache holds the routes, the least recently asked for dropped past
	// its size (it locks itself).
	cache *lru.Cache[string, *topicRoute]
	// loads collapses concurrent misses of one topic into one lookup
	// (clients reconnecting after a restart all ask for their routes at
	// once).
	loads singleflight.Group

	// mu guards news; doubted, which every call on a cached route runs,
	// only reads it.
	mu sync.RWMutex
	// news holds, by broker address, what the proxy learned of a broker
	// that cached routes name as a master (see brokerNews): one entry
	// serves every topic the broker serves.
	news map[string]brokerNews
}

// brokerNews is what the proxy learned of one broker address that says
// it may be its group's master no more. A cached route naming the
// address as a master is asked for again at its next call when the news
// is newer than the route (routes.doubted), whichever topic's request
// brought it.
type brokerNews struct {
	// refused is when the broker last refused a request as a slave or a
	// switching broker does, or could not be reached (routes.refusedBy);
	// zero when it did not.
	refused time.Time
	// moved is when a refresh of a route last found the broker's group
	// with another master, or none (routes.mastersMoved); zero when none
	// did.
	moved time.Time
}

// latest is the later of the news' times.
func (n brokerNews) latest() time.Time {
	if n.moved.After(n.refused) {
		return n.moved
	}
	return n.refused
}

func newRoutes(pool *remoting.ClientPool, cfg *Config, ns *nameServers, bg *background) *routes {
	cache, _ := lru.New[string, *topicRoute](max(cfg.RouteCacheSize, 1)) // fails only for a size below 1
	return &routes{pool: pool, ns: ns, ttl: cfg.RouteTTL, idle: cfg.RouteIdle, timeout: cfg.RequestTimeout,
		plaintext: cfg.Remoting.TLS == nil, bg: bg, cache: cache, floor: refreshFloor, news: map[string]brokerNews{}}
}

// get returns the topic's route. A cached route is answered at once; once
// it is older than the TTL it is refreshed in the background meanwhile,
// and kept when the refresh fails, as RocketMQ's proxy does
// (TopicRouteService: refreshAfterWrite), so that no call waits for the
// name servers, each of which may take a request timeout to fail. Only a
// route not cached is waited for, and so is one no call asked for in
// the idle time (RocketMQ's expireAfterAccess): a proxy that many topics
// pass through keeps the routes in use, at most RouteCacheSize of them.
// A topic no name server knows is TOPIC_NOT_FOUND.
func (rs *routes) get(ctx context.Context, topic string) (*topicRoute, error) {
	r, _ := rs.cache.Get(topic)
	now := time.Now().UnixNano()
	if r != nil && rs.idle > 0 && now-r.used.Load() >= int64(rs.idle) {
		rs.cache.Remove(topic)
		r = nil
	}
	if r != nil {
		r.used.Store(now)
		if rs.doubted(r) {
			// One of its masters refused, or moved, since the route was
			// asked for: the name servers may route another by now, and
			// the call waits for them rather than be sent to the same
			// refusal (the refresh keeps the route when no name server
			// answers).
			return rs.wait(ctx, topic, r)
		}
		due := rs.ttl
		if r.masterless {
			due = min(due, rs.floor)
		}
		if time.Since(r.at) >= due && r.refreshing.CompareAndSwap(false, true) {
			rs.load(topic, r) // not waited for: its result is cached
		}
		return r, nil
	}
	return rs.wait(ctx, topic, nil)
}

// refreshFloor is the least time between two lookups of a topic's route
// that a refusal of its master (refusedBy) or a broker group without a
// master asks for: a master that stays refused or away costs the name
// servers one lookup a second per topic at most.
const refreshFloor = time.Second

// refusedBy notes that the broker at addr refused a request as a slave
// or a switching broker refuses it (SYSTEM_BUSY from a slave,
// SERVICE_NOT_AVAILABLE while a controller-mode broker changes role),
// answered a pop, an ack or a change of invisible time as a rocketkv
// slave does (answeredBySlave: a demoted master, which a proxy that only
// receives learns of so), or could not be reached (a master that
// stopped). The note is kept by address, not by topic: every cached
// route that names addr as a master and was asked for at least
// refreshFloor before the refusal has its next call wait for the name
// servers to be asked again, whichever topic's request met the refusal,
// so that clients' retries on every topic the broker serves reach the
// master elected meanwhile instead of the refusing broker until their
// routes' TTL (topicRouteServiceCacheRefreshSeconds, 20 s by default)
// runs out.
func (rs *routes) refusedBy(addr string) {
	if addr == "" {
		return
	}
	now := time.Now()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := rs.news[addr]
	n.refused = now
	rs.news[addr] = n
	rs.forgetOldNews(now)
}

// doubted reports whether a cached route names as a master a broker
// that, since the route was asked for, a refresh found replaced, or
// that refused a request (refusedBy) refreshFloor or more after it: a
// master that stays refused costs the name servers one lookup of each
// of its topics per refreshFloor at most.
func (rs *routes) doubted(r *topicRoute) bool {
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	if len(rs.news) == 0 {
		return false
	}
	for _, addr := range r.masters {
		n, ok := rs.news[addr]
		if !ok {
			continue
		}
		if n.moved.After(r.at) || (!n.refused.IsZero() && n.refused.Sub(r.at) >= rs.floor) {
			return true
		}
	}
	return false
}

// forgetOldNews drops the news no cached route can be older than (rs.mu
// held): past RouteTTL, RouteIdle and a lookup's time, a route asked for
// before the news has either been asked for again (a call past its TTL
// starts a refresh, which replaces it within loadTimeout) or gone unasked
// for RouteIdle (dropped at its next call). With RouteIdle 0 the news is
// kept: an entry per broker address the proxy sent to.
func (rs *routes) forgetOldNews(now time.Time) {
	if rs.idle <= 0 {
		return
	}
	keep := rs.ttl + rs.idle + rs.loadTimeout()
	for addr, n := range rs.news {
		if now.Sub(n.latest()) > keep {
			delete(rs.news, addr)
		}
	}
}

// wait looks the topic's route up and waits for the answer; old is the
// cached route, if any, which a failed lookup keeps.
func (rs *routes) wait(ctx context.Context, topic string, old *topicRoute) (*topicRoute, error) {
	select {
	case res := <-rs.load(topic, old):
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*topicRoute), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("route of %s: %w", topic, ctx.Err())
	}
}

// load looks the topic's route up and caches it, or joins the lookup of
// it on its way (clients reconnecting after a restart all ask for their
// routes at once); old is the cached route, if any. The lookup is
// background work: not cancelled with the caller that started it (others
// may wait for it too), but with Shutdown, and bounded by loadTimeout.
func (rs *routes) load(topic string, old *topicRoute) <-chan singleflight.Result {
	return rs.loads.DoChan(topic, func() (any, error) {
		return rs.bg.do(func(ctx context.Context) (any, error) {
			ctx, cancel := context.WithTimeout(ctx, rs.loadTimeout())
			defer cancel()
			return rs.refresh(ctx, topic, old)
		})
	})
}

// loadTimeout bounds a route lookup: every name server in turn may take
// a request timeout, and so may the masters asked for the message type.
func (rs *routes) loadTimeout() time.Duration {
	return rs.timeout * time.Duration(len(rs.ns.get())+2)
}

// refresh asks the name servers for the topic's route and caches it;
// old is the cached route that expired, if any.
func (rs *routes) refresh(ctx context.Context, topic string, old *topicRoute) (*topicRoute, error) {
	fresh, err := rs.fetch(ctx, topic)
	if err != nil {
		if old != nil && !isNotFound(err) {
			// A name server hiccup: the last route serves one more TTL
			// before it is refreshed again.
			stale := &topicRoute{route: old.route, masters: old.masters, types: old.types, masterless: old.masterless, at: time.Now()}
			stale.used.Store(old.used.Load())
			rs.cache.Add(topic, stale)
			return stale, nil
		}
		if isNotFound(err) {
			rs.cache.Remove(topic)
		}
		return nil, err
	}
	if old != nil {
		fresh.used.Store(old.used.Load())
	} else {
		fresh.used.Store(time.Now().UnixNano())
	}
	rs.cache.Add(topic, fresh)
	if old != nil {
		rs.mastersMoved(old, fresh)
	}
	return fresh, nil
}

// mastersMoved notes the masters that a refresh found replaced in
// their broker groups (a controller-mode switch, a failover), or gone:
// every other cached route that names one of them, asked for before now,
// is asked for again at its next call (routes.doubted), without a
// refusal of its own. A consumer's receives on a topic the proxy sends
// nothing to would otherwise go on popping from the demoted master,
// read-only as a slave pops, until their route's TTL.
func (rs *routes) mastersMoved(old, fresh *topicRoute) {
	var moved []string
	for name, addr := range old.masters {
		if fresh.masters[name] != addr {
			moved = append(moved, addr)
		}
	}
	if len(moved) == 0 {
		return
	}
	now := time.Now()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, addr := range moved {
		n := rs.news[addr]
		n.moved = now
		rs.news[addr] = n
	}
	rs.forgetOldNews(now)
}

// forget drops a cached route, so that the next request asks again (after
// a broker answered that it has no such topic, for example).
func (rs *routes) forget(topic string) {
	rs.cache.Remove(topic)
}

func isNotFound(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.code == rmqpb.Code_TOPIC_NOT_FOUND
}

// fetch asks the name servers for the topic's route, then a master for
// the topic's message type.
func (rs *routes) fetch(ctx context.Context, topic string) (*topicRoute, error) {
	route, err := namesrv.FetchRoute(ctx, rs.pool, rs.ns.get(), topic, rs.timeout)
	if errors.Is(err, namesrv.ErrTopicNotExist) {
		return nil, fail(rmqpb.Code_TOPIC_NOT_FOUND, "topic %s does not exist", topic)
	}
	if err != nil {
		return nil, plaintextHint(rs.plaintext, err)
	}
	r := &topicRoute{route: route, masters: map[string]string{}, at: time.Now()}
	for _, bd := range r.route.BrokerDatas {
		if a, ok := bd.BrokerAddrs[namesrv.MasterID]; ok && a != "" {
			r.masters[bd.BrokerName] = a
		}
	}
	for _, qd := range r.route.QueueDatas {
		if _, ok := r.masters[qd.BrokerName]; !ok {
			r.masterless = true
		}
	}
	r.types = rs.messageTypes(ctx, topic, r)
	return r, nil
}

// messageTypes reads the topic's message.type attribute from one of its
// masters (GET_TOPIC_CONFIG) and returns the types its queues accept, as
// RocketMQ's proxy does: a topic without the attribute is NORMAL, MIXED
// accepts every type. When no master answers, every type is accepted
// rather than a producer refused on a guess.
func (rs *routes) messageTypes(ctx context.Context, topic string, r *topicRoute) []rmqpb.MessageType {
	all := slices.Clone(allMessageTypes)
	for _, addr := range sortedValues(r.masters) {
		cctx, cancel := context.WithTimeout(ctx, rs.timeout)
		resp, err := rs.pool.Invoke(cctx, addr, remoting.NewRequest(remoting.GetTopicConfig, map[string]string{"topic": topic}, nil))
		cancel()
		if err != nil || resp.Code != remoting.Success {
			continue
		}
		types, err := decodeMessageTypes(resp.Body)
		if err != nil {
			continue
		}
		return types
	}
	return all
}

// allMessageTypes are the types a MIXED topic accepts.
var allMessageTypes = []rmqpb.MessageType{rmqpb.MessageType_NORMAL, rmqpb.MessageType_FIFO, rmqpb.MessageType_DELAY, rmqpb.MessageType_TRANSACTION}

// decodeMessageTypes reads a broker's answer to GET_TOPIC_CONFIG (RocketMQ's
// TopicConfig as JSON) into the message types the topic accepts, by its
// message.type attribute: a topic without it is NORMAL, MIXED accepts
// every type, an unknown type is MESSAGE_TYPE_UNSPECIFIED (which no
// message has).
func decodeMessageTypes(body []byte) ([]rmqpb.MessageType, error) {
	var tc meta.TopicConfig
	if err := json.Unmarshal(body, &tc); err != nil {
		return nil, fmt.Errorf("decode a topic's configuration: %w", err)
	}
	switch tc.Attributes[meta.AttrMessageType] {
	case "", "NORMAL":
		return []rmqpb.MessageType{rmqpb.MessageType_NORMAL}, nil
	case "FIFO":
		return []rmqpb.MessageType{rmqpb.MessageType_FIFO}, nil
	case "DELAY":
		return []rmqpb.MessageType{rmqpb.MessageType_DELAY}, nil
	case "TRANSACTION":
		return []rmqpb.MessageType{rmqpb.MessageType_TRANSACTION}, nil
	case "MIXED":
		return slices.Clone(allMessageTypes), nil
	default:
		return []rmqpb.MessageType{rmqpb.MessageType_MESSAGE_TYPE_UNSPECIFIED}, nil
	}
}

// sortedValues returns m's values ordered by key.
func sortedValues(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = m[k]
	}
	return vals
}
