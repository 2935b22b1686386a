package meta

// UserInfo is an ACL 2.0 user as RocketMQ 5.3's admin requests carry it
// (AUTH_CREATE_USER ... AUTH_LIST_USER bodies) and as the Pebble index
// keeps it. UserType is "Super" or "Normal", UserStatus "enable" or
// "disable"; RocketMQ reads both case-insensitively.
type UserInfo struct {
	Username   string `json:"username"`
	Password   string `json:"password,omitempty"`
	UserType   string `json:"userType,omitempty"`
	UserStatus string `json:"userStatus,omitempty"`
}

// AclInfo is the ACL 2.0 access list of one subject ("User:<name>"), as
// RocketMQ 5.3's admin requests carry it (AUTH_CREATE_ACL ...
// AUTH_LIST_ACL bodies) and as the Pebble index keeps it.
type AclInfo struct {
	Subject  string       `json:"subject"`
	Policies []PolicyInfo `json:"policies,omitempty"`
}

// PolicyInfo is one policy of an AclInfo: PolicyType "Custom" (what
// mqadmin creates) or "Default" (consulted only when no Custom entry
// matches).
type PolicyInfo struct {
	PolicyType string            `json:"policyType,omitempty"`
	Entries    []PolicyEntryInfo `json:"entries,omitempty"`
}

// PolicyEntryInfo is one entry of a policy: a resource ("Topic:t",
// "Group:g", "Topic:pre*", "Topic:*", "Cluster:*", "*"), the actions it
// covers (Pub, Sub, Create, Update, Delete, Get, List, All), the client
// addresses it applies to (IPs or CIDRs; none means every address) and
// its decision (Allow or Deny).
type PolicyEntryInfo struct {
	Resource  string   `json:"resource"`
	Actions   []string `json:"actions,omitempty"`
	SourceIps []string `json:"sourceIps,omitempty"`
	Decision  string   `json:"decision,omitempty"`
}
