package filecq_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// listQueues returns the store's queues as sorted "topic/id" strings.
func listQueues(t *testing.T, s cq.Store) []string {
	t.Helper()
	var qs []string
	if err := s.Queues(func(topic string, id int32) bool {
		qs = append(qs, fmt.Sprintf("%s/%d", topic, id))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(qs)
	return qs
}

func checkBounds(t *testing.T, s cq.Store, topic string, id int32, wantMin, wantMax int64) {
	t.Helper()
	if lo, hi := bounds(t, s, topic, id); lo != wantMin || hi != wantMax {
		t.Errorf("%s/%d bounds [%d, %d), want [%d, %d)", topic, id, lo, hi, wantMin, wantMax)
	}
}

// seedEntry is the entry put at queue offset off after a seed: phy
// 0x1000 + off x 0x100, size 0x40.
func seedEntry(off int64) cq.Dispatch {
	return cq.Dispatch{Topic: "T", QueueID: 0, Entry: cq.Entry{
		QueueOffset: off, PhyOffset: 0x1000 + off*0x100, Size: 0x40, TagsCode: off,
	}}
}

func put(t *testing.T, s cq.Store, ds ...cq.Dispatch) {
	t.Helper()
	if err := s.Put(ds); err != nil {
		t.Fatalf("put: %v", err)
	}
}

func checkEntries(t *testing.T, s cq.Store, from int64, want ...cq.Dispatch) {
	t.Helper()
	got, err := s.Get("T", 0, from, 100)
	if err != nil {
		t.Fatalf("get from %d: %v", from, err)
	}
	var wantEntries []cq.Entry
	for _, d := range want {
		wantEntries = append(wantEntries, d.Entry)
	}
	if !slices.Equal(got, wantEntries) {
		t.Errorf("get from %d:\ngot  %+v\nwant %+v", from, got, wantEntries)
	}
}

func closeStore(t *testing.T, s cq.Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// A seeded queue stands at its offset, as a RocketMQ file (blank units
// below the offset, none when it starts a file), before and after a
// reopen, and the next Put is stored at the offset.
func TestSeedStart(t *testing.T) {
	const units = 10
	for _, tc := range []struct {
		name   string
		offset int64
		file   string // the one file created
		blanks int    // blank units at its start
	}{
		{"inside the first file", 3, "00000000000000000000", 3},
		{"last unit of the first file", 9, "00000000000000000000", 9},
		{"at the first file boundary", 10, "00000000000000000200", 0},
		{"several files in, at a boundary", 30, "00000000000000000600", 0},
		{"several files in", 37, "00000000000000000600", 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openAt(t, dir, units)
			if err := s.SeedStart("T", 0, tc.offset); err != nil {
				t.Fatalf("seed: %v", err)
			}
			checkBounds(t, s, "T", 0, tc.offset, tc.offset)
			if got := listQueues(t, s); !slices.Equal(got, []string{"T/0"}) {
				t.Errorf("queues %v, want [T/0]", got)
			}
			if off, err := s.OffsetByTime("T", 0, 1, cq.Lower); err != nil || off != tc.offset {
				t.Errorf("offset by time: %d, %v; want %d", off, err, tc.offset)
			}
			checkEntries(t, s, tc.offset)
			closeStore(t, s)

			qdir := filepath.Join(dir, "consumequeue", "T", "0")
			if names := dirNames(t, qdir); !slices.Equal(names, []string{tc.file}) {
				t.Fatalf("files %v, want [%s]", names, tc.file)
			}
			checkBytes(t, filepath.Join(qdir, tc.file), unhex(t, strings.Repeat(blank, tc.blanks)+zeros(units-tc.blanks)))

			s = openAt(t, dir, units)
			checkBounds(t, s, "T", 0, tc.offset, tc.offset)
			put(t, s, seedEntry(tc.offset), seedEntry(tc.offset+1))
			checkBounds(t, s, "T", 0, tc.offset, tc.offset+2)
			checkEntries(t, s, tc.offset, seedEntry(tc.offset), seedEntry(tc.offset+1))
			closeStore(t, s)

			s = openAt(t, dir, units)
			defer s.Close()
			checkBounds(t, s, "T", 0, tc.offset, tc.offset+2)
			checkEntries(t, s, tc.offset, seedEntry(tc.offset), seedEntry(tc.offset+1))
		})
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// A queue that has files keeps its bounds and files, whether it holds
// entries or retention emptied it; seeding a seeded queue again changes
// nothing either.
func TestSeedStartLeavesExistingQueues(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, 10)
	defer s.Close()
	put(t, s, seedEntry(0), seedEntry(1), seedEntry(2))
	if err := s.SeedStart("T", 0, 50); err != nil {
		t.Fatalf("seed a queue with entries: %v", err)
	}
	checkBounds(t, s, "T", 0, 0, 3)
	checkEntries(t, s, 0, seedEntry(0), seedEntry(1), seedEntry(2))

	if err := s.CorrectMin(seedEntry(3).PhyOffset); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, "T", 0, 3, 3)
	if err := s.SeedStart("T", 0, 50); err != nil {
		t.Fatalf("seed an emptied queue: %v", err)
	}
	checkBounds(t, s, "T", 0, 3, 3)

	if err := s.SeedStart("U", 1, 7); err != nil {
		t.Fatal(err)
	}
	if err := s.SeedStart("U", 1, 20); err != nil {
		t.Fatalf("seed a seeded queue: %v", err)
	}
	checkBounds(t, s, "U", 1, 7, 7)
	if names := dirNames(t, filepath.Join(dir, "consumequeue", "T", "0")); !slices.Equal(names, []string{"00000000000000000000"}) {
		t.Errorf("files of T/0: %v", names)
	}
}

// Offsets <= 0 do nothing; what Put refuses, SeedStart refuses, and
// neither leaves a queue behind.
func TestSeedStartRefuses(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, 10)
	for _, off := range []int64{0, -1} {
		if err := s.SeedStart("T", 0, off); err != nil {
			t.Errorf("seed at %d: %v, want nil", off, err)
		}
	}
	for _, tc := range []struct {
		topic string
		id    int32
		off   int64
		want  error
	}{
		{"", 0, 5, filecq.ErrInvalidName},
		{"..", 0, 5, filecq.ErrInvalidName},
		{"a/b", 0, 5, filecq.ErrInvalidName},
		{"T", -1, 5, filecq.ErrInvalidName},
		{"T", 0, math.MaxInt64 / 20, filecq.ErrInvalidEntry},
	} {
		if err := s.SeedStart(tc.topic, tc.id, tc.off); !errors.Is(err, tc.want) {
			t.Errorf("seed %q/%d at %d: %v, want %v", tc.topic, tc.id, tc.off, err, tc.want)
		}
	}
	if got := listQueues(t, s); len(got) != 0 {
		t.Errorf("queues %v after refused seeds, want none", got)
	}
	closeStore(t, s)
	checkGone(t, filepath.Join(dir, "consumequeue"))
	if err := s.SeedStart("T", 0, 5); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("seed after close: %v, want cq.ErrClosed", err)
	}

	ro, err := filecq.OpenReadOnly(filecq.Options{Dir: dir, UnitsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.SeedStart("T", 0, 5); !errors.Is(err, filecq.ErrReadOnly) {
		t.Errorf("seed on a read-only store: %v, want ErrReadOnly", err)
	}
	if got := listQueues(t, ro); len(got) != 0 {
		t.Errorf("queues %v on the read-only store, want none", got)
	}
	checkGone(t, filepath.Join(dir, "consumequeue"))
}

// A seed whose file cannot be created fails and leaves no queue.
func TestSeedStartCreateFails(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "consumequeue"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A plain file where the topic directory would go.
	if err := os.WriteFile(filepath.Join(dir, "consumequeue", "T"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := openAt(t, dir, 10)
	defer s.Close()
	if err := s.SeedStart("T", 0, 5); err == nil || !strings.Contains(err.Error(), "seed T/0 at 5") {
		t.Fatalf("seed under a plain file: %v, want an error naming the seed", err)
	}
	if got := listQueues(t, s); len(got) != 0 {
		t.Errorf("queues %v after a failed seed, want none", got)
	}
}

// CorrectMin and Truncate treat a seeded queue as any queue (cq.Store):
// empty, it keeps standing at its offset; with entries, its minimum and
// end move by their records, never below the seed; both survive a reopen
// (followed by the broker's Truncate and CorrectMin).
func TestSeedStartThenCorrectMinAndTruncate(t *testing.T) {
	for _, seed := range []int64{13, 20} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir := t.TempDir()
			s := openAt(t, dir, 10)
			if err := s.SeedStart("T", 0, seed); err != nil {
				t.Fatal(err)
			}
			if err := s.CorrectMin(1 << 20); err != nil {
				t.Fatal(err)
			}
			checkBounds(t, s, "T", 0, seed, seed)
			if err := s.Truncate(0); err != nil {
				t.Fatal(err)
			}
			checkBounds(t, s, "T", 0, seed, seed)

			e0, e1, e2 := seedEntry(seed), seedEntry(seed+1), seedEntry(seed+2)
			put(t, s, e0, e1, e2)
			checkBounds(t, s, "T", 0, seed, seed+3)
			if err := s.CorrectMin(e1.PhyOffset); err != nil {
				t.Fatal(err)
			}
			checkBounds(t, s, "T", 0, seed+1, seed+3)
			if err := s.Truncate(e2.PhyOffset); err != nil {
				t.Fatal(err)
			}
			checkBounds(t, s, "T", 0, seed+1, seed+2)
			checkEntries(t, s, seed+1, e1)
			closeStore(t, s)

			s = openAt(t, dir, 10)
			defer s.Close()
			if err := s.Truncate(e2.PhyOffset); err != nil {
				t.Fatal(err)
			}
			if err := s.CorrectMin(e1.PhyOffset); err != nil {
				t.Fatal(err)
			}
			checkBounds(t, s, "T", 0, seed+1, seed+2)
			checkEntries(t, s, seed+1, e1)
			if err := s.CorrectMin(e2.PhyOffset); err != nil {
				t.Fatal(err)
			}
			checkBounds(t, s, "T", 0, seed+2, seed+2)
		})
	}
}
