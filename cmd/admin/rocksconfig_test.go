package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The config v1 RocksDB databases ldb wrote (migrate/rmqconfig/testdata
// and internal/rocksread/testdata, see their gen.sh).
const (
	rocksV1Config = "../../migrate/rmqconfig/testdata/rocksdb-v1/config"
	rocksV2Config = "../../migrate/rmqconfig/testdata/rocksdb-v2/config"
	rocksReadData = "../../internal/rocksread/testdata"
)

func TestRocksDBConfigToJSONLocalOffsets(t *testing.T) {
	long := "LongTopic_klmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvw@GroupB"
	want := "{\n\t\"offsetTable\": {\n" +
		"\t\t\"" + long + "\": {\n\t\t\t\"0\": 1\n\t\t},\n" +
		"\t\t\"TopicA@GroupA\": {\n\t\t\t\"0\": 15,\n\t\t\t\"1\": 6,\n\t\t\t\"2\": 7,\n\t\t\t\"3\": 8\n\t\t},\n" +
		"\t\t\"TopicB@GroupB\": {\n\t\t\t\"0\": 9,\n\t\t\t\"1\": 13\n\t\t}\n" +
		"\t}\n}\n"
	// -t is matched without regard to case, as mqadmin matches it; the
	// last batch of offsets is in the WAL (TopicA@GroupA's queue 0 at 15).
	out, err := run(t, "rocksDBConfigToJson", "-p", rocksV1Config, "-t", "ConsumerOffsets")
	if err != nil || out != want {
		t.Fatalf("rocksDBConfigToJson -p -t consumerOffsets: %v\n%s\nwant\n%s", err, out, want)
	}
	wantLines := "type: offsetTable\n" +
		"1, Key: " + long + ", Value: {0=1}\n" +
		"2, Key: TopicA@GroupA, Value: {0=15, 1=6, 2=7, 3=8}\n" +
		"3, Key: TopicB@GroupB, Value: {0=9, 1=13}\n"
	out, err = run(t, "rocksDBConfigToJson", "--configPath", rocksV1Config, "--configType", "consumerOffsets", "--jsonEnable", "FALSE")
	if err != nil || out != wantLines {
		t.Fatalf("rocksDBConfigToJson -j false: %v\n%s\nwant\n%s", err, out, wantLines)
	}

	file := filepath.Join(t.TempDir(), "out", "offsets.json")
	for i := range 2 {
		// -e wins over -j, as mqadmin's.
		out, err = run(t, "rocksDBConfigToJson", "-p", rocksV1Config, "-t", "consumerOffsets", "-e", file, "-j", "false")
		if err != nil || out != "" {
			t.Fatalf("rocksDBConfigToJson -e: %q %v", out, err)
		}
		if i == 0 {
			if err := os.WriteFile(file, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != strings.TrimSuffix(want, "\n") {
		t.Errorf("-e file: %v\n%s", err, b)
	}
	if b, err := os.ReadFile(file + ".bak"); err != nil || string(b) != "old" {
		t.Errorf("-e kept the previous content as %s.bak: %q %v", file, b, err)
	}
}

func TestRocksDBConfigToJSONLocalTopics(t *testing.T) {
	topic0 := `{"order":false,"perm":4,"readQueueNums":1,"topicFilterType":"SINGLE_TAG","topicName":"topic-0","topicSysFlag":0,"writeQueueNums":1}`
	out, err := run(t, "rocksDBConfigToJson", "-p", rocksReadData, "-t", "topics", "-j", "false")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	head := "type: dataVersion\n1, Key: counter, Value: 44\n2, Key: stateVersion, Value: 0\n3, Key: timestamp, Value: 1700000050000\n" +
		"type: topicConfigTable\n4, Key: topic-0, Value: " + topic0 + "\n"
	if !strings.HasPrefix(out, head) || len(lines) != 5+26 ||
		lines[len(lines)-1] != `29, Key: topic-new, Value: {"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"topic-new","topicSysFlag":0,"writeQueueNums":8}` {
		t.Fatalf("rocksDBConfigToJson -t topics -j false:\n%s", out)
	}
	out, err = run(t, "rocksDBConfigToJson", "-p", rocksReadData, "-t", "topics")
	wantHead := "{\n\t\"dataVersion\": {\n\t\t\"counter\": 44,\n\t\t\"stateVersion\": 0,\n\t\t\"timestamp\": 1700000050000\n\t},\n" +
		"\t\"topicConfigTable\": {\n\t\t\"topic-0\": {\n\t\t\t\"order\": false,\n\t\t\t\"perm\": 4,\n\t\t\t\"readQueueNums\": 1,\n"
	if err != nil || !strings.HasPrefix(out, wantHead) || !strings.HasSuffix(out, "\"writeQueueNums\": 8\n\t\t}\n\t}\n}\n") || strings.Count(out, "\"topicName\"") != 26 {
		t.Fatalf("rocksDBConfigToJson -t topics: %v\n%s", err, out)
	}
}

func TestExportMetadataInRocksDB(t *testing.T) {
	out, err := run(t, "exportMetadataInRocksDB", "-p", rocksV1Config, "-t", "topics")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	first := `1, Key: BenchmarkTest, Value: {"order":false,"perm":6,"readQueueNums":1024,"topicFilterType":"SINGLE_TAG","topicName":"BenchmarkTest","topicSysFlag":0,"writeQueueNums":1024}`
	if len(lines) != 12 || lines[0] != first {
		t.Fatalf("exportMetadataInRocksDB -t topics: %d lines\n%s", len(lines), out)
	}
	// TopicR exists only in the database, not in the JSON files it was made from.
	if lines[10] != `11, Key: TopicR, Value: {"order":false,"perm":6,"readQueueNums":2,"topicFilterType":"SINGLE_TAG","topicName":"TopicR","topicSysFlag":0,"writeQueueNums":2}` {
		t.Errorf("exportMetadataInRocksDB -t topics: line 11 is not TopicR's\n%s", out)
	}
	out, err = run(t, "exportMetadataInRocksDB", "--path", rocksV1Config, "--configType", "subscriptionGroups", "--jsonEnable", "True")
	wantHead := "{\n\t\"subscriptionGroupTable\": {\n\t\t\"CID_ONS-HTTP-PROXY\": {\n\t\t\t\"brokerId\": 0,\n"
	if err != nil || !strings.HasPrefix(out, wantHead) || !strings.HasSuffix(out, "\t\t}\n\t}\n}\n") ||
		!strings.Contains(out, "\t\t\"GroupR\": {\n") || strings.Contains(out, "dataVersion") || strings.Contains(out, "forbidden") {
		t.Fatalf("exportMetadataInRocksDB -j true: %v\n%s", err, out)
	}
	// -j is true only for "true", as Boolean.parseBoolean reads it.
	if out, err := run(t, "exportMetadataInRocksDB", "-p", rocksV1Config, "-t", "subscriptionGroups", "-j", "yes"); err != nil || !strings.HasPrefix(out, "1, Key: ") {
		t.Errorf("exportMetadataInRocksDB -j yes: %v\n%s", err, out)
	}
}

func TestRocksDBConfigLocalErrors(t *testing.T) {
	notDB := t.TempDir()
	if err := os.Mkdir(filepath.Join(notDB, "topics"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(notDB, "topics", "000001.log"), []byte("not a RocksDB"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(notDB, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rocksDBConfigToJson", "-p", filepath.Join(notDB, "missing"), "-t", "topics"}, "no such file or directory"},
		{[]string{"rocksDBConfigToJson", "-p", file, "-t", "topics"}, "is not a directory"},
		{[]string{"rocksDBConfigToJson", "-p", notDB, "-t", "topics"}, "is " + filepath.Join(notDB, "topics") + " a RocksDB directory?"},
		{[]string{"rocksDBConfigToJson", "-p", notDB, "-t", "subscriptionGroups"}, "want a broker's <storePathRootDir>/config holding subscriptionGroups/"},
		{[]string{"rocksDBConfigToJson", "-p", rocksV2Config, "-t", "topics"}, "rdb is config v2"},
		{[]string{"rocksDBConfigToJson", "-p", rocksV1Config}, "-p (the local mode) needs -t"},
		{[]string{"rocksDBConfigToJson", "-p", rocksV1Config, "-t", "topics;consumerOffsets"}, "-p reads one config type"},
		{[]string{"rocksDBConfigToJson", "-p", rocksV1Config, "-t", "offsets"}, `unknown config type "offsets"`},
		{[]string{"exportMetadataInRocksDB", "-p", rocksV1Config, "-t", "consumerOffsets"}, `unknown config type "consumerOffsets": want one of topics, subscriptionGroups`},
		{[]string{"exportMetadataInRocksDB", "-p", notDB, "-t", "topics"}, "a RocksDB directory?"},
		{[]string{"exportMetadataInRocksDB", "-t", "topics"}, `required flag(s) "path" not set`},
	} {
		out, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || out != "" {
			t.Errorf("%v: out %q, err %v; want an error with %q", c.args, out, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(notDB, "subscriptionGroups")); err == nil {
		t.Error("reading a missing database made its directory")
	}
}
