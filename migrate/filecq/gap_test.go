package filecq_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/testutil"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// A file missing in the middle of a queue of the RocketMQ 4.9.8 store (its
// TopicA/0, extended past three files): RocketMQ's checkSelf only logs it
// and reads around it. A read-only store does the same, reports the run
// (Gaps) with the CommitLog range its entries came from, and leaves its
// units out of Get; Truncate and CorrectMin find the entries around it.
// Open, which would write to the queue, still refuses it.
func TestReadOnlyStoreReadsAroundAMissingFile(t *testing.T) {
	f := loadFixture(t)
	root := testutil.CopyStore(t, filepath.Join(fixtureDir, "clean"))
	s, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.MaxOffset("TopicA", 0)
	if err != nil || old < 10 || old >= 20 {
		t.Fatalf("TopicA/0 ends at %d %v; the test wants its second file partly filled", old, err)
	}
	var ds []cq.Dispatch
	for off := old; off < 35; off++ {
		ds = append(ds, cq.Dispatch{Topic: "TopicA", QueueID: 0, Entry: cq.Entry{QueueOffset: off, PhyOffset: 100_000 + off*100, Size: 100, TagsCode: off}})
	}
	if err := s.Put(ds); err != nil {
		t.Fatal(err)
	}
	want, err := s.Get("TopicA", 0, 0, 100)
	if err != nil || len(want) != 35 {
		t.Fatalf("TopicA/0 before the file goes: %d entries, %v", len(want), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "consumequeue", "TopicA", "0", "00000000000000000200")); err != nil {
		t.Fatal(err)
	}

	if _, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10}); !errors.Is(err, filecq.ErrCorrupt) || !strings.Contains(err.Error(), "offsets 10 to 19 are missing") {
		t.Fatalf("a writable open of the queue: %v, want ErrCorrupt naming the missing offsets", err)
	}
	var logs bytes.Buffer
	ro, err := filecq.OpenReadOnly(filecq.Options{Dir: root, UnitsPerFile: 10, Logger: zerolog.New(&logs), StoreTime: f.storeTime()})
	if err != nil {
		t.Fatalf("read-only open of a queue missing a file in the middle: %v", err)
	}
	defer ro.Close()
	if !strings.Contains(logs.String(), "TopicA/0") || !strings.Contains(logs.String(), "00000000000000000200") {
		t.Errorf("the missing file is not named in the log: %s", logs.String())
	}
	wantGap := []filecq.Gap{{Topic: "TopicA", QueueID: 0, From: 10, To: 20, PhyFrom: want[9].End(), PhyTo: want[20].PhyOffset}}
	if got := ro.Gaps(); !reflect.DeepEqual(got, wantGap) {
		t.Fatalf("gaps %+v, want %+v", got, wantGap)
	}
	lo, _ := ro.MinOffset("TopicA", 0)
	hi, _ := ro.MaxOffset("TopicA", 0)
	if lo != 0 || hi != 35 {
		t.Fatalf("TopicA/0 bounds [%d, %d), want [0, 35)", lo, hi)
	}
	got, err := ro.Get("TopicA", 0, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if wantEntries := append(append([]cq.Entry(nil), want[:10]...), want[20:]...); !reflect.DeepEqual(got, wantEntries) {
		t.Fatalf("entries around the missing file:\n%+v\nwant\n%+v", got, wantEntries)
	}
	if got, err := ro.Get("TopicA", 0, 12, 4); err != nil || len(got) != 0 {
		t.Fatalf("entries of the missing file: %+v %v", got, err)
	}
	// The minimum moves to the first unit whose record may lie at or past
	// the CommitLog's minimum: with the minimum inside the missing
	// records' range, the run's start.
	for _, tc := range []struct {
		minPhy, wantMin int64
	}{
		{want[5].PhyOffset, 5},
		{want[9].End(), 10},
		{want[20].PhyOffset - 1, 10},
		{want[20].PhyOffset, 20},
		{want[21].PhyOffset, 21},
	} {
		ro2, err := filecq.OpenReadOnly(filecq.Options{Dir: root, UnitsPerFile: 10})
		if err != nil {
			t.Fatal(err)
		}
		if err := ro2.CorrectMin(tc.minPhy); err != nil {
			t.Fatal(err)
		}
		if lo, _ := ro2.MinOffset("TopicA", 0); lo != tc.wantMin {
			t.Errorf("CorrectMin(%d): min %d, want %d", tc.minPhy, lo, tc.wantMin)
		}
		ro2.Close()
	}
	// Truncate cuts at the first entry at or past the offset, on either
	// side of the run.
	for _, tc := range []struct {
		phy, wantMax int64
	}{
		{want[25].PhyOffset, 25},
		{want[20].PhyOffset, 20},
		{want[8].PhyOffset, 8},
	} {
		ro2, err := filecq.OpenReadOnly(filecq.Options{Dir: root, UnitsPerFile: 10})
		if err != nil {
			t.Fatal(err)
		}
		if err := ro2.Truncate(tc.phy); err != nil {
			t.Fatal(err)
		}
		if hi, _ := ro2.MaxOffset("TopicA", 0); hi != tc.wantMax {
			t.Errorf("Truncate(%d): max %d, want %d", tc.phy, hi, tc.wantMax)
		}
		ro2.Close()
	}
	if _, err := ro.OffsetByTime("TopicA", 0, 0, cq.Lower); !errors.Is(err, filecq.ErrCorrupt) {
		t.Errorf("offset by time over the missing file: %v, want ErrCorrupt", err)
	}
}

// storeWithLongerTopicA copies the fixture store and extends TopicA/0 to
// 35 entries (four files of 10 units), closed again; it returns the
// store's directory and the queue's entries.
func storeWithLongerTopicA(t *testing.T) (string, []cq.Entry) {
	t.Helper()
	base := testutil.CopyStore(t, filepath.Join(fixtureDir, "clean"))
	s, err := filecq.Open(filecq.Options{Dir: base, UnitsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	old, _ := s.MaxOffset("TopicA", 0)
	var ds []cq.Dispatch
	for off := old; off < 35; off++ {
		ds = append(ds, cq.Dispatch{Topic: "TopicA", QueueID: 0, Entry: cq.Entry{QueueOffset: off, PhyOffset: 100_000 + off*100, Size: 100, TagsCode: off}})
	}
	if err := s.Put(ds); err != nil {
		t.Fatal(err)
	}
	want, err := s.Get("TopicA", 0, 0, 100)
	if err != nil || len(want) != 35 {
		t.Fatalf("TopicA/0: %d entries, %v", len(want), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return base, want
}

// With Options.RefillGap, Open writes the missing files again from the
// entries it gives (the broker reads them from the CommitLog) rather than
// refusing the queue: whole, or with blank units before the first entry
// for records retention deleted. A run it does not give whole stays
// missing and the queue is refused; a refill a crash cut short (its
// temporary file) is written again.
func TestOpenRefillsMissingFiles(t *testing.T) {
	base, want := storeWithLongerTopicA(t)
	missing := filepath.Join("consumequeue", "TopicA", "0", "00000000000000000200")
	if err := os.Remove(filepath.Join(base, missing)); err != nil {
		t.Fatal(err)
	}
	wantGap := filecq.Gap{Topic: "TopicA", QueueID: 0, From: 10, To: 20, PhyFrom: want[9].End(), PhyTo: want[20].PhyOffset}

	for _, tc := range []struct {
		name    string
		give    []cq.Entry
		leftTmp bool
		wantMin int64 // after CorrectMin(minPhy)
		minPhy  int64
	}{
		{name: "whole", give: want[10:20]},
		{name: "after a crash", give: want[10:20], leftTmp: true},
		{name: "records below the minimum gone", give: want[15:20], minPhy: want[15].PhyOffset, wantMin: 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := testutil.CopyStore(t, base)
			if tc.leftTmp {
				if err := os.WriteFile(filepath.Join(root, missing+".refill"), []byte("torn"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var asked []filecq.Gap
			s, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10, RefillGap: func(g filecq.Gap) ([]cq.Entry, error) {
				asked = append(asked, g)
				return tc.give, nil
			}})
			if err != nil {
				t.Fatalf("open with the refill: %v", err)
			}
			defer s.Close()
			if !reflect.DeepEqual(asked, []filecq.Gap{wantGap}) {
				t.Fatalf("asked for %+v, want %+v", asked, wantGap)
			}
			if _, err := os.Stat(filepath.Join(root, missing+".refill")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the temporary file is left: %v", err)
			}
			if tc.minPhy > 0 {
				if err := s.CorrectMin(tc.minPhy); err != nil {
					t.Fatal(err)
				}
			}
			lo, _ := s.MinOffset("TopicA", 0)
			got, err := s.Get("TopicA", 0, lo, 100)
			if err != nil || lo != tc.wantMin || !reflect.DeepEqual(got, want[lo:]) {
				t.Fatalf("from min %d (want %d): %+v %v\nwant %+v", lo, tc.wantMin, got, err, want[lo:])
			}
			if len(s.Gaps()) != 0 {
				t.Fatalf("gaps after the refill: %+v", s.Gaps())
			}
		})
	}
	for name, give := range map[string][]cq.Entry{
		"an entry missing in the run": append(append([]cq.Entry(nil), want[10:14]...), want[15:20]...),
		"short of the run's end":      want[10:19],
		"nothing":                     nil,
	} {
		t.Run(name, func(t *testing.T) {
			root := testutil.CopyStore(t, base)
			_, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10, RefillGap: func(filecq.Gap) ([]cq.Entry, error) { return give, nil }})
			if name == "nothing" {
				// Blank units all: the CommitLog's minimum is past the
				// whole run.
				if err != nil {
					t.Fatalf("a run whose records are all gone: %v", err)
				}
				return
			}
			if !errors.Is(err, filecq.ErrCorrupt) {
				t.Fatalf("open with %s: %v, want the queue refused", name, err)
			}
			if _, err := os.Stat(filepath.Join(root, missing)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a file was written for %s: %v", name, err)
			}
		})
	}
	// A run longer than MaxRefillEntries is not asked for (its entries
	// would be held in memory at once): the queue is refused.
	t.Run("a run over the bound", func(t *testing.T) {
		root := testutil.CopyStore(t, base)
		asked := false
		_, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10, MaxRefillEntries: 9,
			RefillGap: func(filecq.Gap) ([]cq.Entry, error) { asked = true; return want[10:20], nil }})
		if asked || !errors.Is(err, filecq.ErrCorrupt) {
			t.Fatalf("a run of 10 entries over a bound of 9: asked %v, open %v; want the queue refused unasked", asked, err)
		}
	})
}

// A run of missing files followed by a file with nothing written yet
// (RocketMQ creates a queue's next file once the one before is full, and
// a crash or a copy left it empty): the run's offsets were all written,
// and their records reach to the CommitLog's end. Open asks for them
// with PhyTo -1 and writes the run again; the queue ends where the empty
// file begins. Before, the run was left missing and the queue refused. A
// run followed by a file beginning with blank units (a queue's first
// file) is still not refilled.
func TestOpenRefillsMissingFilesBeforeAnEmptyOne(t *testing.T) {
	base, want := storeWithLongerTopicA(t)
	qdir := filepath.Join(base, "consumequeue", "TopicA", "0")
	if err := os.Remove(filepath.Join(qdir, "00000000000000000400")); err != nil { // offsets 20..29
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(qdir, "00000000000000000600"), make([]byte, 200), 0o644); err != nil {
		t.Fatal(err)
	}
	wantGap := filecq.Gap{Topic: "TopicA", QueueID: 0, From: 20, To: 30, PhyFrom: want[19].End(), PhyTo: -1}
	root := testutil.CopyStore(t, base)
	var asked []filecq.Gap
	s, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10, RefillGap: func(g filecq.Gap) ([]cq.Entry, error) {
		asked = append(asked, g)
		return want[20:30], nil
	}})
	if err != nil {
		t.Fatalf("open with the refill: %v", err)
	}
	defer s.Close()
	if !reflect.DeepEqual(asked, []filecq.Gap{wantGap}) {
		t.Fatalf("asked for %+v, want %+v", asked, wantGap)
	}
	if hi, err := s.MaxOffset("TopicA", 0); err != nil || hi != 30 {
		t.Fatalf("max offset %d %v, want 30 (where the empty file begins)", hi, err)
	}
	if got, err := s.Get("TopicA", 0, 0, 100); err != nil || !reflect.DeepEqual(got, want[:30]) {
		t.Fatalf("entries after the refill: %+v %v", got, err)
	}

	// A blank first unit after the run: not the run's neighbour.
	root = testutil.CopyStore(t, base)
	blank := make([]byte, 200)
	copy(blank[8:], []byte{0x7f, 0xff, 0xff, 0xff})
	if err := os.WriteFile(filepath.Join(root, "consumequeue", "TopicA", "0", "00000000000000000600"), blank, 0o644); err != nil {
		t.Fatal(err)
	}
	asked = nil
	_, err = filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10, RefillGap: func(g filecq.Gap) ([]cq.Entry, error) {
		asked = append(asked, g)
		return want[20:30], nil
	}})
	if !errors.Is(err, filecq.ErrCorrupt) || len(asked) != 0 {
		t.Fatalf("a run before a file of blank units: %v, asked %+v; want it refused and not asked for", err, asked)
	}
}
