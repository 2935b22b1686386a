package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/edsrzf/mmap-go"
	"golang.org/x/sys/unix"
)

// OS is the FS of the operating system (Linux). Its zero value is ready.
type OS struct{}

var _ FS = OS{}

type osFile struct{ *os.File }

// OpenFile implements FS.
func (OS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Remove implements FS.
func (OS) Remove(name string) error { return os.Remove(name) }

// Rename implements FS.
func (OS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// ReadDir implements FS.
func (OS) ReadDir(name string) ([]os.DirEntry, error) { return os.ReadDir(name) }

// MkdirAll implements FS.
func (OS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }

// Stat implements FS.
func (OS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

// Allocate implements FS with fallocate(2) mode 0. On file systems without
// fallocate it falls back to writing zeros into the range (which allocates
// the blocks just as well, only slower).
func (OS) Allocate(f File, off, length int64) error {
	if length <= 0 {
		return nil
	}
	for {
		err := unix.Fallocate(int(f.Fd()), 0, off, length)
		if err == nil {
			return nil
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
			return writeZeros(f, off, length)
		}
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
}

// ZeroRange implements FS with fallocate(FALLOC_FL_ZERO_RANGE), falling back
// to writing zeros where the file system lacks it.
func (OS) ZeroRange(f File, off, length int64) error {
	if length <= 0 {
		return nil
	}
	for {
		err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, length)
		if err == nil {
			return nil
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
			return writeZeros(f, off, length)
		}
		return &os.PathError{Op: "fallocate zero range", Path: f.Name(), Err: err}
	}
}

func writeZeros(f File, off, length int64) error {
	buf := make([]byte, min(length, 1<<20))
	for length > 0 {
		n := min(length, int64(len(buf)))
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return err
		}
		off += n
		length -= n
	}
	return nil
}

// Map implements FS with mmap-go. f must come from OS.OpenFile (or a
// wrapper exposing the *os.File through an OSFile method).
func (OS) Map(f File, length int) (mmap.MMap, error) {
	of, ok := f.(interface{ OSFile() *os.File })
	if !ok || of.OSFile() == nil {
		return nil, fmt.Errorf("map %s: not an OS file", f.Name())
	}
	m, err := mmap.MapRegion(of.OSFile(), length, mmap.RDWR, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	return m, nil
}

// SyncMapped implements FS with msync(MS_SYNC).
func (OS) SyncMapped(b []byte) error {
	if err := unix.Msync(b, unix.MS_SYNC); err != nil {
		return &os.PathError{Op: "msync", Path: "mapping", Err: err}
	}
	return nil
}

// OSFile returns the underlying *os.File.
func (f osFile) OSFile() *os.File { return f.File }

// Statfs implements FS.
func (OS) Statfs(path string) (DiskUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return DiskUsage{}, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	bs := uint64(st.Bsize)
	return DiskUsage{Total: st.Blocks * bs, Free: st.Bfree * bs, Avail: st.Bavail * bs}, nil
}

type flockHolder struct{ f *os.File }

func (h flockHolder) Close() error {
	uerr := unix.Flock(int(h.f.Fd()), unix.LOCK_UN)
	cerr := h.f.Close()
	return errors.Join(uerr, cerr)
}

// Lock implements FS with flock(2) LOCK_EX|LOCK_NB. flock locks belong to
// the open file description, so a second Lock of the same file in the same
// process fails too.
func (OS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", name, ErrLocked)
		}
		return nil, &os.PathError{Op: "flock", Path: name, Err: err}
	}
	return flockHolder{f}, nil
}
