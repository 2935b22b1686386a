package namesrv

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/rocketkv/rocketkv/internal/adminbody"
	"github.com/rocketkv/rocketkv/internal/jsonscan"
)

// Permission bits of topics and queue data (Java PermName).
const (
	PermPriority int32 = 8 // PRIORITY
	PermRead     int32 = 4 // READ
	PermWrite    int32 = 2 // WRITE
	PermInherit  int32 = 1 // INHERIT: a template topic auto-create may copy
)

// Topic filter types (Java TopicFilterType).
const (
	SingleTag = "SINGLE_TAG"
	MultiTag  = "MULTI_TAG"
)

// MasterID is the broker id of a master; slaves have ids above it.
const MasterID int64 = 0

// DataVersion versions a broker's topic configuration; the name server
// rebuilds a broker's queue data only when it changes (Java DataVersion).
// JSON: {"counter":N,"stateVersion":0,"timestamp":ms}.
type DataVersion struct {
	// Counter grows by one on every change.
	Counter int64 `json:"counter"`
	// StateVersion is the controller epoch in controller mode, else 0.
	StateVersion int64 `json:"stateVersion"`
	// Timestamp is the time of the last change, ms since the epoch.
	Timestamp int64 `json:"timestamp"`
}

// appendJSON appends the DataVersion as fastjson writes it.
func (v DataVersion) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"counter":`...)
	dst = strconv.AppendInt(dst, v.Counter, 10)
	dst = append(dst, `,"stateVersion":`...)
	dst = strconv.AppendInt(dst, v.StateVersion, 10)
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, v.Timestamp, 10)
	return append(dst, '}')
}

// TopicConfig is a broker's configuration of one topic, as brokers send it
// in REGISTER_BROKER (Java TopicConfig; JSON names as the fields' tags).
type TopicConfig struct {
	// Attributes are extra settings such as "message.type"; nil reads as
	// empty.
	Attributes map[string]string `json:"attributes"`
	// Order marks an ordered topic.
	Order bool `json:"order"`
	// Perm holds PermRead, PermWrite, PermInherit (default 6).
	Perm int32 `json:"perm"`
	// ReadQueueNums is the number of readable queues (default 16).
	ReadQueueNums int32 `json:"readQueueNums"`
	// TopicFilterType is SingleTag or MultiTag.
	TopicFilterType string `json:"topicFilterType"`
	// TopicName is the topic.
	TopicName string `json:"topicName"`
	// TopicSysFlag holds the unit (1) and unit-sub (2) bits.
	TopicSysFlag int32 `json:"topicSysFlag"`
	// WriteQueueNums is the number of writable queues (default 16).
	WriteQueueNums int32 `json:"writeQueueNums"`
}

// appendJSON appends the TopicConfig with fastjson's alphabetical order.
func (tc *TopicConfig) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"attributes":`...)
	dst = appendStringMap(dst, tc.Attributes)
	dst = append(dst, `,"order":`...)
	dst = strconv.AppendBool(dst, tc.Order)
	dst = append(dst, `,"perm":`...)
	dst = strconv.AppendInt(dst, int64(tc.Perm), 10)
	dst = append(dst, `,"readQueueNums":`...)
	dst = strconv.AppendInt(dst, int64(tc.ReadQueueNums), 10)
	dst = append(dst, `,"topicFilterType":`...)
	dst = jsonscan.AppendString(dst, filterTypeOrDefault(tc.TopicFilterType))
	dst = append(dst, `,"topicName":`...)
	dst = jsonscan.AppendString(dst, tc.TopicName)
	dst = append(dst, `,"topicSysFlag":`...)
	dst = strconv.AppendInt(dst, int64(tc.TopicSysFlag), 10)
	dst = append(dst, `,"writeQueueNums":`...)
	dst = strconv.AppendInt(dst, int64(tc.WriteQueueNums), 10)
	return append(dst, '}')
}

func filterTypeOrDefault(t string) string {
	if t == "" {
		return SingleTag
	}
	return t
}

// QueueData is one broker's queues of a topic, as routes carry it.
type QueueData struct {
	// BrokerName names the broker group (master and slaves).
	BrokerName string `json:"brokerName"`
	// Perm is the topic's permission on that broker.
	Perm int32 `json:"perm"`
	// ReadQueueNums is the number of readable queues.
	ReadQueueNums int32 `json:"readQueueNums"`
	// TopicSysFlag is the topic's system flag.
	TopicSysFlag int32 `json:"topicSysFlag"`
	// WriteQueueNums is the number of writable queues.
	WriteQueueNums int32 `json:"writeQueueNums"`
}

func (q *QueueData) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"brokerName":`...)
	dst = jsonscan.AppendString(dst, q.BrokerName)
	dst = append(dst, `,"perm":`...)
	dst = strconv.AppendInt(dst, int64(q.Perm), 10)
	dst = append(dst, `,"readQueueNums":`...)
	dst = strconv.AppendInt(dst, int64(q.ReadQueueNums), 10)
	dst = append(dst, `,"topicSysFlag":`...)
	dst = strconv.AppendInt(dst, int64(q.TopicSysFlag), 10)
	dst = append(dst, `,"writeQueueNums":`...)
	dst = strconv.AppendInt(dst, int64(q.WriteQueueNums), 10)
	return append(dst, '}')
}

// BrokerData is a broker group: its cluster, name and the address of each
// member by broker id (0 = master).
type BrokerData struct {
	// BrokerAddrs maps broker id to "ip:port".
	BrokerAddrs map[int64]string `json:"brokerAddrs"`
	// BrokerName names the group.
	BrokerName string `json:"brokerName"`
	// Cluster is the cluster the group belongs to.
	Cluster string `json:"cluster"`
	// EnableActingMaster is set by 5.x brokers running in slave-acting-master mode.
	EnableActingMaster bool `json:"enableActingMaster"`
	// ZoneName is the zone the broker registered with (ext field __ZONE_NAME); empty is omitted.
	ZoneName string `json:"zoneName,omitempty"`
}

// appendJSON writes the BrokerData with quoted, numerically sorted
// brokerAddrs keys and no spaces: the Go client cuts the brokerAddrs text
// at ',' and the first ':' itself, so a space would end up in an address.
func (b *BrokerData) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"brokerAddrs":`...)
	dst = appendBrokerAddrs(dst, b.BrokerAddrs)
	dst = append(dst, `,"brokerName":`...)
	dst = jsonscan.AppendString(dst, b.BrokerName)
	dst = append(dst, `,"cluster":`...)
	dst = jsonscan.AppendString(dst, b.Cluster)
	dst = append(dst, `,"enableActingMaster":`...)
	dst = strconv.AppendBool(dst, b.EnableActingMaster)
	if b.ZoneName != "" {
		dst = append(dst, `,"zoneName":`...)
		dst = jsonscan.AppendString(dst, b.ZoneName)
	}
	return append(dst, '}')
}

// appendBrokerAddrs writes a broker-id -> address map with quoted keys in
// numeric order.
func appendBrokerAddrs(dst []byte, addrs map[int64]string) []byte {
	dst = append(dst, '{')
	for i, id := range slices.Sorted(maps.Keys(addrs)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = strconv.AppendInt(dst, id, 10)
		dst = append(dst, `":`...)
		dst = jsonscan.AppendString(dst, addrs[id])
	}
	return append(dst, '}')
}

// appendMemberGroupJSON writes GET_BROKER_MEMBER_GROUP's body, RocketMQ's
// GetBrokerMemberGroupResponseBody:
//
//	{"brokerMemberGroup":{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}}
func appendMemberGroupJSON(dst []byte, cluster, brokerName string, addrs map[int64]string) []byte {
	dst = append(dst, `{"brokerMemberGroup":{"brokerAddrs":`...)
	dst = appendBrokerAddrs(dst, addrs)
	dst = append(dst, `,"brokerName":`...)
	dst = jsonscan.AppendString(dst, brokerName)
	dst = append(dst, `,"cluster":`...)
	dst = jsonscan.AppendString(dst, cluster)
	return append(dst, "}}"...)
}

// MetadataScopeGlobal is a static topic mapping's default scope (Java
// MixAll.METADATA_SCOPE_GLOBAL).
const MetadataScopeGlobal = "__global__"

// TopicQueueMappingInfo is a static topic's mapping on one broker group,
// as brokers register it and routes carry it (Java TopicQueueMappingInfo):
// which of the topic's logical (global) queues the group hosts now, and
// on which of its physical queues.
//
//	{"bname":"broker-a","currIdMap":{"0":0,"1":1},"dirty":false,"epoch":1700000000000,
//	 "scope":"__global__","topic":"static-topic","totalQueues":4}
type TopicQueueMappingInfo struct {
	// Bname names the broker group the mapping is of.
	Bname string `json:"bname"`
	// CurrIDMap maps a logical queue id to the group's physical queue id.
	CurrIDMap map[int32]int32 `json:"currIdMap"`
	// Dirty marks a mapping being changed.
	Dirty bool `json:"dirty"`
	// Epoch orders mappings: the highest is current.
	Epoch int64 `json:"epoch"`
	// Scope is the mapping's scope, MetadataScopeGlobal by default.
	Scope string `json:"scope"`
	// Topic is the static topic.
	Topic string `json:"topic"`
	// TotalQueues is the topic's number of logical queues.
	TotalQueues int32 `json:"totalQueues"`
}

// decodeMappingInfo reads a mapping a broker registered, with Java's
// defaults for what it leaves out.
func decodeMappingInfo(raw []byte) (TopicQueueMappingInfo, error) {
	info := TopicQueueMappingInfo{Scope: MetadataScopeGlobal}
	if err := adminbody.UnmarshalFastjson(raw, &info); err != nil {
		return TopicQueueMappingInfo{}, fmt.Errorf("static topic mapping: %w", err)
	}
	return info, nil
}

// UnmarshalJSON reads a mapping with its epoch a JSON number or a string
// of one: appendJSON (as fastjson's BrowserCompatible does) writes an epoch
// beyond maxExactJSONInt as a string, and a route this name server wrote
// must read back, as Java's fastjson reads it.
func (m *TopicQueueMappingInfo) UnmarshalJSON(b []byte) error {
	type plain TopicQueueMappingInfo
	aux := struct {
		*plain
		Epoch json.RawMessage `json:"epoch"`
	}{plain: (*plain)(m)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	raw := aux.Epoch
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("mapping epoch %s: %w", raw, err)
		}
		e, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("mapping epoch %s: %w", raw, err)
		}
		m.Epoch = e
		return nil
	}
	if err := json.Unmarshal(raw, &m.Epoch); err != nil {
		return fmt.Errorf("mapping epoch %s: %w", raw, err)
	}
	return nil
}

// maxExactJSONInt is the largest integer a JavaScript number holds
// exactly: fastjson's BrowserCompatible writes a long beyond it as a
// string.
const maxExactJSONInt = 1<<53 - 1

// appendJSON appends the mapping as a Java name server writes it in a
// route: fields in alphabetical order, currIdMap's keys quoted and in
// numeric order, empty strings (Java's null) left out.
func (m *TopicQueueMappingInfo) appendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	if m.Bname != "" {
		dst = append(dst, `"bname":`...)
		dst = jsonscan.AppendString(dst, m.Bname)
		dst = append(dst, ',')
	}
	dst = append(dst, `"currIdMap":{`...)
	for i, id := range slices.Sorted(maps.Keys(m.CurrIDMap)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = strconv.AppendInt(dst, int64(id), 10)
		dst = append(dst, `":`...)
		dst = strconv.AppendInt(dst, int64(m.CurrIDMap[id]), 10)
	}
	dst = append(dst, `},"dirty":`...)
	dst = strconv.AppendBool(dst, m.Dirty)
	dst = append(dst, `,"epoch":`...)
	if m.Epoch > maxExactJSONInt || m.Epoch < -maxExactJSONInt {
		dst = append(dst, '"')
		dst = strconv.AppendInt(dst, m.Epoch, 10)
		dst = append(dst, '"')
	} else {
		dst = strconv.AppendInt(dst, m.Epoch, 10)
	}
	if m.Scope != "" {
		dst = append(dst, `,"scope":`...)
		dst = jsonscan.AppendString(dst, m.Scope)
	}
	if m.Topic != "" {
		dst = append(dst, `,"topic":`...)
		dst = jsonscan.AppendString(dst, m.Topic)
	}
	dst = append(dst, `,"totalQueues":`...)
	dst = strconv.AppendInt(dst, int64(m.TotalQueues), 10)
	return append(dst, '}')
}

// TopicRouteData is the answer to GET_ROUTEINFO_BY_TOPIC.
type TopicRouteData struct {
	// BrokerDatas are the broker groups holding the topic, by name.
	BrokerDatas []BrokerData `json:"brokerDatas"`
	// FilterServerTable maps broker address to its filter servers (legacy).
	FilterServerTable map[string][]string `json:"filterServerTable"`
	// OrderTopicConf is "brokerName:queueNum;..." from the ORDER_TOPIC_CONFIG
	// KV namespace when order messages are enabled; empty is omitted.
	OrderTopicConf string `json:"orderTopicConf,omitempty"`
	// QueueDatas are the topic's queues on each broker group, by name.
	QueueDatas []QueueData `json:"queueDatas"`
	// TopicQueueMappingByBroker holds a static topic's mappings by broker
	// name, as its brokers registered them; empty (omitted) for other
	// topics. A client treats a topic whose route has it as static.
	TopicQueueMappingByBroker map[string]TopicQueueMappingInfo `json:"topicQueueMappingByBroker,omitempty"`
}

// AppendJSON appends the route as a Java name server writes it for clients
// of version 4.9.4 and later ("standard" JSON): fields in alphabetical
// order, quoted numeric map keys, no whitespace; brokerDatas and queueDatas
// are always present. Every client parses this form (spec 7.3, 7.4).
func (r *TopicRouteData) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"brokerDatas":[`...)
	for i := range r.BrokerDatas {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = r.BrokerDatas[i].appendJSON(dst)
	}
	dst = append(dst, `],"filterServerTable":{`...)
	addrs := make([]string, 0, len(r.FilterServerTable))
	for a := range r.FilterServerTable {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	for i, a := range addrs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonscan.AppendString(dst, a)
		dst = append(dst, ':')
		dst = appendStringList(dst, r.FilterServerTable[a])
	}
	dst = append(dst, '}')
	if r.OrderTopicConf != "" {
		dst = append(dst, `,"orderTopicConf":`...)
		dst = jsonscan.AppendString(dst, r.OrderTopicConf)
	}
	dst = append(dst, `,"queueDatas":[`...)
	for i := range r.QueueDatas {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = r.QueueDatas[i].appendJSON(dst)
	}
	dst = append(dst, ']')
	if len(r.TopicQueueMappingByBroker) > 0 {
		dst = append(dst, `,"topicQueueMappingByBroker":{`...)
		for i, name := range sortedKeys(r.TopicQueueMappingByBroker) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonscan.AppendString(dst, name)
			dst = append(dst, ':')
			m := r.TopicQueueMappingByBroker[name]
			dst = m.appendJSON(dst)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// ClusterInfo is the answer to GET_BROKER_CLUSTER_INFO.
type ClusterInfo struct {
	// BrokerAddrTable maps broker name to its group.
	BrokerAddrTable map[string]BrokerData `json:"brokerAddrTable"`
	// ClusterAddrTable maps cluster name to its broker names.
	ClusterAddrTable map[string][]string `json:"clusterAddrTable"`
}

// AppendJSON appends the cluster info with sorted keys and quoted broker ids.
func (ci *ClusterInfo) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"brokerAddrTable":{`...)
	for i, name := range sortedKeys(ci.BrokerAddrTable) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonscan.AppendString(dst, name)
		dst = append(dst, ':')
		bd := ci.BrokerAddrTable[name]
		dst = bd.appendJSON(dst)
	}
	dst = append(dst, `},"clusterAddrTable":{`...)
	for i, name := range sortedKeys(ci.ClusterAddrTable) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonscan.AppendString(dst, name)
		dst = append(dst, ':')
		dst = appendStringList(dst, ci.ClusterAddrTable[name])
	}
	return append(dst, "}}"...)
}

// appendTopicListJSON appends Java's TopicList body:
// {"brokerAddr":"...","topicList":[...]}, without brokerAddr when empty.
func appendTopicListJSON(dst []byte, topics []string, brokerAddr string) []byte {
	dst = append(dst, '{')
	if brokerAddr != "" {
		dst = append(dst, `"brokerAddr":`...)
		dst = jsonscan.AppendString(dst, brokerAddr)
		dst = append(dst, ',')
	}
	dst = append(dst, `"topicList":`...)
	dst = appendStringList(dst, topics)
	return append(dst, '}')
}

// appendKVTableJSON appends Java's KVTable body: {"table":{...}}.
func appendKVTableJSON(dst []byte, table map[string]string) []byte {
	dst = append(dst, `{"table":`...)
	dst = appendStringMap(dst, table)
	return append(dst, '}')
}

func appendStringList(dst []byte, list []string) []byte {
	dst = append(dst, '[')
	for i, s := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonscan.AppendString(dst, s)
	}
	return append(dst, ']')
}

// appendStringMap appends a string map as a JSON object with sorted keys;
// nil is written as {}.
func appendStringMap(dst []byte, m map[string]string) []byte {
	dst = append(dst, '{')
	for i, k := range sortedKeys(m) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonscan.AppendString(dst, k)
		dst = append(dst, ':')
		dst = jsonscan.AppendString(dst, m[k])
	}
	return append(dst, '}')
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
