package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// kvdump rocksdb lists the column families of an ldb-written RocketMQ
// ConsumeQueue database and its entries, decoded in RocketMQ's layout,
// the WAL's writes included.
func TestRocksDBListing(t *testing.T) {
	cq := filepath.Join("..", "..", "internal", "rocksread", "testdata", "cq")
	out := mustKvdump(t, "rocksdb", cq)
	for _, want := range []string{"0   default  0            0:000045.sst 0:000050.sst 0:000055.sst 1:000030.sst 1:000031.sst", "1   offset   3"} {
		if !strings.Contains(out, want) {
			t.Errorf("column families lack %q:\n%s", want, out)
		}
	}
	out = mustKvdump(t, "rocksdb", cq, "--cf", "offset")
	for _, want := range []string{"TopicA max 2 = phy=50000 cq=0", "CHECKPOINT_TOPIC max 0 = dispatched=50220"} {
		if !strings.Contains(out, want) {
			t.Errorf("offset entries lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "TopicA min 0") {
		t.Errorf("a record deleted in the WAL is listed:\n%s", out)
	}
	out = mustKvdump(t, "--json", "rocksdb", cq, "--cf", "default", "--limit", "2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("--limit 2 printed %d lines:\n%s", len(lines), out)
	}
	var e rocksDBEntry
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil {
		t.Fatal(err)
	}
	if e.Decoded != "TopicA 0 @0 = phy=0 size=200 tags=0 stored=1700000000000" {
		t.Errorf("first unit: %+v", e)
	}
	cfg := filepath.Join("..", "..", "migrate", "rmqconfig", "testdata", "rocksdb-v1", "config", "consumerOffsets")
	if out := mustKvdump(t, "rocksdb", cfg, "--cf", "default"); !strings.Contains(out, `TopicA@GroupA = {"offsetTable":{0:15,1:6,2:7,3:8}}`) {
		t.Errorf("config v1 consumer offsets:\n%s", out)
	}
	rdb := filepath.Join("..", "..", "migrate", "rmqconfig", "testdata", "rocksdb-v2", "config", "rdb")
	out = mustKvdump(t, "rocksdb", rdb, "--cf", "default", "--limit", "0")
	for _, want := range []string{"consumerOffset group=GroupA topic=TopicA queue=0 = 15", "pullOffset group=GroupB topic=TopicB queue=1 = 113",
		"topic data_version = stateVersion=0 timestamp=1795976100000 counter=7", `topic TopicR = {"order":false`} {
		if !strings.Contains(out, want) {
			t.Errorf("config v2 entries lack %q:\n%s", want, out)
		}
	}
	if _, _, err := runKvdump(t, "rocksdb", cq, "--cf", "popState"); err == nil {
		t.Error("a column family the database lacks was listed")
	}
}

// The key decoders on hand-built keys from spec 6.3 and 7.4: KV POP keys
// have no ldb-written fixture.
func TestDescribeRocketMQKeys(t *testing.T) {
	pop := append([]byte{0, 0, 1, 0x8c, 0, 0, 0, 1}, []byte("G1@T1@")...)
	pop = append(pop, 0, 0, 0, 3, '@', 0, 0, 0, 0, 0, 0, 0, 42)
	if got := describePopKey(pop); got != "visibleAt=1700807049217 group=G1 topic=T1 queue=3 offset=42" {
		t.Errorf("pop key: %q", got)
	}
	if got := describePopKey([]byte("short")); got != "" {
		t.Errorf("short pop key: %q", got)
	}
}
