package acl

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// AddressPattern is a white-list entry: which client addresses it admits.
// The zero AddressPattern (from an empty string) admits none.
type AddressPattern struct {
	text  string
	any   bool
	set   map[netip.Addr]bool
	parts []part // a range pattern: one matcher per address part
	v6    bool   // parts are the 8 groups of an IPv6 address
}

// part matches one part of an address: an octet or an IPv6 group.
type part struct{ lo, hi int }

// String returns the pattern as written.
func (p AddressPattern) String() string { return p.text }

// ParseAddressPattern reads one of RocketMQ's address patterns:
//
//	""                       admits nobody
//	*  *.*.*.*  *:*:*:*:*:*:*:*   admits everybody
//	192.168.0.1  ::1          one address
//	192.168.0.1,192.168.0.2   a list
//	192.168.1.{1,2,3}         a list written with braces in the last part
//	192.168.*.*  192.168.1-10.*   one part a wildcard or a range, every
//	                          later part a wildcard (IPv6 alike, in hex)
func ParseAddressPattern(s string) (AddressPattern, error) {
	s = strings.TrimSpace(s)
	p := AddressPattern{text: s}
	switch {
	case s == "":
		return p, nil
	case s == "*" || s == "*.*.*.*" || s == "*:*:*:*:*:*:*:*":
		p.any = true
		return p, nil
	case strings.HasSuffix(s, "}"):
		open := strings.LastIndexByte(s, '{')
		sep := "."
		if strings.Contains(s, ":") {
			sep = ":"
		}
		if open < 0 || (open > 0 && !strings.HasSuffix(s[:open], sep)) {
			return p, fmt.Errorf("address pattern %q: a list in braces must be the last part", s)
		}
		var addrs []string
		for _, last := range strings.Split(s[open+1:len(s)-1], ",") {
			addrs = append(addrs, s[:open]+strings.TrimSpace(last))
		}
		return p.withSet(addrs)
	case strings.Contains(s, ","):
		return p.withSet(strings.Split(s, ","))
	case strings.ContainsAny(s, "*-"):
		return p.withRange()
	}
	return p.withSet([]string{s})
}

func (p AddressPattern) withSet(addrs []string) (AddressPattern, error) {
	p.set = make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		ip, err := netip.ParseAddr(strings.TrimSpace(a))
		if err != nil || ip.Zone() != "" {
			return p, fmt.Errorf("address pattern %q: %q is not an IPv4 or IPv6 address", p.text, strings.TrimSpace(a))
		}
		p.set[ip.Unmap()] = true
	}
	return p, nil
}

// withRange reads a pattern with one wildcard or range part. RocketMQ
// never puts it in the first part ("*" alone is the any pattern).
func (p AddressPattern) withRange() (AddressPattern, error) {
	fields, base, width := strings.Split(p.text, "."), 10, 4
	if strings.Contains(p.text, ":") {
		p.v6, base, width = true, 16, 8
		var err error
		if fields, err = expandV6(p.text); err != nil {
			return p, err
		}
	}
	if len(fields) != width {
		return p, fmt.Errorf("address pattern %q: want %d parts, have %d", p.text, width, len(fields))
	}
	limit := 255
	if p.v6 {
		limit = 0xffff
	}
	ranged := -1
	for i, f := range fields {
		f = strings.TrimSpace(f)
		var pt part
		switch {
		case ranged >= 0:
			if f != "*" {
				return p, fmt.Errorf("address pattern %q: part %d after the range must be *", p.text, i+1)
			}
			pt = part{0, limit}
		case f == "*":
			pt, ranged = part{0, limit}, i
		case strings.Contains(f, "-"):
			lo, hi, _ := strings.Cut(f, "-")
			l, err1 := strconv.ParseInt(lo, base, 32)
			h, err2 := strconv.ParseInt(hi, base, 32)
			if err1 != nil || err2 != nil || l < 0 || h > int64(limit) || l > h {
				return p, fmt.Errorf("address pattern %q: %q is not a range lo-hi within [0, %d]", p.text, f, limit)
			}
			pt, ranged = part{int(l), int(h)}, i
		default:
			v, err := strconv.ParseInt(f, base, 32)
			if err != nil || v < 0 || v > int64(limit) {
				return p, fmt.Errorf("address pattern %q: part %q is not a number within [0, %d]", p.text, f, limit)
			}
			pt = part{int(v), int(v)}
		}
		if ranged == 0 {
			return p, fmt.Errorf("address pattern %q: the first part cannot be a wildcard or range", p.text)
		}
		p.parts = append(p.parts, pt)
	}
	return p, nil
}

// expandV6 splits an IPv6 pattern into its 8 groups, filling "::" with
// zero groups.
func expandV6(s string) ([]string, error) {
	head, tail, double := strings.Cut(s, "::")
	if !double {
		return strings.Split(s, ":"), nil
	}
	var h, t []string
	if head != "" {
		h = strings.Split(head, ":")
	}
	if tail != "" {
		t = strings.Split(tail, ":")
	}
	if len(h)+len(t) >= 8 || strings.Contains(tail, "::") {
		return nil, fmt.Errorf("address pattern %q: not an IPv6 pattern", s)
	}
	out := append([]string{}, h...)
	for i := len(h) + len(t); i < 8; i++ {
		out = append(out, "0")
	}
	return append(out, t...), nil
}

// Match reports whether the pattern admits addr.
func (p AddressPattern) Match(addr netip.Addr) bool {
	addr = addr.Unmap()
	switch {
	case p.any:
		return true
	case p.set != nil:
		return p.set[addr]
	case p.parts == nil || !addr.IsValid():
		return false
	case p.v6 != addr.Is6():
		return false
	}
	var vals []int
	if p.v6 {
		b := addr.As16()
		for i := 0; i < 16; i += 2 {
			vals = append(vals, int(b[i])<<8|int(b[i+1]))
		}
	} else {
		for _, v := range addr.As4() {
			vals = append(vals, int(v))
		}
	}
	for i, pt := range p.parts {
		if vals[i] < pt.lo || vals[i] > pt.hi {
			return false
		}
	}
	return true
}
