package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/kvindex"
)

// cutSlaveSettings make a broker a slave whose master is never reached,
// so nothing but the recovery changes its store, on the segment size of
// startTestBrokerAt.
var cutSlaveSettings = map[string]string{"brokerRole": "SLAVE", "brokerId": "1",
	"haMasterAddress": "127.0.0.1:1", "slaveReadEnable": "true", "mappedFileSizeCommitLog": strconv.Itoa(4 << 20)}

// indexDump lists the store's index entries that a cut recovery changes,
// one "prefix key=value" line each in key order: the ConsumeQueue, the key
// index, transaction halves, ends and op marks, timer entries and
// compacted copies with their key and expiry entries.
func indexDump(t *testing.T, db *kvindex.DB) []string {
	t.Helper()
	var out []string
	for _, ks := range kvindex.Keyspaces() {
		switch {
		case ks.Prefix == kvindex.PrefixCQ, ks.Prefix == kvindex.PrefixKeyIndex,
			strings.HasPrefix(ks.Name, "txn-"), ks.Name == "timer", strings.HasPrefix(ks.Name, "compact"):
		default:
			continue
		}
		if err := db.Scan([]byte{ks.Prefix}, func(k, v []byte) bool {
			out = append(out, fmt.Sprintf("%s %x=%x", ks.Name, k, v))
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// A slave started with --cut-commitlog-at and SIGKILLed after any step of
// the recovery that cut ends, at its next start with the same flag, with
// the index a recovery that ran through leaves: the cut records' queue
// entries, keys, transaction halves, op marks and ends, timer entries and
// compacted copies are gone, a compacted key whose newest message was cut
// has its message before back, and a transaction whose committed message
// was cut is open again.
func TestCutRecoverySurvivesSIGKILLAfterEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	source := t.TempDir()
	settings := map[string]string{"transactionCheckInterval": "3600000"}
	b := startTestBrokerAt(t, source, settings)
	c := b.client(nil)
	createCompactedTopic(t, c, "CutKV")
	far := fmt.Sprintf("TIMER_DELIVER_MS\x01%d\x02", time.Now().Add(time.Hour).UnixMilli())
	put := func(tag string, kvs ...string) {
		for _, kv := range kvs {
			key, value, _ := strings.Cut(kv, "=")
			mustSend(t, c, "CutKV", 0, value, "KEYS\x01"+key+"\x02")
		}
		for i := 0; i < 3; i++ {
			mustSend(t, c, "CutPlain", 0, fmt.Sprintf("%s-%d", tag, i), "")
		}
		mustSend(t, c, "CutTimer", 0, tag+"-timer", far)
	}
	born := time.Now().UnixMilli()
	put("kept", "a=1", "b=1")
	committed := sendHalf(t, c, "CutTx", 0, "UNIQ-CUT-1", "kept-commit", "", born)
	rolledBack := sendHalf(t, c, "CutTx", 0, "UNIQ-CUT-2", "kept-rollback", "", born)
	endedPastTheCut := sendHalf(t, c, "CutTx", 0, "UNIQ-CUT-3", "open-at-the-cut", "", born)
	for h, state := range map[sentHalf]int{committed: 8, rolledBack: 12} {
		if r := endTxn(t, c, h, "pg", state, false); r.Code != 0 {
			t.Fatalf("end %s: %d %s", h.uniq, r.Code, r.Remark)
		}
	}
	b.caughtUp()
	cut := b.clog.MaxOffset()
	put("cut", "a=2", "c=1")
	if r := endTxn(t, c, endedPastTheCut, "pg", 8, false); r.Code != 0 {
		t.Fatalf("end %s: %d %s", endedPastTheCut.uniq, r.Code, r.Remark)
	}
	cutHalf := sendHalf(t, c, "CutTx", 0, "UNIQ-CUT-4", "cut-half", "", born)
	b.caughtUp()
	before := indexDump(t, b.db)
	b.stop()

	// The recovery that runs through, and what it must leave.
	reference := filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(reference, os.DirFS(source)); err != nil {
		t.Fatal(err)
	}
	slave := startTestBrokerWith(t, reference, merged(settings, cutSlaveSettings), func(b *Broker) { b.CutCommitLogAt(cut) })
	slave.caughtUp()
	want := indexDump(t, slave.db)
	count := func(dump []string, name string) (n int) {
		for _, l := range dump {
			if strings.HasPrefix(l, name) {
				n++
			}
		}
		return n
	}
	// Every kind of entry is there on both sides of the cut.
	for _, name := range []string{"cq ", "key-index ", "timer ", "txn-", "compacted "} {
		if n, m := count(want, name), count(before, name); n >= m || (n == 0 && name != "txn-") {
			t.Fatalf("%d %q entries after the cut, %d before it", n, name, m)
		}
	}
	if got := pullKV(t, slave.client(nil), "CutKV"); got != "0:a=1 1:b=1" {
		t.Fatalf("compacted topic after the cut: %q", got)
	}
	for _, h := range []sentHalf{committed, rolledBack, endedPastTheCut, cutHalf} {
		_, isOpen, err := slave.db.Transactions().Half(h.phy)
		if err != nil {
			t.Fatal(err)
		}
		_, ended, err := slave.db.Transactions().Ended(h.phy)
		if err != nil {
			t.Fatal(err)
		}
		// The half past the cut goes; the commit whose message went
		// with the cut is open again (its producer is asked about it);
		// the ends before the cut stay.
		wantOpen, wantEnded := h == endedPastTheCut, h == committed || h == rolledBack
		if isOpen != wantOpen || ended != wantEnded {
			t.Fatalf("half %s at %d after the cut at %d: open %v, ended %v; want %v, %v", h.uniq, h.phy, cut, isOpen, ended, wantOpen, wantEnded)
		}
	}
	slave.stop()

	steps := []string{stepCommitLogCut, kvindex.StepIndexCut, kvindex.StepTransactionsDropped, kvindex.StepTimersDropped,
		kvindex.StepCopiesDropped, kvindex.StepCopiesRestored, kvindex.StepRestoresCleared, kvindex.StepDispatchedSet}
	for _, step := range steps {
		t.Run(strings.ReplaceAll(step, " ", "_"), func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "store")
			if err := os.CopyFS(store, os.DirFS(source)); err != nil {
				t.Fatal(err)
			}
			spec := []string{store, strconv.Itoa(freeTCPPort(t))}
			for k, v := range merged(settings, cutSlaveSettings) {
				spec = append(spec, k+"="+v)
			}
			spec = append(spec, childCutAt+"="+strconv.FormatInt(cut, 10), childKillAtStep+"="+strings.ReplaceAll(step, " ", "_"))
			// Exit status -1: killed by a signal, its own SIGKILL at the step.
			testutil.RunChildToExit(t, time.Minute, -1, []string{"-test.run=^$"}, childBrokerEnv+"="+strings.Join(spec, " "))

			again := startTestBrokerWith(t, store, merged(settings, cutSlaveSettings), func(b *Broker) { b.CutCommitLogAt(cut) })
			again.caughtUp()
			if got := indexDump(t, again.db); !slices.Equal(got, want) {
				t.Fatalf("after a SIGKILL at %q the next recovery left %d index entries, the uninterrupted one %d:\n%s",
					step, len(got), len(want), dumpDiff(got, want))
			}
			if end := again.clog.MaxOffset(); end != cut {
				t.Fatalf("the log ends at %d, cut at %d", end, cut)
			}
		})
	}
}

// merged returns the settings of a with those of b over them.
func merged(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range []map[string]string{a, b} {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// dumpDiff lists the lines of got missing from want (-) and extra (+).
func dumpDiff(got, want []string) string {
	var sb strings.Builder
	for _, l := range want {
		if !slices.Contains(got, l) {
			fmt.Fprintf(&sb, "- %s\n", l)
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			fmt.Fprintf(&sb, "+ %s\n", l)
		}
	}
	return sb.String()
}

// A note of the last cut that cannot be read stops a start asked to cut,
// with an error naming the file, before the CommitLog is touched: the
// broker cannot tell whether the cut was made already.
func TestAnUnreadableCutNoteStopsTheCut(t *testing.T) {
	store := t.TempDir()
	b := startTestBrokerAt(t, store, nil)
	c := b.client(nil)
	mustSend(t, c, "CutNote", 0, "first", "")
	b.caughtUp()
	cut := b.clog.MaxOffset()
	mustSend(t, c, "CutNote", 0, "second", "")
	end := b.clog.MaxOffset()
	b.stop()
	if err := os.WriteFile(filepath.Join(store, cutDoneFile), []byte("12ab\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	settings := merged(cutSlaveSettings, map[string]string{"storePathRootDir": store, "listenPort": "0", "brokerIP1": "127.0.0.1"})
	err := startErrorWith(t, settings, func(b *Broker) { b.CutCommitLogAt(cut) })
	if err == nil || !strings.Contains(err.Error(), filepath.Join(store, cutDoneFile)) {
		t.Fatalf("start with an unreadable cut note: %v", err)
	}
	again := startTestBrokerAt(t, store, cutSlaveSettings)
	if got := again.clog.MaxOffset(); got != end {
		t.Fatalf("the refused start cut the log to %d, it ended at %d", got, end)
	}
}
