package grpcproxy

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/namesrv"
	"github.com/rocketkv/rocketkv/remoting"
)

// nameServers is the proxy's current name server list: namesrvAddr as
// written, or the list its address server (namesrvDomain) last gave.
// Every lookup reads the list afresh, so a list the address server
// changes is used from the next lookup on. Safe for concurrent use.
type nameServers struct {
	cur atomic.Pointer[[]string]
}

func newNameServers(addrs []string) *nameServers {
	ns := &nameServers{}
	ns.set(addrs)
	return ns
}

// get returns the current list; the caller must not change it.
func (ns *nameServers) get() []string { return *ns.cur.Load() }

// set replaces the list with a copy of addrs.
func (ns *nameServers) set(addrs []string) {
	c := slices.Clone(addrs)
	ns.cur.Store(&c)
}

// nsLookup keeps the proxy's name server list as its address server
// gives it, as RocketMQ's proxy does with namesrvDomain
// (MQClientAPIFactory): asked as the proxy starts, then delay later and
// every period after. A request that fails, or an answer that is no list
// (namesrv.ParseAddressList), is logged and keeps the list as it is; a
// list with other addresses replaces it, and the pool's connections to
// the name servers it drops are closed, as RocketMQ's client closes its
// channel to a name server no longer listed.
//
// Its loop runs on the server's background goroutines (Server.Start) and
// stops with them (Shutdown).
type nsLookup struct {
	ns     *nameServers
	pool   *remoting.ClientPool
	server *namesrv.AddressServer
	delay  time.Duration
	period time.Duration
	log    zerolog.Logger

	// mu serializes refreshes, so that the list of the last one to start
	// is the one kept; failures (guarded by mu) logs their failures.
	mu       sync.Mutex
	failures namesrv.LookupFailures
}

// run asks the address server delay after it starts and every period
// after, until ctx ends.
func (l *nsLookup) run(ctx context.Context) {
	periodic.RunDelayed(ctx, l.delay, l.period, func(ctx context.Context) { l.refresh(ctx) })
}

// refresh asks the address server once and applies a list whose
// addresses differ from the current ones (in any order); it reports
// whether the answer was a list.
func (l *nsLookup) refresh(ctx context.Context) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	addrs, err := l.server.FetchList(ctx)
	old := l.ns.get()
	if err != nil {
		if ctx.Err() == nil { // else stopping
			l.failures.Failed(l.log, err, l.server.URL(), old)
		}
		return false
	}
	l.failures.Succeeded(l.log, l.server.URL())
	if namesrv.SameAddresses(addrs, old) {
		return true
	}
	l.ns.set(addrs)
	l.log.Info().Str("from", l.server.URL()).Strs("old", old).Strs("new", addrs).Msg("name servers changed")
	for _, a := range old {
		if !slices.Contains(addrs, a) {
			l.pool.CloseAddr(a)
		}
	}
	return true
}

// addressServerOf returns the URL of the address server namesrvDomain
// and namesrvDomainSubgroup name, as RocketMQ's proxy
// builds it (an empty subgroup leaves the URL ending in "/rocketmq/"),
// or "" without namesrvDomain.
func addressServerOf(domain, subgroup string) string {
	if domain == "" {
		return ""
	}
	return namesrv.AddressServerURL(domain, subgroup)
}

// nameServerSource describes where the name servers come from, for the
// start's log line.
func (c *Config) nameServerSource() string {
	if c.AddressServer != "" {
		return "address server " + c.AddressServer
	}
	return strings.Join(c.NamesrvAddrs, ";")
}
