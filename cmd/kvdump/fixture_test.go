package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// fixtureView is the part of the 4.9.8 fixture's expected.json kvdump is
// compared with: RocketMQ's own read-back of its store.
type fixtureView struct {
	View struct {
		CommitLog struct {
			MinOffset int64 `json:"minOffset"`
			MaxOffset int64 `json:"maxOffset"`
		} `json:"commitlog"`
		Messages []struct {
			Topic           string            `json:"topic"`
			QueueID         int32             `json:"queueId"`
			QueueOffset     int64             `json:"queueOffset"`
			CommitLogOffset int64             `json:"commitLogOffset"`
			SysFlag         int32             `json:"sysFlag"`
			BornHost        string            `json:"bornHost"`
			MsgID           string            `json:"msgId"`
			Tags            string            `json:"tags"`
			Keys            string            `json:"keys"`
			Properties      map[string]string `json:"properties"`
			BodyLength      int               `json:"bodyLength"`
		} `json:"messages"`
		ConsumeQueues []json.RawMessage `json:"consumeQueues"`
		IndexQueries  []struct {
			Topic   string  `json:"topic"`
			Key     string  `json:"key"`
			Offsets []int64 `json:"commitLogOffsets"`
		} `json:"indexQueries"`
	} `json:"view"`
}

// readFixtureView reads the expected.json of the fixture store fix.
func readFixtureView(t *testing.T, fix string) fixtureView {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fix, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v fixtureView
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s/expected.json: %v", fix, err)
	}
	return v
}

type fixtureQueue struct {
	Topic     string `json:"topic"`
	QueueID   int32  `json:"queueId"`
	MinOffset int64  `json:"minOffset"`
	MaxOffset int64  `json:"maxOffset"`
	// Entries is [queueOffset, commitLogOffset, size, tagsCode] per entry.
	Entries [][]int64
}

// On the store Apache RocketMQ 4.9.8 wrote, indexed by the dispatcher,
// kvdump shows RocketMQ's own view: queue ranges and entries, the records
// they point at, key lookups; verify finds nothing wrong.
func TestRocketMQFixture(t *testing.T) {
	fix := filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8")
	want := readFixtureView(t, fix)
	var queues []fixtureQueue
	for _, r := range want.View.ConsumeQueues {
		var q fixtureQueue
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r, &q); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(r, &m); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(m["entries[queueOffset,commitLogOffset,size,tagsCode]"], &q.Entries); err != nil {
			t.Fatal(err)
		}
		// RocketMQ lists the empty queues of the delay levels, whose files
		// exist; the KV index has no key for a queue never written.
		if q.MaxOffset > 0 {
			queues = append(queues, q)
		}
	}
	root := testutil.CopyStore(t, filepath.Join(fix, "clean"))
	openTestStore(t, root, 0).close(t) // build the index, as the broker does on first start

	sum := jsonLines(t, mustKvdump(t, "--store", root, "--json", "summary"))
	last := sum[len(sum)-1]
	topics := map[string]bool{}
	for _, q := range queues {
		topics[q.Topic] = true
	}
	end := want.View.CommitLog.MaxOffset
	for k, v := range map[string]int64{"dispatched": end, "logMinOffset": 0, "logMaxOffset": end, "lag": 0,
		"queues": int64(len(queues)), "topics": int64(len(topics))} {
		if fmt.Sprint(last[k]) != strconv.FormatInt(v, 10) {
			t.Errorf("summary %s = %v, want %d", k, last[k], v)
		}
	}

	byPhy := map[int64]int{}
	for i, m := range want.View.Messages {
		byPhy[m.CommitLogOffset] = i
	}
	checked, total := 0, 0
	for _, q := range queues {
		total += len(q.Entries)
	}
	for topic := range topics {
		lines := jsonLines(t, mustKvdump(t, "--store", root, "--json", "cq", "--topic", topic, "--limit", "0", "--with-message"))
		var gotQueues, gotEntries []string
		for _, l := range lines {
			switch l["kind"] {
			case "queue":
				gotQueues = append(gotQueues, fmt.Sprintf("%v/%v [%v,%v)", l["topic"], l["queueId"], l["minOffset"], l["maxOffset"]))
			case "entry":
				gotEntries = append(gotEntries, fmt.Sprintf("%v/%v %v %v %v %v", l["topic"], l["queueId"], l["queueOffset"], l["phyOffset"], l["size"], l["tagsCode"]))
				phy, _ := strconv.ParseInt(fmt.Sprint(l["phyOffset"]), 10, 64)
				checkFixtureMessage(t, l, want.View.Messages[byPhy[phy]])
				checked++
			}
		}
		var wantQueues, wantEntries []string
		for _, q := range queues {
			if q.Topic != topic {
				continue
			}
			wantQueues = append(wantQueues, fmt.Sprintf("%s/%d [%d,%d)", q.Topic, q.QueueID, q.MinOffset, q.MaxOffset))
			for _, e := range q.Entries {
				wantEntries = append(wantEntries, fmt.Sprintf("%s/%d %d %d %d %d", q.Topic, q.QueueID, e[0], e[1], e[2], e[3]))
			}
		}
		if !slices.Equal(gotQueues, wantQueues) || !slices.Equal(gotEntries, wantEntries) {
			t.Errorf("cq %s:\n%s\n%s\nRocketMQ:\n%s\n%s", topic, strings.Join(gotQueues, "\n"), strings.Join(gotEntries, "\n"),
				strings.Join(wantQueues, "\n"), strings.Join(wantEntries, "\n"))
		}
	}

	if checked != total || total < 90 {
		t.Errorf("compared %d entries with their records, RocketMQ has %d", checked, total)
	}

	for _, q := range want.View.IndexQueries {
		var got []int64
		for _, l := range jsonLines(t, mustKvdump(t, "--store", root, "--json", "keys", "--topic", q.Topic, "--key", q.Key, "--kind", "key", "--limit", "0")) {
			phy, _ := strconv.ParseInt(fmt.Sprint(l["phyOffset"]), 10, 64)
			got = append(got, phy)
		}
		slices.Sort(got)
		w := slices.Clone(q.Offsets)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("keys %s/%s: %v, RocketMQ %v", q.Topic, q.Key, got, w)
		}
	}

	out := mustKvdump(t, "--store", root, "verify", "--log-scan")
	if !strings.HasSuffix(out, fmt.Sprintf("against the CommitLog [0, %d), dispatched %d: 0 differences\n", end, end)) {
		t.Errorf("verify of RocketMQ's store:\n%s", out)
	}
}

// checkFixtureMessage compares kvdump's view of a record with RocketMQ's.
func checkFixtureMessage(t *testing.T, l map[string]any, m struct {
	Topic           string            `json:"topic"`
	QueueID         int32             `json:"queueId"`
	QueueOffset     int64             `json:"queueOffset"`
	CommitLogOffset int64             `json:"commitLogOffset"`
	SysFlag         int32             `json:"sysFlag"`
	BornHost        string            `json:"bornHost"`
	MsgID           string            `json:"msgId"`
	Tags            string            `json:"tags"`
	Keys            string            `json:"keys"`
	Properties      map[string]string `json:"properties"`
	BodyLength      int               `json:"bodyLength"`
}) {
	t.Helper()
	msg, ok := l["message"].(map[string]any)
	if !ok {
		t.Errorf("entry %v without its message", l)
		return
	}
	got := fmt.Sprintf("%v %v/%v@%v %v keys=%v tags=%v", msg["offsetMsgId"], msg["topic"], msg["queueId"], msg["queueOffset"], msg["msgId"], msg["keys"], msg["tags"])
	want := fmt.Sprintf("%s %s/%d@%d %s keys=%s tags=%s", m.MsgID, m.Topic, m.QueueID, m.QueueOffset, m.Properties["UNIQ_KEY"], m.Keys, m.Tags)
	if got != want {
		t.Errorf("record at %d:\n got %s\nwant %s", m.CommitLogOffset, got, want)
	}
	// Java prints IPv4 hosts as kvdump does; the body of a compressed
	// message is stored compressed.
	if m.SysFlag&0x10 == 0 && fmt.Sprint(msg["bornHost"]) != m.BornHost {
		t.Errorf("record at %d: born host %v, RocketMQ %s", m.CommitLogOffset, msg["bornHost"], m.BornHost)
	}
	if m.SysFlag&0x1 == 0 && fmt.Sprint(msg["bodySize"]) != strconv.Itoa(m.BodyLength) {
		t.Errorf("record at %d: body size %v, RocketMQ %d", m.CommitLogOffset, msg["bodySize"], m.BodyLength)
	}
}

// In the store Apache RocketMQ 4.9.8 wrote, transaction #0 committed, #1
// rolled back (an op message is all that says so) and #2 is open: txn
// shows #0's commit and #1 as ended by its op message.
func TestRocketMQFixtureTransactionEnds(t *testing.T) {
	fix := filepath.Join(testutil.FixturesDir(t), "rocketmq-store-4.9.8")
	want := readFixtureView(t, fix)
	var halves, ops []int64 // CommitLog offsets by queue offset
	for _, m := range want.View.Messages {
		switch m.Topic {
		case "RMQ_SYS_TRANS_HALF_TOPIC":
			halves = append(halves, m.CommitLogOffset)
		case "RMQ_SYS_TRANS_OP_HALF_TOPIC":
			ops = append(ops, m.CommitLogOffset)
		}
	}
	if len(halves) != 3 || len(ops) != 2 {
		t.Fatalf("the fixture has %d half and %d op messages, want 3 and 2", len(halves), len(ops))
	}
	root := testutil.CopyStore(t, filepath.Join(fix, "clean"))
	// The dispatcher's transaction hooks, with the op messages' as the
	// transaction service reads them (tag "d", the half queue offsets in
	// the body).
	withOps := func(o *kvindex.DispatcherOptions) {
		withTxnHooks(o)
		tx := o.DB.Transactions()
		o.Hooks[meta.TransOpHalfTopic] = kvindex.HookFunc(func(b *pebble.Batch, m *commitlog.Message) error {
			if tag, _ := commitlog.LookupProperty(m.Properties, commitlog.PropertyTags); tag != "d" {
				return nil
			}
			for _, f := range strings.Split(string(m.Body), ",") {
				if off, err := strconv.ParseInt(f, 10, 64); err == nil {
					if err := tx.AddRocketMQOp(b, off, m.PhyOffset); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	openTestStore(t, root, 0, withOps).close(t)

	var got []string
	for _, l := range jsonLines(t, mustKvdump(t, "--store", root, "--json", "txn")) {
		switch l["kind"] {
		case "half":
			got = append(got, fmt.Sprintf("open %v %v", l["phyOffset"], l["ended"]))
		case "end":
			got = append(got, fmt.Sprintf("end %v %v", l["halfPhyOffset"], l["state"]))
		case "op-end":
			got = append(got, fmt.Sprintf("op-end %v %v %v", l["halfQueueOffset"], l["halfPhyOffset"], l["opPhyOffset"]))
		default:
			t.Errorf("unexpected line %v", l)
		}
	}
	// No checker ran: the ended halves are still listed open, with their
	// ends. Op messages are dispatched in CommitLog order: the commit's op
	// first, then the rollback's.
	wantLines := []string{
		fmt.Sprintf("open %d COMMIT_MESSAGE", halves[0]),
		fmt.Sprintf("open %d OP_MESSAGE", halves[1]),
		fmt.Sprintf("open %d <nil>", halves[2]),
		fmt.Sprintf("end %d COMMIT_MESSAGE", halves[0]),
		fmt.Sprintf("op-end 1 %d %d", halves[1], ops[1]),
	}
	if !slices.Equal(got, wantLines) {
		t.Errorf("txn --json:\n got %q\nwant %q", got, wantLines)
	}
	table := mustKvdump(t, "--store", root, "txn", "--ended")
	if !strings.Contains(table, strconv.FormatInt(halves[1], 10)+"     OP_MESSAGE") {
		t.Errorf("txn --ended does not show half %d ended by its op message:\n%s", halves[1], table)
	}
	// summary counts the three halves (no checker ran) and both op
	// messages (the rollback's is the only record of its end) beside the
	// one end the index recorded.
	if got := mustKvdump(t, "--store", root, "summary"); !regexp.MustCompile(`(?m)^transactions +3 half messages open, 1 ended, 2 op messages$`).MatchString(got) {
		t.Errorf("summary does not count the op messages:\n%s", got)
	}
}
