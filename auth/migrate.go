package auth

import (
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
