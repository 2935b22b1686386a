package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/edsrzf/mmap-go"
)

// ErrInjected is wrapped by the errors a Faulty FS makes up (other than the
// ENOSPC of a failed allocation, which wraps syscall.ENOSPC like the real one).
var ErrInjected = errors.New("vfs: injected fault")

// Faulty wraps an FS and injects faults. It is safe for concurrent use; set
// faults with its methods at any time.
type Faulty struct {
	inner FS

	mu         sync.Mutex
	allocs     int   // Allocate calls so far
	failAllocN []int // 1-based Allocate calls that fail with ENOSPC
	allocFull  bool  // every Allocate fails with ENOSPC
	failMap    int   // number of following Map calls that fail
	failSync   int   // number of following SyncMapped calls that fail
	failFSync  int   // number of following File.Sync calls that fail
	usage      *DiskUsage
	usageOf    map[string]DiskUsage // by path, before usage
}

// NewFaulty returns a Faulty FS passing everything through to inner until a
// fault is set.
func NewFaulty(inner FS) *Faulty { return &Faulty{inner: inner} }

var _ FS = (*Faulty)(nil)

// FailAllocation makes the n-th Allocate call (1-based, counted over the
// life of f, see Allocations) fail with ENOSPC.
func (f *Faulty) FailAllocation(n int) {
	f.mu.Lock()
	f.failAllocN = append(f.failAllocN, n)
	f.mu.Unlock()
}

// SetDiskFull makes every Allocate fail with ENOSPC while full is true.
func (f *Faulty) SetDiskFull(full bool) {
	f.mu.Lock()
	f.allocFull = full
	f.mu.Unlock()
}

// Allocations returns the number of Allocate calls so far.
func (f *Faulty) Allocations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.allocs
}

// FailMaps makes the next n Map calls fail.
func (f *Faulty) FailMaps(n int) {
	f.mu.Lock()
	f.failMap = n
	f.mu.Unlock()
}

// SetUsage makes Statfs report u; nil restores the real value.
func (f *Faulty) SetUsage(u *DiskUsage) {
	f.mu.Lock()
	if u != nil {
		c := *u
		u = &c
	}
	f.usage = u
	f.mu.Unlock()
}

// SetUsageOf makes Statfs of path (exactly) report u, whatever SetUsage
// set; nil removes it.
func (f *Faulty) SetUsageOf(path string, u *DiskUsage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u == nil {
		delete(f.usageOf, path)
		return
	}
	if f.usageOf == nil {
		f.usageOf = map[string]DiskUsage{}
	}
	f.usageOf[path] = *u
}

// OpenFile implements FS. The file's Sync fails as FailFileSyncs sets.
func (f *Faulty) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	file, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultyFile{File: file, fs: f}, nil
}

// FailFileSyncs makes the next n Sync calls of files this FS opened fail
// as a write-back error does (EIO), without syncing.
func (f *Faulty) FailFileSyncs(n int) {
	f.mu.Lock()
	f.failFSync = n
	f.mu.Unlock()
}

// faultyFile is a file a Faulty FS opened.
type faultyFile struct {
	File
	fs *Faulty
}

// Sync implements File, failing as configured.
func (f faultyFile) Sync() error {
	if f.fs.take(&f.fs.failFSync) {
		return &os.PathError{Op: "fsync", Path: f.Name(), Err: fmt.Errorf("%w (%w)", syscall.EIO, ErrInjected)}
	}
	return f.File.Sync()
}

// OSFile returns the *os.File under the file when it has one (OS.Map
// maps it).
func (f faultyFile) OSFile() *os.File {
	if of, ok := f.File.(interface{ OSFile() *os.File }); ok {
		return of.OSFile()
	}
	return nil
}

// Remove implements FS.
func (f *Faulty) Remove(name string) error { return f.inner.Remove(name) }

// Rename implements FS.
func (f *Faulty) Rename(oldpath, newpath string) error { return f.inner.Rename(oldpath, newpath) }

// ReadDir implements FS.
func (f *Faulty) ReadDir(name string) ([]os.DirEntry, error) { return f.inner.ReadDir(name) }

// MkdirAll implements FS.
func (f *Faulty) MkdirAll(path string, perm os.FileMode) error { return f.inner.MkdirAll(path, perm) }

// Stat implements FS.
func (f *Faulty) Stat(name string) (os.FileInfo, error) { return f.inner.Stat(name) }

// Allocate implements FS, failing with ENOSPC as configured.
func (f *Faulty) Allocate(file File, off, length int64) error {
	f.mu.Lock()
	f.allocs++
	fail := f.allocFull
	for i, n := range f.failAllocN {
		if n == f.allocs {
			fail = true
			f.failAllocN = append(f.failAllocN[:i], f.failAllocN[i+1:]...)
			break
		}
	}
	f.mu.Unlock()
	if fail {
		return &os.PathError{Op: "fallocate", Path: file.Name(), Err: syscall.ENOSPC}
	}
	return f.inner.Allocate(file, off, length)
}

// ZeroRange implements FS.
func (f *Faulty) ZeroRange(file File, off, length int64) error {
	return f.inner.ZeroRange(file, off, length)
}

// take uses up one of the failures a counter of f still holds and reports
// whether there was one.
func (f *Faulty) take(counter *int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *counter <= 0 {
		return false
	}
	*counter--
	return true
}

// Map implements FS, failing as configured.
func (f *Faulty) Map(file File, length int) (mmap.MMap, error) {
	if f.take(&f.failMap) {
		return nil, fmt.Errorf("mmap %s: %w", file.Name(), ErrInjected)
	}
	return f.inner.Map(file, length)
}

// FailSyncs makes the next n SyncMapped calls fail as a write-back error
// does (EIO), without syncing.
func (f *Faulty) FailSyncs(n int) {
	f.mu.Lock()
	f.failSync = n
	f.mu.Unlock()
}

// SyncMapped implements FS, failing as configured.
func (f *Faulty) SyncMapped(b []byte) error {
	if f.take(&f.failSync) {
		return fmt.Errorf("msync: %w (%w)", syscall.EIO, ErrInjected)
	}
	return f.inner.SyncMapped(b)
}

// Statfs implements FS, reporting the configured usage if one is set
// (SetUsageOf's for path, else SetUsage's).
func (f *Faulty) Statfs(path string) (DiskUsage, error) {
	f.mu.Lock()
	u := f.usage
	if pu, ok := f.usageOf[path]; ok {
		u = &pu
	}
	f.mu.Unlock()
	if u != nil {
		return *u, nil
	}
	return f.inner.Statfs(path)
}

// Lock implements FS.
func (f *Faulty) Lock(name string) (io.Closer, error) { return f.inner.Lock(name) }
