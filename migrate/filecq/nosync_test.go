package filecq_test

import (
	"os"

	"github.com/rocketkv/rocketkv/internal/vfs"
)

// noSyncFS is the OS file system with fsync turned into a no-op: the suite
// reopens stores hundreds of times, and what it checks does not depend on
// the data reaching the disk (the process never dies). The byte-level and
// resource tests keep the real fsync.
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

var _ vfs.FS = noSyncFS{}
