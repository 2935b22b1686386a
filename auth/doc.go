// Package auth is RocketMQ 5.3's access control, "ACL 2.0"
// (authenticationEnabled, authorizationEnabled): users who sign their
// requests, and access lists of policies that allow or deny actions on
// resources. The broker maps each request to what it needs (auth.Need)
// and keeps users and access lists in its Pebble database (kvindex
// keyspaces 0x42 and 0x43); this package decides. Package acl is the older
// plain ACL (1.0), whose signature check this package reuses and whose
// accounts FromV1 migrates.
//
// # Users and access lists
//
// A user has a username (the AccessKey a client signs with), a password
// (its SecretKey), a type, Super or Normal, and a status, enable or
// disable. The access list of a user has the subject "User:<name>" and up
// to two policies, Custom and Default, each a list of entries:
//
//	resource   "*" | "<Type>:*" | "<Type>:<prefix>*" | "<Type>:<name>"
//	           Type: Cluster, Namespace, Topic, Group
//	actions    Pub Sub Create Update Delete Get List, or All
//	sourceIps  IP addresses or CIDR blocks; none: every address
//	decision   Allow | Deny
//
// # The check of a request
//
//	code in authenticationWhitelist ----------------------------.
//	no AccessKey            -> "username cannot be null."        |
//	unknown user            -> "User:<u> is not found."          | authentication
//	disabled user           -> "User:<u> is disabled."           | (authenticationEnabled)
//	Signature != Base64(HmacSHA1(password, sorted field values   |
//	    + body))            -> "check signature failed."         |
//	<-----------------------------------------------------------'
//	code in authorizationWhitelist, or the request needs nothing -> allowed
//	unknown user            -> "User:<u> not found."             | authorization
//	disabled user           -> "User:<u> is disabled."           | (authorizationEnabled)
//	Super user              -> allowed                           |
//	for each need (resource, actions) of the request:            |
//	    entries of the Custom policy that match the resource,    |
//	    one of the actions and the client address; none: those   |
//	    of the Default policy; none: "... no matched policies."  |
//	    the most specific decides: a literal name, then the      |
//	    longest prefix, then <Type>:*, then *; Deny on a tie     |
//	    Deny -> "User:<u> has no permission to access            |
//	            <resource> from <ip>, the decision is deny."     |
//	<-----------------------------------------------------------'
//	allowed
//
// A refusal is answered NO_PERMISSION (16) with the message as remark,
// as RocketMQ 5.3's broker does.
//
// Each check reads its Store (the broker's tables keep the last users and
// access lists read in memory), so an edit made through the admin
// requests counts from the next request on. The checker keeps what it
// compiled of each access list with the stored form it came from, and
// compiles again only when the store returns a different one.
package auth
