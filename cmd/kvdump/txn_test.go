package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/rocketkv/rocketkv/commitlog"
	"github.com/rocketkv/rocketkv/kvindex"
	"github.com/rocketkv/rocketkv/meta"
)

// txnCheckDelay is the first check delay of the half messages the test
// dispatcher records.
const txnCheckDelay = 6000

// withTxnHooks wires the dispatcher as the transaction service does: a
// record of the half topic is an open half, a committed copy ends the
// transaction of its half.
func withTxnHooks(o *kvindex.DispatcherOptions) {
	tx := o.DB.Transactions()
	o.Hooks = map[string]kvindex.Hook{meta.TransHalfTopic: kvindex.HookFunc(func(b *pebble.Batch, m *commitlog.Message) error {
		return tx.AddHalf(b, kvindex.TxnHalf{PhyOffset: m.PhyOffset, QueueOffset: m.QueueOffset,
			StoreTimestamp: m.StoreTimestamp, NextCheckAt: m.StoreTimestamp + txnCheckDelay})
	})}
	o.CommitHook = kvindex.HookFunc(func(b *pebble.Batch, m *commitlog.Message) error {
		return tx.AddCommitted(b, m.PreparedTransactionOffset, m.PhyOffset)
	})
}

func TestTxn(t *testing.T) {
	root := t.TempDir()
	s := openTestStore(t, root, 0, withTxnHooks)
	base := testClock.UnixMilli()
	// Six half messages: 0 rolled back, 1 committed (the committed copy
	// stored, the broker gone before its synced end), 2 checked twice,
	// 3 and 5 untouched, 4 given up.
	var halves []int64
	for i := range 6 {
		res := s.send(t, meta.TransHalfTopic, 0, map[string]string{"REAL_TOPIC": "TopicA", "PGROUP": "PG", "TRAN_MSG": "true"}, fmt.Sprint("half ", i))
		if res.QueueOffset != int64(i) {
			t.Fatalf("half %d got queue offset %d", i, res.QueueOffset)
		}
		halves = append(halves, res.PhyOffset)
	}
	committed := s.sendMessage(t, &commitlog.Message{Topic: "TopicA", Body: []byte("half 1"), SysFlag: commitlog.TransactionCommit,
		PreparedTransactionOffset: halves[1], Properties: commitlog.FormatProperties(map[string]string{"PGROUP": "PG"})}).PhyOffset
	tx := s.db.Transactions()
	for i, e := range map[int]kvindex.TxnEnd{0: {State: kvindex.TxnRollback, At: base + 1000}, 4: {State: kvindex.TxnDiscarded, At: base + 2000}} {
		if err := tx.End(halves[i], e); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.UpdateHalf(kvindex.TxnHalf{PhyOffset: halves[2], QueueOffset: 2, StoreTimestamp: base, NextCheckAt: base + 120_000, Checks: 2}); err != nil {
		t.Fatal(err)
	}
	s.close(t)

	halfHead := []string{"HALF PHY", "QUEUE OFFSET", "STORE TIME", "NEXT CHECK", "CHECKS", "ENDED"}
	halfRow := func(i int, next int64, checks int, ended string) []string {
		return []string{num(halves[i]), num(i), kvindex.FormatMillis(base), kvindex.FormatMillis(next), num(checks), ended}
	}
	endHead := []string{"HALF PHY", "STATE", "ENDED AT"}
	open := alignRows(halfHead,
		halfRow(1, base+txnCheckDelay, 0, "COMMIT_MESSAGE"),
		halfRow(2, base+120_000, 2, "-"),
		halfRow(3, base+txnCheckDelay, 0, "-"),
		halfRow(5, base+txnCheckDelay, 0, "-"))
	ended := alignRows(endHead,
		[]string{num(halves[0]), "ROLLBACK_MESSAGE", kvindex.FormatMillis(base + 1000)},
		[]string{num(halves[1]), "COMMIT_MESSAGE", "-"},
		[]string{num(halves[4]), "DISCARDED", kvindex.FormatMillis(base + 2000)})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"txn"}, open + "\n" + ended},
		{[]string{"txn", "--open"}, open},
		{[]string{"txn", "--ended"}, ended},
		{[]string{"txn", "--due-before", kvindex.FormatMillis(base + txnCheckDelay)},
			alignRows(halfHead, halfRow(1, base+txnCheckDelay, 0, "COMMIT_MESSAGE"), halfRow(3, base+txnCheckDelay, 0, "-"), halfRow(5, base+txnCheckDelay, 0, "-"))},
		{[]string{"txn", "--due-before", fmt.Sprint(base + txnCheckDelay - 1)}, alignRows(halfHead)},
	} {
		if got := mustKvdump(t, append([]string{"--store", root}, c.args...)...); got != c.want {
			t.Errorf("%s:\n%s\nwant:\n%s", strings.Join(c.args, " "), got, c.want)
		}
	}

	halfJSON := func(i int, next int64, checks int, ended string) map[string]any {
		m := map[string]any{"kind": "half", "phyOffset": halves[i], "queueOffset": i, "storeTimestamp": base, "nextCheckAt": next, "checks": checks}
		if ended != "" {
			m["ended"] = ended
		}
		return asJSON(t, m)
	}
	endJSON := func(i int, state string, at int64) map[string]any {
		m := map[string]any{"kind": "end", "halfPhyOffset": halves[i], "state": state, "at": at}
		if state == "COMMIT_MESSAGE" {
			m["by"] = committed // the committed copy that ended it
		}
		return asJSON(t, m)
	}
	checkJSON(t, "txn --json", jsonLines(t, mustKvdump(t, "--store", root, "--json", "txn")),
		halfJSON(1, base+txnCheckDelay, 0, "COMMIT_MESSAGE"), halfJSON(2, base+120_000, 2, ""), halfJSON(3, base+txnCheckDelay, 0, ""), halfJSON(5, base+txnCheckDelay, 0, ""),
		endJSON(0, "ROLLBACK_MESSAGE", base+1000), endJSON(1, "COMMIT_MESSAGE", 0), endJSON(4, "DISCARDED", base+2000))
	checkJSON(t, "txn --json --ended", jsonLines(t, mustKvdump(t, "--store", root, "--json", "txn", "--ended")),
		endJSON(0, "ROLLBACK_MESSAGE", base+1000), endJSON(1, "COMMIT_MESSAGE", 0), endJSON(4, "DISCARDED", base+2000))

	for _, args := range [][]string{
		{"txn", "--open", "--ended"},
		{"txn", "--ended", "--due-before", "0"},
		{"txn", "--due-before", "yesterday"},
	} {
		if _, _, err := runKvdump(t, append([]string{"--store", root}, args...)...); err == nil || exitStatus(err) != exitError {
			t.Errorf("%s: %v, want an error", strings.Join(args, " "), err)
		}
	}

	// summary counts the keys of both keyspaces; raw decodes them.
	var sum map[string]any
	for _, l := range jsonLines(t, mustKvdump(t, "--store", root, "--json", "summary")) {
		if l["kind"] == "summary" {
			sum = l
		}
	}
	if n, m := fmt.Sprint(sum["txnOpenHalves"]), fmt.Sprint(sum["txnEnded"]); n != "4" || m != "3" {
		t.Errorf("summary counts %s open halves and %s ended transactions, want 4 and 3", n, m)
	}
	if got := mustKvdump(t, "--store", root, "summary"); !regexp.MustCompile(`(?m)^transactions +4 half messages open, 3 ended, [0-9]+ op messages$`).MatchString(got) {
		t.Errorf("summary table:\n%s", got)
	}
	rollback := regexp.MustCompile(fmt.Sprintf(`(?m)^txn-end +61%016x +0c%016x +halfPhyOffset=%d state=ROLLBACK_MESSAGE at=%s$`,
		halves[0], base+1000, halves[0], regexp.QuoteMeta(kvindex.FormatMillis(base+1000))))
	if got := mustKvdump(t, "--store", root, "raw", "--prefix", "61"); !rollback.MatchString(got) {
		t.Errorf("raw 61 does not decode the rollback:\n%s", got)
	}
}

// A store without transactions lists empty tables.
func TestTxnEmpty(t *testing.T) {
	sc, _ := buildScenario(t, false)
	want := alignRows([]string{"HALF PHY", "QUEUE OFFSET", "STORE TIME", "NEXT CHECK", "CHECKS", "ENDED"}) + "\n" +
		alignRows([]string{"HALF PHY", "STATE", "ENDED AT"})
	if got := mustKvdump(t, "--store", sc.root, "txn"); got != want {
		t.Errorf("txn of a store without transactions:\n%s\nwant:\n%s", got, want)
	}
	if got := mustKvdump(t, "--store", sc.root, "--json", "txn"); got != "" {
		t.Errorf("txn --json of a store without transactions: %q", got)
	}
}
