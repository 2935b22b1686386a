package filecq_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/rocketkv/rocketkv/cq"
	"github.com/rocketkv/rocketkv/internal/vfs"
	"github.com/rocketkv/rocketkv/migrate/filecq"
)

// syncCounter is the OS file system recording which paths were fsynced.
type syncCounter struct {
	vfs.OS
	mu     sync.Mutex
	synced map[string]int
}

type countedFile struct {
	vfs.File
	c *syncCounter
}

func (f countedFile) Sync() error {
	f.c.mu.Lock()
	f.c.synced[f.Name()]++
	f.c.mu.Unlock()
	return f.File.Sync()
}

func (f countedFile) OSFile() *os.File {
	return f.File.(interface{ OSFile() *os.File }).OSFile()
}

func (c *syncCounter) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countedFile{f, c}, nil
}

// With many queues and a small bound, the store keeps at most 2 files and
// 2 mappings per open queue, and Flush still syncs the files the LRU closed
// after writing them.
func TestOpenFilesStayBounded(t *testing.T) {
	const queues, maxOpen = 60, 4
	fs := &syncCounter{synced: make(map[string]int)}
	dir := t.TempDir()
	s, err := filecq.Open(filecq.Options{Dir: dir, UnitsPerFile: 5, MaxOpenQueues: maxOpen, FS: fs,
		StoreTime: func(phy int64, _ int32) (int64, error) { return phy, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ds []cq.Dispatch
	for i := range 12 {
		for q := range queues {
			ds = append(ds, cq.Dispatch{Topic: fmt.Sprintf("T%d", q%7), QueueID: int32(q), Entry: cq.Entry{
				QueueOffset: int64(i), PhyOffset: int64(i*queues+q) * 10, Size: 10,
			}})
		}
	}
	if err := s.Put(ds); err != nil {
		t.Fatal(err)
	}
	for q := range queues {
		topic := fmt.Sprintf("T%d", q%7)
		if es, err := s.Get(topic, int32(q), 0, 100); err != nil || len(es) != 12 {
			t.Fatalf("get %s/%d: %d entries, %v", topic, q, len(es), err)
		}
		if off, err := s.OffsetByTime(topic, int32(q), int64(6*queues+q)*10, cq.Upper); err != nil || off != 6 {
			t.Fatalf("offset by time %s/%d: %d, %v", topic, q, off, err)
		}
		if m, f := s.OpenMappings(), s.OpenFiles(); m > 2*maxOpen || f > 2*maxOpen {
			t.Fatalf("after reading %d queues: %d mappings, %d files open; bound %d", q+1, m, f, 2*maxOpen)
		}
	}
	if s.OpenMappings() == 0 {
		t.Errorf("no mapping open after reads")
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	// Every queue has files 0, 100 and 200 (5 units each, 12 entries).
	for q := range queues {
		for _, name := range []string{"00000000000000000000", "00000000000000000100", "00000000000000000200"} {
			p := filepath.Join(dir, "consumequeue", fmt.Sprintf("T%d", q%7), fmt.Sprint(q), name)
			fs.mu.Lock()
			n := fs.synced[p]
			fs.mu.Unlock()
			if n == 0 {
				t.Errorf("%s was written but never synced", p)
			}
		}
	}
}

// A failing mapping fails the read that needed it, and nothing else.
func TestMapFailure(t *testing.T) {
	faulty := vfs.NewFaulty(vfs.OS{})
	s, err := filecq.Open(filecq.Options{Dir: t.TempDir(), UnitsPerFile: 10, FS: faulty})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put([]cq.Dispatch{byteEntry(0), byteEntry(1)}); err != nil {
		t.Fatal(err)
	}
	faulty.FailMaps(1)
	if _, err := s.Get("TopicA", 0, 0, 10); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("get with a failing mapping: %v, want the injected error", err)
	}
	es, err := s.Get("TopicA", 0, 0, 10)
	if err != nil || len(es) != 2 {
		t.Fatalf("get after the fault: %+v, %v", es, err)
	}
	if err := s.Put([]cq.Dispatch{byteEntry(2)}); err != nil {
		t.Fatal(err)
	}
	if hi, _ := s.MaxOffset("TopicA", 0); hi != 3 {
		t.Errorf("max %d, want 3", hi)
	}
}

// A failed fsync is final: every later Flush reports it, even once the
// disk syncs again, so that the caller never records entries written
// since the last good Flush as durable; writes and reads go on.
func TestSyncFailureIsFinal(t *testing.T) {
	faulty := vfs.NewFaulty(vfs.OS{})
	s, err := filecq.Open(filecq.Options{Dir: t.TempDir(), UnitsPerFile: 10, FS: faulty})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put([]cq.Dispatch{byteEntry(0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("flush before the fault: %v", err)
	}
	if err := s.Put([]cq.Dispatch{byteEntry(1)}); err != nil {
		t.Fatal(err)
	}
	faulty.FailFileSyncs(1)
	first := s.Flush()
	if !errors.Is(first, filecq.ErrSyncFailed) || !errors.Is(first, syscall.EIO) {
		t.Fatalf("flush with a failing fsync: %v, want ErrSyncFailed wrapping EIO", first)
	}
	if err := s.Put([]cq.Dispatch{byteEntry(2)}); err != nil {
		t.Fatalf("put after the failed flush: %v", err)
	}
	if err := s.Flush(); !errors.Is(err, filecq.ErrSyncFailed) || err.Error() != first.Error() {
		t.Fatalf("flush once fsyncs work again: %v, want the first failure %v", err, first)
	}
	if es, err := s.Get("TopicA", 0, 0, 10); err != nil || len(es) != 3 {
		t.Fatalf("get after the failed flush: %+v, %v", es, err)
	}
}
