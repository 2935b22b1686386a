package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rocketkv/rocketkv/broker"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
	"github.com/rocketkv/rocketkv/migrate/rmqconfig"
	"github.com/rocketkv/rocketkv/migrate/rmqpop"
	"github.com/rocketkv/rocketkv/remoting"
)

func exportSend(t *testing.T, c *remoting.Client, topic, body, props string) {
	t.Helper()
	resp, err := c.Invoke(context.Background(), remoting.NewRequest(remoting.SendMessageV2, map[string]string{
		"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0",
		"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": props,
	}, []byte(body)))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("send to %s: %v %+v", topic, err, resp)
	}
}

func exportCommit(t *testing.T, c *remoting.Client, group, topic string, offset int64) {
	t.Helper()
	resp, err := c.Invoke(context.Background(), remoting.NewRequest(remoting.UpdateAndCreateSubscriptionGroup, nil,
		[]byte(`{"groupName":"`+group+`"}`)))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("create group: %v %+v", err, resp)
	}
	resp, err = c.Invoke(context.Background(), remoting.NewRequest(remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": strconv.FormatInt(offset, 10),
	}, nil))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("commit: %v %+v", err, resp)
	}
}

// reviveTopic is the revive topic of the test brokers' cluster.
const reviveTopic = rmqpop.TopicPrefix + "DefaultCluster"

// waitQueueEnd waits until queue 0 of topic holds want messages (the
// broker dispatched them); the 10 s deadline only guards against hangs.
func waitQueueEnd(t *testing.T, c *remoting.Client, topic string, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := c.Invoke(context.Background(), remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": "0"}, nil))
		if err == nil && resp.ExtFields["offset"] == strconv.FormatInt(want, 10) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/0 does not reach %d messages: %v %+v", topic, want, err, resp)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stopBroker(t *testing.T, b *broker.Broker) {
	t.Helper()
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The way back: a store that ran with both ConsumeQueue layouts is
// exported as RocketMQ's config files, and a broker opening it as a
// RocketMQ store (its own index gone, RocketMQ's consumequeue/ serving)
// finds the topics and consumer offsets where they were.
func TestExportRocketMQConfig(t *testing.T) {
	store := t.TempDir()
	b, c := startBroker(t, store, map[string]string{"rocksdbCQDoubleWriteEnable": "true"})
	for i := 0; i < 5; i++ {
		exportSend(t, c, "ExpT", "m"+strconv.Itoa(i), "")
	}
	exportCommit(t, c, "cg-exp", "ExpT", 3)
	// A static topic whose logic queue 0 moved here from broker-b: its
	// mapping goes to topicQueueMapping.json and comes back from it.
	static := meta.NewTopicQueueMappingDetail("ExpStatic", 2, "broker-a", 2000)
	moved := []meta.LogicQueueMappingItem{meta.NewLogicQueueMappingItem(), meta.NewLogicQueueMappingItem()}
	moved[0].Bname, moved[0].EndOffset = "broker-b", 4
	moved[1].Bname, moved[1].Gen, moved[1].QueueID, moved[1].LogicOffset = "broker-a", 1, 1, 10
	lone := meta.NewLogicQueueMappingItem()
	lone.Bname = "broker-a"
	static.HostedQueues[0], static.HostedQueues[1] = moved, []meta.LogicQueueMappingItem{lone}
	staticBody, err := json.Marshal(static)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Invoke(context.Background(), remoting.NewRequest(remoting.UpdateAndCreateStaticTopic, map[string]string{
		"topic": "ExpStatic", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6"}, staticBody)); err != nil || resp.Code != remoting.Success {
		t.Fatalf("create the static topic: %v %+v", err, resp)
	}
	// A group forbidden to read a topic stays so in RocketMQ.
	if resp, err := c.Invoke(context.Background(), remoting.NewRequest(remoting.UpdateAndGetGroupForbidden,
		map[string]string{"group": "cg-exp", "topic": "ExpOther", "readable": "false"}, nil)); err != nil || resp.Code != remoting.Success {
		t.Fatalf("forbid: %v %+v", err, resp)
	}
	// Two check-points in the revive topic, as a RocketMQ store leaves
	// them (taken over at a first open): RocketMQ must not revive them
	// again after the way back.
	for i := 0; i < 2; i++ {
		exportSend(t, c, reviveTopic, `{"so":0,"pt":1,"it":1,"n":1,"q":0,"t":"ExpT","c":"cg-old","d":[0],"bn":"broker-a"}`, "TAGS\x01ck\x02")
	}
	// An orderly POP consumer's batch in flight: RocketMQ takes it over
	// from consumerOrderInfo.json, the queue locked for the group.
	waitQueueEnd(t, c, "ExpT", 5)
	ordered, err := popclient.New(c, "").Pop(context.Background(), popclient.PopRequest{Group: "cg-ord", Topic: "ExpT", QueueID: 0,
		MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true, AttemptID: "att-exp"})
	if err != nil || len(ordered.Messages) != 2 {
		t.Fatalf("orderly pop: %v %+v", err, ordered)
	}
	// A timer message rocketkv delivers before the export: RocketMQ's timer
	// must not take it in again.
	exportSend(t, c, "ExpTimer", "later", "TIMER_DELAY_MS\x01100\x02")
	waitQueueEnd(t, c, "ExpTimer", 1) // the timer message delivered
	stopBroker(t, b)
	// What RocketMQ's own timer left before the store came to rocketkv,
	// and its KV POP RocksDB, whose records a first open took over (here
	// two still in flight, as ldb wrote them).
	if err := os.MkdirAll(filepath.Join(store, "timerlog"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(store, rmqconfig.KVPopDir), os.DirFS(filepath.Join("..", "..", "migrate", "rmqconfig", "testdata", "kvstore", "inflight"))); err != nil {
		t.Fatal(err)
	}

	out := mustKvdump(t, "--store", store, "export-rocketmq")
	if !strings.Contains(out, "consumer offsets") || !strings.Contains(out, filepath.Join(store, "config")) {
		t.Fatalf("export report: %s", out)
	}
	cfg, err := rmqconfig.Read(store)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range cfg.Offsets {
		if o.Group == "cg-exp" && o.Topic == "ExpT" && o.QueueID == 0 && o.Offset == 3 {
			found = true
		}
	}
	if !found {
		t.Fatalf("consumerOffset.json lacks cg-exp's offset 3: %+v", cfg.Offsets)
	}
	// The revive's offset is the last one it handled (1), not the next.
	if !slices.Contains(cfg.Offsets, rmqconfig.Offset{Group: rmqpop.ProgressGroup, Topic: reviveTopic, QueueID: 0, Offset: 1}) {
		t.Fatalf("consumerOffset.json does not put the revive progress past the revive topic's check-points: %+v", cfg.Offsets)
	}
	if len(cfg.OrderInfos) != 1 || fmt.Sprintf("%+v", cfg.OrderInfos[0]) != fmt.Sprintf("%+v", rmqconfig.OrderInfo{Topic: "ExpT", Group: "cg-ord",
		PopTime: ordered.PopTime, InvisibleTime: time.Minute.Milliseconds(), Offsets: []int64{0, 1}, LastConsume: ordered.PopTime, AttemptID: "att-exp"}) {
		t.Fatalf("consumerOrderInfo.json: %+v, want the orderly batch popped at %d", cfg.OrderInfos, ordered.PopTime)
	}
	if want := []meta.GroupForbidden{{Group: "cg-exp", Topics: map[string]int{"ExpOther": meta.PermRead}}}; !reflect.DeepEqual(cfg.Forbidden, want) {
		t.Fatalf("subscriptionGroup.json's forbiddenTable: %+v, want %+v", cfg.Forbidden, want)
	}
	if len(cfg.QueueMappings) != 1 || !reflect.DeepEqual(cfg.QueueMappings[0], static) {
		t.Fatalf("topicQueueMapping.json: %+v, want %+v", cfg.QueueMappings, static)
	}
	if !cfg.HasTimerCheck || cfg.TimerQueueOffset != 1 {
		t.Fatalf("timercheck: %v, queue offset %d, want 1 (past the delivered timer message)", cfg.HasTimerCheck, cfg.TimerQueueOffset)
	}
	if _, err := os.Stat(filepath.Join(store, "timerlog.before-rocketkv-export")); err != nil || !strings.Contains(out, "moved RocketMQ's stale timerlog") {
		t.Fatalf("the stale timerlog was not moved aside: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(store, rmqconfig.KVPopDir+".before-rocketkv-export", "CURRENT")); err != nil || !strings.Contains(out, "moved RocketMQ's stale kvStore") {
		t.Fatalf("the stale kvStore/ was not moved aside: %v\n%s", err, out)
	}

	// Open it as a RocketMQ store: RocketMQ's consumequeue/ serving, the
	// config imported from the exported files.
	if err := os.RemoveAll(filepath.Join(store, kvindex.DirName)); err != nil {
		t.Fatal(err)
	}
	_, c = startBroker(t, store, map[string]string{"storeType": "file"})
	resp, err := c.Invoke(context.Background(), remoting.NewRequest(remoting.QueryConsumerOffset, map[string]string{
		"consumerGroup": "cg-exp", "topic": "ExpT", "queueId": "0"}, nil))
	if err != nil || resp.Code != remoting.Success || resp.ExtFields["offset"] != "3" {
		t.Fatalf("the group's offset after the way back: %v %+v", err, resp)
	}
	resp, err = c.Invoke(context.Background(), remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": "ExpT", "queueId": "0"}, nil))
	if err != nil || resp.ExtFields["offset"] != "5" {
		t.Fatalf("max offset after the way back: %v %+v", err, resp)
	}
	// The static topic's mapping was imported from the exported file.
	resp, err = c.Invoke(context.Background(), remoting.NewRequest(remoting.GetTopicConfig, map[string]string{"topic": "ExpStatic", "lo": "true"}, nil))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("the static topic's config after the way back: %v %+v", err, resp)
	}
	var answered struct {
		MappingDetail json.RawMessage `json:"mappingDetail"`
	}
	if err := json.Unmarshal(resp.Body, &answered); err != nil {
		t.Fatal(err)
	}
	if got, err := meta.DecodeTopicQueueMappingDetail(answered.MappingDetail); err != nil || !reflect.DeepEqual(got, static) {
		t.Fatalf("the static topic's mapping after the way back: %+v (%v), want %+v", got, err, static)
	}
	// The orderly batch came back with the config: the queue is still
	// locked for its group, and the batch's attempt gets it again.
	pc := popclient.New(c, "")
	for attempt, want := range map[string]int{"att-other": 0, "att-exp": 2} {
		res, err := pc.Pop(context.Background(), popclient.PopRequest{Group: "cg-ord", Topic: "ExpT", QueueID: 0,
			MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true, AttemptID: attempt})
		if err != nil || len(res.Messages) != want {
			t.Fatalf("orderly pop with attempt %s after the way back: %v %d messages, want %d", attempt, err, len(res.Messages), want)
		}
	}
}

// export-rocketmq refuses --broker before it asks the running broker for
// anything: the broker writes no checkpoint of its index for an export
// that cannot use it.
func TestExportRefusesBrokerWithoutACheckpoint(t *testing.T) {
	store := t.TempDir()
	b, _ := startBroker(t, store, nil)
	_, _, err := runKvdump(t, "--broker", b.Addr(), "--keep-checkpoint", "export-rocketmq")
	if err == nil || !strings.Contains(err.Error(), "export-rocketmq reads a stopped store (--store), not a running broker") || exitStatus(err) == exitOK {
		t.Fatalf("export-rocketmq --broker: %v (exit status %d)", err, exitStatus(err))
	}
	left, err := os.ReadDir(filepath.Join(store, "checkpoints"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("export-rocketmq --broker had the broker write a checkpoint: %v", left)
	}
}

func TestExportRefusesWhatRocketMQCannotTakeOver(t *testing.T) {
	// Without RocketMQ's consumequeue/ files.
	store := t.TempDir()
	b, c := startBroker(t, store, nil)
	exportSend(t, c, "ExpT", "m", "")
	stopBroker(t, b)
	if _, _, err := runKvdump(t, "--store", store, "export-rocketmq"); err == nil || !strings.Contains(err.Error(), "consumequeue/ files are not complete") {
		t.Fatalf("export without the file layout: %v", err)
	}

	// An open transaction stops it, unless forced.
	store = t.TempDir()
	b, c = startBroker(t, store, map[string]string{"rocksdbCQDoubleWriteEnable": "true"})
	exportSend(t, c, "ExpT", "half", "TRAN_MSG\x01true\x02PGROUP\x01pg\x02")
	exportSend(t, c, "ExpTimer", "in an hour", "TIMER_DELAY_MS\x013600000\x02")
	exportSend(t, c, "ExpT", "popped", "")
	if r, err := c.Invoke(context.Background(), remoting.NewRequest(remoting.UpdateAndCreateTopic, map[string]string{"topic": "ExpCompact",
		"readQueueNums": "1", "writeQueueNums": "1", "perm": "6", "attributes": "+cleanup.policy=COMPACTION"}, nil)); err != nil || r.Code != remoting.Success {
		t.Fatalf("create a compacted topic: %v %+v", err, r)
	}
	exportSend(t, c, "ExpCompact", "kept", "KEYS\x01k\x02")
	if res, err := popclient.New(c, "").Pop(context.Background(), popclient.PopRequest{Group: "cg-pop", Topic: "ExpT", QueueID: 0,
		MaxMsgNums: 1, InvisibleTime: time.Hour, PollTime: 5 * time.Second}); err != nil || len(res.Messages) != 1 {
		t.Fatalf("pop: %v %+v", err, res)
	}
	stopBroker(t, b)
	_, _, err := runKvdump(t, "--store", store, "export-rocketmq")
	for _, want := range []string{"1 transactions are open", "1 timer messages are not due yet",
		"1 POP messages are in flight (stop the POP consumers, then send POP_ROLLBACK",
		"1 compacted topics (ExpCompact) keep their messages in rocketkv's index"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("export with an open transaction, a parked timer message and a message popped: %v, want %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(store, "config", "consumerOffset.json")); err == nil {
		t.Fatal("a refused export wrote files")
	}
	// A stale timerlog of RocketMQ's own is left where it is when the
	// export goes elsewhere, with a warning.
	if err := os.MkdirAll(filepath.Join(store, "timerlog"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := mustKvdump(t, "--store", store, "export-rocketmq", "--force", "--out", filepath.Join(store, "elsewhere"))
	if !strings.Contains(out, "warning: exported with --force although 1 transactions are open") {
		t.Fatalf("forced export: %s", out)
	}
	if _, err := os.Stat(filepath.Join(store, "timerlog")); err != nil || !strings.Contains(out, "timerlog aside before Apache RocketMQ starts") {
		t.Fatalf("the stale timerlog with --out elsewhere: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(store, "elsewhere", "topics.json")); err != nil {
		t.Fatalf("--out: %v", err)
	}
	// Forced, RocketMQ's timer takes in from the parked message (the first
	// of rmq_sys_wheel_timer), so that it is still delivered.
	other := t.TempDir()
	mustKvdump(t, "--store", store, "export-rocketmq", "--force", "--out", filepath.Join(other, "config"))
	if cfg, err := rmqconfig.Read(other); err != nil || !cfg.HasTimerCheck || cfg.TimerQueueOffset != 0 {
		t.Fatalf("timercheck of a forced export: %+v %v, want queue offset 0", cfg.TimerQueueOffset, err)
	}
}

// A timer key that does not decode fails the reading of the store's
// unportable state instead of being taken for the end of the parked
// messages: export-rocketmq would otherwise see no parked timer message
// and put RocketMQ's timer checkpoint at the queue's end, past the
// messages still parked, which RocketMQ would then never deliver.
func TestExportFailsOnMalformedTimerKey(t *testing.T) {
	root := t.TempDir()
	s := openTestStore(t, root, 0)
	s.send(t, "T", 0, nil, "m")
	s.close(t)
	editIndex(t, root, func(db *pebble.DB) {
		if err := db.Set(docTimerKey(testClock.UnixMilli()+3600_000, 0), []byte{0, 0, 0, 100}, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	})
	unportableOf := func() (unportable, error) {
		t.Helper()
		st, err := openStore(context.Background(), &globalOptions{store: root}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		defer st.close()
		return unportableState(st)
	}
	// The parked message alone is seen.
	if u, err := unportableOf(); err != nil || u.firstParked != 0 || !slices.Contains(u.problems, "1 timer messages are not due yet") {
		t.Fatalf("unportableState with one parked timer message: %+v, %v", u, err)
	}
	// A malformed key sorting before it fails the scan.
	editIndex(t, root, func(db *pebble.DB) {
		if err := db.Set([]byte{kvindex.PrefixTimer, 0x00}, []byte{0, 0, 0, 1}, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	})
	if u, err := unportableOf(); err == nil || !strings.Contains(err.Error(), "read the parked timer messages") {
		t.Fatalf("unportableState with a malformed timer key: problems %q, firstParked %d, error %v; want the key's decode error",
			u.problems, u.firstParked, err)
	}
}

// The way back with POP messages in flight: POP_ROLLBACK writes them to
// the revive topic as RocketMQ check-points and the export starts
// RocketMQ's revive at them; a message popped after the rollback is not
// among them and stops the export (unless forced). A broker opening the
// exported store as RocketMQ's (rocketkv's own import reads a revive topic
// as RocketMQ's revive does) has the rolled-back messages in flight again:
// the client's receipt handle of before acks one, the other stays.
func TestExportHandsPopInFlightToRocketMQ(t *testing.T) {
	store := t.TempDir()
	b, c := startBroker(t, store, map[string]string{"rocksdbCQDoubleWriteEnable": "true"})
	// Check-points RocketMQ left before the store came to rocketkv.
	for i := 0; i < 2; i++ {
		exportSend(t, c, reviveTopic, `{"so":0,"pt":1,"it":1,"n":1,"q":0,"t":"ExpP","c":"cg-old","d":[0],"bn":"broker-a"}`, "TAGS\x01ck\x02")
	}
	for i := 0; i < 4; i++ {
		exportSend(t, c, "ExpP", "m"+strconv.Itoa(i), "")
	}
	waitQueueEnd(t, c, "ExpP", 4) // a pop returns what is dispatched when it looks
	pc := popclient.New(c, "")
	pop := func(n int) popclient.PopResult {
		res, err := pc.Pop(context.Background(), popclient.PopRequest{Group: "cg-pop", Topic: "ExpP", QueueID: 0,
			MaxMsgNums: n, InvisibleTime: time.Hour, PollTime: 5 * time.Second})
		if err != nil || len(res.Messages) != n {
			t.Fatalf("pop %d: %v %+v", n, err, res)
		}
		return res
	}
	popped := pop(3)
	if code, err := pc.Ack(context.Background(), "cg-pop", popped.Messages[1]); err != nil || code != remoting.Success {
		t.Fatalf("ack: %d %v", code, err)
	}
	// Pops and the rollback are told apart by the millisecond.
	time.Sleep(5 * time.Millisecond)
	resp, err := c.Invoke(context.Background(), remoting.NewRequest(remoting.PopRollback, nil, nil))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("POP_ROLLBACK: %v %+v", err, resp)
	}
	pop(1) // after the rollback
	stopBroker(t, b)
	if out := mustKvdump(t, "--store", store, "summary"); !strings.Contains(out, "pops before ") ||
		!strings.Contains(out, "written to "+reviveTopic+"/0 from offset 2") {
		t.Fatalf("summary after the rollback:\n%s", out)
	}

	if _, _, err := runKvdump(t, "--store", store, "export-rocketmq"); err == nil || !strings.Contains(err.Error(), "1 POP messages are in flight") {
		t.Fatalf("export with a message popped after the rollback: %v", err)
	}
	mustKvdump(t, "--store", store, "export-rocketmq", "--force")
	cfg, err := rmqconfig.Read(store)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cfg.Offsets, rmqconfig.Offset{Group: rmqpop.ProgressGroup, Topic: reviveTopic, QueueID: 0, Offset: 1}) {
		t.Fatalf("the revive progress does not stop just before the rolled-back check-points (offset 2): %+v", cfg.Offsets)
	}

	if err := os.RemoveAll(filepath.Join(store, kvindex.DirName)); err != nil {
		t.Fatal(err)
	}
	b, c = startBroker(t, store, map[string]string{"storeType": "file"})
	if code, err := popclient.New(c, "").Ack(context.Background(), "cg-pop", popped.Messages[0]); err != nil || code != remoting.Success {
		t.Fatalf("ack with the handle of before the way back: %d %v", code, err)
	}
	stopBroker(t, b)
	var offsets []int64
	for _, line := range strings.Split(strings.TrimSpace(mustKvdump(t, "--store", store, "--json", "pop", "--group", "cg-pop")), "\n") {
		var r kvindex.InFlight
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if r.PopTime != popped.PopTime || r.CKOffset != popped.Messages[0].Handle.CKOffset {
			t.Fatalf("in flight after the way back: %+v, want the pop of %d", r, popped.PopTime)
		}
		offsets = append(offsets, r.QueueOffset)
	}
	if fmt.Sprint(offsets) != "[2]" {
		t.Fatalf("in flight after the way back: %v, want [2]", offsets)
	}
}

// The way back after POP_ROLLBACK exports a POP group's offset at its pop
// position, RocketMQ's POP offset: below it every message is acked or held
// by a rolled-back check-point. The committed offset (the smallest offset
// in flight) would have RocketMQ pop again the messages acked since and
// the one its revive re-delivers. Reopened as RocketMQ's, the store pops
// on from the position, the rolled-back message still in flight.
func TestExportAfterPopRollbackStartsRocketMQAtThePopPosition(t *testing.T) {
	store := t.TempDir()
	b, c := startBroker(t, store, map[string]string{"rocksdbCQDoubleWriteEnable": "true"})
	for i := 0; i < 6; i++ {
		exportSend(t, c, "ExpQ", "m"+strconv.Itoa(i), "")
	}
	waitQueueEnd(t, c, "ExpQ", 6)
	pc := popclient.New(c, "")
	res, err := pc.Pop(context.Background(), popclient.PopRequest{Group: "cg-pos", Topic: "ExpQ", QueueID: 0,
		MaxMsgNums: 4, InvisibleTime: time.Hour, PollTime: 5 * time.Second})
	if err != nil || len(res.Messages) != 4 {
		t.Fatalf("pop: %v %+v", err, res)
	}
	for _, m := range res.Messages[1:] { // m0 stays in flight
		if code, err := pc.Ack(context.Background(), "cg-pos", m); err != nil || code != remoting.Success {
			t.Fatalf("ack: %d %v", code, err)
		}
	}
	time.Sleep(5 * time.Millisecond) // pops and the rollback are told apart by the millisecond
	if resp, err := c.Invoke(context.Background(), remoting.NewRequest(remoting.PopRollback, nil, nil)); err != nil || resp.Code != remoting.Success {
		t.Fatalf("POP_ROLLBACK: %v %+v", err, resp)
	}
	stopBroker(t, b)
	mustKvdump(t, "--store", store, "export-rocketmq")
	cfg, err := rmqconfig.Read(store)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cfg.Offsets, rmqconfig.Offset{Group: "cg-pos", Topic: "ExpQ", QueueID: 0, Offset: 4}) {
		t.Fatalf("exported offsets %+v, want cg-pos on ExpQ/0 at its pop position 4", cfg.Offsets)
	}

	if err := os.RemoveAll(filepath.Join(store, kvindex.DirName)); err != nil {
		t.Fatal(err)
	}
	b, c = startBroker(t, store, map[string]string{"storeType": "file"})
	defer stopBroker(t, b)
	again, err := popclient.New(c, "").Pop(context.Background(), popclient.PopRequest{Group: "cg-pos", Topic: "ExpQ", QueueID: 0,
		MaxMsgNums: 32, InvisibleTime: time.Hour, PollTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range again.Messages {
		got = append(got, string(m.Body))
	}
	if strings.Join(got, ",") != "m4,m5" {
		t.Fatalf("pop after the way back: %q, want only the messages never popped (m4, m5)", got)
	}
}

// The export of a slave's store puts what the slave's own pops kept
// (keyspace 0x59) over what it copied from its master, as the slave
// serves it until the master's next sync and as RocketMQ's slave writes
// its own commits and order info into consumerOffset.json and
// consumerOrderInfo.json: the progress of its orderly acks replaces the
// copied offset, a group the master has no offset of gets the slave's,
// and the slave's orderly batch replaces the master's batch of the
// queue.
func TestExportOfASlavesStoreTakesItsOwnPopState(t *testing.T) {
	store := t.TempDir()
	b, c := startBroker(t, store, map[string]string{"rocksdbCQDoubleWriteEnable": "true"})
	for i := 0; i < 6; i++ {
		exportSend(t, c, "ExpS", "m"+strconv.Itoa(i), "")
	}
	waitQueueEnd(t, c, "ExpS", 6)
	exportCommit(t, c, "cg-copied", "ExpS", 1)
	// The master's orderly batch of cg-ord, [0 1], which the store keeps
	// as a slave's copy of it.
	pc := popclient.New(c, "")
	if res, err := pc.Pop(context.Background(), popclient.PopRequest{Group: "cg-ord", Topic: "ExpS", QueueID: 0,
		MaxMsgNums: 2, InvisibleTime: time.Minute, Order: true, AttemptID: "att-master"}); err != nil || len(res.Messages) != 2 {
		t.Fatalf("orderly pop on the master: %v %+v", err, res)
	}
	stopBroker(t, b)

	// The same store as a slave whose master is down: its consumers go on
	// through it.
	b, c = startBroker(t, store, map[string]string{"rocksdbCQDoubleWriteEnable": "true", "brokerRole": "SLAVE", "brokerId": "1",
		"haMasterAddress": "127.0.0.1:1"})
	pc = popclient.New(c, "")
	ctx := context.Background()
	popAndAck := func(group string, want []int64, ack int) popclient.PopResult {
		t.Helper()
		res, err := pc.Pop(ctx, popclient.PopRequest{Group: group, Topic: "ExpS", QueueID: 0,
			MaxMsgNums: len(want), InvisibleTime: time.Minute, Order: true, AttemptID: "att-slave"})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, m := range res.Messages {
			got = append(got, m.Handle.QueueOffset)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("orderly pop of %s on the slave: %v, want %v", group, got, want)
		}
		for _, m := range res.Messages[:ack] {
			if code, err := pc.Ack(ctx, group, m); err != nil || code != remoting.Success {
				t.Fatalf("orderly ack of %d on the slave: %d %v", m.Handle.QueueOffset, code, err)
			}
		}
		return res
	}
	popAndAck("cg-copied", []int64{1, 2}, 2)           // own offset 3 over the copied 1
	popAndAck("cg-new", []int64{0, 1, 2}, 3)           // own offset 3, no copied one
	own := popAndAck("cg-ord", []int64{0, 1, 2, 3}, 1) // own batch [0 1 2 3], offset 0 acked: 1
	stopBroker(t, b)

	mustKvdump(t, "--store", store, "export-rocketmq")
	cfg, err := rmqconfig.Read(store)
	if err != nil {
		t.Fatal(err)
	}
	offsets := map[string]int64{}
	for _, o := range cfg.Offsets {
		if o.Topic == "ExpS" {
			offsets[o.Group] = o.Offset
		}
	}
	if want := map[string]int64{"cg-copied": 3, "cg-new": 3, "cg-ord": 1}; !reflect.DeepEqual(offsets, want) {
		t.Fatalf("consumerOffset.json of ExpS: %v, want %v (the slave's own)", offsets, want)
	}
	// One batch per group, each the slave's (those acknowledged whole
	// stay until the group's next pop, as a master's do).
	var groups []string
	for _, o := range cfg.OrderInfos {
		groups = append(groups, o.Group)
		if o.Group == "cg-ord" && fmt.Sprintf("%+v", o) != fmt.Sprintf("%+v", rmqconfig.OrderInfo{Topic: "ExpS", Group: "cg-ord",
			PopTime: own.PopTime, InvisibleTime: time.Minute.Milliseconds(), Offsets: []int64{0, 1, 2, 3}, LastConsume: own.PopTime, Acked: 1, AttemptID: "att-slave"}) {
			t.Fatalf("consumerOrderInfo.json's batch of cg-ord: %+v, want the slave's popped at %d", o, own.PopTime)
		}
	}
	if fmt.Sprint(groups) != "[cg-copied cg-new cg-ord]" {
		t.Fatalf("consumerOrderInfo.json: %+v, want the slave's batches of cg-copied, cg-new and cg-ord", cfg.OrderInfos)
	}
}
