// Package acl is RocketMQ's plain access control (ACL 1.0, broker.conf
// aclEnable=true): accounts and permissions from a plain_acl.yml file, a
// signature check of every request, and a permission check of the topics
// and groups a request names.
//
// # The file
//
// The same YAML file a RocketMQ 4.x or 5.0-5.2 broker reads
// ($ROCKETMQ_HOME/conf/plain_acl.yml):
//
//	globalWhiteRemoteAddresses:      # clients from these addresses skip every check
//	  - 10.10.103.*
//	accounts:
//	  - accessKey: RocketMQ          # longer than 6 characters
//	    secretKey: 12345678          # longer than 6 characters
//	    whiteRemoteAddress: 192.168.0.*   # this account from here skips its checks
//	    admin: false                 # admin: every request, every resource
//	    defaultTopicPerm: DENY       # for topics not listed below
//	    defaultGroupPerm: SUB        # for groups not listed below
//	    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
//	    groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]
//
// A permission is DENY, PUB, SUB, PUB|SUB or SUB|PUB; anything else reads
// as DENY, as in RocketMQ. Address patterns are RocketMQ's: "*" (any), a
// single IPv4 or IPv6 address, a comma-separated list, a list in braces in
// the last part ("192.168.1.{1,2}"), or one part given as "*" or a range
// "lo-hi" with every later part "*" ("192.168.1-10.*").
//
// # The check of a request
//
//	remote address in globalWhiteRemoteAddresses  -> allowed
//	no AccessKey field                            -> "No accessKey is configured"
//	unknown AccessKey                             -> "No acl config for <key>"
//	remote address in the account's white list   -> allowed
//	Signature != Base64(HmacSHA1(secretKey,
//	    values of the other fields sorted by name
//	    + body))                                  -> "Check signature failed for accessKey=<key>"
//	admin account                                 -> allowed
//	admin-only request code                       -> "Need admin permission for request code=..."
//	a named topic or group without the needed
//	    permission (listed, else the default)     -> "No permission for topic:<t>" / "No default permission for group:<g>"
//
// Groups are resources named by their retry topic (%RETRY%<group>), so a
// pull of a group's retry topic is checked against the group's permission.
// A refused request is answered SYSTEM_ERROR with the remark RocketMQ's
// AclException gives.
//
// RocketMQ 5.3's ACL 2.0 is package auth. A broker runs one or the other:
// aclEnable with authenticationEnabled or authorizationEnabled does not
// start; migrateAuthFromV1Enabled imports this file's accounts into 2.0.
package acl
