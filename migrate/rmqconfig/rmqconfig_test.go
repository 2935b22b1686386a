package rmqconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/meta"
)

const longTopic = "LongTopic_klmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvw"

// The 4.9.8 fixture's config files, read as RocketMQ's managers wrote them
// (the expected values are the files' own, read by eye).
func TestReadRocketMQ498(t *testing.T) {
	root := filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean")
	c, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Files) != 4 {
		t.Fatalf("read %v, want the four files", c.Files)
	}
	var names []string
	topics := map[string]meta.TopicConfig{}
	for _, tc := range c.Topics {
		names = append(names, tc.TopicName)
		topics[tc.TopicName] = tc
	}
	want := []string{"BenchmarkTest", "DefaultCluster", "DefaultCluster_REPLY_TOPIC", longTopic, "OFFSET_MOVED_EVENT",
		"SCHEDULE_TOPIC_XXXX", "SELF_TEST_TOPIC", "TBW102", "TopicA", "TopicB", "broker-a"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("topics %v\nwant %v", names, want)
	}
	if a := topics["TopicA"]; a.ReadQueueNums != 4 || a.WriteQueueNums != 4 || a.Perm != 6 || a.TopicFilterType != "SINGLE_TAG" || a.Order {
		t.Errorf("TopicA %+v", a)
	}
	if d := topics["DefaultCluster"]; d.Perm != 7 || d.ReadQueueNums != 16 {
		t.Errorf("DefaultCluster %+v", d)
	}
	groups := map[string]meta.SubscriptionGroupConfig{}
	for _, g := range c.Groups {
		groups[g.GroupName] = g
	}
	if len(c.Groups) != 9 {
		t.Errorf("%d groups, want 9", len(c.Groups))
	}
	if g, ok := groups["GroupA"]; !ok || g.RetryMaxTimes != 16 || g.RetryQueueNums != 1 || !g.ConsumeEnable ||
		g.ConsumeTimeoutMinute != 15 /* not written by 4.9.8: RocketMQ's default */ {
		t.Errorf("GroupA %+v", g)
	}
	wantOffsets := []Offset{
		{"GroupA", "TopicA", 0, 5}, {"GroupA", "TopicA", 1, 6}, {"GroupA", "TopicA", 2, 7}, {"GroupA", "TopicA", 3, 8},
		{"GroupB", longTopic, 0, 1}, {"GroupB", "TopicB", 0, 9}, {"GroupB", "TopicB", 1, 13},
	}
	if !reflect.DeepEqual(c.Offsets, wantOffsets) {
		t.Errorf("offsets %+v\nwant %+v", c.Offsets, wantOffsets)
	}
	if !reflect.DeepEqual(c.DelayOffsets, map[int]int64{1: 1}) {
		t.Errorf("delay offsets %v, want {1:1}", c.DelayOffsets)
	}
	if len(c.Forbidden) != 0 {
		t.Errorf("forbidden %v, want none (the fixture forbids nothing)", c.Forbidden)
	}
}

// subscriptionGroup.json's forbiddenTable, as RocketMQ 4.9.4+ writes it
// (SubscriptionGroupManager.encode: fastjson, pretty), becomes
// Config.Forbidden; bits of zero or below forbid nothing.
func TestReadForbiddenTable(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := `{
	"dataVersion":{"counter":3,"timestamp":1700000000000},
	"forbiddenTable":{
		"GroupB":{"TopicA":4,"TopicC":0},
		"GroupA":{"TopicB":4,"TopicA":6},
		"GroupZ":{"TopicA":-1}
	},
	"subscriptionGroupTable":{"GroupA":{"groupName":"GroupA"}}
}`
	if err := os.WriteFile(filepath.Join(dir, "subscriptionGroup.json"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []meta.GroupForbidden{
		{Group: "GroupA", Topics: map[string]int{"TopicA": 6, "TopicB": 4}},
		{Group: "GroupB", Topics: map[string]int{"TopicA": 4}},
	}
	if !reflect.DeepEqual(c.Forbidden, want) {
		t.Errorf("forbidden %+v\nwant %+v", c.Forbidden, want)
	}
	if len(c.Groups) != 1 || c.Groups[0].GroupName != "GroupA" {
		t.Errorf("groups %+v", c.Groups)
	}
}

func TestReadFallsBackToTheBackup(t *testing.T) {
	root := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	cfg := filepath.Join(root, "config")
	if err := os.WriteFile(filepath.Join(cfg, "topics.json"), []byte(`{"topicConfigTable":{"half written`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(cfg, "subscriptionGroup.json")); err != nil {
		t.Fatal(err)
	}
	c, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(c.Files[0], "topics.json.bak") || !strings.HasSuffix(c.Files[1], "subscriptionGroup.json.bak") {
		t.Fatalf("files read %v, want the two backups first", c.Files)
	}
	if len(c.Topics) == 0 || len(c.Groups) == 0 {
		t.Fatalf("backups gave %d topics and %d groups", len(c.Topics), len(c.Groups))
	}
	// The broker logs that the older copy was read, and why: only the
	// unreadable file, not the missing one.
	var notes []string
	for _, n := range c.NotCarried {
		if strings.Contains(n, ".bak") {
			notes = append(notes, n)
		}
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "topics.json: unreadable, its backup topics.json.bak") {
		t.Fatalf("notes of the backups read: %q", notes)
	}
	// With neither file usable the error names both.
	if err := os.WriteFile(filepath.Join(cfg, "topics.json.bak"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(root); err == nil || !strings.Contains(err.Error(), "topics.json:") || !strings.Contains(err.Error(), "topics.json.bak:") {
		t.Fatalf("both topic files broken: %v", err)
	}
}

// An offset committed for a negative queue id (RocketMQ does not check the
// queue id of UPDATE_CONSUMER_OFFSET, and loads the file it persists) is
// skipped with a note; the file's other offsets are read, not its older
// backup's.
func TestReadSkipsOffsetsOfNegativeQueues(t *testing.T) {
	root := t.TempDir()
	cfg := filepath.Join(root, "config")
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"consumerOffset.json":     "{\n\t\"offsetTable\":{\n\t\t\"TopicA@GroupA\":{-1:3,0:10\n\t\t}\n\t}\n}",
		"consumerOffset.json.bak": "{\n\t\"offsetTable\":{\n\t\t\"TopicA@GroupA\":{0:5\n\t\t}\n\t}\n}",
	} {
		if err := os.WriteFile(filepath.Join(cfg, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Offset{{Group: "GroupA", Topic: "TopicA", QueueID: 0, Offset: 10}}; !reflect.DeepEqual(c.Offsets, want) {
		t.Fatalf("offsets %+v (from %v), want %+v", c.Offsets, c.Files, want)
	}
	if len(c.NotCarried) != 1 || !strings.Contains(c.NotCarried[0], "TopicA@GroupA queue -1") {
		t.Fatalf("notes %q", c.NotCarried)
	}
}

func TestReadStoreWithoutConfig(t *testing.T) {
	c, err := Read(t.TempDir())
	if err != nil || !c.Empty() {
		t.Fatalf("a store without config/: %+v %v", c, err)
	}
	// The 4.4.0 sample holds an empty delayOffset.json table only.
	c, err = Read(filepath.Join(testutil.FixturesDir(t), "rocketmq-4.4.0-fork-sample-4e25b979", "store"))
	if err != nil || len(c.Files) != 1 || len(c.DelayOffsets) != 0 || len(c.Topics) != 0 {
		t.Fatalf("4.4.0 sample: %+v %v", c, err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func(*Config, []byte) error
		data  string
	}{
		{"offset key without @", (*Config).parseOffsets, `{"offsetTable":{"TopicA":{0:1}}}`},
		{"offset not a number", (*Config).parseOffsets, `{"offsetTable":{"T@G":{0:"x"}}}`},
		{"queue not a number", (*Config).parseOffsets, `{"offsetTable":{"T@G":{q:1}}}`},
		{"delay level zero", (*Config).parseDelayOffsets, `{"offsetTable":{0:1}}`},
		{"topic config of the wrong type", (*Config).parseTopics, `{"topicConfigTable":{"T":{"readQueueNums":"four"}}}`},
		{"forbidden bits not a number", (*Config).parseGroups, `{"forbiddenTable":{"G":{"T":"4"}}}`},
		{"forbidden group not an object", (*Config).parseGroups, `{"forbiddenTable":{"G":4}}`},
		{"not an object", (*Config).parseOffsets, `[1,2]`},
	} {
		var c Config
		if err := tc.parse(&c, []byte(tc.data)); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// queueOrdered reports whether s is in group, topic and queue order, and
// every queue id is 0 or more (entries of negative queues are skipped).
func queueOrdered[T any](s []T, key func(*T) (group, topic string, qid int32)) bool {
	for i := range s {
		g, tp, q := key(&s[i])
		if q < 0 {
			return false
		}
		if i > 0 {
			pg, pt, pq := key(&s[i-1])
			if pg > g || pg == g && (pt > tp || pt == tp && pq > q) {
				return false
			}
		}
	}
	return true
}

// FuzzParse: arbitrary bytes in any config file never panic the reader,
// and what a file reads as keeps the orders and bounds Config documents:
// offsets and order infos in group, topic and queue order without
// negative queues, topics and groups in name order, the forbidden table
// in group order without groups or
// topics of no bits, request modes in topic and group order.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"offsetTable":{"TopicA@GroupA":{0:5,1:6}}}`))
	f.Add([]byte(`{"offsetTable":{1:1}}`))
	f.Add([]byte(`{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":4}}}`))
	f.Add([]byte(`{"subscriptionGroupTable":{"G":{"groupName":"G"}}}`))
	f.Add([]byte(`{"forbiddenTable":{"G":{"T":4}},"subscriptionGroupTable":{}}`))
	f.Add([]byte(`{"forbiddenTable":{"G":{"T":0,"U":2},"H":{"T":-1}},"subscriptionGroupTable":{}}`))
	f.Add([]byte(orderInfoFile))
	// The config files RocketMQ 4.9.8 wrote, when the fixtures are there.
	fixture := filepath.Join("..", "..", "..", "shared", "fixtures", "rocketmq-store-4.9.8", "clean", "config")
	for _, name := range []string{"topics.json", "subscriptionGroup.json", "consumerOffset.json", "delayOffset.json"} {
		if b, err := os.ReadFile(filepath.Join(fixture, name)); err == nil {
			f.Add(b)
		} else {
			f.Logf("fuzzing without the fixture's %s as a seed: %v", name, err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Config
		if c.parseTopics(data) == nil && !slices.IsSortedFunc(c.Topics, func(a, b meta.TopicConfig) int { return strings.Compare(a.TopicName, b.TopicName) }) {
			t.Fatalf("%q: topics out of name order", data)
		}
		if c.parseGroups(data) == nil {
			if !slices.IsSortedFunc(c.Groups, func(a, b meta.SubscriptionGroupConfig) int { return strings.Compare(a.GroupName, b.GroupName) }) {
				t.Fatalf("%q: groups out of name order", data)
			}
			for i, g := range c.Forbidden {
				if i > 0 && c.Forbidden[i-1].Group >= g.Group || len(g.Topics) == 0 {
					t.Fatalf("%q: forbidden table %+v", data, c.Forbidden)
				}
				for _, bits := range g.Topics {
					if bits <= 0 {
						t.Fatalf("%q: forbidden table %+v", data, c.Forbidden)
					}
				}
			}
		}
		if c.parseOffsets(data) == nil && !queueOrdered(c.Offsets, func(o *Offset) (string, string, int32) { return o.Group, o.Topic, o.QueueID }) {
			t.Fatalf("%q: offsets %+v", data, c.Offsets)
		}
		_ = c.parseDelayOffsets(data)
		if c.parseRequestModes(data) == nil {
			for i := 1; i < len(c.RequestModes); i++ {
				a, b := c.RequestModes[i-1], c.RequestModes[i]
				if a.Topic > b.Topic || a.Topic == b.Topic && a.ConsumerGroup > b.ConsumerGroup {
					t.Fatalf("%q: request modes %+v", data, c.RequestModes)
				}
			}
		}
		if c.parseOrderInfos(data) == nil && !queueOrdered(c.OrderInfos, func(o *OrderInfo) (string, string, int32) { return o.Group, o.Topic, o.QueueID }) {
			t.Fatalf("%q: order infos %+v", data, c.OrderInfos)
		}
		_ = c.parseQueueMappings(data)
		_ = c.parseLmqOffsets(data, false)
		if c.parseLmqOffsets(data, true) == nil && !queueOrdered(c.Offsets, func(o *Offset) (string, string, int32) { return o.Group, o.Topic, o.QueueID }) {
			t.Fatalf("%q: LMQ offsets %+v", data, c.Offsets)
		}
	})
}

func TestReadTimerCheckpoint(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// RocketMQ 5's timercheck: a 4 KiB page, lastReadTimeMs first, big-endian.
	page := make([]byte, 4096)
	copy(page, []byte{0, 0, 0x01, 0x9a, 0x2b, 0x3c, 0x4d, 0x5e})
	page[8+7] = 9                       // lastTimerLogFlushPos, not read
	page[16+6], page[16+7] = 0x01, 0x2c // lastTimerQueueOffset 300
	if err := os.WriteFile(filepath.Join(dir, "timercheck"), page, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Read(root)
	if err != nil || !c.HasTimerCheck || c.TimerReadMs != 0x019a2b3c4d5e || c.TimerQueueOffset != 300 {
		t.Fatalf("timercheck: %+v %v", c, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "timercheck"), page[:12], 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := Read(root); err != nil || c.TimerReadMs != 0x019a2b3c4d5e || c.TimerQueueOffset != -1 {
		t.Fatalf("a timercheck without lastTimerQueueOffset: %+v %v", c, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "timercheck"), page[:5], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(root); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Fatalf("a 5-byte timercheck: %v", err)
	}
}

func TestReadRequestModes(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	// As RocketMQ 5's MessageRequestModeManager writes it (fastjson, pretty).
	body := `{
	"messageRequestModeMap":{
		"TopicP":{
			"cg-pop":{
				"consumerGroup":"cg-pop",
				"mode":"POP",
				"popShareQueueNum":1,
				"topic":"TopicP"
			}
		}
	}
}`
	if err := os.WriteFile(filepath.Join(root, "config", "messageRequestMode.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []RequestMode{{Topic: "TopicP", ConsumerGroup: "cg-pop", Mode: "POP", PopShareQueueNum: 1}}; !reflect.DeepEqual(c.RequestModes, want) {
		t.Fatalf("request modes %+v, want %+v", c.RequestModes, want)
	}
}

// RocketMQ's KV POP state is read for the import: an absent or empty
// kvStore/ holds nothing, one that cannot be read is refused naming the
// way out, and the databases written by ldb (testdata/kvstore/gen.sh)
// hold their records in flight (one in an SST, one in the WAL) or none
// once both were acked (deleted, the last deletion in the WAL).
func TestCheckPopState(t *testing.T) {
	root := t.TempDir()
	if n, err := CheckPopState(root); err != nil || n != 0 {
		t.Fatalf("no kvStore/: %d %v", n, err)
	}
	dir := filepath.Join(root, KVPopDir)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if n, err := CheckPopState(root); err != nil || n != 0 {
		t.Fatalf("empty kvStore/: %d %v", n, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "CURRENT"), []byte("MANIFEST-000005\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckPopState(root); !errors.Is(err, ErrRocksDBPopState) || !strings.Contains(err.Error(), "exportPopRecord") ||
		!strings.Contains(err.Error(), "cannot be read") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("kvStore/ with a database that cannot be read: %v", err)
	}
	for name, want := range map[string]int{"inflight": 2, "drained": 0, "pending": 2} {
		root := t.TempDir()
		if err := os.CopyFS(filepath.Join(root, KVPopDir), os.DirFS(filepath.Join("testdata", "kvstore", name))); err != nil {
			t.Fatal(err)
		}
		if n, err := CheckPopState(root); err != nil || n != want {
			t.Errorf("%s: %d records, %v; want %d", name, n, err, want)
		}
		// The count is that of the records the import reads.
		if records, err := ReadPopState(root); err != nil || len(records) != want {
			t.Errorf("%s: ReadPopState read %d records, %v; want %d", name, len(records), err, want)
		}
	}
}

// A record that does not decode (testdata/kvstore/undecodable: its value
// cut short, in the WAL) refuses the store, naming the directory, the
// record's key and the way out: no message in flight is left out.
func TestCheckPopStateUndecodable(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, KVPopDir)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "kvstore", "undecodable"))); err != nil {
		t.Fatal(err)
	}
	key := PopRecordKey(PopRecord{Group: "GroupA", Topic: "TopicA", QueueID: 1, Offset: 7, VisibleAt: 1700000090000})
	n, err := CheckPopState(root)
	if !errors.Is(err, ErrRocksDBPopState) || n != 0 {
		t.Fatalf("%d records, %v; want a refusal", n, err)
	}
	for _, want := range []string{dir, fmt.Sprintf("key %x", key), "does not decode", "exportPopRecord"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
}

// The records gen.sh wrote into testdata/kvstore/inflight decode to the
// values it gave them, in key order (deadline first).
func TestReadPopState(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, KVPopDir), os.DirFS(filepath.Join("testdata", "kvstore", "inflight"))); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPopState(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []PopRecord{
		{Group: "GroupA", Topic: "TopicA", QueueID: 0, Offset: 5, PopTime: 1700000000000, InvisibleTime: 60000, VisibleAt: 1700000060000},
		{Group: "GroupA", Topic: "TopicA", QueueID: 1, Offset: 7, PopTime: 1700000030000, InvisibleTime: 60000, VisibleAt: 1700000090000},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("records %+v, want %+v", got, want)
	}
}

// A record decodes only when its key is the one RocketMQ builds from its
// value; every other shape is an error saying what is wrong.
func TestDecodePopRecord(t *testing.T) {
	r := PopRecord{Group: "cg", Topic: "%RETRY%cg+T", QueueID: 0, Offset: 12, PopTime: 1000, InvisibleTime: 30000,
		VisibleAt: 31000, AttemptTimes: 3, AttemptID: "a-1"}
	value := `{"popTime":1000,"groupId":"cg","topicId":"%RETRY%cg+T","queueId":0,"retryFlag":2,"invisibleTime":30000,"offset":12,"attemptTimes":3,"attemptId":"a-1"}`
	got, err := DecodePopRecord(PopRecordKey(r), []byte(value))
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, r)
	}
	// The retryFlag is not read (see PopRecord): RocketMQ's change of
	// invisible time rewrites a pop-retry topic's record with 0, and any
	// other value decodes to the same record too.
	for _, flag := range []string{`"retryFlag":0`, `"retryFlag":1`, `"retryFlag":7`, `"retryFlag":"x"`} {
		v := strings.Replace(value, `"retryFlag":2`, flag, 1)
		if got, err := DecodePopRecord(PopRecordKey(r), []byte(v)); err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("with %s: decoded %+v, %v; want %+v", flag, got, err, r)
		}
	}
	other := r
	other.Offset = 13
	for name, c := range map[string]struct {
		key   []byte
		value string
		want  string
	}{
		"not JSON":         {PopRecordKey(r), `{"popTime":`, "not a PopConsumerRecord"},
		"no offset":        {PopRecordKey(r), `{"popTime":1000,"groupId":"cg","topicId":"T","queueId":0,"invisibleTime":30000}`, "lacks offset"},
		"key of another":   {PopRecordKey(other), value, "is not the one its value gives"},
		"short key":        {[]byte{1, 2}, value, "is not the one its value gives"},
		"negative offset":  {PopRecordKey(r), strings.Replace(value, `"offset":12`, `"offset":-1`, 1), "negative"},
		"empty group":      {PopRecordKey(r), strings.Replace(value, `"groupId":"cg"`, `"groupId":""`, 1), "empty groupId"},
		"negative attempt": {PopRecordKey(r), strings.Replace(value, `"attemptTimes":3`, `"attemptTimes":-3`, 1), "negative attemptTimes"},
	} {
		if _, err := DecodePopRecord(c.key, []byte(c.value)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
}

// The files of features rocketkv lacks are reported on, not imported and
// not fatal: LMQ offsets, and an unreadable file of them or of static
// topics. Static topics' mappings are read (in topic order, bare integer
// keys as fastjson writes them, a missing topic taken from the key).
func TestReadReportsWhatIsNotCarried(t *testing.T) {
	root, write := configDir(t)
	write("topicQueueMapping.json", `{"dataVersion":{"counter":1,"timestamp":1},"topicQueueMappingInfoMap":{"StaticB":{"bname":"b","topic":"StaticB"},`+
		`"StaticA":{"bname":"b","epoch":7,"hostedQueues":{0:[{"bname":"b","gen":0,"logicOffset":0,"queueId":1,"startOffset":0}]},"totalQueues":1}}}`)
	write("lmqConsumerOffset.json", `{"offsetTable":{"%LMQ%x@g":{0:3}},"lmqOffsetTable":{"%LMQ%y@g":4,"%LMQ%z@g":5}}`)
	write("topics.json", `{"topicConfigTable":{"Plain":{"topicName":"Plain","attributes":{"message.type":"FIFO"}},
		"Batched":{"topicName":"Batched","attributes":{"queue.type":"BatchCQ"}},
		"Compacted":{"topicName":"Compacted","attributes":{"cleanup.policy":"COMPACTION"}}}}`)
	c, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.QueueMappings) != 2 || c.QueueMappings[0].Topic != "StaticA" || c.QueueMappings[1].Topic != "StaticB" ||
		c.QueueMappings[0].Epoch != 7 || c.QueueMappings[0].HostedQueues[0][0].QueueID != 1 || c.QueueMappings[0].HostedQueues[0][0].EndOffset != -1 {
		t.Fatalf("static topic mappings %+v", c.QueueMappings)
	}
	want := []string{
		"lmqConsumerOffset.json: 3 consumer offsets (of light message queues, or other than consumerOffset.json's) are not carried over: the RocketMQ broker ran with enableLmq, and rocketkv reads them with enableLmq=true",
		"topics.json: 1 BatchCQ topics (Batched): rocketkv has no batch ConsumeQueue and indexes each batch record as one message at its first offset, so consumers cannot read these topics as RocketMQ numbered them; drain them before the move",
		"topics.json: 1 compacted topics (cleanup.policy=COMPACTION: Compacted): rocketkv compacts them from the messages still in the CommitLog; RocketMQ's compaction logs (compaction/) are not read, so a key whose newest message left the CommitLog is not carried over",
	}
	if !reflect.DeepEqual(c.NotCarried, want) || len(c.Files) != 3 {
		t.Fatalf("not carried %q, files %v", c.NotCarried, c.Files)
	}

	write("topicQueueMapping.json", `{"topicQueueMappingInfoMap":{`)
	write("lmqConsumerOffset.json", `{"lmqOffsetTable":{}}`)
	write("topics.json", `{"topicConfigTable":{}}`)
	c, err = Read(root)
	if err != nil {
		t.Fatalf("an unreadable topicQueueMapping.json stopped the import: %v", err)
	}
	if len(c.NotCarried) != 1 || !strings.HasPrefix(c.NotCarried[0], "topicQueueMapping.json: unreadable") {
		t.Fatalf("not carried %q", c.NotCarried)
	}
}

// With ReadOptions.LMQ the offsets come from lmqConsumerOffset.json, as a
// RocketMQ broker with enableLmq loads them: both its tables, in place of
// consumerOffset.json's; without that file, consumerOffset.json's stay.
func TestReadLMQOffsets(t *testing.T) {
	root, write := configDir(t)
	write("consumerOffset.json", `{"offsetTable":{"T@g":{0:1}}}`)
	c, err := ReadWith(root, ReadOptions{LMQ: true})
	if err != nil || !reflect.DeepEqual(c.Offsets, []Offset{{Group: "g", Topic: "T", QueueID: 0, Offset: 1}}) {
		t.Fatalf("without lmqConsumerOffset.json: %+v %v", c.Offsets, err)
	}
	write("lmqConsumerOffset.json", `{"offsetTable":{"T@g":{0:7,1:8}},"lmqOffsetTable":{"%LMQ%dev1@%LMQ%g1":4,"%LMQ%dev2@%LMQ%g1":5,"%LMQ%x@g":null},"dataVersion":{"counter":3}}`)
	c, err = ReadWith(root, ReadOptions{LMQ: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []Offset{
		{Group: "%LMQ%g1", Topic: "%LMQ%dev1", QueueID: 0, Offset: 4},
		{Group: "%LMQ%g1", Topic: "%LMQ%dev2", QueueID: 0, Offset: 5},
		{Group: "g", Topic: "T", QueueID: 0, Offset: 7},
		{Group: "g", Topic: "T", QueueID: 1, Offset: 8},
	}
	if !reflect.DeepEqual(c.Offsets, want) || len(c.NotCarried) != 0 {
		t.Fatalf("offsets %+v (not carried %q), want %+v", c.Offsets, c.NotCarried, want)
	}
	// With LMQ an unreadable file is an error, not a note.
	for _, bad := range []string{`{"lmqOffsetTable":{"nokey":1}}`, `{"lmqOffsetTable":{"%LMQ%a@g":"x"}}`, `{"lmqOffsetTable":`} {
		write("lmqConsumerOffset.json", bad)
		if _, err := ReadWith(root, ReadOptions{LMQ: true}); err == nil {
			t.Errorf("lmqConsumerOffset.json %s read without an error", bad)
		}
	}
}

// configDir returns a store root with an empty config directory, and a
// function that writes one of its files.
func configDir(t *testing.T) (root string, write func(name, body string)) {
	t.Helper()
	root = t.TempDir()
	dir := filepath.Join(root, "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A config file of whitespace alone is what RocketMQ's ConfigManager.load
// reads as no config at all for topics, groups and the like (fastjson
// decodes it to null, and the ".bak" is not read), and as unparsable for
// the consumer offsets (their ".bak" is read). An empty file is a missing
// one for both.
func TestReadBlankFiles(t *testing.T) {
	root := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	cfg := filepath.Join(root, "config")
	want, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Topics) == 0 || len(want.Offsets) == 0 {
		t.Fatalf("the fixture has %d topics and %d offsets", len(want.Topics), len(want.Offsets))
	}
	offsets, err := os.ReadFile(filepath.Join(cfg, "consumerOffset.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"topics.json":             " \n\t\r\n",
		"consumerOffset.json":     "\n  \n",
		"consumerOffset.json.bak": string(offsets),
		"subscriptionGroup.json":  "",
	} {
		if err := os.WriteFile(filepath.Join(cfg, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Topics) != 0 {
		t.Errorf("a blank topics.json gave %d topics (from %v), want none: RocketMQ does not read topics.json.bak then", len(c.Topics), c.Files)
	}
	if !reflect.DeepEqual(c.Offsets, want.Offsets) {
		t.Errorf("offsets %+v, want those of consumerOffset.json.bak %+v", c.Offsets, want.Offsets)
	}
	if !reflect.DeepEqual(c.Groups, want.Groups) {
		t.Errorf("an empty subscriptionGroup.json: %d groups, want the %d of its .bak", len(c.Groups), len(want.Groups))
	}
	var files []string
	for _, f := range c.Files {
		files = append(files, filepath.Base(f))
	}
	for _, f := range []string{"topics.json", "subscriptionGroup.json.bak", "consumerOffset.json.bak"} {
		if !slices.Contains(files, f) {
			t.Errorf("files read %v, want %s among them", files, f)
		}
	}
	var notes []string
	for _, n := range c.NotCarried {
		if strings.Contains(n, ".bak") {
			notes = append(notes, n)
		}
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "consumerOffset.json: unreadable, its backup consumerOffset.json.bak") {
		t.Errorf("notes of the backups read: %q", notes)
	}
}
