package vfs

import "os"

// NoSync is the OS file system with fsync and msync turned into no-ops,
// for tests and fuzz targets that reopen stores many times and check
// nothing that depends on data reaching the disk (the process never
// dies; a kill is simulated by copying files). Durability tests keep OS.
type NoSync struct{ OS }

var _ FS = NoSync{}

type noSyncFile struct{ File }

// Sync implements File as a no-op.
func (noSyncFile) Sync() error { return nil }

// OSFile lets OS.Map reach the *os.File.
func (f noSyncFile) OSFile() *os.File {
	return f.File.(interface{ OSFile() *os.File }).OSFile()
}

// OpenFile implements FS: OS's file, whose Sync does nothing.
func (fs NoSync) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := fs.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

// SyncMapped implements FS as a no-op.
func (NoSync) SyncMapped([]byte) error { return nil }
