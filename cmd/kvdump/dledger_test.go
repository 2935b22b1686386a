package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/migrate/dledger/dledgertest"
	"github.com/rocketkv/rocketkv/remoting"
)

// pullAll pulls a queue from offset 0 to its end as GroupA.
func pullAll(t *testing.T, c *remoting.Client, topic string, qid int32) []commitlog.Message {
	t.Helper()
	var out []commitlog.Message
	for off := int64(0); ; {
		resp, err := c.Invoke(context.Background(), remoting.NewRequest(remoting.PullMessage, map[string]string{
			"consumerGroup": "GroupA", "topic": topic, "queueId": strconv.Itoa(int(qid)), "queueOffset": strconv.FormatInt(off, 10),
			"maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
			"subVersion": "0", "expressionType": "TAG",
		}, nil))
		if err != nil {
			t.Fatalf("pull %s/%d@%d: %v", topic, qid, off, err)
		}
		if resp.Code != remoting.Success {
			return out
		}
		ms, err := commitlog.DecodeAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ms...)
		next, _ := strconv.ParseInt(resp.ExtFields["nextBeginOffset"], 10, 64)
		if next <= off {
			return out
		}
		off = next
	}
}

// The whole way: a DLedger store of RocketMQ's messages (the 4.9.8
// fixture's records, wrapped in DLedger entries as a DLedger broker
// writes them) is imported, a broker starts on the result, and consumers
// find every message at the queue offset it had, their committed offsets
// where RocketMQ kept them.
// The DLedger log starts at 0, or two files later (as after retention
// deleted its first files, the entries numbered on).
func TestImportDLedgerThenServe(t *testing.T) {
	for _, start := range []int64{0, 2 * 16384} {
		t.Run("log from "+strconv.FormatInt(start, 10), func(t *testing.T) { importThenServe(t, start) })
	}
}

func importThenServe(t *testing.T, start int64) {
	src := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	root := filepath.Join(t.TempDir(), "dledger-store")
	recs := dledgertest.FromRocketMQ(t, src, root, "n0", dledgertest.NewLog(16384, start, 1000))
	out := filepath.Join(t.TempDir(), "imported")

	text := mustKvdump(t, "--store", root, "import-dledger", "--out", out)
	if !strings.Contains(text, "imported "+strconv.Itoa(len(recs))+" messages") || !strings.Contains(text, "mappedFileSizeCommitLog=16384") {
		t.Fatalf("import said:\n%s", text)
	}

	_, c := startBroker(t, out, map[string]string{"mappedFileSizeCommitLog": "16384", "autoCreateTopicEnable": "false",
		"fileReservedTime": "1048576"})
	type key struct {
		topic string
		qid   int32
	}
	want := map[key][]dledgertest.Record{}
	for _, r := range recs {
		if r.Topic == "TopicA" || r.Topic == "TopicB" {
			want[key{r.Topic, r.QueueID}] = append(want[key{r.Topic, r.QueueID}], r)
		}
	}
	if len(want) < 4 {
		t.Fatalf("the fixture has messages in %d queues of TopicA and TopicB", len(want))
	}
	for k, rs := range want {
		got := pullAll(t, c, k.topic, k.qid)
		at := map[int64]commitlog.Message{}
		for _, m := range got {
			at[m.QueueOffset] = m
		}
		for _, r := range rs {
			if tt := commitlog.TransactionType(r.SysFlag); tt == commitlog.TransactionPrepared || tt == commitlog.TransactionRollback {
				continue // never in a queue
			}
			m, ok := at[r.QueueOffset]
			if !ok || !bytes.Equal(m.Body, r.Body) {
				t.Errorf("%s/%d@%d: pulled %v %q, want %q", k.topic, k.qid, r.QueueOffset, ok, m.Body, r.Body)
			}
			if ok && m.PhyOffset < start {
				t.Errorf("%s/%d@%d: served from %d, below the new log's start %d", k.topic, k.qid, r.QueueOffset, m.PhyOffset, start)
			}
		}
	}
	// Consumer offsets (consumerOffset.json) point at the same messages.
	for q, wantOff := range []int64{5, 6, 7, 8} {
		resp, err := c.Invoke(context.Background(), remoting.NewRequest(remoting.QueryConsumerOffset, map[string]string{
			"consumerGroup": "GroupA", "topic": "TopicA", "queueId": strconv.Itoa(q)}, nil))
		if err != nil || resp.Code != remoting.Success || resp.ExtFields["offset"] != strconv.FormatInt(wantOff, 10) {
			t.Errorf("GroupA on TopicA/%d: %v %+v, want offset %d", q, err, resp, wantOff)
		}
	}
}

func TestImportDLedgerJSON(t *testing.T) {
	src := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	root := filepath.Join(t.TempDir(), "dledger-store")
	recs := dledgertest.FromRocketMQ(t, src, root, "n0", dledgertest.NewLog(16384, 0, 0))
	text := mustKvdump(t, "--json", "--store", root, "import-dledger", "--out", filepath.Join(t.TempDir(), "o"))
	var got struct {
		Kind     string `json:"kind"`
		Messages int    `json:"messages"`
	}
	if err := json.Unmarshal([]byte(text), &got); err != nil || got.Kind != "import-dledger" || got.Messages != len(recs) {
		t.Fatalf("json %q: %+v %v", text, got, err)
	}
	if _, _, err := runKvdump(t, "--store", root, "import-dledger"); err == nil || !strings.Contains(err.Error(), "--out") {
		t.Fatalf("without --out: %v", err)
	}
}

// check-rocketmq names a DLedger store as one a broker refuses, with the
// import to run.
func TestCheckRocketMQRefusesADLedgerStore(t *testing.T) {
	src := testutil.CopyStore(t, filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8", "clean"))
	root := filepath.Join(t.TempDir(), "dledger-store")
	dledgertest.FromRocketMQ(t, src, root, "n0", dledgertest.NewLog(16384, 0, 0))
	out, _, err := runKvdump(t, "--store", root, "check-rocketmq")
	if err == nil || exitStatus(err) != exitDifferences || !strings.Contains(out, "import-dledger") {
		t.Fatalf("check-rocketmq of a DLedger store: %v\n%s", err, out)
	}
}
