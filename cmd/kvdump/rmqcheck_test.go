package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/migrate/filecq"
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

// A store whose POP messages in flight are in RocketMQ's KV POP RocksDB
// (kvStore/, two records written by ldb) is not refused: the report
// counts the messages the first open imports.
func TestCheckRocketMQKVPop(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	if err := os.CopyFS(filepath.Join(store, rmqconfig.KVPopDir), os.DirFS(filepath.Join("..", "..", "migrate", "rmqconfig", "testdata", "kvstore", "inflight"))); err != nil {
		t.Fatal(err)
	}
	out := mustKvdump(t, "--store", store, "check-rocketmq")
	for _, want := range []string{"2 POP messages in flight in RocketMQ's KV POP RocksDB", "a broker can open this store"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// A store a broker would refuse exits with status 1 and says why and what
// to do; what the first open would import is counted (the static topics'
// mappings among it).
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
		"1 static topics' queue mappings"} {
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

// What a first open leaves out or cuts of the RocketMQ 4.9.8 store, made
// to have some of each, is listed as warnings with counts: a topic
// RocketMQ deleted (LongTopic: records in the CommitLog, no consumequeue
// directory, no config), the records of a queue without files below and
// past its topic's first consumequeue entry (TopicB/0's directory gone:
// TopicB's entries begin with TopicB/1's first), the records below a
// queue's first file that continue its numbering (TopicA/2's first file
// gone) and those its files number again (TopicA/3), consumequeue
// entries past the CommitLog's end (three on TopicA/1) and a file missing
// in the middle of a queue (TopicA/0's offsets 10 to 19, of four files).
// None refuses the store.
func TestCheckRocketMQWhatTheFirstOpenDrops(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	var fx struct {
		View struct {
			Messages []struct {
				Topic           string `json:"topic"`
				QueueID         int32  `json:"queueId"`
				QueueOffset     int64  `json:"queueOffset"`
				CommitLogOffset int64  `json:"commitLogOffset"`
			} `json:"messages"`
		} `json:"view"`
	}
	data, err := os.ReadFile(filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatal(err)
	}
	const long = "LongTopic_klmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvw"
	var longRecords, olderB, records0B, below2, renumbered3 int
	firstB := int64(-1)
	for _, m := range fx.View.Messages {
		if m.Topic == "TopicB" && m.QueueID == 1 && m.QueueOffset == 0 {
			firstB = m.CommitLogOffset
		}
	}
	for _, m := range fx.View.Messages {
		switch {
		case m.Topic == long:
			longRecords++
		case m.Topic == "TopicB" && m.QueueID == 0:
			records0B++
			if m.CommitLogOffset < firstB {
				olderB++
			}
		case m.Topic == "TopicA" && m.QueueID == 2 && m.QueueOffset < 10:
			below2++
		case m.Topic == "TopicA" && m.QueueID == 3 && m.QueueOffset < 10:
			renumbered3++
		}
	}
	if longRecords == 0 || olderB == 0 || firstB < 0 || records0B == olderB || below2 != 10 || renumbered3 != 10 {
		t.Fatalf("the fixture has %d records of %s and %d of TopicB/0 before TopicB/1's first", longRecords, long, olderB)
	}

	files, err := filecq.Open(filecq.Options{Dir: store, UnitsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	hi, err := files.MaxOffset("TopicA", 0)
	if err != nil {
		t.Fatal(err)
	}
	last, err := files.Get("TopicA", 0, hi-1, 1)
	if err != nil || len(last) != 1 {
		t.Fatalf("TopicA/0's newest entry: %v %v", last, err)
	}
	// TopicA/0 to four files (units of records that are not there: the
	// check reads no record of an entry), and three entries on TopicA/1
	// past the CommitLog's end 53272.
	var ds []cq.Dispatch
	for off := hi; off < 35; off++ {
		ds = append(ds, cq.Dispatch{Topic: "TopicA", QueueID: 0, Entry: cq.Entry{QueueOffset: off, PhyOffset: last[0].End() + off - hi, Size: 1}})
	}
	bhi, err := files.MaxOffset("TopicA", 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(3) {
		ds = append(ds, cq.Dispatch{Topic: "TopicA", QueueID: 1, Entry: cq.Entry{QueueOffset: bhi + i, PhyOffset: 60_000 + i*100, Size: 100}})
	}
	if err := files.Put(ds); err != nil {
		t.Fatal(err)
	}
	if err := files.Close(); err != nil {
		t.Fatal(err)
	}
	// TopicA/3 numbered again: its file of offsets 10..18 holds them at
	// 0..8, as a queue whose files RocketMQ lost and numbered from 0
	// again (the check reads no record of an entry).
	a3 := filepath.Join(store, "consumequeue", "TopicA", "3")
	second, err := os.ReadFile(filepath.Join(a3, "00000000000000000200"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a3, "00000000000000000000"), second, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		filepath.Join("TopicA", "0", "00000000000000000200"),
		filepath.Join("TopicA", "2", "00000000000000000000"), // offsets 0..9
		filepath.Join("TopicA", "3", "00000000000000000200"),
		filepath.Join("TopicB", "0"),
		long,
	} {
		if err := os.RemoveAll(filepath.Join(store, "consumequeue", p)); err != nil {
			t.Fatal(err)
		}
	}
	removeTopicFromStoreConfig(t, store, long)

	out := mustKvdump(t, "--store", store, "check-rocketmq")
	for _, want := range []string{
		"warning: 1 runs of consumequeue files are missing in the middle of a queue: TopicA/0 offsets 10 to 19;",
		"warning: 3 consumequeue entries point past the CommitLog's end 53272",
		"TopicA/1 (3)",
		fmt.Sprintf("warning: 1 topics RocketMQ deleted (records in the CommitLog, no consumequeue directory, no topic config) are dropped by the first open, %d records: %s (%d)", longRecords, long, longRecords),
		fmt.Sprintf("warning: %d records of 1 queues without consumequeue files lie below their topic's first consumequeue entry and are left out by the first open", olderB),
		fmt.Sprintf("warning: %d records of 1 queues without consumequeue files lie at or past their topic's first consumequeue entry", records0B-olderB),
		fmt.Sprintf("warning: %d records of 1 queues lie below the queue's first consumequeue file and continue its numbering", below2),
		fmt.Sprintf("TopicA/2 (%d)", below2),
		fmt.Sprintf("warning: %d records of 1 queues lie below the queue's first consumequeue entry with queue offsets the consumequeue numbers again", renumbered3),
		fmt.Sprintf("TopicA/3 (%d)", renumbered3),
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
	if r.Renumbered != renumbered3 || r.BelowFirstFiles != below2 || r.QueuesWithoutFiles != 1 || r.WithoutFilesKept != records0B-olderB {
		t.Errorf("JSON per-queue counts: renumbered %d, below the first files %d, queues without files %d (records kept %d), want %d, %d, 1 (%d)",
			r.Renumbered, r.BelowFirstFiles, r.QueuesWithoutFiles, r.WithoutFilesKept, renumbered3, below2, records0B-olderB)
	}
	if r.ConsumeQueueGaps != 1 || r.EntriesPastLogEnd != 3 || r.DroppedTopics != 1 || r.DroppedRecords != longRecords || r.OlderRecords != olderB+renumbered3 || len(r.Refusals) != 0 {
		t.Fatalf("JSON counts: gaps %d, past the end %d, dropped %d topics %d records, older %d, refusals %q",
			r.ConsumeQueueGaps, r.EntriesPastLogEnd, r.DroppedTopics, r.DroppedRecords, r.OlderRecords, r.Refusals)
	}
}

// check-rocketmq on the fixture store with its consumequeue/ as RocketMQ
// 5.3's RocksDB ConsumeQueue (written by ldb): the RocksDB ConsumeQueue is
// named and read, and it names every topic the CommitLog holds, so none
// counts as deleted; once the long topic is deleted in it, its records do.
func TestCheckRocketMQWithRocksDBConsumeQueue(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	dir := filepath.Join(store, "consumequeue")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "migrate", "rocksdbcq", "testdata", "consumequeue-4.9.8"))); err != nil {
		t.Fatal(err)
	}
	out := mustKvdump(t, "--store", store, "check-rocketmq")
	for _, want := range []string{"RocketMQ's RocksDB ConsumeQueue", "a broker can open this store"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "no topic config") || strings.Contains(out, "topics RocketMQ deleted") {
		t.Errorf("every queue of the RocksDB ConsumeQueue has a topic config and no topic is deleted, yet:\n%s", out)
	}
	var r rocketmqCheck
	if err := json.Unmarshal([]byte(mustKvdump(t, "--store", store, "--json", "check-rocketmq")), &r); err != nil {
		t.Fatal(err)
	}
	if !r.RocksDBConsumeQueue || len(r.Refusals) != 0 || r.DroppedTopics != 0 {
		t.Fatalf("JSON report %+v", r)
	}

	// Without the long topic (deleted by RocketMQ: range deletions and
	// deleted offset records, some in the WAL) and its config, its
	// records count as a deleted topic's.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "migrate", "rocksdbcq", "testdata", "consumequeue-4.9.8-long-deleted"))); err != nil {
		t.Fatal(err)
	}
	removeTopicFromStoreConfig(t, store, "LongTopic_klmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvw")
	r = rocketmqCheck{}
	if err := json.Unmarshal([]byte(mustKvdump(t, "--store", store, "--json", "check-rocketmq")), &r); err != nil {
		t.Fatal(err)
	}
	if r.DroppedTopics != 1 || r.DroppedRecords != 6 {
		t.Fatalf("deleted topics %d with %d records, want 1 with 6: %+v", r.DroppedTopics, r.DroppedRecords, r)
	}
}

// removeTopicFromStoreConfig deletes topic from the store's topics.json.
func removeTopicFromStoreConfig(t *testing.T, store, topic string) {
	t.Helper()
	name := filepath.Join(store, "config", "topics.json")
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc["topicConfigTable"].(map[string]any), topic)
	if data, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// With a RocksDB ConsumeQueue beside RocketMQ's file one that no longer
// holds a topic the file one holds, the check counts what the first open
// keeps, what either holds: what the file one alone gives (the topic's
// records stay; the RocksDB one alone drops them), naming the RocksDB one.
func TestCheckRocketMQWithBothConsumeQueues(t *testing.T) {
	const long = "LongTopic_klmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvw"
	src := filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean")
	alone, both := testutil.CopyStore(t, src), testutil.CopyStore(t, src)
	if err := os.CopyFS(filepath.Join(both, "consumequeue"), os.DirFS(filepath.Join("..", "..", "migrate", "rocksdbcq", "testdata", "consumequeue-4.9.8-long-deleted"))); err != nil {
		t.Fatal(err)
	}
	for _, store := range []string{alone, both} {
		removeTopicFromStoreConfig(t, store, long)
	}
	var a, b map[string]any
	for _, c := range []struct {
		store string
		into  *map[string]any
	}{{alone, &a}, {both, &b}} {
		out := strings.ReplaceAll(mustKvdump(t, "--store", c.store, "--json", "check-rocketmq"), c.store, "STORE")
		if err := json.Unmarshal([]byte(out), c.into); err != nil {
			t.Fatal(err)
		}
	}
	if b["rocksDBConsumeQueue"] != true {
		t.Fatalf("check with both ConsumeQueues does not name the RocksDB one: %v", b)
	}
	delete(b, "rocksDBConsumeQueue")
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("check with both ConsumeQueues:\n%s\nwith the file one alone:\n%s", jb, ja)
	}
}

// A file ConsumeQueue left behind beside RocketMQ's RocksDB one, where a
// queue's files (TopicB/0, ending at 5) stop below the RocksDB one's
// offsets (9) whose records retention deleted: the check says the first
// open refuses storeType=file and the double write over it
// (TestStaleFileConsumeQueueBesideTheRocksDBOneRefusesTheFileLayout), and
// what to do instead.
func TestCheckRocketMQFileConsumeQueueLeftBehind(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	if err := os.CopyFS(filepath.Join(store, "consumequeue"), os.DirFS(filepath.Join("..", "..", "migrate", "rocksdbcq", "testdata", "consumequeue-4.9.8"))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(store, "consumequeue", "TopicB", "0", "00000000000000000000")
	units, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	clear(units[5*filecq.UnitSize:])
	if err := os.WriteFile(path, units, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"00000000000000000000", "00000000000000016384", "00000000000000032768"} {
		if err := os.Remove(filepath.Join(store, "commitlog", f)); err != nil {
			t.Fatal(err)
		}
	}
	out := mustKvdump(t, "--store", store, "check-rocketmq")
	for _, want := range []string{"the first open refuses storeType=file and rocksdbCQDoubleWriteEnable=true",
		"TopicB/0 (files end at 5, RocksDB ConsumeQueue at 9, CommitLog records from 9)"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "TopicB/1 (") || strings.Contains(out, "TopicA/") {
		t.Errorf("a queue whose files are not behind is named:\n%s", out)
	}
}

// A config v2 store's pull offsets of light message queues are counted as
// the pop positions a first open with enableLmq imports (with
// --enable-lmq); an ordinary topic's is named as not carried over.
func TestCheckRocketMQPullOffsets(t *testing.T) {
	store := t.TempDir()
	if err := os.CopyFS(filepath.Join(store, "config"), os.DirFS(filepath.Join("..", "..", "migrate", "rmqconfig", "testdata", "rocksdb-v2-lmq", "config"))); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(store, "commitlog"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := mustKvdump(t, "--store", store, "check-rocketmq", "--enable-lmq")
	for _, want := range []string{"3 consumer offsets", "1 pull offsets of light message queues (config v2) as their groups' pop positions",
		"not carried over: rdb: 1 pull offsets of topics other than light message queues"} {
		if !strings.Contains(out, want) {
			t.Errorf("with --enable-lmq, the report lacks %q:\n%s", want, out)
		}
	}
	var r rocketmqCheck
	if err := json.Unmarshal([]byte(mustKvdump(t, "--store", store, "--json", "check-rocketmq")), &r); err != nil {
		t.Fatal(err)
	}
	if r.PopPositions != 0 || r.Offsets != 1 {
		t.Errorf("without --enable-lmq: %d pop positions and %d consumer offsets, want none and GroupN's", r.PopPositions, r.Offsets)
	}
}
