package configs

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/rocketkv/rocketkv/internal/netprefix"
)

// ProxyProtocol is a listener's PROXY protocol setting: whether a
// connection may open with a PROXY protocol header (HAProxy's, version 1
// or 2) naming the client behind a load balancer, and from which peers.
// RocketMQ 5 reads such a header on every connection and has no keys for
// it; these are rocketkv's, with RocketMQ's behaviour as the default.
type ProxyProtocol struct {
	// Enable is proxyProtocolEnable: read a header when one opens a
	// connection (the default); false closes such connections.
	Enable bool
	// TrustedNetworks is proxyProtocolTrustedNetworks: the networks of
	// the balancers allowed to send a header. Empty (the default) trusts
	// every peer, as RocketMQ does.
	TrustedNetworks []netip.Prefix
}

// proxyProtocolFields are the PROXY protocol keys of a server
// configuration T, whose setting ptr returns.
func proxyProtocolFields[T any](ptr func(*T) *ProxyProtocol) []field[T] {
	return []field[T]{
		boolean("proxyProtocolEnable", "true", func(c *T) *bool { return &ptr(c).Enable }),
		networkList("proxyProtocolTrustedNetworks", func(c *T) *[]netip.Prefix { return &ptr(c).TrustedNetworks }),
	}
}

// networkList reads a comma-separated list of networks in CIDR notation
// (10.0.0.0/8, 2001:db8::/32) or single addresses (192.0.2.7); empty is
// no network.
func networkList[T any](key string, ptr func(*T) *[]netip.Prefix) field[T] {
	return field[T]{key: key, def: "", set: func(c *T, raw string) error {
		var out []netip.Prefix
		for _, part := range strings.Split(raw, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			p, err := parseNetwork(part)
			if err != nil {
				return err
			}
			out = append(out, p)
		}
		*ptr(c) = out
		return nil
	}, get: func(c *T) string {
		parts := make([]string, len(*ptr(c)))
		for i, p := range *ptr(c) {
			parts[i] = p.String()
		}
		return strings.Join(parts, ",")
	}}
}

// parseNetwork reads one network: a CIDR prefix or a single address.
func parseNetwork(s string) (netip.Prefix, error) {
	p, err := netprefix.Parse(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("network %q: want an address or a CIDR prefix such as 10.0.0.0/8: %w", s, err)
	}
	return p, nil
}
