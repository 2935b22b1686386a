package filecq_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// unhex decodes hex written for people: spaces and newlines are ignored.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad hex in test: %v", err)
	}
	return b
}

func zeros(units int) string { return strings.Repeat("00", units*filecq.UnitSize) }

func openAt(t *testing.T, dir string, units int) *filecq.Store {
	t.Helper()
	s, err := filecq.Open(filecq.Options{Dir: dir, UnitsPerFile: units})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkBytes(t *testing.T, path string, want []byte) {
	t.Helper()
	got := readFile(t, path)
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\ngot  %x\nwant %x", filepath.Base(path), got, want)
	}
}

func checkGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s should not exist (stat: %v)", path, err)
	}
}

// Entry i of the byte tests: phy (i+1)*0x100, size 0x40+i, and tags codes
// covering sign extension and a delivery time.
func byteEntry(i int) cq.Dispatch {
	tags := map[int]int64{0: 0, 2: -1, 3: 0x7FFFFFFF, 4: -2147483648, 12: 1795983299085}
	tc, ok := tags[i]
	if !ok {
		tc = int64(i)
	}
	return cq.Dispatch{Topic: "TopicA", QueueID: 0, Entry: cq.Entry{
		QueueOffset: int64(i), PhyOffset: int64(i+1) * 0x100, Size: int32(0x40 + i), TagsCode: tc,
	}}
}

// The units of byteEntry(0..12), worked out by hand from spec 3.2:
// [phyOffset int64][size int32][tagsCode int64], big-endian.
const (
	unit0  = "0000000000000100 00000040 0000000000000000"
	unit1  = "0000000000000200 00000041 0000000000000001"
	unit2  = "0000000000000300 00000042 ffffffffffffffff"
	unit3  = "0000000000000400 00000043 000000007fffffff"
	unit4  = "0000000000000500 00000044 ffffffff80000000"
	unit5  = "0000000000000600 00000045 0000000000000005"
	unit6  = "0000000000000700 00000046 0000000000000006"
	unit7  = "0000000000000800 00000047 0000000000000007"
	unit8  = "0000000000000900 00000048 0000000000000008"
	unit9  = "0000000000000a00 00000049 0000000000000009"
	unit10 = "0000000000000b00 0000004a 000000000000000a"
	unit11 = "0000000000000c00 0000004b 000000000000000b"
	unit12 = "0000000000000d00 0000004c 000001a228f2520d" // 1795983299085
	blank  = "0000000000000000 7fffffff 0000000000000000"
)

var file0 = strings.Join([]string{unit0, unit1, unit2, unit3, unit4, unit5, unit6, unit7, unit8, unit9}, " ")

// Entries 0..12 with 10 units per file: file 00000000000000000000 full,
// file 00000000000000000200 (named by the byte offset 10 x 20) holding
// units 10..12 and a zero tail.
func TestBytesRollOver(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, 10)
	var ds []cq.Dispatch
	for i := range 13 {
		ds = append(ds, byteEntry(i))
	}
	if err := s.Put(ds); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	qdir := filepath.Join(dir, "consumequeue", "TopicA", "0")
	names, err := os.ReadDir(qdir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range names {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != "00000000000000000000 00000000000000000200" {
		t.Fatalf("files %v, want 00000000000000000000 and 00000000000000000200", got)
	}
	checkBytes(t, filepath.Join(qdir, "00000000000000000000"), unhex(t, file0))
	checkBytes(t, filepath.Join(qdir, "00000000000000000200"), unhex(t, unit10+unit11+unit12+zeros(7)))

	// Truncate at entry 11's record: unit 11 and 12 become zeros.
	s = openAt(t, dir, 10)
	if err := s.Truncate(0xc00); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, filepath.Join(qdir, "00000000000000000200"), unhex(t, unit10+zeros(9)))
	// At entry 10's record: the second file goes (its first unit is cut).
	if err := s.Truncate(0xb00); err != nil {
		t.Fatal(err)
	}
	checkGone(t, filepath.Join(qdir, "00000000000000000200"))
	checkBytes(t, filepath.Join(qdir, "00000000000000000000"), unhex(t, file0))
	if hi, _ := s.MaxOffset("TopicA", 0); hi != 10 {
		t.Errorf("max after truncation %d, want 10", hi)
	}
	// Putting 10 again recreates the file.
	if err := s.Put([]cq.Dispatch{byteEntry(10)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, filepath.Join(qdir, "00000000000000000200"), unhex(t, unit10+zeros(9)))
}

// A queue whose first entry is 13 gets the file holding 13 (byte offset
// 260 falls in the file starting at 200) with units 10..12 blank (spec
// 3.5), and no file 0.
func TestBytesPreFill(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, 10)
	d := cq.Dispatch{Topic: "%RETRY%G", QueueID: 3, Entry: cq.Entry{QueueOffset: 13, PhyOffset: 0x5000, Size: 0x99, TagsCode: 7}}
	if err := s.Put([]cq.Dispatch{d}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	qdir := filepath.Join(dir, "consumequeue", "%RETRY%G", "3")
	checkGone(t, filepath.Join(qdir, "00000000000000000000"))
	checkBytes(t, filepath.Join(qdir, "00000000000000000200"),
		unhex(t, blank+blank+blank+"0000000000005000 00000099 0000000000000007"+zeros(6)))

	s = openAt(t, dir, 10)
	defer s.Close()
	lo, _ := s.MinOffset("%RETRY%G", 3)
	hi, _ := s.MaxOffset("%RETRY%G", 3)
	if lo != 13 || hi != 14 {
		t.Errorf("reopened bounds [%d, %d), want [13, 14): blank units are not entries", lo, hi)
	}
}

// CorrectMin deletes a file (not the last) whose last unit's record is
// below the CommitLog's minimum (spec 3.7).
func TestBytesCorrectMinDeletesFiles(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, 10)
	defer s.Close()
	var ds []cq.Dispatch
	for i := range 13 {
		ds = append(ds, byteEntry(i))
	}
	if err := s.Put(ds); err != nil {
		t.Fatal(err)
	}
	qdir := filepath.Join(dir, "consumequeue", "TopicA", "0")
	// Entry 9's record (0xa00) is still there: nothing goes.
	if err := s.CorrectMin(0xa00); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, filepath.Join(qdir, "00000000000000000000"), unhex(t, file0))
	if lo, _ := s.MinOffset("TopicA", 0); lo != 9 {
		t.Errorf("min %d, want 9", lo)
	}
	if err := s.CorrectMin(0xa01); err != nil {
		t.Fatal(err)
	}
	checkGone(t, filepath.Join(qdir, "00000000000000000000"))
	if lo, _ := s.MinOffset("TopicA", 0); lo != 10 {
		t.Errorf("min %d, want 10", lo)
	}
	// Everything below: the last file stays, the queue is empty at 13.
	if err := s.CorrectMin(0x10000); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, filepath.Join(qdir, "00000000000000000200"), unhex(t, unit10+unit11+unit12+zeros(7)))
	lo, _ := s.MinOffset("TopicA", 0)
	hi, _ := s.MaxOffset("TopicA", 0)
	if lo != 13 || hi != 13 {
		t.Errorf("bounds [%d, %d), want [13, 13)", lo, hi)
	}
}

// RocketMQ's maxPhysicOffset check: an entry whose record ends at or before
// the newest record's end is skipped even at a new queue offset.
func TestPutSkipsOldRecords(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, 10)
	defer s.Close()
	if err := s.Put([]cq.Dispatch{byteEntry(0), byteEntry(1)}); err != nil {
		t.Fatal(err)
	}
	old := byteEntry(2)
	old.PhyOffset, old.Size = 0x180, 0x40 // ends at 0x1c0 <= 0x241
	if err := s.Put([]cq.Dispatch{old}); err != nil {
		t.Fatal(err)
	}
	if hi, _ := s.MaxOffset("TopicA", 0); hi != 2 {
		t.Errorf("max %d, want 2: the old record was written", hi)
	}
}
