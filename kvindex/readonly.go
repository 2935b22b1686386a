package kvindex

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// errReadOnlyFS is returned by readOnlyFS for every operation that would
// change the directory.
var errReadOnlyFS = errors.New("kvindex: read-only open must not modify the database directory")

// readOnlyFS is the file system of read-only opens (Options.ReadOnly
// without Options.FS). It lets Pebble read and refuses anything that
// writes, so an inspection can never change a store, and it replaces
// Pebble's lock with one that creates and changes nothing:
//
// Pebble's writer holds a POSIX write lock (fcntl F_SETLK) on the
// database's LOCK file, taken with os.Create, which would truncate the file
// and bump its mtime. readOnlyFS instead opens LOCK read-only and takes an
// open-file-description read lock (F_OFD_SETLK, F_RDLCK). OFD locks
// conflict with POSIX locks even inside one process, so the read lock
// fails (ErrLocked) while a broker holds the database, and a broker cannot
// open the database while a reader holds it. Several readers may share it.
// A directory without a LOCK file (a Pebble checkpoint) is opened without
// locking.
type readOnlyFS struct {
	vfs.FS
}

// Create implements vfs.FS by refusing.
func (readOnlyFS) Create(name string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, fmt.Errorf("create %s: %w", name, errReadOnlyFS)
}

// Link implements vfs.FS by refusing.
func (readOnlyFS) Link(oldname, newname string) error {
	return fmt.Errorf("link %s to %s: %w", oldname, newname, errReadOnlyFS)
}

// OpenReadWrite implements vfs.FS by refusing.
func (readOnlyFS) OpenReadWrite(name string, _ vfs.DiskWriteCategory, _ ...vfs.OpenOption) (vfs.File, error) {
	return nil, fmt.Errorf("open %s for writing: %w", name, errReadOnlyFS)
}

// Remove implements vfs.FS by refusing.
func (readOnlyFS) Remove(name string) error {
	return fmt.Errorf("remove %s: %w", name, errReadOnlyFS)
}

// RemoveAll implements vfs.FS by refusing.
func (readOnlyFS) RemoveAll(name string) error {
	return fmt.Errorf("remove %s: %w", name, errReadOnlyFS)
}

// Rename implements vfs.FS by refusing.
func (readOnlyFS) Rename(oldname, newname string) error {
	return fmt.Errorf("rename %s to %s: %w", oldname, newname, errReadOnlyFS)
}

// ReuseForWrite implements vfs.FS by refusing.
func (readOnlyFS) ReuseForWrite(oldname, newname string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, fmt.Errorf("reuse %s as %s: %w", oldname, newname, errReadOnlyFS)
}

// MkdirAll implements vfs.FS by refusing.
func (readOnlyFS) MkdirAll(dir string, _ os.FileMode) error {
	return fmt.Errorf("create directory %s: %w", dir, errReadOnlyFS)
}

// Lock implements vfs.FS with a shared OFD lock on an existing LOCK file;
// see readOnlyFS.
func (readOnlyFS) Lock(name string) (io.Closer, error) {
	// POSIX locks belong to the process: closing any descriptor of LOCK
	// would release a write lock this very process holds (a writer open
	// in the same process), so such a lock is detected without opening
	// the file.
	held, err := heldByThisProcess(name)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if held {
		return nil, fmt.Errorf("lock %s: held by a writer in this process: %w", name, ErrLocked)
	}
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nopCloser{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", name, err)
	}
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart}
	for {
		err = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("lock %s: %w", name, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	// Closing the only descriptor of the open file description releases
	// the OFD lock.
	return f, nil
}

// heldByThisProcess reports whether this process holds a POSIX (fcntl)
// lock on the file name, as Pebble's writer holds on LOCK, by looking for
// it in /proc/locks. It reports false when the file or /proc/locks does
// not exist.
func heldByThisProcess(name string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Stat(name, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false, nil
	}
	// Lines read "1: POSIX  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF";
	// waiters have "->" after the number and are skipped.
	file := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	pid := strconv.Itoa(os.Getpid())
	for _, line := range strings.Split(string(locks), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "POSIX" && f[4] == pid && f[5] == file {
			return true, nil
		}
	}
	return false, nil
}

// Unwrap implements vfs.FS.
func (fs readOnlyFS) Unwrap() vfs.FS { return fs.FS }

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
