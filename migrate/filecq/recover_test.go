package filecq_test

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/migrate/filecq"
	"github.com/rs/zerolog"
)

// writeQueue lays out files of a queue by hand: files maps a file name to
// its units (hex), zero-padded to units x 20 bytes.
func writeQueue(t *testing.T, root, topic, id string, units int, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(root, "consumequeue", topic, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, h := range files {
		b := make([]byte, units*filecq.UnitSize)
		copy(b, unhex(t, h))
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func bounds(t *testing.T, s cq.Store, topic string, id int32) (int64, int64) {
	t.Helper()
	lo, err1 := s.MinOffset(topic, id)
	hi, err2 := s.MaxOffset(topic, id)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	return lo, hi
}

// Recovery ends a queue at its first invalid unit and deletes the files
// past it (spec 3.6); a read-only open ignores them instead.
func TestRecoverCutsAtFirstInvalidUnit(t *testing.T) {
	root := t.TempDir()
	// File 0: units 0, 1, then a unit with size 0, then a valid-looking
	// unit 3 that must not count; file 200 past the end.
	qdir := writeQueue(t, root, "T", "0", 10, map[string]string{
		"00000000000000000000": unit0 + unit1 + "0000000000000300 00000000 0000000000000000" + unit3,
		"00000000000000000200": unit10,
	})
	ro, err := filecq.OpenReadOnly(filecq.Options{Dir: root, UnitsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := bounds(t, ro, "T", 0); lo != 0 || hi != 2 {
		t.Errorf("read-only bounds [%d, %d), want [0, 2)", lo, hi)
	}
	ro.Close()
	if _, err := os.Stat(filepath.Join(qdir, "00000000000000000200")); err != nil {
		t.Fatalf("read-only open deleted a file: %v", err)
	}

	s, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if lo, hi := bounds(t, s, "T", 0); lo != 0 || hi != 2 {
		t.Errorf("bounds [%d, %d), want [0, 2)", lo, hi)
	}
	checkGone(t, filepath.Join(qdir, "00000000000000000200"))
	es, err := s.Get("T", 0, 0, 10)
	if err != nil || len(es) != 2 || es[1].PhyOffset != 0x200 {
		t.Errorf("get: %+v, %v", es, err)
	}
}

// Recovery starts at the third-last file: earlier files are taken as full
// without being read, as RocketMQ does.
func TestRecoverFromThirdLastFile(t *testing.T) {
	root := t.TempDir()
	full := strings.Repeat(unit5, 10)
	writeQueue(t, root, "T", "0", 10, map[string]string{
		"00000000000000000000": "", // all zero: would end the queue at 0 if read
		"00000000000000000200": full,
		"00000000000000000400": full,
		"00000000000000000600": unit6 + unit7,
	})
	s, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, hi := bounds(t, s, "T", 0); hi != 32 {
		t.Errorf("max %d, want 32", hi)
	}
}

// A file that ends exactly at a file boundary keeps an empty next file.
func TestRecoverEmptyNextFile(t *testing.T) {
	root := t.TempDir()
	qdir := writeQueue(t, root, "T", "0", 2, map[string]string{
		"00000000000000000000": unit0 + unit1,
		"00000000000000000040": "",
	})
	s, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, hi := bounds(t, s, "T", 0); hi != 2 {
		t.Errorf("max %d, want 2", hi)
	}
	d := byteEntry(2)
	d.Topic = "T"
	if err := s.Put([]cq.Dispatch{d}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, filepath.Join(qdir, "00000000000000000040"), unhex(t, unit2+zeros(1)))
}

// RocketMQ's RocksDB ConsumeQueue shares the directory; other stray
// entries are skipped too.
func TestRecoverSkipsForeignEntries(t *testing.T) {
	root := t.TempDir()
	cqdir := filepath.Join(root, "consumequeue")
	writeQueue(t, root, "T", "0", 10, map[string]string{"00000000000000000000": unit0})
	for _, name := range []string{"CURRENT", "MANIFEST-000005", "000007.sst", "OPTIONS-000009", "LOG", "IDENTITY"} {
		if err := os.WriteFile(filepath.Join(cqdir, name), []byte("rocksdb"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"T/x", "T/-1", "T/01", "T/ 2", "U/.tmp"} {
		if err := os.MkdirAll(filepath.Join(cqdir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(cqdir, "T", "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cqdir, "T", "0", "README"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var qs []string
	s.Queues(func(topic string, id int32) bool { qs = append(qs, topic+"/"+string(rune('0'+id))); return true })
	if strings.Join(qs, ",") != "T/0" {
		t.Errorf("queues %v, want only T/0", qs)
	}
	if !strings.Contains(logs.String(), "README") {
		t.Errorf("a stray file in a queue directory was not reported: %s", logs.String())
	}
}

func TestRecoverRejectsBadLayouts(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"gap between files":    {"00000000000000000000": unit0, "00000000000000000400": unit0},
		"name not on a border": {"00000000000000000020": unit0},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			writeQueue(t, root, "T", "0", 10, files)
			if _, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10}); !errors.Is(err, filecq.ErrCorrupt) {
				t.Errorf("open: %v, want ErrCorrupt", err)
			}
		})
	}
	t.Run("wrong file size", func(t *testing.T) {
		root := t.TempDir()
		writeQueue(t, root, "T", "0", 10, map[string]string{"00000000000000000000": unit0})
		// The store was written with 10 units per file; 300,000 is wrong.
		_, err := filecq.OpenReadOnly(filecq.Options{Dir: root})
		if !errors.Is(err, filecq.ErrCorrupt) {
			t.Errorf("open: %v, want ErrCorrupt", err)
		}
	})
}

func TestOpenOptions(t *testing.T) {
	dir := t.TempDir()
	for name, o := range map[string]filecq.Options{
		"no dir":          {},
		"missing dir":     {Dir: filepath.Join(dir, "nope")},
		"negative units":  {Dir: dir, UnitsPerFile: -1},
		"huge units":      {Dir: dir, UnitsPerFile: 1 << 30},
		"negative queues": {Dir: dir, MaxOpenQueues: -3},
	} {
		if s, err := filecq.Open(o); err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded", name)
		}
	}
	// A store root without consumequeue/ is an empty store, and a
	// read-only open does not create it.
	s, err := filecq.OpenReadOnly(filecq.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	checkGone(t, filepath.Join(dir, "consumequeue"))
}

func TestPutRejectsBadNames(t *testing.T) {
	s := openAt(t, t.TempDir(), 10)
	defer s.Close()
	for _, d := range []cq.Dispatch{
		{Topic: "", Entry: cq.Entry{Size: 1}},
		{Topic: "..", Entry: cq.Entry{Size: 1}},
		{Topic: "a/b", Entry: cq.Entry{Size: 1}},
		{Topic: "T", QueueID: -1, Entry: cq.Entry{Size: 1}},
	} {
		if err := s.Put([]cq.Dispatch{d}); !errors.Is(err, filecq.ErrInvalidName) {
			t.Errorf("put %q/%d: %v, want ErrInvalidName", d.Topic, d.QueueID, err)
		}
	}
	for _, e := range []cq.Entry{{Size: 0}, {Size: 1, PhyOffset: -1}, {Size: 1, QueueOffset: -1}, {Size: 1, QueueOffset: math.MaxInt64 / 20}} {
		if err := s.Put([]cq.Dispatch{{Topic: "T", Entry: e}}); !errors.Is(err, filecq.ErrInvalidEntry) {
			t.Errorf("put %+v: %v, want ErrInvalidEntry", e, err)
		}
	}
	var qs int
	s.Queues(func(string, int32) bool { qs++; return true })
	if qs != 0 {
		t.Errorf("%d queues after rejected puts, want 0", qs)
	}
}

// An entry above the end is appended at the end with RocketMQ's warning.
func TestPutAboveEndWarns(t *testing.T) {
	var logs bytes.Buffer
	s, err := filecq.Open(filecq.Options{Dir: t.TempDir(), UnitsPerFile: 10, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := byteEntry(0)
	e := byteEntry(5)
	if err := s.Put([]cq.Dispatch{d, e}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "[BUG] logic queue order") {
		t.Errorf("no warning logged: %s", logs.String())
	}
	es, _ := s.Get("TopicA", 0, 0, 10)
	if len(es) != 2 || es[1].QueueOffset != 1 || es[1].PhyOffset != e.PhyOffset {
		t.Errorf("entries %+v: want the second at offset 1", es)
	}
}

func TestOffsetByTimeWithoutStoreTime(t *testing.T) {
	s := openAt(t, t.TempDir(), 10)
	defer s.Close()
	if off, err := s.OffsetByTime("TopicA", 0, 5, cq.Lower); err != nil || off != 0 {
		t.Errorf("unknown queue: %d, %v", off, err)
	}
	if err := s.Put([]cq.Dispatch{byteEntry(0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OffsetByTime("TopicA", 0, 5, cq.Lower); !errors.Is(err, filecq.ErrNoStoreTime) {
		t.Errorf("got %v, want ErrNoStoreTime", err)
	}
}

// A crash between creating a file and sizing it leaves the queue's newest
// file empty: recovery removes it (a read-only store ignores it) and the
// queue goes on from its other files; an empty file before the newest one
// is damage.
func TestRecoverEmptyNewestFile(t *testing.T) {
	full := strings.Repeat(unit0, 10)
	for _, readOnly := range []bool{false, true} {
		root := t.TempDir()
		dir := writeQueue(t, root, "T", "0", 10, map[string]string{"00000000000000000000": full})
		cut := filepath.Join(dir, "00000000000000000200")
		if err := os.WriteFile(cut, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		open := filecq.Open
		if readOnly {
			open = filecq.OpenReadOnly
		}
		s, err := open(filecq.Options{Dir: root, UnitsPerFile: 10, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatalf("read-only %v: open: %v", readOnly, err)
		}
		if lo, hi := bounds(t, s, "T", 0); lo != 0 || hi != 10 {
			t.Errorf("read-only %v: bounds [%d,%d), want [0,10)", readOnly, lo, hi)
		}
		if _, err := os.Stat(cut); errors.Is(err, os.ErrNotExist) == readOnly {
			t.Errorf("read-only %v: the empty file exists afterwards: %v", readOnly, err == nil)
		}
		if !readOnly {
			if err := s.Put([]cq.Dispatch{{Topic: "T", QueueID: 0, Entry: cq.Entry{QueueOffset: 10, PhyOffset: 1 << 20, Size: 64}}}); err != nil {
				t.Fatalf("put after the cut file: %v", err)
			}
			if _, hi := bounds(t, s, "T", 0); hi != 11 {
				t.Errorf("max after a put %d, want 11", hi)
			}
		}
		s.Close()
	}

	root := t.TempDir()
	dir := writeQueue(t, root, "T", "0", 10, map[string]string{"00000000000000000200": full})
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000000"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10}); !errors.Is(err, filecq.ErrCorrupt) {
		t.Errorf("open with an empty file before the newest: %v, want ErrCorrupt", err)
	}
}
