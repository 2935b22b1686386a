package filecq_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// A queue that ends in a file not full (its tail zero units) with stale
// files after a hole, as a crash or an old incarnation leaves them, is
// no run of files missing in the middle: the queue ended in that file.
// Open must not write the hole again (with blank units, the refill having
// no entry to give for offsets past the queue's end), which would take
// the zero tail and the stale file for entries; it refuses the queue as
// before the refill existed.
func TestOpenDoesNotRefillAfterAPartialFile(t *testing.T) {
	root := t.TempDir()
	s, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ds []cq.Dispatch
	for off := int64(0); off < 15; off++ {
		ds = append(ds, cq.Dispatch{Topic: "T", QueueID: 0, Entry: cq.Entry{QueueOffset: off, PhyOffset: 1000 + off*100, Size: 100, TagsCode: off}})
	}
	if err := s.Put(ds); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Stale files of queue offsets 30 to 59, after the missing 20 to 29:
	// enough of them that recovery, which reads the last three, takes the
	// partial file for a full one.
	dir := filepath.Join(root, "consumequeue", "T", "0")
	for f := int64(3); f < 6; f++ {
		stale := make([]byte, 10*filecq.UnitSize)
		for i := range 10 {
			u := stale[i*filecq.UnitSize:]
			binary.BigEndian.PutUint64(u, uint64(50_000+(f*10+int64(i))*100))
			binary.BigEndian.PutUint32(u[8:], 100)
			binary.BigEndian.PutUint64(u[12:], uint64(i))
		}
		if err := os.WriteFile(filepath.Join(dir, filecq.FileName(f*10*filecq.UnitSize)), stale, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	var asked []filecq.Gap
	s, err = filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10, RefillGap: func(g filecq.Gap) ([]cq.Entry, error) {
		asked = append(asked, g)
		return nil, nil // no record of these offsets: past the queue's end
	}})
	if err == nil {
		hi, _ := s.MaxOffset("T", 0)
		es, _ := s.Get("T", 0, 14, 3)
		s.Close()
		t.Fatalf("open took the queue, now ending at %d (entries from 14: %+v), after asking %+v", hi, es, asked)
	}
	if !errors.Is(err, filecq.ErrCorrupt) {
		t.Fatalf("open: %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(filepath.Join(dir, filecq.FileName(20*filecq.UnitSize))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the hole after the partial file was written: %v", err)
	}
	refusedReadOnly(t, root)
}

// refusedReadOnly checks that a read-only open (kvdump check-rocketmq, a
// RocketMQ store's first open) refuses the queue of root too, rather
// than read around the hole and serve what is not the queue's.
func refusedReadOnly(t *testing.T, root string) {
	t.Helper()
	ro, err := filecq.OpenReadOnly(filecq.Options{Dir: root, UnitsPerFile: 10})
	if err == nil {
		hi, _ := ro.MaxOffset("T", 0)
		es, _ := ro.Get("T", 0, 14, 3)
		ro.Close()
		t.Fatalf("a read-only open took the queue, ending at %d (entries from 14: %+v)", hi, es)
	}
	if !errors.Is(err, filecq.ErrCorrupt) {
		t.Fatalf("read-only open: %v, want ErrCorrupt", err)
	}
}

// Files after a hole whose entries' records lie below those of the file
// before it are left from an older queue, not the hole's neighbours (a
// queue's records grow with its offsets): Open does not write the hole,
// even as blank units (records below the CommitLog's minimum), and
// refuses the queue.
func TestOpenDoesNotRefillBeforeOlderRecords(t *testing.T) {
	root := t.TempDir()
	s, err := filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ds []cq.Dispatch
	for off := int64(0); off < 20; off++ {
		ds = append(ds, cq.Dispatch{Topic: "T", QueueID: 0, Entry: cq.Entry{QueueOffset: off, PhyOffset: 100_000 + off*100, Size: 100, TagsCode: off}})
	}
	if err := s.Put(ds); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "consumequeue", "T", "0")
	stale := make([]byte, 10*filecq.UnitSize)
	for i := range 10 {
		u := stale[i*filecq.UnitSize:]
		binary.BigEndian.PutUint64(u, uint64(1000+i*100))
		binary.BigEndian.PutUint32(u[8:], 100)
	}
	if err := os.WriteFile(filepath.Join(dir, filecq.FileName(30*filecq.UnitSize)), stale, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = filecq.Open(filecq.Options{Dir: root, UnitsPerFile: 10, RefillGap: func(g filecq.Gap) ([]cq.Entry, error) {
		return nil, nil // all below the CommitLog's minimum, as the broker finds
	}})
	if err == nil {
		hi, _ := s.MaxOffset("T", 0)
		s.Close()
		t.Fatalf("open took the queue, now ending at %d", hi)
	}
	if !errors.Is(err, filecq.ErrCorrupt) {
		t.Fatalf("open: %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(filepath.Join(dir, filecq.FileName(20*filecq.UnitSize))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the hole before the older records was written: %v", err)
	}
	refusedReadOnly(t, root)
}
