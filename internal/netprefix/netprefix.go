// Package netprefix reads network addresses as configuration and access
// rules write them: a single address or a CIDR block, IPv4 or IPv6.
package netprefix

import (
	"net/netip"
	"strings"
)

// Parse reads an address ("192.0.2.7", "2001:db8::1", a prefix of its
// full length) or a CIDR block ("10.0.0.0/8", host bits cleared). An
// IPv4-mapped IPv6 address or block ("::ffff:10.0.0.0/104") is read as the
// IPv4 one, since peers' addresses are compared unmapped. The error is
// net/netip's.
func Parse(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
