package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// kvPopStore copies the RocketMQ 4.9.8 store fixture and puts into it one
// of the KV POP databases ldb wrote (migrate/rmqconfig/testdata/kvstore)
// as its kvStore/.
func kvPopStore(t *testing.T, name string) string {
	t.Helper()
	store := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	if err := os.CopyFS(filepath.Join(store, rmqconfig.KVPopDir), os.DirFS(filepath.Join("..", "migrate", "rmqconfig", "testdata", "kvstore", name))); err != nil {
		t.Fatal(err)
	}
	return store
}

// A RocketMQ store whose POP messages in flight are in RocketMQ 5's KV POP
// RocksDB (kvStore/: GroupA's TopicA/0@5 and TopicA/1@7, popped in 2023
// with 60 s of invisible time, one record in an SST and one in the WAL)
// opens, and the two messages are re-delivered to GroupA through its
// pop-retry topic, consumed once more (reconsumeTimes 1), as RocketMQ's
// KV revive would. GroupA's committed offsets (5 and 6, RocketMQ's
// consumerOffset.json) stand at or below them: its pops go on past them
// (TopicA/0 from 6, TopicA/1 from 8: RocketMQ read 6 and 7 in one pop and
// 6 was acked) and hand out neither a second time. Opened again, the store
// is not imported again: nothing is re-delivered twice.
func TestOpenRocketMQStoreImportsKVPopState(t *testing.T) {
	store := kvPopStore(t, "inflight")
	settings := map[string]string{"mappedFileSizeCommitLog": "16384"}
	b := startTestBrokerAt(t, store, settings)
	c := b.client(nil)
	originals := map[string]string{} // UNIQ_KEY -> queue@offset of the messages in flight
	for _, at := range [][2]int64{{0, 5}, {1, 7}} {
		for _, m := range pullAll(t, b, c, "TopicA", int32(at[0])) {
			if m.QueueOffset == at[1] {
				originals[uniqKey(t, m)] = fmt.Sprintf("%d@%d", at[0], at[1])
			}
		}
	}
	if len(originals) != 2 {
		t.Fatalf("the fixture's messages in flight: %v", originals)
	}

	pc := popclient.New(c, b.cfg.BrokerName)
	normal := map[string]int{} // queue@offset -> deliveries
	var retried []popclient.Message
	popOnce := func() int {
		res := mustPop(t, pc, popclient.PopRequest{Group: "GroupA", Topic: "TopicA", QueueID: -1, MaxMsgNums: 32, InvisibleTime: 10 * time.Minute})
		for _, m := range res.Messages {
			if meta.IsRetryTopic(m.RealTopic) {
				retried = append(retried, m)
			} else {
				normal[fmt.Sprintf("%d@%d", m.QueueID, m.QueueOffset)]++
			}
		}
		return len(res.Messages)
	}
	// Every message past the offsets, and past the messages in flight.
	want := map[string]int{}
	for q, r := range [][2]int64{{6, 16}, {8, 16}, {7, 18}, {8, 19}} {
		for off := r[0]; off < r[1]; off++ {
			want[fmt.Sprintf("%d@%d", q, off)] = 1
		}
	}
	waitFor(t, "the messages in flight revived and the queues drained", func() bool {
		popOnce()
		return len(retried) >= 2 && len(normal) >= len(want)
	})
	if n := popOnce(); n != 0 || len(retried) != 2 || fmt.Sprint(normal) != fmt.Sprint(want) {
		t.Fatalf("GroupA got %d retried messages and %v from TopicA (then %d more), want 2 retried and %v", len(retried), normal, n, want)
	}
	var got []string
	for _, m := range retried {
		if m.ReconsumeTimes != 1 {
			t.Errorf("revived message %s has reconsumeTimes %d, want 1", uniqKey(t, m.Message), m.ReconsumeTimes)
		}
		got = append(got, originals[uniqKey(t, m.Message)])
	}
	slices.Sort(got)
	if fmt.Sprint(got) != "[0@5 1@7]" {
		t.Fatalf("revived %v, want the messages in flight [0@5 1@7]", got)
	}
	inFlight := countPopInFlight(t, b, store)

	// Opened again, with kvStore/ left as it is: no second import, so no
	// second revive of the two messages.
	b = startTestBrokerAt(t, store, settings)
	pc = popclient.New(b.client(nil), b.cfg.BrokerName)
	if n := popOnce(); n != 0 {
		t.Fatalf("after the second open a pop got %d messages, want none", n)
	}
	if now := countPopInFlight(t, b, store); now != inFlight {
		t.Fatalf("after the second open %v, before it %v: the KV POP records were imported again", now, inFlight)
	}
	if _, err := os.Stat(filepath.Join(store, rmqconfig.KVPopDir, "CURRENT")); err != nil {
		t.Fatalf("kvStore/ was not left as it is: %v", err)
	}
}

// uniqKey is a message's UNIQ_KEY.
func uniqKey(t *testing.T, m commitlog.Message) string {
	t.Helper()
	k, ok := commitlog.LookupProperty(m.Properties, "UNIQ_KEY")
	if !ok {
		t.Fatalf("message %s/%d@%d has no UNIQ_KEY", m.Topic, m.QueueID, m.QueueOffset)
	}
	return k
}

// countPopInFlight stops the broker b of store, and then, with nothing
// reviving any more, returns its messages in flight and the ends of
// GroupA's pop-retry queues of TopicA (V1 and V2 names).
func countPopInFlight(t *testing.T, b *testBroker, store string) [3]int64 {
	t.Helper()
	b.stop()
	db, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(store, kvindex.DirName), ReadOnly: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, msgs, err := db.Pop().CountInFlight()
	if err != nil {
		t.Fatal(err)
	}
	out := [3]int64{msgs}
	cq := db.ConsumeQueue(1)
	for i, topic := range []string{"%RETRY%GroupA_TopicA", "%RETRY%GroupA+TopicA"} {
		if out[i+1], err = cq.MaxOffset(topic, 0); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// A KV POP record that does not decode refuses the store, naming the
// directory and the record: no message in flight is left behind.
func TestOpenRocketMQStoreRefusesUndecodableKVPop(t *testing.T) {
	store := kvPopStore(t, "undecodable")
	err := startError(t, map[string]string{"storePathRootDir": store, "listenPort": "0",
		"brokerIP1": "127.0.0.1", "mappedFileSizeCommitLog": "16384"})
	if !errors.Is(err, rmqconfig.ErrRocksDBPopState) || !strings.Contains(err.Error(), filepath.Join(store, rmqconfig.KVPopDir)) ||
		!strings.Contains(err.Error(), "does not decode") {
		t.Fatalf("start over a store with an undecodable KV POP record: %v", err)
	}
}

// The records of one KV pop (GroupA's TopicA/2@7 and @8, popped at the
// same time, not due before 2100) become one checkpoint named by their
// first offset, which is the start offset RocketMQ put in the pop's
// receipt handles: a client acks the messages here with the handles
// RocketMQ gave it, and the group's offset follows its acks. GroupA's
// pops of the queue go on past them (from 9: RocketMQ's consumer offset,
// 7, is where that pop read from).
func TestOpenRocketMQStoreKVPopAckedWithRocketMQHandles(t *testing.T) {
	const popTime = 4102444800000
	b := startTestBrokerAt(t, kvPopStore(t, "pending"), map[string]string{"mappedFileSizeCommitLog": "16384"})
	c := b.client(nil)
	ck, ok, err := b.db.Pop().Checkpoint("GroupA", "TopicA", 2, 7, popTime)
	if err != nil || !ok || fmt.Sprint(ck.Offsets) != "[7 8]" || ck.VisibleAt != popTime+60_000 || ck.InvisibleTime != 60_000 {
		t.Fatalf("the imported checkpoint: %+v %v %v, want offsets [7 8] visible at %d", ck, ok, err, int64(popTime+60_000))
	}
	pc := popclient.New(c, b.cfg.BrokerName)
	var offsets []int64
	for {
		res := mustPop(t, pc, popclient.PopRequest{Group: "GroupA", Topic: "TopicA", QueueID: 2, MaxMsgNums: 32, InvisibleTime: time.Minute})
		if len(res.Messages) == 0 {
			break
		}
		for _, m := range res.Messages {
			offsets = append(offsets, m.QueueOffset)
		}
	}
	if fmt.Sprint(offsets) != "[9 10 11 12 13 14 15 16 17]" {
		t.Fatalf("GroupA popped TopicA/2 at %v, want 9 to 17 (7 and 8 are in flight)", offsets)
	}
	for _, off := range []int64{7, 8} {
		h := pop.Handle{CKOffset: 7, PopTime: popTime, InvisibleTime: 60_000, RetryFlag: pop.FlagNormal,
			BrokerName: b.cfg.BrokerName, QueueID: 2, QueueOffset: off}
		if code, err := pc.AckHandle(ctx20(t), "GroupA", "TopicA", h); err != nil || code != remoting.Success {
			t.Fatalf("ack of 2@%d with RocketMQ's handle: %d %v", off, code, err)
		}
	}
	if _, ok, err := b.db.Pop().Checkpoint("GroupA", "TopicA", 2, 7, popTime); err != nil || ok {
		t.Fatalf("after the acks the checkpoint is still there (%v)", err)
	}
	if got := committedOffset(t, c, "GroupA", "TopicA", 2); got != 9 {
		t.Fatalf("GroupA's offset of TopicA/2 after its acks is %d, want 9 (the smallest offset in flight)", got)
	}
}

// The first open's config import reads the KV POP records and hands them
// to the POP import of the same start (kvStore/ is read once). A start
// after one that stopped between the two imports (the config's done and
// marked, the POP state's not) reads them itself: GroupA's pop of
// TopicA/2 in flight is imported all the same.
func TestKVPopImportedAfterAStartThatStoppedBeforeIt(t *testing.T) {
	const popTime = 4102444800000
	store := kvPopStore(t, "pending")
	db, err := kvindex.Open(kvindex.Options{Dir: filepath.Join(store, kvindex.DirName), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	pending, kvPop, err := importRocketMQConfig(db, store, false, zerolog.Nop())
	if err != nil || !pending || !kvPop.read || len(kvPop.records) != 2 {
		db.Close()
		t.Fatalf("the config import: pending %v, KV POP records %+v, %v; want the 2 records of kvStore/", pending, kvPop, err)
	}
	err = errors.Join(db.MarkRocketMQConfigImported(time.Now().UnixMilli()), db.Close())
	if err != nil {
		t.Fatal(err)
	}
	b := startTestBrokerAt(t, store, map[string]string{"mappedFileSizeCommitLog": "16384"})
	ck, ok, err := b.db.Pop().Checkpoint("GroupA", "TopicA", 2, 7, popTime)
	if err != nil || !ok || fmt.Sprint(ck.Offsets) != "[7 8]" {
		t.Fatalf("the imported checkpoint: %+v %v %v, want offsets [7 8]", ck, ok, err)
	}
}
