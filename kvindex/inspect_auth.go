package kvindex

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rocketkv/rocketkv/meta"
)

// PasswordMask replaces a user's password wherever inspection output
// shows a user without being asked for the password.
const PasswordMask = "******"

// UserRecord is one ACL 2.0 user (keyspace 0x42). Name comes from the key.
type UserRecord struct {
	Name string        `json:"name"`
	User meta.UserInfo `json:"user"`
}

// ACLRecord is the ACL 2.0 access list of one subject (keyspace 0x43).
// Subject comes from the key.
type ACLRecord struct {
	Subject string       `json:"subject"`
	ACL     meta.AclInfo `json:"acl"`
}

// Keyspace implements Record.
func (UserRecord) Keyspace() Keyspace { return mustKeyspace(PrefixAuthUser) }

// Keyspace implements Record.
func (ACLRecord) Keyspace() Keyspace { return mustKeyspace(PrefixAuthACL) }

// Masked returns r with its password replaced by PasswordMask (an empty
// password stays empty).
func (r UserRecord) Masked() UserRecord {
	if r.User.Password != "" {
		r.User.Password = PasswordMask
	}
	return r
}

// String implements Record. The password is masked.
func (r UserRecord) String() string {
	u := r.Masked().User
	return fmt.Sprintf("user=%q password=%q type=%s status=%s", r.Name, u.Password, u.UserType, u.UserStatus)
}

// String implements Record: the subject and one policy entry after the
// other, "<policyType> <resource> <actions> <sourceIps> <decision>".
func (r ACLRecord) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "subject=%q", r.Subject)
	for _, p := range r.ACL.Policies {
		for _, e := range p.Entries {
			fmt.Fprintf(&b, " [%s %s %s %s %s]", p.PolicyType, e.Resource, strings.Join(e.Actions, ","),
				strings.Join(e.SourceIps, ","), e.Decision)
		}
	}
	return b.String()
}

// decodeAuthKey decodes a key of 0x42 or 0x43.
func decodeAuthKey(key, value []byte) (Record, error) {
	name := string(key[1:])
	if key[0] == PrefixAuthUser {
		var u meta.UserInfo
		if err := json.Unmarshal(value, &u); err != nil {
			return nil, fmt.Errorf("user %q: %w: %w", name, ErrBadKey, err)
		}
		return UserRecord{Name: name, User: u}, nil
	}
	var a meta.AclInfo
	if err := json.Unmarshal(value, &a); err != nil {
		return nil, fmt.Errorf("acl %q: %w: %w", name, ErrBadKey, err)
	}
	return ACLRecord{Subject: name, ACL: a}, nil
}
