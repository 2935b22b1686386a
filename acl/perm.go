package acl

import (
	"fmt"
	"strings"
)

// Perm is a set of permission bits, numbered as RocketMQ's Permission.
type Perm uint8

// The permission bits.
const (
	// Deny refuses the resource whatever else is set.
	Deny Perm = 1
	// Any, as a needed permission, is met by PUB or SUB.
	Any Perm = 1 << 1
	// Pub allows sending to a topic.
	Pub Perm = 1 << 2
	// Sub allows consuming a topic, or acting as a consumer group.
	Sub Perm = 1 << 3
)

// String spells p as the file does.
func (p Perm) String() string {
	switch {
	case p&Deny != 0:
		return "DENY"
	case p&(Pub|Sub) == Pub|Sub:
		return "PUB|SUB"
	case p&Pub != 0:
		return "PUB"
	case p&Sub != 0:
		return "SUB"
	case p&Any != 0:
		return "ANY"
	}
	return "NONE"
}

// allows reports whether p, a permission owned, grants needed (RocketMQ's
// checkPermission).
func (p Perm) allows(needed Perm) bool {
	if p&Deny != 0 {
		return false
	}
	if needed&Any != 0 {
		return p&(Pub|Sub) != 0
	}
	return needed&p != 0
}

// ParsePerm reads a permission as the file spells it: DENY, PUB, SUB,
// PUB|SUB or SUB|PUB (surrounding spaces ignored). An empty string is
// DENY, as a missing default is in RocketMQ. Anything else is an error:
// RocketMQ reads it as DENY, which turns a typo into a silent refusal.
func ParsePerm(s string) (Perm, error) {
	switch strings.TrimSpace(s) {
	case "", "DENY":
		return Deny, nil
	case "PUB":
		return Pub, nil
	case "SUB":
		return Sub, nil
	case "PUB|SUB", "SUB|PUB":
		return Pub | Sub, nil
	}
	return 0, fmt.Errorf("permission %q is not DENY, PUB, SUB, PUB|SUB or SUB|PUB", s)
}
