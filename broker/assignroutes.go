package broker

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
)

// routeTimeout bounds one name server's answer to a route request made for
// QUERY_ASSIGNMENT (RocketMQ's GET_TOPIC_ROUTE_TIMEOUT).
const routeTimeout = 3 * time.Second

// assignRoutes gives QUERY_ASSIGNMENT the readable queues of every broker
// group serving a topic, as RocketMQ's TopicRouteInfoManager does: a Java
// client asks any broker of the topic's route for its assignment, so every
// broker must divide the same queues among the same clients. The other
// groups' queues come from the name servers' route, kept for
// loadBalancePollNameServerInterval; this broker's own queues come from its
// topic config at each query, so a topic created a moment ago is assigned
// before the broker's next registration.
type assignRoutes struct {
	b *Broker

	mu    sync.Mutex
	cache map[string]routedQueues // topic -> the other groups' queues
	swept time.Time               // when refresh last dropped unused routes
	// minUnused is the least time an unused route stays
	// (minUnusedRoute; tests shorten it).
	minUnused time.Duration
	// loads collapses concurrent misses of one topic into one request:
	// every client of a group rebalances at about the same moment.
	loads singleflight.Group
}

// unusedRoutes is how many loadBalancePollNameServerIntervals a cached
// route stays without a query refreshing it: topics come and go (a
// session's, a test's, one deleted elsewhere) and a route nobody asks for
// again would otherwise stay for good. RocketMQ's TopicRouteInfoManager
// refreshes every cached topic each interval and drops those the name
// servers no longer know; here an unused route is dropped, and fetched
// again if it is asked for.
const unusedRoutes = 10

// minUnusedRoute is the least time an unused route stays cached, whatever
// the interval (which may be 0).
const minUnusedRoute = time.Minute

// routedQueues are the readable queues of the broker groups other than
// this one in a topic's route, and when the route was fetched.
type routedQueues struct {
	queues []assignedQueue
	at     time.Time
}

func newAssignRoutes(b *Broker) *assignRoutes {
	return &assignRoutes{b: b, cache: map[string]routedQueues{}, minUnused: minUnusedRoute}
}

// queues returns the readable queues of topic on every broker group,
// ordered by broker name and queue id (RocketMQ's MessageQueue order, on
// which the allocation strategies depend), and whether the topic exists
// anywhere. Without name servers it returns this broker's queues only. An
// error means the name servers could not say; the caller then assigns
// nothing, and clients keep what they have.
func (r *assignRoutes) queues(ctx context.Context, topic string) ([]assignedQueue, bool, error) {
	b := r.b
	tc, local, err := b.topicConfig(topic)
	if err != nil {
		return nil, false, err
	}
	var all []assignedQueue
	if local && meta.Readable(registeredPerm(tc.Perm, b.permission())) {
		for i := range tc.ReadQueueNums {
			all = append(all, assignedQueue{BrokerName: b.cfg.BrokerName, QueueID: int32(i), Topic: topic})
		}
	}
	if b.lmqName(topic) || len(b.register.ns.NameServers()) == 0 {
		return all, local, nil
	}
	others, routed, err := r.others(ctx, topic)
	if err != nil {
		return nil, false, err
	}
	all = append(all, others...)
	slices.SortFunc(all, func(x, y assignedQueue) int {
		return cmp.Or(cmp.Compare(x.BrokerName, y.BrokerName), cmp.Compare(x.QueueID, y.QueueID))
	})
	return all, local || routed, nil
}

// others returns the readable queues of the other broker groups in the
// topic's route and whether the name servers know the topic. A cached
// route younger than loadBalancePollNameServerInterval is used as it is;
// an older one is fetched again, and serves one more interval when the
// name servers cannot be reached.
func (r *assignRoutes) others(ctx context.Context, topic string) ([]assignedQueue, bool, error) {
	ttl := r.b.current().LoadBalancePollNameServerInterval
	r.mu.Lock()
	cached, ok := r.cache[topic]
	r.mu.Unlock()
	if ok && time.Since(cached.at) < ttl {
		return cached.queues, true, nil
	}
	ch := r.loads.DoChan(topic, func() (any, error) {
		// Not cancelled with the request that started it: the others
		// wait for it too, and each name server call has its timeout.
		return r.refresh(context.WithoutCancel(ctx), topic)
	})
	select {
	case res := <-ch:
		if errors.Is(res.Err, namesrv.ErrTopicNotExist) {
			return nil, false, nil
		}
		if res.Err != nil {
			return nil, false, res.Err
		}
		return res.Val.([]assignedQueue), true, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// refresh fetches the topic's route and caches the other groups' readable
// queues. A topic no name server knows is dropped from the cache, so the
// next query asks again (RocketMQ's getTopicSubscribeInfo does the same
// for a topic it has no queues of).
//
// The name servers that registrations reach are asked first, those that
// could not be connected last (PreferAvailable), so that a dead name
// server first in namesrvAddr does not cost every fetch a dial. RocketMQ's
// broker asks one name server per fetch
// (BrokerOuterAPI.getTopicRouteInfoFromNameServer through invokeSync with
// no address): NettyRemotingClient.getAndCreateNameserverChannel keeps
// the one it chose while its channel is open and moves round-robin to
// the next when it is not, without looking at the available ones, so a
// dead one fails a fetch now and then; here the scan knows it dead, and
// the others are still asked when the available ones give no route.
func (r *assignRoutes) refresh(ctx context.Context, topic string) ([]assignedQueue, error) {
	b := r.b
	route, err := namesrv.FetchRoute(ctx, b.register.pool, b.register.ns.PreferAvailable(), topic, routeTimeout)
	r.mu.Lock()
	defer r.mu.Unlock()
	if errors.Is(err, namesrv.ErrTopicNotExist) {
		delete(r.cache, topic)
		return nil, err
	}
	if err != nil {
		old, ok := r.cache[topic]
		if !ok {
			return nil, err // logged by the query, which assigns nothing
		}
		b.log.Warn().Err(err).Str("topic", topic).Msg("query assignment: no route from the name servers; the last one serves on")
		old.at = time.Now()
		r.cache[topic] = old
		return old.queues, nil
	}
	var queues []assignedQueue
	for _, qd := range route.QueueDatas {
		if qd.BrokerName == b.cfg.BrokerName || !meta.Readable(int(qd.Perm)) {
			continue
		}
		for i := range qd.ReadQueueNums {
			queues = append(queues, assignedQueue{BrokerName: qd.BrokerName, QueueID: i, Topic: topic})
		}
	}
	now := time.Now()
	r.cache[topic] = routedQueues{queues: queues, at: now}
	// The interval may be 0 (every query fetches): a route stays at least
	// minUnusedRoute unused, to serve while the name servers cannot be
	// reached.
	keep := max(unusedRoutes*min(r.b.current().LoadBalancePollNameServerInterval, math.MaxInt64/unusedRoutes), r.minUnused)
	if now.Sub(r.swept) >= keep/unusedRoutes {
		r.swept = now
		maps.DeleteFunc(r.cache, func(_ string, c routedQueues) bool { return now.Sub(c.at) > keep })
	}
	return queues, nil
}
