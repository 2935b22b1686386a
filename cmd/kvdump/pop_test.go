package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/kvindex"
)

func TestPop(t *testing.T) {
	root := t.TempDir()
	s := openTestStore(t, root, 0)
	base := testClock.UnixMilli()
	recs := []kvindex.InFlight{
		{Group: "G1", Topic: "TopicA", QueueID: 1, QueueOffset: 7, VisibleAt: base + 60000, PopTime: base, InvisibleTime: 60000, CKOffset: 5},
		{Group: "G1", Topic: "%RETRY%G1_TopicA", QueueID: 0, QueueOffset: 2, VisibleAt: base + 1000, PopTime: base, InvisibleTime: 1000, CKOffset: 2, RetryFlag: 1, Attempts: 2},
		{Group: "G2", Topic: "TopicB", QueueID: 0, QueueOffset: 0, VisibleAt: base + 30000, PopTime: base, InvisibleTime: 30000},
		{Group: "G1", Topic: "TopicA", QueueID: 1, QueueOffset: 9, VisibleAt: base + 60000, PopTime: base, InvisibleTime: 60000, CKOffset: 5},
	}
	// Three checkpoints: recs[0] and recs[3] were popped together.
	b := s.db.Pop().NewBatch()
	for _, i := range []int{0, 1, 2} {
		r := recs[i]
		ck := kvindex.Checkpoint{Group: r.Group, Topic: r.Topic, QueueID: r.QueueID, CKOffset: r.CKOffset, PopTime: r.PopTime,
			InvisibleTime: r.InvisibleTime, VisibleAt: r.VisibleAt, RetryFlag: r.RetryFlag, Attempts: r.Attempts, Offsets: []int64{r.QueueOffset}}
		if i == 0 {
			ck.Offsets = append(ck.Offsets, recs[3].QueueOffset)
		}
		if err := b.PutCheckpoint(&ck); err != nil {
			t.Fatal(err)
		}
	}
	// A message whose revive a crash cut short before its put.
	reviving := kvindex.ReviveIntent{InFlight: kvindex.InFlight{Group: "G2", Topic: "TopicB", QueueID: 2, QueueOffset: 11,
		PopTime: base - 40000, InvisibleTime: 30000, CKOffset: 10, Attempts: 1}}
	if err := b.PutReviveIntent(&reviving); err != nil {
		t.Fatal(err)
	}
	if err := b.SetOrder(&kvindex.OrderState{Group: "G2", Topic: "TopicB", QueueID: 1, PopTime: base, InvisibleTime: 5000, Acked: 1,
		AttemptID: "a1", Messages: []kvindex.OrderMessage{{QueueOffset: 3}, {QueueOffset: 4, Consumed: 2}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	s.close(t)

	row := func(r kvindex.InFlight) []string {
		return []string{kvindex.FormatMillis(r.VisibleAt), r.Group, r.Topic, num(r.QueueID), num(r.QueueOffset),
			kvindex.FormatMillis(r.PopTime), num(r.InvisibleTime), num(r.CKOffset), num(int32(r.RetryFlag)), num(r.Attempts), "-"}
	}
	head := []string{"VISIBLE AT", "GROUP", "TOPIC", "QUEUE", "OFFSET", "POP TIME", "INVISIBLE MS", "CK OFFSET", "RETRY", "ATTEMPTS", "STAGED"}
	if got, want := mustKvdump(t, "--store", root, "pop"), alignRows(head, row(recs[1]), row(recs[2]), row(recs[0]), row(recs[3])); got != want {
		t.Errorf("pop:\n%s\nwant:\n%s", got, want)
	}
	if got, want := mustKvdump(t, "--store", root, "pop", "--group", "G1", "--topic", "TopicA"), alignRows(head, row(recs[1]), row(recs[0]), row(recs[3])); got != want {
		t.Errorf("pop --group G1 --topic TopicA:\n%s\nwant:\n%s", got, want)
	}
	due := kvindex.FormatMillis(base + 30000)
	if got, want := mustKvdump(t, "--store", root, "pop", "--due-before", due), alignRows(head, row(recs[1]), row(recs[2])); got != want {
		t.Errorf("pop --due-before:\n%s\nwant:\n%s", got, want)
	}
	checkJSON(t, "pop --json", jsonLines(t, mustKvdump(t, "--store", root, "--json", "pop", "--topic", "TopicB")), asJSON(t, recs[2]))
	want := alignRows([]string{"GROUP", "TOPIC", "QUEUE", "POP TIME", "INVISIBLE MS", "ATTEMPT", "MESSAGES (offset/consumed, * acked)"},
		[]string{"G2", "TopicB", "1", kvindex.FormatMillis(base), "5000", "a1", "3/0* 4/2"})
	if got := mustKvdump(t, "--store", root, "pop", "--orderly"); got != want {
		t.Errorf("pop --orderly:\n%s\nwant:\n%s", got, want)
	}
	want = alignRows([]string{"GROUP", "TOPIC", "QUEUE", "OFFSET", "POP TIME", "INVISIBLE MS", "CK OFFSET", "RETRY", "ATTEMPTS"},
		[]string{"G2", "TopicB", "2", "11", kvindex.FormatMillis(base - 40000), "30000", "10", "0", "1"})
	if got := mustKvdump(t, "--store", root, "pop", "--reviving"); got != want {
		t.Errorf("pop --reviving:\n%s\nwant:\n%s", got, want)
	}
	if got := mustKvdump(t, "--store", root, "pop", "--reviving", "--group", "G1"); strings.Contains(got, "TopicB") {
		t.Errorf("pop --reviving --group G1 lists G2's intent:\n%s", got)
	}
	if _, _, err := runKvdump(t, "--store", root, "pop", "--reviving", "--orderly"); err == nil {
		t.Error("--reviving with --orderly was accepted")
	}
	if _, _, err := runKvdump(t, "--store", root, "pop", "--due-before", "yesterday"); err == nil {
		t.Error("a bad --due-before was accepted")
	}
	// summary counts the checkpoints in the pop-checkpoint keyspace.
	lines := jsonLines(t, mustKvdump(t, "--store", root, "--json", "summary"))
	found := false
	for _, l := range lines {
		if l["name"] == "pop-checkpoint" {
			found = true
			if n := l["keys"]; n == nil || n.(interface{ String() string }).String() != "3" {
				t.Errorf("summary pop-checkpoint keys %v", n)
			}
		}
	}
	if !found {
		t.Error("summary has no pop-checkpoint keyspace")
	}
	for _, l := range lines {
		if l["kind"] == "summary" {
			if n, m := fmt.Sprint(l["popCheckpoints"]), fmt.Sprint(l["popInFlight"]); n != "3" || m != "4" {
				t.Errorf("summary counts %s checkpoints and %s messages in flight, want 3 and 4", n, m)
			}
			if r := fmt.Sprint(l["popReviving"]); r != "1" {
				t.Errorf("summary counts %s revive intents, want 1", r)
			}
		}
	}
	if got := mustKvdump(t, "--store", root, "summary"); !strings.Contains(got, "4 messages in 3 checkpoints") ||
		!strings.Contains(got, "1 messages whose revive has not finished") {
		t.Errorf("summary table:\n%s", got)
	}
}

// A staged checkpoint (popReviveStageAhead) is listed by pop, marked, in
// the order of its VisibleAt (its backstop) among the others, and
// --due-before keeps it by that time. summary counts
// the staged checkpoints and their messages apart; export-rocketmq does
// not count them among the messages RocketMQ would not know of.
func TestPopStaged(t *testing.T) {
	root := t.TempDir()
	s := openTestStore(t, root, 0)
	base := testClock.UnixMilli()
	early := kvindex.Checkpoint{Group: "G1", Topic: "TopicA", QueueID: 1, CKOffset: 5, PopTime: base, InvisibleTime: 1000,
		VisibleAt: base + 1000, Offsets: []int64{5, 6}}
	staged := kvindex.Checkpoint{Group: "G1", Topic: "%RETRY%G1_TopicA", QueueID: 0, CKOffset: 2, PopTime: base, InvisibleTime: 30000,
		VisibleAt: base + 30000, RetryFlag: 1, Offsets: []int64{2, 4}}
	late := kvindex.Checkpoint{Group: "G1", Topic: "TopicA", QueueID: 2, CKOffset: 3, PopTime: base, InvisibleTime: 60000,
		VisibleAt: base + 60000, Offsets: []int64{3}}
	b := s.db.Pop().NewBatch()
	for _, c := range []*kvindex.Checkpoint{&early, &staged, &late} {
		if err := b.PutCheckpoint(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b = s.db.Pop().NewBatch()
	if err := b.StageCheckpoint(&staged, staged.VisibleAt); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// export-rocketmq counts the plain checkpoints' messages as unknown to
	// RocketMQ without a POP_ROLLBACK, not the staged ones: their copies
	// wait in the pop-retry topic, which RocketMQ serves.
	if n, err := popNotRolledBack(s.db); err != nil || n != 3 {
		t.Errorf("POP messages not rolled back: %d %v, want the 3 of the plain checkpoints", n, err)
	}
	s.close(t)
	staged.Staged = true

	row := func(c *kvindex.Checkpoint, off int64) []string {
		mark := "-"
		if c.Staged {
			mark = "staged"
		}
		return []string{kvindex.FormatMillis(c.VisibleAt), c.Group, c.Topic, num(c.QueueID), num(off), kvindex.FormatMillis(c.PopTime),
			num(c.InvisibleTime), num(c.CKOffset), num(int32(c.RetryFlag)), num(c.Attempts), mark}
	}
	head := []string{"VISIBLE AT", "GROUP", "TOPIC", "QUEUE", "OFFSET", "POP TIME", "INVISIBLE MS", "CK OFFSET", "RETRY", "ATTEMPTS", "STAGED"}
	if got, want := mustKvdump(t, "--store", root, "pop"),
		alignRows(head, row(&early, 5), row(&early, 6), row(&staged, 2), row(&staged, 4), row(&late, 3)); got != want {
		t.Errorf("pop:\n%s\nwant:\n%s", got, want)
	}
	if got, want := mustKvdump(t, "--store", root, "pop", "--due-before", kvindex.FormatMillis(base+30000)),
		alignRows(head, row(&early, 5), row(&early, 6), row(&staged, 2), row(&staged, 4)); got != want {
		t.Errorf("pop --due-before its VisibleAt:\n%s\nwant:\n%s", got, want)
	}
	if got, want := mustKvdump(t, "--store", root, "pop", "--due-before", fmt.Sprint(base+29999)),
		alignRows(head, row(&early, 5), row(&early, 6)); got != want {
		t.Errorf("pop --due-before just before its VisibleAt:\n%s\nwant:\n%s", got, want)
	}
	if got := mustKvdump(t, "--store", root, "pop", "--group", "G2"); strings.Contains(got, "staged") {
		t.Errorf("pop --group G2 lists G1's staged checkpoint:\n%s", got)
	}
	inFlight := func(c *kvindex.Checkpoint, off int64) map[string]any {
		return asJSON(t, kvindex.InFlight{Group: c.Group, Topic: c.Topic, QueueID: c.QueueID, QueueOffset: off, VisibleAt: c.VisibleAt,
			PopTime: c.PopTime, InvisibleTime: c.InvisibleTime, CKOffset: c.CKOffset, RetryFlag: c.RetryFlag, Staged: c.Staged})
	}
	lines := jsonLines(t, mustKvdump(t, "--store", root, "--json", "pop", "--topic", "TopicA", "--due-before", fmt.Sprint(base+30000)))
	checkJSON(t, "pop --json", lines, inFlight(&early, 5), inFlight(&early, 6), inFlight(&staged, 2), inFlight(&staged, 4))
	if len(lines) == 4 && (lines[2]["staged"] != true || lines[0]["staged"] != nil) {
		t.Errorf("pop --json staged marks: %v and %v", lines[2]["staged"], lines[0]["staged"])
	}

	found := false
	for _, l := range jsonLines(t, mustKvdump(t, "--store", root, "--json", "summary")) {
		if l["kind"] != "summary" {
			continue
		}
		found = true
		got := fmt.Sprint(l["popCheckpoints"], " ", l["popInFlight"], " ", l["popStaged"], " ", l["popStagedMessages"])
		if got != "3 5 1 2" {
			t.Errorf("summary popCheckpoints popInFlight popStaged popStagedMessages: %s, want 3 5 1 2", got)
		}
	}
	if !found {
		t.Error("summary has no summary line")
	}
	if got := mustKvdump(t, "--store", root, "summary"); !strings.Contains(got, "5 messages in 3 checkpoints") ||
		!strings.Contains(got, "2 of those messages in 1 staged checkpoints") {
		t.Errorf("summary table:\n%s", got)
	}
}
