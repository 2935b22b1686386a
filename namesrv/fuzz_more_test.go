package namesrv

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/remoting"
)

// FuzzOpenKVStore feeds arbitrary bytes to the loader of kvConfig.json:
// it never panics, and a store that opens takes a new key, persists it
// and opens again with that key and every one it held.
func FuzzOpenKVStore(f *testing.F) {
	f.Add([]byte(`{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"broker-a:4"}}}`))
	f.Add([]byte(`{"configTable":{"ns":null,"":{"":""}}}`))
	f.Add([]byte(`{"configTable":null}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"configTable":{"ns":{"k":1}}}`))
	f.Add([]byte{})
	// One file for every input (each overwrites it), not a directory made
	// and removed per input.
	p := filepath.Join(f.TempDir(), "kvConfig.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := OpenKVStore(p)
		if err != nil {
			return
		}
		// What the file held, namespace by namespace, as the store lists it.
		var file kvFile
		_ = json.Unmarshal(data, &file) // fails only for a blank file, which holds nothing
		held := map[string]map[string]string{}
		for ns := range file.ConfigTable {
			if ns == "fuzz-ns" {
				continue
			}
			kv, ok := s.List(ns)
			if !ok {
				t.Fatalf("the store of %q lists no namespace %q", data, ns)
			}
			held[ns] = kv
		}
		if err := s.Put("fuzz-ns", "fuzz-k", "fuzz-v"); err != nil {
			t.Fatalf("put into the store of %q: %v", data, err)
		}
		again, err := OpenKVStore(p)
		if err != nil {
			t.Fatalf("the store of %q does not open once written back: %v", data, err)
		}
		if v, ok := again.Get("fuzz-ns", "fuzz-k"); !ok || v != "fuzz-v" {
			t.Fatalf("the store of %q lost a key written back: %q %v", data, v, ok)
		}
		// Writing the file back keeps every namespace and key it held.
		for ns, kv := range held {
			if got, _ := again.List(ns); !maps.Equal(got, kv) {
				t.Fatalf("the store of %q held %q in %q; written back, %q", data, kv, ns, got)
			}
		}
	})
}

// namesrvFuzzCodes are the request codes a name server answers; each
// decodes header fields, a body or both.
var namesrvFuzzCodes = []int32{
	remoting.RegisterBroker, remoting.UnregisterBroker, remoting.QueryDataVersion, remoting.BrokerHeartbeat,
	remoting.GetRouteInfoByTopic, remoting.GetBrokerClusterInfo, remoting.GetAllTopicListFromNameServer,
	remoting.DeleteTopicInNamesrv, remoting.GetTopicsByCluster, remoting.PutKVConfig, remoting.GetKVConfig,
	remoting.DeleteKVConfig, remoting.GetKVListByNamespace, remoting.WipeWritePermOfBroker, remoting.AddWritePermOfBroker,
	remoting.RegisterTopicInNamesrv, remoting.GetBrokerMemberGroup, remoting.UpdateNamesrvConfig, remoting.GetNamesrvConfig,
	remoting.GetSystemTopicListFromNS, remoting.GetUnitTopicList, remoting.GetHasUnitSubTopicList,
	remoting.GetHasUnitSubUnUnitTopicList,
}

// FuzzNamesrvRequests sends arbitrary header fields ("k=v;k=v") and bodies
// to every processor of a running name server: each request is answered
// (no panic, no hang) and the server keeps serving.
func FuzzNamesrvRequests(f *testing.F) {
	f.Add(uint8(0), "brokerAddr=127.0.0.1:10911;brokerName=b;clusterName=c;brokerId=0;haServerAddr=;compressed=false",
		[]byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":4,"writeQueueNums":4,"perm":6}},"dataVersion":{"counter":1,"timestamp":2}},"filterServerList":[]}`))
	f.Add(uint8(0), "brokerAddr=127.0.0.1:10911;brokerName=b;clusterName=c;brokerId=0;haServerAddr=;compressed=false",
		[]byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":{"S":{"topicName":"S","readQueueNums":2,"writeQueueNums":2,"perm":6}},"dataVersion":{"counter":1,"timestamp":2},"topicQueueMappingInfoMap":{"S":{"bname":"b","currIdMap":{"0":0,"1":1},"dirty":false,"epoch":1,"topic":"S","totalQueues":2}}},"filterServerList":[]}`))
	f.Add(uint8(2), "clusterName=c;brokerAddr=127.0.0.1:10911", []byte(`{"counter":1,"timestamp":2}`))
	f.Add(uint8(4), "topic=T;acceptStandardJsonOnly=true", []byte(nil))
	f.Add(uint8(9), "namespace=ns;key=k;value=v", []byte(nil))
	f.Add(uint8(13), "brokerName=b", []byte(nil))
	f.Add(uint8(15), "topic=T", []byte(`{"queueDatas":[{"brokerName":"b","readQueueNums":-1,"writeQueueNums":4,"perm":6,"topicSysFlag":0}]}`))
	f.Add(uint8(16), "clusterName=c;brokerName=b", []byte(nil))
	f.Add(uint8(17), "", []byte("scanNotActiveBrokerInterval=0\n"))
	cfg := DefaultConfig()
	cfg.Remoting.Addr = "127.0.0.1:0"
	cfg.Remoting.EventLoops = 1
	s, err := NewServer(cfg, zerolog.Nop())
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		f.Fatal(err)
	}
	defer func() { _ = s.Shutdown(context.Background()) }()
	c, err := remoting.Dial(context.Background(), s.Addr().String(), remoting.ClientOptions{})
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	f.Fuzz(func(t *testing.T, which uint8, ext string, body []byte) {
		code := namesrvFuzzCodes[int(which)%len(namesrvFuzzCodes)]
		h := map[string]string{}
		for _, kv := range strings.Split(ext, ";") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				h[k] = v
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, remoting.NewRequest(code, h, body))
		if err != nil {
			t.Fatalf("code %d ext %v: %v", code, h, err)
		}
		// The server answers a handler's panic; the answer tells.
		if resp.Code == remoting.SystemError && strings.HasPrefix(resp.Remark, remoting.PanicRemark) {
			t.Fatalf("code %d ext %v: the handler panicked: %s", code, h, resp.Remark)
		}
	})
}
