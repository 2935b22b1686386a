package grpcproxy

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/rocketkv/rocketkv/grpcproxy/rmqpb"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/namesrv"
)

// mustJSON is json.Marshal, as the broker's jsonResponse writes its
// answers, for values that always marshal.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %+v: %v", v, err)
	}
	return b
}

// allValidUTF8 reports whether every string is valid UTF-8 (json.Marshal
// replaces what is not).
func allValidUTF8(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// groupAnswer is the broker's GET_SUBSCRIPTION_GROUP_CONFIG answer for a
// group of the policy gp.
func groupAnswer(t testing.TB, gp groupPolicy) []byte {
	gc := meta.NewSubscriptionGroupConfig("g")
	gc.ConsumeMessageOrderly, gc.RetryMaxTimes, gc.GroupRetryPolicy = gp.orderly, gp.retryMaxTimes, gp.retry
	return mustJSON(t, gc)
}

// FuzzGroupPolicy feeds arbitrary GET_SUBSCRIPTION_GROUP_CONFIG answers to
// the proxy's reader of a group's policy: it never panics, a policy it
// accepts reads back the same from the broker's writer of it, and a
// policy the broker writes (orderly, retries, either retry policy with
// arbitrary numbers) reads back as written.
func FuzzGroupPolicy(f *testing.F) {
	f.Add([]byte(`{"groupName":"g","consumeMessageOrderly":true,"retryMaxTimes":3,"groupRetryPolicy":{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000}}}`),
		true, int32(3), "EXPONENTIAL", int64(1000), int64(60000), int64(3), []byte{})
	f.Add([]byte(`{"groupName":"g","retryMaxTimes":16,"groupRetryPolicy":{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,5000]}}}`),
		false, int32(16), "CUSTOMIZED", int64(0), int64(0), int64(0), []byte{1, 5, 10})
	f.Add([]byte(`{"groupRetryPolicy":{"type":"customized","customizedRetryPolicy":{"next":null}}}`),
		false, int32(-1), "exponential", int64(-1), int64(1<<62), int64(0), []byte(nil))
	f.Add([]byte(`{"groupRetryPolicy":{"customizedRetryPolicy":{}}}`), false, int32(0), "", int64(0), int64(0), int64(0), []byte{0})
	f.Add([]byte(`{"retryMaxTimes":"3"}`), false, int32(0), "x", int64(0), int64(0), int64(0), []byte{})
	f.Add([]byte(`null`), false, int32(0), "", int64(0), int64(0), int64(0), []byte{})
	f.Fuzz(func(t *testing.T, body []byte, orderly bool, retries int32, typ string, initial, maxMS, mult int64, next []byte) {
		if utf8.ValidString(typ) {
			retry := &meta.GroupRetryPolicy{Type: typ,
				Exponential: &meta.ExponentialRetryPolicy{Initial: initial, Max: maxMS, Multiplier: mult},
				Customized:  &meta.CustomizedRetryPolicy{Next: []int64{}}}
			for _, b := range next {
				retry.Customized.Next = append(retry.Customized.Next, int64(b)*1000)
			}
			want := groupPolicy{orderly: orderly, retryMaxTimes: int(retries), retry: retry}
			got, err := decodeGroupPolicy(groupAnswer(t, want))
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("policy %+v (retry %+v) written, read back as %+v (retry %+v), %v", want, want.retry, got, got.retry, err)
			}
		}
		gp, err := decodeGroupPolicy(body)
		if err != nil {
			return
		}
		again, err := decodeGroupPolicy(groupAnswer(t, gp))
		if err != nil || !reflect.DeepEqual(again, gp) {
			t.Fatalf("%q read as %+v (retry %+v); written back and read as %+v (retry %+v), %v", body, gp, gp.retry, again, again.retry, err)
		}
	})
}

// messageTypeModel is what a topic of message.type v accepts: the types
// RocketMQ's TopicMessageType names (NORMAL also for no attribute),
// every type for MIXED, and only UNSPECIFIED, which no message has, for
// anything else.
func messageTypeModel(v string) []rmqpb.MessageType {
	switch v {
	case "", "NORMAL":
		return []rmqpb.MessageType{rmqpb.MessageType_NORMAL}
	case "MIXED":
		return []rmqpb.MessageType{rmqpb.MessageType_NORMAL, rmqpb.MessageType_FIFO, rmqpb.MessageType_DELAY, rmqpb.MessageType_TRANSACTION}
	}
	if t, ok := rmqpb.MessageType_value[v]; ok && t != int32(rmqpb.MessageType_MESSAGE_TYPE_UNSPECIFIED) {
		return []rmqpb.MessageType{rmqpb.MessageType(t)}
	}
	return []rmqpb.MessageType{rmqpb.MessageType_MESSAGE_TYPE_UNSPECIFIED}
}

// FuzzMessageTypes feeds arbitrary GET_TOPIC_CONFIG answers to the
// proxy's reader of a topic's message types: it never panics, accepts at
// least one type for every topic it reads (an empty list would refuse
// every producer), and agrees with messageTypeModel on the message.type
// of any topic the broker writes, and of any answer it reads.
func FuzzMessageTypes(f *testing.F) {
	tc := meta.NewTopicConfig("TopicA", 8)
	tc.Attributes[meta.AttrMessageType] = "FIFO"
	f.Add(mustJSON(f, tc), "FIFO")
	f.Add([]byte(`{"topicName":"T","attributes":{"message.type":"MIXED"},"mappingDetail":null}`), "MIXED")
	f.Add([]byte(`{"topicName":"T","attributes":null}`), "")
	f.Add([]byte(`{"attributes":{"+message.type":"DELAY"}}`), "TRANSACTION")
	f.Add([]byte(`{"attributes":{"message.type":"MESSAGE_TYPE_UNSPECIFIED"}}`), "fifo")
	f.Add([]byte(`{"attributes":{"message.type":7}}`), "UNSPECIFIED")
	for _, typ := range []string{"DELAY", "FIFO", "MIXED", "NORMAL", "TRANSACTION", "UNSPECIFIED"} { // RocketMQ's TopicMessageType
		f.Add([]byte(`{}`), typ)
	}
	f.Fuzz(func(t *testing.T, body []byte, typ string) {
		if utf8.ValidString(typ) {
			tc := meta.NewTopicConfig("T", 4)
			tc.Attributes[meta.AttrMessageType] = typ
			got, err := decodeMessageTypes(mustJSON(t, tc))
			if want := messageTypeModel(typ); err != nil || !slices.Equal(got, want) {
				t.Fatalf("message.type %q read as %v, want %v (%v)", typ, got, want, err)
			}
		}
		got, err := decodeMessageTypes(body)
		if err != nil {
			return
		}
		var read meta.TopicConfig
		if err := json.Unmarshal(body, &read); err != nil {
			t.Fatalf("%q read as %v, but is no TopicConfig: %v", body, got, err)
		}
		if want := messageTypeModel(read.Attributes[meta.AttrMessageType]); len(got) == 0 || !slices.Equal(got, want) {
			t.Fatalf("%q read as %v, want %v", body, got, want)
		}
	})
}

// FuzzAuthBodies feeds arbitrary AUTH_GET_USER and AUTH_GET_ACL answers to
// the proxy's readers: they never panic; a user or access list they
// accept is written back by the broker (json.Marshal) as bytes that read
// as the same value, stably; and a user or an access list of one entry
// the broker writes reads back as written.
func FuzzAuthBodies(f *testing.F) {
	f.Add([]byte(`{"username":"alice","password":"secret","userType":"Normal","userStatus":"enable"}`),
		"alice", "secret", "Topic:t*", "Pub", "10.0.0.0/8", "Allow")
	f.Add([]byte(`{"subject":"User:alice","policies":[{"policyType":"Custom","entries":[{"resource":"Topic:t","actions":["Pub","Sub"],"sourceIps":["10.0.0.1"],"decision":"Allow"}]}]}`),
		"", "", "*", "All", "", "Deny")
	f.Add([]byte(`{"subject":"User:a","policies":[],"username":null}`), "\u00e9", "\x00", "Group:g", "", "::1", "")
	f.Add([]byte(`{"policies":[{"entries":[{"actions":[]}]}]}`), "a", "b", "c", "d", "e", "f")
	f.Add([]byte(`[]`), "", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, body []byte, name, password, resource, action, source, decision string) {
		if allValidUTF8(name, password, resource, action, source, decision) {
			u := meta.UserInfo{Username: name, Password: password, UserType: "Normal", UserStatus: "enable"}
			if got, err := decodeUser(mustJSON(t, u)); err != nil || got != u {
				t.Fatalf("user %+v written, read back as %+v, %v", u, got, err)
			}
			a := meta.AclInfo{Subject: "User:" + name, Policies: []meta.PolicyInfo{{PolicyType: "Custom", Entries: []meta.PolicyEntryInfo{{
				Resource: resource, Actions: []string{action}, SourceIps: []string{source}, Decision: decision}}}}}
			if got, err := decodeACL(mustJSON(t, a)); err != nil || !reflect.DeepEqual(got, a) {
				t.Fatalf("access list %+v written, read back as %+v, %v", a, got, err)
			}
		}
		if u, err := decodeUser(body); err == nil {
			again, err := decodeUser(mustJSON(t, u))
			if err != nil || again != u {
				t.Fatalf("%q read as user %+v; written back and read as %+v, %v", body, u, again, err)
			}
		}
		if a, err := decodeACL(body); err == nil {
			// omitempty drops an empty list: compare from the first
			// writing on.
			once := mustJSON(t, a)
			b, err := decodeACL(once)
			if err != nil {
				t.Fatalf("%q read as access list %+v, not its writing %s: %v", body, a, once, err)
			}
			if twice := mustJSON(t, b); string(twice) != string(once) {
				t.Fatalf("%q read as access list %+v: written %s, then %s", body, a, once, twice)
			}
		}
	})
}

// fastjsonClusterInfo writes a GET_BROKER_CLUSTER_INFO answer as a Java
// name server does: the broker ids of brokerAddrs are bare keys.
func fastjsonClusterInfo(t testing.TB, ci namesrv.ClusterInfo) []byte {
	out := []byte(`{"brokerAddrTable":{`)
	first := true
	for name, bd := range ci.BrokerAddrTable {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, mustJSON(t, name)...)
		out = append(out, `:{"brokerAddrs":{`...)
		i := 0
		for id, addr := range bd.BrokerAddrs {
			if i > 0 {
				out = append(out, ',')
			}
			i++
			out = strconv.AppendInt(out, id, 10)
			out = append(out, ':')
			out = append(out, mustJSON(t, addr)...)
		}
		out = append(out, `},"brokerName":`...)
		out = append(out, mustJSON(t, name)...)
		out = append(out, `,"cluster":"c"}`...)
	}
	return append(out, `},"clusterAddrTable":{"c":[]}}`...)
}

// FuzzClusterMasters feeds arbitrary GET_BROKER_CLUSTER_INFO answers to
// the reader of the masters the proxy reads users and access lists from:
// it never panics, returns only non-empty addresses, and reads a cluster
// of two broker groups, written by rocketkv's name server or by a Java
// one, as the masters (broker id 0) of the groups in name order.
func FuzzClusterMasters(f *testing.F) {
	f.Add([]byte(`{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"c"}},"clusterAddrTable":{"c":["broker-a"]}}`),
		"broker-a", "10.0.0.1:10911", "broker-b", int64(1), "10.0.0.2:10911")
	f.Add([]byte(`{"brokerAddrTable":{"b":{"brokerAddrs":{"0":"x:1"}},"a":{"brokerAddrs":{"0":""}}}}`),
		"b", "", "a", int64(0), "a:1")
	f.Add([]byte(`{"brokerAddrTable":{"a":{"brokerAddrs":{-1:"x"}}}}`), "a", "a:1", "a", int64(0), "a:2")
	f.Add([]byte(`{"brokerAddrTable":null}`), "", "", "", int64(-1), "")
	f.Add([]byte(`{"brokerAddrTable":{"a":{"brokerAddrs":{0x1:"x"}}}}`), "", "", "", int64(-1), "")
	f.Fuzz(func(t *testing.T, body []byte, name1, addr1, name2 string, id2 int64, addr2 string) {
		if allValidUTF8(name1, addr1, name2, addr2) {
			ci := namesrv.ClusterInfo{BrokerAddrTable: map[string]namesrv.BrokerData{
				name1: {BrokerName: name1, Cluster: "c", BrokerAddrs: map[int64]string{namesrv.MasterID: addr1}},
			}}
			ci.BrokerAddrTable[name2] = namesrv.BrokerData{BrokerName: name2, Cluster: "c", BrokerAddrs: map[int64]string{id2: addr2}}
			var want []string
			for _, name := range slices.Sorted(maps.Keys(ci.BrokerAddrTable)) {
				if a := ci.BrokerAddrTable[name].BrokerAddrs[namesrv.MasterID]; a != "" {
					want = append(want, a)
				}
			}
			for form, data := range map[string][]byte{"rocketkv": ci.AppendJSON(nil), "Java": fastjsonClusterInfo(t, ci)} {
				got, err := decodeClusterMasters(data)
				if err != nil || !slices.Equal(got, want) {
					t.Fatalf("%s cluster info %s read as masters %q, want %q (%v)", form, data, got, want, err)
				}
			}
		}
		masters, err := decodeClusterMasters(body)
		if err != nil {
			return
		}
		for _, a := range masters {
			if a == "" {
				t.Fatalf("%q read as masters %q: an empty address", body, masters)
			}
		}
	})
}
