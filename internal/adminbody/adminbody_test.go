package adminbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// The expected bodies are written by hand from fastjson's rules (object
// keys in key position, properties in alphabetical order, doubles with a
// fraction), not produced by the encoders under test.
func TestEncodeMatchesFastjson(t *testing.T) {
	q0 := MessageQueue{BrokerName: "b", QueueID: 0, Topic: "t"}
	q1 := MessageQueue{BrokerName: "b", QueueID: 1, Topic: "t"}
	qa := MessageQueue{BrokerName: "b", QueueID: 7, Topic: "a\"q"}
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"reset offset, the spec's example", EncodeResetOffset(map[MessageQueue]int64{q0: 11110}),
			`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:11110}}`},
		{"reset offset, queues in order", EncodeResetOffset(map[MessageQueue]int64{q1: 2, qa: 3, q0: 1}),
			`{"offsetTable":{{"brokerName":"b","queueId":7,"topic":"a\"q"}:3,{"brokerName":"b","queueId":0,"topic":"t"}:1,{"brokerName":"b","queueId":1,"topic":"t"}:2}}`},
		{"reset offset, empty", EncodeResetOffset(nil), `{"offsetTable":{}}`},
		{"reset offset for C, queues in order", EncodeResetOffsetForC(map[MessageQueue]int64{q1: 2, q0: 11110}),
			`{"offsetTable":[{"brokerName":"b","offset":11110,"queueId":0,"topic":"t"},{"brokerName":"b","offset":2,"queueId":1,"topic":"t"}]}`},
		{"reset offset for C, empty", EncodeResetOffsetForC(nil), `{"offsetTable":[]}`},
		{"topic stats", EncodeTopicStats(map[MessageQueue]TopicOffset{q0: {LastUpdateTimestamp: 1700000000123, MaxOffset: 10, MinOffset: 2}}, 0),
			`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"lastUpdateTimestamp":1700000000123,"maxOffset":10,"minOffset":2}},"topicPutTps":0.0}`},
		{"consume stats", EncodeConsumeStats(map[MessageQueue]OffsetWrapper{q1: {BrokerOffset: 9, ConsumerOffset: 4, LastTimestamp: 5, PullOffset: 6}}, 12.5),
			`{"consumeTps":12.5,"offsetTable":{{"brokerName":"b","queueId":1,"topic":"t"}:{"brokerOffset":9,"consumerOffset":4,"lastTimestamp":5,"pullOffset":6}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if string(tc.got) != tc.want {
				t.Fatalf("got  %s\nwant %s", tc.got, tc.want)
			}
		})
	}
}

// A body as a Java broker writes it (fastjson), with white space and an
// unknown property, decodes; every decoder returns what the encoders wrote.
func TestDecode(t *testing.T) {
	java := []byte(`{"consumeTps":3.25, "offsetTable":{ {"brokerName":"broker-a","queueId":3,"topic":"T"} : {"brokerOffset":100,"consumerOffset":90,"lastTimestamp":1699999999999,"pullOffset":95}},"unknown":[1,{"x":null}]}`)
	table, tps, err := DecodeConsumeStats(java)
	if err != nil {
		t.Fatal(err)
	}
	want := map[MessageQueue]OffsetWrapper{{BrokerName: "broker-a", QueueID: 3, Topic: "T"}: {100, 90, 1699999999999, 95}}
	if !reflect.DeepEqual(table, want) || tps != 3.25 {
		t.Fatalf("got %v %v, want %v 3.25", table, tps, want)
	}

	reset := map[MessageQueue]int64{{BrokerName: "b", QueueID: 0, Topic: "t"}: 5, {BrokerName: "b", QueueID: 1, Topic: "t"}: 0}
	got, err := DecodeResetOffset(EncodeResetOffset(reset))
	if err != nil || !reflect.DeepEqual(got, reset) {
		t.Fatalf("reset offset round trip: %v, %v", got, err)
	}
	stats := map[MessageQueue]TopicOffset{{BrokerName: "b", QueueID: 2, Topic: "t"}: {1, 2, 3}}
	gotStats, putTps, err := DecodeTopicStats(EncodeTopicStats(stats, 1.5))
	if err != nil || !reflect.DeepEqual(gotStats, stats) || putTps != 1.5 {
		t.Fatalf("topic stats round trip: %v %v, %v", gotStats, putTps, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"empty", ``},
		{"not an object", `[1]`},
		{"truncated", `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:1`},
		{"unterminated string", `{"offsetTable":{{"brokerName":"b\`},
		{"trailing bytes", `{"offsetTable":{}} x`},
		{"missing colon", `{"offsetTable" {}}`},
		{"deep nesting", `{"a":` + string(bytes.Repeat([]byte("["), 100)) + string(bytes.Repeat([]byte("]"), 100)) + `}`},
		{"array key", `{[1]:2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Members([]byte(tc.body)); !errors.Is(err, ErrSyntax) {
				t.Fatalf("Members(%q) = %v, want ErrSyntax", tc.body, err)
			}
		})
	}
	// Well formed, but a key that is not a queue, or a value of the wrong type.
	for _, body := range []string{
		`{"offsetTable":{"q0":1}}`,
		`{"offsetTable":{{"brokerName":"b","queueId":"x","topic":"t"}:1}}`,
		`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:"one"}}`,
		`{1:2}`,
	} {
		if _, err := DecodeResetOffset([]byte(body)); err == nil {
			t.Errorf("DecodeResetOffset(%s) succeeded", body)
		}
	}
}

// jsonObjectKeys returns the keys of the object data holds, in order,
// when encoding/json finds it a valid object nested less than maxDepth.
func jsonObjectKeys(data []byte) ([]string, bool) {
	if !json.Valid(data) || bytes.Count(data, []byte("{"))+bytes.Count(data, []byte("[")) >= maxDepth {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(data))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var keys []string
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, false
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return nil, false
		}
	}
	return keys, true
}

// FuzzMembers: a body either fails to split or splits into members whose
// keys and values, written back as an object, split into the same
// members; a standard JSON object splits into the keys encoding/json
// reads, in order; and the decoders built on Members fail cleanly.
func FuzzMembers(f *testing.F) {
	f.Add([]byte(`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:11110}}`))
	f.Add([]byte(`{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":1,"topic":"t"}:{"brokerOffset":9}}}`))
	f.Add([]byte(`{"a":[1,2,{"b":"\"}"}],"c":null}`))
	f.Add([]byte(`{1:2,-3:4}`))
	f.Add([]byte(`{"messageQueueTable":{{"topic":"T","brokerName":"b","queueId":0}:5}}`))
	f.Add([]byte(`{"consumerTable":{"c1":{{"brokerName":"b","queueId":0,"topic":"T"}:5}},"messageQueueTable":{}}`))
	f.Add([]byte(`{"brokerAddr":"a:1","consumeStatsList":[{"g":[{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":3}}}]}],"totalDiff":3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := Members(data)
		if keys, ok := jsonObjectKeys(data); ok {
			// Standard JSON is fastjson's form too: the same keys, in order.
			if err != nil || len(ms) != len(keys) {
				t.Fatalf("%q: %d members, %v; encoding/json reads %d keys", data, len(ms), err, len(keys))
			}
			for i, m := range ms {
				var k string
				if json.Unmarshal(m.Key, &k) != nil || k != keys[i] {
					t.Fatalf("%q: member %d has the key %s, encoding/json reads %q", data, i, m.Key, keys[i])
				}
			}
		}
		if err != nil {
			return
		}
		joined := []byte{'{'}
		for i, m := range ms {
			if len(m.Key) == 0 || len(m.Value) == 0 {
				t.Fatalf("empty key or value in %q", data)
			}
			if i > 0 {
				joined = append(joined, ',')
			}
			joined = append(append(append(joined, m.Key...), ':'), m.Value...)
		}
		joined = append(joined, '}')
		// The members written back as an object split into themselves.
		again, err := Members(joined)
		if err != nil || len(again) != len(ms) {
			t.Fatalf("%q split into %d members; written back as %q: %d, %v", data, len(ms), joined, len(again), err)
		}
		for i := range ms {
			if !bytes.Equal(again[i].Key, ms[i].Key) || !bytes.Equal(again[i].Value, ms[i].Value) {
				t.Fatalf("%q member %d: %s:%s, written back %s:%s", data, i, ms[i].Key, ms[i].Value, again[i].Key, again[i].Value)
			}
		}
		// A body that splits also decodes or fails cleanly.
		_, _ = DecodeResetOffset(data)
		_, _, _ = DecodeTopicStats(data)
		_, _, _ = DecodeConsumeStats(data)
		_, _ = DecodeConsumerStatus(data)
		_, _ = DecodeConsumerStatusTable(data)
		_, _, _, _ = DecodeConsumeStatsList(data)
		_, _ = Elements(data)
	})
}

func TestConsumerStatus(t *testing.T) {
	// What the Go client answers GET_CONSUMER_STATUS_FROM_CLIENT with
	// (its ConsumerStatus.Encode: json.Marshal'd queue keys).
	client := `{"messageQueueTable":{{"topic":"T","brokerName":"b","queueId":0}:5,{"topic":"T","brokerName":"b","queueId":1}:7}}`
	got, err := DecodeConsumerStatus([]byte(client))
	want := map[MessageQueue]int64{{BrokerName: "b", QueueID: 0, Topic: "T"}: 5, {BrokerName: "b", QueueID: 1, Topic: "T"}: 7}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("client status %v %v", got, err)
	}
	table := map[string]map[MessageQueue]int64{"c2": {{BrokerName: "b", QueueID: 1, Topic: "T"}: 7}, "c1": want}
	body := EncodeConsumerStatusTable(table)
	wantBody := `{"consumerTable":{"c1":{{"brokerName":"b","queueId":0,"topic":"T"}:5,{"brokerName":"b","queueId":1,"topic":"T"}:7},` +
		`"c2":{{"brokerName":"b","queueId":1,"topic":"T"}:7}},"messageQueueTable":{}}`
	if string(body) != wantBody {
		t.Fatalf("encoded\n%s\nwant\n%s", body, wantBody)
	}
	back, err := DecodeConsumerStatusTable(body)
	if err != nil || !reflect.DeepEqual(back, table) {
		t.Fatalf("decoded back %v %v", back, err)
	}
	if _, err := DecodeConsumerStatus([]byte(`{"messageQueueTable":{{"queueId":"x"}:1}}`)); err == nil {
		t.Fatal("a bad queue key decoded")
	}
}
