package commitlog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rocketkv/rocketkv/internal/testutil"
)

// writeTestLog appends n messages of varying sizes to a log with 4 KiB
// segments (so it rolls several times, leaving blank fillers) and closes
// it.
func writeTestLog(t *testing.T, n int) (root string, res []AppendResult, msgs []*Message, end int64) {
	t.Helper()
	cfg := testConfig(t, 4096)
	l := mustOpen(t, cfg)
	c := newCounter()
	for i := 0; i < n; i++ {
		m := testMessage("T", int32(i%2), i, 50+(i*97)%700)
		res = append(res, mustAppend(t, l, AppendRequest{Message: m, Assigner: c}))
		msgs = append(msgs, m)
	}
	end = l.MaxOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg.Dir, res, msgs, end
}

func mustOpenReadOnly(t *testing.T, root string) *ReadOnlyLog {
	t.Helper()
	l, err := OpenReadOnly(root)
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// A read-only log finds the end the Log had, yields every record in order
// (skipping blank fillers and a trailing preallocated segment), reads any
// record by offset, reports bad positions with the codec's errors, and
// creates or changes no file.
func TestReadOnlyMatchesLog(t *testing.T) {
	root, res, msgs, end := writeTestLog(t, 40)
	segDir := filepath.Join(root, commitLogDirName)
	// A preallocated, still empty next segment, as a running broker leaves.
	next := (end/4096 + 1) * 4096
	if err := os.WriteFile(filepath.Join(segDir, SegmentName(next)), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	before := testutil.TreeState(t, root)
	time.Sleep(5 * time.Millisecond)

	l := mustOpenReadOnly(t, root)
	if l.MinOffset() != 0 || l.MaxOffset() != end {
		t.Fatalf("bounds [%d,%d), the Log had [0,%d)", l.MinOffset(), l.MaxOffset(), end)
	}
	it := l.NewIterator(0)
	blanks := 0
	for i, r := range res {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if e.Offset != r.PhyOffset || int64(e.Size) != r.WroteBytes {
			t.Fatalf("record %d at %d (%d bytes), appended at %d (%d bytes)", i, e.Offset, e.Size, r.PhyOffset, r.WroteBytes)
		}
		m, err := DecodeWith(e.Data, DecodeOptions{VerifyCRC: true})
		if err != nil || m.Topic != "T" || m.QueueID != msgs[i].QueueID || !bytes.Equal(m.Body, msgs[i].Body) || m.QueueOffset != r.QueueOffset {
			t.Fatalf("record %d decodes to %+v (%v)", i, m, err)
		}
		data := bytes.Clone(e.Data)
		got, err := l.ReadRecord(r.PhyOffset)
		if err != nil || !bytes.Equal(got.Data, data) || got.Offset != r.PhyOffset {
			t.Fatalf("ReadRecord(%d): %v", r.PhyOffset, err)
		}
		if _, err := l.ReadRecord(r.PhyOffset + 1); !errors.Is(err, ErrBadMagic) && !errors.Is(err, ErrCorrupt) {
			t.Errorf("ReadRecord inside record %d: %v", i, err)
		}
		if i+1 < len(res) && res[i+1].PhyOffset != r.PhyOffset+r.WroteBytes {
			blanks++
			if _, err := l.ReadRecord(r.PhyOffset + r.WroteBytes); !errors.Is(err, ErrBlank) {
				t.Errorf("ReadRecord at the filler after record %d: %v", i, err)
			}
		}
	}
	if _, err := it.Next(); !errors.Is(err, ErrNoMoreData) || it.Offset() != end {
		t.Fatalf("after the last record: %v at %d", err, it.Offset())
	}
	if blanks < 3 {
		t.Fatalf("only %d segment rolls: the test does not cover fillers", blanks)
	}
	for _, off := range []int64{end, -1, next} {
		if _, err := l.ReadRecord(off); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Errorf("ReadRecord(%d): %v, want ErrOffsetOutOfRange", off, err)
		}
	}

	// Clamped, the log ends at a record boundary.
	l.Clamp(res[10].PhyOffset)
	if l.MaxOffset() != res[10].PhyOffset {
		t.Fatalf("clamped end %d", l.MaxOffset())
	}
	it = l.NewIterator(0)
	for i := 0; i < 10; i++ {
		if _, err := it.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := it.Next(); !errors.Is(err, ErrNoMoreData) {
		t.Errorf("past the clamp: %v", err)
	}
	if _, err := l.ReadRecord(res[10].PhyOffset); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("ReadRecord past the clamp: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if after := testutil.TreeState(t, root); !reflect.DeepEqual(before, after) {
		t.Fatalf("read-only use changed the store:\n%v\n%v", before, after)
	}

	// Retention deleted the first segment: reads below the new minimum
	// are out of range; the rest still reads.
	if err := os.Remove(filepath.Join(segDir, SegmentName(0))); err != nil {
		t.Fatal(err)
	}
	l2 := mustOpenReadOnly(t, root)
	if l2.MinOffset() != 4096 || l2.MaxOffset() != end {
		t.Fatalf("after retention bounds [%d,%d)", l2.MinOffset(), l2.MaxOffset())
	}
	if _, err := l2.ReadRecord(0); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("ReadRecord below the minimum: %v", err)
	}
	n := 0
	for it := l2.NewIterator(4096); ; n++ {
		if _, err := it.Next(); errors.Is(err, ErrNoMoreData) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	kept := 0
	for _, r := range res {
		if r.PhyOffset >= 4096 {
			kept++
		}
	}
	if n != kept {
		t.Errorf("iterated %d records after retention, want %d", n, kept)
	}
	if _, err := l2.NewIterator(0).Next(); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("iterator below the minimum: %v", err)
	}
}

// The end is the first bad header of the last segment with data, as
// recovery would find it (without recovery's repairs).
func TestReadOnlyEndStopsAtDamage(t *testing.T) {
	root, res, _, end := writeTestLog(t, 40)
	// The victim is the first record of the last segment; the records
	// after it must not count.
	lastSeg := res[len(res)-1].PhyOffset / 4096 * 4096
	var victim AppendResult
	for i := len(res) - 1; i >= 0 && res[i].PhyOffset >= lastSeg; i-- {
		victim = res[i]
	}
	path := filepath.Join(root, commitLogDirName, SegmentName(victim.PhyOffset/4096*4096))
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rel := victim.PhyOffset % 4096
	for name, damage := range map[string]func(b []byte){
		"bad magic":           func(b []byte) { b[rel+4] ^= 0xff },
		"wrong offset field":  func(b []byte) { b[rel+35] ^= 1 },
		"fields do not match": func(b []byte) { b[rel+3]++ },
	} {
		b := bytes.Clone(orig)
		damage(b)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := OpenReadOnly(root)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if l.MaxOffset() != victim.PhyOffset {
			t.Errorf("%s: end %d, want the damaged record's offset %d (undamaged end %d)", name, l.MaxOffset(), victim.PhyOffset, end)
		}
		_ = l.Close()
	}
}

// RocketMQ's own CommitLog reads the same through the read-only path.
func TestReadOnlyRocketMQFixture(t *testing.T) {
	root := fixtureStore(t, store498)
	before := testutil.TreeState(t, root)
	l := mustOpenReadOnly(t, root)
	if l.MinOffset() != 0 || l.MaxOffset() != 53272 {
		t.Fatalf("bounds [%d,%d), RocketMQ wrote [0,53272)", l.MinOffset(), l.MaxOffset())
	}
	n := 0
	for it := l.NewIterator(0); ; n++ {
		e, err := it.Next()
		if errors.Is(err, ErrNoMoreData) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		m, err := DecodeWith(e.Data, DecodeOptions{VerifyCRC: true})
		if err != nil || m.PhyOffset != e.Offset {
			t.Fatalf("record at %d: offset field %d, %v", e.Offset, m.PhyOffset, err)
		}
	}
	if n != 104 {
		t.Errorf("%d records, RocketMQ wrote 104", n)
	}
	_ = l.Close()
	if after := testutil.TreeState(t, root); !reflect.DeepEqual(before, after) {
		t.Fatal("read-only use changed the fixture copy")
	}
}

// LockShared keeps a Log out and is refused while a Log holds the store;
// it creates nothing in a store that has no lock file.
func TestLockShared(t *testing.T) {
	cfg := testConfig(t, 4096)
	l := mustOpen(t, cfg)
	if _, err := LockShared(cfg.Dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("LockShared on an open store: %v, want ErrLocked", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lk, err := LockShared(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	lk2, err := LockShared(cfg.Dir)
	if err != nil {
		t.Fatalf("second shared lock: %v", err)
	}
	if _, err := Open(cfg); !errors.Is(err, ErrLocked) {
		t.Fatalf("Open while a reader holds the store: %v, want ErrLocked", err)
	}
	_ = lk.Close()
	_ = lk2.Close()
	l = mustOpen(t, cfg)
	_ = l.Close()

	empty := t.TempDir()
	lk, err = LockShared(empty)
	if err != nil {
		t.Fatal(err)
	}
	_ = lk.Close()
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Fatalf("LockShared created %v", entries)
	}
	if _, err := OpenReadOnly(empty); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenReadOnly without a commitlog directory: %v", err)
	}
}

func FuzzReadOnlyIterator(f *testing.F) {
	for _, s := range fixtureRecordSeeds(f) {
		f.Add(append(bytes.Clone(s), make([]byte, 64)...))
	}
	rec, err := AppendRecord(nil, testMessage("T", 0, 1, 20))
	if err != nil {
		f.Fatal(err)
	}
	two := append(bytes.Clone(rec), rec...)
	PatchPhyOffset(two[len(rec):], int64(len(rec)))
	f.Add(append(two, 0, 0, 0, 100, 0xCB, 0xD4, 0x31, 0x94))
	f.Add([]byte{0, 0, 0, 9})
	f.Fuzz(func(t *testing.T, seg []byte) {
		root := t.TempDir()
		dir := filepath.Join(root, commitLogDirName)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, SegmentName(0)), seg, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := OpenReadOnly(root)
		if err != nil {
			return
		}
		defer l.Close()
		if l.MaxOffset() < 0 || l.MaxOffset() > int64(len(seg)) {
			t.Fatalf("end %d outside a %d-byte segment", l.MaxOffset(), len(seg))
		}
		it := l.NewIterator(0)
		for i := 0; i < 1000; i++ {
			e, err := it.Next()
			if err != nil {
				break
			}
			if _, err := Decode(e.Data); err != nil {
				t.Fatalf("iterator returned an undecodable record at %d: %v", e.Offset, err)
			}
			if _, err := l.ReadRecord(e.Offset); err != nil {
				t.Fatalf("ReadRecord of an iterated record at %d: %v", e.Offset, err)
			}
		}
		for _, off := range []int64{0, 1, 8, int64(len(seg)) / 2, l.MaxOffset() - 8} {
			_, _ = l.ReadRecord(off)
		}
	})
}
