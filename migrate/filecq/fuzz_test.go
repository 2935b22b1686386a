package filecq_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/vfs"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// FuzzOpenQueue lays arbitrary bytes out as the files of a queue and opens
// the store, read-only and writable, then uses the queue: the unit and file
// decoding must never panic, whatever the bytes. The first input byte picks
// the layout: the bytes cut into full-size files (the usual case), or one
// file of whatever length the input has (a store of another file size).
func FuzzOpenQueue(f *testing.F) {
	size := fuzzUnits * filecq.UnitSize
	if b, err := os.ReadFile(filepath.Join(fixtureDir, "clean", "consumequeue", "TopicA", "0", "00000000000000000000")); err == nil {
		b2, _ := os.ReadFile(filepath.Join(fixtureDir, "clean", "consumequeue", "TopicA", "0", "00000000000000000200"))
		f.Add(append(append([]byte{0}, b...), b2...))
	}
	f.Add([]byte{0})
	f.Add(append([]byte{0}, make([]byte, 3*size)...))
	blankThenEntry := []byte{0}
	for range 3 {
		blankThenEntry = append(blankThenEntry, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0)
	}
	blankThenEntry = append(blankThenEntry, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 1)
	f.Add(blankThenEntry)
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0, 0, 0})
	f.Add([]byte{0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})

	f.Fuzz(runFuzzInput)
}

// fuzzUnits is the file size of the fuzzed store (the fixture's).
const fuzzUnits = 10

func runFuzzInput(t *testing.T, data []byte) {
	size := fuzzUnits * filecq.UnitSize
	if len(data) == 0 || len(data) > 8*size {
		return
	}
	mode, data := data[0], data[1:]
	root := t.TempDir()
	qdir := filepath.Join(root, "consumequeue", "T", "0")
	if err := os.MkdirAll(qdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if mode%2 == 0 {
		for i := 0; i == 0 || i*size < len(data); i++ {
			b := make([]byte, size)
			copy(b, data[min(i*size, len(data)):])
			if err := os.WriteFile(filepath.Join(qdir, filecq.FileName(int64(i*size))), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	} else if err := os.WriteFile(filepath.Join(qdir, filecq.FileName(0)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	storeTime := func(phy int64, _ int32) (int64, error) { return phy / 7, nil }

	if ro, err := filecq.OpenReadOnly(filecq.Options{Dir: root, UnitsPerFile: fuzzUnits, StoreTime: storeTime}); err == nil {
		use(t, ro, false)
		ro.Close()
	}
	// fsync is beside the point here; vfs.NoSync keeps the target fast.
	opts := filecq.Options{Dir: root, UnitsPerFile: fuzzUnits, StoreTime: storeTime, MaxOpenQueues: 1, FS: vfs.NoSync{}}
	s, err := filecq.Open(opts)
	if err != nil {
		return
	}
	use(t, s, true)
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if s, err := filecq.Open(opts); err == nil {
		use(t, s, true)
		s.Close()
	}
}

// use exercises the queue T/0 of a store opened on fuzzed files. Errors are
// fine (a StoreTime lookup on garbage); panics and broken bounds are not.
func use(t *testing.T, s *filecq.Store, write bool) {
	t.Helper()
	lo, _ := s.MinOffset("T", 0)
	hi, _ := s.MaxOffset("T", 0)
	if lo < 0 || lo > hi {
		t.Fatalf("bounds [%d, %d)", lo, hi)
	}
	es, err := s.Get("T", 0, lo, int(hi-lo)+1)
	if err == nil && int64(len(es)) != hi-lo {
		t.Fatalf("get [%d, %d): %d entries", lo, hi, len(es))
	}
	s.OffsetByTime("T", 0, 1000, cq.Lower)
	s.OffsetByTime("T", 0, 1000, cq.Upper)
	s.CorrectMin(64)
	s.Truncate(1 << 40)
	if write {
		s.Put([]cq.Dispatch{{Topic: "T", QueueID: 0, Entry: cq.Entry{QueueOffset: hi, PhyOffset: 1 << 41, Size: 10}}})
		s.Truncate(1 << 20)
		s.DeleteQueue("T", 0)
	}
	s.Queues(func(string, int32) bool { return true })
}
