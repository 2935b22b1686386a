package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/commitlog"
)

func TestVerifyClean(t *testing.T) {
	sc, _ := buildScenario(t, false)
	want := fmt.Sprintf("verified 7 entries in 3 queues against the CommitLog [0, %d), dispatched %d: 0 differences\n", sc.end, sc.end)
	if got := mustKvdump(t, "--store", sc.root, "verify"); got != want {
		t.Errorf("verify:\n%s\nwant:\n%s", got, want)
	}
	want = fmt.Sprintf("verified 7 entries in 3 queues (and 7 CommitLog records) against the CommitLog [0, %d), dispatched %d: 0 differences\n", sc.end, sc.end)
	if got := mustKvdump(t, "--store", sc.root, "verify", "--log-scan"); got != want {
		t.Errorf("verify --log-scan:\n%s\nwant:\n%s", got, want)
	}
	checkJSON(t, "verify --json", jsonLines(t, mustKvdump(t, "--store", sc.root, "--json", "verify")),
		asJSON(t, map[string]any{"kind": "result", "queues": 3, "entries": 7, "records": 0, "differences": 0,
			"dispatched": sc.end, "logMinOffset": 0, "logMaxOffset": sc.end}))
}

// wantDiff is a difference verify must report.
type wantDiff struct {
	topic    string
	qid      int32
	off, phy int64 // -1: not given
	problem  string
}

// A deliberately corrupted index makes verify fail with status 1 and name
// every bad entry with the reason.
func TestVerifyCorruptedIndex(t *testing.T) {
	sc, _ := buildScenario(t, false)
	a0, a1, b0 := sc.queue("TopicA", 0), sc.queue("TopicA", 1), sc.queue("TopicB", 0)
	tags := func(m sent) int64 { return commitlog.TagsCode(m.tags) }
	ts := testClock.UnixMilli()
	size := func(m sent) int32 { return int32(m.res.WroteBytes) }
	past := sc.end + 100
	editIndex(t, sc.root, func(db *pebble.DB) {
		set := func(k, v []byte) {
			if err := db.Set(k, v, nil); err != nil {
				t.Fatal(err)
			}
		}
		// A wrong size.
		set(docCQKey("TopicA", 0, 1), docCQValue(a0[1].res.PhyOffset, size(a0[1])+1, tags(a0[1]), ts))
		// Pointing at another queue's record.
		set(docCQKey("TopicA", 0, 2), docCQValue(b0[0].res.PhyOffset, size(b0[0]), tags(b0[0]), ts))
		// A wrong tagsCode.
		set(docCQKey("TopicA", 1, 0), docCQValue(a1[0].res.PhyOffset, size(a1[0]), 999, ts))
		// A malformed value.
		set(docCQKey("TopicA", 1, 1), []byte{1, 2, 3, 4, 5})
		// A gap.
		if err := db.Delete(docCQKey("TopicB", 0, 1), nil); err != nil {
			t.Fatal(err)
		}
		// An entry past the end of the log.
		set(docCQKey("TopicB", 0, 3), docCQValue(past, 100, 0, ts))
		// A queue whose min key says 0 but whose first entry is 1.
		set(append(keyString16([]byte{0x11}, "TopicC"), 0, 0, 0, 0), make([]byte, 8))
		set(docCQKey("TopicC", 0, 1), docCQValue(a1[0].res.PhyOffset, size(a1[0]), tags(a1[0]), ts))
		// The dispatched offset past the end of the log.
		set(append([]byte{0x01}, "dispatched"...), binary.BigEndian.AppendUint64(nil, uint64(sc.end+5000)))
	})
	diffs := []wantDiff{
		{"", 0, -1, -1, fmt.Sprintf("dispatched offset %d is past the CommitLog end %d", sc.end+5000, sc.end)},
		{"TopicA", 0, 1, a0[1].res.PhyOffset, fmt.Sprintf("size %d, the record has %d bytes", size(a0[1])+1, size(a0[1]))},
		{"TopicA", 0, 2, b0[0].res.PhyOffset, "record is of TopicB/0; the record's queue offset is 0"},
		{"TopicA", 1, 0, a1[0].res.PhyOffset, fmt.Sprintf("tagsCode 999, the record's is %d", tags(a1[0]))},
		{"TopicA", 1, 1, -1, "malformed entry: cq TopicA/1@1: value of 5 bytes"},
		{"TopicB", 0, 1, -1, "gap: offsets [1, 2) missing"},
		{"TopicB", 0, 3, past, fmt.Sprintf("entry ends at %d, past the CommitLog end %d", past+100, sc.end)},
		{"TopicC", 0, 0, -1, "gap: offsets [0, 1) missing (the queue's min key is 0, its first entry 1)"},
		{"TopicC", 0, 1, a1[0].res.PhyOffset, "record is of TopicA/1"},
	}

	out, _, err := runKvdump(t, "--store", sc.root, "--json", "verify")
	if !errors.Is(err, errDifferences) || exitStatus(err) != exitDifferences {
		t.Fatalf("verify of a corrupted index: %v (status %d), want differences (status 1)", err, exitStatus(err))
	}
	lines := jsonLines(t, out)
	if len(lines) != len(diffs)+1 {
		t.Fatalf("%d JSON lines for %d differences:\n%s", len(lines), len(diffs), out)
	}
	for i, d := range diffs {
		l := lines[i]
		want := map[string]any{"kind": "difference", "problem": l["problem"]}
		if d.topic != "" {
			want["topic"], want["queueId"] = d.topic, json.Number(num(d.qid))
		}
		if d.off >= 0 {
			want["queueOffset"] = json.Number(num(d.off))
		}
		if d.phy >= 0 {
			want["phyOffset"] = json.Number(num(d.phy))
		}
		p, _ := l["problem"].(string)
		if !strings.HasPrefix(p, d.problem) || fmt.Sprint(l) != fmt.Sprint(want) {
			t.Errorf("difference %d: %v\nwant %v with a problem starting %q", i, l, want, d.problem)
		}
	}
	checkJSON(t, "verify result", lines[len(diffs):], asJSON(t, map[string]any{"kind": "result", "queues": 4, "entries": 9, "records": 0,
		"differences": len(diffs), "dispatched": sc.end + 5000, "logMinOffset": 0, "logMaxOffset": sc.end}))

	// The table names the same entries.
	out, _, err = runKvdump(t, "--store", sc.root, "verify")
	if exitStatus(err) != exitDifferences {
		t.Fatalf("verify table: %v", err)
	}
	for _, d := range diffs {
		cells := []string{"-", "-", "-", "-"}
		if d.topic != "" {
			cells[0], cells[1] = d.topic, num(d.qid)
		}
		if d.off >= 0 {
			cells[2] = num(d.off)
		}
		if d.phy >= 0 {
			cells[3] = num(d.phy)
		}
		re := regexp.MustCompile(`(?m)^` + strings.Join(cells, ` +`) + ` +` + regexp.QuoteMeta(d.problem))
		if !re.MatchString(out) {
			t.Errorf("table lacks %v:\n%s", d, out)
		}
	}
	if !strings.HasSuffix(out, fmt.Sprintf("\nverified 9 entries in 4 queues against the CommitLog [0, %d), dispatched %d: %d differences\n", sc.end, sc.end+5000, len(diffs))) {
		t.Errorf("table summary:\n%s", out)
	}

	// The log scan finds the records left without their entry.
	out, _, err = runKvdump(t, "--store", sc.root, "--json", "verify", "--log-scan")
	if exitStatus(err) != exitDifferences {
		t.Fatalf("verify --log-scan: %v", err)
	}
	var scanDiffs []string
	for _, l := range jsonLines(t, out)[len(diffs):] {
		if l["kind"] == "difference" {
			scanDiffs = append(scanDiffs, fmt.Sprintf("%v/%v@%v phy %v: %v", l["topic"], l["queueId"], l["queueOffset"], l["phyOffset"], l["problem"]))
		}
	}
	wantScan := []string{
		fmt.Sprintf("TopicA/0@2 phy %d: the entry at its queue offset points at %d, not at this record", a0[2].res.PhyOffset, b0[0].res.PhyOffset),
		fmt.Sprintf("TopicB/0@1 phy %d: record not in the ConsumeQueue (no entry at its queue offset)", b0[1].res.PhyOffset),
	}
	if fmt.Sprint(scanDiffs) != fmt.Sprint(wantScan) {
		t.Errorf("log scan differences:\n%s\nwant:\n%s", strings.Join(scanDiffs, "\n"), strings.Join(wantScan, "\n"))
	}
}

// Records past the dispatched offset are not indexed yet (lag), and their
// entries are reported if the index has them.
func TestVerifyEntryPastDispatched(t *testing.T) {
	sc, _ := buildScenario(t, false)
	last := sc.msgs[len(sc.msgs)-1]
	editIndex(t, sc.root, func(db *pebble.DB) {
		if err := db.Set(append([]byte{0x01}, "dispatched"...), binary.BigEndian.AppendUint64(nil, uint64(last.res.PhyOffset)), nil); err != nil {
			t.Fatal(err)
		}
	})
	out, _, err := runKvdump(t, "--store", sc.root, "verify")
	if exitStatus(err) != exitDifferences {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	re := regexp.MustCompile(fmt.Sprintf(`(?m)^TopicB +0 +2 +%d +entry ends at %d, past the dispatched offset %d$`,
		last.res.PhyOffset, sc.end, last.res.PhyOffset))
	if !re.MatchString(out) {
		t.Errorf("entry past the dispatched offset not reported:\n%s", out)
	}
	if got := mustKvdump(t, "--store", sc.root, "summary"); !regexp.MustCompile(fmt.Sprintf(`(?m)^lag \(bytes\) +%d$`, last.res.WroteBytes)).MatchString(got) {
		t.Errorf("summary lag:\n%s", got)
	}
}

func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{fmt.Errorf("3 differences: %w", errDifferences), 1},
		{errors.New("boom"), 2},
	} {
		if got := exitStatus(c.err); got != c.want {
			t.Errorf("exitStatus(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if _, _, err := runKvdump(t, "--no-such-flag"); exitStatus(err) != exitError {
		t.Errorf("unknown flag: %v", err)
	}
	if _, _, err := runKvdump(t, "--store", t.TempDir(), "summary"); err == nil || !strings.Contains(err.Error(), "has no index") {
		t.Errorf("store without an index: %v", err)
	}
}
