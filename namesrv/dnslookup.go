package namesrv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// Resolver returns the addresses (IP literals) a host name resolves to,
// as net.Resolver.LookupHost does: LookupNameServers' seam for the
// system's resolver.
type Resolver func(ctx context.Context, host string) ([]string, error)

// SystemResolver is the Resolver of the system (net.DefaultResolver):
// every A and AAAA record of the name, as Java's
// InetAddress.getAllByName gives RocketMQ.
func SystemResolver(ctx context.Context, host string) ([]string, error) {
	return net.DefaultResolver.LookupHost(ctx, host)
}

// LookupNameServers expands a namesrvAddr value by DNS, as RocketMQ's
// broker does with fetchNameSrvAddrByDnsLookup
// (BrokerOuterAPI.dnsLookupAddressByDomain): each host:port stands for
// every address its host resolves to, each with the same port, so
// "ns.example:9876" whose name has three A records is three name
// servers. An IP literal stands for itself. Duplicates are kept once, in
// the order found.
//
// RocketMQ reads the whole value as one domain:port, split at its first
// ':'; rocketkv expands each ';'-separated address, which gives the same
// list for one address and a usable one for several. A lookup that
// fails, or finds no address, for any of them fails the whole expansion
// (RocketMQ then keeps the list it has: so does the broker).
func LookupNameServers(ctx context.Context, resolve Resolver, namesrvAddr string) ([]string, error) {
	entries := ParseNameServers(namesrvAddr)
	if len(entries) == 0 {
		return nil, errors.New("dns lookup of name servers: namesrvAddr names none")
	}
	var out []string
	for _, e := range entries {
		host, port, err := net.SplitHostPort(e)
		if err != nil {
			return nil, fmt.Errorf("dns lookup of name server %q: %w", e, err)
		}
		if host == "" {
			return nil, fmt.Errorf("dns lookup of name server %q: no host name to look up", e)
		}
		var ips []string
		if _, perr := netip.ParseAddr(host); perr == nil {
			ips = []string{host}
		} else if ips, err = resolve(ctx, host); err != nil {
			return nil, fmt.Errorf("dns lookup of name server %q: %w", e, err)
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("dns lookup of name server %q: %s resolves to no address", e, host)
		}
		for _, ip := range ips {
			if a := net.JoinHostPort(ip, port); !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out, nil
}
