package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
)

// check-rocketmq on the store Apache RocketMQ 4.9.8 wrote: what a first
// open would serve and import, and that it can open it; nothing is
// written.
func TestCheckRocketMQ(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	out := mustKvdump(t, "--store", store, "check-rocketmq")
	for _, want := range []string{
		"4 segments of [16384] bytes, offsets 0 to 53272",
		"set mappedFileSizeCommitLog=16384",
		"consumequeue/: present",
		"11 topics, 9 groups, 7 consumer offsets, 1 delay levels",
		"a broker can open this store",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "no topic config") || strings.Contains(out, "past their config") {
		t.Errorf("every queue of the fixture has a topic config, yet:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(store, kvindex.DirName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("check-rocketmq created an index: %v", err)
	}

	var r rocketmqCheck
	if err := json.Unmarshal([]byte(mustKvdump(t, "--store", store, "--json", "check-rocketmq")), &r); err != nil {
		t.Fatal(err)
	}
	if r.Topics != 11 || r.CommitLog.Segments != 4 || !r.FileConsumeQueue || len(r.Refusals) != 0 || r.Opened {
		t.Fatalf("JSON report %+v", r)
	}
}

// A store a broker would refuse exits with status 1 and says why and what
// to do; what would not be carried over is listed as warnings.
func TestCheckRocketMQRefusal(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	kv := filepath.Join(store, rmqconfig.KVPopDir)
	if err := os.MkdirAll(kv, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		filepath.Join(kv, "CURRENT"):                             "MANIFEST-000005\n",
		filepath.Join(store, "config", "topicQueueMapping.json"): `{"topicQueueMappingInfoMap":{"StaticA":{}}}`,
	} {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err := runKvdump(t, "--store", store, "check-rocketmq")
	if !errors.Is(err, errDifferences) || exitStatus(err) != exitDifferences {
		t.Fatalf("a refused store: %v (exit status %d), want status 1", err, exitStatus(err))
	}
	for _, want := range []string{"refused: " + rmqconfig.ErrRocksDBPopState.Error(), "exportPopRecord",
		"warning: not carried over: topicQueueMapping.json: the logical queues of 1 static topics (StaticA)"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "a broker can open this store") {
		t.Fatalf("a refused store reported as openable:\n%s", out)
	}

	// A CommitLog directory that is not there.
	missing := filepath.Join(store, "elsewhere")
	out, _, err = runKvdump(t, "--store", store, "--commitlog", missing, "check-rocketmq")
	if exitStatus(err) != exitDifferences || !strings.Contains(out, "refused: no CommitLog directory "+missing) || strings.Contains(out, ": empty") {
		t.Fatalf("a missing CommitLog directory: %v\n%s", err, out)
	}

	// A consumequeue file torn at a size no whole file has, which the
	// broker's first open refuses (TestOpenRocketMQStoreRefusesAnUnreadableConsumeQueue).
	torn := filepath.Join(store, "consumequeue", "TornTopic", "0")
	if err := os.MkdirAll(torn, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(torn, "00000000000000000000"), make([]byte, 7*20), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = runKvdump(t, "--store", store, "check-rocketmq")
	if exitStatus(err) != exitDifferences || !strings.Contains(out, "refused: the consumequeue cannot be read (move it aside") ||
		!strings.Contains(out, "TornTopic") {
		t.Fatalf("a torn consumequeue file: %v\n%s", err, out)
	}
	if err := os.RemoveAll(filepath.Join(store, "consumequeue", "TornTopic")); err != nil {
		t.Fatal(err)
	}

	// A segment of another size than the others (not the last).
	if err := os.Truncate(filepath.Join(store, "commitlog", "00000000000000016384"), 8192); err != nil {
		t.Fatal(err)
	}
	out, _, err = runKvdump(t, "--store", store, "check-rocketmq")
	if exitStatus(err) != exitDifferences || !strings.Contains(out, "refused: CommitLog segments of different sizes [8192 16384]") {
		t.Fatalf("segments of two sizes: %v\n%s", err, out)
	}
}

// A store whose RocketMQ broker ran with enableLmq keeps its offsets in
// lmqConsumerOffset.json: check-rocketmq warns that a broker without
// enableLmq leaves them behind, and with --enable-lmq counts them as
// imported, as such a broker reads them.
func TestCheckRocketMQLMQOffsets(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	lmq := `{"offsetTable":{"T@g":{0:7,1:8}},"lmqOffsetTable":{"%LMQ%dev1@%LMQ%g1":4,"%LMQ%dev2@%LMQ%g1":5}}`
	if err := os.WriteFile(filepath.Join(store, "config", "lmqConsumerOffset.json"), []byte(lmq), 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustKvdump(t, "--store", store, "check-rocketmq")
	for _, want := range []string{"7 consumer offsets", "warning: not carried over: lmqConsumerOffset.json", "enableLmq=true"} {
		if !strings.Contains(out, want) {
			t.Errorf("without --enable-lmq, the report lacks %q:\n%s", want, out)
		}
	}
	out = mustKvdump(t, "--store", store, "check-rocketmq", "--enable-lmq")
	if !strings.Contains(out, "4 consumer offsets") || strings.Contains(out, "lmqConsumerOffset.json:") ||
		!strings.Contains(out, "lmqConsumerOffset.json") {
		t.Fatalf("with --enable-lmq: want the file read and its 4 offsets imported, no warning:\n%s", out)
	}
}

// Queues of consumequeue/ that no topic config routes are named: a topic
// whose config is missing and one whose config counts fewer queues than
// the store holds. Neither refuses the store.
func TestCheckRocketMQUnroutedQueues(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	name := filepath.Join(store, "config", "topics.json")
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	table := doc["topicConfigTable"].(map[string]any)
	delete(table, "TopicB")
	topicA := table["TopicA"].(map[string]any)
	// Queue 2 is written to but not read: its messages reach no consumer.
	topicA["readQueueNums"], topicA["writeQueueNums"] = 2, 3
	if data, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}

	out := mustKvdump(t, "--store", store, "check-rocketmq")
	for _, want := range []string{
		"warning: 1 topics have messages in the store but no topic config: TopicB (2 queues)",
		"warning: 1 topics have messages in queues past their config's queue count: TopicA (4 queues, config 2)",
		"a broker can open this store",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	var r rocketmqCheck
	if err := json.Unmarshal([]byte(mustKvdump(t, "--store", store, "--json", "check-rocketmq")), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Unrouted) != 2 {
		t.Fatalf("JSON unrouted %q, want two lines", r.Unrouted)
	}
}
