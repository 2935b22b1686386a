package kvindex

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// Shape of the store the CorrectMin crash test corrects: correctCrashQueues
// queues of topic T whose entries interleave in the CommitLog
// (fillInterleaved), of which a pass to correctCrashMinPhy cuts the first
// correctCrashCut of each with a range deletion (more than pointCutMax).
const (
	childEnvCorrectMin  = "KVINDEX_CRASH_CORRECTMIN_DIR"
	correctCrashQueues  = 3500
	correctCrashEntries = 40
	correctCrashCut     = 20
	correctCrashMinPhy  = int64(correctCrashCut) * correctCrashQueues * 100
)

// runCorrectMinChild opens the index at root, runs one CorrectMin pass,
// says when it has planned its cuts and when it returned, and waits to be
// killed.
func runCorrectMinChild(root string) int {
	db, err := Open(Options{Dir: root, Logger: zerolog.Nop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	c := db.ConsumeQueue(0)
	c.afterMinPlan = func() { fmt.Println("planned") }
	fmt.Println("ready")
	if err := c.CorrectMin(correctCrashMinPhy); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	fmt.Println("corrected")
	select {}
}

// correctedQueues reads every queue of the store at dir and returns how
// many, from the first, the pass cut. It fails the test unless each queue
// is whole (minimum 0) or cut (minimum correctCrashCut), holds exactly the
// entries from its minimum to its unchanged maximum, and the cut queues
// come first, in the order the pass writes them.
func correctedQueues(t *testing.T, db *DB) int {
	t.Helper()
	c := db.ConsumeQueue(0)
	cut := 0
	for q := int32(0); q < correctCrashQueues; q++ {
		minOff, err := c.MinOffset("T", q)
		if err != nil {
			t.Fatalf("queue %d: %v", q, err)
		}
		maxOff, err := c.MaxOffset("T", q)
		if err != nil {
			t.Fatalf("queue %d: %v", q, err)
		}
		if maxOff != correctCrashEntries {
			t.Fatalf("queue %d: maximum %d, want %d: a correction never moves it", q, maxOff, correctCrashEntries)
		}
		switch minOff {
		case 0:
		case correctCrashCut:
			if int(q) != cut {
				t.Fatalf("queue %d is cut after %d cut queues and a whole one: the cuts kept are not a prefix of the pass", q, cut)
			}
			cut++
		default:
			t.Fatalf("queue %d: minimum %d, want 0 or %d", q, minOff, correctCrashCut)
		}
		kept := storedEntryOffsets(t, db, "T", q)
		if len(kept) != int(maxOff-minOff) || kept[0] != minOff || kept[len(kept)-1] != maxOff-1 {
			t.Fatalf("queue %d (minimum %d, maximum %d) holds entries %v", q, minOff, maxOff, kept)
		}
		entries, err := c.Get("T", q, minOff, 1)
		if err != nil || len(entries) != 1 || entries[0].QueueOffset != minOff {
			t.Fatalf("queue %d: read at its minimum %d: %v, %v", q, minOff, entries, err)
		}
	}
	return cut
}

// A broker killed in the middle of a retention pass over the ConsumeQueue
// (CorrectMin, whose batches but the last are not synced) keeps a prefix
// of the pass's cuts, each whole: every queue starts at its old minimum or
// its new one, with every entry from there to its end readable and none
// below; and the next pass, which the broker's start runs, finishes the
// cuts. Each kill hits a fresh copy of the store at a random moment of
// the child's pass.
func TestCorrectMinSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	template := t.TempDir()
	db := openDBAt(t, template)
	fillInterleaved(t, db.ConsumeQueue(0), correctCrashQueues, correctCrashEntries)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// The pass reads every queue first, then writes the cuts: the kills
	// land while it writes (and a little after), measured once.
	cmd, _, lines := testutil.StartChildLines(t, childEnvCorrectMin+"="+testutil.CopyStore(t, template))
	var planned time.Time
	for l := range lines {
		if l == "planned" {
			planned = time.Now()
		}
		if l == "corrected" {
			break
		}
	}
	window := time.Since(planned) * 3 / 2
	testutil.KillChild(cmd)
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	partial := 0
	for i := 0; i < 10; i++ {
		dir := testutil.CopyStore(t, template)
		cmd, _, lines := testutil.StartChildLines(t, childEnvCorrectMin+"="+dir)
		corrected := false
		for l := range lines {
			if l == "planned" {
				break
			}
		}
		time.Sleep(time.Duration(rng.Int64N(int64(window) + 1)))
		testutil.KillChild(cmd)
		for l := range lines { // closed when the killed child's stdout ends
			corrected = corrected || l == "corrected"
		}
		db := openDBAt(t, dir)
		cut := correctedQueues(t, db)
		if corrected && cut != correctCrashQueues {
			t.Fatalf("kill %d: the pass returned, yet only %d of %d queues are cut", i, cut, correctCrashQueues)
		}
		if cut > 0 && cut < correctCrashQueues {
			partial++
		}
		t.Logf("kill %d (pass returned: %v): %d of %d queues cut", i, corrected, cut, correctCrashQueues)
		if err := db.ConsumeQueue(0).CorrectMin(correctCrashMinPhy); err != nil {
			t.Fatalf("kill %d: the next pass: %v", i, err)
		}
		if cut := correctedQueues(t, db); cut != correctCrashQueues {
			t.Fatalf("kill %d: the next pass left %d of %d queues cut", i, cut, correctCrashQueues)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of 10 kills left a pass half done", partial)
}
