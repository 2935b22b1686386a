package rocksread

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func walPath(t *testing.T, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(m) != 1 {
		t.Fatalf("WAL files in %s: %v %v", dir, m, err)
	}
	return m[0]
}

// The cq fixture's WAL holds three single-write batches for the offset
// column family; the last deletes TopicA's min record for queue 0.
const topicAMin0 = "0000000601546f70696341016d696e0100000000"

func offsetKeys(t *testing.T, dir string) []string {
	t.Helper()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var keys []string
	if err := db.Scan("offset", func(k, v []byte) error {
		keys = append(keys, string(hexKey(k)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

func hexKey(k []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(k))
	for _, c := range k {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return out
}

func TestWALDeletionHidesFlushedKey(t *testing.T) {
	if slices.Contains(offsetKeys(t, filepath.Join("testdata", "cq")), topicAMin0) {
		t.Fatal("TopicA min 0 is deleted in the WAL but the scan shows it")
	}
}

// TestWALTornTail cuts the WAL inside its last record: the reader keeps the
// records before it, as RocksDB's recovery does, so the deletion is lost
// and the flushed min record shows again.
func TestWALTornTail(t *testing.T) {
	dir := copyDB(t, "cq")
	p := walPath(t, dir)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b[:len(b)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(offsetKeys(t, dir), topicAMin0) {
		t.Fatal("WAL cut inside its last record: the deletion in it must be dropped")
	}
}

// TestWALCorruptRecordRefused flips a byte in the WAL's first record (not
// its last): Open fails with ErrCorrupt instead of guessing.
func TestWALCorruptRecordRefused(t *testing.T) {
	dir := copyDB(t, "cq")
	p := walPath(t, dir)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[logHeaderSize+3] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a damaged WAL record: %v, want ErrCorrupt", err)
	}
}

// TestOldWALIgnored renames the WAL below the column families' log
// number: it counts as flushed, so its writes (the checkpoint, TopicA queue
// 2's max record, the deletion) vanish from the scan.
func TestOldWALIgnored(t *testing.T) {
	dir := copyDB(t, "cq")
	p := walPath(t, dir)
	if err := os.Rename(p, filepath.Join(dir, "000001.log")); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(offsetKeys(t, dir), topicAMin0) {
		t.Fatal("a WAL older than the log number was replayed")
	}
}

func TestMissingCurrent(t *testing.T) {
	dir := copyDB(t, "cq")
	if err := os.Remove(filepath.Join(dir, "CURRENT")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil {
		t.Fatal("Open without CURRENT succeeded")
	}
}

// The topics fixture's WAL holds a range deletion of topic-30 to topic-34
// (end exclusive) over keys flushed to level 1: they are hidden, the keys
// around them are not.
func TestWALRangeDeletion(t *testing.T) {
	db, err := Open(filepath.Join("testdata", "topics"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := len(db.memTombs[0]); n != 1 {
		t.Fatalf("%d range deletions replayed from the WAL, want 1", n)
	}
	var keys []string
	if err := db.Scan("default", func(k, v []byte) error {
		keys = append(keys, string(k))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"topic-30", "topic-34"} {
		if slices.Contains(keys, k) {
			t.Errorf("%s is range-deleted in the WAL but listed", k)
		}
	}
	for _, k := range []string{"topic-3", "topic-35", "topic-new"} {
		if !slices.Contains(keys, k) {
			t.Errorf("%s is missing from %v", k, keys)
		}
	}
}
