package auth

import (
	"fmt"
	"strings"

	"github.com/rocketkv/rocketkv/meta"
)

// MergeACL applies upd to old (nil when the subject has none) as
// RocketMQ's createAcl and updateAcl both do: a policy of a type old lacks
// is added; within a policy of a type old has, an entry for a resource
// old lists replaces its actions, source addresses and decision, and an
// entry for a new resource is added. Policy types are written out
// ("Custom" when empty) and resources in their key form. upd must have
// compiled.
func MergeACL(old *meta.AclInfo, upd meta.AclInfo) (meta.AclInfo, error) {
	var out meta.AclInfo
	if old != nil {
		out = cloneACL(*old)
	}
	out.Subject = upd.Subject
	for _, p := range upd.Policies {
		typ, err := ParsePolicyType(p.PolicyType)
		if err != nil {
			return out, err
		}
		i := policyIndex(out, typ)
		if i < 0 {
			out.Policies = append(out.Policies, meta.PolicyInfo{PolicyType: typ.String()})
			i = len(out.Policies) - 1
		}
		dst := &out.Policies[i]
		dst.PolicyType = typ.String()
		for _, e := range p.Entries {
			r, err := ParseResource(e.Resource)
			if err != nil {
				return out, err
			}
			e.Resource = r.Key()
			j := entryIndex(*dst, r)
			if j < 0 {
				dst.Entries = append(dst.Entries, e)
			} else {
				dst.Entries[j] = e
			}
		}
	}
	return out, nil
}

// DeleteFromACL removes the entry for resource from the policy of typ and
// drops the policy when it has no entry left. empty reports that the
// access list has no policy left (RocketMQ then deletes it).
func DeleteFromACL(a meta.AclInfo, typ PolicyType, resource Resource) (out meta.AclInfo, empty bool) {
	out = cloneACL(a)
	i := policyIndex(out, typ)
	if i < 0 {
		return out, len(out.Policies) == 0
	}
	p := &out.Policies[i]
	if j := entryIndex(*p, resource); j >= 0 {
		p.Entries = append(p.Entries[:j], p.Entries[j+1:]...)
	}
	if len(p.Entries) == 0 {
		out.Policies = append(out.Policies[:i], out.Policies[i+1:]...)
	}
	return out, len(out.Policies) == 0
}

// FilterACL returns a with only the entries whose resource key contains
// resourceFilter (every entry when it is empty or the subject contains
// it), and whether anything is left: RocketMQ's listAcl filter.
func FilterACL(a meta.AclInfo, resourceFilter string) (meta.AclInfo, bool) {
	out := cloneACL(a)
	if resourceFilter == "" || strings.Contains(a.Subject, resourceFilter) {
		return out, len(out.Policies) > 0
	}
	var kept []meta.PolicyInfo
	for _, p := range out.Policies {
		var es []meta.PolicyEntryInfo
		for _, e := range p.Entries {
			if strings.Contains(e.Resource, resourceFilter) {
				es = append(es, e)
			}
		}
		if len(es) > 0 {
			p.Entries = es
			kept = append(kept, p)
		}
	}
	out.Policies = kept
	return out, len(kept) > 0
}

func policyIndex(a meta.AclInfo, typ PolicyType) int {
	for i, p := range a.Policies {
		if t, err := ParsePolicyType(p.PolicyType); err == nil && t == typ {
			return i
		}
	}
	return -1
}

func entryIndex(p meta.PolicyInfo, r Resource) int {
	for i, e := range p.Entries {
		if er, err := ParseResource(e.Resource); err == nil && er == r {
			return i
		}
	}
	return -1
}

func cloneACL(a meta.AclInfo) meta.AclInfo {
	out := meta.AclInfo{Subject: a.Subject}
	for _, p := range a.Policies {
		cp := meta.PolicyInfo{PolicyType: p.PolicyType}
		for _, e := range p.Entries {
			e.Actions = append([]string(nil), e.Actions...)
			e.SourceIps = append([]string(nil), e.SourceIps...)
			cp.Entries = append(cp.Entries, e)
		}
		out.Policies = append(out.Policies, cp)
	}
	return out
}

// Denied is a refused request. Its message is the remark RocketMQ 5.3's
// broker answers NO_PERMISSION with for the same refusal.
type Denied struct {
	Reason string
	// Authentication is set when the signer was refused (who), not what
	// it asked for.
	Authentication bool
}

// Error returns the remark.
func (d *Denied) Error() string { return d.Reason }

func denied(format string, args ...any) error { return &Denied{Reason: fmt.Sprintf(format, args...)} }
