package namesrv

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

// checkBodyStable asserts that a decoded body's plain encoding is stable
// once normalized: encode, decode, encode again gives the same bytes from
// the second round on (the first round may replace invalid UTF-8).
func checkBodyStable(t *testing.T, body *RegisterBrokerBody) {
	t.Helper()
	var prev []byte
	for round := range 3 {
		out, err := body.Encode(false)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		if round == 2 && !bytes.Equal(prev, out) {
			t.Fatalf("plain encoding not stable\n%s\n%s", prev, out)
		}
		prev = out
		if body, err = DecodeRegisterBrokerBody(out, false, remoting.CurrentVersion); err != nil {
			t.Fatalf("decoding our own plain body: %v\n%s", err, out)
		}
	}
}

// FuzzRegisterBrokerBody feeds raw bodies in both forms: decoding never
// panics, fails only with ErrBadRegisterBody, and what decodes re-encodes
// stably.
func FuzzRegisterBrokerBody(f *testing.F) {
	plain, _ := topicsBody(3, "T:4:4:6", "TBW102:8:8:7").Encode(false)
	compressed, _ := topicsBody(3, "T:4:4:6", "TBW102:8:8:7").Encode(true)
	f.Add(plain, false, remoting.CurrentVersion)
	f.Add(compressed, true, remoting.CurrentVersion)
	f.Add(compressed, false, int32(100))
	f.Add([]byte(`{"dataVersion":{"counter":1},"topicConfigTable":{"T":{"perm":6}}}`), false, int32(10))
	f.Fuzz(func(t *testing.T, data []byte, compressed bool, version int32) {
		body, err := DecodeRegisterBrokerBody(data, compressed, version)
		if err != nil {
			if !errors.Is(err, ErrBadRegisterBody) {
				t.Fatalf("error not wrapping ErrBadRegisterBody: %v", err)
			}
			return
		}
		checkBodyStable(t, body)
	})
}

// FuzzCompressedRegisterBody fuzzes the inflated content of a compressed
// body (the fuzzer cannot get through zlib's checksums on its own).
func FuzzCompressedRegisterBody(f *testing.F) {
	f.Add(inflate(f, mustEncode(f, topicsBody(3, "T:4:4:6", "TBW102:8:8:7"), true)))
	f.Add(inflate(f, mustEncode(f, &RegisterBrokerBody{TopicConfigTable: manyTopics(3)}, true)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var zb bytes.Buffer
		zw := zlib.NewWriter(&zb)
		_, _ = zw.Write(raw)
		_ = zw.Close()
		for _, version := range []int32{remoting.CurrentVersion, remoting.VersionV5_0_0 - 1} {
			body, err := DecodeRegisterBrokerBody(zb.Bytes(), true, version)
			if err != nil {
				if !errors.Is(err, ErrBadRegisterBody) {
					t.Fatalf("error not wrapping ErrBadRegisterBody: %v", err)
				}
				continue
			}
			checkBodyStable(t, body)
		}
	})
}

func mustEncode(f *testing.F, b *RegisterBrokerBody, compressed bool) []byte {
	f.Helper()
	out, err := b.Encode(compressed)
	if err != nil {
		f.Fatal(err)
	}
	return out
}

func inflate(f *testing.F, data []byte) []byte {
	f.Helper()
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		f.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(zr); err != nil {
		f.Fatal(err)
	}
	return out.Bytes()
}

// FuzzQueueDatas feeds REGISTER_TOPIC_IN_NAMESRV bodies to their decoder:
// it must never panic, and what it accepts names a broker in every entry.
func FuzzQueueDatas(f *testing.F) {
	f.Add([]byte(`{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"a","cluster":"C"}],` +
		`"queueDatas":[{"brokerName":"a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":3}]}`))
	f.Add([]byte(`{"queueDatas":[]}`))
	f.Add([]byte(`{"queueDatas":[{"perm":6}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		queues, err := decodeQueueDatas(body)
		if err != nil {
			return
		}
		for _, q := range queues {
			if strings.TrimSpace(q.BrokerName) == "" {
				t.Fatalf("accepted an entry without a broker: %+v", q)
			}
		}
	})
}

// FuzzRouteBody feeds route answers, as a broker or the proxy reads them
// from a name server, to decodeRoute: it never panics, what it accepts
// has queue counts a broker can have, and the route written back as the
// name server writes it (AppendJSON) reads back the same.
func FuzzRouteBody(f *testing.F) {
	f.Add([]byte(`{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"a","cluster":"C"}],` +
		`"filterServerTable":{},"queueDatas":[{"brokerName":"a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}`))
	f.Add([]byte(`{"brokerDatas":[],"orderTopicConf":"a:4","queueDatas":[{"brokerName":"a","readQueueNums":2147483647}]}`))
	f.Add([]byte(`{"queueDatas":[{"brokerName":"a","readQueueNums":-1}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"brokerDatas":[],"queueDatas":[],"topicQueueMappingByBroker":{"a":{"bname":"a","currIdMap":{"0":0,"1":1},"dirty":false,` +
		`"epoch":1700000000000,"scope":"__global__","topic":"S","totalQueues":2}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		route, err := decodeRoute(body)
		if err != nil {
			return
		}
		for _, q := range route.QueueDatas {
			if q.ReadQueueNums < 0 || q.ReadQueueNums > maxRegisteredQueues || q.WriteQueueNums < 0 || q.WriteQueueNums > maxRegisteredQueues {
				t.Fatalf("accepted queue counts %d/%d", q.ReadQueueNums, q.WriteQueueNums)
			}
		}
		again, err := decodeRoute(route.AppendJSON(nil))
		if err != nil {
			t.Fatalf("the route written back does not read: %v", err)
		}
		if !routesEqual(route, again) {
			t.Fatalf("route %+v reads back as %+v", route, again)
		}
	})
}

// routesEqual compares two routes as a client reads them: empty and
// absent lists and tables alike.
func routesEqual(a, b TopicRouteData) bool {
	norm := func(r TopicRouteData) string {
		if len(r.BrokerDatas) == 0 {
			r.BrokerDatas = nil
		}
		if len(r.QueueDatas) == 0 {
			r.QueueDatas = nil
		}
		if len(r.FilterServerTable) == 0 {
			r.FilterServerTable = nil
		}
		for i := range r.BrokerDatas {
			if len(r.BrokerDatas[i].BrokerAddrs) == 0 {
				r.BrokerDatas[i].BrokerAddrs = nil
			}
		}
		for k, v := range r.FilterServerTable {
			if len(v) == 0 {
				r.FilterServerTable[k] = nil
			}
		}
		// A mapping without currIdMap is written with an empty one (a Java
		// client iterates it); a table without mappings is left out.
		var mappings map[string]TopicQueueMappingInfo
		for k, m := range r.TopicQueueMappingByBroker {
			if len(m.CurrIDMap) == 0 {
				m.CurrIDMap = nil
			}
			if mappings == nil {
				mappings = map[string]TopicQueueMappingInfo{}
			}
			mappings[k] = m
		}
		r.TopicQueueMappingByBroker = mappings
		return fmt.Sprintf("%#v", r)
	}
	return norm(a) == norm(b)
}

// A static topic's mapping epoch beyond 2^53 is written in a route as a
// string (fastjson's BrowserCompatible form, appendJSON's), and the route
// reads back with that epoch: decodeRoute (the proxy's) and decodeMappingInfo
// refused the string, so a route this name server wrote did not read.
func TestMappingEpochBeyond2Pow53ReadsBack(t *testing.T) {
	const epoch = int64(1<<53 + 1)
	route := TopicRouteData{TopicQueueMappingByBroker: map[string]TopicQueueMappingInfo{
		"a": {Bname: "a", CurrIDMap: map[int32]int32{0: 0}, Epoch: epoch, Scope: MetadataScopeGlobal, Topic: "S", TotalQueues: 1}}}
	body := route.AppendJSON(nil)
	if !strings.Contains(string(body), `"epoch":"9007199254740993"`) {
		t.Fatalf("the route is written %s, want the epoch as a string", body)
	}
	back, err := decodeRoute(body)
	if err != nil {
		t.Fatalf("the route %s does not read back: %v", body, err)
	}
	if got := back.TopicQueueMappingByBroker["a"].Epoch; got != epoch {
		t.Fatalf("epoch %d read back as %d", epoch, got)
	}
	for raw, want := range map[string]int64{`{"epoch":"-9007199254740993"}`: -epoch, `{"epoch":1700000000000}`: 1700000000000, `{}`: 0} {
		info, err := decodeMappingInfo([]byte(raw))
		if err != nil || info.Epoch != want || info.Scope != MetadataScopeGlobal {
			t.Fatalf("%s read as %+v, %v", raw, info, err)
		}
	}
	for _, raw := range []string{`{"epoch":"x"}`, `{"epoch":1.5}`, `{"epoch":"1e3"}`, `{"epoch":true}`} {
		if info, err := decodeMappingInfo([]byte(raw)); err == nil {
			t.Fatalf("%s read as %+v", raw, info)
		}
	}
}

// A mapping registered without currIdMap is written in a route with an
// empty one (a Java client iterates it), so it reads back empty, not
// absent: FuzzRouteBody compared the two as different routes (its seed
// 1e2fc5f06d5fa769).
func TestMappingWithoutCurrIDMapIsWrittenEmpty(t *testing.T) {
	route, err := decodeRoute([]byte(`{"brokerDatas":[],"queueDatas":[],"topicQueueMappingByBroker":{"a":{"bname":"a","epoch":1,"topic":"S","totalQueues":2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	body := route.AppendJSON(nil)
	if !strings.Contains(string(body), `"currIdMap":{}`) {
		t.Fatalf("written %s, want an empty currIdMap", body)
	}
	back, err := decodeRoute(body)
	if err != nil || back.TopicQueueMappingByBroker["a"].CurrIDMap == nil || !routesEqual(route, back) {
		t.Fatalf("%s read back as %+v, %v", body, back, err)
	}
}
