// Package atomicfile replaces small files so that a crash leaves either the
// old content or the new, never a mix or an empty file.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WriteFile writes data to a temporary file in path's directory, syncs it,
// renames it over path with permissions perm and syncs the directory so
// the rename itself is durable.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create a temporary file beside %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s to sync the rename of %s: %w", dir, filepath.Base(path), err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s after replacing %s: %w", dir, filepath.Base(path), err)
	}
	removeStale(dir, filepath.Base(path), time.Now().Add(-staleAfter))
	return nil
}

// staleAfter is the age past which a temporary file of a path is taken
// for one a crashed write left: no write takes that long, so removing it
// cannot pull the file from under a write in flight.
const staleAfter = 10 * time.Minute

// removeStale removes the temporary files of base in dir that are older
// than before: what writes cut by a crash left behind (each one a whole
// copy of the file). Failures are ignored; the next write tries again.
// It lists dir: the files written this way (configuration, kvConfig, ACL
// files) are rare writes in small directories.
func removeStale(dir, base string, before time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := "." + base + ".tmp-"
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(before) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// ReplaceKeepingBackup replaces path's content with data as RocketMQ's
// MixAll.string2File keeps its files: the content it replaces goes to
// path+".bak" first (nothing when path does not exist), then data to
// path, each written with WriteFile, so a crash leaves whole files.
func ReplaceKeepingBackup(path string, data []byte, perm os.FileMode) error {
	old, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read %s to keep it as its backup: %w", path, err)
	default:
		if err := WriteFile(path+".bak", old, perm); err != nil {
			return err
		}
	}
	return WriteFile(path, data, perm)
}
