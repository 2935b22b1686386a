package namesrv

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/remoting"
)

func TestPlainBodyGolden(t *testing.T) {
	// Spec 7.1's plain body, with fastjson's alphabetical field order.
	want := `{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},` +
		`"topicConfigTable":{"T":{"attributes":{},"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG",` +
		`"topicName":"T","topicSysFlag":0,"writeQueueNums":8}}}}`
	body := &RegisterBrokerBody{
		DataVersion:      DataVersion{Counter: 3, Timestamp: 1700000000000},
		TopicConfigTable: map[string]TopicConfig{"T": {ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}},
	}
	got, err := body.Encode(false)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("plain body\n got %s\nwant %s", got, want)
	}
	back, err := DecodeRegisterBrokerBody(got, false, remoting.CurrentVersion)
	if err != nil {
		t.Fatal(err)
	}
	if back.DataVersion != body.DataVersion || back.TopicConfigTable["T"].TopicName != "T" ||
		back.TopicConfigTable["T"].TopicFilterType != SingleTag {
		t.Fatalf("decoded %+v", back)
	}
}

// manyTopics returns n topic configs with varied settings; sysFlag and
// order are zero because the compressed form does not carry them.
func manyTopics(n int) map[string]TopicConfig {
	table := make(map[string]TopicConfig, n)
	for i := range n {
		name := fmt.Sprintf("topic-%05d", i)
		tc := TopicConfig{
			TopicName:       name,
			ReadQueueNums:   int32(1 + i%16),
			WriteQueueNums:  int32(1 + i%8),
			Perm:            []int32{6, 7, 4, 2}[i%4],
			TopicFilterType: []string{SingleTag, MultiTag}[i%2],
			Attributes:      map[string]string{},
		}
		if i%3 == 0 {
			tc.Attributes["+message.type"] = "NORMAL"
		}
		table[name] = tc
	}
	return table
}

func TestCompressedBody10kTopicsRoundTrip(t *testing.T) {
	body := &RegisterBrokerBody{
		DataVersion:      DataVersion{Counter: 42, StateVersion: 1, Timestamp: 1700000000123},
		TopicConfigTable: manyTopics(10_000),
		FilterServerList: []string{"10.0.0.9:9999"},
		TopicQueueMappingInfo: map[string]json.RawMessage{
			"static-topic": json.RawMessage(`{"bname":"broker-a","epoch":1,"topic":"static-topic","totalQueues":4}`),
		},
	}
	compressed, err := body.Encode(true)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := body.Encode(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(compressed) >= len(plain)/4 {
		t.Errorf("compressed %d bytes, plain %d: compression ineffective", len(compressed), len(plain))
	}
	for _, tc := range []struct {
		name       string
		data       []byte
		compressed bool
	}{{"compressed", compressed, true}, {"plain", plain, false}, {"compressed, header says plain", compressed, false}} {
		t.Run(tc.name, func(t *testing.T) {
			back, err := DecodeRegisterBrokerBody(tc.data, tc.compressed, remoting.CurrentVersion)
			if err != nil {
				t.Fatal(err)
			}
			if back.DataVersion != body.DataVersion {
				t.Fatalf("data version %+v", back.DataVersion)
			}
			if !maps.EqualFunc(back.TopicConfigTable, body.TopicConfigTable, sameTopicConfig) {
				t.Fatal("topic tables differ")
			}
			if len(back.FilterServerList) != 1 || back.FilterServerList[0] != "10.0.0.9:9999" {
				t.Fatalf("filter servers %v", back.FilterServerList)
			}
			if string(back.TopicQueueMappingInfo["static-topic"]) != string(body.TopicQueueMappingInfo["static-topic"]) {
				t.Fatalf("mapping info %s", back.TopicQueueMappingInfo)
			}
		})
	}
}

// A Java 5.x broker hosting a static topic writes the mapping's currIdMap
// (a Map<Integer, Integer>) with fastjson's bare integer keys: its
// registration, plain or compressed, is read all the same (the broker and
// all its topics would otherwise drop out of the routes), and the mapping
// kept as JSON.
func TestRegisterBodyWithFastjsonBareKeys(t *testing.T) {
	const java = `{"bname":"broker-a","currIdMap":{0:0,1:1},"epoch":1,"topic":"static-topic","totalQueues":4}`
	const kept = `{"bname":"broker-a","currIdMap":{"0":0,"1":1},"epoch":1,"topic":"static-topic","totalQueues":4}`
	body := &RegisterBrokerBody{
		DataVersion:           DataVersion{Counter: 3, Timestamp: 1700000000123},
		TopicConfigTable:      manyTopics(3),
		TopicQueueMappingInfo: map[string]json.RawMessage{"static-topic": json.RawMessage(java)},
	}
	for _, compressed := range []bool{false, true} {
		data, err := body.Encode(compressed)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeRegisterBrokerBody(data, compressed, remoting.CurrentVersion)
		if err != nil {
			t.Fatalf("compressed %v: %v", compressed, err)
		}
		if len(back.TopicConfigTable) != 3 || back.DataVersion != body.DataVersion {
			t.Fatalf("compressed %v: %d topics, version %+v", compressed, len(back.TopicConfigTable), back.DataVersion)
		}
		if got := string(back.TopicQueueMappingInfo["static-topic"]); got != kept {
			t.Fatalf("compressed %v: mapping %s, want %s", compressed, got, kept)
		}
	}
}

func sameTopicConfig(a, b TopicConfig) bool {
	return a.TopicName == b.TopicName && a.ReadQueueNums == b.ReadQueueNums && a.WriteQueueNums == b.WriteQueueNums &&
		a.Perm == b.Perm && a.TopicFilterType == b.TopicFilterType && a.TopicSysFlag == b.TopicSysFlag &&
		a.Order == b.Order && maps.Equal(a.Attributes, b.Attributes)
}

// javaCompressed builds a compressed body item by item, the way Java's
// RegisterBrokerBody.encode(true) lays it out (spec 7.1), independently of
// Encode.
func javaCompressed(t *testing.T, dataVersion string, topics []string, filters string, mappings []string) []byte {
	t.Helper()
	var raw bytes.Buffer
	item := func(s string) {
		_ = binary.Write(&raw, binary.BigEndian, int32(len(s)))
		raw.WriteString(s)
	}
	item(dataVersion)
	_ = binary.Write(&raw, binary.BigEndian, int32(len(topics)))
	for _, s := range topics {
		item(s)
	}
	item(filters)
	if mappings != nil {
		_ = binary.Write(&raw, binary.BigEndian, int32(len(mappings)))
		for _, s := range mappings {
			item(s)
		}
	}
	var out bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&out, zlib.BestCompression)
	_, _ = zw.Write(raw.Bytes())
	_ = zw.Close()
	return out.Bytes()
}

func TestCompressedBodyJavaLayout(t *testing.T) {
	data := javaCompressed(t, `{"counter":7,"stateVersion":0,"timestamp":1}`, []string{
		`TBW102 8 8 7 SINGLE_TAG {}`,
		`T1 4 4 6 MULTI_TAG {"+message.type":"FIFO"}`,
		`T2 1 1 6 SINGLE_TAG `,                     // attributes were null: trailing separator only
		`T3 2 2 6 SINGLE_TAG {"k":"has space"}`,    // split breaks the JSON: attributes ignored, as Java
		`T4 16 16 6 SINGLE_TAG {"a":"1"} trailing`, // extra parts ignored
	}, `[]`, []string{})
	body, err := DecodeRegisterBrokerBody(data, true, remoting.CurrentVersion)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]TopicConfig{
		"TBW102": {TopicName: "TBW102", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 7, TopicFilterType: SingleTag, Attributes: map[string]string{}},
		"T1":     {TopicName: "T1", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicFilterType: MultiTag, Attributes: map[string]string{"+message.type": "FIFO"}},
		"T2":     {TopicName: "T2", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6, TopicFilterType: SingleTag},
		"T3":     {TopicName: "T3", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6, TopicFilterType: SingleTag},
		"T4":     {TopicName: "T4", ReadQueueNums: 16, WriteQueueNums: 16, Perm: 6, TopicFilterType: SingleTag, Attributes: map[string]string{"a": "1"}},
	}
	if !maps.EqualFunc(body.TopicConfigTable, want, sameTopicConfig) {
		t.Fatalf("got %+v", body.TopicConfigTable)
	}
	if body.DataVersion.Counter != 7 {
		t.Fatalf("data version %+v", body.DataVersion)
	}

	// Brokers before 5.0.0 do not write the mapping count.
	old := javaCompressed(t, `{"counter":1}`, []string{`T 1 1 6 SINGLE_TAG {}`}, `[]`, nil)
	if _, err := DecodeRegisterBrokerBody(old, true, remoting.VersionV5_0_0-1); err != nil {
		t.Fatalf("pre-5.0 body: %v", err)
	}
	if _, err := DecodeRegisterBrokerBody(old, true, remoting.VersionV5_0_0); err == nil {
		t.Fatal("5.0 body without mapping count accepted")
	}
}

func TestDecodeBodyVariants(t *testing.T) {
	// Before 3.0.11 the body is the bare wrapper.
	wrapper := `{"dataVersion":{"counter":2,"timestamp":5},"topicConfigTable":{"T":{"topicName":"T","readQueueNums":2,"writeQueueNums":2,"perm":6}}}`
	body, err := DecodeRegisterBrokerBody([]byte(wrapper), false, remoting.VersionV3_0_11-1)
	if err != nil || body.TopicConfigTable["T"].ReadQueueNums != 2 || body.DataVersion.Counter != 2 {
		t.Fatalf("old wrapper: %+v %v", body, err)
	}
	// An empty body is an empty table.
	body, err = DecodeRegisterBrokerBody(nil, false, remoting.CurrentVersion)
	if err != nil || len(body.TopicConfigTable) != 0 || body.DataVersion != (DataVersion{}) {
		t.Fatalf("empty: %+v %v", body, err)
	}
	// A table key without topicName inside uses the key.
	body, err = DecodeRegisterBrokerBody([]byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":{"K":{"perm":6}}}}`), false, remoting.CurrentVersion)
	if err != nil || body.TopicConfigTable["K"].TopicName != "K" {
		t.Fatalf("key as name: %+v %v", body, err)
	}
}

func TestDecodeBodyErrors(t *testing.T) {
	ok := `{"counter":1}`
	cases := map[string][]byte{
		"bad json":            []byte(`{"topicConfigSerializeWrapper":`),
		"bad zlib":            {0x78, 0x9c, 1, 2, 3},
		"bad int in topic":    javaCompressed(t, ok, []string{`T x 1 6 SINGLE_TAG {}`}, `[]`, []string{}),
		"bad filter type":     javaCompressed(t, ok, []string{`T 1 1 6 NO_TAG {}`}, `[]`, []string{}),
		"too few fields":      javaCompressed(t, ok, []string{`T 1 1 6`}, `[]`, []string{}),
		"bad data version":    javaCompressed(t, `{"counter":"x"}`, nil, `[]`, []string{}),
		"bad mapping":         javaCompressed(t, ok, nil, `[]`, []string{`nope`}),
		"truncated":           javaCompressed(t, ok, []string{`T 1 1 6 SINGLE_TAG {}`}, `[]`, []string{})[:20],
		"count past the data": javaCompressed(t, ok, nil, `[]`, []string{})[:0],
	}
	// A negative topic count.
	var raw bytes.Buffer
	_ = binary.Write(&raw, binary.BigEndian, int32(len(ok)))
	raw.WriteString(ok)
	_ = binary.Write(&raw, binary.BigEndian, int32(-1))
	var zb bytes.Buffer
	zw := zlib.NewWriter(&zb)
	_, _ = zw.Write(raw.Bytes())
	_ = zw.Close()
	cases["negative count"] = zb.Bytes()
	// An item longer than the limit.
	raw.Reset()
	_ = binary.Write(&raw, binary.BigEndian, int32(maxBodyItem+1))
	zb.Reset()
	zw = zlib.NewWriter(&zb)
	_, _ = zw.Write(raw.Bytes())
	_ = zw.Close()
	cases["huge item"] = zb.Bytes()

	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			compressed := len(data) > 0 && data[0] == 0x78
			if len(data) == 0 {
				data = []byte{0x78} // a zlib header byte and nothing else
				compressed = true
			}
			if _, err := DecodeRegisterBrokerBody(data, compressed, remoting.CurrentVersion); !errors.Is(err, ErrBadRegisterBody) {
				t.Fatalf("err = %v, want ErrBadRegisterBody", err)
			}
		})
	}
}

func TestTopicConfigText(t *testing.T) {
	tc := TopicConfig{TopicName: "T", ReadQueueNums: 3, WriteQueueNums: 2, Perm: 6, Attributes: map[string]string{"b": "2", "a": "1"}}
	got := string(appendTopicConfigText(nil, &tc))
	if want := `T 3 2 6 SINGLE_TAG {"a":"1","b":"2"}`; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	back, err := parseTopicConfigText(got)
	if err != nil || !sameTopicConfig(back, TopicConfig{TopicName: "T", ReadQueueNums: 3, WriteQueueNums: 2, Perm: 6,
		TopicFilterType: SingleTag, Attributes: tc.Attributes}) {
		t.Fatalf("%+v %v", back, err)
	}
	if _, err := parseTopicConfigText(strings.Repeat(" ", 10)); err == nil {
		t.Fatal("blank text accepted")
	}
}
