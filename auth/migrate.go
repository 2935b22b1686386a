package auth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rocketkv/rocketkv/acl"
	"github.com/rocketkv/rocketkv/meta"
)

// Migrated is one ACL 1.0 account as ACL 2.0 has it: a user, and its
// access list (nil when the account named no permission).
type Migrated struct {
	User meta.UserInfo
	ACL  *meta.AclInfo
	// Refused says why the account cannot be imported at all: its user
	// is one AUTH_CREATE_USER refuses (a blank access or secret key, which
	// plain_acl.yml allows when longer than 6 characters). Nil when it
	// can.
	Refused error
	// ACLRefused says why the user imports without its access list: the
	// list does not compile (a topic permission on "%RETRY%" alone names
	// no group). ACL is nil then.
	ACLRefused error
}

// FromV1 maps the accounts of a plain_acl.yml as RocketMQ's AuthMigrator
// does: the access key is the username and the secret key the password;
// an admin account is a Super user, the others Normal; each topicPerms and
// groupPerms entry is a Custom policy entry on Topic:<name> or
// Group:<name>, and defaultTopicPerm and defaultGroupPerm, when given, are
// Default policy entries on Topic:* and Group:*. A permission maps to
// actions and a decision: PUB is Pub, SUB is Sub, PUB|SUB both, allowed;
// DENY is All, denied. White-listed addresses have no counterpart and are
// left out. Accounts come in access-key order, entries in name order.
// An account that cannot be imported has Refused set, an access list that
// cannot ACLRefused (see Migrated).
func FromV1(cfg *acl.Config) []Migrated {
	keys := make([]string, 0, len(cfg.Accounts))
	for k := range cfg.Accounts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]Migrated, 0, len(keys))
	for _, k := range keys {
		a := cfg.Accounts[k]
		m := Migrated{User: meta.UserInfo{Username: a.AccessKey, Password: a.SecretKey, UserType: UserNormal, UserStatus: UserEnable}}
		if a.Admin {
			m.User.UserType = UserSuper
		}
		var custom, def []meta.PolicyEntryInfo
		names := make([]string, 0, len(a.Resources))
		for n := range a.Resources {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			res := Topic(n).Key()
			if strings.HasPrefix(n, acl.RetryGroupTopicPrefix) {
				res = Group(n).Key()
			}
			custom = append(custom, v1Entry(res, a.Resources[n]))
		}
		if a.DefaultPermsGiven[0] {
			def = append(def, v1Entry("Topic:*", a.DefaultTopicPerm))
		}
		if a.DefaultPermsGiven[1] {
			def = append(def, v1Entry("Group:*", a.DefaultGroupPerm))
		}
		var policies []meta.PolicyInfo
		if len(custom) > 0 {
			policies = append(policies, meta.PolicyInfo{PolicyType: Custom.String(), Entries: custom})
		}
		if len(def) > 0 {
			policies = append(policies, meta.PolicyInfo{PolicyType: Default.String(), Entries: def})
		}
		if len(policies) > 0 {
			m.ACL = &meta.AclInfo{Subject: Subject(a.AccessKey), Policies: policies}
		}
		// As RocketMQ's AuthMigrator, which creates the user through the
		// checks of createUser and then the access list: an account the
		// checks refuse is not imported, an access list that does not
		// compile is left out.
		if _, err := NewUser(m.User); err != nil {
			m.Refused = fmt.Errorf("user %q: %w", a.AccessKey, err)
		} else if m.ACL != nil {
			if _, err := Compile(*m.ACL); err != nil {
				m.ACL, m.ACLRefused = nil, fmt.Errorf("access list of %q: %w", a.AccessKey, err)
			}
		}
		out = append(out, m)
	}
	return out
}

// v1Entry maps one ACL 1.0 permission on resource.
func v1Entry(resource string, p acl.Perm) meta.PolicyEntryInfo {
	e := meta.PolicyEntryInfo{Resource: resource, Decision: Allow.String()}
	switch {
	case p&acl.Deny != 0:
		e.Actions, e.Decision = []string{ActionAll.String()}, Deny.String()
	case p&(acl.Pub|acl.Sub) == acl.Pub|acl.Sub:
		e.Actions = []string{ActionPub.String(), ActionSub.String()}
	case p&acl.Pub != 0:
		e.Actions = []string{ActionPub.String()}
	case p&acl.Sub != 0:
		e.Actions = []string{ActionSub.String()}
	default:
		e.Actions = []string{ActionAll.String()}
	}
	return e
}
