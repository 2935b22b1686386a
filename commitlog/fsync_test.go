package commitlog

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/rocketkv/rocketkv/internal/vfs"
)

// syncRecorder is a file system that records, in order, the files it
// creates and the directories it syncs.
type syncRecorder struct {
	vfs.FS
	mu     sync.Mutex
	events []string
}

func (r *syncRecorder) note(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *syncRecorder) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&os.O_CREATE != 0 {
		if _, err := os.Stat(name); os.IsNotExist(err) {
			r.note("create " + name)
		}
	}
	f, err := r.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return recordedFile{File: f, r: r}, nil
}

type recordedFile struct {
	vfs.File
	r *syncRecorder
}

func (f recordedFile) Sync() error {
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.r.note("sync dir " + f.Name())
	}
	return f.File.Sync()
}

// Open creates the abort file and then syncs its directory: a power
// failure that kept the file's bytes but not its directory entry would
// make the next start take the crash for a clean stop.
func TestTheAbortFileSurvivesAPowerFailure(t *testing.T) {
	cfg := testConfig(t, 64<<10)
	rec := &syncRecorder{FS: vfs.OS{}}
	cfg.FS = rec
	l := mustOpen(t, cfg)
	defer l.Close()
	abort := filepath.Join(cfg.Dir, abortFileName)
	created := slices.Index(rec.events, "create "+abort)
	synced := slices.Index(rec.events[created+1:], "sync dir "+filepath.Dir(abort))
	if created < 0 || synced < 0 {
		t.Fatalf("events %q: the abort file's directory is not synced after the file is created", rec.events)
	}
}

// mappedSyncRecorder records the ranges msync is asked for.
type mappedSyncRecorder struct {
	vfs.FS
	mu    sync.Mutex
	syncs [][]byte
}

func (r *mappedSyncRecorder) SyncMapped(b []byte) error {
	r.mu.Lock()
	r.syncs = append(r.syncs, b)
	r.mu.Unlock()
	return r.FS.SyncMapped(b)
}

// A flush asks msync for a range starting on a page of the kernel's page
// size, whatever it is (64 KiB on some arm64 kernels, where an address
// aligned to 4 KiB only fails with EINVAL).
func TestFlushesStartOnTheKernelsPages(t *testing.T) {
	defer func(old int64) { osPageSize = old }(osPageSize)
	osPageSize = 64 << 10 // a multiple of the real one: msync takes it
	cfg := testConfig(t, 1<<20)
	rec := &mappedSyncRecorder{FS: vfs.OS{}}
	cfg.FS = rec
	l := mustOpen(t, cfg)
	defer l.Close()
	// Flushes that end inside a 64 KiB page: the next starts there.
	for round := range 3 {
		for i := range 7 {
			mustAppend(t, l, AppendRequest{Message: testMessage("T", 0, round*10+i, 900)})
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	seg := l.activeSegment()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.syncs) == 0 {
		t.Fatal("no msync")
	}
	for _, b := range rec.syncs {
		if off := int64(uintptr(unsafe.Pointer(&b[0])) - uintptr(unsafe.Pointer(&seg.data[0]))); off%osPageSize != 0 {
			t.Fatalf("msync of a range at %d of the segment, not on a %d-byte page", off, osPageSize)
		}
	}
}
