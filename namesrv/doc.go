// Package namesrv is a RocketMQ name server: the route registry brokers
// register with and clients ask for topic routes, plus the helpers a broker
// needs to register itself.
//
// # Tables
//
//	topics        topic      -> []QueueData (one per broker name, sorted)
//	brokerTopics  brokerName -> set of topics it has queue data in
//	groups        brokerName -> cluster, zone, {brokerId -> "ip:port"}
//	clusters      cluster    -> set of broker names
//	live          (cluster, brokerAddr) -> last renewal, timeout,
//	              data version, HA address, connection
//	mappings      static topic -> {brokerName -> TopicQueueMappingInfo}
//
// A route lookup reads one topics entry and the groups it names: O(brokers
// of the topic). Removing a broker group walks its brokerTopics entry:
// O(its topics). Only a master (or, with no master, the "prime slave": the
// 5.x slave with the smallest id) writes queue data and static topics'
// mappings, and only where it differs from what is stored, so the
// periodic re-registration of 10,000 unchanged topics costs one lookup and
// one comparison each, and the chunks of a split registration (which share
// one data version) all take effect. A prime slave's topic configs replace
// what its master left only once the slave registers a new data version,
// as in RocketMQ. So does a master's for the queue data
// REGISTER_TOPIC_IN_NAMESRV (217) stored (pinned: broker name -> topics).
//
// # Lifecycle of a broker
//
//	REGISTER_BROKER (103) every 30 s ----> live entry renewed, queue data
//	BROKER_HEARTBEAT (904), QUERY_DATA_VERSION (322) -> live entry renewed
//	no renewal for 120 s (scan every 5 s) -> removed, its connection closed
//	                                         (other brokers on it that still
//	                                         renew stay registered)
//	UNREGISTER_BROKER (104) or its connection closes -> removed
//
// Removing a group's last address removes the group, its cluster membership
// and its queue data; a topic without queue data disappears.
//
// # Bodies
//
// Routes (GET_ROUTEINFO_BY_TOPIC, 105) are written by hand in the
// "standard" JSON a Java name server sends to clients of version 4.9.4 and
// later: alphabetical fields, quoted broker-id keys, no whitespace, and
// brokerDatas and queueDatas always present, because the Go client cuts the
// brokerAddrs text itself and panics without it:
//
//	{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a",
//	"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},
//	"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,
//	"topicSysFlag":0,"writeQueueNums":4}]}
//
// The route of a static topic ends with its mappings,
// "topicQueueMappingByBroker":{"broker-a":{"bname":...,"currIdMap":{"0":0},...}}.
//
// REGISTER_BROKER bodies come plain (JSON) or compressed (zlib); see
// RegisterBrokerBody for both layouts.
//
// # Configuration
//
// The server runs with RocketMQ's namesrv.properties keys (configs.Namesrv,
// ConfigFrom). GET_NAMESRV_CONFIG (319) reports every key in force as
// key=value lines; UPDATE_NAMESRV_CONFIG (318) changes the switches read
// per request (orderMessageEnable, returnOrderTopicConfigToBroker,
// enableAllTopicList, enableTopicList, needWaitForService,
// waitSecondsForService, supportActingMaster, notifyMinBrokerIdChanged) and at every registration
// (deleteTopicWithBrokerRegistration), writes the change back into the -c
// file, and refuses the black-listed keys with NO_PERMISSION and any other
// key with a remark that says to restart.
package namesrv
