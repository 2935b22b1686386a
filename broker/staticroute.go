package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/rocketkv/rocketkv/namesrv"
)

// staticRouteTTL is how long a broker group's master address, learnt
// from a static topic's route, serves forwarded requests before a route
// is asked for again: RocketMQ's brokers refresh the broker address
// table their RpcClient reads every 5 s (BrokerController's
// refreshMetadata).
const staticRouteTTL = 5 * time.Second

// errNoMaster is the failure of a forwarding whose target group has no
// master in the topic's route.
var errNoMaster = errors.New("the route has no master of the broker group")

// routeFetch asks the name servers for a topic's route.
type routeFetch func(ctx context.Context, topic string) (namesrv.TopicRouteData, error)

// masterCache keeps the master addresses of broker groups that static
// topics' requests are forwarded to, as RocketMQ's RpcClient reads them
// from its cached broker address table rather than from a name server
// on every request. An address is used for staticRouteTTL after the route
// that gave it was fetched; a forwarding that fails at a cached address
// drops it (forget), so the next one asks for the route again. Concurrent
// misses of one topic share one route request. The zero value is ready;
// it is safe for concurrent use.
type masterCache struct {
	// ttl overrides staticRouteTTL when positive; now overrides
	// time.Now (tests).
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	// masters maps a broker name to its master's address and when the
	// route that gave it was fetched (guarded by mu).
	masters map[string]cachedMaster
	flight  singleflight.Group
}

// cachedMaster is one broker group's master address in masterCache.
type cachedMaster struct {
	addr    string
	fetched time.Time
}

func (c *masterCache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

func (c *masterCache) lifetime() time.Duration {
	if c.ttl > 0 {
		return c.ttl
	}
	return staticRouteTTL
}

// master returns the address of bname's master: the cached one while it
// is fresh (cached true), else the one of topic's route, fetched with
// fetch (which also refreshes the addresses of the route's other
// groups).
func (c *masterCache) master(ctx context.Context, topic, bname string, fetch routeFetch) (addr string, cached bool, err error) {
	c.mu.Lock()
	m, ok := c.masters[bname]
	c.mu.Unlock()
	if ok && c.clock().Sub(m.fetched) < c.lifetime() {
		return m.addr, true, nil
	}
	addr, err = c.refresh(ctx, topic, bname, fetch)
	return addr, false, err
}

// refresh fetches topic's route (one request for concurrent callers of
// the same topic), keeps the masters it names and returns bname's.
func (c *masterCache) refresh(ctx context.Context, topic, bname string, fetch routeFetch) (string, error) {
	v, err, _ := c.flight.Do(topic, func() (any, error) {
		route, err := fetch(ctx, topic)
		if err != nil {
			return nil, err
		}
		c.learn(route)
		return route, nil
	})
	if err != nil {
		return "", err
	}
	route := v.(namesrv.TopicRouteData)
	for _, bd := range route.BrokerDatas {
		if bd.BrokerName == bname && bd.BrokerAddrs[namesrv.MasterID] != "" {
			return bd.BrokerAddrs[namesrv.MasterID], nil
		}
	}
	return "", fmt.Errorf("%w: %s in the route of %s", errNoMaster, bname, topic)
}

// learn keeps the master addresses of route's broker groups, and drops
// those of its groups without a master.
func (c *masterCache) learn(route namesrv.TopicRouteData) {
	now := c.clock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.masters == nil {
		c.masters = map[string]cachedMaster{}
	}
	for _, bd := range route.BrokerDatas {
		if addr := bd.BrokerAddrs[namesrv.MasterID]; addr != "" {
			c.masters[bd.BrokerName] = cachedMaster{addr: addr, fetched: now}
		} else {
			delete(c.masters, bd.BrokerName)
		}
	}
}

// forget drops bname's cached master when it is still addr (a
// forwarding to it failed): the next request asks for the route.
func (c *masterCache) forget(bname, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.masters[bname]; ok && m.addr == addr {
		delete(c.masters, bname)
	}
}
