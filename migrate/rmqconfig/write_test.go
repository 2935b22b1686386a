package rmqconfig

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/meta"
)

// What RocketMQ 4.9.8 wrote, read back, written by Write and read again
// is the same config; the files are in RocketMQ's layout.
func TestWriteReadsBackAsRocketMQWroteIt(t *testing.T) {
	orig, err := Read(filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	if err != nil {
		t.Fatal(err)
	}
	orig.RequestModes = []RequestMode{{Topic: "TopicA", ConsumerGroup: "GroupA", Mode: "POP", PopShareQueueNum: 2}}
	orig.OrderInfos = sampleOrderInfos()
	orig.Forbidden = []meta.GroupForbidden{{Group: "GroupA", Topics: map[string]int{"TopicA": 4, "TopicB": 6}}}
	orig.QueueMappings = sampleQueueMappings()
	root := t.TempDir()
	dir := filepath.Join(root, "config")
	if err := Write(dir, orig, meta.DataVersion{Counter: 7, Timestamp: 1700000000000}); err != nil {
		t.Fatal(err)
	}
	back, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	// lmqConsumerOffset.json holds the same offsets: nothing to warn of.
	if len(back.NotCarried) != 0 {
		t.Errorf("the written config reads back with warnings: %q", back.NotCarried)
	}
	for name, pair := range map[string][2]any{
		"topics":        {orig.Topics, back.Topics},
		"groups":        {orig.Groups, back.Groups},
		"offsets":       {orig.Offsets, back.Offsets},
		"delay offsets": {orig.DelayOffsets, back.DelayOffsets},
		"request modes": {orig.RequestModes, back.RequestModes},
		"order infos":   {orig.OrderInfos, back.OrderInfos},
		"forbidden":     {orig.Forbidden, back.Forbidden},
		"mappings":      {orig.QueueMappings, back.QueueMappings},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s differ after the round trip:\n got %+v\nwant %+v", name, pair[1], pair[0])
		}
	}
	offsets, err := os.ReadFile(filepath.Join(dir, "consumerOffset.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's own line: {0:5,1:6,2:7,3:8} with unquoted queue ids.
	if !strings.Contains(string(offsets), `"TopicA@GroupA":{0:5,1:6,2:7,3:8}`) {
		t.Errorf("consumerOffset.json is not in fastjson's layout:\n%s", offsets)
	}
	delays, err := os.ReadFile(filepath.Join(dir, "delayOffset.json"))
	if err != nil || !strings.Contains(string(delays), `"offsetTable":{1:1}`) {
		t.Errorf("delayOffset.json: %v\n%s", err, delays)
	}
	// fastjson's rendering of RocketMQ's OrderInfo, as orderInfoFile has
	// it.
	orders, err := os.ReadFile(filepath.Join(dir, "consumerOrderInfo.json"))
	if line := `1:{"a":"attempt-7","cm":1,"i":30000,"l":1700000005000,"o":[7,1,3],"oc":{7:2,8:2,10:1},"ot":{8:1700000090000},"popTime":1700000000000}`; err != nil || !strings.Contains(string(orders), line) {
		t.Errorf("consumerOrderInfo.json: %v; want the line %s in\n%s", err, line, orders)
	}
	// fastjson's rendering of a TopicQueueMappingDetail: fields in
	// alphabetical order, logic queue ids unquoted.
	mappings, err := os.ReadFile(filepath.Join(dir, "topicQueueMapping.json"))
	if line := `"StaticA":{"bname":"broker-a","currIdMap":{},"dirty":false,"epoch":2000,"hostedQueues":{0:[{"bname":"broker-b","endOffset":2,"gen":0,"logicOffset":0,"queueId":0,"startOffset":0,"timeOfEnd":-1,"timeOfStart":-1},{"bname":"broker-a","endOffset":-1,"gen":1,"logicOffset":10,"queueId":1,"startOffset":0,"timeOfEnd":-1,"timeOfStart":-1}],3:[`; err != nil || !strings.Contains(string(mappings), line) {
		t.Errorf("topicQueueMapping.json: %v; want the line %s in\n%s", err, line, mappings)
	}
	if !strings.Contains(string(mappings), `"counter":7`) {
		t.Errorf("topicQueueMapping.json lacks its dataVersion:\n%s", mappings)
	}
	topics, err := os.ReadFile(filepath.Join(dir, "topics.json"))
	if err != nil || !strings.Contains(string(topics), `"counter": 7`) {
		t.Errorf("topics.json lacks its dataVersion: %v\n%s", err, topics)
	}
	// A second write keeps the first as the backup.
	if err := Write(dir, Config{}, meta.DataVersion{Counter: 8}); err != nil {
		t.Fatal(err)
	}
	if bak, err := os.ReadFile(filepath.Join(dir, "consumerOffset.json.bak")); err != nil || string(bak) != string(offsets) {
		t.Fatalf("the replaced file was not kept as its backup: %v", err)
	}
}

// The light message queues' offsets are written to lmqConsumerOffset.json
// as RocketMQ's LmqConsumerOffsetManager writes them, beside the others:
// a RocketMQ broker with enableLmq (which reads only that file) finds them
// all, and one without finds the others in consumerOffset.json.
func TestWriteLmqOffsets(t *testing.T) {
	offsets := []Offset{
		{Group: "%LMQ%g", Topic: "%LMQ%q", QueueID: 0, Offset: 9},
		{Group: "g", Topic: "T", QueueID: 0, Offset: 1},
		{Group: "g", Topic: "T", QueueID: 1, Offset: 2},
	}
	root := t.TempDir()
	dir := filepath.Join(root, "config")
	if err := Write(dir, Config{Offsets: offsets}, meta.DataVersion{Counter: 1}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, LmqOffsetsFile))
	if err != nil || !strings.Contains(string(data), `"lmqOffsetTable":{`+"\n\t\t"+`"%LMQ%q@%LMQ%g":9`) || !strings.Contains(string(data), `"T@g":{0:1,1:2}`) {
		t.Fatalf("lmqConsumerOffset.json: %v\n%s", err, data)
	}
	withLMQ, err := ReadWith(root, ReadOptions{LMQ: true})
	if err != nil || !reflect.DeepEqual(withLMQ.Offsets, offsets) {
		t.Fatalf("read back with enableLmq: %+v %v", withLMQ.Offsets, err)
	}
	without, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(without.NotCarried) != 1 || !strings.Contains(without.NotCarried[0], "1 consumer offsets") {
		t.Fatalf("read back without enableLmq: not carried %q", without.NotCarried)
	}
}

// What WriteTimerCheckpoint writes, Read reads back as RocketMQ's timer
// progress.
func TestWriteTimerCheckpoint(t *testing.T) {
	root := t.TempDir()
	if err := WriteTimerCheckpoint(filepath.Join(root, "config"), 1700000000123, 42, meta.DataVersion{Counter: 3}); err != nil {
		t.Fatal(err)
	}
	c, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if !c.HasTimerCheck || c.TimerReadMs != 1700000000123 || c.TimerQueueOffset != 42 {
		t.Fatalf("read back %+v", c)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "timercheck"))
	if err != nil || len(raw) != TimerCheckpointSize || raw[8*3+7] != 42 || raw[8*6+7] != 3 {
		t.Fatalf("timercheck: %d bytes %v", len(raw), err)
	}
}

// A timer checkpoint decodes to what it was encoded from, the 56 bytes
// of GET_TIMER_CHECK_POINT's body (a longer body, as the 4 KiB file, too);
// a shorter body is refused.
func TestDecodeTimerCheckpoint(t *testing.T) {
	ck := TimerCheckpoint{ReadMs: 1700000000000, FlushPos: 5, QueueOffset: 6, MasterQueueOffset: 7,
		Version: meta.DataVersion{StateVersion: 1, Timestamp: 2, Counter: 3}}
	b := ck.Encode()
	if got, err := DecodeTimerCheckpoint(b); err != nil || got != ck {
		t.Fatalf("decoded %+v %v, want %+v", got, err, ck)
	}
	if got, err := DecodeTimerCheckpoint(append(b, make([]byte, 4096-len(b))...)); err != nil || got != ck {
		t.Fatalf("decoded from 4 KiB %+v %v, want %+v", got, err, ck)
	}
	if _, err := DecodeTimerCheckpoint(b[:55]); err == nil {
		t.Fatal("a body of 55 bytes decoded")
	}
}

// FuzzDecodeTimerCheckpoint: any body decodes or is refused without a
// panic, and what decodes encodes back to its first 56 bytes.
func FuzzDecodeTimerCheckpoint(f *testing.F) {
	f.Add(EncodeTimerCheckpoint(1, 2, meta.DataVersion{Counter: 3}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		ck, err := DecodeTimerCheckpoint(b)
		if err != nil {
			return
		}
		if !bytes.Equal(ck.Encode(), b[:56]) {
			t.Fatalf("%x decoded to %+v, which encodes to %x", b, ck, ck.Encode())
		}
	})
}

// sampleQueueMappings are two static topics' mappings: one whose logic
// queue 0 moved from broker-b to broker-a, with a second logic queue,
// and one with the scope, dirty flag and currIdMap set.
func sampleQueueMappings() []meta.TopicQueueMappingDetail {
	item := func(bname string, gen, queue int32, logic, end int64) meta.LogicQueueMappingItem {
		it := meta.NewLogicQueueMappingItem()
		it.Bname, it.Gen, it.QueueID, it.LogicOffset, it.EndOffset = bname, gen, queue, logic, end
		return it
	}
	a := meta.NewTopicQueueMappingDetail("StaticA", 4, "broker-a", 2000)
	a.HostedQueues[0] = []meta.LogicQueueMappingItem{item("broker-b", 0, 0, 0, 2), item("broker-a", 1, 1, 10, -1)}
	a.HostedQueues[3] = []meta.LogicQueueMappingItem{item("broker-a", 0, 0, 0, -1)}
	b := meta.NewTopicQueueMappingDetail("StaticB", 1, "broker-a", 5)
	b.Scope, b.Dirty = "cluster-x", true
	b.CurrIDMap[0] = 2
	b.HostedQueues[0] = []meta.LogicQueueMappingItem{item("broker-a", 0, 2, 0, -1)}
	return []meta.TopicQueueMappingDetail{a, b}
}
