package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/migrate/filecq"
	"github.com/rocketkv/rocketkv/remoting"
)

// dwStore is a stopped store a double-writing broker wrote, and what was
// sent to it.
type dwStore struct {
	root string
	// count is the number of messages sent per "topic/queue".
	count map[string]int64
	// entries is the number of messages sent.
	entries int64
	// from is a time (ms) between the first two messages of Dw/0 and
	// every later message.
	from int64
}

// dwUnits is the broker's mappedFileSizeConsumeQueue in units: not
// RocketMQ's default, so a kvdump that does not read it from the files
// cannot open them.
const dwUnits = 100

// buildDoubleWriteStore runs an in-process broker with both ConsumeQueue
// layouts, sends to queues of two topics, and shuts it down cleanly.
func buildDoubleWriteStore(t *testing.T) *dwStore {
	t.Helper()
	s := &dwStore{root: filepath.Join(t.TempDir(), "store"), count: map[string]int64{}}
	b, c := startBroker(t, s.root, map[string]string{
		"mappedFileSizeConsumeQueue": strconv.Itoa(dwUnits * filecq.UnitSize),
		"rocksdbCQDoubleWriteEnable": "true",
	})
	ctx := context.Background()
	send := func(topic string, qid int32) {
		t.Helper()
		resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.SendMessageV2, map[string]string{
			"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": strconv.Itoa(int(qid)), "f": "0",
			"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": "TAGS\x01red\x02",
		}, []byte("payload")))
		if err != nil || resp.Code != remoting.Success {
			t.Fatalf("send to %s/%d: %v %+v", topic, qid, err, resp)
		}
		s.count[fmt.Sprintf("%s/%d", topic, qid)]++
		s.entries++
	}
	send("Dw", 0)
	send("Dw", 0)
	time.Sleep(5 * time.Millisecond)
	s.from = time.Now().UnixMilli()
	time.Sleep(5 * time.Millisecond)
	for _, q := range []int32{1, 2, 3, 0, 1} {
		send("Dw", q)
	}
	send("Other", 0) // the CommitLog's last record
	// A send is answered before its message is indexed.
	for q, n := range s.count {
		topic, id, _ := strings.Cut(q, "/")
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := c.Invoke(ctx, remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": id}, nil))
			if err != nil {
				t.Fatal(err)
			}
			if resp.ExtFields["offset"] == strconv.FormatInt(n, 10) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: max offset %s, want %d", q, resp.ExtFields["offset"], n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	c.Close()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// copyStore copies the store to a new root, for a test to damage.
func (s *dwStore) copyStore(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(dst, os.DirFS(s.root)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// openFileLayout opens a stopped store's file ConsumeQueue for writing.
func openFileLayout(t *testing.T, root string) *filecq.Store {
	t.Helper()
	f, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: dwUnits})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func closeFileLayout(t *testing.T, f *filecq.Store) {
	t.Helper()
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// compareResult is compare-cq's JSON result line.
func compareResult(t *testing.T, ok bool, topics, queues int, entries, diffs int64, queuesWithDiffs int) map[string]any {
	return asJSON(t, map[string]any{"kind": "result", "ok": ok, "topics": topics, "queues": queues, "entries": entries,
		"differences": diffs, "queuesWithDifferences": queuesWithDiffs})
}

// The layouts a double-writing broker left agree: exit status 0, the
// report's summary line, and in --json one result line; the file layout
// is read with the units per file its files have.
func TestCompareCQAgree(t *testing.T) {
	s := buildDoubleWriteStore(t)
	if len(s.count) != 5 || s.entries != 8 {
		t.Fatalf("sent %d messages to %v", s.entries, s.count)
	}
	want := "kv and file agree: 2 topics, 5 queues, 8 entries compared\n"
	if got := mustKvdump(t, "--store", s.root, "compare-cq"); got != want {
		t.Errorf("compare-cq:\n%s\nwant:\n%s", got, want)
	}
	checkJSON(t, "compare-cq --json", jsonLines(t, mustKvdump(t, "--store", s.root, "--json", "compare-cq")),
		compareResult(t, true, 2, 5, 8, 0, 0))
	want = "kv and file agree: 1 topics, 1 queues, 1 entries compared\n"
	if got := mustKvdump(t, "--store", s.root, "compare-cq", "--topic", "Other"); got != want {
		t.Errorf("compare-cq --topic Other:\n%s\nwant:\n%s", got, want)
	}
	// --from leaves out Dw/0's first entry (the last one stored at or
	// before it is still compared).
	want = "kv and file agree: 2 topics, 5 queues, 7 entries compared\n"
	if got := mustKvdump(t, "--store", s.root, "compare-cq", "--from", strconv.FormatInt(s.from, 10)); got != want {
		t.Errorf("compare-cq --from:\n%s\nwant:\n%s", got, want)
	}
}

// An entry the file layout has and the Pebble one lacks makes compare-cq
// exit with status 1 and name the queue, in both output modes; --topic
// leaves the other topic out.
func TestCompareCQExtraFileEntry(t *testing.T) {
	s := buildDoubleWriteStore(t)
	root := s.copyStore(t)
	f := openFileLayout(t, root)
	last, err := f.Get("Other", 0, 0, 1)
	if err != nil || len(last) != 1 {
		t.Fatalf("Other/0: %v %v", last, err)
	}
	n := s.count["Dw/0"]
	extra := last[0]
	extra.QueueOffset = n
	if err := f.Put([]cq.Dispatch{{Topic: "Dw", QueueID: 0, Entry: extra}}); err != nil {
		t.Fatal(err)
	}
	if got, err := f.MaxOffset("Dw", 0); err != nil || got != n+1 {
		t.Fatalf("Dw/0 in the file layout ends at %d (%v), want %d", got, err, n+1)
	}
	closeFileLayout(t, f)

	out, stderr, err := runKvdump(t, "--store", root, "compare-cq")
	if exitStatus(err) != exitDifferences {
		t.Fatalf("compare-cq of differing layouts: %v (exit status %d)\nstderr: %s", err, exitStatus(err), stderr)
	}
	if want := "1 differences: the kv and file ConsumeQueues differ"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	problem := fmt.Sprintf("max offset: kv %d, file %d", n, n+1)
	want := "kv and file differ: 1 differences in 1 of 5 queues (2 topics, 8 entries compared)\nDw/0: " + problem + "\n"
	if out != want {
		t.Errorf("compare-cq:\n%s\nwant:\n%s", out, want)
	}

	out, _, err = runKvdump(t, "--store", root, "--json", "compare-cq")
	if exitStatus(err) != exitDifferences {
		t.Fatalf("compare-cq --json of differing layouts: %v", err)
	}
	checkJSON(t, "compare-cq --json", jsonLines(t, out),
		asJSON(t, map[string]any{"kind": "difference", "topic": "Dw", "queueId": 0, "problem": problem}),
		compareResult(t, false, 2, 5, 8, 1, 1))

	if out, _, err := runKvdump(t, "--store", root, "compare-cq", "--topic", "Dw"); exitStatus(err) != exitDifferences || !strings.Contains(out, "Dw/0: "+problem) {
		t.Errorf("compare-cq --topic Dw: %v\n%s", err, out)
	}
	want = "kv and file agree: 1 topics, 1 queues, 1 entries compared\n"
	if got := mustKvdump(t, "--store", root, "compare-cq", "--topic", "Other"); got != want {
		t.Errorf("compare-cq --topic Other:\n%s\nwant:\n%s", got, want)
	}
}

// An entry whose tagsCode differs is named with its queue offset; --from
// past it leaves it out of the comparison.
func TestCompareCQEntryDiffers(t *testing.T) {
	s := buildDoubleWriteStore(t)
	root := s.copyStore(t)
	f := openFileLayout(t, root)
	first, err := f.Get("Dw", 0, 0, 1)
	if err != nil || len(first) != 1 {
		t.Fatalf("Dw/0: %v %v", first, err)
	}
	closeFileLayout(t, f)
	e := first[0]
	// The unit of offset 0: phy int64 | size int32 | tagsCode int64.
	path := filepath.Join(root, "consumequeue", "Dw", "0", filecq.FileName(0))
	file, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.WriteAt(binary.BigEndian.AppendUint64(nil, uint64(e.TagsCode+1)), 12); err != nil {
		t.Fatal(err)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}

	problem := fmt.Sprintf("entry: kv {phy %d size %d tags %d}, file {phy %d size %d tags %d}",
		e.PhyOffset, e.Size, e.TagsCode, e.PhyOffset, e.Size, e.TagsCode+1)
	out, stderr, err := runKvdump(t, "--store", root, "compare-cq")
	if exitStatus(err) != exitDifferences {
		t.Fatalf("compare-cq: %v\nstderr: %s", err, stderr)
	}
	// The rest of Dw/0 is skipped after its first difference.
	want := "kv and file differ: 1 differences in 1 of 5 queues (2 topics, 6 entries compared)\nDw/0 at 0: " + problem + "\n"
	if out != want {
		t.Errorf("compare-cq:\n%s\nwant:\n%s", out, want)
	}
	out, _, err = runKvdump(t, "--store", root, "--json", "compare-cq")
	if exitStatus(err) != exitDifferences {
		t.Fatalf("compare-cq --json: %v", err)
	}
	checkJSON(t, "compare-cq --json", jsonLines(t, out),
		asJSON(t, map[string]any{"kind": "difference", "topic": "Dw", "queueId": 0, "queueOffset": 0, "problem": problem}),
		compareResult(t, false, 2, 5, 6, 1, 1))

	want = "kv and file agree: 2 topics, 5 queues, 7 entries compared\n"
	if got := mustKvdump(t, "--store", root, "compare-cq", "--from", strconv.FormatInt(s.from, 10)); got != want {
		t.Errorf("compare-cq --from:\n%s\nwant:\n%s", got, want)
	}
}

// A store without consumequeue/ has nothing to compare: a clear error and
// a non-zero exit status. compare-cq needs the stopped store.
func TestCompareCQNoFileLayout(t *testing.T) {
	sc, _ := buildScenario(t, false)
	_, _, err := runKvdump(t, "--store", sc.root, "compare-cq")
	want := fmt.Sprintf("no file ConsumeQueue in %s: the broker never wrote one; nothing to compare", sc.root)
	if err == nil || err.Error() != want || exitStatus(err) == exitOK {
		t.Errorf("compare-cq of a store without consumequeue/: %v (exit status %d), want %q", err, exitStatus(err), want)
	}
	if _, _, err := runKvdump(t, "--broker", "127.0.0.1:1", "compare-cq"); err == nil || !strings.Contains(err.Error(), "checkRocksdbCqWriteProgress") {
		t.Errorf("compare-cq --broker: %v", err)
	}
}

// An entry of the file layout past the CommitLog's end is left out, as
// the broker's start cuts it: the layouts still agree.
func TestCompareCQFileEntryPastLogEnd(t *testing.T) {
	s := buildDoubleWriteStore(t)
	root := s.copyStore(t)
	f := openFileLayout(t, root)
	last, err := f.Get("Other", 0, 0, 1)
	if err != nil || len(last) != 1 {
		t.Fatalf("Other/0: %v %v", last, err)
	}
	past := last[0]
	past.QueueOffset, past.PhyOffset = 1, last[0].PhyOffset+int64(last[0].Size)+1000
	if err := f.Put([]cq.Dispatch{{Topic: "Other", QueueID: 0, Entry: past}}); err != nil {
		t.Fatal(err)
	}
	closeFileLayout(t, f)
	want := "kv and file agree: 2 topics, 5 queues, 8 entries compared\n"
	if got := mustKvdump(t, "--store", root, "compare-cq"); got != want {
		t.Errorf("compare-cq:\n%s\nwant:\n%s", got, want)
	}
}

// summary says how far each layout of a double-write store is complete:
// after a clean stop, both up to the dispatched offset.
func TestSummaryLayouts(t *testing.T) {
	s := buildDoubleWriteStore(t)
	lines := jsonLines(t, mustKvdump(t, "--store", s.root, "--json", "summary"))
	last := lines[len(lines)-1]
	written, _ := last["cqWritten"].(map[string]any)
	if written["kv"] != last["dispatched"] || written["file"] != last["dispatched"] {
		t.Fatalf("cqWritten %v, dispatched %v: want both layouts complete to it", last["cqWritten"], last["dispatched"])
	}
}
