package broker

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/remoting"
)

// checkLayouts sends CHECK_ROCKSDB_CQ_WRITE_PROGRESS and decodes the answer.
func checkLayouts(t *testing.T, tb *testBroker, ext map[string]string) cqCheckResult {
	t.Helper()
	c := tb.client(nil)
	resp := call(t, c, remoting.CheckRocksdbCqWriteProgress, ext, nil)
	if resp.Code != remoting.Success {
		t.Fatalf("check: %d %s", resp.Code, resp.Remark)
	}
	var r cqCheckResult
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		t.Fatalf("check body %q: %v", resp.Body, err)
	}
	return r
}

var waitForCheck = map[string]string{"topic": "", "checkStoreTime": "0", cqCheckWaitField: "true"}

// A double-writing broker's layouts agree after sends to several queues;
// the check names the queue where they stop agreeing; RocketMQ's answers
// come back without double-write; a check without rocketkvWait answers
// IN_PROGRESS, as RocketMQ's does, and runs to its end in the background.
func TestCheckCQWriteProgress(t *testing.T) {
	tb := startTestBroker(t, map[string]string{"rocksdbCQDoubleWriteEnable": "true"})
	c := tb.client(nil)
	for i := 0; i < 30; i++ {
		mustSend(t, c, fmt.Sprintf("T%d", i%3), int32(i%4), "body", "TAGS\x01a\x02")
	}
	tb.caughtUp()
	r := checkLayouts(t, tb, waitForCheck)
	if r.CheckStatus != cqCheckOK || !strings.Contains(r.CheckResult, "12 queues") {
		t.Fatalf("check of agreeing layouts: %+v", r)
	}

	r = checkLayouts(t, tb, map[string]string{"topic": "T1", "checkStoreTime": "0"})
	if r.CheckStatus != cqCheckInProgress {
		t.Fatalf("check without rocketkvWait: %+v, want IN_PROGRESS", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for tb.cqCheck.running() {
		if time.Now().After(deadline) {
			t.Fatal("the background check never ended")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// The file layout gains an entry the Pebble one lacks.
	tail, err := tb.fileCQ.Get("T2", 1, 0, 1)
	if err != nil || len(tail) != 1 {
		t.Fatalf("file entry: %v %v", tail, err)
	}
	max, _ := tb.fileCQ.MaxOffset("T2", 1)
	bogus := tail[0]
	bogus.QueueOffset, bogus.PhyOffset = max, tb.clog.MaxOffset()+1000
	if err := tb.fileCQ.Put([]cq.Dispatch{{Topic: "T2", QueueID: 1, Entry: bogus}}); err != nil {
		t.Fatal(err)
	}
	r = checkLayouts(t, tb, waitForCheck)
	if r.CheckStatus != cqCheckNotOK || !strings.Contains(r.CheckResult, "T2") {
		t.Fatalf("check of differing layouts: %+v", r)
	}
	if r := checkLayouts(t, tb, map[string]string{"topic": "T0", "checkStoreTime": "0", cqCheckWaitField: "true"}); r.CheckStatus != cqCheckOK {
		t.Fatalf("check of T0 alone: %+v", r)
	}

	for _, tc := range []struct {
		storeType string
		status    int
	}{{"kv", cqCheckOK}, {"file", cqCheckOK}} {
		single := startTestBroker(t, map[string]string{"storeType": tc.storeType})
		if r := checkLayouts(t, single, waitForCheck); r.CheckStatus != tc.status {
			t.Errorf("storeType=%s without double-write: %+v, want status %d", tc.storeType, r, tc.status)
		}
	}
}

// A store moves from the Pebble ConsumeQueue to the file one and back
// through double-write with restarts, and consumers see every message at
// the offset it was given, whichever layout serves them.
func TestDoubleWriteSwitchesReads(t *testing.T) {
	store := t.TempDir()
	sent := map[int32][]string{}
	steps := []map[string]string{
		{"storeType": "kv"},
		{"storeType": "kv", "rocksdbCQDoubleWriteEnable": "true"},
		{"storeType": "file", "rocksdbCQDoubleWriteEnable": "true"},
		{"storeType": "file"},
		{"storeType": "kv", "rocksdbCQDoubleWriteEnable": "true"},
		{"storeType": "kv"},
	}
	for i, o := range steps {
		tb := startTestBrokerAt(t, store, o)
		c := tb.client(nil)
		if i == 0 {
			createTopic(t, c, "Moving", 2, 2)
		}
		for q := int32(0); q < 2; q++ {
			got := pullAll(t, tb, c, "Moving", q)
			if len(got) != len(sent[q]) {
				t.Fatalf("step %d %v: queue %d holds %d messages, want %d", i, o, q, len(got), len(sent[q]))
			}
			for j, m := range got {
				if m.QueueOffset != int64(j) || string(m.Body) != sent[q][j] {
					t.Fatalf("step %d %v: queue %d offset %d: %q at %d, want %q", i, o, q, j, m.Body, m.QueueOffset, sent[q][j])
				}
			}
			for k := 0; k < 3; k++ {
				body := fmt.Sprintf("step %d message %d", i, k)
				mustSend(t, c, "Moving", q, body, "")
				sent[q] = append(sent[q], body)
			}
		}
		info := runtimeInfo(t, c)
		if want := strconv.FormatBool(o["rocksdbCQDoubleWriteEnable"] == "true"); info["consumeQueueReads"] != o["storeType"] || info["consumeQueueDoubleWrite"] != want {
			t.Errorf("step %d %v: runtime info reads %q, double-write %q", i, o, info["consumeQueueReads"], info["consumeQueueDoubleWrite"])
		}
		if o["rocksdbCQDoubleWriteEnable"] == "true" {
			tb.caughtUp()
			if r := checkLayouts(t, tb, waitForCheck); r.CheckStatus != cqCheckOK {
				t.Fatalf("step %d %v: %+v", i, o, r)
			}
		}
		tb.stop()
	}
}
