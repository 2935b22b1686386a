package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/migrate/cqcompare"
	"github.com/rocketkv/rocketkv/remoting"
)

// CommitLog offsets of the 4.9.8 fixture's transactional halves (its
// README and expected.json): tx-key-0 committed (a committed copy and an
// op), tx-key-1 rolled back (an op only), tx-key-2 left open.
const (
	fixtureHalfCommitted  = 43106
	fixtureHalfRolledBack = 43536
	fixtureHalfOpen       = 43966
)

// queryKey returns the messages of a topic with a key.
func queryKey(t *testing.T, c *remoting.Client, topic, key string) []commitlog.Message {
	t.Helper()
	r := call(t, c, remoting.QueryMessage, map[string]string{"topic": topic, "key": key, "maxNum": "32",
		"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)}, nil)
	switch r.Code {
	case remoting.Success:
		return decodeRecords(t, r.Body)
	case remoting.QueryNotFound:
		return nil
	}
	t.Fatalf("query %s/%s: %d %s", topic, key, r.Code, r.Remark)
	return nil
}

// TestOpenRocketMQStore opens a store written by Apache RocketMQ 4.9.8:
// its topics, groups, consumer offsets and delay progress come from its
// config files, and the transactions it ended stay ended.
func TestOpenRocketMQStore(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	var mu sync.Mutex
	var checked []string
	// The fixture's halves were born when it was written, longer ago than
	// the default fileReservedTime (72 h): RocketMQ's checker, and so
	// rocketkv's, would give the open one up without a check. The longest
	// fileReservedTime keeps it checked.
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "autoCreateTopicEnable": "false",
		"fileReservedTime": "1048576"})
	producer := b.client(func(_ context.Context, cmd *remoting.Command) *remoting.Command {
		if cmd.Code == remoting.CheckTransactionState {
			mu.Lock()
			checked = append(checked, cmd.ExtFields["commitLogOffset"])
			mu.Unlock()
		}
		return nil
	})
	heartbeat(t, producer, heartbeatBody("10.0.0.3@tx", "TxProducerGroup", "", nil))
	c := b.client(nil)

	// Topics and groups as RocketMQ kept them.
	for name, queues := range map[string]int{"TopicA": 4, "TopicB": 2, "SCHEDULE_TOPIC_XXXX": 18} {
		tc, ok, err := b.topicConfig(name)
		if err != nil || !ok || tc.ReadQueueNums != queues || tc.WriteQueueNums != queues || tc.Perm != 6 {
			t.Errorf("topic %s: %+v %v %v, want %d queues, perm 6", name, tc, ok, err, queues)
		}
	}
	for g, retries := range map[string]int{"GroupA": 16, "GroupB": 3} {
		if gc, err := b.groupConfig(g, false); err != nil || gc.GroupName != g || gc.RetryMaxTimes != retries {
			t.Errorf("group %s: %+v %v, want retryMaxTimes %d", g, gc, err, retries)
		}
	}
	// Consumers continue where they were.
	for q, want := range []int64{5, 6, 7, 8} {
		if got := committedOffset(t, c, "GroupA", "TopicA", int32(q)); got != want {
			t.Errorf("GroupA on TopicA/%d: committed %d, want %d", q, got, want)
		}
	}
	if got := committedOffset(t, c, "GroupB", "TopicB", 1); got != 13 {
		t.Errorf("GroupB on TopicB/1: committed %d, want 13", got)
	}

	// The delay-1s message was delivered by RocketMQ (delayOffset.json
	// {1:1}): once in TopicA, not again. The 2 h one came due since the
	// fixture was written: the scheduler delivers it to TopicB, once.
	waitFor(t, "the 2 h delay message delivered", func() bool { return len(queryKey(t, c, "TopicB", "delay-2h")) > 0 })
	time.Sleep(300 * time.Millisecond) // three scheduler ticks
	if n := len(queryKey(t, c, "TopicA", "delay-1s")); n != 1 {
		t.Errorf("delay-1s is %d times in TopicA, want once", n)
	}
	if n := len(queryKey(t, c, "TopicB", "delay-2h")); n != 1 {
		t.Errorf("delay-2h is %d times in TopicB, want once", n)
	}

	// Transactions: only the open one is asked about and stays open.
	waitFor(t, "the checker's first pass", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(checked) > 0
	})
	var open []int64
	if err := b.db.Transactions().OpenHalves(func(h kvindex.TxnHalf) bool { open = append(open, h.PhyOffset); return true }); err != nil {
		t.Fatal(err)
	}
	if len(open) != 1 || open[0] != fixtureHalfOpen {
		t.Errorf("open halves %v, want only %d", open, fixtureHalfOpen)
	}
	mu.Lock()
	for _, off := range checked {
		if off != strconv.Itoa(fixtureHalfOpen) {
			t.Errorf("the checker asked about the half at %s, which RocketMQ ended", off)
		}
	}
	mu.Unlock()
	if e, ok, _ := b.db.Transactions().Ended(fixtureHalfCommitted); !ok || e.State != kvindex.TxnCommit {
		t.Errorf("committed transaction: %+v %v", e, ok)
	}
	// A late commit of the rolled-back transaction is refused, as on a
	// broker that rolled it back itself (its op message names it and no
	// committed message does), and stores nothing.
	h := sentHalf{uniq: "C0A8011410921B6D3586000186F60056", phy: fixtureHalfRolledBack, queueOffset: 1}
	before := len(queryKey(t, c, "TopicA", "tx-key-1"))
	if r := endTxn(t, c, h, "TxProducerGroup", 8, true); r.Code != remoting.SystemError || !strings.Contains(r.Remark, "already ended") {
		t.Fatalf("commit of a transaction RocketMQ rolled back: %d %s", r.Code, r.Remark)
	}
	if r := endTxn(t, c, h, "TxProducerGroup", 12, true); r.Code != remoting.Success {
		t.Fatalf("rollback of a transaction RocketMQ rolled back: %d %s", r.Code, r.Remark)
	}
	b.caughtUp()
	if after := len(queryKey(t, c, "TopicA", "tx-key-1")); before != 0 || after != 0 {
		t.Errorf("tx-key-1 in TopicA: %d before, %d after a late commit; RocketMQ rolled it back", before, after)
	}

	// The import happens once: a topic changed after it is kept.
	tc, _, _ := b.topicConfig("TopicB")
	tc.WriteQueueNums, tc.ReadQueueNums = 3, 3
	if err := b.topics.put(tc); err != nil {
		t.Fatal(err)
	}
	b.stop()
	b = startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384"})
	if tc, _, _ := b.topicConfig("TopicB"); tc.WriteQueueNums != 3 {
		t.Errorf("after a restart TopicB has %d queues: the config was imported again over the change", tc.WriteQueueNums)
	}
}

// The fixture's open half, born when the fixture was written, is older
// than the default fileReservedTime (72 h): as RocketMQ's checker would,
// rocketkv's gives it up into TRANS_CHECK_MAX_TIME_TOPIC without asking
// its producer.
func TestOpenRocketMQStoreGivesUpAnOpenHalfOlderThanFileReservedTime(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	var asked atomic.Int32
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "autoCreateTopicEnable": "false"})
	producer := b.client(func(_ context.Context, cmd *remoting.Command) *remoting.Command {
		if cmd.Code == remoting.CheckTransactionState {
			asked.Add(1)
		}
		return nil
	})
	heartbeat(t, producer, heartbeatBody("10.0.0.3@tx", "TxProducerGroup", "", nil))
	waitFor(t, "the old open half given up", func() bool {
		e, ended, err := b.db.Transactions().Ended(fixtureHalfOpen)
		return err == nil && ended && e.State == kvindex.TxnDiscarded
	})
	if n := asked.Load(); n != 0 {
		t.Fatalf("the producer was asked %d times about a half older than fileReservedTime", n)
	}
}

// TestOpenRocketMQStoreSkipsDeliveredTimers: in a store whose timer
// checkpoint (RocketMQ 5's config/timercheck) says RocketMQ had taken in
// the parked messages below lastTimerQueueOffset and delivered those due
// before lastReadTimeMs, only the others wait for delivery when the index
// is built from the CommitLog: a message RocketMQ had not taken in waits,
// however early it is due (RocketMQ delivers it when it restarts).
func TestOpenRocketMQStoreSkipsDeliveredTimers(t *testing.T) {
	for _, tc := range []struct {
		takenIn int64 // lastTimerQueueOffset
		want    int   // parked messages that wait
	}{
		{takenIn: 2, want: 1}, // both taken in: the early one was delivered
		{takenIn: 0, want: 2}, // none taken in: both wait
	} {
		t.Run(fmt.Sprint("lastTimerQueueOffset=", tc.takenIn), func(t *testing.T) {
			testOpenRocketMQStoreTimers(t, tc.takenIn, tc.want)
		})
	}
}

func testOpenRocketMQStoreTimers(t *testing.T, takenIn int64, want int) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	c := b.client(nil)
	now := time.Now()
	early, late := now.Add(time.Hour).UnixMilli(), now.Add(2*time.Hour).UnixMilli()
	mustSend(t, c, "TmM", 0, "delivered by RocketMQ", "TIMER_DELIVER_MS\x01"+strconv.FormatInt(early, 10)+"\x02")
	mustSend(t, c, "TmM", 0, "still waiting", "TIMER_DELIVER_MS\x01"+strconv.FormatInt(late, 10)+"\x02")
	b.caughtUp()
	b.stop()

	// What a RocketMQ store holds: the CommitLog and config/, no index.
	if err := os.RemoveAll(filepath.Join(store, kvindex.DirName)); err != nil {
		t.Fatal(err)
	}
	page := make([]byte, 4096)
	binary.BigEndian.PutUint64(page, uint64(now.Add(90*time.Minute).UnixMilli()))
	binary.BigEndian.PutUint64(page[16:], uint64(takenIn))
	writeRocketMQConfig(t, store, "timercheck", string(page))
	b = startTestBrokerAt(t, store, nil)
	b.caughtUp()
	due, err := b.db.Timers().Due(now.Add(3*time.Hour).UnixMilli(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != want || due[len(due)-1].DeliverMs > late || due[len(due)-1].DeliverMs < late-1000 {
		t.Fatalf("timer index after the rebuild: %+v, want %d entries, the last due at %d", due, want, late)
	}
}

// A RocketMQ store whose config file and its backup are both unreadable
// does not open: Start names the file, and nothing is recorded as
// imported, so once the file is mended the next open imports it.
func TestOpenRocketMQStoreRefusesAnUnreadableConfig(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	offsets := filepath.Join(store, "config", "consumerOffset.json")
	good, err := os.ReadFile(offsets)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(offsets, []byte(`{"offsetTable":{"TopicA@GroupA":{0:`), 0o644); err != nil {
		t.Fatal(err)
	}
	err = startError(t, map[string]string{"storePathRootDir": store, "listenPort": "0",
		"brokerIP1": "127.0.0.1", "mappedFileSizeCommitLog": "16384"})
	if err == nil || !strings.Contains(err.Error(), "consumerOffset.json") {
		t.Fatalf("start over a torn consumerOffset.json: %v, want an error naming the file", err)
	}

	if err := os.WriteFile(offsets, good, 0o644); err != nil {
		t.Fatal(err)
	}
	mended := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384"})
	if got := committedOffset(t, mended.client(nil), "GroupA", "TopicA", 0); got != 5 {
		t.Fatalf("GroupA on TopicA/0 after the mended open: committed %d, want 5", got)
	}
}

// A RocketMQ store with LMQ offsets opens with a warning naming them,
// since they do not move with the store; its static topics' mappings
// (topicQueueMapping.json) do.
func TestOpenRocketMQStoreWarnsWhatIsNotCarried(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	writeRocketMQConfig(t, store, "topicQueueMapping.json", `{"topicQueueMappingInfoMap":{"StaticA":{"bname":"broker-a","epoch":3,"topic":"StaticA","totalQueues":1}}}`)
	writeRocketMQConfig(t, store, "lmqConsumerOffset.json", `{"lmqOffsetTable":{"%LMQ%x@g":4}}`)
	logs := &testutil.SyncBuffer{}
	tb := startTestBrokerWith(t, store, map[string]string{"mappedFileSizeCommitLog": "16384"}, func(b *Broker) {
		b.root = zerolog.New(logs)
	})
	if d, ok, err := tb.mappings.Get("StaticA"); err != nil || !ok || d.Epoch != 3 || d.Bname != "broker-a" {
		t.Errorf("the static topic's mapping was not imported: %+v %v %v", d, ok, err)
	}
	for _, want := range []string{"1 consumer offsets (of light message queues"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no warning with %q in the broker's log:\n%s", want, logs.String())
		}
	}
}

// With enableLmq a RocketMQ store's lmqConsumerOffset.json is where the
// offsets come from, light message queues' among them, as RocketMQ with
// enableLmq loads them.
func TestOpenRocketMQStoreWithLMQOffsets(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	writeRocketMQConfig(t, store, "lmqConsumerOffset.json", `{"offsetTable":{"TopicA@GroupA":{0:2}},"lmqOffsetTable":{"%LMQ%x@%LMQ%g":4}}`)
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "enableLmq": "true"})
	c := b.client(nil)
	if got := committedOffset(t, c, "%LMQ%g", "%LMQ%x", 0); got != 4 {
		t.Errorf("light message queue offset after the import: %d, want 4", got)
	}
	if got := committedOffset(t, c, "GroupA", "TopicA", 0); got != 2 {
		t.Errorf("GroupA on TopicA/0: %d, want lmqConsumerOffset.json's 2", got)
	}
}

// A RocketMQ store whose retention deleted every CommitLog segment that
// held some queues' records (TopicB's, the delay level's): the queues keep
// RocketMQ's offsets. Before, they were rebuilt empty and numbered new
// messages from 0 again: the group's committed offset 9 pointed past the
// new queue's end, and a new delayed message, parked below the level's
// imported progress, was never delivered.
func TestOpenRocketMQStoreAfterRetention(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	for _, f := range []string{"00000000000000000000", "00000000000000016384", "00000000000000032768"} {
		if err := os.Remove(filepath.Join(store, "commitlog", f)); err != nil {
			t.Fatal(err)
		}
	}
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "autoCreateTopicEnable": "false"})
	c := b.client(nil)
	if got := committedOffset(t, c, "GroupB", "TopicB", 0); got != 9 {
		t.Fatalf("GroupB's imported offset on TopicB/0 is %d, the fixture's is 9", got)
	}
	if r := call(t, c, remoting.GetMinOffset, map[string]string{"topic": "TopicB", "queueId": "0"}, nil); header(t, r, "offset") != 9 {
		t.Fatalf("TopicB/0 min offset %v, want 9 (RocketMQ's ConsumeQueue end)", r.ExtFields)
	}
	if resp := mustSend(t, c, "TopicB", 0, "after the move", ""); header(t, resp, "queueOffset") != 9 {
		t.Fatalf("a new TopicB/0 message got queue offset %s, want 9", resp.ExtFields["queueOffset"])
	}
	b.caughtUp()
	r := call(t, c, remoting.PullMessage, pullReq("GroupB", "TopicB", 0, 9, 0, 0, "*"), nil)
	if got := decodeRecords(t, r.Body); r.Code != remoting.Success || len(got) != 1 || string(got[0].Body) != "after the move" {
		t.Fatalf("GroupB's pull at its offset 9: %d %q, %d records", r.Code, r.Remark, len(got))
	}
	mustSend(t, c, "TopicB", 1, "delayed after the move", "DELAY\x011\x02KEYS\x01dam\x02") // 1 s
	deadline := time.Now().Add(15 * time.Second)
	for len(queryKey(t, c, "TopicB", "dam")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a delayed message sent after the move was not delivered in 15 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A RocketMQ consumequeue that cannot be read stops the first open with
// an error that says how to go on without it and what that start loses
// (queues retention emptied, the list of deleted topics), and records nothing as
// imported: the next open, with the directory moved aside, imports.
func TestOpenRocketMQStoreRefusesAnUnreadableConsumeQueue(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	bad := filepath.Join(store, "consumequeue", "zz-torn", "0")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	// 7 units where every other file of the store holds 10.
	if err := os.WriteFile(filepath.Join(bad, "00000000000000000000"), make([]byte, 7*20), 0o644); err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{"storePathRootDir": store, "listenPort": "0", "brokerIP1": "127.0.0.1", "mappedFileSizeCommitLog": "16384"}
	if err := startError(t, settings); err == nil || !strings.Contains(err.Error(), "move it aside") || !strings.Contains(err.Error(), "cleanUnusedTopic drops them") {
		t.Fatalf("first open over an unreadable consumequeue: %v", err)
	}
	if err := os.Rename(filepath.Join(store, "consumequeue"), filepath.Join(store, "consumequeue.aside")); err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384"})
	if got := committedOffset(t, b.client(nil), "GroupB", "TopicB", 0); got != 9 {
		t.Fatalf("after moving the consumequeue aside, GroupB's imported offset is %d, want 9", got)
	}
}

// A RocketMQ store whose topics.json lacks a topic its CommitLog holds
// messages of, and counts fewer queues of another than it has, opens with
// a warning naming both (found after the first open indexed the
// CommitLog: consumequeue/ is moved aside here), and the messages stay
// readable once the topic is created.
func TestOpenRocketMQStoreWarnsOfUnroutedQueues(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	settleFixtureDelay(t, store)
	if err := os.RemoveAll(filepath.Join(store, "consumequeue")); err != nil {
		t.Fatal(err)
	}
	editRocketMQTopics(t, store, func(table map[string]map[string]any) {
		delete(table, "TopicB")
		// Written to 4 queues, read from 2: queues 2 and 3 reach no consumer.
		table["TopicA"]["readQueueNums"], table["TopicA"]["writeQueueNums"] = 2, 4
	})

	logs := &testutil.SyncBuffer{}
	b := startTestBrokerWith(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "autoCreateTopicEnable": "false"}, func(b *Broker) {
		b.root = zerolog.New(logs)
	})
	for _, want := range []string{"no topic config: TopicB (2 queues)", "past their config's queue count: TopicA (4 queues, config 2)"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no warning with %q in the broker's log:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "LongTopic") || strings.Contains(logs.String(), "SCHEDULE_TOPIC") {
		t.Errorf("a routed or system topic named as unrouted:\n%s", logs.String())
	}
	c := b.client(nil)
	createTopic(t, c, "TopicB", 2, 2)
	// The fixture's README: 16 messages, a compressed one and a batch of 5.
	if got := maxOffsetOf(t, c, "TopicB", 0) + maxOffsetOf(t, c, "TopicB", 1); got != 22 {
		t.Errorf("TopicB holds %d messages once created, want the fixture's 22", got)
	}
}

// Topics RocketMQ deleted: its DeleteTopic drops a topic's config,
// ConsumeQueue and queue offsets, and leaves its records in the CommitLog
// until retention. Created again (TopicB), the topic numbers its messages
// from 0 again; not created again (the long topic), it is gone. The first
// open rebuilds the queues from the CommitLog without the deleted
// records: the new messages keep their offsets (where the consumers'
// offsets point), and the deleted ones do not come back, in either
// layout.
func TestOpenRocketMQStoreWithDeletedTopics(t *testing.T) {
	const long = "LongTopic_klmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvw"
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	settleFixtureDelay(t, store)
	// The deletions and the new messages as RocketMQ leaves them on disk:
	// storeType=file writes RocketMQ's consumequeue/ (a deletion drops
	// the topic's directory there), the index is then removed and the
	// topic that is not created again leaves topics.json.
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "storeType": "file"})
	c := b.client(nil)
	for _, topic := range []string{"TopicB", long} {
		if r := call(t, c, remoting.DeleteTopicInBroker, map[string]string{"topic": topic}, nil); r.Code != remoting.Success {
			t.Fatalf("delete %s: %d %s", topic, r.Code, r.Remark)
		}
	}
	for i := range 3 {
		if r := mustSend(t, c, "TopicB", 0, fmt.Sprintf("new TopicB #%d", i), ""); header(t, r, "queueOffset") != int64(i) {
			t.Fatalf("message %d of the new TopicB got queue offset %s", i, r.ExtFields["queueOffset"])
		}
	}
	b.caughtUp()
	b.stop()
	if err := os.RemoveAll(filepath.Join(store, kvindex.DirName)); err != nil {
		t.Fatal(err)
	}
	removeTopicFromConfig(t, store, long)
	check := func(t *testing.T, b *testBroker) {
		t.Helper()
		c := b.client(nil)
		for q, want := range []int64{3, 0} {
			if hi, err := b.cqs.MaxOffset("TopicB", int32(q)); err != nil || hi != want {
				t.Errorf("TopicB/%d max offset %d %v, want %d", q, hi, err, want)
			}
		}
		for _, s := range []cq.Store{b.cqs, b.cqMirror} {
			if s == nil {
				continue
			}
			for q := range int32(2) {
				if hi, err := s.MaxOffset(long, q); err != nil || hi != 0 {
					t.Errorf("deleted topic's queue %d came back with max offset %d %v", q, hi, err)
				}
			}
		}
		r := call(t, c, remoting.PullMessage, pullReq("GroupB", "TopicB", 0, 0, 0, 0, "*"), nil)
		got := decodeRecords(t, r.Body)
		if r.Code != remoting.Success || len(got) != 3 {
			t.Fatalf("pull TopicB/0 from 0: %d %q, %d messages, want the 3 new ones", r.Code, r.Remark, len(got))
		}
		for i, m := range got {
			if want := fmt.Sprintf("new TopicB #%d", i); string(m.Body) != want || m.QueueOffset != int64(i) {
				t.Errorf("TopicB/0 at %d: %q at offset %d, want %q", i, m.Body, m.QueueOffset, want)
			}
		}
		if r := mustSend(t, c, "TopicB", 0, "after the move", ""); header(t, r, "queueOffset") != 3 {
			t.Errorf("a message sent after the move got queue offset %s, want 3", r.ExtFields["queueOffset"])
		}
	}
	for _, tc := range []struct {
		name     string
		settings map[string]string
	}{
		{"kv", map[string]string{"mappedFileSizeCommitLog": "16384"}},
		{"file", map[string]string{"mappedFileSizeCommitLog": "16384", "storeType": "file"}},
		{"double-write", map[string]string{"mappedFileSizeCommitLog": "16384", "rocksdbCQDoubleWriteEnable": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testutil.CopyStore(t, store)
			b := startTestBrokerAt(t, s, tc.settings)
			b.caughtUp()
			check(t, b)
			if b.fileCQ != nil && b.kvCQ != nil {
				b.caughtUp()
				r, err := cqcompare.Compare(context.Background(), b.kvCQ, b.fileCQ, [2]string{"kv", "file"}, cqcompare.Options{Bounds: b.disp.QuiescedMinima})
				if err != nil || !r.OK() {
					t.Errorf("layouts after the first open: %v %s", err, r.String())
				}
			}
		})
	}
}

// A queue whose records retention had all deleted and whose consumequeue
// holds an entry past the CommitLog's end (RocketMQ's ConsumeQueue reached
// the disk before a crash the CommitLog's tail did not survive) keeps its
// offsets: the entry is cut as RocketMQ's start cuts it, and the queue
// stands where RocketMQ's ConsumeQueue ends, not at 0 below its
// consumers' offsets.
func TestOpenRocketMQStoreAfterRetentionWithAnEntryPastTheLog(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	for _, f := range []string{"00000000000000000000", "00000000000000016384", "00000000000000032768"} {
		if err := os.Remove(filepath.Join(store, "commitlog", f)); err != nil {
			t.Fatal(err)
		}
	}
	// TopicB/0 holds offsets 0..8 (CommitLog offsets below 49152, gone);
	// unit 9 names a record past the CommitLog's end (53272).
	var unit [20]byte
	binary.BigEndian.PutUint64(unit[:], 53272+64)
	binary.BigEndian.PutUint32(unit[8:], 200)
	f, err := os.OpenFile(filepath.Join(store, "consumequeue", "TopicB", "0", "00000000000000000000"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(unit[:], 9*20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "autoCreateTopicEnable": "false"})
	c := b.client(nil)
	for _, code := range []int32{remoting.GetMinOffset, remoting.GetMaxOffset} {
		if r := call(t, c, code, map[string]string{"topic": "TopicB", "queueId": "0"}, nil); header(t, r, "offset") != 9 {
			t.Errorf("TopicB/0 bounds (request %d): %v, want 9 (RocketMQ's ConsumeQueue end without the entry past the log)", code, r.ExtFields)
		}
	}
	if resp := mustSend(t, c, "TopicB", 0, "after the move", ""); header(t, resp, "queueOffset") != 9 {
		t.Fatalf("a new TopicB/0 message got queue offset %s, want 9 (GroupB's offset)", resp.ExtFields["queueOffset"])
	}
}

// After a crash (the abort file left), RocketMQ's ConsumeQueue may have
// lost a queue's newest entries while another queue's reached the disk;
// RocketMQ's recovery dispatches again from where its scan starts. The
// first open leaves a topic's records out (the topic deleted and created
// again) only below that start: a queue whose entries the crash lost is
// rebuilt whole from the CommitLog.
func TestOpenCrashedRocketMQStoreKeepsQueuesItsConsumeQueueLost(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	// TopicB/0's files were lost; TopicB/1's (from TopicB#1 on) are there.
	if err := os.RemoveAll(filepath.Join(store, "consumequeue", "TopicB", "0")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "abort"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A checkpoint older than every segment: the recovery scan starts at
	// the first one, as RocketMQ's would.
	if err := os.WriteFile(filepath.Join(store, "checkpoint"), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "autoCreateTopicEnable": "false"})
	b.caughtUp()
	for q, want := range []int64{9, 13} {
		lo, err := b.cqs.MinOffset("TopicB", int32(q))
		if err != nil {
			t.Fatal(err)
		}
		hi, err := b.cqs.MaxOffset("TopicB", int32(q))
		if err != nil || lo != 0 || hi != want {
			t.Errorf("TopicB/%d [%d, %d) %v, want [0, %d)", q, lo, hi, err, want)
		}
	}
}

// editRocketMQTopics rewrites the topicConfigTable of a RocketMQ store's
// config/topics.json through edit, each topic's config as a JSON object
// (numbers kept as written), the rest of the file as it was.
func editRocketMQTopics(t *testing.T, store string, edit func(table map[string]map[string]any)) {
	t.Helper()
	path := filepath.Join(store, "config", "topics.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]json.RawMessage
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	var table map[string]map[string]any
	dec := json.NewDecoder(bytes.NewReader(file["topicConfigTable"]))
	dec.UseNumber()
	if err := dec.Decode(&table); err != nil {
		t.Fatal(err)
	}
	edit(table)
	if file["topicConfigTable"], err = json.Marshal(table); err != nil {
		t.Fatal(err)
	}
	if data, err = json.Marshal(file); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// settleFixtureDelay marks the 4.9.8 fixture's 2-hour delay message
// (level 18, for TopicB/1, due since 2026-11-29 14:14 UTC) as delivered in
// the store copy's delayOffset.json, for tests that count TopicB as the
// fixture left it: a broker started on the copy delivers the overdue
// message about 100 ms after its start, which raced their reads (and, on a
// loaded machine, won).
func settleFixtureDelay(t *testing.T, store string) {
	t.Helper()
	path := filepath.Join(store, "config", "delayOffset.json")
	if err := os.WriteFile(path, []byte(`{"offsetTable":{1:1,18:1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
}

// removeTopicFromConfig removes a topic from the config/topics.json of a
// RocketMQ store, as RocketMQ's DeleteTopic does.
func removeTopicFromConfig(t *testing.T, store, topic string) {
	t.Helper()
	editRocketMQTopics(t, store, func(table map[string]map[string]any) {
		if _, ok := table[topic]; !ok {
			t.Fatalf("%s is not in %s/config/topics.json", topic, store)
		}
		delete(table, topic)
	})
}

// The topics the broker creates itself at every start (here the trace
// topic, msgTraceTopicName) are not named as lacking a config: the
// warning is about the configs the broker runs with, which include
// them. TopicB, made the trace topic, gets the one queue the broker
// gives it, so its second queue is named as past the config instead.
func TestOpenRocketMQStoreDoesNotWarnOfTopicsTheBrokerCreates(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	if err := os.RemoveAll(filepath.Join(store, "consumequeue")); err != nil {
		t.Fatal(err)
	}
	removeTopicFromConfig(t, store, "TopicB")

	logs := &testutil.SyncBuffer{}
	startTestBrokerWith(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "autoCreateTopicEnable": "false",
		"traceTopicEnable": "true", "msgTraceTopicName": "TopicB"}, func(b *Broker) {
		b.root = zerolog.New(logs)
	})
	if strings.Contains(logs.String(), "no topic config") {
		t.Errorf("a topic the broker creates at start named as lacking a config:\n%s", logs.String())
	}
	if want := "past their config's queue count: TopicB (2 queues, config 1)"; !strings.Contains(logs.String(), want) {
		t.Errorf("no warning with %q in the broker's log:\n%s", want, logs.String())
	}
}

// A RocketMQ store whose consumequeue/ lacks a file in the middle of a
// queue (TopicB/0's offsets 10..19; RocketMQ's checkSelf logs such a
// queue and reads around it) opens: the first open warns, naming the
// queue and the offsets, and the Pebble ConsumeQueue, built from the
// CommitLog, holds every message of the queue; with storeType=file the
// missing file is written again from the CommitLog. Before, the first
// open refused the store.
func TestOpenRocketMQStoreWithAConsumeQueueFileMissing(t *testing.T) {
	store := rocketMQStoreWithLongerTopicB(t)
	qdir := filepath.Join(store, "consumequeue", "TopicB", "0")
	for _, f := range []string{"00000000000000000000", "00000000000000000200", "00000000000000000400", "00000000000000000600"} {
		if _, err := os.Stat(filepath.Join(qdir, f)); err != nil {
			t.Fatalf("TopicB/0 has no file %s: %v", f, err)
		}
	}
	rebuiltWant, err := os.ReadFile(filepath.Join(qdir, "00000000000000000200"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(qdir, "00000000000000000200")); err != nil {
		t.Fatal(err)
	}

	fileStore := testutil.CopyStore(t, store)
	logs := &testutil.SyncBuffer{}
	b := startTestBrokerWith(t, store, map[string]string{"mappedFileSizeCommitLog": "16384"}, func(b *Broker) {
		b.root = zerolog.New(logs)
	})
	if out := logs.String(); !strings.Contains(out, `"queue":"TopicB/0","fromOffset":10,"toOffset":20`) || !strings.Contains(out, "built again from the CommitLog") {
		t.Errorf("the missing file is not warned of:\n%s", out)
	}
	pullAll := func(t *testing.T, b *testBroker) {
		t.Helper()
		c := b.client(nil)
		var got []commitlog.Message
		for off := int64(0); off < 34; {
			r := call(t, c, remoting.PullMessage, pullReq("GroupB", "TopicB", 0, off, 0, 0, "*"), nil)
			ms := decodeRecords(t, r.Body)
			if r.Code != remoting.Success || len(ms) == 0 {
				t.Fatalf("pull TopicB/0 from %d: %d %q", off, r.Code, r.Remark)
			}
			got = append(got, ms...)
			off = ms[len(ms)-1].QueueOffset + 1
		}
		for i, m := range got {
			if m.QueueOffset != int64(i) {
				t.Fatalf("TopicB/0 message %d has queue offset %d: the queue skips offsets", i, m.QueueOffset)
			}
			if want := fmt.Sprintf("more TopicB #%d", i-9); i >= 9 && string(m.Body) != want {
				t.Errorf("TopicB/0 at %d: %q, want %q", i, m.Body, want)
			}
		}
	}
	pullAll(t, b)

	// The file layout writes the missing file again from the CommitLog,
	// byte for byte as RocketMQ's was.
	b = startTestBrokerAt(t, fileStore, map[string]string{"mappedFileSizeCommitLog": "16384", "storeType": "file"})
	pullAll(t, b)
	b.stop()
	for _, f := range []string{"00000000000000000200", "00000000000000000400"} {
		rebuilt, err := os.ReadFile(filepath.Join(fileStore, "consumequeue", "TopicB", "0", f))
		if err != nil {
			t.Fatal(err)
		}
		orig, err := os.ReadFile(filepath.Join(store, "consumequeue", "TopicB", "0", f))
		if f == "00000000000000000200" {
			err = nil
			orig = rebuiltWant
		}
		if err != nil || !bytes.Equal(rebuilt, orig) {
			t.Errorf("TopicB/0 file %s written again differs: %x\nwant %x (%v)", f, rebuilt, orig, err)
		}
	}
}

// rocketMQStoreWithLongerTopicB copies the 4.9.8 fixture store and, with
// the file layout (RocketMQ's files, as storeType=file writes them),
// adds 25 messages to TopicB/0 (queue offsets 9..33: three consumequeue
// files more), then removes the index, so that the next start is the
// first open of a RocketMQ store. It returns the store's directory.
func rocketMQStoreWithLongerTopicB(t *testing.T) string {
	t.Helper()
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384", "storeType": "file"})
	c := b.client(nil)
	for i := range 25 {
		if r := mustSend(t, c, "TopicB", 0, fmt.Sprintf("more TopicB #%d", i), ""); header(t, r, "queueOffset") != int64(9+i) {
			t.Fatalf("message %d got queue offset %s", i, r.ExtFields["queueOffset"])
		}
	}
	b.caughtUp()
	b.stop()
	if err := os.RemoveAll(filepath.Join(store, kvindex.DirName)); err != nil {
		t.Fatal(err)
	}
	return store
}

// pullRocketMQQueue pulls every message of topic/qid from offset from on.
func pullRocketMQQueue(t *testing.T, b *testBroker, topic string, qid int32, from int64) []commitlog.Message {
	t.Helper()
	c := b.client(nil)
	var got []commitlog.Message
	for off := from; ; {
		r := call(t, c, remoting.PullMessage, pullReq("GroupB", topic, qid, off, 0, 0, "*"), nil)
		if r.Code != remoting.Success {
			return got
		}
		ms := decodeRecords(t, r.Body)
		if len(ms) == 0 {
			return got
		}
		got = append(got, ms...)
		off = ms[len(ms)-1].QueueOffset + 1
	}
}

// A queue whose first consumequeue files are gone without its topic
// being deleted (removed by hand; RocketMQ's own cleanup only deletes
// files whose records retention deleted) keeps the messages below them:
// their queue offsets continue the queue's numbering below its first
// file, so no message the files name takes their place. Before, the
// first open left out every record of the topic below its first entry,
// TopicB/0's offset 0 (below TopicB/1's first record) with it. The file
// layout, RocketMQ's files, serves the queue from its first file, as
// RocketMQ does.
func TestOpenRocketMQStoreWithAQueuesFirstFileMissing(t *testing.T) {
	store := rocketMQStoreWithLongerTopicB(t)
	// Offsets 0..9 of TopicB/0.
	if err := os.Remove(filepath.Join(store, "consumequeue", "TopicB", "0", "00000000000000000000")); err != nil {
		t.Fatal(err)
	}
	fileStore := testutil.CopyStore(t, store)
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384"})
	b.caughtUp()
	got := pullRocketMQQueue(t, b, "TopicB", 0, 0)
	if len(got) != 34 {
		t.Fatalf("TopicB/0 holds %d messages from offset 0, want 34", len(got))
	}
	for i, m := range got {
		if m.QueueOffset != int64(i) {
			t.Fatalf("TopicB/0 message %d has queue offset %d", i, m.QueueOffset)
		}
	}
	b = startTestBrokerAt(t, fileStore, map[string]string{"mappedFileSizeCommitLog": "16384", "storeType": "file"})
	b.caughtUp()
	if got := pullRocketMQQueue(t, b, "TopicB", 0, 10); len(got) != 24 || got[0].QueueOffset != 10 {
		t.Fatalf("storeType=file: TopicB/0 from 10 holds %d messages", len(got))
	}
}

// A queue whose files RocketMQ lost and which it then numbered from 0
// again (its start finds no files for it; the other queues of the topic
// go on) serves the new messages at their offsets, as RocketMQ does: the
// records of the queue's earlier numbering, whose offsets the new ones
// took, are left out, though they lie above the topic's first entry
// (TopicB/1's). Before, they were indexed and the new messages dropped
// as repeats of their offsets.
func TestOpenRocketMQStoreWithAQueueNumberedAgain(t *testing.T) {
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	settleFixtureDelay(t, store)
	settings := map[string]string{"mappedFileSizeCommitLog": "16384", "storeType": "file"}
	b := startTestBrokerAt(t, store, settings)
	b.caughtUp()
	b.stop()
	if err := os.RemoveAll(filepath.Join(store, "consumequeue", "TopicB", "0")); err != nil {
		t.Fatal(err)
	}
	// The files written stand for RocketMQ's: the queue starts over.
	b = startTestBrokerAt(t, store, settings)
	c := b.client(nil)
	for i := range 3 {
		if r := mustSend(t, c, "TopicB", 0, fmt.Sprintf("new TopicB #%d", i), ""); header(t, r, "queueOffset") != int64(i) {
			t.Fatalf("message %d got queue offset %s, want the queue numbered from 0 again", i, r.ExtFields["queueOffset"])
		}
	}
	b.caughtUp()
	b.stop()
	if err := os.RemoveAll(filepath.Join(store, kvindex.DirName)); err != nil {
		t.Fatal(err)
	}
	b = startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384"})
	b.caughtUp()
	got := pullRocketMQQueue(t, b, "TopicB", 0, 0)
	if len(got) != 3 {
		t.Fatalf("TopicB/0 holds %d messages, want the 3 RocketMQ serves", len(got))
	}
	for i, m := range got {
		if want := fmt.Sprintf("new TopicB #%d", i); string(m.Body) != want || m.QueueOffset != int64(i) {
			t.Errorf("TopicB/0 at %d: %q at offset %d, want %q", i, m.Body, m.QueueOffset, want)
		}
	}
	if got := pullRocketMQQueue(t, b, "TopicB", 1, 0); len(got) != 13 {
		t.Errorf("TopicB/1 holds %d messages, want its 13", len(got))
	}
}

// A RocketMQ store whose TopicB/0 lacks the file of offsets 20..29 and
// whose next file holds nothing yet (RocketMQ creates it once the one
// before is full; a crash or a copy left it empty) opens with the file
// layout: the missing file is written again from the CommitLog up to
// where the empty one begins, and the first open's dispatch puts the
// queue's newer entries after it. Before, the refill found no entry
// after the run and the broker refused the store.
func TestOpenRocketMQStoreRefillsFilesBeforeAnEmptyOne(t *testing.T) {
	store := rocketMQStoreWithLongerTopicB(t)
	qdir := filepath.Join(store, "consumequeue", "TopicB", "0")
	if err := os.Remove(filepath.Join(qdir, "00000000000000000400")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(qdir, "00000000000000000600"), make([]byte, 200), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		settings map[string]string
	}{
		{"file", map[string]string{"mappedFileSizeCommitLog": "16384", "storeType": "file"}},
		{"double-write", map[string]string{"mappedFileSizeCommitLog": "16384", "rocksdbCQDoubleWriteEnable": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startTestBrokerAt(t, testutil.CopyStore(t, store), tc.settings)
			b.caughtUp()
			for _, s := range []cq.Store{b.cqs, b.cqMirror} {
				if s == nil {
					continue
				}
				if hi, err := s.MaxOffset("TopicB", 0); err != nil || hi != 34 {
					t.Errorf("TopicB/0 ends at %d %v, want 34", hi, err)
				}
			}
			got := pullRocketMQQueue(t, b, "TopicB", 0, 0)
			if len(got) != 34 {
				t.Fatalf("TopicB/0 holds %d messages, want 34", len(got))
			}
			for i, m := range got {
				if m.QueueOffset != int64(i) {
					t.Fatalf("TopicB/0 message %d has queue offset %d", i, m.QueueOffset)
				}
				if want := fmt.Sprintf("more TopicB #%d", i-9); i >= 9 && string(m.Body) != want {
					t.Errorf("TopicB/0 at %d: %q, want %q", i, m.Body, want)
				}
			}
		})
	}
}
