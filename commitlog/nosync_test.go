package commitlog

import (
	"os"

	"github.com/rocketkv/rocketkv/internal/vfs"
)

// noSyncFS is the OS file system with fsync and msync turned into no-ops.
// The recovery fuzz targets open a store or two per input, and what they
// check (what recovery keeps of the bytes laid out, what a reopen reads)
// does not depend on the data reaching the disk: the process never dies,
// a kill is simulated by copying files. With every sync waited for they
// ran a few inputs a second. The durability tests keep the real syncs.
type noSyncFS struct{ vfs.OS }

type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error { return nil }

// OSFile lets vfs.OS.Map reach the *os.File.
func (f noSyncFile) OSFile() *os.File {
	return f.File.(interface{ OSFile() *os.File }).OSFile()
}

func (fs noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := fs.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

func (noSyncFS) SyncMapped([]byte) error { return nil }

var _ vfs.FS = noSyncFS{}
