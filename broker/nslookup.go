package broker

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rocketkv/rocketkv/configs"
	"github.com/rocketkv/rocketkv/internal/periodic"
	"github.com/rocketkv/rocketkv/namesrv"
)

// nsSource is where the broker's name server list comes from, decided at
// start as RocketMQ's BrokerController.initializeScheduledTasks decides
// it.
type nsSource int

const (
	// nsStatic: namesrvAddr as written (or none).
	nsStatic nsSource = iota
	// nsDNS: namesrvAddr with fetchNameSrvAddrByDnsLookup, each host
	// expanded into every address it resolves to.
	nsDNS
	// nsAddressServer: no namesrvAddr, and
	// fetchNamesrvAddrByAddressServer: the list an HTTP address server
	// answers with.
	nsAddressServer
)

// nameServerSource returns where cfg's name servers come from. A
// namesrvAddr wins over the address server, as in RocketMQ.
func nameServerSource(cfg *configs.Broker) nsSource {
	switch {
	case cfg.NamesrvAddr != "" && cfg.FetchNameSrvAddrByDnsLookup:
		return nsDNS
	case cfg.NamesrvAddr == "" && cfg.FetchNamesrvAddrByAddressServer:
		return nsAddressServer
	}
	return nsStatic
}

// nsLookupDelay is how long after the start the name servers are looked
// up again the first time (RocketMQ's 10 s initial delay); the periods
// after are fetchNamesrvAddrInterval (address server) and
// updateNameServerAddrPeriod (DNS).
const nsLookupDelay = 10 * time.Second

// dnsLookupTimeout bounds one DNS expansion of namesrvAddr.
const dnsLookupTimeout = 3 * time.Second

// checkNameServerSource returns the error a start with cfg refuses its
// name server lookup with: a period that is not positive (RocketMQ's
// scheduler throws at start), or an address server that makes no URL.
func checkNameServerSource(cfg *configs.Broker) error {
	switch nameServerSource(cfg) {
	case nsAddressServer:
		if cfg.FetchNamesrvAddrInterval <= 0 {
			return fmt.Errorf("fetchNamesrvAddrInterval: %d ms is no period to ask the address server at (fetchNamesrvAddrByAddressServer)",
				cfg.FetchNamesrvAddrInterval.Milliseconds())
		}
		raw := namesrv.AddressServerURL(cfg.RmqAddressServerDomain, cfg.RmqAddressServerSubGroup)
		if u, err := url.Parse(raw); err != nil || u.Hostname() == "" {
			return fmt.Errorf("rmqAddressServerDomain %q, rmqAddressServerSubGroup %q: %q is no URL to ask for the name servers (fetchNamesrvAddrByAddressServer)",
				cfg.RmqAddressServerDomain, cfg.RmqAddressServerSubGroup, raw)
		}
	case nsDNS:
		if cfg.UpdateNameServerAddrPeriod <= 0 {
			return fmt.Errorf("updateNameServerAddrPeriod: %d ms is no period to look the name servers up again at (fetchNameSrvAddrByDnsLookup)",
				cfg.UpdateNameServerAddrPeriod.Milliseconds())
		}
	}
	return nil
}

// nsLookup keeps the registrar's name server list as DNS or an address
// server gives it: once as the registrar starts, then nsLookupDelay after
// and every period, and at once when UPDATE_BROKER_CONFIG changes
// namesrvAddr (DNS). A lookup that fails, or an answer that is no list,
// is logged and leaves the list as it is, as RocketMQ keeps its list. A
// new list is applied with registrar.setNameServers (which registers
// with it at once); the same addresses in another order change nothing.
//
// Its loop runs on the registrar's goroutines (registrar.start) and stops
// with them.
type nsLookup struct {
	r      *registrar
	source nsSource
	// resolve is the DNS seam (namesrv.SystemResolver unless a test set
	// Broker.nsResolve).
	resolve namesrv.Resolver
	// addrServer is asked under nsAddressServer.
	addrServer *namesrv.AddressServer
	delay      time.Duration
	period     time.Duration

	// mu serializes lookups, so that the list of the last one to start
	// is the one kept; failures (guarded by mu) logs their failures.
	mu       sync.Mutex
	failures namesrv.LookupFailures
}

// newNSLookup returns the lookup of b's name servers, or nil when they
// are namesrvAddr as written.
func newNSLookup(r *registrar) *nsLookup {
	b := r.b
	l := &nsLookup{r: r, source: nameServerSource(&b.cfg), resolve: namesrv.SystemResolver}
	if b.nsResolve != nil {
		l.resolve = b.nsResolve
	}
	l.delay = nsLookupDelay
	if b.nsLookupDelay > 0 {
		l.delay = b.nsLookupDelay
	}
	switch l.source {
	case nsDNS:
		l.period = b.cfg.UpdateNameServerAddrPeriod
	case nsAddressServer:
		l.period = b.cfg.FetchNamesrvAddrInterval
		l.addrServer = namesrv.NewAddressServer(namesrv.AddressServerURL(b.cfg.RmqAddressServerDomain, b.cfg.RmqAddressServerSubGroup))
	default:
		if b.cfg.FetchNamesrvAddrByAddressServer {
			b.log.Info().Msg("fetchNamesrvAddrByAddressServer is not used: namesrvAddr names the name servers (as in RocketMQ)")
		}
		if b.cfg.FetchNameSrvAddrByDnsLookup {
			b.log.Warn().Msg("fetchNameSrvAddrByDnsLookup has nothing to look up: namesrvAddr is empty")
		}
		return nil
	}
	return l
}

// run looks the name servers up delay after it starts and every period
// after, until ctx ends.
func (l *nsLookup) run(ctx context.Context) {
	periodic.RunDelayed(ctx, l.delay, l.period, l.refresh)
}

// refresh looks the name servers up once and applies a list that
// differs from the registrar's.
func (l *nsLookup) refresh(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var addrs []string
	var err error
	var from string
	switch l.source {
	case nsDNS:
		from = l.r.b.current().NamesrvAddr
		dctx, cancel := context.WithTimeout(ctx, dnsLookupTimeout)
		addrs, err = namesrv.LookupNameServers(dctx, l.resolve, from)
		cancel()
	case nsAddressServer:
		from = l.addrServer.URL()
		addrs, err = l.addrServer.FetchList(ctx)
	default:
		return
	}
	if err != nil {
		if ctx.Err() == nil { // else stopping
			l.failures.Failed(l.r.b.log, err, from, l.r.ns.NameServers())
		}
		return
	}
	l.failures.Succeeded(l.r.b.log, from)
	if namesrv.SameAddresses(addrs, l.r.ns.NameServers()) {
		return
	}
	l.r.setNameServers(strings.Join(addrs, ";"))
}
