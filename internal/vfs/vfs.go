// Package vfs is the file-system seam of rocketkv's storage packages.
//
// Every file operation of the commitlog (and of other on-disk stores that
// want fault injection) goes through an [FS]. Production code uses [OS];
// tests wrap it with [Faulty] to make block allocation fail with ENOSPC,
// make mapping fail, or report an arbitrary disk usage, without root, loop
// devices or a full disk.
//
// The interface is deliberately small: what a preallocating, memory-mapped
// append-only log needs and nothing more.
package vfs

import (
	"errors"
	"io"
	"math/bits"
	"os"

	"github.com/edsrzf/mmap-go"
)

// File is an open file. The OS implementation wraps *os.File.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Name returns the path the file was opened with.
	Name() string
	// Stat returns the file's metadata.
	Stat() (os.FileInfo, error)
	// Truncate changes the size of the file.
	Truncate(size int64) error
	// Sync commits the file's contents and metadata to stable storage.
	Sync() error
	// Fd returns the file descriptor.
	Fd() uintptr
}

// DiskUsage describes the file system holding a path, as reported by statfs.
type DiskUsage struct {
	// Total is the size of the file system in bytes.
	Total uint64
	// Free is the number of bytes free (including those reserved for root).
	Free uint64
	// Avail is the number of bytes available to unprivileged users.
	Avail uint64
}

// UsedRatio returns the used share of the file system in whole percent
// (0..100) as RocketMQ's disk checks reckon it
// (UtilAll.getDiskPartitionSpaceUsedPercent): the bytes in use over those
// in use or available to unprivileged users, rounded up. The blocks
// reserved for root count as neither, so with ext4's 5 % reserve a disk
// whose users can write nothing more reads 100.
func (u DiskUsage) UsedRatio() float64 {
	if u.Free > u.Total {
		return 0
	}
	used := u.Total - u.Free
	entire := used + u.Avail
	if entire == 0 || entire < used {
		return 0
	}
	// used*100/entire is at most 100, so the 128-bit quotient fits.
	hi, lo := bits.Mul64(used, 100)
	q, r := bits.Div64(hi, lo, entire)
	if r != 0 {
		q++
	}
	return float64(q)
}

// FS is the file-system seam.
type FS interface {
	// OpenFile opens a file like os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename renames a file.
	Rename(oldpath, newpath string) error
	// ReadDir lists a directory, sorted by file name.
	ReadDir(name string) ([]os.DirEntry, error)
	// MkdirAll creates a directory and its parents.
	MkdirAll(path string, perm os.FileMode) error
	// Stat returns a file's metadata.
	Stat(name string) (os.FileInfo, error)
	// Allocate reserves disk blocks for [off, off+length) of f and extends
	// the file to at least off+length. After a successful Allocate, writes
	// through a mapping of that range cannot fail for lack of space (a
	// sparse mapping on a full disk raises SIGBUS instead of an error).
	// It fails with an error wrapping syscall.ENOSPC when the disk is full.
	Allocate(f File, off, length int64) error
	// ZeroRange makes [off, off+length) of f read as zeros while keeping the
	// blocks allocated. Mappings of the range see the zeros.
	ZeroRange(f File, off, length int64) error
	// Map maps the first length bytes of f shared and read-write.
	Map(f File, length int) (mmap.MMap, error)
	// SyncMapped writes the pages of b, a range of a mapping Map returned,
	// to stable storage (msync with MS_SYNC, on Linux a ranged
	// fdatasync), and reports a write-back error the kernel met since the
	// last sync of the file.
	SyncMapped(b []byte) error
	// Statfs reports the usage of the file system holding path.
	Statfs(path string) (DiskUsage, error)
	// Lock creates (if needed) and exclusively locks the file name with an
	// advisory lock that is released when the process dies. It fails with
	// ErrLocked if another holder has it. Closing the result unlocks.
	Lock(name string) (io.Closer, error)
}

// ErrLocked is returned by FS.Lock when the file is locked by another
// holder (another process, or another open of the same store in this one).
var ErrLocked = errors.New("vfs: file is locked by another holder")
