package auth

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/rocketkv/rocketkv/internal/netprefix"
	"github.com/rocketkv/rocketkv/meta"
)

// Entry is one compiled policy entry.
type Entry struct {
	Resource Resource
	Actions  []Action
	// Sources are the client addresses the entry applies to; none means
	// every address.
	Sources  []netip.Prefix
	Decision Decision
}

// Policy is one compiled policy.
type Policy struct {
	Type    PolicyType
	Entries []Entry
}

// ACL is the compiled access list of one subject.
type ACL struct {
	Subject  string
	Policies []Policy
}

// ParseSourceIP reads a policy's source address: an IP address or a CIDR
// block, IPv4 or IPv6. An IPv4-mapped IPv6 address or block
// ("::ffff:10.0.0.0/104") is read as the IPv4 one, since clients' addresses
// are compared unmapped.
func ParseSourceIP(s string) (netip.Prefix, error) {
	if strings.TrimSpace(s) == "" {
		return netip.Prefix{}, fmt.Errorf("the source ip is empty")
	}
	p, err := netprefix.Parse(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("the source ip %q is invalid: %w", s, err)
	}
	return p, nil
}

// Compile checks an access list as RocketMQ's AuthorizationMetadataManager
// does before it stores one (a subject of a known type, at least one
// policy, entries with a resource, actions other than Any, valid source
// addresses and a decision) and returns it compiled for Decide.
func Compile(a meta.AclInfo) (*ACL, error) {
	if _, err := SubjectUser(a.Subject); err != nil {
		return nil, err
	}
	if len(a.Policies) == 0 {
		return nil, fmt.Errorf("the policies is empty")
	}
	out := &ACL{Subject: a.Subject}
	for _, p := range a.Policies {
		typ, err := ParsePolicyType(p.PolicyType)
		if err != nil {
			return nil, err
		}
		if len(p.Entries) == 0 {
			return nil, fmt.Errorf("the policy entries is empty")
		}
		cp := Policy{Type: typ}
		for _, e := range p.Entries {
			ce, err := compileEntry(e)
			if err != nil {
				return nil, err
			}
			cp.Entries = append(cp.Entries, ce)
		}
		out.Policies = append(out.Policies, cp)
	}
	return out, nil
}

func compileEntry(e meta.PolicyEntryInfo) (Entry, error) {
	r, err := ParseResource(e.Resource)
	if err != nil {
		return Entry{}, err
	}
	ce := Entry{Resource: r}
	if len(e.Actions) == 0 {
		return Entry{}, fmt.Errorf("the actions is empty (resource %s)", e.Resource)
	}
	for _, s := range e.Actions {
		a, err := ParseAction(s)
		if err != nil {
			return Entry{}, err
		}
		if a == ActionAny {
			return Entry{}, fmt.Errorf("the actions can not be Any")
		}
		if !slices.Contains(ce.Actions, a) {
			ce.Actions = append(ce.Actions, a)
		}
	}
	for _, s := range e.SourceIps {
		p, err := ParseSourceIP(s)
		if err != nil {
			return Entry{}, err
		}
		ce.Sources = append(ce.Sources, p)
	}
	if ce.Decision, err = ParseDecision(e.Decision); err != nil {
		return Entry{}, fmt.Errorf("the decision is null or illegal: %w", err)
	}
	return ce, nil
}

// Need is one thing a request asks: actions on a resource. Any one of
// Actions listed by a matching entry makes the entry match, as RocketMQ's
// isMatchAction.
type Need struct {
	Resource Resource
	Actions  []Action
}

// String formats the need for logs: "Topic:t Pub,Sub".
func (n Need) String() string {
	names := make([]string, len(n.Actions))
	for i, a := range n.Actions {
		names[i] = a.String()
	}
	return n.Resource.Key() + " " + strings.Join(names, ",")
}

func (e *Entry) matches(n Need, from netip.Addr) bool {
	if !e.Resource.Matches(n.Resource) {
		return false
	}
	actionOK := false
	for _, a := range n.Actions {
		if a == ActionAny || slices.Contains(e.Actions, a) || slices.Contains(e.Actions, ActionAll) {
			actionOK = true
			break
		}
	}
	if !actionOK || len(e.Actions) == 0 {
		return false
	}
	if len(e.Sources) == 0 {
		return true
	}
	from = from.Unmap()
	for _, p := range e.Sources {
		if p.Contains(from) {
			return true
		}
	}
	return false
}

// rank orders matching entries, most specific first: a resource of a type
// before "*", a literal name before a prefix before "<Type>:*", a longer
// prefix before a shorter one; between equals Deny first. The resource
// order is RocketMQ's AclAuthorizationHandler's since apache/rocketmq#9540
// (5.3.3's comparator put a shorter prefix first, so that "Topic:test*"
// Allow overrode "Topic:test_*" Deny). Between equals RocketMQ's
// comparator, even at 5.3.4, puts Allow first against its own comment
// ("the decision deny has higher priority"); rocketkv follows the comment.
// Equals are entries of one resource, which neither RocketMQ's admin
// requests nor MergeACL leave in one policy, so the two orders part only
// on an access list holding duplicates.
func rank(e *Entry) [4]int {
	any, pattern := 0, 0
	if e.Resource.Type == TypeAny {
		any = 1
	}
	switch e.Resource.Pattern {
	case PatternLiteral:
		pattern = 0
	case PatternPrefixed:
		pattern = 1
	default:
		pattern = 2
	}
	deny := 1
	if e.Decision == Deny {
		deny = 0
	}
	return [4]int{any, pattern, -len(e.Resource.Name), deny}
}

// Decide finds the entry that decides n for a client at from: among the
// entries of the Custom policy that match (resource, one of the actions,
// source address), else among the Default policy's, the most specific one
// (see rank). It returns nil when that entry allows, a *Denied otherwise.
func (a *ACL) Decide(n Need, from netip.Addr) error {
	var best *Entry
	if a != nil {
		for _, typ := range []PolicyType{Custom, Default} {
			for pi := range a.Policies {
				p := &a.Policies[pi]
				if p.Type != typ {
					continue
				}
				for ei := range p.Entries {
					e := &p.Entries[ei]
					if e.matches(n, from) && (best == nil || less(rank(e), rank(best))) {
						best = e
					}
				}
			}
			if best != nil {
				break
			}
		}
	}
	subject := ""
	if a != nil {
		subject = a.Subject
	}
	switch {
	case best == nil:
		return noPermission(subject, n, from, "no matched policies.")
	case best.Decision == Deny:
		return noPermission(subject, n, from, "the decision is deny.")
	}
	return nil
}

func less(x, y [4]int) bool { return slices.Compare(x[:], y[:]) < 0 }

func noPermission(subject string, n Need, from netip.Addr, detail string) error {
	ip := ""
	if from.IsValid() {
		ip = from.String()
	}
	return &Denied{Reason: fmt.Sprintf("%s has no permission to access %s from %s, %s", subject, n.Resource.Key(), ip, detail)}
}
