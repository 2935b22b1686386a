package broker

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/remoting"
)

// useRocksDBConsumeQueue replaces the fixture store's file consumequeue/
// with migrate/rocksdbcq/testdata/<name>: the same queues in RocketMQ
// 5.3's RocksDB ConsumeQueue, written by ldb (that directory's gen.sh).
func useRocksDBConsumeQueue(t *testing.T, store, name string) {
	t.Helper()
	dir := filepath.Join(store, "consumequeue")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "migrate", "rocksdbcq", "testdata", name))); err != nil {
		t.Fatal(err)
	}
}

// A store with RocketMQ's RocksDB ConsumeQueue whose retention deleted
// every CommitLog segment holding TopicB's records: the queues keep the
// offsets the RocksDB ConsumeQueue's max records give. Before rocketkv
// read it, TopicB/0 restarted at 0, below GroupB's imported offset 9.
// Each layout (storeType=kv, storeType=file, double-write) starts the
// queues there.
func TestOpenRocketMQStoreWithRocksDBConsumeQueueAfterRetention(t *testing.T) {
	for _, storeType := range []string{"kv", "file", "double-write"} {
		t.Run(storeType, func(t *testing.T) { testRocksDBConsumeQueueAfterRetention(t, storeType) })
	}
}

func testRocksDBConsumeQueueAfterRetention(t *testing.T, storeType string) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	useRocksDBConsumeQueue(t, store, "consumequeue-4.9.8")
	for _, f := range []string{"00000000000000000000", "00000000000000016384", "00000000000000032768"} {
		if err := os.Remove(filepath.Join(store, "commitlog", f)); err != nil {
			t.Fatal(err)
		}
	}
	settings := map[string]string{"mappedFileSizeCommitLog": "16384", "autoCreateTopicEnable": "false"}
	switch storeType {
	case "file":
		settings["storeType"] = "file"
	case "double-write":
		settings["rocksdbCQDoubleWriteEnable"] = "true"
	}
	b := startTestBrokerAt(t, store, settings)
	c := b.client(nil)
	if r := call(t, c, remoting.GetMinOffset, map[string]string{"topic": "TopicB", "queueId": "0"}, nil); header(t, r, "offset") != 9 {
		t.Fatalf("TopicB/0 min offset %v, want 9 (the RocksDB ConsumeQueue's max record 8, plus one)", r.ExtFields)
	}
	if r := call(t, c, remoting.GetMaxOffset, map[string]string{"topic": "TopicB", "queueId": "1"}, nil); header(t, r, "offset") != 13 {
		t.Fatalf("TopicB/1 max offset %v, want 13", r.ExtFields)
	}
	if resp := mustSend(t, c, "TopicB", 0, "after the move", ""); header(t, resp, "queueOffset") != 9 {
		t.Fatalf("a new TopicB/0 message got queue offset %s, want 9", resp.ExtFields["queueOffset"])
	}
	b.caughtUp()
	r := call(t, c, remoting.PullMessage, pullReq("GroupB", "TopicB", 0, 9, 0, 0, "*"), nil)
	if got := decodeRecords(t, r.Body); r.Code != remoting.Success || len(got) != 1 || string(got[0].Body) != "after the move" {
		t.Fatalf("GroupB's pull at its offset 9: %d %q, %d records", r.Code, r.Remark, len(got))
	}
	// The numbering survives a restart (the seeds were made durable).
	b.stop()
	b = startTestBrokerAt(t, store, settings)
	if r := call(t, b.client(nil), remoting.GetMaxOffset, map[string]string{"topic": "TopicB", "queueId": "0"}, nil); header(t, r, "offset") != 10 {
		t.Fatalf("TopicB/0 max offset after a restart %v, want 10", r.ExtFields)
	}
}

// A topic RocketMQ deleted (its units range-deleted and its offset
// records deleted in the RocksDB ConsumeQueue) and removed from the
// config does not come back with its records from the CommitLog, as with
// the file ConsumeQueue; the other topics keep every message.
func TestOpenRocketMQStoreWithRocksDBConsumeQueueDropsADeletedTopic(t *testing.T) {
	const long = "LongTopic_klmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvw"
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	useRocksDBConsumeQueue(t, store, "consumequeue-4.9.8-long-deleted")
	removeTopicFromConfig(t, store, long)
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384"})
	b.caughtUp()
	for q := range int32(2) {
		if hi, err := b.cqs.MaxOffset(long, q); err != nil || hi != 0 {
			t.Errorf("deleted topic's queue %d came back with max offset %d %v", q, hi, err)
		}
	}
	for q, want := range []int64{16, 16, 18, 19} {
		if hi, err := b.cqs.MaxOffset("TopicA", int32(q)); err != nil || hi != want {
			t.Errorf("TopicA/%d max offset %d %v, want %d", q, hi, err, want)
		}
	}
}

// A consumequeue/ that looks like RocksDB (CURRENT, a MANIFEST) but cannot
// be read stops the first open with an error that says how to go on and
// what a start without it loses.
func TestAnUnreadableRocksDBConsumeQueueStopsTheFirstOpen(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "consumequeue")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"CURRENT", "MANIFEST-000005", "000004.sst", "OPTIONS-000007", "LOG"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := takeOverRocketMQQueues(nil, nil, root, 300000, 0, 0, 0, "", zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "move it aside") || !strings.Contains(err.Error(), "cleanUnusedTopic drops them") {
		t.Fatalf("first open over a damaged RocksDB consumequeue: %v, want an error saying to move it aside", err)
	}
}

// A store that kept its config in RocksDB (storeType=defaultRocksDB,
// config v1: config/topics/, subscriptionGroups/, consumerOffsets/, as ldb
// wrote them from the fixture's JSON, migrate/rmqconfig/testdata) opens
// without mqadmin rocksDBConfigToJson: topics, groups and offsets come
// from the databases, the offsets' last batch from their WAL.
func TestOpenRocketMQStoreWithRocksDBConfig(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	for _, name := range []string{"topics.json", "topics.json.bak", "subscriptionGroup.json", "subscriptionGroup.json.bak", "consumerOffset.json"} {
		if err := os.Remove(filepath.Join(store, "config", name)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if err := os.CopyFS(filepath.Join(store, "config"), os.DirFS(filepath.Join("..", "migrate", "rmqconfig", "testdata", "rocksdb-v1", "config"))); err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "autoCreateTopicEnable": "false"})
	c := b.client(nil)
	if got := committedOffset(t, c, "GroupA", "TopicA", 0); got != 15 {
		t.Errorf("GroupA on TopicA/0: committed %d, want the RocksDB config's 15", got)
	}
	if got := committedOffset(t, c, "GroupB", "TopicB", 1); got != 13 {
		t.Errorf("GroupB on TopicB/1: committed %d, want 13 (in the consumer offsets' WAL)", got)
	}
	if tc, ok, err := b.topicConfig("TopicR"); err != nil || !ok || tc.ReadQueueNums != 2 {
		t.Errorf("TopicR (only in the RocksDB config): %+v %v %v", tc, ok, err)
	}
	if gc, err := b.groupConfig("GroupR", false); err != nil || gc.GroupName != "GroupR" || gc.RetryMaxTimes != 5 {
		t.Errorf("GroupR (only in the RocksDB config): %+v %v", gc, err)
	}
}

// A store with config v2 (configManagerVersion=v2: config/rdb/, written
// by ldb, migrate/rmqconfig/testdata/rocksdb-v2) opens from that database,
// the stale JSON files beside it ignored as RocketMQ ignores them.
func TestOpenRocketMQStoreWithRocksDBConfigV2(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	if err := os.CopyFS(filepath.Join(store, "config"), os.DirFS(filepath.Join("..", "migrate", "rmqconfig", "testdata", "rocksdb-v2", "config"))); err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "autoCreateTopicEnable": "false"})
	c := b.client(nil)
	if got := committedOffset(t, c, "GroupA", "TopicA", 0); got != 15 {
		t.Errorf("GroupA on TopicA/0: committed %d, want config v2's 15 (consumerOffset.json beside it says 5)", got)
	}
	if tc, ok, err := b.topicConfig("TopicR"); err != nil || !ok || tc.ReadQueueNums != 2 {
		t.Errorf("TopicR (only in config v2): %+v %v %v", tc, ok, err)
	}
}

// With both of RocketMQ's ConsumeQueues in consumequeue/ (its double
// write, or a file one left behind), a queue keeps what either keeps: the
// earlier beginning (a RocksDB ConsumeQueue added to an old store starts
// at the queue's offset then, and the older records the file one holds
// are not left out), the higher start of a queue whose records retention
// deleted, no start for a queue either holds records of, every topic.
func TestMergeQueueTakeoversKeepsWhatEitherKeeps(t *testing.T) {
	file := queueTakeover{
		starts:     []kvindex.QueueStart{{Topic: "T", QueueID: 2, Offset: 40}, {Topic: "U", QueueID: 0, Offset: 7}},
		firsts:     map[string]int64{"T": 100},
		begins:     map[string]map[int32]kvindex.QueueBegin{"T": {0: {Phy: 100, Offset: 0}, 1: {Phy: 300, Offset: 5}}},
		topics:     []string{"T", "U"},
		dispatched: 900,
	}
	rocks := queueTakeover{
		starts:     []kvindex.QueueStart{{Topic: "T", QueueID: 2, Offset: 60}, {Topic: "T", QueueID: 1, Offset: 9}},
		firsts:     map[string]int64{"T": 500, "V": 700},
		begins:     map[string]map[int32]kvindex.QueueBegin{"T": {0: {Phy: 500, Offset: 20}}, "V": {0: {Phy: 700, Offset: 3}}},
		topics:     []string{"T", "V"},
		dispatched: 1200,
	}
	m := mergeQueueTakeovers(file, rocks)
	wantBegins := map[string]map[int32]kvindex.QueueBegin{
		"T": {0: {Phy: 100, Offset: 0}, 1: {Phy: 300, Offset: 5}},
		"V": {0: {Phy: 700, Offset: 3}},
	}
	if !reflect.DeepEqual(m.begins, wantBegins) {
		t.Errorf("begins %v, want %v", m.begins, wantBegins)
	}
	if want := map[string]int64{"T": 100, "V": 700}; !reflect.DeepEqual(m.firsts, want) {
		t.Errorf("firsts %v, want %v", m.firsts, want)
	}
	if want := []kvindex.QueueStart{{Topic: "T", QueueID: 2, Offset: 60}, {Topic: "U", QueueID: 0, Offset: 7}}; !reflect.DeepEqual(m.starts, want) {
		t.Errorf("starts %v, want %v (T/1 has records in the file ConsumeQueue)", m.starts, want)
	}
	if got := slices.Compact(slices.Sorted(slices.Values(m.topics))); !slices.Equal(got, []string{"T", "U", "V"}) {
		t.Errorf("topics %v", got)
	}
	if m.dispatched != 1200 {
		t.Errorf("dispatched %d, want 1200", m.dispatched)
	}
}

// A store with RocketMQ's file ConsumeQueue and, beside it, a RocksDB one
// that no longer holds a topic the file one still holds (as a RocksDB
// ConsumeQueue that started after a topic's records, or a file one left
// behind) keeps what either holds: the topic's records stay, where the
// RocksDB one alone would drop them as a deleted topic's
// (TestOpenRocketMQStoreWithRocksDBConsumeQueueDropsADeletedTopic), and
// the other topics keep every message.
func TestOpenRocketMQStoreWithBothConsumeQueues(t *testing.T) {
	const long = "LongTopic_klmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvw"
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	if err := os.CopyFS(filepath.Join(store, "consumequeue"), os.DirFS(filepath.Join("..", "migrate", "rocksdbcq", "testdata", "consumequeue-4.9.8-long-deleted"))); err != nil {
		t.Fatal(err)
	}
	removeTopicFromConfig(t, store, long)
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384"})
	b.caughtUp()
	for q := range int32(2) {
		if hi, err := b.cqs.MaxOffset(long, q); err != nil || hi == 0 {
			t.Errorf("%s/%d, held by the file ConsumeQueue: max offset %d %v, want its records kept", long, q, hi, err)
		}
	}
	for q, want := range []int64{16, 16, 18, 19} {
		if hi, err := b.cqs.MaxOffset("TopicA", int32(q)); err != nil || hi != want {
			t.Errorf("TopicA/%d max offset %d %v, want %d", q, hi, err, want)
		}
	}
}

// staleFileQueueWithRocksDBBeside makes the fixture store hold RocketMQ's
// file ConsumeQueue left behind and its RocksDB one beside it (as after a
// move to storeType=defaultRocksDB): TopicB/0's file stops at offset 5
// while the RocksDB one goes on to 9, and retention deleted the CommitLog
// segments that held TopicB's records (those of offsets 5..8 among them).
func staleFileQueueWithRocksDBBeside(t *testing.T) string {
	t.Helper()
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	if err := os.CopyFS(filepath.Join(store, "consumequeue"), os.DirFS(filepath.Join("..", "migrate", "rocksdbcq", "testdata", "consumequeue-4.9.8"))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(store, "consumequeue", "TopicB", "0", "00000000000000000000")
	units, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	clear(units[5*20:])
	if err := os.WriteFile(path, units, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"00000000000000000000", "00000000000000016384", "00000000000000032768"} {
		if err := os.Remove(filepath.Join(store, "commitlog", f)); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

// With a file ConsumeQueue left behind beside RocketMQ's RocksDB one, a
// queue whose file ends (5) below the RocksDB one's offsets while the
// CommitLog no longer holds the records between cannot be served by the
// file layout as RocketMQ's files are: storeType=file numbered the next
// message 5, below the consumers' offset 9, and the double write put it
// at 5 in the files while the Pebble ConsumeQueue gave it 9. The start
// refuses it, naming the setting and the queue; a start as the refusal
// says then numbers the next message 9: with storeType=kv, or with the
// file ConsumeQueue's topic directories moved out (the file layout is
// then written from the CommitLog, seeded by the RocksDB one).
func TestStaleFileConsumeQueueBesideTheRocksDBOneRefusesTheFileLayout(t *testing.T) {
	for _, tc := range []struct {
		name, setting, value string
	}{
		{"file", "storeType", "file"},
		{"double-write", "rocksdbCQDoubleWriteEnable", "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := staleFileQueueWithRocksDBBeside(t)
			settings := map[string]string{"storePathRootDir": store, "listenPort": "0", "brokerIP1": "127.0.0.1",
				"mappedFileSizeCommitLog": "16384", tc.setting: tc.value}
			err := startError(t, settings)
			if err == nil || !strings.Contains(err.Error(), tc.setting+"="+tc.value) || !strings.Contains(err.Error(), "TopicB/0 (files end at 5") {
				t.Fatalf("start with %s=%s over a stale file ConsumeQueue: %v, want a refusal naming the setting and TopicB/0", tc.setting, tc.value, err)
			}
			next := map[string]string{"mappedFileSizeCommitLog": "16384"}
			if tc.name == "file" {
				moveFileQueuesAside(t, store)
				next["storeType"] = "file"
			}
			b := startTestBrokerAt(t, store, next)
			if resp := mustSend(t, b.client(nil), "TopicB", 0, "after the move", ""); header(t, resp, "queueOffset") != 9 {
				t.Fatalf("%v after the refusal: a new TopicB/0 message got queue offset %s, want 9", next, resp.ExtFields["queueOffset"])
			}
		})
	}
}

// moveFileQueuesAside moves the topic directories of the store's file
// ConsumeQueue out of consumequeue/, leaving its RocksDB files there.
func moveFileQueuesAside(t *testing.T, store string) {
	t.Helper()
	dir := filepath.Join(store, "consumequeue")
	aside := filepath.Join(store, "consumequeue-files")
	if err := os.Mkdir(aside, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(aside, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// With both of RocketMQ's ConsumeQueues, a queue the files lack (a topic
// created after the move to the RocksDB one) whose records retention
// deleted stands, in the file layout, where the RocksDB one says, as
// with the RocksDB one alone: storeType=file numbered TopicB/0's next
// message 0 and TopicB/1 stood at 0, below GroupB's offsets.
func TestFileLayoutOverBothConsumeQueuesSeedsTheQueuesTheFilesLack(t *testing.T) {
	store := staleFileQueueWithRocksDBBeside(t)
	if err := os.RemoveAll(filepath.Join(store, "consumequeue", "TopicB")); err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "storeType": "file"})
	c := b.client(nil)
	if r := call(t, c, remoting.GetMaxOffset, map[string]string{"topic": "TopicB", "queueId": "1"}, nil); header(t, r, "offset") != 13 {
		t.Errorf("TopicB/1 max offset %v, want the RocksDB ConsumeQueue's 13", r.ExtFields)
	}
	if resp := mustSend(t, c, "TopicB", 0, "after the move", ""); header(t, resp, "queueOffset") != 9 {
		t.Fatalf("a new TopicB/0 message got queue offset %s, want 9", resp.ExtFields["queueOffset"])
	}
}
