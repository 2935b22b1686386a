package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// The request fields of the signature (RocketMQ's SessionCredentials).
const (
	FieldAccessKey     = "AccessKey"
	FieldSignature     = "Signature"
	FieldSecurityToken = "SecurityToken"
	// fieldUniqueKeyQuery is left out of the signed text of clients of
	// version V4_9_3 or older.
	fieldUniqueKeyQuery = "_UNIQUE_KEY_QUERY"
	versionV4_9_3       = 399
)

// TraceTopic is the default message-trace topic: sending to it needs no
// permission once the signature is good, as in RocketMQ.
const TraceTopic = "RMQ_SYS_TRACE_TOPIC"

// Request is what the check needs of one request.
type Request struct {
	Code    int32
	Version int32
	Remote  netip.Addr
	Fields  map[string]string
	Body    []byte
	// Resources are the topics and groups (as retry topics) the request
	// acts on, with the permission it needs on each.
	Resources []Resource
}

// Resource is a topic, or a group named by its retry topic, and the
// permission a request needs on it.
type Resource struct {
	Name string
	Perm Perm
}

// GroupResource returns the resource of a consumer group.
func GroupResource(group string, p Perm) Resource {
	return Resource{Name: RetryGroupTopicPrefix + group, Perm: p}
}

// adminCodes are the request codes only an admin account may send:
// RocketMQ's Permission.ADMIN_CODE (UPDATE_AND_CREATE_TOPIC 17,
// UPDATE_BROKER_CONFIG 25, DELETE_TOPIC_IN_BROKER 215,
// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200, DELETE_SUBSCRIPTIONGROUP 207),
// and what RocketMQ's list misses: the list forms of the creations
// (UPDATE_AND_CREATE_TOPIC_LIST 18, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST
// 225), offset resets (INVOKE_BROKER_TO_RESET_OFFSET 222), deleting
// CommitLog files (DELETE_EXPIRED_COMMITLOG 329) and the edits of the ACL
// itself (aclEditCodes).
var adminCodes = [...]int32{17, 25, 215, 200, 207, 18, 225, 222, 329, 50, 51, 53,
	3001, 3002, 3003, 3004, 3005, 3006, 3007, 3008, 3009, 3010}

// aclEditCodes edit the ACL (UPDATE_AND_CREATE_ACL_CONFIG,
// DELETE_ACL_CONFIG, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG), or read and edit
// the users and policies of ACL 2.0 (AUTH_CREATE_USER 3001 to
// AUTH_LIST_ACL 3010, which return passwords and outlive a switch to ACL
// 2.0). RocketMQ lets any account, and any white-listed address, send
// them; here they need a signed admin account whatever the white lists
// say: nobody may grant themselves permissions.
var aclEditCodes = [...]int32{50, 51, 53, 3001, 3002, 3003, 3004, 3005, 3006, 3007, 3008, 3009, 3010}

// Denied is a refused request. Its message is RocketMQ's AclException
// message for the same refusal.
type Denied struct{ Reason string }

// Error returns the refusal's reason.
func (d *Denied) Error() string { return d.Reason }

func denied(format string, args ...any) error { return &Denied{Reason: fmt.Sprintf(format, args...)} }

// Check decides r: nil when allowed, a *Denied when refused.
func (c *Config) Check(r *Request) error {
	edit := slices.Contains(aclEditCodes[:], r.Code)
	for _, w := range c.GlobalWhite {
		if w.Match(r.Remote) && !edit {
			return nil
		}
	}
	key, ok := r.Fields[FieldAccessKey]
	if !ok {
		return denied("No accessKey is configured")
	}
	acc, ok := c.Accounts[key]
	if !ok {
		return denied("No acl config for %s", key)
	}
	if acc.White.Match(r.Remote) && !edit {
		return nil
	}
	if !SignatureMatches(r.Fields, r.Body, r.Version, acc.SecretKey) {
		return denied("Check signature failed for accessKey=%s", key)
	}
	for _, res := range r.Resources {
		if res.Name == TraceTopic && res.Perm == Pub {
			return nil
		}
	}
	if acc.Admin {
		return nil
	}
	if slices.Contains(adminCodes[:], r.Code) {
		return denied("Need admin permission for request code=%d, but accessKey=%s is not", r.Code, key)
	}
	for _, res := range r.Resources {
		group := strings.HasPrefix(res.Name, RetryGroupTopicPrefix)
		owned, listed := acc.Resources[res.Name]
		what := "No permission for"
		if !listed {
			what, owned = "No default permission for", acc.DefaultTopicPerm
			if group {
				owned = acc.DefaultGroupPerm
			}
		}
		if !owned.allows(res.Perm) {
			if group {
				return denied("%s group:%s", what, strings.TrimPrefix(res.Name, RetryGroupTopicPrefix))
			}
			return denied("%s topic:%s", what, res.Name)
		}
	}
	return nil
}

// SignatureMatches checks the Signature field of a request (its fields,
// body and client version) against the text RocketMQ signs with secret.
// A Go client leaves SecurityToken out of the text it signs, so a request
// carrying one is also tried without it. ACL 2.0 (package auth) checks a
// user's password with it too.
func SignatureMatches(fields map[string]string, body []byte, version int32, secret string) bool {
	sig := fields[FieldSignature]
	var buf [64]byte
	if base64.StdEncoding.DecodedLen(len(sig)) > len(buf) {
		return false // longer than any HMAC-SHA1
	}
	n, err := base64.StdEncoding.Decode(buf[:], []byte(sig))
	if err != nil {
		return false
	}
	got := buf[:n]
	// The text as RocketMQ's broker builds it first; then, for the fields
	// clients disagree on, the other reading: a Go client leaves
	// SecurityToken out, and whether _UNIQUE_KEY_QUERY is signed depends
	// on the client's library rather than on the version it reports.
	versions := []int32{version}
	if _, ok := fields[fieldUniqueKeyQuery]; ok {
		other := int32(versionV4_9_3 + 1)
		if version > versionV4_9_3 {
			other = versionV4_9_3
		}
		versions = append(versions, other)
	}
	_, token := fields[FieldSecurityToken]
	for _, v := range versions {
		if hmac.Equal(got, Sign(fields, body, secret, v, false)) ||
			token && hmac.Equal(got, Sign(fields, body, secret, v, true)) {
			return true
		}
	}
	return false
}

// Sign returns the HMAC-SHA1, with secret, of the values of fields sorted
// by name (Signature left out, and _UNIQUE_KEY_QUERY for clients of
// version V4_9_3 or older; SecurityToken too when skipToken) followed by
// body. Base64 of it is the Signature field.
func Sign(fields map[string]string, body []byte, secret string, version int32, skipToken bool) []byte {
	names := make([]string, 0, len(fields))
	for k := range fields {
		switch {
		case k == FieldSignature,
			k == fieldUniqueKeyQuery && version <= versionV4_9_3,
			k == FieldSecurityToken && skipToken:
			continue
		}
		names = append(names, k)
	}
	slices.Sort(names)
	text := make([]byte, 0, 512)
	for _, k := range names {
		text = append(text, fields[k]...)
	}
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write(text)
	mac.Write(body)
	return mac.Sum(text[:0])
}

// SignedFields returns a copy of fields with AccessKey and the Signature a
// RocketMQ client adds for the account accessKey/secretKey, for a request
// of the given client version with body: what rocketkv's own tools send to
// a broker with the ACL on.
func SignedFields(fields map[string]string, body []byte, version int32, accessKey, secretKey string) map[string]string {
	out := make(map[string]string, len(fields)+2)
	for k, v := range fields {
		out[k] = v
	}
	delete(out, FieldSignature)
	out[FieldAccessKey] = accessKey
	out[FieldSignature] = base64.StdEncoding.EncodeToString(Sign(out, body, secretKey, version, false))
	return out
}
