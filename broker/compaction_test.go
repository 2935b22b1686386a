package broker

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/popclient"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/pop"
	"github.com/rocketkv/rocketkv/remoting"
)

// pulledKV pulls queue 0 of topic from offset 0 until the queue's end,
// once everything sent is dispatched, and returns what it read as
// "offset:key=body".
func pulledKV(t *testing.T, b *testBroker, c *remoting.Client, topic string) string {
	t.Helper()
	b.caughtUp()
	return pullKV(t, c, topic)
}

// pullKV is pulledKV without the wait for the dispatcher: for a broker
// in a child process, which dispatches its whole CommitLog before it
// serves.
func pullKV(t *testing.T, c *remoting.Client, topic string) string {
	t.Helper()
	var out []string
	for off, pulls := int64(0), 0; pulls < 100; pulls++ {
		r := call(t, c, remoting.PullMessage, pullReq("reader", topic, 0, off, 0, 0, "*"), nil)
		next, _ := strconv.ParseInt(r.ExtFields["nextBeginOffset"], 10, 64)
		switch r.Code {
		case remoting.Success:
			out = appendKV(t, out, r.Body)
		case remoting.PullRetryImmediately:
		default:
			return strings.Join(out, " ")
		}
		off = next
	}
	t.Fatal("the pulls did not reach the queue's end")
	return ""
}

// createCompactedTopic creates a topic of one queue with
// cleanup.policy=COMPACTION.
func createCompactedTopic(t *testing.T, c *remoting.Client, topic string) {
	t.Helper()
	r := call(t, c, remoting.UpdateAndCreateTopic, map[string]string{"topic": topic, "readQueueNums": "1",
		"writeQueueNums": "1", "perm": "6", "attributes": "+cleanup.policy=COMPACTION"}, nil)
	if r.Code != remoting.Success {
		t.Fatalf("create the compacted topic %s: %d %s", topic, r.Code, r.Remark)
	}
}

// A topic created with cleanup.policy=COMPACTION keeps the newest message
// of each key past CommitLog retention and across a restart; its pulls
// and pops read those copies at the offsets the messages were stored
// with, and its minimum offset is the first copy's. A send without a key is refused as
// RocketMQ refuses it; deleting the topic deletes the copies.
func TestCompactedTopicKeepsTheNewestMessageOfEachKey(t *testing.T) {
	store := t.TempDir()
	settings := map[string]string{
		"mappedFileSizeCommitLog": "65536", "cleanResourceInterval": "20",
		"deleteWhen": strconv.Itoa((time.Now().Hour() + 12) % 24), "diskMaxUsedSpaceRatio": "95",
	}
	b := startTestBrokerAt(t, store, settings)
	c := b.client(nil)
	createCompactedTopic(t, c, "CT")
	if r := sendV2(t, c, "CT", 0, "no key", ""); r.Code != remoting.MessageIllegal || r.Remark != "Required message key is missing" {
		t.Fatalf("send without a key: %d %q", r.Code, r.Remark)
	}
	// Keys k0-k2 three times over, 4 KiB each with the filler of another
	// topic, so the early ones are in segments retention deletes.
	filler := strings.Repeat("x", 4096)
	for round := range 3 {
		for k := range 3 {
			mustSend(t, c, "CT", 0, fmt.Sprintf("r%d", round), fmt.Sprintf("KEYS\x01k%d\x02", k))
			for range 2 {
				mustSend(t, c, "FillT", 0, filler, "")
			}
		}
	}
	want := "6:k0=r2 7:k1=r2 8:k2=r2"
	if got := pulledKV(t, b, c, "CT"); got != want {
		t.Fatalf("before retention: %s, want %s", got, want)
	}
	if lo, hi := queueBounds(t, c, "CT"); lo != 0 || hi != 9 {
		t.Fatalf("compacted queue [%d, %d), want [0, 9)", lo, hi)
	}

	if r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte("fileReservedTime=0")); r.Code != remoting.Success {
		t.Fatalf("UPDATE_BROKER_CONFIG: %d %s", r.Code, r.Remark)
	}
	if r := call(t, c, remoting.DeleteExpiredCommitLog, nil, nil); r.Code != remoting.Success {
		t.Fatalf("DELETE_EXPIRED_COMMITLOG: %d %s", r.Code, r.Remark)
	}
	waitFor(t, "retention past the compacted topic's messages", func() bool {
		lo, _ := queueBounds(t, c, "FillT")
		return lo > 12
	})
	if got := pulledKV(t, b, c, "CT"); got != want {
		t.Fatalf("after retention: %s, want %s", got, want)
	}
	// The ConsumeQueue's minimum moved past the deleted records; the
	// queue's is the first copy's.
	if cqMin, err := b.cqs.MinOffset("CT", 0); err != nil || cqMin <= 6 {
		t.Fatalf("ConsumeQueue minimum %d (%v): retention did not reach the compacted messages", cqMin, err)
	}
	if lo, hi := queueBounds(t, c, "CT"); lo != 6 || hi != 9 {
		t.Fatalf("compacted queue after retention [%d, %d), want [6, 9)", lo, hi)
	}
	// A query by key finds the newest message of the key in its copy when
	// its record, and the key index's entries with it, are gone (k0's, at
	// queue offset 6, below the ConsumeQueue's minimum).
	q := call(t, c, remoting.QueryMessage, map[string]string{"topic": "CT", "key": "k0", "maxNum": "32",
		"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(math.MaxInt64, 10)}, nil)
	if ms := decodeRecords(t, q.Body); q.Code != remoting.Success || len(ms) != 1 || string(ms[0].Body) != "r2" || ms[0].QueueOffset != 6 {
		t.Fatalf("query of k0 after retention: %d %s, %d messages", q.Code, q.Remark, len(ms))
	}

	b.stop()
	b = startTestBrokerAt(t, store, settings)
	c = b.client(nil)
	if got := pulledKV(t, b, c, "CT"); got != want {
		t.Fatalf("after a restart: %s, want %s", got, want)
	}
	// A POP consumer reads the copies too, from the first of them for a
	// new group, and its acks commit the offset past the compacted gaps.
	pc, _ := popClient(b)
	req := popclient.PopRequest{Group: "pg", Topic: "CT", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute, InitMode: pop.InitMin}
	res := mustPop(t, pc, req)
	var popped []string
	for _, m := range res.Messages {
		key, _ := commitlog.LookupProperty(m.Properties, "KEYS")
		popped = append(popped, fmt.Sprintf("%d:%s=%s", m.QueueOffset, key, m.Body))
		if code, err := pc.Ack(ctx20(t), "pg", m); code != remoting.Success || err != nil {
			t.Fatalf("ack of %s: %d %v", m.Body, code, err)
		}
	}
	if got := strings.Join(popped, " "); got != want {
		t.Fatalf("popped after retention: %s, want %s", got, want)
	}
	if off := committedOffset(t, c, "pg", "CT", 0); off != 9 {
		t.Fatalf("committed offset after the acks: %d, want 9", off)
	}
	mustSend(t, c, "CT", 0, "r3", "KEYS\x01k1\x02")
	if got, want := pulledKV(t, b, c, "CT"), "6:k0=r2 8:k2=r2 9:k1=r3"; got != want {
		t.Fatalf("after a new message of k1: %s, want %s", got, want)
	}
	// A pull from an offset whose message was compacted away reads on
	// from the next copy.
	r := call(t, c, remoting.PullMessage, pullReq("reader", "CT", 0, 7, 0, 0, "*"), nil)
	if ms := decodeRecords(t, r.Body); r.Code != remoting.Success || len(ms) != 2 || ms[0].QueueOffset != 8 {
		t.Fatalf("pull from a compacted-away offset: %d, %d messages", r.Code, len(ms))
	}

	if r := call(t, c, remoting.DeleteTopicInBroker, map[string]string{"topic": "CT"}, nil); r.Code != remoting.Success {
		t.Fatalf("delete the topic: %d %s", r.Code, r.Remark)
	}
	if off, ok, err := b.compaction.MinOffset("CT", 0); ok || err != nil {
		t.Fatalf("a copy at %d outlived the topic (%v)", off, err)
	}
}

// A slave learns that a topic of its master is compacted at its next
// sync; the records its dispatcher indexed before then are copied at that
// sync, and later ones as they are indexed.
func TestSlaveCopiesACompactedTopicItLearnsOfLate(t *testing.T) {
	master := startTestBroker(t, withHA(nil))
	slave := startSlaveOf(t, master, map[string]string{"slaveReadEnable": "true"})
	mc := master.client(nil)
	createCompactedTopic(t, mc, "CT")
	for _, kv := range []string{"k0=r0", "k1=r0", "k0=r1"} {
		key, value, _ := strings.Cut(kv, "=")
		mustSend(t, mc, "CT", 0, value, "KEYS\x01"+key+"\x02")
	}
	waitReplicated(t, master, slave)
	slave.caughtUp()
	if off, ok, err := slave.compaction.MinOffset("CT", 0); ok || err != nil {
		t.Fatalf("the slave copied the record at %d before it knew the topic (%v): the test does not test what it says", off, err)
	}
	syncSlave(t, slave, master)
	sc := slave.client(nil)
	if got, want := pulledKV(t, slave, sc, "CT"), "1:k1=r0 2:k0=r1"; got != want {
		t.Fatalf("the slave's copies after the sync: %s, want %s", got, want)
	}
	mustSend(t, mc, "CT", 0, "r1", "KEYS\x01k1\x02")
	waitReplicated(t, master, slave)
	if got, want := pulledKV(t, slave, sc, "CT"), "2:k0=r1 3:k1=r1"; got != want {
		t.Fatalf("the slave's copies after a later message: %s, want %s", got, want)
	}
	// The master deletes the topic: the slave drops its copies at the
	// next sync.
	mustDeleteTopic(t, mc, "CT")
	syncSlave(t, slave, master)
	if off, ok, err := slave.compaction.MinOffset("CT", 0); ok || err != nil {
		t.Fatalf("a copy at %d outlived the master's deletion of the topic on the slave (%v)", off, err)
	}
	if slave.compaction.Compacts("CT") {
		t.Fatal("the slave still compacts the deleted topic")
	}
}

// A compacted topic the master deletes and creates again between two of
// its slave's copies of the tables: the slave's copies of the old topic
// go with its queue's restart, so a pull of the slave reads the new
// topic's messages, the first of a key the old topic had at a later
// offset included.
func TestSlaveCompactedTopicCreatedAgain(t *testing.T) {
	master, slave := startMasterAndSlave(t, nil)
	mc, sc := master.client(nil), slave.client(nil)
	send := func(kvs ...string) {
		t.Helper()
		for _, kv := range kvs {
			key, value, _ := strings.Cut(kv, "=")
			mustSend(t, mc, "CT", 0, value, "KEYS\x01"+key+"\x02")
		}
		waitReplicated(t, master, slave)
	}
	createCompactedTopic(t, mc, "CT")
	send("k0=r0", "k1=r0", "k0=r1")
	syncSlave(t, slave, master)
	if got, want := slaveKV(t, slave, sc, "CT"), "1:k1=r0 2:k0=r1"; got != want {
		t.Fatalf("the slave's copies before the deletion: %s, want %s", got, want)
	}
	mustDeleteTopic(t, mc, "CT")
	createCompactedTopic(t, mc, "CT")
	send("k0=n0")
	want := pulledKV(t, master, mc, "CT")
	if want != "0:k0=n0" {
		t.Fatalf("the master serves %s after creating the topic again", want)
	}
	if got := slaveKV(t, slave, sc, "CT"); got != want {
		t.Errorf("the slave serves %s, the master %s", got, want)
	}
}

// slaveKV is pulledKV for a slave that knows its master, which answers a
// pull at its queue's end PULL_RETRY_IMMEDIATELY: one pull from 0.
func slaveKV(t *testing.T, slave *testBroker, c *remoting.Client, topic string) string {
	t.Helper()
	slave.caughtUp()
	r := call(t, c, remoting.PullMessage, pullReq("reader", topic, 0, 0, 0, 0, "*"), nil)
	if r.Code != remoting.Success {
		t.Fatalf("pull %s/0 at 0 from the slave: %d %s", topic, r.Code, r.Remark)
	}
	return strings.Join(appendKV(t, nil, r.Body), " ")
}

// appendKV appends the messages of a pull's body to out as
// "offset:key=body".
func appendKV(t *testing.T, out []string, body []byte) []string {
	t.Helper()
	for _, m := range decodeRecords(t, body) {
		key, _ := commitlog.LookupProperty(m.Properties, "KEYS")
		out = append(out, fmt.Sprintf("%d:%s=%s", m.QueueOffset, key, m.Body))
	}
	return out
}

// A pop of a compacted topic spans at most one checkpoint's offsets
// (kvindex.MaxCheckpointSpan), however far apart the copies lie: the
// next pop goes on from where the span ended, and the acks of both
// commit the offset past the queue's last message.
func TestPopOfSparseCompactedCopies(t *testing.T) {
	b := startTestBroker(t, nil)
	c := b.client(nil)
	createCompactedTopic(t, c, "CS")
	const updates = kvindex.MaxCheckpointSpan + 900
	mustSend(t, c, "CS", 0, "a", "KEYS\x01a\x02")
	for i := range updates {
		mustSend(t, c, "CS", 0, strconv.Itoa(i), "KEYS\x01b\x02")
	}
	mustSend(t, c, "CS", 0, "c", "KEYS\x01c\x02")
	b.caughtUp()
	pc, _ := popClient(b)
	req := popclient.PopRequest{Group: "pg", Topic: "CS", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Minute, InitMode: pop.InitMin}
	var popped []string
	for range 2 {
		for _, m := range mustPop(t, pc, req).Messages {
			popped = append(popped, fmt.Sprintf("%d:%s", m.QueueOffset, m.Body))
			if code, err := pc.Ack(ctx20(t), "pg", m); code != remoting.Success || err != nil {
				t.Fatalf("ack of %s: %d %v", m.Body, code, err)
			}
		}
	}
	want := fmt.Sprintf("0:a %d:%d %d:c", updates, updates-1, updates+1)
	if got := strings.Join(popped, " "); got != want {
		t.Fatalf("popped %s, want %s (the first pop ending at offset %d)", got, want, kvindex.MaxCheckpointSpan)
	}
	if off := committedOffset(t, c, "pg", "CS", 0); off != updates+2 {
		t.Fatalf("committed offset after the acks: %d, want %d", off, updates+2)
	}
}

// A message of a compacted topic popped and not acknowledged is
// re-delivered once its invisible time is over, even when retention
// deleted its record meanwhile: the revive reads the copy.
func TestReviveOfACompactedMessageAfterRetention(t *testing.T) {
	b := startTestBroker(t, map[string]string{
		"mappedFileSizeCommitLog": "65536", "cleanResourceInterval": "20",
		"deleteWhen": strconv.Itoa((time.Now().Hour() + 12) % 24), "diskMaxUsedSpaceRatio": "95",
	})
	c := b.client(nil)
	createCompactedTopic(t, c, "CR")
	mustSend(t, c, "CR", 0, "v", "KEYS\x01k\x02")
	filler := strings.Repeat("x", 4096)
	for range 40 {
		mustSend(t, c, "FillT", 0, filler, "")
	}
	b.caughtUp()
	pc, _ := popClient(b)
	req := popclient.PopRequest{Group: "rg", Topic: "CR", QueueID: 0, MaxMsgNums: 32, InvisibleTime: time.Second,
		InitMode: pop.InitMin, PollTime: time.Second}
	if got := bodies(mustPop(t, pc, req).Messages); fmt.Sprint(got) != "[v]" {
		t.Fatalf("first pop: %v", got)
	}
	if r := call(t, c, remoting.UpdateBrokerConfig, nil, []byte("fileReservedTime=0")); r.Code != remoting.Success {
		t.Fatalf("UPDATE_BROKER_CONFIG: %d %s", r.Code, r.Remark)
	}
	if r := call(t, c, remoting.DeleteExpiredCommitLog, nil, nil); r.Code != remoting.Success {
		t.Fatalf("DELETE_EXPIRED_COMMITLOG: %d %s", r.Code, r.Remark)
	}
	waitFor(t, "retention past the popped message's record", func() bool { return b.clog.MinOffset() > 0 })
	var again []popclient.Message
	for deadline := time.Now().Add(20 * time.Second); len(again) == 0 && time.Now().Before(deadline); {
		again = mustPop(t, pc, req).Messages
	}
	if len(again) != 1 || string(again[0].Body) != "v" || again[0].ReconsumeTimes != 1 {
		t.Fatalf("after its invisible time: %d messages, want v again, reconsumed once", len(again))
	}
}

// The copies of a compacted topic are as durable as its ConsumeQueue: a
// broker SIGKILLed right after its last acknowledged send serves, once
// restarted, the newest message of each key, whether the copies were
// written before the kill or by the dispatch of the restart.
func TestCompactedCopiesSurviveSIGKILL(t *testing.T) {
	cb := startChildBroker(t, t.TempDir(), freeTCPPort(t))
	c := cb.dial()
	createCompactedTopic(t, c, "CK")
	for round := range 3 {
		for k := range 4 {
			mustSend(t, c, "CK", 0, fmt.Sprintf("k%d-r%d", k, round), fmt.Sprintf("KEYS\x01k%d\x02", k))
		}
	}
	cb.kill()
	cb.start()
	want := "8:k0=k0-r2 9:k1=k1-r2 10:k2=k2-r2 11:k3=k3-r2"
	if got := pullKV(t, cb.dial(), "CK"); got != want {
		t.Fatalf("after a SIGKILL and a restart: %s, want %s", got, want)
	}
}
