package rmqconfig

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/internal/rocksread"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/meta"
)

// v1Store returns a store root whose config/ holds the ldb-written config
// v1 databases (testdata/rocksdb-v1/gen.sh), and with json the fixture's
// JSON files beside them.
func v1Store(t *testing.T, json bool) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "config")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "rocksdb-v1", "config"))); err != nil {
		t.Fatal(err)
	}
	if json {
		src := filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean", "config")
		ents, err := os.ReadDir(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func offsetOf(c Config, group, topic string, qid int32) int64 {
	for _, o := range c.Offsets {
		if o.Group == group && o.Topic == topic && o.QueueID == qid {
			return o.Offset
		}
	}
	return -1
}

func topicOf(c Config, name string) (meta.TopicConfig, bool) {
	i := slices.IndexFunc(c.Topics, func(t meta.TopicConfig) bool { return t.TopicName == name })
	if i < 0 {
		return meta.TopicConfig{}, false
	}
	return c.Topics[i], true
}

// Config v1 (storeType=defaultRocksDB) is read from its databases: the
// topics, groups and forbidden table, and the consumer offsets whose last
// batch is still in the WAL.
func TestReadRocksDBConfigV1(t *testing.T) {
	for _, withJSON := range []bool{false, true} {
		c, err := Read(v1Store(t, withJSON))
		if err != nil {
			t.Fatal(err)
		}
		// With the JSON files beside (older data versions, as the
		// fixture's are), the databases win, as at RocketMQ's load.
		if len(c.Topics) != 12 {
			t.Errorf("json=%v: %d topics, want the fixture's 11 and TopicR", withJSON, len(c.Topics))
		}
		if tc, ok := topicOf(c, "TopicR"); !ok || tc.ReadQueueNums != 2 {
			t.Errorf("json=%v: TopicR %+v %v", withJSON, tc, ok)
		}
		if i := slices.IndexFunc(c.Groups, func(g meta.SubscriptionGroupConfig) bool { return g.GroupName == "GroupR" }); i < 0 || c.Groups[i].RetryMaxTimes != 5 {
			t.Errorf("json=%v: GroupR missing or wrong: %d", withJSON, i)
		}
		for _, want := range []struct {
			group, topic string
			qid          int32
			off          int64
		}{{"GroupA", "TopicA", 0, 15}, {"GroupA", "TopicA", 3, 8}, {"GroupB", "TopicB", 1, 13}} {
			if got := offsetOf(c, want.group, want.topic, want.qid); got != want.off {
				t.Errorf("json=%v: %s on %s/%d: %d, want %d", withJSON, want.group, want.topic, want.qid, got, want.off)
			}
		}
		for _, sub := range []string{"topics", "subscriptionGroups", "consumerOffsets"} {
			if !slices.ContainsFunc(c.Files, func(f string) bool { return strings.HasSuffix(f, filepath.Join("config", sub)) }) {
				t.Errorf("json=%v: files %v lack %s", withJSON, c.Files, sub)
			}
		}
	}
}

// A JSON file whose data version counter is above its database's is
// merged as RocketMQ's load merges it: topics and groups put over the
// database's, consumer offsets replacing them.
func TestReadRocksDBConfigV1MergesNewerJSON(t *testing.T) {
	root := v1Store(t, true)
	dir := filepath.Join(root, "config")
	counter := regexp.MustCompile(`"counter":\d+`)
	topics, err := os.ReadFile(filepath.Join(dir, "topics.json"))
	if err != nil {
		t.Fatal(err)
	}
	topics = counter.ReplaceAll(topics, []byte(`"counter":100`))
	if err := os.WriteFile(filepath.Join(dir, "topics.json"), topics, 0o644); err != nil {
		t.Fatal(err)
	}
	offsets := `{"dataVersion":{"counter":100,"timestamp":1},"offsetTable":{"TopicA@GroupA":{0:5}}}`
	if err := os.WriteFile(filepath.Join(dir, "consumerOffset.json"), []byte(offsets), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := topicOf(c, "TopicR"); !ok || len(c.Topics) != 12 {
		t.Errorf("topics after the merge: %d, TopicR kept %v; want the database's and the JSON's", len(c.Topics), ok)
	}
	if got := offsetOf(c, "GroupA", "TopicA", 0); got != 5 || len(c.Offsets) != 1 {
		t.Errorf("offsets after a newer consumerOffset.json: %+v, want its one offset 5", c.Offsets)
	}
}

// A damaged database stops the read with the way out; nothing is guessed.
func TestReadRocksDBConfigV1Damaged(t *testing.T) {
	root := v1Store(t, false)
	ssts, err := filepath.Glob(filepath.Join(root, "config", "topics", "*.sst"))
	if err != nil || len(ssts) == 0 {
		t.Fatalf("no SST in the fixture: %v", err)
	}
	for _, p := range ssts {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[1] ^= 0x10
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err = Read(root)
	if !errors.Is(err, rocksread.ErrCorrupt) || !strings.Contains(err.Error(), "rocksDBConfigToJson") {
		t.Fatalf("damaged config/topics: %v, want ErrCorrupt and the way out", err)
	}
}

// Config v2 (configManagerVersion=v2, config/rdb, written by ldb from the
// fixture's JSON: testdata/rocksdb-v2/gen.sh) is read from the database
// alone, the JSON files beside it ignored as RocketMQ's v2 managers ignore
// them; its consumer offsets are in the WAL. Pull offsets of ordinary
// topics, and (without ReadOptions.LMQ) light message queues' offsets,
// are named as not carried over.
func TestReadRocksDBConfigV2(t *testing.T) {
	root := v1Store(t, true)
	dir := filepath.Join(root, "config")
	for _, sub := range []string{"topics", "subscriptionGroups", "consumerOffsets"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "rocksdb-v2", "config"))); err != nil {
		t.Fatal(err)
	}
	c, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := topicOf(c, "TopicR"); !ok || len(c.Topics) != 12 {
		t.Errorf("%d topics, TopicR %v; want the fixture's 11 and TopicR", len(c.Topics), ok)
	}
	if len(c.Groups) != 9 {
		t.Errorf("%d groups, want the fixture's 9", len(c.Groups))
	}
	for _, want := range []struct {
		group, topic string
		qid          int32
		off          int64
	}{{"GroupA", "TopicA", 0, 15}, {"GroupB", "TopicB", 1, 13}} {
		if got := offsetOf(c, want.group, want.topic, want.qid); got != want.off {
			t.Errorf("%s on %s/%d: %d, want %d", want.group, want.topic, want.qid, got, want.off)
		}
	}
	if len(c.Offsets) != 7 {
		t.Errorf("%d offsets, want the fixture's 7 (no pull offsets, no LMQ): %+v", len(c.Offsets), c.Offsets)
	}
	notes := strings.Join(c.NotCarried, "\n")
	for _, want := range []string{"7 pull offsets", "1 consumer offsets of light message queues"} {
		if !strings.Contains(notes, want) {
			t.Errorf("not-carried notes lack %q:\n%s", want, notes)
		}
	}
	if slices.ContainsFunc(c.Files, func(f string) bool {
		return strings.HasSuffix(f, "topics.json") || strings.HasSuffix(f, "consumerOffset.json")
	}) {
		t.Errorf("JSON files beside config/rdb were read: %v", c.Files)
	}
	if !slices.ContainsFunc(c.Files, func(f string) bool { return strings.HasSuffix(f, "delayOffset.json") }) {
		t.Errorf("delayOffset.json (not in config v2) was not read: %v", c.Files)
	}
}

// DescribeV2Key names config v2's records for kvdump rocksdb: an offset
// key, a topic key, a data version; a cut key is not one.
func TestDescribeV2Key(t *testing.T) {
	for _, tc := range []struct {
		key  []byte
		want string
	}{
		{[]byte{0x01, 0, 1, 0x02, 0, 2, 'G', '1', 0x01, 0, 2, 'T', '1', 0x01, 0, 0, 0, 7}, "consumerOffset group=G1 topic=T1 queue=7"},
		{[]byte{0x01, 0, 3, 0x02, 0, 2, 'T', '1'}, "topic T1"},
		{append([]byte{0x01, 0, 4, 0x01}, "data_version"...), "subscriptionGroup data_version"},
		{[]byte{0x01, 0, 3, 0x02, 0, 9, 'T'}, ""},
		{[]byte{0x01, 0, 9, 0x02, 0, 1, 'T'}, ""},
	} {
		if got := DescribeV2Key(tc.key); got != tc.want {
			t.Errorf("DescribeV2Key(%x) = %q, want %q", tc.key, got, tc.want)
		}
	}
	if got := DescribeV2Value([]byte{0, 0, 0, 0, 0, 0, 0, 42}); got != "42" {
		t.Errorf("offset value: %q", got)
	}
}
